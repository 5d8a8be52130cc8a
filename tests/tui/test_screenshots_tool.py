"""tools/screenshots.py, which draws README's pictures, still gets through a first start: it had
stopped at the lesson menu offered there, and README's pictures aged unnoticed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "screenshots.py"


@pytest.mark.slow  # ten screens of the bundled model at 120 x 40 (1-3 s)
def test_the_screenshots_tool_draws_every_picture_on_a_first_start(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # empty: a first start, the menu offered
    spec = importlib.util.spec_from_file_location("screenshots_tool", TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.main(["--out", str(tmp_path / "out")]) == 0
    written = sorted(p.name for p in (tmp_path / "out").glob("*.svg"))
    assert written == sorted(f"{name}.svg" for name in tool.SHOTS)
    pattern = (tmp_path / "out" / "04-attention-pattern.svg").read_text(encoding="utf-8")
    assert "Attention&#160;pattern" in pattern or "Attention pattern" in pattern
    # The tool said "not now" to the menu: the learner's choice is left as it was (none).
    assert not (tmp_path / "state" / "gpt2viz" / "lessons.json").exists()
