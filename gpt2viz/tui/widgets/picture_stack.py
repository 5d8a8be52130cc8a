"""Several pictures of one stage, one above the other, each drawn from the same trace and stage."""

from __future__ import annotations

from textual.containers import Vertical

from ...trace import Trace
from ..stages import Stage


class PictureStack(Vertical):
    """Pictures shown together for a stage (a chart above a table, say), drawn in order."""

    DEFAULT_CSS = """
    PictureStack {
        height: auto;
    }
    PictureStack > * {
        margin-bottom: 1;
    }
    PictureStack > *:last-child {
        margin-bottom: 0;
    }
    """

    def draw(self, trace: Trace, stage: Stage, head: int = 0) -> None:
        """Draws every picture of the stack for `stage` of `trace`, with `head` selected."""
        for picture in self.children:
            picture.draw(trace, stage, head)
