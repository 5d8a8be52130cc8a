"""The help screen: every key (as currently mapped) and how to read the screen underneath.

A screen with something to say about reading it has `help_text()`: the text in the current
language, keys named as they are bound now (`key_name`). Its command palette's line in the key
list is its `PALETTE_TEXT` (a msgid), else the app's palette."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen

from ...i18n import N_, _
from ..table_layout import wrapped
from ..widgets.laid import Laid
from ..widgets.strip_widget import Prose
from .base import AppModal

PALETTE_TEXT = N_("Command palette: theme, keys, screenshot")
KEY_COLUMN = 14  # cells for the keys of a row of the key list


@dataclass(frozen=True)
class BoundAction:
    """One action bound on a screen: its keys as the user's key map has them, what it does, and
    the node that binds it (the screen, a widget of it, or the app), on which it runs."""

    keys: str
    text: str
    action: str
    node: object = None


def bound_actions(screen: Screen) -> list[BoundAction]:
    """The actions of the bindings active on `screen` (its own, its widgets' and the app's), one
    per action, in binding order, with the user's key map applied."""
    by_action: dict[str, tuple[list[str], str, object]] = {}
    for _key, active in screen.active_bindings.items():
        binding = active.binding
        palette = binding.action == "command_palette"
        if binding.id is None and not palette:  # Textual's own focus and copy keys
            continue
        text = _(getattr(screen, "PALETTE_TEXT", PALETTE_TEXT)) if palette else binding.tooltip or binding.description
        keys, _text, _node = by_action.setdefault(binding.action, ([], text, active.node))
        display = screen.app.get_key_display(binding)
        if display not in keys:
            keys.append(display)
    return [BoundAction(" ".join(keys), text, action, node) for action, (keys, text, node) in by_action.items()]


def key_rows(screen: Screen) -> list[tuple[str, str]]:
    """(keys, what they do) for the bindings active on `screen`, with the user's key map applied."""
    return [(bound.keys, bound.text) for bound in bound_actions(screen)]


def key_list(rows: list[tuple[str, str]], width: int) -> Content:
    """The key list: keys right-aligned in their column, what they do wrapped under itself."""
    room = max(8, width - KEY_COLUMN - 2)
    lines = [Content.styled(_("Keys"), "bold $accent")]
    for keys, text in rows:
        first, *more = wrapped(text, room)
        lines.append(Content.assemble((f"{keys:>{KEY_COLUMN}}", "bold"), "  ", first))
        lines += [Content.assemble(" " * (KEY_COLUMN + 2), line) for line in more]
    return Content("\n").join(lines)


class HelpScreen(AppModal[None]):
    """Keys and reading hints; escape or ? closes it, q quits as everywhere."""

    BINDINGS = [
        Binding("escape,question_mark", "close", N_("close"), id="close-help", tooltip=N_("Close the help")),
        Binding("q", "app.quit", N_("quit"), id="help-quit", show=False, tooltip=N_("Leave gpt2viz")),
        # A modal screen hides the app's keys: the language switch, again, for a screen of words.
        Binding("L", "app.switch_language", N_("中文"), id="help-switch-language", show=False,
                tooltip=N_("Show the app in Chinese (again: back to English)")),
    ]

    def __init__(self, underneath: Screen) -> None:
        super().__init__()
        self.underneath = underneath

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Laid(id="help-text")
            # Running text wrapped by terminal cells (a Chinese paragraph has no spaces to wrap at).
            yield Prose(id="help-reading")

    def on_mount(self) -> None:
        self.redraw_language()

    def redraw_language(self) -> None:
        rows = key_rows(self.underneath)
        self.query_one("#help-text", Laid).show(lambda width: key_list(rows, width))
        help_text = getattr(self.underneath, "help_text", None)
        self.query_one(Prose).update(help_text() if help_text is not None else "")

    def action_close(self) -> None:
        self.close()
