"""The cost lab screen: live experiments on a model, a recorded result replayed, what it says.

The live tests check what was measured and that the screen quotes it, never how fast it was.
Snapshots replay tests/data/tiny-lab-trace.json, whose lab numbers are fixed (make_test_trace.py).
"""

from __future__ import annotations

import dataclasses
import threading

import pytest
from textual.widgets import Static
from textual_plotext import PlotextPlot

from gpt2viz import cost_lab
from gpt2viz.costs import step_bound
from gpt2viz.trace import load
from gpt2viz.tui.app import make_app
from gpt2viz.cpu_share import disturbed
from gpt2viz.tui.formatting import count, nbytes, num, percent
from gpt2viz.i18n import say, set_language
from gpt2viz.tui.lab_narration import batch_text, context_text, precision_text
from gpt2viz.tui.screens.cost_lab import CostLabScreen
from gpt2viz.tui.screens.step import StepScreen
from gpt2viz.tui.widgets.strip_widget import Prose

from tui_helpers import GENERATION_TRACE, TINY_TRACE, run_async

LAB_TRACE = TINY_TRACE.with_name("tiny-lab-trace.json")


async def wait_for(pilot, condition, tries: int = 600) -> None:
    for _ in range(tries):
        await pilot.pause(0.05)
        if condition():
            return
    raise AssertionError("the app never got there")


def words(screen: CostLabScreen, name: str) -> str:
    return screen.query_one(f"#words-{name}", Prose).text


async def open_lab(pilot):
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, StepScreen))
    await pilot.press("m")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, CostLabScreen) and pilot.app.screen.is_mounted)
    return pilot.app.screen


@run_async
async def test_the_lab_runs_its_experiments_on_the_model_and_quotes_them(tiny_lm):
    app = make_app(lm=tiny_lm)
    async with app.run_test(size=(100, 30)) as pilot:
        lab = await open_lab(pilot)
        assert lab.length == tiny_lm.config.n_ctx  # to the context limit unless n picks a shorter one
        await pilot.press("n")
        assert lab.length == 64
        assert "to 63" in words(lab, "context")  # a length of 64 positions: 0 to 63
        await pilot.press("r")
        await wait_for(pilot, lambda: lab.running is None and lab.result is not None and lab.result.context is not None)
        sweep = lab.result.context
        assert sweep.end == 64 and sweep.positions[-1] == 63 and sweep.complete
        text = words(lab, "context")
        # Quoted in a sentence, or in the busy rule's table when other processes kept the CPUs busy.
        if disturbed(sweep):
            first = say("lab.busy_row.context", position=sweep.positions[0], naive=num(sweep.naive_ms[0]), cached=num(sweep.cached_ms[0]))
        else:
            first = f"{num(sweep.naive_ms[0])} ms without the cache and {num(sweep.cached_ms[0])} ms with it"
        assert first in text
        assert lab.query_one("#plot-context", PlotextPlot).display

        await pilot.press("2", "r")
        await wait_for(pilot, lambda: lab.running is None and lab.result.batch is not None)
        rows = lab.result.batch.rows
        assert [r.batch for r in rows] == list(cost_lab.BATCH_SIZES)
        if disturbed(lab.result.batch):
            quoted = [say("lab.busy_row.batch", batch=count(r.batch), ms=num(r.step_ms), tps=num(r.tokens_per_s)) for r in rows]
        else:
            quoted = [f"tokens/s went from {num(rows[0].tokens_per_s)} to {num(rows[-1].tokens_per_s)}"]
        batch_words = words(lab, "batch")
        assert all(line in batch_words for line in quoted)

        # The result stays with the app: closing and reopening the lab shows it again.
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, StepScreen))
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, CostLabScreen) and app.screen.is_mounted)
        assert app.screen.result is lab.result and words(app.screen, "batch") == batch_words


def endless_sweep(asked_to_stop: threading.Event):
    """A context sweep that measures (a progress tick every 10 ms) until it is told to stop."""

    def sweep(lm, ids, length, on_progress, should_stop):
        for done in range(2000):
            if should_stop():
                asked_to_stop.set()
                return cost_lab.ContextSweep(start=1, end=length, complete=False)
            on_progress(done, 2000)
            threading.Event().wait(0.01)
        raise AssertionError("never told to stop")

    return sweep


