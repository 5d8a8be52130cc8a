"""What the app shows instead of a broken layout when the terminal is too small."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from ...i18n import _
from ..language import key_name

MIN_WIDTH = 80
MIN_HEIGHT = 24


class RoomNotice(Static):
    """'gpt2viz needs 80 × 24': shown (by app.tcss) only below that size."""

    def render(self) -> Content:
        width, height = self.app.size
        return Content(
            _(
                "gpt2viz needs a terminal of at least {min_width} × {min_height} characters.\n"
                "This one is {width} × {height}.\n\nMake the window larger, or press {quit} to quit."
            ).format(min_width=MIN_WIDTH, min_height=MIN_HEIGHT, width=width, height=height, quit=key_name(self, "quit"))
        )
