"""gpt2viz.output_files on its own: the signals a write holds, and names that lead to stdout."""

from __future__ import annotations

import os
import signal

from gpt2viz.output_files import names_standard_output, signals_held


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


def test_names_that_lead_to_stdout_are_stdout(tmp_path):
    saved = os.dup(1)
    log = tmp_path / "app.log"
    try:
        with open(log, "ab") as f:
            os.dup2(f.fileno(), 1)
        assert names_standard_output("-") and names_standard_output("/dev/stdout")
        assert names_standard_output(str(log))  # the file stdout goes to, under any name
        assert not names_standard_output(str(tmp_path / "other.json")) and not names_standard_output(str(tmp_path))
    finally:
        os.dup2(saved, 1)
        os.close(saved)
