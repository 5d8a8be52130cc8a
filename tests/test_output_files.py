"""gpt2viz.output_files on its own: the signals a write holds, and names that lead to stdout."""

from __future__ import annotations

import os
import signal
import sys

from gpt2viz.output_files import check_output, names_standard_output, signals_held


def test_a_closed_terminal_waits_for_the_file_to_be_whole(monkeypatch):
    """SIGHUP (a closed terminal, a dropped ssh connection) killed a run mid-write, leaving a
    temporary file or a file of several names cut short; it now waits as Ctrl-C and a kill do."""
    arrived: list[str] = []
    previous = signal.signal(signal.SIGHUP, lambda signum, frame: arrived.append("hup"))
    try:
        with signals_held():
            os.kill(os.getpid(), signal.SIGHUP)
            arrived.append("written")
        assert arrived == ["written", "hup"]
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_names_that_lead_to_stdout_are_stdout(tmp_path, monkeypatch):
    saved = os.dup(1)
    log = tmp_path / "app.log"
    try:
        with open(log, "ab") as f:
            os.dup2(f.fileno(), 1)
        monkeypatch.setattr(sys, "stdout", open(1, "w", closefd=False))  # stdout as a process has it
        assert names_standard_output("-") and names_standard_output("/dev/stdout")
        assert names_standard_output(str(log))  # the file stdout goes to, under any name
        assert not names_standard_output(str(tmp_path / "other.json")) and not names_standard_output(str(tmp_path))
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def test_a_trace_dumped_to_dev_stdout_goes_into_the_pipe_stdout_is(monkeypatch):
    """The library's dump to /dev/stdout into a pipe went looking for a file beside
    /proc/<pid>/fd/pipe:[...] ('cannot write there'): the check and the write read such a name
    alike now, as standard output (the CLI turned the name into '-' first, the library did not)."""
    import threading
    from pathlib import Path

    from gpt2viz.trace import dump, load

    trace = load(Path(__file__).resolve().parent / "data" / "tiny-trace.json")
    saved = os.dup(1)
    read_end, write_end = os.pipe()
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.extend(iter(lambda: os.read(read_end, 65536), b"")))
    reader.start()
    try:
        os.dup2(write_end, 1)
        os.close(write_end)
        monkeypatch.setattr(sys, "stdout", open(1, "w", closefd=False))  # stdout as a process has it, not pytest's capture
        check_output("/dev/stdout")
        dump(trace, "/dev/stdout")
    finally:
        os.dup2(saved, 1)  # the pipe's last writer gone: the reader sees its end
        os.close(saved)
        reader.join(timeout=30)
        os.close(read_end)
    assert b"".join(received).startswith(b'{"schema":"gpt2viz.trace/')
