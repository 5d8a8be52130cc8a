"""Defects a code review and a learner's walk found (issue 12), each pinned by the test that
would have caught it."""

from __future__ import annotations

import pytest

import gc
import threading
import weakref

from gpt2viz.cli import parse_args
from gpt2viz.generate import SamplingSettings
from gpt2viz.trace import dump, load, trace_prompt
from gpt2viz.trace import events as trace_events
from gpt2viz.tui.app import make_app
from gpt2viz.tui.facts import RunFacts
from gpt2viz.tui.generation import Generation, GenerationSettings
from gpt2viz.tui.generation_narration import choice_text
from gpt2viz.tui.screens.generation import GenerationScreen
from gpt2viz.tui.screens.generation_settings import FormSwitch, SettingsScreen
from gpt2viz.tui.screens.step import StepScreen
from gpt2viz.tui.stages import build_stages

from test_tui_generation import finished, live_app, open_generation, wait_for
from tui_helpers import panel_text, run_async, screen_text
from helpers import state_home

SIZE = (120, 40)
OPENED = 12  # step screens opened and closed: a screen kept alive shows as 11 or 12 of them


@pytest.mark.slow  # many screens opened and closed (12 of them, 10 s)
@run_async
async def test_closed_step_screens_are_freed(ckpts):
    """Every step opened from the generation view and closed again must be collectable: a screen
    kept alive (by gc.freeze, say) keeps its Trace and its widgets for the rest of the session."""
    app = live_app(ckpts, "--generate", "6")
    screens: list[weakref.ref] = []
    traces: list[weakref.ref] = []
    async with app.run_test(size=SIZE) as pilot:
        generation = await open_generation(app, pilot)
        await finished(pilot, generation)
        for n in range(OPENED):
            generation.selected = 1 + n % 5  # steps 1-5: each needs a forward pass of its own
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, StepScreen) and app.screen.is_mounted, what="a step")
            screens.append(weakref.ref(app.screen))
            traces.append(weakref.ref(app.screen.trace))
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is generation, what="the generation view")
        await pilot.pause()
        gc.collect()
        alive = [ref for ref in screens if ref() is not None]
        assert len(alive) <= 1, f"{len(alive)} of {OPENED} closed step screens are still in memory"
        assert sum(ref() is not None for ref in traces) <= 1


@run_async
async def test_screens_never_work_out_trace_parts_on_the_ui_thread(ckpts, monkeypatch):
    """Deferred trace parts (top tokens over every position, the logit lens: torch work) are
    worked out in the worker; the UI thread only reads plain data."""
    where: list[str] = []
    real_init = trace_events.Later.__init__

    def spying_init(self, compute):
        def compute_and_note():
            where.append(threading.current_thread().name)
            return compute()

        real_init(self, compute_and_note)

    monkeypatch.setattr(trace_events.Later, "__init__", spying_init)
    app = live_app(ckpts, "--generate", "4")
    ui_thread = threading.current_thread().name
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, StepScreen), what="the step-through")
        assert app.screen.trace.resolved
        for _ in range(len(app.screen.stages)):  # every stage drawn once
            await pilot.press("right")
        generation = await open_generation(app, pilot)
        await finished(pilot, generation)
        await pilot.press("left", "enter")  # a generated step's own forward pass
        await wait_for(pilot, lambda: isinstance(app.screen, StepScreen) and app.screen.from_step == 2, what="step 2")
        assert app.screen.trace.resolved
        await pilot.press("end")
        await pilot.pause()
    assert where, "nothing was deferred: the spy saw no work"
    assert ui_thread not in where


def _sampled_trace(lm, topk: int):
    settings = SamplingSettings(temperature=1.0, seed=5)
    return trace_prompt(lm, "The meaning of life is", generate_tokens=6, settings=settings, topk=topk)


def test_a_replayed_trace_keeps_the_top_k_it_was_recorded_with(tmp_path, ckpts):
    path = tmp_path / "t.json"
    dump(_sampled_trace(ckpts.lm("tiny"), 5), path)
    trace = load(path)
    assert trace.generation["topk"] == 5
    gen = Generation.from_record(trace.generation, trace.token_ids, [t["text"] for t in trace.tokens], 256)
    assert gen.topk == 5
    for i in range(len(gen.steps)):
        # Temperature 1 with no top-k or top-p leaves the whole vocabulary to draw from.
        assert "could be drawn" not in choice_text(gen, i)
    # A trace from before `topk` was recorded: the lists' length tells it.
    del trace.generation["topk"]
    old = Generation.from_record(trace.generation, trace.token_ids, [t["text"] for t in trace.tokens], 256)
    assert old.topk == 5


