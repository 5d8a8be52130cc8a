"""The generation view: streaming, stop and resume, settings, the comparison, the KV cache, replays."""

from __future__ import annotations

import re
import threading
import time

import pytest

from gpt2viz.text_safety import token_label

from gpt2viz.cli import parse_args
from gpt2viz.trace import dump, load, trace_prompt
from gpt2viz.tui.app import make_app
from gpt2viz.tui.formatting import percent
from gpt2viz.tui.generation_narration import busy_share
from gpt2viz.tui.screens.generation import GenerationScreen
from gpt2viz.tui.screens.generation_settings import SettingsScreen
from gpt2viz.tui.screens.step import StepScreen
from gpt2viz.tui.stages import Stage
from gpt2viz.tui.widgets.generation_panels import GeneratedText

from tui_helpers import GENERATION_TRACE, panel_text, run_async, screen_text

SIZE = (120, 40)


class Gate:
    """Holds a generation after its first `open_steps` tokens until `release()`."""

    def __init__(self, open_steps: int) -> None:
        self.open_steps = open_steps
        self.event = threading.Event()
        self.reached = threading.Event()  # a step is held: the model thread waits in it

    async def holding(self, pilot) -> None:
        """Pauses until the model thread has made the next step and is held before handing it over
        (after a handover it waits for the UI to go quiet before it makes the next step)."""
        await wait_for(pilot, self.reached.is_set, what="the held step")

    def release(self) -> None:
        self.event.set()


@pytest.fixture
def gate(monkeypatch):
    """Generations in this test hand over the steps they made and pause before handing over their
    fourth, until `gate.release()` (the model thread's batches of steps, jobs.Batches)."""
    from gpt2viz.tui import jobs

    real_add = jobs.Batches.add
    held = Gate(3)

    def gated_add(batches, step):
        if step["step"] >= held.open_steps and not held.event.is_set():
            batches.flush()  # the steps before it are drawn
            held.reached.set()
            held.event.wait(20)
        real_add(batches, step)

    monkeypatch.setattr(jobs.Batches, "add", gated_add)
    yield held
    held.release()  # never leave a model thread waiting (it holds the model lock)


