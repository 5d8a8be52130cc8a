"""A fresh install has no numpy (nothing gpt2viz installs needs it); the terminal stays quiet."""

from __future__ import annotations

import subprocess
import sys

# numpy blocked from import, as in a venv made with README's first command.
WITHOUT_NUMPY = "import sys; sys.modules['numpy'] = None; from gpt2viz.cli import main; sys.exit(main(sys.argv[1:]))"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_NUMPY, *args], capture_output=True, text=True, timeout=120)


def test_help_and_a_trace_print_only_gpt2viz_lines_without_numpy(tmp_path):
    helped = run("--help")
    assert helped.returncode == 0 and helped.stderr == ""
    traced = run("--model", "tiny", "--json", str(tmp_path / "t.json"), "--generate", "3")
    assert traced.returncode == 0
    assert [line for line in traced.stderr.splitlines() if not line.startswith("gpt2viz: ")] == []
    # The check has teeth: torch itself does warn in this setting.
    bare = subprocess.run([sys.executable, "-c", "import sys; sys.modules['numpy'] = None; import torch"],
                          capture_output=True, text=True, timeout=120)
    assert "Failed to initialize NumPy" in bare.stderr