@run_async
async def test_space_stops_a_run_and_the_lab_can_run_again(tiny_lm, monkeypatch):
    """An experiment that runs until it is told to stop: ␣ tells it, and the lab is ready again."""
    asked_to_stop = threading.Event()
    monkeypatch.setattr(cost_lab, "context_sweep", endless_sweep(asked_to_stop))
    app = make_app(lm=tiny_lm)
    async with app.run_test(size=(100, 30)) as pilot:
        lab = await open_lab(pilot)
        await pilot.press("a")
        # The machine's rates are measured first; the sweep's own first progress says it is under way.
        await wait_for(pilot, lambda: lab.reported == "context")
        assert not lab.check_action("run", ()) and lab.check_action("stop", ())
        await pilot.press("space")
        await wait_for(pilot, lambda: lab.running is None and asked_to_stop.is_set())
        assert lab.check_action("run", ()) and lab.check_action("run_all", ())
        await pilot.pause(0.3)
        # What the stopped experiment measured is kept; the run went no further.
        assert lab.result.context is not None and not lab.result.context.complete
        assert lab.result.batch is None and lab.result.precision_formats is None


@run_async
async def test_a_tab_chosen_during_a_run_stays_on_show(tiny_lm, monkeypatch):
    """A learner's walk: while an experiment ran, 1 or 2 was pulled back to the running tab at its
    next measurement."""
    monkeypatch.setattr(cost_lab, "context_sweep", endless_sweep(threading.Event()))
    app = make_app(lm=tiny_lm)
    async with app.run_test(size=(100, 30)) as pilot:
        lab = await open_lab(pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: lab.reported == "context" and lab.query_one("#lab-progress").progress > 3)
        await pilot.press("2")
        seen = lab.query_one("#lab-progress").progress
        await wait_for(pilot, lambda: lab.query_one("#lab-progress").progress > seen + 5)
        assert lab.shown == "batch" and lab.running == "context"
        await pilot.press("space")
        await wait_for(pilot, lambda: lab.running is None)
        # Run all from another tab: the first experiment's tab comes to show as it starts (the
        # machine's rates measured already, its first progress is the context's own).
        await pilot.press("3", "a")
        await wait_for(pilot, lambda: lab.reported == "context" and lab.query_one("#lab-progress").progress > 3)
        assert lab.shown == "context"
        await pilot.press("space")
        await wait_for(pilot, lambda: lab.running is None)


@run_async
async def test_rates_measured_on_a_busy_machine_are_measured_again(tiny_lm, monkeypatch):
    """Rates measured while other processes were busy are measured again before the next
    experiment; what was measured before stays."""
    busy, quiet = cost_lab.Machine(5.0, 20.0, 2, 0.7), cost_lab.Machine(30.0, 100.0, 2, 0.0)
    measured = []
    monkeypatch.setattr(cost_lab.Machine, "measure", classmethod(lambda cls: measured.append(1) or (busy, quiet)[len(measured) > 1]))
    batch = cost_lab.BatchSweep(8, [cost_lab.BatchRow(1, 2.0, 1000, 10_000_000)])
    monkeypatch.setattr(cost_lab, "batch_sweep", lambda *a, **k: batch)
    app = make_app(lm=tiny_lm)
    async with app.run_test(size=(100, 30)) as pilot:
        lab = await open_lab(pilot)
        await pilot.press("2", "r")
        await wait_for(pilot, lambda: lab.running is None and lab.result is not None and lab.result.batch is not None)
        warning = say("lab.machine_busy", share=percent(0.7))
        assert lab.result.machine is busy and warning in words(lab, "batch")
        assert "The step of B = " not in words(lab, "batch")  # no bound named
        await pilot.press("r")
        await wait_for(pilot, lambda: lab.running is None and lab.result.machine is quiet)
        assert lab.result.batch is batch
        assert warning not in words(lab, "batch") and "The step of B = " in words(lab, "batch")
        await pilot.press("r")  # quiet rates are kept
        await wait_for(pilot, lambda: lab.running is None)
        assert lab.result.machine is quiet and len(measured) == 2


