"""The one lifecycle every screen of the app follows (docs/architecture.md, "Screens").

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
6. Once the app is leaving (q, ctrl+c, the palette's Quit) nothing new starts: the app drops the
   keys, pastes and mouse events still queued (textual_compat.CompatApp), and a screen opened in
   that moment (by a key handled before q took effect) neither composes nor mounts: Textual mounts
   no widget in an app that exits, so its Mount would look for widgets that are not there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

from textual import events
from textual.await_complete import AwaitComplete
from textual.screen import ModalScreen, Screen

if TYPE_CHECKING:
    from ..session import Session

R = TypeVar("R")


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
        is leaving (rule 6; Textual says then that no node is attached any more)."""
        if isinstance(event, (events.Compose, events.Mount)) and not self.is_attached:  # type: ignore[attr-defined]
            return
        await super().on_event(event)  # type: ignore[misc]

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
