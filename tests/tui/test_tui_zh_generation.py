"""The generation view and its settings form in Chinese: a replayed generation, a live one on the
tiny model, the comparison, and the live switch between languages while tokens stream in."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from rich.cells import cell_len
from textual.widgets import Button, Static

from gpt2viz.generate import SamplingSettings
from gpt2viz.i18n import language
from gpt2viz.i18n.layout import NO_LINE_START
from gpt2viz.trace import load
from gpt2viz.tui.app import make_app
from gpt2viz.tui.screens.generation import GenerationScreen
from gpt2viz.tui.screens.generation_settings import SettingsScreen
from gpt2viz.tui.widgets.generation_panels import Panel, StatusLine
from gpt2viz.tui.widgets.strip_widget import Prose
from gpt2viz.tui.widgets.laid import Laid
from test_i18n_generation import allowed_words, numbers, with_settings
from test_tui_generation import finished, gate, live_app, open_generation, text_of, wait_for  # noqa: F401 (gate: a fixture)
from test_tui_snapshots import show_a_comparison
from tui_helpers import GENERATION_TRACE, panel_text, run_async, screen_text
from zh_words import english_words

SIZES = [(80, 24), (120, 40)]
SWITCH = {"english"}  # the footer's language key names the other language in its own words


def view_text(screen: GenerationScreen) -> str:
    """What the generation view says: the status line, and each panel's titles and whole content
    (also what is scrolled out of sight)."""
    parts = [screen.query_one(StatusLine).content.plain]
    for panel in screen.query(Panel):
        parts += [str(panel.border_title or ""), str(panel.border_subtitle or ""), panel_text(screen, f"#{panel.id}")]
    return "\n".join(parts)


def form_text(app) -> str:
    """The settings form as shown: what lies inside its thick border (the view shows around it)."""
    lines = [line for line in screen_text(app).splitlines() if line.count("█") >= 2]
    return "\n".join(line[line.index("█") + 1 : line.rindex("█")] for line in lines)


def form_content(form: SettingsScreen) -> str:
    """Every text of the settings form, also what is scrolled out of sight."""
    texts = [str(button.label) for button in form.query(Button)]
    texts += [getattr(static.content, "plain", str(static.content)) for static in [*form.query(Static), *form.query(Laid)]]
    return "\n".join(texts)


async def in_both(app, pilot, screen: GenerationScreen) -> tuple[str, str]:
    """The view's text in English, then switched live to Chinese (switched back to English after)."""
    english = view_text(screen)
    app.switch_language("zh")
    await pilot.pause()
    await pilot.pause()  # the panels' "more below" hints follow once the new text is laid out
    chinese = view_text(screen)
    app.switch_language("en")
    await pilot.pause()
    await pilot.pause()
    return english, chinese


def assert_chinese(chinese: str, english: str, allowed: set[str]) -> None:
    assert english_words(chinese, allowed) == [], chinese
    assert numbers(chinese) == numbers(english), (english, chinese)


@pytest.mark.parametrize("size", [
    pytest.param((80, 24), id="80x24"),
    pytest.param((120, 40), id="120x40", marks=pytest.mark.slow),  # the same panels, wider
])
@run_async
async def test_every_panel_of_a_replayed_generation_in_chinese(size):
    """Steps of the recorded generation (the prompt's, the first decode step, the last), then the
    same steps as sampled without the cache, then as the cached run of a comparison: no English,
    the numbers of the English view. The steps between show the same panels with other numbers."""
    trace = load(GENERATION_TRACE)
    app = make_app(trace=trace)
    async with app.run_test(size=size) as pilot:
        screen = await open_generation(app, pilot)
        recorded = screen.gen
        allowed = allowed_words(trace, recorded)
        sampled = with_settings(recorded, SamplingSettings(1.5, 40, 0.9, None), use_cache=False)
        for gen in (recorded, sampled):
            screen.gen = gen
            for step in sorted({0, 1, len(gen.steps) - 1}):
                screen._select(step)
                await pilot.pause()
                english, chinese = await in_both(app, pilot, screen)
                assert_chinese(chinese, english, allowed)
        screen.gen = recorded
        show_a_comparison(screen)
        await pilot.pause()
        english, chinese = await in_both(app, pilot, screen)
        assert "ids identical ✓ all 12, with and without the cache" in english
        assert "ids 一致 ✓ 全部 12 个" in chinese
        assert_chinese(chinese, english, allowed)
        app.switch_language("zh")
        await pilot.pause()
        assert english_words(screen_text(app), allowed | SWITCH) == [], screen_text(app)  # the top bar and footer too
        running = replace(screen.state, gen=screen.comparison.naive, comparison=None, running=True)
        screen.query_one(StatusLine).draw(running, "comparing", False)  # as while the first run goes
        await pilot.pause()
        assert "● 对比中 无缓存：12 / 12 个 token" in screen_text(app)
        # Every state of the status line is one sentence: no English spaces between Chinese words.
        stopped = replace(recorded, stop_reason="cancelled", settings=replace(recorded.settings, max_new_tokens=20))
        states = [
            (replace(screen.state, gen=stopped, comparison=None, selected=3), "idle"),
            (replace(screen.state, gen=replace(recorded, steps=[], stop_reason=None, settings=replace(recorded.settings, max_new_tokens=0)), comparison=None), "idle"),
            (screen.state, "idle"),
        ]
        said = []
        for state, phase in states:
            screen.query_one(StatusLine).draw(state, phase, True)
            said.append(screen.query_one(StatusLine).content.plain)
            assert not re.search(r"[\u4e00-\u9fff，。：] [\u4e00-\u9fff]", said[-1]), said[-1]
            assert english_words(said[-1], allowed) == [], said[-1]
        assert said[0].startswith("■ 已停止，已生成 12 / 20 个 token。按 ␣ 接着生成。  · ")
        assert said[1].startswith("○ 未开始：要求生成 0 个新 token。按 s 设置数量。")
        # The panels' paragraphs are Prose: lines broken between characters, none starting with a closing mark.
        for prose in screen.query(Prose):
            width = prose.size.width
            for line in (strip.text.rstrip() for strip in prose.lines(width)):
                assert cell_len(line) <= width and line[:1] not in NO_LINE_START, (prose.id, line)