async def wait_for(pilot, condition, timeout: float = 30.0, what: str = "") -> None:
    """Pauses until `condition()` holds (by polling the app, not by sleeping a fixed time)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        await pilot.pause(0.01)


async def open_generation(app, pilot) -> GenerationScreen:
    """Waits for the step-through, presses g and returns the generation view."""
    await wait_for(pilot, lambda: isinstance(app.screen, StepScreen), what="the step-through")
    await pilot.press("g")
    await wait_for(pilot, lambda: isinstance(app.screen, GenerationScreen) and app.screen.is_mounted, what="the generation view")
    await pilot.pause()
    return app.screen


async def finished(pilot, screen: GenerationScreen) -> None:
    await wait_for(pilot, lambda: not screen.running, what="the generation to end")
    await pilot.pause()


def text_of(screen: GenerationScreen) -> str:
    """The generated text panel, as shown."""
    return screen.query_one(GeneratedText).content.plain


def live_app(ckpts, *args: str):
    options = parse_args(["--model", str(ckpts.path("tiny")), *args])
    return make_app(lm=ckpts.lm("tiny"), options=options)


@run_async
async def test_the_text_panel_keeps_its_end_or_the_step_on_show_in_sight(ckpts):
    """A run longer than the panel ends with its last lines in sight (a learner walk saw a
    200-token run stay at its first lines); a step chosen far back scrolls into sight, and the
    step after the last follows the end again."""
    from gpt2viz.tui.widgets.generation_panels import TextPanel

    app = live_app(ckpts, "--generate", "150")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        panel = screen.query_one(TextPanel)
        assert panel.max_scroll_y > 0 and panel.scroll_y == panel.max_scroll_y
        screen._select(0)
        await pilot.pause()
        line = screen.query_one(GeneratedText).selected_line
        assert panel.scroll_y <= line < panel.scroll_y + panel.scrollable_content_region.height
        assert panel.scroll_y < panel.max_scroll_y
        screen._select(None)
        await pilot.pause()
        assert panel.scroll_y == panel.max_scroll_y


@run_async
async def test_tokens_stream_in_and_stop_keeps_the_text(ckpts, gate):
    app = live_app(ckpts, "--generate", "30")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_generation(app, pilot)
        await wait_for(pilot, lambda: len(screen.gen.steps) == 3, what="three tokens")
        # The gate hands over the three steps before the one it holds, and they are drawn.
        await wait_for(pilot, lambda: "● generating 3 of 30 tokens" in screen_text(app), timeout=30, what="the redraw")
        assert screen.running
        first = [s["text"] for s in screen.gen.steps]
        assert "".join(first).replace("␣", " ") + "▌" in text_of(screen)  # streamed in as they came
        await gate.holding(pilot)
        await pilot.press("space")  # stop: the step under way is the last
        gate.release()
        await finished(pilot, screen)
        kept = list(screen.gen.ids)
        assert len(kept) == 4 and screen.gen.stop_reason == "cancelled"
        text = screen_text(app)
        assert "■ stopped" in text and "␣ resumes" in text  # the resume key, as the footer shows it
        shown = text_of(screen)
        assert shown.startswith("The meaning of life is")
        await pilot.pause(0.1)
        assert text_of(screen) == shown  # nothing more arrives once stopped
        await pilot.press("space")  # resume: from prompt + generated so far
        await finished(pilot, screen)
        assert screen.gen.stop_reason == "max_new_tokens" and len(screen.gen.ids) == 30
        assert screen.gen.ids[: len(kept)] == kept
        assert screen.gen.starts == [0, len(kept)]
        assert screen.gen.steps[len(kept)]["context_length"] == 5 + len(kept)  # a prefill of everything so far
        assert "Step 29 · decode" in screen_text(app) and "✓ done" in screen_text(app)
        resumed = list(screen.gen.ids)
        await pilot.press("space")  # done: generate again, in one run
        await finished(pilot, screen)
        assert screen.gen.starts == [0]
        assert screen.gen.ids == resumed  # greedy: stopping and resuming changed nothing


@run_async
async def test_streaming_redraws_are_throttled_and_the_last_one_is_complete(ckpts, monkeypatch):
    """Drawing takes the GIL from the model's thread: a fast run is not redrawn for every token,
    but what stays on screen is the whole text."""
    from gpt2viz.tui.screens import generation as generation_screen

    draws = []
    real_draw = GenerationScreen._draw

    def counting_draw(self):
        draws.append(time.monotonic())
        real_draw(self)

    monkeypatch.setattr(GenerationScreen, "_draw", counting_draw)
    app = live_app(ckpts, "--generate", "60")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        await pilot.pause(generation_screen.DRAW_INTERVAL_S + 0.1)
        assert len(screen.gen.ids) == 60
        streaming = [b - a for a, b in zip(draws, draws[1:])]
        elapsed = draws[-1] - draws[0]
        assert len(draws) <= 4 + elapsed / generation_screen.DRAW_INTERVAL_S, (len(draws), elapsed)
        assert len(draws) < 60 and streaming
        assert "Step 59 · decode" in screen_text(app) and "✓ done" in screen_text(app)


@run_async
async def test_a_slow_run_shows_its_steps_while_it_runs(ckpts, monkeypatch):
    """Steps are handed over every DRAW_INTERVAL_S of the model's time, not only at the end: a run
    of 30 ms steps is seen part done."""
    from gpt2viz.tui import jobs

    real_add = jobs.Batches.add

    def slow_add(batches, step):
        time.sleep(0.03)  # a slower model's step
        real_add(batches, step)

    monkeypatch.setattr(jobs.Batches, "add", slow_add)
    app = live_app(ckpts, "--generate", "24")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_generation(app, pilot)
        await wait_for(pilot, lambda: screen.running and 0 < len(screen.gen.steps) < 24, what="part of the run")
        made = len(screen.gen.steps)
        assert f"● generating {made} of 24 tokens" in screen_text(app)
        await finished(pilot, screen)
        assert len(screen.gen.ids) == 24


@run_async
async def test_a_stopped_and_resumed_sampled_run_equals_an_uninterrupted_one(ckpts, gate):
    app = live_app(ckpts, "--generate", "12", "--temperature", "1.5", "--top-k", "50", "--seed", "3")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_generation(app, pilot)
        await wait_for(pilot, lambda: len(screen.gen.steps) == 3, what="three tokens")
        await gate.holding(pilot)
        await pilot.press("space")
        gate.release()
        await finished(pilot, screen)
        assert screen.gen.stop_reason == "cancelled"
        await pilot.press("space")  # resume: sampling goes on from where the generator stopped
        await finished(pilot, screen)
        resumed = list(screen.gen.ids)
        assert len(resumed) == 12 and screen.gen.starts == [0, 4]
        await pilot.press("space")  # done: the same settings again, in one run
        await finished(pilot, screen)
        assert screen.gen.starts == [0]
        assert screen.gen.ids == resumed


@run_async
async def test_sampling_with_a_seed_is_reproducible_on_screen(ckpts):
    app = live_app(ckpts, "--generate", "8")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        greedy_text = text_of(screen)
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SettingsScreen))
        form = app.screen
        form.query_one("#sampling").value = True
        form.query_one("#temperature").value = "1.5"
        form.query_one("#top-k").value = "50"
        form.query_one("#seed").value = "7"
        form.query_one("#new-tokens").value = "10"
        form.query_one("#seed").focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen)
        await finished(pilot, screen)
        first = text_of(screen)
        assert len(screen.gen.ids) == 10 and first != greedy_text
        assert "sampling: T 1.5 · top-k 50 · seed 7" in screen_text(app)
        assert "plain" in panel_text(screen, "#choice-panel") and "sampled" in panel_text(screen, "#choice-panel")
        await pilot.press("g")  # the same settings again
        await finished(pilot, screen)
        assert text_of(screen) == first
        assert app.session.generation_settings.sampling.seed == 7  # kept for the next generation view
        # A step that sampled a token other than its pass's argmax: its forward pass says what the
        # step did, not what greedy decoding would have (issue 36: it said "Greedy decoding takes
        # the most probable token: '␣not'" for a step that sampled ',').
        index = next(i for i, st in enumerate(screen.gen.steps) if i and st["id"] != st["raw"]["ids"][0])
        chosen, top = screen.gen.steps[index]["text"], screen.gen.steps[index]["raw"]["tokens"][0]
        screen._select(index)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, StepScreen) and app.screen.from_step == index)
        assert app.screen.stage == Stage("next_token")
        shown = screen_text(app)
        assert "This step sampled its token with T 1.5 · top-k 50 · seed 7" in shown and "Greedy" not in shown
        assert f"sampled token {token_label(chosen)}" in shown and "next ~ p′ (p after the settings); this draw:" in shown
        assert f"The most probable token of this pass was '{token_label(top)}'" in shown
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)


@run_async
async def test_settings_form_checks_values_inline(ckpts):
    app = live_app(ckpts, "--generate", "4")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        assert text_of(screen).startswith("The meaning of life is│")  # running text
        await pilot.press("b")
        assert text_of(screen).startswith("The ␣meaning ␣of ␣life ␣is ")  # token by token
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SettingsScreen))
        form = app.screen
        assert form.query_one("#temperature").disabled  # greedy: the sampling fields are off
        form.query_one("#sampling").value = True
        await pilot.pause()
        # A blank optional field is no mistake: not marked when the cursor leaves it (Textual's own
        # check of a number field marked it red, as a wrong temperature is marked).
        for field in ("#top-k", "#top-p", "#seed", "#new-tokens"):
            form.query_one(field).focus()
            await pilot.pause()
        assert not any(form.query_one(f).has_class("-invalid") for f in ("#top-k", "#top-p", "#seed"))
        form.query_one("#top-k").value = "0"
        form.query_one("#top-p").value = "1.5"
        form.query_one("#new-tokens").value = "0"
        form.query_one("#seed").value = "-1"
        form.apply()
        await pilot.pause()
        assert app.screen is form
        text = screen_text(app)
        assert "top-k must be an integer >= 1, got 0" in text
        assert "top-p must be in (0, 1], got 1.5" in text
        vocab = screen.facts.vocab
        assert "new tokens must be an integer from 1 to 4,096, got 0" in text
        assert "seed must be an integer from 0 to" in text  # with the others, not after them
        # The bounds the command line has: --generate's, and the model's vocabulary.
        form.query_one("#new-tokens").value = "4097"
        form.query_one("#top-k").value = str(vocab + 1)
        form.apply()
        await pilot.pause()
        text = screen_text(app)
        assert "got 4097" in text and f"top-k {vocab + 1}: more than the model's vocabulary of {vocab:,} tokens" in text
        form.query_one("#temperature").value = "0"
        form.apply()
        await pilot.pause()
        assert "temperature must be > 0 to sample" in screen_text(app)
        # Mended as typed, a field's message goes at once (it stayed until the next apply).
        form.query_one("#new-tokens").value = "34"
        await pilot.pause()
        assert not form.query_one("#new-tokens-error").display and "got 4097" not in screen_text(app)
        assert form.query_one("#temperature-error").display  # not mended: still said
        form.query_one("#sampling").value = False  # greedy: the sampling fields' messages go
        await pilot.pause()
        assert not form.query_one("#temperature-error").display
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen and screen.gen.settings.max_new_tokens == 4


@run_async
async def test_compare_reports_identical_ids_and_a_speedup(ckpts):
    app = live_app(ckpts, "--generate", "12")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        await pilot.press("c")
        await wait_for(pilot, lambda: screen.comparison is not None, what="the comparison")
        await pilot.pause()
        c = screen.comparison
        assert c.naive.ids == c.cached.ids and len(c.cached.ids) == 12
        assert not c.naive.settings.use_cache and c.cached.settings.use_cache
        text = panel_text(screen, "#cost-panel")
        assert "ids identical ✓" in text
        assert "no cache" in text and "cached" in text
        assert "The cache changes the path, not the result" in text
        share = busy_share(c.naive, c.cached)
        if share is None:
            assert re.search(r"speedup\s+\d[\d.]*×\s+\d[\d.]*×", text), text
            assert "✓ compared · ids identical · speedup" in screen_text(app)
        else:  # timed while other processes kept the CPUs busy: no speed-up claimed (the busy rule)
            assert re.search(rf"speedup\s+— machine {re.escape(percent(share))} busy", text), text
            assert not re.search(r"speedup\s+\d", text) and "✓ compared · ids identical · timed while the machine was busy" in screen_text(app)
        # both series on one chart
        chart = screen.query_one("#latency-chart")
        assert [s.kinds[0] for s in chart.series] == ["latency-chart--naive", "latency-chart--cached"]
        # The help names the keys as they are bound now, the user's key map applied.
        app.set_keymap({"token-boundaries": "x", "compare-cache": "v"})
        await pilot.press("question_mark")
        await pilot.pause()
        help_text = screen_text(app)
        assert "Run without and with the KV cache and compare" in help_text and "␣ stops a running" in help_text
        reading = app.screen.query_one("#help-reading").text
        assert "x shows where each token begins" in reading and "v compares a run without the cache" in reading
        assert "← → :" not in reading and "with ← →: the choice" in reading and "tab moves between" in reading


@run_async
async def test_kv_panel_bytes_follow_the_formula(ckpts):
    app = live_app(ckpts, "--generate", "6")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        cfg = ckpts.lm("tiny").config
        n_layer, n_head, head_dim = cfg.n_layer, cfg.n_head, cfg.n_embd // cfg.n_head
        for back in range(3):
            T = 5 + 5 - back  # prompt of 5, step 5 - back just done: its output not yet cached
            expected = 2 * n_layer * n_head * T * head_dim * 4
            text = panel_text(screen, "#kv-panel")
            assert f"used      {expected:,} B" in text, text
            assert f"[1, {n_head}, {T}, {head_dim}]" in text or f"[1,{n_head},{T},{head_dim}]" in text
            assert f" {T}/{cfg.n_ctx}" in text
            await pilot.press("left")
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SettingsScreen))
        app.screen.query_one("#use-cache").value = False
        app.screen.apply()
        await wait_for(pilot, lambda: app.screen is screen)
        # The new generation may not have started when the screen is back: wait for what it shows.
        await wait_for(pilot, lambda: "full pass, no cache" in screen_text(app), what="a step without the cache")
        await finished(pilot, screen)
        text = panel_text(screen, "#kv-panel")
        assert "The cache is off" in text


@run_async
async def test_stops_at_the_context_limit(ckpts):
    app = live_app(ckpts, "--generate", "500")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        n_ctx = ckpts.lm("tiny").config.n_ctx
        assert screen.gen.stop_reason == "context" and len(screen.gen.context_ids) == n_ctx
        assert f"The context is full: {n_ctx} tokens" in screen_text(app)
        assert f"(cache {n_ctx - 1})" in screen_text(app) and f"{n_ctx - 1}/{n_ctx}" in panel_text(screen, "#kv-panel")
        assert not screen.gen.can_resume


@run_async
async def test_home_and_end_go_to_the_first_and_the_latest_step(ckpts):
    # A learner at step 39 once needed 39 presses of the left arrow to reach step 0.
    app = live_app(ckpts, "--generate", "6")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        assert screen.state.index == 5 and screen.selected is None
        await pilot.press("home")
        await wait_for(pilot, lambda: screen.state.index == 0, what="step 0")
        await pilot.press("right")
        assert screen.state.index == 1
        await pilot.press("end")
        await wait_for(pilot, lambda: screen.selected is None and screen.state.index == 5, what="the latest step")


@run_async
async def test_enter_opens_a_steps_forward_pass_and_escape_comes_back(ckpts):
    app = live_app(ckpts, "--generate", "6")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        await pilot.press("left", "left")  # step 3
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, StepScreen) and app.screen.from_step == 3)
        step = app.screen
        # Step 3 was a decode step: its pass reads one new id, the others from the KV cache.
        context = screen.gen.prompt_ids + screen.gen.ids[:3]
        assert step.trace.all_token_ids == context and step.trace.token_ids == context[-1:]
        assert step.trace.past == len(context) - 1
        assert step.trace.event("blocks.0.attn.hook_attn_scores")["shape"][2:] == [1, len(context)]
        assert step.trace.event("unembed.hook_out")["positions"][-1]["ids"][0] == screen.gen.ids[3]  # greedy: its choice
        # Its KV cache is the size the generation's was (one size on both screens; issue 36's walk
        # found 401,408 B on the pass's panel against the generation's 282,240 B).
        generation_kv = screen.gen.steps[3]["kv_cache"]
        assert step.trace.event("kv_cache")["allocated_bytes"] == generation_kv["allocated_bytes"]
        assert step.stage == Stage("next_token")
        assert "generation step 3" in screen_text(app)
        step.go_to(1)  # Tokenize, after the model's files
        await pilot.pause()
        assert "This is the forward pass of a decode step" in screen_text(app)
        await pilot.press("e")  # no prompt editing in a step's pass
        await pilot.pause()
        assert app.screen is step
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        assert screen.selected == 3 and len(screen.gen.ids) == 6
        # Step 0, the prompt's pass: the same one size (a learner's walk: the prompt's own pass,
        # shown for it, had allocated 64 positions where the generation's cache held 53).
        await pilot.press("left", "left", "left", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, StepScreen) and app.screen.from_step == 0)
        assert app.screen.trace.event("kv_cache")["allocated_bytes"] == screen.gen.steps[0]["kv_cache"]["allocated_bytes"]
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.press("escape")  # back to the step-through of the prompt
        await wait_for(pilot, lambda: isinstance(app.screen, StepScreen))
        assert app.screen.from_step is None


@run_async
async def test_step_0_of_an_empty_prompt_is_still_an_empty_prompt(ckpts):
    """Step 0 is recorded again with the generation's cache: from the prompt as written, not from
    its ids, so the Tokenize stage still says the prompt was empty (from [<|endoftext|>] it read as
    the 13-byte text '<|endoftext|>', the review found)."""
    from gpt2viz.tui.widgets.pictures import TokenTable

    app = live_app(ckpts, "--generate", "3", "")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        await pilot.press("left", "left", "left", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, StepScreen) and app.screen.from_step == 0)
        step = app.screen
        assert step.trace is not screen.trace and step.trace.prompt == ""
        assert "0 bytes in all" in TokenTable().build(step.trace, Stage("tokenize"), 0).plain


@pytest.mark.parametrize("key", ["q", "ctrl+c"])
@run_async
async def test_q_or_ctrl_c_while_generating_exits_cleanly(ckpts, gate, key):
    app = live_app(ckpts, "--generate", "100")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_generation(app, pilot)
        await wait_for(pilot, lambda: len(screen.gen.steps) == 3)
        assert screen.running  # and the model thread is held mid-generation
        started = time.monotonic()
        await pilot.press(key)
    assert app.return_code == 0 and time.monotonic() - started < 5


@run_async
async def test_a_replayed_generation_is_shown_read_only(tmp_path):
    trace = load(GENERATION_TRACE)
    options = parse_args(["--replay", str(GENERATION_TRACE)])
    app = make_app(trace=trace, options=options)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = await open_generation(app, pilot)
        gen = trace.generation
        assert screen.gen.ids == gen["ids"]
        text = screen_text(app)
        assert "· recorded" in text and "✓ done" in text
        assert "space" not in text.splitlines()[-1] and "compare" not in text.splitlines()[-1]
        await pilot.press("space", "c", "s")  # nothing to run
        await pilot.pause()
        assert app.screen is screen and not screen.running
        await pilot.press("left")
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is screen
        assert any("no model" in n.message for n in app._notifications)
        for _ in range(len(gen["ids"])):
            await pilot.press("left")
        await pilot.press("enter")  # step 0: the prompt's own pass is in the trace
        await wait_for(pilot, lambda: isinstance(app.screen, StepScreen))
        assert app.screen.from_step == 0 and app.screen.trace is trace
        await pilot.press("g")  # g from a step's pass goes back to the generation view
        await wait_for(pilot, lambda: app.screen is screen)


@run_async
async def test_g_on_a_replay_without_generation_says_why(tiny_trace):
    app = make_app(trace=tiny_trace)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, StepScreen))
        await pilot.press("g")
        await pilot.pause()
        assert isinstance(app.screen, StepScreen)
        assert any("holds no generation" in n.message for n in app._notifications)


@run_async
async def test_the_generation_view_fits_80_by_24(ckpts):
    app = live_app(ckpts, "--generate", "10")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        lines = screen_text(app).splitlines()
        footer = lines[-1]
        for key in ("␣ again", "←→ step", "⏎ open", "s settings", "c compare", "esc back", "? help", "q quit", "^p palette"):
            assert key in footer, footer
        assert "Step 9 · decode" in "\n".join(lines)
        assert "KV cache after step 9" in "\n".join(lines)
        assert 'Text · prompt "The meaning of life is"' in lines[1]  # the prompt stays in sight
        await pilot.press("c")
        await wait_for(pilot, lambda: screen.comparison is not None, what="the comparison")
        await pilot.pause()
        text = screen_text(app)
        busy = busy_share(screen.comparison.naive, screen.comparison.cached) is not None
        speedup = r"speedup\s+— machine [\d.]+% busy" if busy else r"speedup\s+\d[\d.]*×\s+\d[\d.]*×"
        assert re.search(speedup, text), text  # the compare table, in sight
        assert "ids identical ✓" in text


def test_a_dumped_live_generation_replays(tmp_path, ckpts):
    """What --json --generate writes is what the generation view reads."""
    from gpt2viz.generate import SamplingSettings
    from gpt2viz.tui.generation import Generation

    lm = ckpts.lm("tiny")
    trace = trace_prompt(lm, "Hello", generate_tokens=5, settings=SamplingSettings(0.8, 20, 0.9, 1), use_cache=False)
    dump(trace, tmp_path / "t.json")
    loaded = load(tmp_path / "t.json")
    gen = Generation.from_record(loaded.generation, loaded.token_ids, [t["text"] for t in loaded.tokens], 128)
    assert gen.ids == trace.generation["ids"] and gen.starts == [0]
    assert not gen.settings.use_cache and gen.settings.sampling.seed == 1 and gen.settings.sampling.top_k == 20
    assert gen.mean_decode_ms == pytest.approx(sum(s["ms"] for s in gen.steps[1:]) / 4)


@run_async
async def test_a_chinese_prompt_reads_as_characters_in_running_text(ckpts):
    """The text panel and its title showed '人\\xe5\\xb7\\xa5…' for 人工智能 (each byte token on its own);
    running text puts the characters together, token by token (b) keeps each token's bytes."""
    from gpt2viz.tui.widgets.generation_panels import TextPanel

    app = live_app(ckpts, "--generate", "3", "人工智能的意义")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        assert text_of(screen).startswith("人工智能的意义│")
        assert '"人工智能的意义"' in str(screen.query_one(TextPanel).border_title)
        await pilot.press("b")
        assert "\\x" in text_of(screen)  # the tokens themselves: half characters escaped


