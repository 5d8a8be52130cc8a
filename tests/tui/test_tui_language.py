"""Choosing the language: the locale and --lang at start, the L key and the palette while running."""

from __future__ import annotations

from textual.command import CommandPalette

from tui_helpers import run_async, screen_text
from gpt2viz.cli import parse_args
from gpt2viz.i18n import language, set_language
from gpt2viz.tui.app import make_app
from gpt2viz.tui.screens.help import HelpScreen
from gpt2viz.tui.screens.step import StepScreen


def footer_text(app) -> str:
    """The footer: the last line on screen."""
    return screen_text(app).rstrip("\n").split("\n")[-1]


def test_the_locale_chooses_chinese_and_lang_overrides_it(monkeypatch):
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    for var in ("LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(var, raising=False)
    parse_args(["--model", "tiny"])
    assert language() == "zh"
    parse_args(["--model", "tiny", "--lang", "en"])
    assert language() == "en"
    parse_args(["--model", "tiny", "--lang=zh"])
    assert language() == "zh"


@run_async
async def test_the_switch_key_redraws_the_same_stage_in_the_other_language(tiny_trace):
    set_language("zh")
    app = make_app(trace=tiny_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, StepScreen)
        for _ in range(3):
            await pilot.press("right")
        index, head = screen.index, screen.head
        chinese = screen_text(app)
        assert "阶段" in footer_text(app) and "stage" not in footer_text(app)
        await pilot.press("L")
        await pilot.pause()
        assert language() == "en"
        assert app.screen is screen and screen.trace is tiny_trace  # nothing recomputed
        assert (screen.index, screen.head) == (index, head)
        english = screen_text(app)
        assert english != chinese and "stage" in footer_text(app) and "阶段" not in footer_text(app)
        await pilot.press("L")
        await pilot.pause()
        assert language() == "zh" and screen_text(app) == chinese


@run_async
async def test_the_help_and_the_palette_speak_the_language(tiny_trace):
    set_language("zh")
    app = make_app(trace=tiny_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        assert "按键" in text and "回到上一个阶段" in text and "Go back one stage" not in text
        assert "L" in text and "切换到英文界面" in text  # the language key, out of the footer
        await pilot.press("escape")
        await pilot.pause()
        commands = [command.title for command in app.get_system_commands(app.screen)]
        assert "语言：English" in commands and "退出" in commands
        app.action_command_palette()
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        assert "搜索命令" in screen_text(app)


@run_async
async def test_the_palettes_screenshot_is_saved_here_and_said_in_the_language(tiny_trace, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    set_language("zh")
    app = make_app(trace=tiny_trace)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.screenshot()
        await pilot.pause()
        saved = list(tmp_path.glob("*.svg"))
        assert len(saved) == 1
        assert any("已保存屏幕图片" in note.message for note in app._notifications)


@run_async
async def test_the_switch_key_works_on_the_help_too(tiny_trace):
    app = make_app(trace=tiny_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        await pilot.press("L")
        await pilot.pause()
        assert language() == "zh" and isinstance(app.screen, HelpScreen) and "按键" in screen_text(app)


@run_async
async def test_the_switch_key_works_on_the_lesson_menu_and_the_switch_off_menu(tiny_lm):
    """Both lists are modal screens, which hide the app's own L (a learner walk found it dead)."""
    from gpt2viz.tui.screens.interventions import InterventionMenu
    from gpt2viz.tui.screens.lesson_menu import LessonMenu
    from gpt2viz.tui.screens.step import StepScreen

    app = make_app(lm=tiny_lm)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(200):  # by events, not time: until the model thread's pass is on show
            await app.workers.wait_for_complete()
            await pilot.pause()
            if isinstance(app.screen, StepScreen):
                break
        await pilot.press("i")
        await pilot.press("L")
        assert language() == "zh" and isinstance(app.screen, LessonMenu) and "课" in screen_text(app)
        await pilot.press("escape")
        await pilot.press("right", "right", "right", "right", "x")  # into block 0, where parts can be switched off
        assert isinstance(app.screen, InterventionMenu)
        chinese = screen_text(app)
        await pilot.press("L")
        assert language() == "en" and isinstance(app.screen, InterventionMenu) and screen_text(app) != chinese
