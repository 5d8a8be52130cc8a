"""The cost lab: three live experiments on the loaded model, each with a plot and narration.

The experiments (gpt2viz.cost_lab) run in the session's model thread (`Session.measure`, a job
this screen owns) and hand over their progress and their plain results; the screen only draws. The
results live on the session (`lab_result`), so closing and reopening the lab keeps them; a replayed
trace that holds a lab result shows it.
"""

from __future__ import annotations

import math

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, VerticalScroll
from textual.widgets import ProgressBar, Static, TabbedContent, TabPane
from textual_plotext import PlotextPlot

from ... import cost_lab
from ...cpu_share import disturbed
from ...i18n import N_, _, say
from ...trace import Trace
from ..lab_narration import batch_text, context_text, precision_text
from ..formatting import count, num
from ..language import key_name
from ..widgets.lesson_panel import LessonNote
from ..widgets.strip_widget import Prose
from ..widgets.top_bar import TopBar
from ..widgets.footer import AppFooter
from .base import AppScreen

# The tab keys, together in the footer: "1 2 3 tab".
TAB_KEYS = Binding.Group(N_("tab"))

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
# Lengths the context experiment can sweep to (n cycles through those the model allows): powers
# of two from 64, then the model's whole context (SmolLM2's 8,192 after 4,096).
SHORTEST_LENGTH = 64


def sweep_lengths(prompt_length: int, n_ctx: int) -> list[int]:
    """The lengths past the prompt's end (a sweep needs positions to generate at) up to `n_ctx`."""
    lengths, n = [], SHORTEST_LENGTH
    while n < n_ctx:
        if n > prompt_length + 1:
            lengths.append(n)
        n *= 2
    return lengths + [n_ctx]

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


MIN_PLOT = (12, 4)  # cells a plot needs to draw its axes and one point
# Below this height a plot labels only 0 and the top of each y axis. plotext puts each of its
# evenly spaced ticks on the row nearest its value: with a handful of rows several share a row
# (one is dropped) and a label can stand a quarter of the axis from its value (a learner read
# "2.61" beside a 2.05 ms bar at 80 x 24). The bottom and top rows are the limits exactly.
FEW_ROWS = 16