@run_async
async def test_a_replayed_lab_result_is_shown_and_cannot_be_rerun():
    trace = load(LAB_TRACE)
    app = make_app(trace=trace)
    async with app.run_test(size=(120, 40)) as pilot:
        lab = await open_lab(pilot)
        recorded = cost_lab.LabResult.from_dict(trace.cost_lab)
        assert lab.result.to_dict() == recorded.to_dict()
        assert not lab.check_action("run", ()) and not lab.check_action("run_all", ())
        assert "A recorded lab result" in str(lab.query_one("#lab-status-text", Static).render())
        for name in ("context", "batch", "precision"):
            assert lab.query_one(f"#plot-{name}", PlotextPlot).display
        assert "float16: 1.50 ms a token (0.750× float32)" in words(lab, "precision")


@run_async
async def test_a_trace_without_a_lab_result_says_how_to_record_one():
    app = make_app(trace=load(GENERATION_TRACE))
    async with app.run_test(size=(80, 24)) as pilot:
        lab = await open_lab(pilot)
        assert lab.result is None
        assert "Record one with gpt2viz PROMPT --json FILE --cost-lab." in words(lab, "context")
        # Its status line said "A recorded lab result: ..." under the words that there is none.
        assert str(lab.query_one("#lab-status-text", Static).render()) == (
            "No lab result was recorded in this trace, and a replay has no model to run the experiments.")
        assert not lab.query_one("#plot-context", PlotextPlot).display


# -- what the narration claims follows the numbers ------------------------------------------------


def _result():
    return cost_lab.LabResult.from_dict(load(LAB_TRACE).cost_lab)


def test_the_lengths_to_sweep_double_up_to_the_model_s_context():
    """SmolLM2's 8,192 positions came after 2,048 with nothing between (a learner walk)."""
    from gpt2viz.tui.screens.cost_lab import sweep_lengths

    assert sweep_lengths(5, 8192) == [64, 128, 256, 512, 1024, 2048, 4096, 8192]
    assert sweep_lengths(5, 256) == [64, 128, 256] and sweep_lengths(5, 1024)[-2:] == [512, 1024]
    assert sweep_lengths(100, 1000) == [128, 256, 512, 1000]  # past the prompt's end, then the limit
    assert sweep_lengths(5, 50) == [50]


def test_a_bound_sentence_quotes_the_share_of_the_time_it_names():
    result = _result()
    m = result.machine
    # 20 ms to read 30 MB at 30 GB/s (1 ms) and do 0.3 GFLOP at 150 GFLOP/s (2 ms): fixed work.
    from gpt2viz.tui.lab_narration import bound_sentence

    text = bound_sentence(result, "The step", 30e6, 0.3e9, 20.0)
    assert m.stream_gb_s == 30.0 and "would take only 1.00 ms of its 20.0 ms (5.00%)" in text
    assert "not bound by memory or compute" in text


def test_products_faster_than_the_measured_rate_are_blamed_on_another_format_only_where_there_is_one():
    """0.6 GFLOP at 150 GFLOP/s would take 4 ms; the step took 3. A bfloat16 model's kernels are
    not the float32 product the rate measured; a float32 model's are (a learner walk read "this
    format's kernels compute faster than float32's" of float32 itself)."""
    from gpt2viz.tui.lab_narration import bound_sentence

    result = _result()
    assert result.precision == "float32" and result.machine.compute_gflop_s == 150.0
    own = bound_sentence(result, "The step", 1e6, 0.6e9, 3.0)
    assert "would take 4.00 ms, more than the 3.00 ms it took: its products ran faster than that measurement" in own
    assert "this format" not in own
    other = bound_sentence(result, "The step", 1e6, 0.6e9, 3.0, "bfloat16")
    assert "this format's kernels compute faster than float32's" in other