def test_a_top_k_smaller_than_the_list_is_still_said(ckpts):
    settings = SamplingSettings(temperature=1.0, top_k=3, seed=5)
    trace = trace_prompt(ckpts.lm("tiny"), "The meaning of life is", generate_tokens=2, settings=settings, topk=5)
    gen = Generation.from_record(trace.generation, trace.token_ids, [t["text"] for t in trace.tokens], 256)
    assert "Only 3 tokens could be drawn" in choice_text(gen, 0)


@run_async
async def test_the_live_generation_view_keeps_topk_logits_candidates(ckpts):
    app = live_app(ckpts, "--generate", "3", "--topk-logits", "4", "--temperature", "1", "--seed", "1")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        assert screen.topk == 4
        assert all(len(s["candidates"]["ids"]) == 4 and len(s["raw"]["ids"]) == 4 for s in screen.gen.steps)
        assert "could be drawn" not in panel_text(screen, "#choice-panel")


@run_async
async def test_generate_0_generates_nothing_until_asked(ckpts):
    app = live_app(ckpts, "--generate", "0")
    assert app.session.generation_settings.max_new_tokens == 0
    assert GenerationSettings.from_options(parse_args([])).max_new_tokens == 40  # not given: the default
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_generation(app, pilot)
        await pilot.pause(0.3)
        assert not screen.running and screen.gen.steps == []
        assert "not started: 0 new tokens asked for" in screen_text(app)
        await pilot.press("space")  # nothing to generate: the settings open
        await wait_for(pilot, lambda: isinstance(app.screen, SettingsScreen), what="the settings")


@run_async
async def test_enter_on_a_switch_generates_and_does_not_flip_it(ckpts):
    app = live_app(ckpts, "--generate", "3")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SettingsScreen), what="the settings")
        switch = app.screen.query_one("#use-cache", FormSwitch)
        switch.focus()
        await pilot.pause()
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen, what="the form to close")
        assert screen.settings.use_cache  # not flipped
        await finished(pilot, screen)
        assert len(screen.gen.steps) == 3
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SettingsScreen), what="the settings")
        app.screen.query_one("#use-cache", FormSwitch).focus()
        await pilot.press("space")  # space still flips it
        await pilot.pause()
        assert not app.screen.query_one("#use-cache", FormSwitch).value


@run_async
async def test_an_unexpected_worker_error_is_one_line_with_a_logged_traceback(ckpts, monkeypatch, tmp_path):
    import gpt2viz.trace as trace_module

    def broken(*args, **kwargs):
        raise TypeError("a bug in the recorder")

    monkeypatch.setenv("XDG_STATE_HOME", str(state_home(tmp_path)))
    monkeypatch.setattr(trace_module, "record_generation", broken)
    app = live_app(ckpts, "--generate", "3")
    notes: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        real_notify = app.notify
        monkeypatch.setattr(app, "notify", lambda message, **kw: (notes.append(message), real_notify(message, **kw)))
        screen = await open_generation(app, pilot)
        await wait_for(pilot, lambda: notes, what="the failure notice")
        await finished(pilot, screen)
    log = tmp_path / "gpt2viz" / "errors.log"
    assert notes == [f"unexpected error, a bug in gpt2viz: TypeError: a bug in the recorder (traceback in {log})"]
    text = log.read_text(encoding="utf-8")
    assert "Traceback (most recent call last)" in text and "def broken" not in text and "in broken" in text


def test_facts_come_from_the_trace(tiny_trace):
    f = RunFacts.of(tiny_trace)
    assert f.params.total == tiny_trace.model["n_params"]
    assert f.kv_bytes(f.T) == (tiny_trace.event("kv_cache") or {})["total_bytes"]
    assert len(build_stages(f.n_layer)) == 3 + 9 * f.n_layer + 4


