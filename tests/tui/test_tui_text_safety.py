"""A hostile trace, and a hostile prompt, through every screen: no escape character, C1 control,
bidi override or zero-width character from the input reaches what the app draws (the strips it
sends to the terminal, the SVG screenshot, every widget's whole content), Rich/Textual markup in
the text shows literally, and a token that would show as nothing shows as ∅."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gpt2viz
from gpt2viz.options import RunOptions
from gpt2viz.text_safety import is_hidden
from gpt2viz.trace import load, trace_prompt
from gpt2viz.tui.app import make_app
from gpt2viz.tui.narration import narrate
from gpt2viz.tui.screens.attribution import AttributionScreen
from gpt2viz.tui.screens.cost_lab import CostLabScreen
from gpt2viz.tui.screens.generation import GenerationScreen
from gpt2viz.tui.screens.generation_settings import SettingsScreen
from gpt2viz.tui.screens.help import HelpScreen
from gpt2viz.tui.screens.interventions import InterventionMenu
from gpt2viz.tui.screens.prompt import PromptScreen
from gpt2viz.tui.screens.step import StepScreen
from gpt2viz.tui.stages import Stage
from tui_helpers import TINY_TRACE, run_async, screen_text

# What a hostile text carries: set the window title, blink, red, write the clipboard, a C1 CSI,
# leave the alternate screen, a bidi override and isolate, a zero-width space, and markup.
EVIL = "\x1b]0;PWNED\x07\x1b[5m\x1b[31m\x1b]52;c;SGVsbG8=\x07\x9b\x1b[?1049l\u202e\u2066\u200b[red]x[/red][@click=app.quit]"
PROMPT = "Hello \x1b]0;PWNED\x07 \x1b[31mred\x1b[0m world \u202eabc\u2066 \x1b]52;c;SGVsbG8=\x07"
REPLAY_NAME = "trace\x1b]0;T\x07[b]x.json"
SIZE = (80, 24)


@pytest.fixture(scope="module")
def bundled():
    return gpt2viz.load_model("tiny")


def _poison(doc: dict) -> None:
    """Every text field of a trace document gets EVIL appended (token lists included)."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key in ("text", "final_token") and isinstance(value, str):
                doc[key] = value + EVIL
            elif key == "tokens" and isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                doc[key] = [v + EVIL for v in value]
            else:
                _poison(value)
    elif isinstance(doc, list):
        for value in doc:
            _poison(value)


@pytest.fixture(scope="module")
def hostile_replay(bundled, tmp_path_factory) -> Path:
    """The bundled model's trace of PROMPT with a generation and a cost-lab result, then every text
    field edited to carry EVIL: model name and source, notices, token texts, top tokens, the logit
    lens, the generated text and its steps. Read back with `load`, as --replay does."""
    doc = trace_prompt(bundled, PROMPT, generate_tokens=4).to_dict()
    doc["cost_lab"] = json.loads((TINY_TRACE.with_name("tiny-lab-trace.json")).read_text(encoding="utf-8"))["cost_lab"]
    doc["cost_lab"]["model"] = "tiny" + EVIL
    doc["model"]["name"] = "evil" + EVIL
    doc["model"]["source"] = {"kind": "local", "path": "/models/evil" + EVIL}
    doc["notices"] = list(doc["notices"]) + [{"code": "non_finite_weights", "params": {"tensor": "wte" + EVIL}}]
    _poison(doc)
    path = tmp_path_factory.mktemp("hostile") / "hostile.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _drawn(app) -> list[tuple[str, str]]:
    """(where, text) of everything the app draws now: the strips sent to the terminal, the SVG
    screenshot, and each widget's whole content (also what is scrolled out of sight)."""
    from textual.widgets import Input, Static

    from gpt2viz.tui.widgets.laid import Laid
    from gpt2viz.tui.widgets.strip_widget import Prose, StripWidget

    screen = app.screen
    found = [("strips", "".join(seg.text for strip in screen._compositor.render_strips() for seg in strip))]
    found.append(("svg", app.export_screenshot()))
    for widget in screen.query("*"):
        name = f"{type(widget).__name__}#{widget.id}"
        if isinstance(widget, (Static, Laid)):
            content = widget.content
            found.append((name, getattr(content, "plain", str(content))))
        elif isinstance(widget, Prose):
            found.append((name, widget.text))
        elif isinstance(widget, StripWidget):
            found.append((name, "\n".join(strip.text for strip in widget.lines(max(widget.size.width, 80)))))
        elif isinstance(widget, Input):
            found.append((name, widget.render_line(0).text))
        for title in (widget.border_title, widget.border_subtitle):
            if title:
                found.append((f"{name} border", str(title)))
    return found


