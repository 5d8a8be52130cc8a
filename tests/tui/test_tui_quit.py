"""Quitting always works: q from every screen but a text field, ctrl+c from anywhere, exit status 0;
and what closed screens leave behind stays bounded."""

from __future__ import annotations

import gc
import time

import pytest
from textual.command import CommandPalette
from textual.strip import Strip

import gpt2viz
from gpt2viz.trace import Trace, load
from gpt2viz.tui.app import make_app
from gpt2viz.tui.screens.attribution import AttributionScreen
from gpt2viz.tui.screens.generation import GenerationScreen
from gpt2viz.tui.screens.prompt import PromptScreen
from gpt2viz.tui.screens.step import StepScreen
from monkey import OPENERS, replay
from tui_helpers import GENERATION_TRACE, run_async, screen_text, started


@pytest.fixture(scope="module")
def bundled():
    return gpt2viz.load_model("tiny")




async def ended(app, pilot) -> None:
    for _ in range(50):
        if app._exit:
            return
        await pilot.pause()
    raise AssertionError(f"still running, on {type(app.screen).__name__}")


# Each screen's opener, but the text fields': their own test below.
SCREENS = [name for name, keys in OPENERS.items() if keys is not None and name not in ("prompt-editor", "palette")]


@pytest.mark.parametrize("screen", SCREENS)
@run_async
async def test_q_quits_from_every_screen(bundled, screen):
    app = make_app(lm=bundled)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        await replay(app, pilot, " settle ".join(OPENERS[screen]) + " settle")
        await replay(app, pilot, "q")
        await ended(app, pilot)
    assert app.return_code == 0 and app.error is None


def _typed_into_the_prompt(app) -> bool:
    return isinstance(app.screen, PromptScreen) and app.screen.query_one("#prompt-input").value.endswith("q")


def _typed_into_the_palette_search(app) -> bool:
    return isinstance(app.screen, CommandPalette)


@pytest.mark.parametrize("keys, typed_into", [
    ("e settle end q", _typed_into_the_prompt),
    ("ctrl+p settle q", _typed_into_the_palette_search),
], ids=["prompt-editor", "palette"])
@run_async
async def test_q_types_into_a_text_field_and_ctrl_c_quits_from_it(bundled, keys, typed_into):
    app = make_app(lm=bundled)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        await replay(app, pilot, keys)
        assert typed_into(app) and not app._exit
        await replay(app, pilot, "ctrl+c")
        await ended(app, pilot)
    assert app.return_code == 0


@run_async
async def test_escape_leaves_a_text_field_and_the_footer_says_so(bundled):
    app = make_app(lm=bundled)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        await replay(app, pilot, "w settle 2 settle")
        await started(app, pilot, AttributionScreen)
        assert app.focused is app.screen.query_one("#patch-input")
        assert "esc leave the field" in screen_text(app).split("\n")[-1]
        await replay(app, pilot, "q")  # typed
        assert not app._exit and app.screen.query_one("#patch-input").value.endswith("q")
        await replay(app, pilot, "escape settle")
        assert isinstance(app.screen, AttributionScreen) and app.focused is not app.screen.query_one("#patch-input")
        assert "esc back" in screen_text(app).split("\n")[-1]
        await replay(app, pilot, "q")
        await ended(app, pilot)
    assert app.return_code == 0


@pytest.mark.slow  # many screens opened and closed (16 cycles, 6 s)
@run_async
async def test_step_screens_opened_and_closed_leave_nothing_behind():
    """Opening a generation step's forward pass and going back, again and again: the step screens,
    their traces and the lines they drew are freed (memory stays flat; in tmux, 200 of them grow
    the resident memory by under 40 MB, README's Limits)."""

    def census() -> tuple[int, int, int]:
        gc.collect()
        objects = gc.get_objects()
        return (
            sum(isinstance(o, StepScreen) for o in objects),
            sum(isinstance(o, Trace) for o in objects),
            sum(type(o) is Strip for o in objects),
        )

    async def census_when_closed() -> tuple[int, int, int]:
        # A screen just popped is still closing (its message pump ends a moment later, later on a
        # busy machine): count once the stack's screens alone are left, or give the leak's count.
        deadline = time.monotonic() + 60  # only a leak waits this long: a closing screen ends in ms
        while (counts := census())[0] != before[0] + 1 and time.monotonic() < deadline:
            await pilot.pause(0.05)
        return counts

    # What earlier tests in this process left alive is not this app's: counted first, then taken off.
    before = census()
    app = make_app(trace=load(GENERATION_TRACE))

    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot)
        await replay(app, pilot, "g settle")
        await started(app, pilot, GenerationScreen)
        counts = []
        for cycle in range(16):
            await replay(app, pilot, "left×20 enter settle")
            await started(app, pilot)
            assert app.screen.from_step == 0
            await replay(app, pilot, "escape settle")
            await started(app, pilot, GenerationScreen)
            if cycle in (5, 15):  # after 6 cycles and after 10 more: what grows, grows between
                counts.append(await census_when_closed())
        (screens, traces, strips), (screens_after, traces_after, strips_after) = counts
        # The step-through of the prompt, under the generation view, and no other.
        assert screens - before[0] == screens_after - before[0] == 1, (before, counts)
        assert traces_after == traces
        assert strips_after <= strips * 1.1, counts
