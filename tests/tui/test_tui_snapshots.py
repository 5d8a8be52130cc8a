"""Snapshots of the main views, from the committed trace (tests/data/tiny-trace.json).

Update after an intended change with `pytest tests/tui/test_tui_snapshots.py --snapshot-update`
and look at the SVGs before committing them. No measured timing appears on these screens: the
generation view replays a trace whose step times were replaced by fixed numbers.
"""

from __future__ import annotations

import pytest

from gpt2viz.i18n import set_language
from gpt2viz.trace import load
from gpt2viz.tui.app import make_app
from gpt2viz.tui.screens.step import StepScreen
from gpt2viz.tui.stages import index_of

from tui_helpers import GENERATION_TRACE, TINY_TRACE

SIZE = (120, 40)

VIEWS = {
    "tokenize": ("tokenize", None, 0),
    "attention-pattern": ("pattern", 1, 2),
    "all-heads": ("heads", 0, 1),
    "mlp": ("mlp", 0, 0),
    "logits": ("lm_head", None, 0),
    "logit-lens": ("logit_lens", None, 0),
}


def go_to(kind: str, layer: int | None, head: int):
    async def run_before(pilot) -> None:
        for _ in range(100):
            await pilot.pause()
            if isinstance(pilot.app.screen, StepScreen):
                break
        screen = pilot.app.screen
        screen.head = head
        screen.go_to(index_of(screen.stages, kind, layer))
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("view", list(VIEWS))
def test_view(snap_compare, view):
    app = make_app(trace=load(TINY_TRACE))
    assert snap_compare(app, terminal_size=SIZE, run_before=go_to(*VIEWS[view]))


def open_generation(*keys: str):
    async def run_before(pilot) -> None:
        from gpt2viz.tui.screens.generation import GenerationScreen

        for _ in range(100):
            await pilot.pause()
            if isinstance(pilot.app.screen, StepScreen):
                break
        await pilot.press("g")
        for _ in range(100):
            await pilot.pause()
            if isinstance(pilot.app.screen, GenerationScreen) and pilot.app.screen.is_mounted:
                break
        await pilot.press(*keys)
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
def test_generation_view(snap_compare, size):
    """A recorded greedy generation (tests/data/tiny-generation-trace.json, made by
    make_test_trace.py with fixed step times), replayed with step 7 selected."""
    app = make_app(trace=load(GENERATION_TRACE))
    assert snap_compare(app, terminal_size=size, run_before=open_generation(*["left"] * 4))


@pytest.mark.parametrize("view", ["tokenize", "attention-pattern"])
def test_view_80x24(snap_compare, view):
    """The smallest supported terminal: every key of the footer, the palette's included."""
    app = make_app(trace=load(TINY_TRACE))
    assert snap_compare(app, terminal_size=(80, 24), run_before=go_to(*VIEWS[view]))


def show_a_comparison(pilot_screen) -> None:
    """The recorded generation as the cached run of a comparison, against a no-cache run of the
    same ids with fixed, slower times (a replay has no model to run one)."""
    from gpt2viz.tui.generation import Comparison, Generation, GenerationSettings

    cached = pilot_screen.gen
    naive_steps = [dict(step, used_cache=False, kv_cache=None, ms=6.0 + 0.5 * i) for i, step in enumerate(cached.steps)]
    settings = GenerationSettings(cached.settings.max_new_tokens, cached.settings.sampling, False)
    naive = Generation(cached.prompt_ids, cached.prompt_tokens, settings, cached.n_ctx, naive_steps, [0], cached.stop_reason,
                       label="no cache", topk=cached.topk)
    pilot_screen.comparison = Comparison(naive, cached)
    pilot_screen._draw()


def test_generation_comparison_80x24(snap_compare):
    """At 80 x 24 the comparison's table, the prompt and the whole footer are in sight."""

    async def run_before(pilot) -> None:
        await open_generation()(pilot)
        show_a_comparison(pilot.app.screen)
        await pilot.pause()

    app = make_app(trace=load(GENERATION_TRACE))
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


# -- in Chinese (the same runs: only the words differ) ---------------------------------------


@pytest.mark.parametrize("view", ["tokenize", "attention-pattern", "mlp", "logit-lens"])
def test_view_zh(snap_compare, view):
    set_language("zh")
    app = make_app(trace=load(TINY_TRACE))
    assert snap_compare(app, terminal_size=SIZE, run_before=go_to(*VIEWS[view]))


@pytest.mark.parametrize("view", ["tokenize", "attention-pattern", "all-heads"])
def test_view_80x24_zh(snap_compare, view):
    set_language("zh")
    app = make_app(trace=load(TINY_TRACE))
    assert snap_compare(app, terminal_size=(80, 24), run_before=go_to(*VIEWS[view]))


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
def test_generation_view_zh(snap_compare, size):
    set_language("zh")
    app = make_app(trace=load(GENERATION_TRACE))
    assert snap_compare(app, terminal_size=size, run_before=open_generation(*["left"] * 4))