def test_shape_rows_never_change_what_they_stand_for(tiny_trace):
    """A row of 'Shapes so far' gains names as the walk goes on; it never swaps one for another."""
    from gpt2viz.tui.widgets.side_panel import shapes_so_far

    stages = build_stages(RunFacts.of(tiny_trace).n_layer)
    before: dict = {}
    for index in range(len(stages)):
        rows = {row.dims: row.names for row in shapes_so_far(tiny_trace, stages, index)}
        for dims, names in before.items():
            assert rows[dims][: len(names)] == names, (stages[index], dims)
        before = rows
    assert before[(1, 4, 5, 16)] == ("q, k, v", "z")


@run_async
async def test_the_side_panel_shows_all_it_holds_at_120_by_40(tiny_trace):
    app = make_app(trace=tiny_trace)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, StepScreen), what="the step-through")
        await pilot.press("end")
        await pilot.pause(0.2)
        text = screen_text(app)
        for line in ("Shapes so far", "[1,6]", "ids + next", "KV cache (prefill)", "B reserved"):
            assert line in text, line


@run_async
async def test_a_long_stage_says_there_is_more_below(tiny_trace):
    app = make_app(trace=tiny_trace)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, StepScreen), what="the step-through")
        await pilot.pause(0.2)
        assert "stage 1 of 25 · ↓ more below" in screen_text(app)
        for _ in range(10):
            await pilot.press("pagedown")
        await pilot.pause(0.2)
        from gpt2viz.tui.widgets.stage_view import StageView

        assert "more below" not in str(app.screen.query_one("#stage-count").content)
        assert app.screen.query_one(StageView).scroll_y == app.screen.query_one(StageView).max_scroll_y


@run_async
async def test_tokens_per_second_says_it_includes_the_prefill(ckpts):
    app = live_app(ckpts, "--generate", "4")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        assert "incl. prefill" in panel_text(screen, "#cost-panel")


def test_the_context_full_sentence_fits_each_case():
    from gpt2viz.tui.generation_narration import stop_text

    steps = [{"id": 1, "text": "a", "ms": 1.0, "used_cache": True}, {"id": 2, "text": "b", "ms": 1.0, "used_cache": True}]
    cached = Generation([0] * 6, ["x"] * 6, GenerationSettings(5), 8, steps, [0], "context")
    assert stop_text(cached) == "The context is full: 8 tokens, 2 of them new; the last was never fed in (cache 7)."
    naive = Generation([0] * 6, ["x"] * 6, GenerationSettings(5, use_cache=False), 8, steps, [0], "context")
    assert stop_text(naive) == "The context is full: 8 tokens, 2 of them new."
    full = Generation([0] * 8, ["x"] * 8, GenerationSettings(5), 8, [], [], "context")
    assert stop_text(full) == "The prompt fills all 8 positions of the context: there is no room for a new token."


def test_a_pattern_without_scores_still_shows_the_causal_mask(tiny_trace):
    import copy

    from gpt2viz.trace import Trace
    from gpt2viz.tui.facts import masked_pattern

    doc = copy.deepcopy(tiny_trace.to_dict())
    doc["events"] = [e for e in doc["events"] if not e["stage"].endswith("hook_attn_scores")]
    rows = masked_pattern(Trace.from_dict(doc), 0, 1)
    assert rows[0][1:] == [None] * 4 and rows[4][4] is not None and rows[1][2] is None
    assert rows == masked_pattern(tiny_trace, 0, 1)


@run_async
async def test_choosing_int8_in_the_settings_reloads_the_model_and_generates_again(ckpts):
    from textual.widgets import Select

    app = live_app(ckpts, "--generate", "4")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        assert app.session.lm.precision == "float32"
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SettingsScreen), what="the settings")
        app.screen.query_one("#precision", Select).value = "int8"
        await pilot.press("enter")
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, GenerationScreen) and app.screen is not screen and app.screen.is_mounted,
            timeout=60,
            what="a new generation view",
        )
        again = app.screen
        await finished(pilot, again)
        assert app.session.lm.precision == "int8" and again.lm is app.session.lm and len(again.gen.steps) == 4
        assert "int8" in screen_text(app)  # the top line names the format
        step_screen = next(s for s in app.screen_stack if isinstance(s, StepScreen))
        assert step_screen.trace.model["dtype"] == "int8" and step_screen.trace.quality["reference"] == "float32"