def assert_clean(app, where: str) -> str:
    """Nothing drawn holds a hidden character (line breaks between lines aside); returns the
    screen's text. The app is still running: no markup error, no quit by a [@click]."""
    assert app.return_code is None, where
    for part, text in _drawn(app):
        bad = sorted({repr(ch) for ch in text if is_hidden(ch) and ch != "\n"})
        assert not bad, (where, part, bad, text[:400])
    return screen_text(app)


async def settle(pilot, cls=None) -> None:
    app = pilot.app
    for _ in range(600):
        await app.workers.wait_for_complete()
        await pilot.pause(0.02)
        if cls is None or isinstance(app.screen, cls):
            if app.session.jobs.idle:
                await pilot.pause()  # and drawn
                return
    raise AssertionError(f"still on {type(app.screen).__name__}, waiting for {cls}")


async def walk_stages_help_and_palette(app, pilot) -> None:
    """Every stage of the step screen, then the help and the palette opened and closed: each drawn
    and read."""
    screen = app.screen
    for i in range(len(screen.stages)):
        screen.go_to(i)
        await pilot.pause()
        assert_clean(app, f"stage {screen.stages[i]}")
    for key, cls in [("question_mark", HelpScreen), ("escape", StepScreen), ("ctrl+p", None), ("escape", StepScreen)]:
        await pilot.press(key)
        await settle(pilot, cls)
        assert_clean(app, f"after {key}")


async def walk_cost_lab(app, pilot) -> None:
    """The cost lab opened from the step screen, each of its three experiments drawn and read."""
    await pilot.press("m")
    await settle(pilot, CostLabScreen)
    for key in ("1", "2", "3"):
        await pilot.press(key)
        await pilot.pause()
        assert_clean(app, f"cost lab {key}")


@run_async
async def test_a_hostile_trace_replayed_through_every_screen(hostile_replay):
    trace = load(hostile_replay)
    options = RunOptions(replay=str(hostile_replay.with_name(REPLAY_NAME)))
    app = make_app(trace=trace, options=options)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot, StepScreen)
        screen = app.screen
        assert_clean(app, "first stage")
        screen.go_to(1)  # Tokenize, after the model's files: the prompt's tokens
        await pilot.pause()
        text = assert_clean(app, "tokenize")
        # The hostile text is there, shown: escaped, markup as written.
        assert "\\x1b]0;PWNED" in text and "[red]x[/red]" in text, text
        await walk_stages_help_and_palette(app, pilot)
        # No model: each of these says so in a notification that names the replayed file.
        for key in ("e", "w", "x"):
            await pilot.press(key)
            await settle(pilot)
            assert_clean(app, f"notification of {key}")
        assert any("trace\\x1b]0;T\\x07[b]x.json" in n.message for n in app._notifications)
        await walk_cost_lab(app, pilot)
        await pilot.press("escape")
        await settle(pilot, StepScreen)
        await pilot.press("g")
        await settle(pilot, GenerationScreen)
        text = assert_clean(app, "generation")
        assert "[red]x[/red]" in text
        for key in ("left", "left", "b", "right", "b", "s", "c"):
            await pilot.press(key)
            await settle(pilot)
            assert_clean(app, f"generation {key}")
        while not isinstance(app.screen, GenerationScreen):
            await pilot.press("escape")
            await settle(pilot)
        await pilot.press(*["left"] * 6, "enter")  # step 0's forward pass is in the trace
        await settle(pilot, StepScreen)
        assert_clean(app, "a step opened from the generation view")


