"""The gpt2viz app: loads (or replays) a trace, then steps through it.

`make_app(lm=..., trace=..., options=...)` builds the app (tests inject a model or a trace);
`run_app(options)` is what the CLI calls: it returns the exit code and the error to report, if any.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable
from dataclasses import replace
from pathlib import Path

from textual import work
from collections.abc import Iterable

from textual.app import App, SystemCommand
from textual.command import CommandPalette
from textual.screen import Screen
from textual.theme import ThemeProvider
from textual.binding import Binding
from textual.worker import get_current_worker

from ..crash_log import unexpected_error_line
from ..errors import DownloadCancelled
from ..i18n import LANGUAGES, N_, _, language, set_language
from ..options import RunOptions
from ..process import freeze_startup_objects
from ..text_safety import safe_line, safe_text
from ..trace import Trace
from ..interventions import Ablation, parse_ablations
from .background import locked, measure_changes, record_pass, reporting, run_detached
from .commands import Palette
from .generation import GenerationSettings
from .language import translate_bindings
from .messages import DownloadProgressed, LoadFailed, LoadProgressed, TraceRecorded
from .screens.cost_lab import CostLabScreen, LabResultChanged
from .screens.generation import GenerationScreen
from .screens.help import HelpScreen
from .screens.loading import LoadingScreen
from .screens.prompt import PromptScreen
from .screens.step import WIDE, StepScreen
from .widgets.room_notice import MIN_HEIGHT, MIN_WIDTH

LOAD_STEPS = 3


def throttled(report, interval_s: float = 0.1):
    """`report` called at most every `interval_s` (a download reports every 10 MB chunk's pieces),
    and always for a file's last bytes."""
    last = [0.0]

    def call(progress) -> None:
        now = time.monotonic()
        if now - last[0] >= interval_s or progress.file_done >= progress.file_total:
            last[0] = now
            report(progress)

    return call


class Gpt2VizApp(App[int]):
    """Shows one GPT-2 forward pass, stage by stage, from a recorded Trace."""

    CSS_PATH = "app.tcss"
    TITLE = "gpt2viz"
    HORIZONTAL_BREAKPOINTS = [(0, "-too-narrow"), (MIN_WIDTH, "-normal"), (100, "-roomy"), (WIDE, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-too-short"), (MIN_HEIGHT, "-tall")]

    BINDINGS = [
        Binding("g", "generate", N_("generate"), id="generate", tooltip=N_("Open the generation view")),
        # Out of the footers (full at 80 columns): the side panel and the cost panel name it.
        Binding("m", "cost_lab", N_("cost lab"), id="cost-lab", show=False,
                tooltip=N_("Measure what inference costs here: cache, batch size, number formats")),
        Binding("w", "attribution", N_("which parts"), id="attribution", show=False,
                tooltip=N_("Which parts wrote the answer: direct logit attribution and activation patching")),
        # The description names the other language, in that language, so a reader of either finds it.
        # Out of the footers too (the help and the palette list it).
        Binding("L", "switch_language", N_("中文"), id="switch-language", show=False,
                tooltip=N_("Show the app in Chinese (again: back to English)")),
        Binding("question_mark", "help", N_("help"), id="help", tooltip=N_("Show all keys and how to read the screens")),
        Binding("q", "quit", N_("quit"), id="quit", tooltip=N_("Leave gpt2viz")),
        # Textual only hints at ctrl+q on ctrl+c; people expect ctrl+c to leave a terminal app.
        Binding("ctrl+c", "quit", N_("quit"), id="quit-ctrl-c", show=False, priority=True, tooltip=N_("Leave gpt2viz")),
    ]

    def __init__(self, lm=None, trace: Trace | None = None, options: RunOptions | None = None) -> None:
        super().__init__()
        self.lm = lm
        self.trace = trace
        self.options = options or RunOptions()
        self.prompt = trace.prompt if trace is not None else self.options.prompt
        self.error: str | None = None
        self.exit_code = 0
        self.farewell: str | None = None  # a line to say on leaving that is no error (a cancelled download)
        self._stop_download = threading.Event()  # set: the loading worker's download stops at its next piece
        self.generation_settings = GenerationSettings.from_options(self.options)
        self._generate_after_load = False  # a reload for another number format returns to generation
        self.ablations: list[Ablation] = []  # parts of the model switched off (what if), in order
        self.verification = None  # gpt2viz.verify.Verification, once checked from the palette
        self.changes: list[dict] | None = None  # what they did to the prediction (TraceRecorded)
        self.lab_result = None  # what the cost lab measured (or a replayed trace recorded)
        if trace is not None and trace.cost_lab is not None:
            from ..cost_lab import LabResult

            self.lab_result = LabResult.from_dict(trace.cost_lab)

    @property
    def replay_path(self) -> str | None:
        """The trace file being replayed, if this is a replay."""
        return self.options.replay

    @property
    def is_replay(self) -> bool:
        """Whether there is no model to run (a trace given without a model)."""
        return self.lm is None and self.trace is not None

    def on_mount(self) -> None:
        translate_bindings(self)
        self.screen_change_signal.subscribe(self, translate_bindings)
        if self.trace is not None:
            self.push_screen(StepScreen(self.trace, self.replay_path))
        else:
            self.push_screen(LoadingScreen(self._model_name(), self.prompt))
            self.run_forward(self.prompt)

    def _model_name(self) -> str:
        if self.lm is not None:
            return self.lm.name
        if self.options.model:
            return self.options.model
        return _("default: gpt2 if it is cached or downloadable, else the bundled tiny")

    # -- the worker ------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="forward", exit_on_error=False)
    def run_forward(self, prompt: str, reload_from: str | None = None) -> None:
        """Loads the model if needed (again from `reload_from`, in the options' format, when
        given) and records the forward pass over `prompt`."""
        worker = get_current_worker()
        cancelled = lambda: worker.is_cancelled  # noqa: E731
        options = self.options
        with reporting(lambda text, code: self.post_message(LoadFailed(text, code))):
            lm = self.lm
            if lm is None or reload_from is not None:
                self.post_message(LoadProgressed(1, LOAD_STEPS, _("Loading the weights ({dtype})").format(dtype=options.dtype)))
                from .. import load_model

                source = reload_from if reload_from is not None else options.model
                show = throttled(lambda p: self.post_message(DownloadProgressed(p)))

                def report(progress) -> None:  # called in the model thread for each piece of a download
                    if self._stop_download.is_set():
                        raise DownloadCancelled()
                    show(progress)

                lm = run_detached(
                    lambda: load_model(source, device=options.device, dtype=options.dtype, progress=report), cancelled
                )
                self.lm = lm
            self.post_message(LoadProgressed(2, LOAD_STEPS, _("Running the forward pass of {model}").format(model=lm.name)))
            ablations = tuple(self.ablations)
            trace = record_pass(lm, prompt, options.topk_logits, cancelled, ablations=ablations)
            changes = measure_changes(lm, trace.token_ids, ablations, cancelled) if ablations else None
            self.post_message(LoadProgressed(3, LOAD_STEPS, _("Drawing")))
            self.post_message(TraceRecorded(trace, changes))

    def on_download_progressed(self, message: DownloadProgressed) -> None:
        if isinstance(self.screen, LoadingScreen):
            self.screen.download(message.progress)

    def on_load_progressed(self, message: LoadProgressed) -> None:
        if isinstance(self.screen, LoadingScreen):
            self.screen.progress(message.step, message.total, message.text)

    def on_trace_recorded(self, message: TraceRecorded) -> None:
        self.trace = message.trace
        self.prompt = message.trace.prompt
        self.changes = message.changes
        if isinstance(self.screen, LoadingScreen):
            self.pop_screen()
        steps = [s for s in self.screen_stack if isinstance(s, StepScreen)]
        if steps:
            steps[-1].load_trace(message.trace)
        else:
            self.push_screen(StepScreen(message.trace, self.replay_path))
        if self._generate_after_load:
            self._generate_after_load = False
            self.call_after_refresh(self.action_generate)

    def on_load_failed(self, message: LoadFailed) -> None:
        self._generate_after_load = False
        if isinstance(self.screen, LoadingScreen) and not self.screen.can_cancel:
            self.error, self.exit_code = message.text, message.exit_code
            self.screen.fail(message.text)
        else:
            if isinstance(self.screen, LoadingScreen):
                self.pop_screen()
            self.notify(message.text, title=_("The run failed"), severity="error", markup=False)

    def cancel_download(self) -> None:
        """Stops the hub download and leaves, saying so: the bytes fetched so far stay in the cache
        and the next run goes on from them. The download stops at its next piece; the app does not
        wait for it (a stalled connection sends no piece)."""
        self._stop_download.set()
        self.farewell = str(DownloadCancelled())
        self.exit(DownloadCancelled.exit_code, return_code=DownloadCancelled.exit_code)

    def cancel_run(self) -> None:
        """Stops a re-run and goes back to the trace on screen (and the parts switched off in it)."""
        self._generate_after_load = False
        self.workers.cancel_group(self, "forward")
        if self.trace is not None:
            self.ablations = parse_ablations(self.trace.interventions)
        if isinstance(self.screen, LoadingScreen):
            self.pop_screen()

    # -- parity, checked on the user's checkpoint ------------------------------------------------
    @work(thread=True, exclusive=True, group="verify", exit_on_error=False)
    def check_against_transformers(self) -> None:
        """gpt2viz against transformers on this prompt (gpt2viz.verify); the header shows the result."""
        from ..verify import verify

        worker = get_current_worker()
        lm, ids = self.lm, self.trace.all_token_ids
        self.call_from_thread(self.notify, _("Checking against transformers…"), timeout=3)
        with reporting(lambda text, code: self.call_from_thread(self.notify, text, severity="error", markup=False)):
            result = run_detached(locked(lambda: verify(lm, ids)), lambda: worker.is_cancelled)
            self.call_from_thread(self._show_verification, result)

    def _show_verification(self, result) -> None:
        self.verification = result
        text = _("max |Δlogit| {diff} · top-1 agreement {agree} of {positions} · greedy {n} tokens: {same}").format(
            diff=f"{result.max_abs_diff:.1e}", agree=result.top1_agree, positions=result.positions, n=len(result.ours),
            same=_("the same") if result.ours == result.theirs else _("different"),
        )
        title = _("The same model as transformers") if result.ok else _("NOT the same model as transformers")
        self.notify(text, title=title, severity="information" if result.ok else "error", timeout=8)
        for screen in self.screen_stack:
            redraw = getattr(screen, "redraw_language", None)  # redraws the header with the result
            if redraw is not None:
                redraw()

    # -- what if: parts of the model switched off -------------------------------------------
    def add_intervention(self, ablation: Ablation) -> None:
        """Records the prompt's pass again with `ablation` switched off too."""
        self._rerun([*self.ablations, ablation])

    def action_undo_intervention(self) -> None:
        if self.ablations:
            self._rerun(self.ablations[:-1])

    def action_clear_interventions(self) -> None:
        if self.ablations:
            self._rerun([])

    def _rerun(self, ablations: list[Ablation]) -> None:
        if self.lm is None:
            return
        self.ablations = list(ablations)
        self.push_screen(LoadingScreen(self.lm.name, self.prompt, can_cancel=True))
        self.run_forward(self.prompt)

    def notify(self, message: str, *, title: str = "", severity="information", timeout=None, markup: bool = True) -> None:
        """Textual's notification (every screen's and widget's comes here), its text shown by
        gpt2viz.text_safety's rule and never read as markup: messages quote paths, prompts, model
        names and errors, which may hold anything. (`markup` is taken and ignored.)"""
        super().notify(safe_text(str(message)), title=safe_line(str(title)), severity=severity, timeout=timeout, markup=False)

    # -- an error nobody expected -------------------------------------------------------------
    def _handle_exception(self, error: Exception) -> None:
        """A bug in a screen, a widget or a worker (or a replayed trace that passes the loader's
        checks and still breaks a screen): the app ends with exit status 1 and the CLI prints one
        line naming the log that holds the traceback (gpt2viz.crash_log), never exit status 0.
        Textual's own handling still runs, so a Pilot test sees the exception."""
        if self.error is None:
            self.error = unexpected_error_line(error)
        self.exit_code = 1
        super()._handle_exception(error)

    def _fatal_error(self) -> None:
        """Ends the app without Textual's traceback on the terminal: the line in `error` says it."""
        self.bell()
        self._close_messages_no_wait()

    # -- actions ---------------------------------------------------------------------------
    def action_quit(self) -> None:
        if isinstance(self.screen, LoadingScreen) and self.screen.downloading:
            self.cancel_download()  # leaving during a download is cancelling it
            return
        self.exit(self.exit_code, return_code=self.exit_code)

    # -- the command palette, in the current language ----------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's own palette commands, with texts from the catalog, and the language switch."""
        other = [code for code in LANGUAGES if code != language()][0]
        yield SystemCommand(
            _("Language: {name}").format(name=LANGUAGES[other]),
            _("Show the app in {name}, redrawn from what is on screen").format(name=LANGUAGES[other]),
            lambda: self.switch_language(other),
        )
        yield SystemCommand(_("Keys"), _("Show all keys and how to read the screens"), self.action_help)
        if self.lm is not None and self.trace is not None:
            yield SystemCommand(
                _("Check against transformers"),
                _("Run this checkpoint through transformers on the prompt and compare the logits"),
                self.check_against_transformers,
            )
        yield SystemCommand(_("Theme"), _("Change the current theme"), self.action_change_theme)
        yield SystemCommand(
            _("Screenshot"), _("Save an SVG picture of the current screen"), lambda: self.set_timer(0.1, self.screenshot)
        )
        yield SystemCommand(_("Quit"), _("Leave gpt2viz"), self.action_quit)

    def screenshot(self) -> None:
        """Saves the screen as an SVG in the working directory, and says where in this language
        (Textual's own delivery says it in English, to a Downloads folder that may not exist)."""
        try:
            path = self.save_screenshot(path=os.getcwd())
        except OSError as err:
            self.notify(_("Could not save the picture: {error}").format(error=err.strerror or err), severity="error")
            return
        self.notify(_("Saved a picture of the screen: {path}").format(path=path), markup=False)

    def action_command_palette(self) -> None:
        if self.use_command_palette and not CommandPalette.is_open(self):
            self.push_screen(Palette(id="--command-palette", placeholder=_("Search for commands…")))

    def search_themes(self) -> None:
        self.push_screen(Palette(providers=[ThemeProvider], placeholder=_("Search for themes…")))

    def action_switch_language(self) -> None:
        """Shows everything in the other language, redrawn from what is on screen (nothing is run
        again)."""
        codes = list(LANGUAGES)
        self.switch_language(codes[(codes.index(language()) + 1) % len(codes)])

    def switch_language(self, code: str) -> None:
        """Shows everything in language `code`: key texts, then every screen of the stack."""
        set_language(code)
        translate_bindings(self)
        for screen in self.screen_stack:
            translate_bindings(screen)
            redraw = getattr(screen, "redraw_language", None)
            if redraw is not None:
                redraw()
        self.refresh_bindings()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def _replay_name(self, otherwise: str) -> str:
        """The replayed file's name for messages, or `otherwise` when it has none."""
        return Path(self.replay_path).name if self.replay_path else otherwise

    def action_edit_prompt(self) -> None:
        if self.lm is None:
            source = self._replay_name(_("a saved trace"))
            self.notify(
                _(
                    "This is a replay of {source}: there is no model to run a new prompt. "
                    "Start gpt2viz with --model to edit prompts."
                ).format(source=source),
                title=_("Editing needs a model"),
                severity="warning",
                markup=False,
            )
            return
        self.push_screen(PromptScreen(self.prompt), self._run_prompt)

    def _run_prompt(self, prompt: str | None) -> None:
        if prompt is None:
            return
        self.push_screen(LoadingScreen(self.lm.name, prompt, can_cancel=True))
        self.run_forward(prompt)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        screen = self.screen
        if action == "generate":
            # Not offered where it would do nothing: while loading, or in the generation view itself.
            return not isinstance(screen, (LoadingScreen, GenerationScreen))
        if action == "cost_lab":
            return isinstance(screen, (StepScreen, GenerationScreen))
        if action == "edit_prompt":
            return not (isinstance(screen, StepScreen) and screen.from_step is not None)
        return True

    def action_generate(self) -> None:
        """Opens the generation view: back to the one a step was opened from, or a new one."""
        stack = self.screen_stack
        for depth, screen in enumerate(reversed(stack)):
            if isinstance(screen, GenerationScreen):
                for _depth in range(depth):
                    self.pop_screen()
                return
        screen = self.screen
        if not isinstance(screen, StepScreen):
            return
        trace = screen.trace
        if self.lm is None:
            if not trace.generation:
                source = self._replay_name(_("This trace"))
                self.notify(
                    _(
                        "{source} holds no generation and there is no model to run one. Record one with "
                        "gpt2viz PROMPT --json FILE --generate N, or start gpt2viz with --model."
                    ).format(source=source),
                    title=_("Nothing to generate with"),
                    severity="warning",
                    markup=False,
                )
                return
            self.push_screen(GenerationScreen(trace, replay=self.replay_path))
            return
        self.push_screen(
            GenerationScreen(trace, lm=self.lm, settings=self.generation_settings, topk=self.options.topk_logits)
        )

    def action_cost_lab(self) -> None:
        """Opens the cost lab on the model (or on the replayed trace's recorded result)."""
        screen = self.screen
        if not isinstance(screen, (StepScreen, GenerationScreen)):
            return
        lm = self.lm
        if lm is not None and self.lab_result is not None and self.lab_result.precision != lm.precision:
            self.lab_result = None  # measured on the model in another format: its step times no longer hold
        self.push_screen(CostLabScreen(screen.trace, lm=lm, result=self.lab_result, replay=self.replay_path))

    def action_attribution(self) -> None:
        """Which parts wrote the answer, for the pass on show (a replay says it needs a model)."""
        from .screens.attribution import open_attribution

        open_attribution(self)

    def on_lab_result_changed(self, message: LabResultChanged) -> None:
        self.lab_result = message.result

    def on_generation_screen_settings_changed(self, message: GenerationScreen.SettingsChanged) -> None:
        """The next generation view starts with the settings the user chose last."""
        self.generation_settings = message.settings

    def on_generation_screen_precision_chosen(self, message: GenerationScreen.PrecisionChosen) -> None:
        """Reloads the model in another number format, records the prompt's pass again, and comes
        back to a generation view with the chosen settings."""
        self.generation_settings = message.settings
        self.options = replace(self.options, dtype=message.settings.precision)
        while isinstance(self.screen, GenerationScreen) or (
            isinstance(self.screen, StepScreen) and self.screen.from_step is not None
        ):
            self.pop_screen()
        self._generate_after_load = True
        source = str(self.lm.source.path) if self.lm is not None else self.options.model
        name = _("{model} in {dtype}").format(model=self._model_name(), dtype=message.settings.precision)
        self.push_screen(LoadingScreen(name, self.prompt, can_cancel=True))
        self.run_forward(self.prompt, reload_from=source)


def make_app(lm=None, trace: Trace | None = None, options: RunOptions | None = None) -> Gpt2VizApp:
    """The app for a loaded model (`lm`), a recorded `trace`, or options to load from."""
    return Gpt2VizApp(lm=lm, trace=trace, options=options)


def run_app(options: RunOptions, before_run: Callable[[], None] | None = None) -> tuple[int, str | None, str | None]:
    """Runs the TUI for the CLI's options; returns the exit code, the error to report, if any, and
    a line to say that is no error (a cancelled download), if any. A replayed trace is read and
    checked first, so a bad file is reported as such; then `before_run()` (the CLI's terminal
    check), then the app."""
    trace = None
    if options.replay is not None:
        from ..trace import load

        trace = load(options.replay)
    if before_run is not None:
        before_run()
    # Progress bars of a download would draw over the app.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    freeze_startup_objects()
    app = make_app(trace=trace, options=options)
    code = app.run()
    return (code if isinstance(code, int) else app.exit_code), app.error, app.farewell