def position_ticks(first: int, last: int, most: int = 5) -> list[int]:
    """At most `most` whole positions from `first` to `last`, both ends among them, evenly spaced
    by a round step (1, 2 or 5 times a power of ten) where the range allows."""
    if last <= first:
        return [first]
    span = last - first
    step = next(m * 10**e for e in range(len(str(span)) + 1) for m in (1, 2, 5) if span / (m * 10**e) <= most - 1)
    inner = [t for t in range((first // step + 1) * step, last, step) if t - first >= step / 2 and last - t >= step / 2]
    while len(inner) > most - 2:  # the ends are always there: every other inner tick goes
        inner = inner[1::2]
    return [first] + inner + [last]


class LabPlot(PlotextPlot):
    """A plot whose texts may hold wide characters (given through `plot_text`), drawn only where it
    has room for its axes; its y axes go from 0 to the tops set by `y_range` (see FEW_ROWS)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.y_tops: dict[str, float] = {}  # yside ("left", "right") -> the axis's top

    def y_range(self, top: float, yside: str = "left") -> None:
        """The y axis on `yside` from 0 to `top` (a plot drawn from 0: flat reads as flat)."""
        self.plt.ylim(0, top, yside=yside)
        self.y_tops[yside] = top

    def render(self) -> Text:
        width, height = self.size
        if width < MIN_PLOT[0] or height < MIN_PLOT[1]:
            return Text("")
        if height < FEW_ROWS:  # (a plot drawn again starts from plotext's own, evenly spaced ticks)
            for yside, top in self.y_tops.items():
                self.plt.yticks([0, top], ["0", num(top)], yside=yside)
        text = super().render()
        if WIDE_FILLER not in text.plain:
            return text
        return Text("").join(text.split(WIDE_FILLER, allow_blank=True))


class CostLabScreen(AppScreen[None]):
    """The three experiments in tabs, run on the session's model; a replay shows a recorded result."""

    BINDINGS = [
        Binding("r", "run", N_("run"), id="lab-run", tooltip=N_("Run the experiment on show")),
        Binding("a", "run_all", N_("run all"), id="lab-run-all", tooltip=N_("Run all three experiments")),
        Binding("space", "stop", N_("stop"), id="lab-stop", tooltip=N_("Stop the running experiment"), key_display="␣"),
        Binding("n", "length", N_("length"), id="lab-length", tooltip=N_("Change how far the context experiment goes")),
        Binding("1", "show('context')", N_("context"), id="lab-context", tooltip=N_("Per-token time against position"),
                group=TAB_KEYS),
        Binding("2", "show('batch')", N_("batch"), id="lab-batch", tooltip=N_("Step time against batch size"), group=TAB_KEYS),
        Binding("3", "show('precision')", N_("formats"), id="lab-precision",
                tooltip=N_("Step time and quality per number format"), group=TAB_KEYS),
        Binding("escape", "back", N_("back"), id="lab-back", tooltip=N_("Back to where the lab was opened")),
    ]

    def help_text(self) -> str:
        """How to read the lab, in the current language, naming the keys as they are bound now."""
        return _(LAB_HELP).format(**{action: key_name(self, action) for action in ("run", "run_all", "stop", "length")})

    def __init__(self, session, trace: Trace) -> None:
        super().__init__(session)
        self.trace = trace
        self.lm = session.lm
        self.result: cost_lab.LabResult | None = session.lab_result_for_model()
        self.replay = session.replay_path
        self.prompt_ids = trace.all_token_ids
        self.n_ctx = n_ctx = int(trace.model["config"]["n_ctx"])  # the loaded model's, live or replayed
        # Lengths past the prompt's end: a sweep needs positions to generate at.
        self.lengths = sweep_lengths(len(self.prompt_ids), n_ctx)
        self.length = cost_lab.default_sweep_length(n_ctx)  # the context limit, up to 1,024; n picks another
        # A LLaMA-family model loads in float32 only so far: no other number format to compare.
        self.one_format = trace.architecture == "llama"
        self.running: str | None = None  # the experiment under way
        self.reported: str | None = None  # the experiment the last progress was of (its tab shown as it starts)

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
        yield LessonNote("cost_lab", id="lesson-note")
        yield AppFooter()

    def on_mount(self) -> None:
        self.query_one(LessonNote).draw_from(self.session)
        self.query_one(TopBar).draw_lab(self.trace, self.replay, self.session.verification)
        self.query_one(LessonNote).draw_from(self.session)
        self._draw_all()
        self._status()
        self._focus_words()

    def _focus_words(self) -> None:
        """The shown experiment's words take the keys: ↑ ↓ and the page keys scroll them. (Textual
        moves the focus after the messages under way, once the pane's tab has shown it.)"""
        self.query_one(f"#lab-{self.shown} .lab-words", VerticalScroll).focus()

    def redraw_language(self) -> None:
        """Every text of the lab in the current language, from the results it has (nothing runs)."""
        tabs = self.query_one(TabbedContent)
        for name in EXPERIMENTS:
            tabs.get_tab(f"lab-{name}").label = _(TITLES[name])
        self.query_one(TopBar).draw_lab(self.trace, self.replay, self.session.verification)
        self.query_one(LessonNote).draw_from(self.session)
        self._draw_all()
        self._status()

    def verified(self) -> None:
        """The check against transformers ended: the top bar says how it went."""
        self.query_one(TopBar).draw_lab(self.trace, self.replay, self.session.verification)

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
        self._focus_words()

    # -- actions -----------------------------------------------------------------------------
    def action_show(self, name: str) -> None:
        self.query_one(TabbedContent).active = f"lab-{name}"
        self._focus_words()  # the keys' way: no TabActivated for a set `active`

    def action_back(self) -> None:
        self.session.jobs.cancel(self)
        self.close()

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
        self.session.jobs.stop(self, "measure")

    def _start(self, experiments: tuple[str, ...]) -> None:
        if self.one_format:
            experiments = tuple(e for e in experiments if e != "precision")
            if not experiments:
                self.notify(say("lab.precision.one_format"), markup=False)
                return
        self.running, self.reported = experiments[0], None
        self.query_one(ProgressBar).update(total=None, progress=0)  # not the last run's count until the first progress
        self.refresh_bindings()
        self._status()
        self.session.measure(
            self, self.result, experiments, self.prompt_ids, self.length,
            on_progress=self._progressed, on_measured=self._measured, on_end=self._ended, on_error=self._failed,
        )

    # -- what the model thread hands over -------------------------------------------------------------
    def _progressed(self, experiment: str, done: int, total: int) -> None:
        started = experiment != self.reported  # the first progress of an experiment (one of "run all"'s)
        self.running = self.reported = experiment
        # Its tab comes to show as it starts; a tab the reader chose meanwhile is left on show.
        if started and experiment in EXPERIMENTS and self.shown != experiment:
            self.action_show(experiment)
        self.query_one(ProgressBar).update(total=total, progress=done)
        self._status()

    def _measured(self, experiment: str, value) -> None:
        if experiment == "machine":
            if self.result is None:
                self.result = value
            else:  # measured again: the experiments measured so far stay, judged by the new rates
                self.result.machine = value.machine
                self._draw_all()
        else:
            setattr(self.result, {"precision": "precision_formats"}.get(experiment, experiment), value)
            self._draw(experiment)
        self.session.keep_lab_result(self.result)

    def _ended(self, _nothing=None) -> None:
        self.running = None
        self.refresh_bindings()
        self._status()

    def _failed(self, text: str, code: int) -> None:
        self.notify(text, title=_("The experiment failed"), severity="error", markup=False)
        self._ended()

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
        elif self.result is None:
            text = _("No lab result was recorded in this trace, and a replay has no model to run the experiments.")
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
        plot.y_tops = {}
        if name == "context":
            sweep = result.context if result else None
            start = self._start_position()
            words.update(context_text(result, sweep, start, self.length, key_name(self, "run"), key_name(self, "length"),
                                      self.live))
            plot.display = bool(sweep and sweep.positions)
            if plot.display:
                plt.plot(sweep.positions, sweep.naive_ms, label=plot_text(_("no cache")), marker="braille")
                plt.plot(sweep.positions, sweep.cached_ms, label=plot_text(_("cached")), marker="braille")
                # The crossover is a ranking: none drawn from times measured busy (the busy rule).
                if sweep.crossover is not None and sweep.crossover != sweep.positions[0] and not disturbed(sweep):
                    plt.vline(sweep.crossover)
                plot.y_range(max(sweep.naive_ms + sweep.cached_ms) * 1.05)
                ticks = position_ticks(sweep.positions[0], sweep.positions[-1])
                plt.xticks(ticks, [count(t) for t in ticks])  # positions are whole (plotext's own read 67.5)
                plt.xlabel(plot_text(_("position")))
        elif name == "batch":
            sweep = result.batch if result else None
            context = cost_lab.cached_positions(cost_lab.BATCH_CONTEXT, n_ctx)
            words.update(batch_text(result, sweep, cost_lab.BATCH_SIZES, context, key_name(self, "run")))
            plot.display = bool(sweep and sweep.rows)
            if plot.display:
                # Batch sizes double: placed at log2(B), evenly, and labelled with B. (Not
                # plotext's log scale, which fails on a plot squeezed to a few cells.)
                xs = [math.log2(r.batch) for r in sweep.rows]
                plt.plot(xs, [r.step_ms for r in sweep.rows], label=plot_text(_("ms a step")), marker="braille")
                plt.plot(xs, [r.tokens_per_s for r in sweep.rows], label=plot_text(_("tokens/s")), yside="right",
                         marker="braille")
                plt.xticks(xs, [str(r.batch) for r in sweep.rows])
                plot.y_range(max(r.step_ms for r in sweep.rows) * 1.05)
                plot.y_range(max(r.tokens_per_s for r in sweep.rows) * 1.05, yside="right")
                plt.xlabel("B")
        else:
            sweep = result.precision_formats if result else None
            context = cost_lab.cached_positions(cost_lab.PRECISION_CONTEXT, n_ctx)
            if self.one_format:
                words.update(say("lab.precision.one_format"))
            else:
                words.update(precision_text(result, sweep, tuple(cost_lab.PRECISIONS), context, key_name(self, "run")))
            plot.display = bool(sweep and sweep.rows)
            if plot.display:
                plt.bar([r.format for r in sweep.rows], [r.step_ms for r in sweep.rows], width=0.4)
                plot.y_range(max(r.step_ms for r in sweep.rows) * 1.05)
        if plot.display:
            plt.title(plot_text(_(PLOT_TITLES[name])))
        if result is None and not self.live:
            words.update(say("lab.replay_empty", command=RECORD_COMMAND))
        plot.refresh()

    def _start_position(self) -> int:
        return cost_lab.sweep_start(len(self.prompt_ids), self.length)