@run_async
async def test_a_live_sampled_generation_and_its_comparison_in_chinese(ckpts):
    sampling = ["--temperature", "1.5", "--top-k", "50", "--top-p", "0.9", "--seed", "3"]
    app = live_app(ckpts, "--lang", "zh", "--generate", "6", *sampling)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        allowed = allowed_words(screen.trace, screen.gen)
        text = view_text(screen)
        assert "第 5 步 · decode" in text and "采样：logits 先除以温度 1.5（更平坦）" in text
        assert english_words(text, allowed) == [] and english_words(screen_text(app), allowed | SWITCH) == [], text
        await pilot.press("c")
        await wait_for(pilot, lambda: screen.comparison is not None, what="the comparison")
        await pilot.pause()
        allowed |= allowed_words(screen.trace, screen.comparison.naive, screen.comparison.cached)
        text = view_text(screen)
        assert "ids 一致 ✓" in text and "两次运行选出了相同的 6 个 id（采样用的是同一个种子 3）。" in text
        assert english_words(text, allowed) == [] and english_words(screen_text(app), allowed | SWITCH) == [], text


@run_async
async def test_the_live_switch_keeps_a_running_generation(ckpts, gate):
    """Mid-stream, L redraws the words and nothing else: the same tokens, still running, and the
    run goes on to the end in the new language."""
    app = live_app(ckpts, "--generate", "30")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_generation(app, pilot)
        await wait_for(pilot, lambda: len(screen.gen.steps) == 3, what="three tokens")
        await wait_for(pilot, lambda: "● generating 3 of 30 tokens" in screen_text(app), timeout=2, what="the redraw")
        gen, ids, shown = screen.gen, list(screen.gen.ids), text_of(screen)
        await pilot.press("L")
        await pilot.pause()
        assert language() == "zh" and screen.running and screen.gen is gen and gen.ids == ids
        assert text_of(screen) == shown  # the text is the model's, in no language
        assert "● 生成中 3 / 30 个 token" in screen_text(app) and "␣ 停止" in screen_text(app)
        gate.release()
        await finished(pilot, screen)
        assert screen.gen is gen and gen.ids[:3] == ids and len(gen.ids) == 30
        assert "✓ 完成 生成了 30 个新 token，正是要求的数量。" in screen_text(app) and "第 29 步 · decode" in screen_text(app)
        await pilot.press("L")
        await pilot.pause()
        assert "✓ done 30 new tokens, as many as asked." in screen_text(app) and "Step 29 · decode" in screen_text(app)
        assert screen.gen is gen and len(gen.ids) == 30


@run_async
async def test_the_settings_form_in_chinese_and_switched_live(ckpts):
    app = live_app(ckpts, "--lang", "zh", "--generate", "2")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SettingsScreen))
        form = app.screen
        await pilot.pause()
        text = form_text(app)
        assert "生成设置" in text and "新 token 数" in text and "温度" in text and "⏎：生成   esc：取消" in text
        assert english_words(text, allowed_words(screen.trace, screen.gen) | SWITCH) == [], text
        form.query_one("#sampling").value = True
        await pilot.pause()
        form.query_one("#top-k").value = "0"
        form.query_one("#seed").value = "q"
        form.apply()
        await pilot.pause()
        text = form_content(form)
        assert app.screen is form and "top-k 必须是 >= 1 的整数，实际为 0" in text and "开：随机抽取 token" in text
        assert english_words(text, allowed_words(screen.trace, screen.gen) | SWITCH | {"q"}) == [], text
        app.action_switch_language()  # as L does (test_tui_layout_fits presses it): back to English
        await pilot.pause()
        text = form_content(form)
        assert "Generation settings" in text and "on: the token is drawn at random" in text and "⏎: generate" in text
        assert "top-k must be an integer >= 1, got 0" in text and "seed must be an integer, got 'q'" in text
        assert form.query_one("#top-k").value == "0" and form.query_one("#sampling").value
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        assert "Step 1 · decode" in screen_text(app)  # the view underneath was switched too
