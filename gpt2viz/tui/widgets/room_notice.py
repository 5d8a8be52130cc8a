"""What the app shows instead of a broken layout when the terminal is too small."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

MIN_WIDTH = 80
MIN_HEIGHT = 24


class RoomNotice(Static):
    """'gpt2viz needs 80 × 24': shown (by app.tcss) only below that size."""

    def render(self) -> Content:
        width, height = self.app.size
        return Content(
            f"gpt2viz needs a terminal of at least {MIN_WIDTH} × {MIN_HEIGHT} characters.\n"
            f"This one is {width} × {height}.\n\nMake the window larger, or press q to quit."
        )
