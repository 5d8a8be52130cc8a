"""The gpt2viz app: loads (or replays) a trace, then steps through it.

The app holds a `Session` (gpt2viz.tui.session): the model, the trace and every command that runs
the model, as jobs of one model thread. The app shows what the session says (a run started: the
loading screen; a trace recorded: the step-through) and keeps the two screens it pushes itself,
the step-through of the session's trace and the loading screen, closing exactly those. Every
other screen is pushed by a screen and closes itself (screens/base.py).

`make_app(lm=..., trace=..., options=...)` builds the app (tests inject a model or a trace);
`run_app(options)` is what the CLI calls: it returns the exit code and the error to report, if any.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Callable

from textual import events
from textual.app import SystemCommand
from textual.binding import Binding
from textual.command import CommandPalette
from textual.message import Message
from textual.notifications import Notify
from textual.screen import Screen
from textual.theme import ThemeProvider
from textual.timer import Timer

from ..crash_log import unexpected_error_line
from ..errors import DownloadCancelled
from ..i18n import LANGUAGES, N_, _, language, say, set_language
from ..lessons import LESSON_IDS, load_lesson
from ..options import RunOptions
from ..process import freeze_startup_objects
from ..text_safety import safe_line, safe_text
from ..trace import Trace
from .commands import AppCommands, KeyCommands, Palette
from .language import translate_bindings
from .lesson_run import menu_at_start, stop_menu_at_start
from .screens.base import close_above, close_screen, take_typing
from .screens.help import HelpScreen
from .screens.lesson_menu import NEVER, LessonMenu
from .screens.loading import LoadingScreen
from .screens.step import WIDE, StepScreen
from .session import (
    DownloadProgressed,
    Failed,
    RunFailed,
    RunProgressed,
    RunStarted,
    Session,
    SessionEvent,
    TraceRecorded,
    Verified,
)
from .textual_compat import CompatApp, KeyedNotification, binding_table
from .widgets.room_notice import MIN_HEIGHT, MIN_WIDTH


@dataclass(eq=False)
class Delivered(Message):
    """A callable from the model thread, to run on the UI thread (gpt2viz.tui.jobs)."""

    call: Callable[[], None]


RERUN_NOTICE_AFTER_S = 0.4  # a pass run again in place is said only once it has taken this long


class Gpt2VizApp(CompatApp):
    """Shows one GPT-2 forward pass, stage by stage, from a recorded Trace."""

    CSS_PATH = "app.tcss"
    TITLE = "gpt2viz"
    # The app's own (get_system_commands below) and every key of the screen underneath, both
    # searched by word starts (commands.py).
    COMMANDS = {AppCommands, KeyCommands}
    HORIZONTAL_BREAKPOINTS = [(0, "-too-narrow"), (MIN_WIDTH, "-normal"), (100, "-roomy"), (WIDE, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-too-short"), (MIN_HEIGHT, "-tall")]

    BINDINGS = [
        # The description names the other language, in that language, so a reader of either finds it.
        # Out of the footers (the help and the palette list it).
        Binding("L", "switch_language", N_("中文"), id="switch-language", show=False,
                tooltip=N_("Show the app in Chinese (again: back to English)")),
        Binding("question_mark", "help", N_("help"), id="help", tooltip=N_("Show all keys and how to read the screens")),
        Binding("i", "lessons", N_("lessons"), id="lessons", show=False,
                tooltip=N_("The guided lessons: choose one, or go on where you left it")),
        Binding("q", "quit", N_("quit"), id="quit", tooltip=N_("Leave gpt2viz")),
        # Textual only hints at ctrl+q on ctrl+c; people expect ctrl+c to leave a terminal app.
        Binding("ctrl+c", "interrupt", N_("quit"), id="quit-ctrl-c", show=False, priority=True, tooltip=N_("Leave gpt2viz")),
    ]

    def __init__(self, lm=None, trace: Trace | None = None, options: RunOptions | None = None) -> None:
        super().__init__()
        self.session = Session(
            options, lm, trace, deliver=self._deliver, when_drawn=self.call_when_drawn, listener=self._session_event
        )
        self.error: str | None = None
        self.exit_code = 0
        self.farewell: str | None = None  # a line to say on leaving that is no error (a cancelled download)
        self._steps: StepScreen | None = None  # the step-through of the session's trace (pushed here)
        self._loading: LoadingScreen | None = None  # the loading screen of a run under way (pushed here)
        self._rerun_notice: Timer | None = None  # "Running the pass again…", due if the pass takes a moment

    # -- the model thread's results, on the UI thread --------------------------------------------
    def _deliver(self, call: Callable[[], None]) -> None:
        """Called from the model thread: `call` runs on the UI thread, in the order handed over."""
        self.post_message(Delivered(call))

    def on_delivered(self, message: Delivered) -> None:
        message.call()

    # -- what is typed as a screen opens (screens/base.py, rule 7) --------------------------------
    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, (events.Key, events.Paste)) and not event.is_forwarded and self._too_small():
            # Nothing of the screen is on show but the notice: a key would change what the learner
            # cannot see (a crash walk held left at 20 x 8 and came back 30 stages earlier). The
            # app's own keys that leave (q, ctrl+c) still do, as the notice says.
            if isinstance(event, events.Key):
                for binding in binding_table(self).get(event.key, ()):
                    if binding.action in ("quit", "interrupt"):
                        await self.run_action(binding.action)
                        break
            return
        if isinstance(event, events.Key) and not event.is_forwarded and self.screen_stack:
            event.typed_on = self.screen  # type: ignore[attr-defined]  # the screen on top when it was typed
        await super().on_event(event)

    def _too_small(self) -> bool:
        """Whether the terminal is smaller than the screen on top needs: app.tcss then hides its
        widgets, showing its RoomNotice (every screen of the app's has one; Textual's palette goes blank)."""
        if not self.screen_stack:
            return False
        screen = self.screen
        return screen.has_class("-too-narrow") or screen.has_class("-too-short")

    def on_key(self, event: events.Key) -> None:
        # A key typed right after the one that opened a screen went to the screen on top before
        # it and comes back unhandled: the new screen's text field takes it.
        typed_on = getattr(event, "typed_on", None)
        if typed_on is not None and self.screen_stack and typed_on is not self.screen:
            take_typing(self.screen, event)

    def on_mount(self) -> None:
        translate_bindings(self)
        self.screen_change_signal.subscribe(self, translate_bindings)
        self.screen_change_signal.subscribe(self, self._lesson_sees_screen)
        if self.session.trace is not None:
            self._show_steps(self.session.trace)
        else:
            self.session.run()

    def on_unmount(self) -> None:
        self.session.close()

    # -- what the session says ------------------------------------------------------------------
    def _session_event(self, event: SessionEvent) -> None:
        loading = self._loading
        if isinstance(event, RunStarted):
            if event.in_place:  # parts switched off or back on: the stage on show is redrawn
                # Said only if the pass takes a moment: a notice shown for a redraw that came at
                # once stayed 2 s after it (issue 36's walk).
                self._stop_rerun_notice()
                self._rerun_notice = self.set_timer(
                    RERUN_NOTICE_AFTER_S, lambda: self.notify(_("Running the pass again…"), timeout=2))
            elif loading is None or loading.closing:
                self._loading = LoadingScreen(self.session, event.model, event.prompt, can_cancel=event.can_cancel)
                self.push_screen(self._loading)
        elif isinstance(event, RunProgressed):
            if self._showing(loading):
                loading.progress(event.step, event.total, event.text)
        elif isinstance(event, DownloadProgressed):
            self.session.download_progressed(event.progress)
            if self._showing(loading):
                loading.download(event.progress)
        elif isinstance(event, TraceRecorded):
            self._stop_rerun_notice()
            self._close_loading()
            if event.then == "generate":  # the model in another number format: a new generation view
                self.close_above_steps()
            if self._steps is None:
                self._show_steps(event.trace, event.changes)
            else:
                self._steps.load_trace(event.trace, event.changes)
            if event.then == "generate" and self._steps is not None:
                from .screens.generation import open_generation

                open_generation(self._steps)
        elif isinstance(event, RunFailed):
            self._stop_rerun_notice()
            if event.fatal:
                self.error, self.exit_code = event.text, event.exit_code
                if loading is not None:
                    loading.fail(event.text)
            else:
                self._close_loading()
                self.notify(event.text, title=_("The run failed"), severity="error")
        elif isinstance(event, Verified):
            self._show_verification(event.result)
        elif isinstance(event, Failed):
            self.notify(event.text, title=event.title, severity="error")

    def _stop_rerun_notice(self) -> None:
        if self._rerun_notice is not None:
            self._rerun_notice.stop()
            self._rerun_notice = None

    @staticmethod
    def _showing(screen) -> bool:
        """Whether `screen` is there to draw on: mounted and not closing (a loading screen left
        with escape is still mounted while Textual removes its widgets)."""
        return screen is not None and screen.is_mounted and not screen.closing

    def _show_steps(self, trace: Trace, changes: list[dict] | None = None) -> None:
        self._steps = StepScreen(self.session, trace, changes=changes)
        self.push_screen(self._steps)
        # The lesson menu on a learner's first start (and later ones until a lesson is chosen or
        # it is told never to): not over a lesson asked for by --lesson, nor for a model no lesson
        # tells (they are GPT-2's story).
        if self.session.lesson is None and trace.architecture == "gpt2" and menu_at_start():
            self.push_screen(LessonMenu(at_start=True), self._lesson_chosen)

    def _lesson_sees_screen(self, screen: Screen) -> None:
        """A lesson page that asked the learner to open this screen is done (its panel says so when
        the step-through is back)."""
        lesson = self.session.lesson
        if lesson is not None:
            lesson.observe_screen(type(screen).__name__)

    def action_lessons(self) -> None:
        if self._steps is not None and not isinstance(self.screen, LessonMenu):
            self.push_screen(LessonMenu(opens=self._steps.trace.architecture == "gpt2"), self._lesson_chosen)

    def _lesson_chosen(self, choice: str | None) -> None:
        if choice == NEVER:
            stop_menu_at_start()
            self.notify(say("lesson.menu.never_note"), timeout=6)
        elif choice is not None and self.start_lesson(choice):
            stop_menu_at_start()  # a lesson refused (this model is not GPT-2) is not a choice made

    def _close_loading(self) -> None:
        if self._loading is not None:
            close_screen(self._loading)
            self._loading = None

    def _show_verification(self, result) -> None:
        text = _("max |Δlogit| {diff} · top-1 agreement {agree} of {positions} · greedy {n} tokens: {same}").format(
            diff=f"{result.max_abs_diff:.1e}", agree=result.top1_agree, positions=result.positions, n=len(result.ours),
            same=_("the same") if result.ours == result.theirs else _("different"),
        )
        if not result.read_by_transformers:
            text = _("{result} (transformers ran on the weights gpt2viz read from the GGUF file)").format(result=text)
        title = _("The same model as transformers") if result.ok else _("NOT the same model as transformers")
        self.notify(text, title=title, severity="information" if result.ok else "error", timeout=8)
        for screen in self.screen_stack:
            verified = getattr(screen, "verified", None)  # a screen whose top bar shows the result
            if verified is not None:
                verified()

    def check_against_transformers(self) -> None:
        """gpt2viz against transformers on this prompt (gpt2viz.verify); the top bar shows the result."""
        if self.session.verify() is not None:
            self.notify(_("Checking against transformers…"), timeout=3)

    def notify(self, message: str, *, title: str = "", severity="information", timeout=None, markup: bool = True,
               replaces: str | None = None) -> None:
        """Textual's notification (every screen's and widget's comes here), its text shown by
        gpt2viz.text_safety's rule and never read as markup: messages quote paths, prompts, model
        names and errors, which may hold anything. (`markup` is taken and ignored.) As it is
        shown it takes the place of one on show with the same words, and, with `replaces`, of
        the last one given that key (textual_compat.CompatApp._on_notify): a key held down
        stacked ten of them over half the screen (a crash walk, '.')."""
        notification = KeyedNotification(safe_text(str(message)), safe_line(str(title)), severity,
                                         self.NOTIFICATION_TIMEOUT if timeout is None else timeout, markup=False,
                                         replaces=replaces)
        self.post_message(Notify(notification))

    # -- an error nobody expected -------------------------------------------------------------
    def crash_line(self, error: Exception) -> None:
        """A bug in a screen, a widget or a job (or a replayed trace that passes the loader's checks
        and still breaks a screen): the app ends with exit status 1 and the CLI prints one line
        naming the log that holds the traceback (gpt2viz.crash_log), never exit status 0."""
        if self.error is None:
            self.error = unexpected_error_line(error)
        self.exit_code = 1

    # -- actions ---------------------------------------------------------------------------
    def action_interrupt(self) -> None:
        """ctrl+c: leaves as q does; while the first loading screen is up (before any model was
        shown), it is an interruption, as Ctrl-C before the app took the terminal is: one line,
        exit status 130 (README). Past it, a loading screen of a new prompt or number format
        included, it is the quit key (status 0)."""
        if isinstance(self.screen, LoadingScreen) and self._steps is None and not self.session.downloading:
            self.farewell = _("interrupted; nothing was written")
            self.exit_code = 130
        self.action_quit()

    def action_quit(self) -> None:
        """Leaves at once, from any screen; leaving during a download is cancelling it."""
        if self.session.downloading:
            self.session.cancel_download()
            self.farewell = str(DownloadCancelled())
            self.exit_code = DownloadCancelled.exit_code
        self.session.close()
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
        if self._steps is not None:
            for lesson_id in LESSON_IDS:
                title = say(load_lesson(lesson_id).title)
                yield SystemCommand(
                    _("Lesson {id}: {title}").format(id=lesson_id, title=title),
                    _("A guided walk through the app with this run's numbers; n and p turn its pages"),
                    lambda lesson_id=lesson_id: self.start_lesson(lesson_id),
                )
        if self.session.live and self.session.trace is not None:
            yield SystemCommand(
                _("Check against transformers"),
                _("Run this checkpoint through transformers on the prompt and compare the logits"),
                self.check_against_transformers,
            )
        yield SystemCommand(_("Theme"), _("Change the current theme"), self.action_change_theme)
        yield SystemCommand(_("Screenshot"), _("Save an SVG picture of the current screen"), self.screenshot)
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
        # Textual gives its palette the id "--command-palette" and asks whether one is open by it;
        # but a palette closed a moment ago stays registered under that id until it is removed,
        # and ctrl+p in that moment raised DuplicateIds. Ours have no id: the screen on top says.
        if self.use_command_palette and not isinstance(self.screen, CommandPalette):
            self.push_screen(Palette(placeholder=_("Search for commands…")))

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
        if self.focused is not None:  # a text field's own keys show in the footer while it has focus
            translate_bindings(self.focused)
        for screen in self.screen_stack:
            translate_bindings(screen)
            redraw = getattr(screen, "redraw_language", None)  # Textual's own screens have none
            if redraw is not None and screen.is_mounted:
                redraw()
        self.refresh_bindings()

    def start_lesson(self, lesson_id: str) -> bool:
        """Opens a lesson beside the step-through of the session's trace, where it was left;
        whether it did (a lesson needs a GPT-2 model)."""
        if self._steps is None:
            return False
        if self._steps.trace.architecture != "gpt2":
            self.notify(say("lesson.gpt2_only"), markup=False)
            return False
        self.session.start_lesson(lesson_id)
        self.close_above_steps()
        self._steps.start_lesson()
        return True

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def close_above_steps(self) -> None:
        """Closes every screen over the step-through of the session's trace."""
        if self._steps is not None:
            close_above(self._steps)


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