def test_a_flat_context_curve_is_not_said_to_grow():
    result = _result()
    flat = cost_lab.ContextSweep([5, 50, 100], [2.0, 2.0, 2.01], [1.0, 1.0, 1.0], 5, 101)
    text = context_text(result, flat, 5, 101, "r", "n")
    assert "did not grow measurably" in text and "grows with the position" not in text
    # A length of 101 positions ends at position 100 (the narration said "to 101").
    assert "Generating every token from position 5 to 100 would take" in text
    assert "at positions from the prompt's end (5) to 100, without" in context_text(result, None, 5, 101, "r", "n")
    # The cached curve's own slope: flat here, so its fitted -0.5 ms per 100 positions is said to be noise.
    falling = cost_lab.ContextSweep([5, 50, 100], [2.0, 3.0, 4.0], [1.0, 0.9, 0.5], 5, 101)
    text = context_text(result, falling, 5, 101, "r", "n")
    assert "grows with the position" in text and "did not change measurably over this range" in text
    rising = cost_lab.ContextSweep([5, 50, 100], [2.0, 3.0, 4.0], [1.0, 1.2, 1.4], 5, 101)
    assert "which grow: 0.421 ms more per 100 positions" in context_text(result, rising, 5, 101, "r", "n")
    one = cost_lab.ContextSweep([63], [2.0], [1.0], 63, 64)
    assert "Only position 63 was measured" in context_text(result, one, 63, 64, "r", "n")
    # n chose another length after the run: the words say where the next one goes (nothing changed on screen).
    # First, where the eyes are as n is pressed: at the end it lay below the pane's bottom (a crash walk).
    assert context_text(result, flat, 5, 255, "r", "n").startswith(
        "The next run (r) goes from position 5 to 254; n chooses another length.")
    assert "The next run" not in context_text(result, flat, 5, 101, "r", "n")
    assert "The next run" not in context_text(result, flat, 5, 255, "r", "n", live=False)


def test_no_cause_is_drawn_from_one_slow_batch_size():
    """A learner's walk: B = 2 at 2.23× one sequence's time was said to show that extra rows are not
    free, with B = 4 and B = 8 faster than B = 2 on the same plot."""
    result = _result()
    row = lambda b, ms: cost_lab.BatchRow(b, ms, 10**9 * b, 10**8)  # noqa: E731
    uneven = cost_lab.BatchSweep(64, [row(1, 2.0), row(2, 4.46), row(4, 3.0), row(8, 3.8)], others_cpu=0.0)
    text = batch_text(result, uneven, (1, 2, 4, 8), 64, "r")
    assert ("The step did not grow steadily with B on this run: B = 2 took 2.23× one sequence's time, but B = 4 "
            "only 1.50×.") in text and "not free" not in text
    steady = cost_lab.BatchSweep(64, [row(1, 2.0), row(2, 4.46), row(4, 5.0), row(8, 7.0)], others_cpu=0.0)
    assert "Already at B = 2 the step took 2.23× one sequence's time" in batch_text(result, steady, (1, 2, 4, 8), 64, "r")


def test_a_float32_step_that_reads_a_copy_of_the_table_says_so():
    """A learner's walk: float32 read 28,371,392 B a step in one run and 17,318,212 B in another of
    the same model, unexplained (the bundled model's LM head multiplies by a float16 copy of its
    token table where that was faster)."""
    result = _result()
    rows = result.precision_formats.rows
    base = next(r for r in rows if r.format == "float32")
    copy = dataclasses.replace(base, bytes_read=17_318_212, weight_bytes=78_565_828)
    sweep = cost_lab.PrecisionSweep(result.precision_formats.context,
                                    [copy if r is base else r for r in rows], others_cpu=0.0)
    text = precision_text(result, sweep, (), 255, "r")
    assert "float32 reads only 17,318,212 B (16.5 MiB) a step: its LM head multiplies by a float16 copy" in text
    assert "so the weights take 78,565,828 B (74.9 MiB) in memory" in text
    whole = dataclasses.replace(base, weight_bytes=base.bytes_read)
    plain = cost_lab.PrecisionSweep(result.precision_formats.context, [whole if r is base else r for r in rows])
    assert "float16 copy" not in precision_text(result, plain, (), 255, "r")