@run_async
async def test_a_hostile_prompt_through_the_live_screens(bundled):
    app = make_app(lm=bundled, options=RunOptions(prompt=PROMPT, generate=4))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot, StepScreen)
        text = assert_clean(app, "first stage")
        assert "\\x1b]0;PWNED" in text
        await pilot.press("e")
        await settle(pilot, PromptScreen)
        assert_clean(app, "prompt editor")
        assert app.screen.query_one("#prompt-input").value == PROMPT  # shown with marks, kept as it is
        await pilot.press("home")  # the field shows the prompt's start
        await pilot.pause()
        assert_clean(app, "prompt editor, its start")
        field = app.screen.query_one("#prompt-input")
        assert "Hello ␛]0;PWNED␇ ␛[31mred" in field.render_line(0).text
        red = PROMPT.index("red")  # a click on the drawn "r" puts the cursor on it, marks counted as cells
        left, top = field.content_region.x - field.region.x, field.content_region.y - field.region.y
        await pilot.click(field, offset=(left + red, top))
        assert field.cursor_position == red
        await pilot.press("escape")
        await settle(pilot, StepScreen)
        app.screen.go_to(app.screen.stages.index(Stage("pattern", 0)))
        await pilot.press("x")
        await settle(pilot, InterventionMenu)
        assert_clean(app, "what-if menu")
        await pilot.press("enter")
        await settle(pilot, StepScreen)
        assert_clean(app, "what-if result")
        await pilot.press("w")
        await settle(pilot, AttributionScreen)
        assert_clean(app, "attribution")
        await pilot.press("2")
        await pilot.pause()
        assert_clean(app, "patching")
        await pilot.press("escape", "escape")  # out of the text field, then back
        await settle(pilot, StepScreen)
        await pilot.press("g")
        await settle(pilot, GenerationScreen)
        assert_clean(app, "generation")
        await pilot.press("s")
        await settle(pilot, SettingsScreen)
        assert_clean(app, "settings")


def test_narration_never_quotes_an_empty_token(bundled):
    """The prompt's only spaced token is a space alone: no "'␣' and ''" pair; an empty token
    (a replayed trace's) is quoted as ∅."""
    trace = trace_prompt(bundled, "Hello \x1b]0;PWNED\x07")
    assert any(t["text"] == "␣" for t in trace.tokens)
    words = narrate(trace, Stage("tokenize"), generate_key="g").text
    assert "''" not in words and "\x1b" not in words
    trace.tokens[-1]["text"] = ""
    for stage in (Stage("scores", 0), Stage("pattern", 0), Stage("heads", 0)):
        words = narrate(trace, stage, generate_key="g").text
        assert "''" not in words, (stage, words)


def test_a_token_with_an_apostrophe_is_quoted_in_double_quotes():
    """''s' read as an empty quote and an s (a learner walk): such a token is quoted "'s"."""
    from gpt2viz.tui.formatting import quote

    assert quote("'s") == '"\'s"' and quote("the") == "'the'" and quote("'\"") == "''\"'"


@run_async
async def test_an_empty_token_shows_as_a_mark_in_the_token_table(bundled):
    trace = trace_prompt(bundled, "Hello world")
    trace.tokens[0]["text"] = ""
    app = make_app(trace=trace)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, StepScreen)
        app.screen.go_to(1)  # Tokenize, after the model's files
        await pilot.pause()
        table = app.screen.query_one("#picture-tokens").content.plain
        assert "∅" in table and "''" not in screen_text(app)
