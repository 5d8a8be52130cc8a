"""The cost lab: three live experiments on the loaded model, each with a plot and narration.

The experiments (gpt2viz.cost_lab) run in a worker, holding MODEL_LOCK, and post their progress
and their plain results; the screen only draws. The results live on the app (`lab_result`), so
closing and reopening the lab keeps them; a replayed trace that holds a lab result shows it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text
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
from ...cpu_share import disturbed
from ...i18n import N_, _, say
from ...trace import Trace
from ..background import locked, reporting, run_detached
from ..lab_narration import batch_text, context_text, precision_text
from ..language import key_name
from ..widgets.room_notice import RoomNotice
from ..widgets.strip_widget import Prose
from ..widgets.top_bar import TopBar

EXPERIMENTS = ("context", "batch", "precision")
TITLES = {"context": N_("Context length"), "batch": N_("Batch size"), "precision": N_("Number format")}
PLOT_TITLES = {
    "context": N_("ms per new token, by position"),
    "batch": N_("one decode step for B sequences"),
    "precision": N_("ms a decode step, by number format"),
}
# What the status line says while an experiment runs ({stop}: the key that stops it).
STATUS = {
    "machine": N_("Measuring this machine's memory and compute rates ({stop} stops)"),
    "context": N_("Timing a new token at position after position, without and with the cache ({stop} stops)"),
    "batch": N_("Timing batched decode steps ({stop} stops)"),
    "precision": N_("Loading each number format and timing its decode step ({stop} stops)"),
}
# How to record a lab result (a command line: the same in every language).
RECORD_COMMAND = "gpt2viz PROMPT --json FILE --cost-lab"
# Lengths the context experiment can sweep to (n cycles through those the model allows).
LENGTHS = (64, 128, 256, 512, 1024, 2048)

LAB_HELP = N_(
    "The cost lab measures, on this machine and this model, what inference costs and why. Context length: "
    "the time of one new token at each position, without the KV cache (a full pass over everything so far) "
    "and with it (one position against the cache). Batch size: one decode step for B sequences at once; the "
    "weights are read once a step whatever B is. Number format: a decode step in float32, bfloat16, float16 "
    "and int8, the bytes each reads, and how far each format's logits are from float32's. {run} runs the "
    "experiment on show, {run_all} runs all three, {stop} stops a run, {length} changes the length of the "
    "context experiment. The narration quotes only this run's numbers, and says what bounds a step by "
    "comparing its time with the memory and compute rates the lab measured."
)


# Plotext gives every character one cell; a wide (Chinese) character goes in followed by this
# filler, which takes its second cell and is removed once the plot is drawn.
WIDE_FILLER = "\u2060"


def plot_text(text: str) -> str:
    """`text` for a title, legend or axis label of a LabPlot."""
    return "".join(ch + WIDE_FILLER * (cell_len(ch) - 1) for ch in text)


class LabPlot(PlotextPlot):
    """A plot whose texts may hold wide characters (given through `plot_text`)."""

    def render(self) -> Text:
        text = super().render()
        if WIDE_FILLER not in text.plain:
            return text
        return Text("").join(text.split(WIDE_FILLER, allow_blank=True))


class CostLabScreen(Screen):
    """The three experiments in tabs; `lm` runs them, or a recorded result is shown."""

    BINDINGS = [
        Binding("r", "run", N_("run"), id="lab-run", tooltip=N_("Run the experiment on show")),
        Binding("a", "run_all", N_("run all"), id="lab-run-all", tooltip=N_("Run all three experiments")),
        Binding("space", "stop", N_("stop"), id="lab-stop", tooltip=N_("Stop the running experiment"), key_display="␣"),
        Binding("n", "length", N_("length"), id="lab-length", tooltip=N_("Change how far the context experiment goes")),
        Binding("1", "show('context')", N_("context"), id="lab-context", tooltip=N_("Per-token time against position"),
                show=False),
        Binding("2", "show('batch')", N_("batch"), id="lab-batch", tooltip=N_("Step time against batch size"), show=False),
        Binding("3", "show('precision')", N_("formats"), id="lab-precision",
                tooltip=N_("Step time and quality per number format"), show=False),
        Binding("escape", "back", N_("back"), id="lab-back", tooltip=N_("Back to where the lab was opened")),
    ]

    def help_text(self) -> str:
        """How to read the lab, in the current language, naming the keys as they are bound now."""
        return _(LAB_HELP).format(**{action: key_name(self, action) for action in ("run", "run_all", "stop", "length")})

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
                with TabPane(_(TITLES[name]), id=f"lab-{name}"):
                    with Container(classes="lab-pane"):
                        yield LabPlot(id=f"plot-{name}", classes="lab-plot")
                        with VerticalScroll(classes="lab-words"):
                            yield Prose(id=f"words-{name}", classes="lab-text")
        with Container(id="lab-status"):
            yield Static(id="lab-status-text")
            yield ProgressBar(id="lab-progress", show_eta=False)
        yield RoomNotice(id="room-notice")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(TopBar).draw_lab(self.trace, self.replay)
        self._draw_all()
        self._status()
        self.call_after_refresh(self._focus_words)

    def _focus_words(self) -> None:
        """The shown experiment's words take the keys: ↑ ↓ and the page keys scroll them."""
        self.query_one(f"#lab-{self.shown} .lab-words", VerticalScroll).focus()

    def redraw_language(self) -> None:
        """Every text of the lab in the current language, from the results it has (nothing runs)."""
        tabs = self.query_one(TabbedContent)
        for name in EXPERIMENTS:
            tabs.get_tab(f"lab-{name}").label = _(TITLES[name])
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
        self.set_timer(0.05, self._focus_words)  # once the pane is shown (a hidden one takes no focus)

    # -- actions -----------------------------------------------------------------------------
    def action_show(self, name: str) -> None:
        self.query_one(TabbedContent).active = f"lab-{name}"
        self.set_timer(0.05, self._focus_words)  # the keys' way: no TabActivated for a set `active`

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
            if self.result is None or disturbed(self.result.machine):  # rates measured on a busy machine: again
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
            else:  # measured again: the experiments measured so far stay, judged by the new rates
                self.result.machine = message.result.machine
                self._draw_all()
        else:
            setattr(self.result, {"precision": "precision_formats"}.get(message.experiment, message.experiment), message.result)
            self._draw(message.experiment)
        self.post_message(LabResultChanged(self.result))

    def on_cost_lab_screen_ended(self, message: Ended) -> None:
        if message.error is not None:
            self.notify(message.error, title=_("The experiment failed"), severity="error", markup=False)
        if message.run == self._run:
            self.running = None
            self.refresh_bindings()
            self._status()

    # -- drawing -----------------------------------------------------------------------------
    def _status(self) -> None:
        bar = self.query_one(ProgressBar)
        bar.display = self.running is not None
        if self.running is not None:
            text = _(STATUS[self.running]).format(stop=key_name(self, "stop"))
        elif self.live:
            text = _("{run} runs the experiment on show, {run_all} runs all three.").format(
                run=key_name(self, "run"), run_all=key_name(self, "run_all")
            )
        else:
            text = _("A recorded lab result: there is no model to run the experiments again.")
        self.query_one("#lab-status-text", Static).update(text)

    def _draw_all(self) -> None:
        for name in EXPERIMENTS:
            self._draw(name)

    def _draw(self, name: str) -> None:
        result, n_ctx = self.result, self.n_ctx
        words = self.query_one(f"#words-{name}", Prose)
        plot = self.query_one(f"#plot-{name}", LabPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        if name == "context":
            sweep = result.context if result else None
            start = self._start_position()
            words.update(context_text(result, sweep, start, self.length, key_name(self, "run"), key_name(self, "length")))
            plot.display = bool(sweep and sweep.positions)
            if plot.display:
                plt.plot(sweep.positions, sweep.naive_ms, label=plot_text(_("no cache")), marker="braille")
                plt.plot(sweep.positions, sweep.cached_ms, label=plot_text(_("cached")), marker="braille")
                if sweep.crossover is not None and sweep.crossover != sweep.positions[0]:
                    plt.vline(sweep.crossover)
                plt.ylim(0, max(sweep.naive_ms + sweep.cached_ms) * 1.05)  # from 0: flat reads as flat
                plt.xlabel(plot_text(_("position")))
        elif name == "batch":
            sweep = result.batch if result else None
            context = cost_lab.cached_positions(cost_lab.BATCH_CONTEXT, n_ctx)
            words.update(batch_text(result, sweep, cost_lab.BATCH_SIZES, context, key_name(self, "run")))
            plot.display = bool(sweep and sweep.rows)
            if plot.display:
                xs = [r.batch for r in sweep.rows]
                plt.plot(xs, [r.step_ms for r in sweep.rows], label=plot_text(_("ms a step")), marker="braille")
                plt.plot(xs, [r.tokens_per_s for r in sweep.rows], label=plot_text(_("tokens/s")), yside="right",
                         marker="braille")
                plt.xscale("log", "lower")
                plt.xticks(xs, [str(b) for b in xs])
                plt.ylim(0, max(r.step_ms for r in sweep.rows) * 1.05)
                plt.ylim(0, max(r.tokens_per_s for r in sweep.rows) * 1.05, yside="right")
                plt.xlabel("B")
        else:
            sweep = result.precision_formats if result else None
            context = cost_lab.cached_positions(cost_lab.PRECISION_CONTEXT, n_ctx)
            words.update(precision_text(result, sweep, tuple(cost_lab.PRECISIONS), context, key_name(self, "run")))
            plot.display = bool(sweep and sweep.rows)
            if plot.display:
                plt.bar([r.format for r in sweep.rows], [r.step_ms for r in sweep.rows], width=0.4)
        if plot.display:
            plt.title(plot_text(_(PLOT_TITLES[name])))
        if result is None and not self.live:
            words.update(say("lab.replay_empty", command=RECORD_COMMAND))
        plot.refresh()

    def _start_position(self) -> int:
        return cost_lab.sweep_start(len(self.prompt_ids), self.length)


@dataclass(eq=False)
class LabResultChanged(Message):
    """The lab measured something: the app keeps the result for the next time the lab opens."""

    result: cost_lab.LabResult