def test_bounds_named_are_the_rule_s_verdict():
    result = _result()
    m = result.machine
    text = batch_text(result, result.batch, cost_lab.BATCH_SIZES, 64, "r")
    for row in (result.batch.rows[0], result.batch.rows[-1]):
        bound = step_bound(row.bytes_read, row.step_ms, m.stream_gb_s, row.flops, m.compute_gflop_s)
        sentence = next(p for p in text.split("\n\n") if p.startswith(f"The step of B = {row.batch}:"))
        expected = {"memory": "bound by memory bandwidth", "compute": "bound by compute",
                    "fixed": "not bound by memory or compute", "caches": "processor's caches"}
        if bound.kind in expected:
            assert expected[bound.kind] in sentence
        else:
            assert bound.kind == "partly" and "a large part" in sentence


def test_no_speed_up_is_claimed_that_the_numbers_contradict():
    result = _result()
    slower = cost_lab.PrecisionSweep(
        result.precision_formats.context,
        [cost_lab.PrecisionRow(r.format, 2.0 if r.format == "float32" else 3.0, r.bytes_read, r.weight_bytes,
                               r.quality) for r in result.precision_formats.rows],
    )
    text = precision_text(result, slower, (), 255, "r")
    assert say("lab.precision.no_faster") in text and "Fewer bytes a weight" not in text
    never = cost_lab.ContextSweep([5, 50, 100], [1.0, 1.2, 1.4], [2.0, 2.0, 2.0], 5, 101)
    text = context_text(result, never, 5, 101, "r", "n")
    assert "not faster at the last measured position (100)" in text
    assert "the cache was slower in this range" in text and "× faster" not in text
    wins = result.context
    text = context_text(result, wins, wins.start, wins.end, "r", "n")
    assert f"{num(wins.naive_total_s / wins.cached_total_s)}× faster" in text


def test_no_bound_is_claimed_while_other_processes_kept_the_cpus_busy():
    """Above cpu_share.BUSY_SHARE of the CPUs used by other processes, while an experiment ran or
    while the machine's rates were measured, every experiment says so and names no bound; at or
    below it (or unknown, as in older traces), the bounds are named."""
    result = _result()
    sweeps = {
        "context": lambda r, s: context_text(r, s, s.start, s.end, "r", "n"),
        "batch": lambda r, s: batch_text(r, s, cost_lab.BATCH_SIZES, 64, "r"),
        "precision_formats": lambda r, s: precision_text(r, s, (), s.context, "r"),
    }
    whats = {"context": "A cached step at position", "batch": "The step of B = ", "precision_formats": "The float32 step"}
    for name, text_of in sweeps.items():
        sweep = getattr(result, name)
        assert sweep.others_cpu is None  # the fixed trace predates the measurement
        for share, busy in ((None, False), (0.2, False), (0.21, True), (0.6, True)):
            text = text_of(result, dataclasses.replace(sweep, others_cpu=share))
            warning = say("lab.busy", share=percent(share)) if share is not None else None
            assert (warning in text) if busy else (warning is None or warning not in text), (name, share)
            assert (whats[name] in text) is not busy, (name, share)
        # The machine's rates, measured while other processes were busy, are too low to judge by.
        for share, busy in ((None, False), (0.1, False), (0.5, True)):
            machine = dataclasses.replace(result.machine, others_cpu=share)
            text = text_of(dataclasses.replace(result, machine=machine), sweep)
            warning = say("lab.machine_busy", share=percent(share)) if share is not None else None
            assert (warning in text) if busy else (warning is None or warning not in text), (name, share)
            assert (whats[name] in text) is not busy, (name, share)


# Sentences that draw a slope, a speed-up, a ranking or a cause from times.
CONCLUSIONS = (
    "per 100 positions", "× faster", "faster at every", "not yet faster", "was slower", "does not depend on the length",
    "its time grows", "x float32", "No format was faster", "Fewer bytes a weight", "not free", "stayed within", "so tokens/s",
)


