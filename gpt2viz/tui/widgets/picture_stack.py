"""Several pictures of one stage, one above the other, each drawn from the same trace and stage."""

from __future__ import annotations

from textual.containers import Vertical
from textual.widget import Widget

from ...trace import Trace
from ..stages import Stage


class PictureStack(Vertical):
    """Pictures shown together for a stage (a chart above a table, say), drawn in order."""

    DEFAULT_CSS = """
    PictureStack {
        height: auto;
    }
    PictureStack > .-spaced {
        margin-bottom: 1;
    }
    """
    # A line between pictures, as a class on all but the last: a `:last-child` rule under a
    # universal selector would make Textual restyle every widget's children on each mount (it
    # marks every node as having order-dependent styles), a sixth of the app's start.

    def __init__(self, *pictures: Widget, id: str | None = None) -> None:
        for picture in pictures[:-1]:
            picture.add_class("-spaced")
        super().__init__(*pictures, id=id)
        self._pictures = pictures  # drawn before the stack is mounted too (its `children` come then)

    def draw(self, trace: Trace, stage: Stage, head: int = 0) -> None:
        """Draws every picture of the stack for `stage` of `trace`, with `head` selected."""
        for picture in self._pictures:
            picture.draw(trace, stage, head)  # type: ignore[attr-defined]
