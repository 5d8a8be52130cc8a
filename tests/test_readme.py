"""README's "As a library" example runs as written (on the bundled model)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_library_example_runs(capsys):
    section = README.read_text("utf-8").split("## As a library", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "blocks.0.attn.hook_pattern" in out  # the observing subscriber ran
    assert re.search(r"^\[\d+(, \d+){7}\]$", out, re.M)  # 8 ids generated with the ablations on
