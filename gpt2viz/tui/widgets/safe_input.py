"""A text field whose value may hold what the user did not type: a prompt read from a file or
from a trace, or pasted text, with control characters in it."""

from __future__ import annotations

from rich.cells import cell_len, get_character_cell_size
from rich.text import Text
from textual.widgets import Input

from ...text_safety import safe_field


class SafeInput(Input):
    """An Input that draws each hidden character of its value (an escape, a bidi override) as a
    one-cell mark, ␛ for ESC (gpt2viz.text_safety.safe_field), so none reaches the terminal and
    the cursor stays on its character. The value itself stays as it is: what runs is what was
    given.

    Textual's Input draws `self.value` through `_value`, places the cursor by `_position_to_cell`
    and maps a click to a character by `_cell_offset_to_index`; all three are private, so this follows the pinned Textual version. (A
    highlighter cannot do it: Rich drops BEL, backspace and carriage return before one runs.)"""

    @property
    def _value(self) -> Text:
        if self.password:
            return super()._value
        return Text(safe_field(self.value), no_wrap=True, overflow="ignore", end="")

    def _position_to_cell(self, position: int) -> int:
        return cell_len(safe_field(self.value[:position]))

    def _cell_offset_to_index(self, offset: int) -> int:
        """The character under cell `offset` of the field as drawn (each mark one cell wide)."""
        offset += self.scroll_offset.x
        cell = 0
        for index, char in enumerate(safe_field(self.value)):  # one mark per character: same indices
            width = get_character_cell_size(char)
            if cell <= offset < cell + width:
                return index
            cell += width
        return max(0, min(offset, len(self.value)))
