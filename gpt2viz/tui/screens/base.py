"""The one lifecycle every screen of the app follows (docs/architecture.md, "The rule for every
screen").

1. A screen is given the session (gpt2viz.tui.session) and reads the model, the trace and the
   settings from it, never from the app.
2. Model work is a job of the session's JobService owned by the screen: its progress and results
   reach the screen's callbacks only while the screen is attached. When the screen is removed its
   jobs are cancelled, and nothing of them arrives any more (`on_unmount`).
3. A screen draws by handing data to its widgets, which lay it out when Textual renders them, for
   the size they have then (widgets/laid.py): nothing is drawn in a callback after a refresh (such
   a callback runs on whatever screen is on top by then), and nothing needs a second pass.
4. A screen leaves with `self.close(result)`, which dismisses exactly this screen, once: a second
   close (Escape pressed twice, a worker's result after a key) or a close of a screen already gone
   does nothing. Screens pushed over it are closed first.
5. `redraw_language()` draws every text again in the current language from the data held;
   `help_text()` says how to read the screen (the help shows it).
6. `q` quits from every screen except while typing into a text field; ctrl+c from anywhere.
7. A screen with a text field names it (`typing_target`): what is typed before the field has
   focus (keys sent right after the key that opened the screen, which Textual hands to the screen
   while it is still being mounted) goes into that field, not to the screen's or the app's keys.
8. Once the app is leaving (q, ctrl+c, the palette's Quit) nothing new starts: the app drops the
   keys, pastes and mouse events still queued (textual_compat.CompatApp), and a screen opened in
   that moment (by a key handled before q took effect) neither composes nor mounts: Textual mounts
   no widget in an app that exits, so its Mount would look for widgets that are not there. A
   screen's result (a form submitted, a menu's choice) reaches its callback only while the app
   is not leaving (CompatApp.push_screen): the shutdown may have removed the widgets of the
   screen that asked for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

from textual import events
from textual.await_complete import AwaitComplete
from textual.screen import ModalScreen, Screen

from ..textual_compat import binding_table
from ..widgets.room_notice import RoomNotice

if TYPE_CHECKING:
    from textual.widgets import Input

    from ..session import Session

R = TypeVar("R")

# Keys a text field takes besides printable characters (rule 7).
TYPING_KEYS = frozenset({"enter", "backspace", "delete", "left", "right", "home", "end", "ctrl+u", "ctrl+k", "ctrl+w"})


def close_screen(screen: Screen, result: object = None) -> bool:
    """Dismisses exactly `screen` (with `result` for whoever pushed it), after closing what was
    pushed over it. Does nothing, and says so (False), when `screen` is not on the stack any more
    or is closing already."""
    app = screen.app
    if getattr(screen, "_gpt2viz_closing", False) or screen not in app.screen_stack:
        return False
    screen._gpt2viz_closing = True  # type: ignore[attr-defined]
    while app.screen is not screen:  # a screen pushed over it (a modal, the palette) goes first
        top = app.screen
        if not close_screen(top):  # one that closes already is off the stack: pop_screen took it
            break
    screen.dismiss(result)
    return True


def close_above(screen: Screen) -> None:
    """Closes every screen pushed over `screen`, the newest first."""
    app = screen.app
    while screen in app.screen_stack and app.screen is not screen:
        if not close_screen(app.screen):
            break


def take_typing(screen: Screen, event: events.Key) -> bool:
    """Rule 7: gives `event` to `screen`'s text field when it is typing the field has not had yet,
    and says whether it did. Keys typed right after the one that opened the screen were handed by
    the app to the widget focused before it and come back to the app unhandled (the app passes
    them here), or reach the screen before its field has focus (Lifecycle.on_key). A screen not
    mounted yet gets the key back in its own queue, which it reads once mounted. Focus is set at
    once: the field's own Focus event comes before the key, so its text is selected and replaced,
    as when the key comes later. Escape and the rest stay the screen's keys."""
    if not getattr(screen, "takes_typing", False) or not (event.is_printable or event.key in TYPING_KEYS):
        return False
    event.stop()
    event.prevent_default()
    kept = [binding for binding in binding_table(screen).get(event.key, ()) if binding.priority]
    if kept:  # a key the screen keeps before its fields (the settings form's q and L): its action
        screen.call_later(screen.run_action, kept[0].action)
    elif not screen.is_mounted:
        screen.post_message(events.Key(event.key, event.character))
    else:
        target = screen.typing_target()  # type: ignore[attr-defined]
        if not target.has_focus:
            screen.set_focus(target)
        target.post_message(events.Key(event.key, event.character))
    return True


class Lifecycle:
    """What every screen of the app shares (mixed into Screen and ModalScreen)."""

    session: "Session"

    def close(self, result: object = None) -> bool:
        """Leaves this screen (and what was pushed over it); a second call does nothing."""
        return close_screen(self, result)  # type: ignore[arg-type]

    def dismiss(self, result: object = None) -> AwaitComplete:
        """Textual's dismiss, once: it pops whatever screen is on top, so a second call (a second
        Enter in the command palette, which dismisses itself) would pop the screens under it."""
        app = self.app  # type: ignore[attr-defined]
        if getattr(self, "_gpt2viz_dismissed", False) or app.screen is not self:
            return AwaitComplete.nothing()
        self._gpt2viz_dismissed = True
        return super().dismiss(result)  # type: ignore[misc]

    async def on_event(self, event: events.Event) -> None:
        """Textual's dispatch of every event to this screen, but no Compose or Mount once the app
        is leaving (rule 8; Textual says then that no node is attached any more)."""
        if isinstance(event, (events.Compose, events.Mount)) and not self.is_attached:  # type: ignore[attr-defined]
            return
        await super().on_event(event)  # type: ignore[misc]

    def on_mount(self) -> None:
        # Shown (app.tcss) in place of the screen's widgets when the terminal is too small: every
        # screen, full or over another (a modal went blank there, and took keys unseen).
        self.mount(RoomNotice(id="room-notice"))  # type: ignore[attr-defined]

    takes_typing = False  # rule 7: whether the screen has a text field, `typing_target()`

    def typing_target(self) -> "Input":
        """The text field that takes what is typed as the screen opens (screens with `takes_typing`)."""
        raise NotImplementedError

    def on_key(self, event: events.Key) -> None:
        # A key that reached the screen before anything in it had focus (then it is the field's).
        if self.takes_typing and self.focused is None:  # type: ignore[attr-defined]
            take_typing(self, event)  # type: ignore[arg-type]

    @property
    def closing(self) -> bool:
        return bool(getattr(self, "_gpt2viz_closing", False))

    def redraw_language(self) -> None:
        """Every text again in the current language, from the data held."""

    def help_text(self) -> str:
        """How to read this screen, in the current language ('' for nothing more than its keys)."""
        return ""

    def _detach(self) -> None:
        session = getattr(self, "session", None)
        if session is not None:
            session.jobs.detach(self)


class AppScreen(Lifecycle, Screen[R], Generic[R]):
    """A full screen of the app."""

    def __init__(self, session: "Session") -> None:
        super().__init__()
        self.session = session

    def on_unmount(self) -> None:
        self._detach()


class AppModal(Lifecycle, ModalScreen[R], Generic[R]):
    """A screen over another (a menu, a form, the help)."""

    def __init__(self, session: "Session | None" = None) -> None:
        super().__init__()
        if session is not None:
            self.session = session

    def on_unmount(self) -> None:
        self._detach()