@run_async
async def test_the_status_line_keeps_its_sentence_whole_and_the_fields_that_fit():
    """At 80 columns a replayed comparison's line ended in a cut '  ·'; the fields after the
    sentence ('recorded') show only where they fit, and again once the terminal is wider."""
    from test_tui_snapshots import show_a_comparison

    from gpt2viz.tui.widgets.generation_panels import StatusLine

    app = make_app(trace=load(GENERATION_TRACE))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        show_a_comparison(screen)
        await pilot.pause()
        text = screen.query_one(StatusLine).content.plain
        assert text.startswith("✓ compared · ids identical · speedup") and text.endswith("per decode step")
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        assert screen.query_one(StatusLine).content.plain == text + "  · recorded"


@run_async
async def test_a_chosen_step_that_begins_a_character_lights_the_character():
    """In running text a token that is half a character shows nothing of its own (the token that
    completes it shows the character); chosen, it lit nothing. Now the character it is part of is
    lit with it."""
    from gpt2viz.tui.widgets.generation_panels import CURRENT

    app = make_app(trace=load(GENERATION_TRACE))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        steps = screen.gen.steps
        steps[0:2] = [dict(steps[0], text="\\xe5\\xb7"), dict(steps[1], text="\\xa5")]  # 工, in two tokens
        screen.selected = 0
        screen._draw()
        await pilot.pause()
        content = screen.query_one(GeneratedText).content
        lit = "".join(content.plain[span.start:span.end] for span in content.spans if span.style == CURRENT)
        assert "工" in lit and "\\x" not in content.plain.split("│", 1)[1]


def test_a_status_sentence_breaks_as_chinese_breaks_and_keeps_its_styles():
    """Textual breaks only at spaces: '…其中 235 / 个是新生成的；…' left the first line half empty. The
    line breaks between characters, never before a closing mark, and the mark keeps its colour."""
    from textual.content import Content

    from gpt2viz.tui.styled_text import laid_lines

    sentence = Content.assemble(("✓", "green"), " 完成 上下文已满：256 个 token，其中 235 个是新生成的；最后一个从未输入模型（缓存 255）。")
    laid = laid_lines(sentence, 78)
    first, second = laid.plain.split("\n")
    assert first.endswith("最后一个从未输入模型") and second == "（缓存 255）。"
    assert laid.spans[0].style == "green" and laid.plain.replace("\n", "") == sentence.plain
    english = Content("✓ done The context is full: 256 tokens, 251 of them new; the last was never fed in (cache 255).")
    assert laid_lines(english, 78).plain.split("\n")[1] == "fed in (cache 255)."
