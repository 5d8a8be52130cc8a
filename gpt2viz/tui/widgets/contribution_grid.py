"""Signed terms on a grid of blocks x parts (heads, then the MLP and the like), coloured on the
diverging scale, with the values printed where the cells are wide enough.

Unlike a Heatmap, whose columns are positions numbered on an axis, the columns here are named
parts, and a rule separates the heads from the block-wide parts after them.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from ..formatting import cell_value, fit, num
from ..palette import LEVELS, diverging
from .strip_widget import StripWidget, fit_strip

MAX_CELL = 7
MAX_LABEL = 12
RULE = "│"


@dataclass
class GridData:
    """Rows of signed values: labels of rows and columns, and where the rule goes."""

    values: list[list[float]]  # [row][column]
    row_labels: list[str]
    col_labels: list[str]
    rule_before: int  # the column the rule stands before (len(col_labels): none)
    scale: float  # the |value| at which the colours end


class ContributionGrid(StripWidget):
    """A grid of signed terms, drawn with the Line API from cached strips."""

    COMPONENT_CLASSES = {"contribution-grid--label", "contribution-grid--axis"}

    DEFAULT_CSS = """
    ContributionGrid {
        height: auto;
    }
    ContributionGrid > .contribution-grid--label { color: $text-muted; }
    ContributionGrid > .contribution-grid--axis { color: $text-muted; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.data: GridData | None = None

    def show(self, data: GridData | None) -> None:
        """Draws `data` (None: nothing)."""
        self.data = data
        self.invalidate()

    def build_lines(self, width: int) -> list[Strip]:
        d = self.data
        if d is None or not d.values:
            return []
        base = self.base_style
        label_style = base + self.style_of("contribution-grid--label")
        axis_style = base + self.style_of("contribution-grid--axis")
        palette = diverging(self.app.current_theme.dark)
        n_cols = len(d.col_labels)
        label_width = min(MAX_LABEL, max(cell_len(label) for label in d.row_labels))
        rule = 1 if 0 < d.rule_before < n_cols else 0
        cw = max(1, min(MAX_CELL, (width - label_width - 1 - rule) // n_cols))
        show_values = cw >= 4

        def row(label: Segment, cells: list[Segment]) -> Strip:
            if rule:
                cells.insert(d.rule_before, Segment(RULE, axis_style))
            return Strip([label, Segment(" ", base), *cells]).simplify()

        head = [Segment(fit(text, cw - 1, "right") + " " if cw > 1 else fit(text, 1), axis_style) for text in d.col_labels]
        lines = [row(Segment(" " * label_width, base), head)]
        for label, values in zip(d.row_labels, d.values):
            cells = []
            for value in values:
                text = fit(cell_value(value, cw - 1), cw - 1, "right") + " " if show_values else " " * cw
                cells.append(Segment(text, palette.cell_styles[palette.level(value, d.scale)]))
            lines.append(row(Segment(fit(label, label_width), label_style), cells))
        lines.append(Strip.blank(1, base))
        legend = [Segment(" " * (label_width + 1), base), Segment(f"{num(-d.scale, 2)} ", axis_style)]
        steps = 16
        for i in range(steps):
            level = round(i / (steps - 1) * (LEVELS - 1))
            legend.append(Segment(" ", Style(bgcolor=palette.colors[level])))
        legend.append(Segment(f" +{num(d.scale, 2)}", axis_style))
        lines.extend(fit_strip(legend, width))
        return lines
