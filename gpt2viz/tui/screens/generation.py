"""The generation view: tokens stream in, with each step's choice, its cost and the KV cache.

The session's model thread generates (`Session.generate`, a job this screen owns) and hands over one
plain step record per token; the screen appends it to its Generation and redraws. Stopping keeps
the text; resuming continues from the prompt and everything generated so far. With no model (a
replayed trace) the recorded generation is shown, read-only.
"""

from __future__ import annotations

import random
from dataclasses import replace

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container


from ...generate import STOP_CANCELLED, new_generator
from ...i18n import N_, _, count, ngettext
from ...trace import Trace
from ..generation import Comparison, Generation, GenerationSettings
from ..facts import RunFacts, StepChoice
from ..language import key_name
from ..widgets.latency_chart import LatencyChart
from ..widgets.lesson_panel import LessonNote
from ..widgets.generation_panels import (
    ChoicePanel,
    CostPanel,
    KVPanel,
    StatusLine,
    TextPanel,
    ViewState,
)
from ..widgets.room_notice import MIN_WIDTH
from ..widgets.top_bar import TopBar
from ..widgets.footer import AppFooter
from .base import AppScreen
from .generation_settings import SettingsScreen

# While tokens stream in, the model thread hands over the steps it made this often, and the panels
# are redrawn for each handover (jobs.Batches).
DRAW_INTERVAL_S = 0.2

STEP = Binding.Group(N_("step"), compact=True)
# The runs of a comparison, named in the status line while they run (msgids: translated there).
NAIVE_LABEL, CACHED_LABEL = N_("no cache"), N_("cached")

# How to read the view; the keys are placeholders, named as they are bound when the help is shown.
HELP_TEXT = N_(
    "{stop} stops a running generation (the text so far stays), resumes it, and once it is done generates "
    "again (with 0 new tokens set, it opens the settings). How to read it: the top shows the prompt (dim) "
    "and the tokens generated after it; {boundaries} shows where each token begins and ends. Under it, "
    "three panels follow the newest step, or the step you pick with {previous} {next}: the choice (the top "
    "tokens before and after temperature, top-k and top-p, and the step's shapes), the cost (time per step: "
    "the prefill in its own colour, then the decode steps; {compare} compares a run without the cache), and "
    "the KV cache after that step (K and V per layer, bytes, the context used). {focus} moves between the "
    "panels; {up} {down} scroll the one with the bright border. ␣ is a space, ↵ a line break."
)


def open_generation(screen) -> None:
    """Opens a generation view over the prompt of the step-through `screen` shows: live with the
    session's model, else the replayed trace's recorded generation (or a line saying there is none)."""
    session, trace = screen.session, screen.trace
    if not session.live and not trace.generation:
        source = session.replay_name(_("This trace"))
        screen.notify(
            _(
                "{source} holds no generation and there is no model to run one. Record one with "
                "gpt2viz PROMPT --json FILE --generate N, or start gpt2viz with --model."
            ).format(source=source),
            title=_("Nothing to generate with"),
            severity="warning",
            markup=False,
        )
        return
    screen.app.push_screen(GenerationScreen(session, trace))


