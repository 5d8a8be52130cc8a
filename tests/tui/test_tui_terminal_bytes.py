"""What the terminal sends that is not UTF-8, and a failure of the key reader itself, in a real
terminal (a pseudo-terminal, Textual's own driver): a crash walk pressed é in a Latin-1 way (byte
0xe9) and pasted a byte 0x9b, and Textual 8.2.8's key thread raised UnicodeDecodeError, which
ended the app with a traceback and exit status 0."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from textual.drivers import linux_driver

import gpt2viz.tui.textual_compat  # noqa: F401  # what the app installs on Textual
from helpers import state_home
from tui_helpers import TINY_TRACE

ALT_SCREEN = b"\x1b[?1049h"  # the app has taken the terminal
LEFT_SCREEN = "\x1b[?1049l"  # it has given it back
ESCAPES = re.compile(r"\x1b(\[[0-9;?<>=$]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\))")


def after_the_app(err: str) -> str:
    """What was written to stderr once the app gave the terminal back (Textual draws on stderr):
    the lines a person reads in the shell afterwards, escape sequences left out."""
    assert LEFT_SCREEN in err, err[-500:]
    return ESCAPES.sub("", err.rsplit(LEFT_SCREEN, 1)[1])


def run_in_terminal(tmp_path: Path, keys: list[bytes], prelude: str = "") -> tuple[int, str, bytes]:
    """`gpt2viz --replay` of the bundled trace in a pseudo-terminal, sent `keys` (each a read of
    its own) once it has taken the screen: its exit status, stderr and what it drew."""
    import pty

    main, child = pty.openpty()
    script = prelude + "\nimport sys\nfrom gpt2viz.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    env = {**os.environ, "XDG_STATE_HOME": str(state_home(tmp_path / "state")), "TERM": "xterm-256color",
           "LANG": "C.UTF-8"}
    proc = subprocess.Popen([sys.executable, "-c", script, "--replay", str(TINY_TRACE)], stdin=child, stdout=child,
                            stderr=subprocess.PIPE, env=env)
    os.close(child)
    drawn, said = bytearray(), bytearray()  # the terminal's output; stderr, where Textual draws

    def drain(read, into: bytearray) -> None:
        while True:
            try:
                data = read()
            except OSError:  # the child has gone: the terminal's other end is closed
                return
            if not data:
                return
            into.extend(data)

    readers = [threading.Thread(target=drain, args=(lambda: os.read(main, 65536), drawn), daemon=True),
               threading.Thread(target=drain, args=(lambda: os.read(proc.stderr.fileno(), 65536), said), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        deadline = time.monotonic() + 60
        while ALT_SCREEN not in said and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # the first screen drawn and the key reader running
        for key in keys:
            os.write(main, key)
            time.sleep(0.2)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        for reader in readers:
            reader.join(timeout=5)
        os.close(main)
    return proc.returncode, said.decode("utf-8", "replace"), bytes(drawn)


def test_the_key_reader_reads_a_byte_that_is_not_utf8_as_a_replacement_character():
    decode = linux_driver.getincrementaldecoder("utf-8")().decode
    assert decode(b"a\xe9b\x9b", final=False) == "a\ufffdb\ufffd"


def test_a_latin1_key_and_a_stray_byte_leave_the_app_running(tmp_path):
    code, err, drawn = run_in_terminal(tmp_path, [b"\xe9", b"l", b"\x9b", b"\x1b[200~caf\xe9\x1b[201~", b"q"])
    assert code == 0, err[-500:]
    assert "Traceback" not in err and b"Traceback" not in drawn and b"UnicodeDecodeError" not in drawn
    assert after_the_app(err) == ""


def test_a_failure_of_the_key_reader_ends_the_app_in_one_line_and_exit_1(tmp_path):
    prelude = (
        "from gpt2viz.tui import textual_compat\n"
        "from textual.drivers import linux_driver\n"
        "def broken(self):\n"
        "    raise RuntimeError('the key reader broke')\n"
        "linux_driver.LinuxDriver.run_input_thread = broken\n"
    )
    code, err, drawn = run_in_terminal(tmp_path, [], prelude)
    assert code == 1
    said = after_the_app(err)
    assert said.count("\n") == 1 and "Traceback" not in err and b"Traceback" not in drawn
    assert said.startswith("gpt2viz: error: unexpected error, a bug in gpt2viz: RuntimeError: the key reader broke"), said
