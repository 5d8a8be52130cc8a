"""A text field whose value may hold what the user did not type: a prompt read from a file or
from a trace, or pasted text, with control characters in it."""

from __future__ import annotations

from textual import events
from textual.binding import Binding

from ...i18n import N_
from ...text_safety import safe_field
from ..language import translate_bindings
from ..textual_compat import CompatInput


class SafeInput(CompatInput):
    """An Input that draws each hidden character of its value (an escape, a bidi override) as a
    one-cell mark, ␛ for ESC (gpt2viz.text_safety.safe_field), so none reaches the terminal and
    the cursor stays on its character. The value itself stays as it is: what runs is what was
    given. (A highlighter cannot do it: Rich drops BEL, backspace and carriage return before one
    runs; the drawing hook is in gpt2viz.tui.textual_compat.)"""

    def shown(self, value: str) -> str:
        return safe_field(value)

    def on_paste(self, event: events.Paste) -> None:
        """A paste goes in whole, its line breaks shown as ␊: a prompt may have several lines, and
        Textual's Input keeps a paste's first line only, dropping the rest unsaid. A terminal sends
        a pasted line break as a carriage return (as the enter key): it is made "\n" again."""
        event.prevent_default()  # not Input's own paste as well
        event.stop()
        text = event.text.replace("\r\n", "\n").replace("\r", "\n")
        if not text:
            return
        if self.selection.is_empty:
            self.insert_text_at_cursor(text)
        else:
            self.replace(text, *self.selection)


class FieldInput(SafeInput):
    """A text field on a screen of keys (not a form): typing goes into it, so escape leaves it
    first (the footer says so), and then the screen's keys, q among them, work again."""

    BINDINGS = [Binding("escape", "leave_field", N_("leave the field"), id="leave-field",
                        tooltip=N_("Leave the text field: the screen's keys work again"))]

    def on_focus(self) -> None:
        # Its own key (escape) shows in the footer while it has focus: in the language on show.
        translate_bindings(self)

    def action_leave_field(self) -> None:
        self.screen.focus_next()
        if self.has_focus:  # nothing else takes the focus
            self.screen.set_focus(None)