class GenerationScreen(AppScreen[None]):
    """Generates from the prompt of `trace` with the session's model (or shows `trace`'s recorded
    generation)."""

    AUTO_FOCUS = "#choice-panel"
    # Three panels side by side need about 118 columns; below that, two columns (see app.tcss).
    HORIZONTAL_BREAKPOINTS = [(0, "-too-narrow"), (MIN_WIDTH, "-normal"), (118, "-roomy")]
    BINDINGS = [
        # ␣ is how the app writes a space everywhere; it also leaves the 80-column footer room.
        Binding("space", "stop", N_("stop"), id="stop-generation", tooltip=N_("Stop generating; the text so far stays"),
                key_display="␣"),
        Binding("space", "resume", N_("resume"), id="resume-generation", tooltip=N_("Go on generating from the text so far"),
                key_display="␣"),
        Binding("space", "restart", N_("again"), id="restart-generation", tooltip=N_("Generate again from the prompt"),
                key_display="␣"),
        Binding("left,h", "previous_step", N_("step"), id="previous-step", tooltip=N_("Show the previous step's choice"),
                group=STEP),
        Binding("right,l", "next_step", N_("step"), id="next-step", tooltip=N_("Show the next step's choice"), group=STEP),
        Binding("home", "first_step", N_("first step"), id="first-step", tooltip=N_("Show the first step's choice"), show=False),
        Binding("end", "last_step", N_("latest step"), id="latest-step", tooltip=N_("Back to the latest step"), show=False),
        Binding("enter", "open_step", N_("open"), id="open-step",
                tooltip=N_("Open the forward pass of the step on show in the step-through")),
        Binding("s", "settings", N_("settings"), id="generation-settings",
                tooltip=N_("Change new tokens, decoding and the cache")),
        Binding("c", "compare", N_("compare"), id="compare-cache",
                tooltip=N_("Run without and with the KV cache and compare")),
        Binding("b", "boundaries", N_("tokens"), id="token-boundaries",
                tooltip=N_("Show or hide token boundaries in the text"), show=False),
        Binding("g", "restart", N_("again"), id="generate-again", tooltip=N_("Generate again from the prompt"), show=False),
        Binding("m", "cost_lab", N_("cost lab"), id="cost-lab", show=False,
                tooltip=N_("Measure what inference costs here: cache, batch size, number formats")),
        Binding("w", "attribution", N_("which parts"), id="attribution", show=False,
                tooltip=N_("Which parts wrote the answer: direct logit attribution and activation patching")),
        Binding("escape", "back", N_("back"), id="back-to-steps", tooltip=N_("Back to the step-through")),
    ]

    def __init__(self, session, trace: Trace) -> None:
        super().__init__(session)
        self.trace = trace
        self.lm = session.lm
        self.replay = session.replay_path
        self.topk = session.options.topk_logits  # candidates kept per step (the `raw` and `candidates` lists)
        self.stream_gb_s: float | None = None  # this machine's stream rate, once a run measured it
        self.facts = RunFacts.of(trace)
        self.settings = session.generation_settings
        if self.lm is not None and self.settings.precision != self.lm.precision:
            self.settings = replace(self.settings, precision=self.lm.precision)
        self.comparison: Comparison | None = None
        self.selected: int | None = None
        self.boundaries = False
        self.phase = "idle"  # idle, generating or comparing
        if self.lm is None and trace.generation:
            self.gen = Generation.from_record(trace.generation, trace.token_ids, self._prompt_texts(), self.facts.n_ctx)
            self.settings = self.gen.settings
            self.topk = self.gen.topk
        else:
            self.gen = self._new_generation(self.settings)

    def _prompt_texts(self) -> list[str]:
        return [t["text"] for t in self.trace.tokens]

    def _new_generation(self, settings: GenerationSettings, label: str = "") -> Generation:
        return Generation(
            self.trace.token_ids, self._prompt_texts(), settings, self.facts.n_ctx, label=label, topk=self.topk,
            stream_gb_s=self.stream_gb_s,
        )

    @property
    def live(self) -> bool:
        """Whether there is a model to generate with (not a replay)."""
        return self.lm is not None

    @property
    def running(self) -> bool:
        return self.phase != "idle"

    @property
    def state(self) -> ViewState:
        """What the panels draw from."""
        return ViewState(self.facts, self.gen, self.comparison, self.selected, self.running)

    def compose(self) -> ComposeResult:
        yield TopBar(id="top-bar")
        yield TextPanel(id="text-panel")
        yield StatusLine(id="gen-status")
        with Container(id="gen-body"):
            yield ChoicePanel(id="choice-panel")
            yield CostPanel(id="cost-panel")
            yield KVPanel(id="kv-panel")
        yield LessonNote("generation", id="lesson-note")
        yield AppFooter()

    def on_mount(self) -> None:
        self.query_one(LessonNote).draw_from(self.session)
        self._draw()
        if self.live and self.settings.max_new_tokens > 0:
            self.start()

    def on_resize(self, event: events.Resize) -> None:
        # Small terminals: shorter bars, and a footer without padding so every key fits.
        self.query_one(LatencyChart).set_rows(5 if event.size.height >= 34 else 3)
        self.query_one(AppFooter).compact = event.size.width < 100

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "stop":
            return self.running
        if action == "resume":
            return self.live and not self.running and self.gen.can_resume
        if action == "restart":
            return self.live and not self.running and not self.gen.can_resume
        if action in ("settings", "compare"):
            return self.live
        if action in ("previous_step", "next_step", "open_step"):
            return bool(self.gen.steps)
        return True

    # -- drawing -----------------------------------------------------------------------------
    def _draw(self) -> None:
        if self.closing:
            return
        state = self.state
        self.query_one(TopBar).draw_generation(self.trace, self.gen.settings, self.replay, self.session.verification)
        self.query_one(TextPanel).draw(state, self.boundaries)
        self.query_one(StatusLine).draw(state, self.phase, not self.live)
        self.query_one(ChoicePanel).draw(state)
        self.query_one(CostPanel).draw(state)
        self.query_one(KVPanel).draw(state)

    def redraw_language(self) -> None:
        """Everything in the language just chosen, from the generation held (a run goes on)."""
        self.query_one(LessonNote).draw_from(self.session)
        self._draw()

    def verified(self) -> None:
        """The check against transformers ended: the top bar says how it went."""
        self._draw()

    def help_text(self) -> str:
        """How to read the view, in the current language, naming the keys as they are bound now."""
        panel = self.query_one(ChoicePanel)
        keys = {
            name: key_name(self, action)
            for name, action in (
                ("stop", "stop"), ("boundaries", "boundaries"), ("previous", "previous_step"),
                ("next", "next_step"), ("compare", "compare"), ("focus", "focus_next"),
            )
        }
        return _(HELP_TEXT).format(**keys, up=key_name(panel, "scroll_up"), down=key_name(panel, "scroll_down"))

    def _set_phase(self, phase: str) -> None:
        self.phase = phase
        self.refresh_bindings()

    # -- starting and stopping ---------------------------------------------------------------
    @property
    def ablations(self) -> tuple:
        """The parts of the model switched off in the pass this view continues (what if)."""
        return self.trace.ablations

    def start(self, settings: GenerationSettings | None = None) -> None:
        """A new generation from the prompt with `settings` (the current ones if None)."""
        if settings is not None:
            self.settings = settings
        self.gen = self._new_generation(self.settings)
        self.comparison = None
        self.selected = None
        self._launch()

    def resume(self) -> None:
        """Goes on from the prompt and everything generated so far."""
        self._launch()

    def _launch(self) -> None:
        gen = self.gen
        gen.begin_run()
        self._set_phase("generating")
        self._draw()
        if gen.rng is None:
            gen.rng = new_generator(gen.settings.sampling.seed)
        self._generate(gen, gen.context_ids, gen.remaining, gen.settings, gen.rng, self._run_ended)

    def _generate(self, gen: Generation, ids: list[int], max_new: int, settings: GenerationSettings, rng, ended) -> None:
        """One run of the model thread for `gen`; a newer run replaces it (its steps are dropped)."""
        self.session.generate(
            self, ids, max_new, settings, self.topk, self.ablations, rng=rng,
            every_s=DRAW_INTERVAL_S, on_steps=lambda steps: self._steps_generated(gen, steps),
            on_end=lambda record: ended(gen, record),
            on_error=self._run_failed,
        )

    def stop(self) -> None:
        """Asks the running generation to stop after the step under way."""
        self.session.jobs.stop(self, "generate")

    def compare(self) -> None:
        """The prompt generated without the cache, then with it, with the same settings."""
        settings = self.settings
        if not settings.sampling.greedy and settings.sampling.seed is None:
            settings = settings.with_seed(random.randrange(2**31))
            self.notify(
                _("Sampling without a seed: both runs use seed {seed} so that their ids can be compared.").format(
                    seed=settings.sampling.seed
                ),
                timeout=4,
            )
        naive = self._new_generation(replace(settings, use_cache=False), NAIVE_LABEL)
        cached = self._new_generation(replace(settings, use_cache=True), CACHED_LABEL)
        self.gen, self.comparison, self.selected = naive, None, None
        naive.begin_run()
        self._set_phase("comparing")
        self._draw()
        ids = list(self.trace.token_ids)

        def naive_ended(gen: Generation, record: dict) -> None:
            self._end(gen, record)
            if record["stop_reason"] == STOP_CANCELLED:
                self._compare_stopped()
                return
            self.gen = cached
            cached.begin_run()
            self._draw()
            self._generate(cached, ids, settings.max_new_tokens, cached.settings, None, cached_ended)

        def cached_ended(gen: Generation, record: dict) -> None:
            self._end(gen, record)
            if record["stop_reason"] == STOP_CANCELLED:
                self._compare_stopped()
                return
            self.comparison = Comparison(naive, cached)
            self._set_phase("idle")
            self._draw()

        self._generate(naive, ids, settings.max_new_tokens, naive.settings, None, naive_ended)

    def _compare_stopped(self) -> None:
        self.notify(_("Comparison stopped. {key} runs it again.").format(key=key_name(self, "compare")), timeout=3)
        self._set_phase("idle")
        self._draw()

    # -- what the model thread hands over -------------------------------------------------------
    def _steps_generated(self, gen: Generation, steps: list[dict]) -> None:
        """Steps the model thread made since its last handover: drawn now, and it waits for that
        drawing to end before it times the next step (Job.report_drawn, within its bounds)."""
        if gen is not self.gen:
            return
        for step in steps:
            gen.add_step(step)
        self._draw()

    def _end(self, gen: Generation, record: dict) -> None:
        gen.end_run(record["stop_reason"], record.get("others_cpu"))
        if record.get("stream_gb_s") is not None:
            self.stream_gb_s = gen.stream_gb_s = record["stream_gb_s"]

    def _run_ended(self, gen: Generation, record: dict) -> None:
        self._end(gen, record)
        if gen is self.gen:
            self._set_phase("idle")
            self._draw()

    def _run_failed(self, text: str, code: int) -> None:
        self.gen.end_run(STOP_CANCELLED)
        self._set_phase("idle")
        self._draw()
        self.notify(text, title=_("Generation failed"), severity="error", markup=False)

    # -- actions -----------------------------------------------------------------------------
    def action_stop(self) -> None:
        self.stop()

    def action_resume(self) -> None:
        self.resume()

    def action_restart(self) -> None:
        if self.settings.max_new_tokens == 0:  # nothing to generate yet: ask how much first
            self.action_settings()
            return
        self.start()

    def action_compare(self) -> None:
        self.compare()

    def action_settings(self) -> None:
        self.app.push_screen(SettingsScreen(self.settings, self.facts.vocab), self._settings_chosen)

    def _settings_chosen(self, settings: GenerationSettings | None) -> None:
        if settings is None or self.closing:
            return
        if self.lm is not None and settings.precision != self.lm.precision:
            # Another number format: the session loads the model in it, and the app comes back
            # to a new generation view with these settings.
            self.session.jobs.cancel(self)
            self.session.reload_in(settings)
            return
        self.settings = settings
        self.session.keep_generation_settings(settings)
        self.start(settings)

    def action_boundaries(self) -> None:
        self.boundaries = not self.boundaries
        self._draw()

    def _select(self, index: int | None) -> None:
        last = len(self.gen.steps) - 1
        if index is not None and index >= last and self.running:
            index = None  # at the newest step while generating: follow it
        self.selected = index
        self._draw()

    def action_previous_step(self) -> None:
        current = self.state.index
        if current is None or current == 0:
            self.app.bell()
            return
        self._select(current - 1)

    def action_next_step(self) -> None:
        current = self.state.index
        if current is None or current >= len(self.gen.steps) - 1:
            if self.selected is not None:
                self._select(None)
            else:
                self.app.bell()
            return
        self._select(current + 1)

    def action_first_step(self) -> None:
        if not self.gen.steps or self.state.index == 0:
            self.app.bell()
            return
        self._select(0)

    def action_last_step(self) -> None:
        if self.selected is None:  # already following the latest
            self.app.bell()
            return
        self._select(None)

    def action_open_step(self) -> None:
        from .step import StepScreen

        index = self.state.index
        if index is None:
            return
        ids = self.gen.prompt_ids + self.gen.ids[:index]
        step = self.gen.steps[index]
        sampling = self.gen.settings.sampling
        chosen = StepChoice(
            step["id"], step["text"], step.get("chosen_prob"), None if sampling.greedy else sampling
        )
        # Step 0: the prompt's own pass, already recorded; recorded again where the generation's
        # cache was another size than that pass's (its KV panel and the step's gave two sizes).
        if ids == self.trace.token_ids and (not self.live or not step.get("used_cache")):
            self.app.push_screen(StepScreen(self.session, self.trace, from_step=index, chosen=chosen))
            return
        if not self.live:
            self.notify(
                ngettext(
                    "This is a replay: there is no model to run the forward pass of step {index} ({n} token). "
                    "Only step 0's pass, over the prompt, is in the trace. Start gpt2viz with --model to open any step.",
                    "This is a replay: there is no model to run the forward pass of step {index} ({n} tokens). "
                    "Only step 0's pass, over the prompt, is in the trace. Start gpt2viz with --model to open any step.",
                    len(ids),
                ).format(index=index, n=count(len(ids))),
                title=_("Needs a model"),
                severity="warning",
                markup=False,
            )
            return
        if self.running:
            self.stop()
            resume = key_name(self, "resume")
            self.notify(_("Stopped generating to run this step's forward pass; {key} resumes.").format(key=resume), timeout=3)
        # A cached step after the first was a decode step: one new position, the rest in the cache.
        decode = bool(self.gen.steps[index].get("used_cache")) and not self.gen.is_first(index)
        if decode:
            text = _("Recording step {index}'s decode pass: 1 new position, {cached} cached…").format(
                index=index, cached=count(len(ids) - 1)
            )
        else:
            text = ngettext(
                "Recording step {index}'s forward pass over {n} token…",
                "Recording step {index}'s forward pass over {n} tokens…",
                len(ids),
            ).format(index=index, n=count(len(ids)))
        self.notify(text, timeout=2)

        def traced(trace: Trace) -> None:
            # Only onto this view: a key pressed meanwhile may have opened something else.
            if self.app.screen is self and index < len(self.gen.steps):
                self.app.push_screen(StepScreen(self.session, trace, from_step=index, chosen=chosen))

        def failed(text: str, code: int) -> None:
            self.notify(text, title=_("The forward pass failed"), severity="error", markup=False)

        # The pass's KV cache the size the generation's is (generate.py reserves the prompt and
        # every new token), so its panel and the generation's KV panel give one size.
        reserve = len(self.gen.prompt_ids) + self.gen.settings.max_new_tokens
        # Step 0 is the prompt's own pass again: recorded from the prompt as written, so that an empty
        # one is still said to be empty (from its ids it would read as the text '<|endoftext|>').
        source, prompt_length = (self.trace.prompt, None) if index == 0 else (ids, len(self.gen.prompt_ids))
        self.session.trace_step(
            self, source, self.topk, decode, self.ablations, prompt_length=prompt_length, on_result=traced,
            on_error=failed, reserve=reserve,
        )

    def action_cost_lab(self) -> None:
        from .cost_lab import CostLabScreen

        self.app.push_screen(CostLabScreen(self.session, self.trace))

    def action_attribution(self) -> None:
        from .attribution import open_attribution

        open_attribution(self)

    def action_back(self) -> None:
        self.session.jobs.cancel(self)
        self.close()
