"""The loading screen in Chinese and through a live switch, and the replay of a trace written
before notices had codes."""

from __future__ import annotations

import json
import re

import pytest

from tui_helpers import TINY_TRACE, run_async, screen_text, stage_text
from gpt2viz.cli import parse_args
from gpt2viz.i18n import set_language
from gpt2viz.options import DEFAULT_PROMPT
from gpt2viz.trace import load
from gpt2viz.tui.app import make_app
from gpt2viz.tui.language import key_name
from gpt2viz.tui.screens.loading import LoadingScreen
from gpt2viz.tui.screens.step import StepScreen
from zh_words import english_words


def words_of(*texts: str) -> set[str]:
    """The words of `texts` as english_words reads them."""
    return {w.lower() for text in texts for w in re.findall(r"[A-Za-z][A-Za-z0-9_'\-]*", text)}


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
@run_async
async def test_a_failed_load_in_chinese_then_in_english(tmp_path, size):
    missing = tmp_path / "missing"
    set_language("zh")
    app = make_app(options=parse_args(["--model", str(missing), "--lang", "zh"]))
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, LoadingScreen)
        quit_key = key_name(app.screen, "quit")
        text = screen_text(app)
        assert "加载失败。" in text and f"按 {quit_key} 退出。" in text and "没有这个目录" in text
        assert "模型  " in text and "提示词" in text
        # The path and the prompt as given, and the switch key's label: the other language's name.
        assert english_words(text, words_of(str(missing), DEFAULT_PROMPT, "English")) == [], text
        await pilot.press("L")
        await pilot.pause()
        english = screen_text(app)
        assert "Loading failed." in english and f"Press {quit_key} to quit." in english
        assert "model   " in english and 'prompt  "The meaning of life is"' in english
        # The error was said when it happened, in the language of that moment.
        assert "没有这个目录" in english
        await pilot.press("q")
    assert app.return_code == 1


@run_async
async def test_the_replay_of_a_trace_of_the_old_format_shows_its_notice_as_written(tmp_path):
    doc = json.loads(TINY_TRACE.read_text(encoding="utf-8"))
    assert doc["schema"] == "gpt2viz.trace/1"
    doc["notices"] = ["the prompt is empty, so the model starts from <|endoftext|> (id 50256)"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    set_language("zh")
    app = make_app(trace=load(path), options=parse_args(["--replay", str(path), "--lang", "zh"]))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, StepScreen)
        text = " ".join(stage_text(app).split())
        assert "the prompt is empty, so the model starts from <|endoftext|> (id 50256)" in text