@pytest.mark.parametrize("machine_busy", [False, True])
def test_times_measured_while_busy_are_a_table_and_nothing_is_drawn_from_them(machine_busy):
    """The busy rule: an experiment timed while other processes used more than BUSY_SHARE of the
    CPUs shows its times as a table under the share, and no slope, speed-up, ranking or cause; the
    sentence naming the machine's rates carries its own caveat when they were measured busy."""
    result = _result()
    machine = dataclasses.replace(result.machine, others_cpu=0.6 if machine_busy else 0.0)
    result = dataclasses.replace(result, machine=machine)
    context = dataclasses.replace(
        cost_lab.ContextSweep([5, 50, 100], [1.0, 2.0, 3.0], [1.5, 1.5, 1.5], 5, 101), others_cpu=0.83
    )
    batch = dataclasses.replace(result.batch, others_cpu=0.83)
    precision = dataclasses.replace(result.precision_formats, others_cpu=0.83)
    texts = {
        "context": context_text(result, context, 5, 101, "r", "n"),
        "batch": batch_text(result, batch, cost_lab.BATCH_SIZES, 64, "r"),
        "precision": precision_text(result, precision, (), precision.context, "r"),
    }
    table = say("lab.busy_table", share=percent(0.83))
    rows = {
        "context": [say("lab.busy_row.context", position=p, naive=num(n), cached=num(c))
                    for p, n, c in zip(context.positions, context.naive_ms, context.cached_ms)],
        "batch": [say("lab.busy_row.batch", batch=count(r.batch), ms=num(r.step_ms), tps=num(r.tokens_per_s))
                  for r in batch.rows],
        "precision": [say("lab.busy_row.precision", format=r.format, ms=num(r.step_ms), read=nbytes(r.bytes_read))
                      for r in precision.rows],
    }
    for name, text in texts.items():
        assert "\n".join([table, *rows[name]]) in text, name
        assert [c for c in CONCLUSIONS if c in text] == [], name
        rates = f"measured by the lab while other processes used {percent(0.6)}" in text
        assert rates is machine_busy, name
    # Quiet, the same context sweep draws its lessons.
    quiet = context_text(result, dataclasses.replace(context, others_cpu=0.0), 5, 101, "r", "n")
    assert table not in quiet and "From 50 on the cache was faster" in quiet


# -- how it looks ---------------------------------------------------------------------------------


def open_lab_on(tab: str):
    async def run_before(pilot) -> None:
        await open_lab(pilot)
        await pilot.press({"context": "1", "batch": "2", "precision": "3"}[tab])
        await pilot.pause()

    return run_before


@pytest.mark.parametrize(
    "size, tab", [((120, 40), "context"), ((80, 24), "batch"), ((80, 24), "precision")],
    ids=["120x40-context", "80x24-batch", "80x24-precision"],
)
def test_lab_snapshots(snap_compare, size, tab):
    app = make_app(trace=load(LAB_TRACE))
    assert snap_compare(app, terminal_size=size, run_before=open_lab_on(tab))


@pytest.mark.parametrize("size, tab", [((80, 24), "context"), ((120, 40), "precision")], ids=["80x24-context", "120x40-precision"])
def test_lab_snapshots_zh(snap_compare, size, tab):
    set_language("zh")
    app = make_app(trace=load(LAB_TRACE))
    assert snap_compare(app, terminal_size=size, run_before=open_lab_on(tab))


def test_the_arrow_keys_scroll_the_words_of_the_shown_experiment():
    async def run() -> None:
        from textual.containers import VerticalScroll

        app = make_app(trace=load(LAB_TRACE))
        async with app.run_test(size=(80, 24)) as pilot:
            await open_lab(pilot)
            for tab in ("1", "3"):
                await pilot.press(tab)
                await pilot.pause(0.2)  # the pane shows, then its words take the focus
                words = app.screen.query_one(f"#lab-{app.screen.shown} .lab-words", VerticalScroll)
                assert words.max_scroll_y > 0  # more words than room at 80 x 24
                await pilot.press("down", "down")
                await pilot.pause()
                assert words.scroll_y > 0

    import asyncio

    asyncio.run(run())
