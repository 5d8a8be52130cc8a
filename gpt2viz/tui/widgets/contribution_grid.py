"""Signed terms on a grid of blocks x parts (heads, then the MLP and the like), coloured on the
diverging scale, with the values printed where the cells are wide enough.

Every cell shows the largest terms to two significant digits: where a cell is too narrow for
'-0.24', or the largest term is below 0.1, the cells print whole numbers of one unit (hundredths:
'-24'; ten-thousandths: '69' for 0.0069), which the legend names with an example ('24 = 0.24'). The block-wide parts after the rule are as wide as their names.

Unlike a Heatmap, whose columns are positions numbered on an axis, the columns here are named
parts, and a rule separates the heads from the block-wide parts after them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from ...i18n import _
from ..formatting import cell_value, fit, num
from ..palette import LEVELS, diverging
from .strip_widget import StripWidget, fit_strip

MAX_CELL = 7
MAX_LABEL = 12
RULE = "│"
PLAIN_DIGITS = 5  # '-0.24': a cell's text this wide shows values as they are
SMALL_TERMS = 0.1  # below this, the largest term would print as one digit at two decimals


def cell_unit(scale: float, room: int) -> float | None:
    """The unit the cells count in when `room` characters cannot hold '-0.24' (None: no unit, the
    values as they are): the power of ten that prints the largest term, `scale`, as two digits
    (the scale rounded first: 0.996 is 1.0, ten tenths, not a hundred hundredths)."""
    if room >= PLAIN_DIGITS or not math.isfinite(scale) or scale <= 0:
        return None
    unit = 10.0 ** (math.floor(math.log10(float(f"{scale:.2g}"))) - 1)
    return unit if unit > 0 else None  # (0 where the power of ten underflows)


def in_unit(value: float, unit: float) -> str:
    """`value` as a whole number of `unit`s: '-24' for -0.243 in hundredths ('?' for no number)."""
    return str(round(value / unit)) if math.isfinite(value) else "?"


@dataclass
class GridData:
    """Rows of signed values: labels of rows and columns, and where the rule goes."""

    values: list[list[float]]  # [row][column]
    row_labels: list[str]
    col_labels: list[str]
    rule_before: int  # the column the rule stands before (len(col_labels): none)
    scale: float  # the |value| at which the colours end
    corner: str = ""  # above the row labels, what the column labels before the rule are ("head")


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
        room = width - label_width - 1 - rule
        # The block-wide parts after the rule are as wide as their names and values (two digits
        # and a sign in a unit), with a space from the rule; the heads share the rest.
        n_heads = n_cols - len(d.col_labels[d.rule_before:]) if rule else n_cols
        # Terms far below the colours' end (a head's job scores of 0.0069 on a scale to 0.5) print
        # in a unit of their own: at two decimals every cell read 0.00 or 0.01.
        finite = [abs(v) for values in d.values for v in values if math.isfinite(v)]
        largest = max(finite, default=0.0)
        small = 0 < largest < SMALL_TERMS
        basis = largest if small else d.scale
        for digits in (PLAIN_DIGITS, 3):
            tail = [max(digits, cell_len(text)) + 2 for text in d.col_labels[n_heads:]]
            cw = max(1, min(MAX_CELL, (room - sum(tail)) // max(1, n_heads)))
            unit = cell_unit(basis, 0 if small else cw - 1)
            if unit is None:
                break
        widths = [cw] * n_heads + [max(cw, w) for w in tail]
        show_values = cw >= 4

        def text_of(value: float, w: int) -> str:
            return in_unit(value, unit) if unit is not None else cell_value(value, w - 1)

        def row(label: Segment, cells: list[Segment]) -> Strip:
            if rule:
                cells.insert(d.rule_before, Segment(RULE, axis_style))
            return Strip([label, Segment(" ", base), *cells]).simplify()

        head = [
            Segment(fit(text, w - 1, "right") + " " if w > 1 else fit(text, 1), axis_style)
            for text, w in zip(d.col_labels, widths)
        ]
        # The corner names the columns' numbers (a learner at 80 x 24 met the grid before the words).
        lines = [row(Segment(fit(d.corner, label_width, "right") if d.corner else " " * label_width, axis_style), head)]
        for label, values in zip(d.row_labels, d.values):
            cells = []
            for value, w in zip(values, widths):
                text = fit(text_of(value, w), w - 1, "right") + " " if show_values else " " * w
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
        if show_values and unit is not None:
            example = round(basis / unit)
            said = _("In the cells: {cell} means {value}.").format(cell=example, value=num(example * unit, 2))
            lines.extend(fit_strip([Segment(" " * (label_width + 1), base), Segment(said, axis_style)], width))
        return lines
