"""The help screen: every key (as currently mapped) and how to read the screen underneath.

A screen with something to say about reading it has `help_text()`: the text in the current
language, keys named as they are bound now (`key_name`). Its command palette's line in the key
list is its `PALETTE_TEXT` (a msgid), else the app's palette."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from ...i18n import N_, _
from ..table_layout import wrapped
from ..widgets.strip_widget import Prose

PALETTE_TEXT = N_("Command palette: theme, keys, screenshot")
KEY_COLUMN = 14  # cells for the keys of a row of the key list


def key_rows(screen: Screen) -> list[tuple[str, str]]:
    """(keys, what they do) for the bindings active on `screen`, with the user's key map applied."""
    by_action: dict[str, tuple[list[str], str]] = {}
    for key, active in screen.active_bindings.items():
        binding = active.binding
        palette = binding.action == "command_palette"
        if binding.id is None and not palette:  # Textual's own focus and copy keys
            continue
        text = _(getattr(screen, "PALETTE_TEXT", PALETTE_TEXT)) if palette else binding.tooltip or binding.description
        keys, _text = by_action.setdefault(binding.action, ([], text))
        display = screen.app.get_key_display(binding)
        if display not in keys:
            keys.append(display)
    return [(" ".join(keys), text) for keys, text in by_action.values()]


class HelpScreen(ModalScreen[None]):
    """Keys and reading hints; any of escape, q or ? closes it."""

    BINDINGS = [
        Binding("escape,question_mark,q", "close", N_("close"), id="close-help", tooltip=N_("Close the help")),
        # A modal screen hides the app's keys: the language switch, again, for a screen of words.
        Binding("L", "app.switch_language", N_("中文"), id="help-switch-language", show=False,
                tooltip=N_("Show the app in Chinese (again: back to English)")),
    ]

    def __init__(self, underneath: Screen) -> None:
        super().__init__()
        self.underneath = underneath

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(id="help-text")
            # Running text wrapped by terminal cells (a Chinese paragraph has no spaces to wrap at).
            yield Prose(id="help-reading")

    def on_mount(self) -> None:
        self.redraw_language()
        self.call_after_refresh(self._draw_keys)  # again, for the width the list is given

    def on_resize(self) -> None:
        self.call_after_refresh(self._draw_keys)

    def _draw_keys(self) -> None:
        """The key list: keys right-aligned in their column, what they do wrapped under itself."""
        shown = self.query_one("#help-text", Static)
        room = max(8, (shown.size.width or self.app.size.width) - KEY_COLUMN - 2)
        rows = [Content.styled(_("Keys"), "bold $accent")]
        for keys, text in key_rows(self.underneath):
            first, *more = wrapped(text, room)
            rows.append(Content.assemble((f"{keys:>{KEY_COLUMN}}", "bold"), "  ", first))
            rows += [Content.assemble(" " * (KEY_COLUMN + 2), line) for line in more]
        shown.update(Content("\n").join(rows))

    def redraw_language(self) -> None:
        self._draw_keys()
        help_text = getattr(self.underneath, "help_text", None)
        self.query_one(Prose).update(help_text() if help_text is not None else "")

    def action_close(self) -> None:
        self.dismiss(None)
