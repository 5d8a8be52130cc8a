"""Ctrl-C at any moment of start-up is one line and exit status 130, never a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

LINE = "gpt2viz: interrupted; nothing was written"


def _interrupt_while_loading(child: subprocess.Popen, after: float) -> None:
    """Ctrl-C `after` seconds past the moment the child started mapping torch's library, that is,
    from inside its imports on. (Before gpt2viz's first line runs, Python itself is starting; a
    fixed delay from launch lands there on a busy machine and tests nothing of ours.)"""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None:
        try:
            with open(f"/proc/{child.pid}/maps") as maps:
                if "libtorch_cpu" in maps.read():
                    break
        except OSError:
            pass
        time.sleep(0.005)
    time.sleep(after)
    child.send_signal(signal.SIGINT)


@pytest.mark.parametrize("delay", [0.0, 0.3, 0.8, 1.5])
def test_ctrl_c_while_starting_is_one_line_and_130(tmp_path, delay):
    """While Python loads torch and the rest (the first second or so), then while the model loads
    and runs: the same line, the same status, and no trace file left."""
    out = tmp_path / "t.json"
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    child = subprocess.Popen(
        [sys.executable, "-m", "gpt2viz", "--model", "tiny", "--json", str(out), "--generate", "200", "--cost-lab"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
    )
    _interrupt_while_loading(child, delay)
    _out, err = child.communicate(timeout=120)
    assert child.returncode == 130, err
    assert err.strip() == LINE, err
    assert not out.exists()


def test_the_line_is_in_the_language_asked_for(tmp_path):
    child = subprocess.Popen(
        [sys.executable, "-m", "gpt2viz", "--lang", "zh", "--model", "tiny", "--json", str(tmp_path / "t.json")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    _interrupt_while_loading(child, 0.0)
    _out, err = child.communicate(timeout=120)
    assert child.returncode == 130 and len(err.strip().splitlines()) == 1 and "gpt2viz: " in err and "interrupted" not in err


def test_importing_the_package_loads_no_library():
    """What makes the above possible: `import gpt2viz` alone is light; its API loads on first use."""
    code = "import sys, gpt2viz; assert 'torch' not in sys.modules; gpt2viz.load_model; assert 'torch' in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120).returncode == 0


def test_ctrl_c_twice_is_still_one_line_and_130(tmp_path):
    """Two Ctrl-C 10 ms apart while generating: the second used to land while the first was being
    said, and printed a traceback (a careless-use walk). (While loading, start-up's own handler
    leaves at the first: the test above.)"""
    delay = 1.5
    out = tmp_path / "t.json"
    child = subprocess.Popen(
        [sys.executable, "-m", "gpt2viz", "--model", "tiny", "--json", str(out), "--generate", "500"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "LC_ALL": "C.UTF-8"}, text=True,
    )
    _interrupt_while_loading(child, delay)
    time.sleep(0.01)
    child.send_signal(signal.SIGINT)
    _out, err = child.communicate(timeout=120)
    assert child.returncode == 130 and err.strip() == LINE, err
    assert not out.exists()


def test_a_run_started_with_ctrl_c_ignored_keeps_ignoring_it(tmp_path):
    """A background job of a script starts with SIGINT ignored; gpt2viz ignored that only while
    loading its libraries, and stopped on an interrupt meant for the script."""
    out = tmp_path / "t.json"
    child = subprocess.Popen(
        [sys.executable, "-m", "gpt2viz", "--model", "tiny", "--json", str(out), "--generate", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    _interrupt_while_loading(child, 0.0)
    _out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    assert out.stat().st_size > 0


def test_a_trace_to_dev_stdout_goes_through_stdout_as_the_shell_opened_it(tmp_path):
    """`{ ...; gpt2viz ... --json /dev/stdout; } >> app.log` replaced app.log with the trace alone:
    /dev/stdout led to the log file, renamed over. Now the trace is appended, as `>>` asks."""
    log = tmp_path / "app.log"
    log.write_text("log line 1\nlog line 2\n")
    with open(log, "ab") as stdout:
        done = subprocess.run([sys.executable, "-m", "gpt2viz", "Hi", "--model", "tiny", "--json", "/dev/stdout",
                               "--generate", "1"], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    text = log.read_text()
    assert text.startswith("log line 1\nlog line 2\n{") and '"schema":"gpt2viz.trace/2"' in text
    assert "wrote the trace to stdout" in done.stderr
