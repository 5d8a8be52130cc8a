"""The cost lab: three live experiments on the loaded model, each with a plot and narration.

The experiments (gpt2viz.cost_lab) run in a worker, holding MODEL_LOCK, and post their progress
and their plain results; the screen only draws. The results live on the app (`lab_result`), so
closing and reopening the lab keeps them; a replayed trace that holds a lab result shows it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, ProgressBar, Static, TabbedContent, TabPane
from textual.worker import get_current_worker
from textual_plotext import PlotextPlot

from ... import cost_lab
from ...trace import Trace
from ..background import locked, reporting, run_detached
from ..lab_narration import TEXT, batch_text, context_text, precision_text
from ..widgets.room_notice import RoomNotice
from ..widgets.top_bar import TopBar

EXPERIMENTS = ("context", "batch", "precision")
TITLES = {"context": "Context length", "batch": "Batch size", "precision": "Number format"}
# Lengths the context experiment can sweep to (n cycles through those the model allows).
LENGTHS = (64, 128, 256, 512, 1024, 2048)

HELP_TEXT = (
    "The cost lab measures, on this machine and this model, what inference costs and why. Context length: "
    "the time of one new token at each position, without the KV cache (a full pass over everything so far) "
    "and with it (one position against the cache). Batch size: one decode step for B sequences at once; the "
    "weights are read once a step whatever B is. Number format: a decode step in float32, bfloat16, float16 "
    "and int8, the bytes each reads, and how far each format's logits are from float32's. r runs the "
    "experiment on show, a runs all three, ␣ stops a run, n changes the length of the context experiment. "
    "The narration quotes only this run's numbers, and says what bounds a step by comparing its time with "
    "the memory and compute rates the lab measured."
)


class CostLabScreen(Screen):
    """The three experiments in tabs; `lm` runs them, or a recorded result is shown."""

    HELP_TEXT = HELP_TEXT
    PALETTE_TEXT = "Command palette: theme, keys, screenshot"

    BINDINGS = [
        Binding("r", "run", "run", id="lab-run", tooltip="Run the experiment on show"),
        Binding("a", "run_all", "run all", id="lab-run-all", tooltip="Run all three experiments"),
        Binding("space", "stop", "stop", id="lab-stop", tooltip="Stop the running experiment", key_display="␣"),
        Binding("n", "length", "length", id="lab-length", tooltip="Change how far the context experiment goes"),
        Binding("1", "show('context')", "context", id="lab-context", tooltip="Per-token time against position",
                show=False),
        Binding("2", "show('batch')", "batch", id="lab-batch", tooltip="Step time against batch size", show=False),
        Binding("3", "show('precision')", "formats", id="lab-precision", tooltip="Step time and quality per number format",
                show=False),
        Binding("escape", "back", "back", id="lab-back", tooltip="Back to where the lab was opened"),
    ]

    @dataclass(eq=False)
    class Progressed(Message):
        run: int
        experiment: str
        done: int
        total: int

    @dataclass(eq=False)
    class Measured(Message):
        """Run `run` finished `experiment` (or the machine's rates); the result is plain data."""

        run: int
        experiment: str
        result: object

    @dataclass(eq=False)
    class Ended(Message):
        run: int
        error: str | None = None

    def __init__(self, trace: Trace, lm=None, result: cost_lab.LabResult | None = None, replay: str | None = None) -> None:
        super().__init__()
        self.trace = trace
        self.lm = lm
        self.result = result
        self.replay = replay
        self.prompt_ids = trace.all_token_ids
        self.n_ctx = n_ctx = int(trace.model["config"]["n_ctx"])  # the loaded model's, live or replayed
        # Lengths past the prompt's end: a sweep needs positions to generate at.
        self.lengths = [n for n in LENGTHS if len(self.prompt_ids) + 1 < n < n_ctx] + [n_ctx]
        self.length = n_ctx  # to the context limit; n picks a shorter length
        self.running: str | None = None  # the experiment under way
        self._run = 0
        self._stop = threading.Event()

    def compose(self) -> ComposeResult:
        yield TopBar(id="top-bar")
        with TabbedContent(id="lab-tabs", initial="lab-context"):
            for name in EXPERIMENTS:
                with TabPane(TITLES[name], id=f"lab-{name}"):
                    with Container(classes="lab-pane"):
                        yield PlotextPlot(id=f"plot-{name}", classes="lab-plot")
                        with VerticalScroll(classes="lab-words"):
                            yield Static(id=f"words-{name}", classes="lab-text")
        with Container(id="lab-status"):
            yield Static(id="lab-status-text")
            yield ProgressBar(id="lab-progress", show_eta=False)
        yield RoomNotice(id="room-notice")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(TopBar).draw_lab(self.trace, self.replay)
        self._draw_all()
        self._status()

    @property
    def live(self) -> bool:
        return self.lm is not None

    @property
    def shown(self) -> str:
        active = self.query_one(TabbedContent).active or "lab-context"
        return active.removeprefix("lab-")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("run", "run_all"):
            return self.live and self.running is None
        if action == "stop":
            return self.running is not None
        if action == "length":
            return self.live and self.running is None and self.shown == "context"
        return True

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.refresh_bindings()

    # -- actions -----------------------------------------------------------------------------
    def action_show(self, name: str) -> None:
        self.query_one(TabbedContent).active = f"lab-{name}"

    def action_back(self) -> None:
        self._stop_run()
        self.dismiss()

    def action_length(self) -> None:
        i = self.lengths.index(self.length) if self.length in self.lengths else -1
        self.length = self.lengths[(i + 1) % len(self.lengths)]
        self._draw("context")

    def action_run(self) -> None:
        self._start((self.shown,))

    def action_run_all(self) -> None:
        self._start(EXPERIMENTS)

    def action_stop(self) -> None:
        """The experiment under way ends at its next measurement, keeping what it measured."""
        self._stop_run()

    def _stop_run(self) -> None:
        self._stop.set()

    def _start(self, experiments: tuple[str, ...]) -> None:
        self._run += 1
        self._stop = threading.Event()
        self.running = experiments[0]
        self.refresh_bindings()
        self._status()
        self._experiments(self._run, experiments, self._stop)

    # -- the worker ---------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="cost-lab", exit_on_error=False)
    def _experiments(self, run: int, experiments: tuple[str, ...], stop: threading.Event) -> None:
        """Runs `experiments` in a model thread, one after the other. ␣ sets `stop`: the experiment
        under way ends at its next measurement with what it measured so far, and no other starts."""
        lm, ids = self.lm, self.prompt_ids
        worker = get_current_worker()
        cancelled = lambda: worker.is_cancelled  # noqa: E731  (the app is closing)
        stopped = lambda: stop.is_set() or worker.is_cancelled  # noqa: E731
        with reporting(lambda text, code: self.post_message(self.Ended(run, text))):
            if self.result is None:
                self.post_message(self.Progressed(run, "machine", 0, 1))
                result = run_detached(locked(lambda: cost_lab.new_result(lm)), cancelled)
                self.post_message(self.Measured(run, "machine", result))
            for name in experiments:
                if stopped():
                    break

                def progress(done: int, total: int, name=name) -> None:
                    self.post_message(self.Progressed(run, name, done, total))

                progress(0, 1)
                call = {
                    "context": lambda: cost_lab.context_sweep(lm, ids, self.length, on_progress=progress, should_stop=stopped),
                    "batch": lambda: cost_lab.batch_sweep(lm, ids, on_progress=progress, should_stop=stopped),
                    "precision": lambda: cost_lab.precision_sweep(lm, ids, on_progress=progress, should_stop=stopped),
                }[name]
                self.post_message(self.Measured(run, name, run_detached(locked(call), cancelled)))
        self.post_message(self.Ended(run))

    def on_cost_lab_screen_progressed(self, message: Progressed) -> None:
        if message.run != self._run:
            return
        self.running = message.experiment
        if message.experiment in EXPERIMENTS and self.shown != message.experiment:
            self.action_show(message.experiment)
        bar = self.query_one(ProgressBar)
        bar.update(total=message.total, progress=message.done)
        self._status()

    def on_cost_lab_screen_measured(self, message: Measured) -> None:
        if message.run != self._run:
            return
        if message.experiment == "machine":
            if self.result is None:
                self.result = message.result
        else:
            setattr(self.result, {"precision": "precision_formats"}.get(message.experiment, message.experiment), message.result)
            self._draw(message.experiment)
        self.post_message(LabResultChanged(self.result))

    def on_cost_lab_screen_ended(self, message: Ended) -> None:
        if message.error is not None:
            self.notify(message.error, title="The experiment failed", severity="error", markup=False)
        if message.run == self._run:
            self.running = None
            self.refresh_bindings()
            self._status()

    # -- drawing -----------------------------------------------------------------------------
    def _status(self) -> None:
        bar = self.query_one(ProgressBar)
        bar.display = self.running is not None
        key = f"status.{self.running}" if self.running is not None else ("status.idle" if self.live else "status.replay")
        self.query_one("#lab-status-text", Static).update(TEXT[key])

    def _draw_all(self) -> None:
        for name in EXPERIMENTS:
            self._draw(name)

    def _draw(self, name: str) -> None:
        result, n_ctx = self.result, self.n_ctx
        words = self.query_one(f"#words-{name}", Static)
        plot = self.query_one(f"#plot-{name}", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        if name == "context":
            sweep = result.context if result else None
            words.update(context_text(result, sweep, self._start_position(), self.length))
            plot.display = bool(sweep and sweep.positions)
            if plot.display:
                plt.plot(sweep.positions, sweep.naive_ms, label=TEXT["legend.naive"], marker="braille")
                plt.plot(sweep.positions, sweep.cached_ms, label=TEXT["legend.cached"], marker="braille")
                if sweep.crossover is not None and sweep.crossover != sweep.positions[0]:
                    plt.vline(sweep.crossover)
                plt.ylim(0, max(sweep.naive_ms + sweep.cached_ms) * 1.05)  # from 0: flat reads as flat
                plt.xlabel(TEXT["axis.position"])
        elif name == "batch":
            sweep = result.batch if result else None
            context = cost_lab.cached_positions(cost_lab.BATCH_CONTEXT, n_ctx)
            words.update(batch_text(result, sweep, cost_lab.BATCH_SIZES, context))
            plot.display = bool(sweep and sweep.rows)
            if plot.display:
                xs = [r.batch for r in sweep.rows]
                plt.plot(xs, [r.step_ms for r in sweep.rows], label=TEXT["legend.step_ms"], marker="braille")
                plt.plot(xs, [r.tokens_per_s for r in sweep.rows], label=TEXT["legend.tokens_per_s"], yside="right",
                         marker="braille")
                plt.xscale("log", "lower")
                plt.xticks(xs, [str(b) for b in xs])
                plt.ylim(0, max(r.step_ms for r in sweep.rows) * 1.05)
                plt.ylim(0, max(r.tokens_per_s for r in sweep.rows) * 1.05, yside="right")
                plt.xlabel(TEXT["axis.batch"])
        else:
            sweep = result.precision_formats if result else None
            context = cost_lab.cached_positions(cost_lab.PRECISION_CONTEXT, n_ctx)
            words.update(precision_text(result, sweep, tuple(cost_lab.PRECISIONS), context))
            plot.display = bool(sweep and sweep.rows)
            if plot.display:
                plt.bar([r.format for r in sweep.rows], [r.step_ms for r in sweep.rows], width=0.4)
        if plot.display:
            plt.title(TEXT[f"plot.{name}"])
        if result is None and not self.live:
            words.update(TEXT["replay.empty"])
        plot.refresh()

    def _start_position(self) -> int:
        return cost_lab.sweep_start(len(self.prompt_ids), self.length)


@dataclass(eq=False)
class LabResultChanged(Message):
    """The lab measured something: the app keeps the result for the next time the lab opens."""

    result: cost_lab.LabResult
