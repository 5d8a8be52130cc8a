"""A matrix drawn as coloured cells, with token labels on both axes and values where they fit.

Cells get narrower as the matrix grows: wide cells with the value printed, then plain colour,
then half blocks (two rows per line); beyond that, rows and columns are averaged in blocks so the
picture always fits the width, and the axes say which positions each cell stands for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from ...i18n import _, ngettext
from ..formatting import cell_value, fit, num, quote
from ..palette import LEVELS, Palette, diverging, sequential
from .strip_widget import StripWidget, fit_strip, text_strips

HALF_BLOCK = "▀"
MAX_LABEL = 16


@dataclass
class HeatmapData:
    """What a heatmap shows: values (None = masked), labels and positions of rows and columns."""

    values: list[list[float | None]]
    row_labels: list[str]
    col_labels: list[str]
    row_positions: list[int] = field(default_factory=list)
    col_positions: list[int] = field(default_factory=list)
    signed: bool = False
    scale: float | None = None  # None: 1 for probabilities, the largest |value| for signed ones
    highlight_row: int | None = None
    masked_text: str = "-∞"
    pool_rows: bool = True  # average rows along with columns when the map is too wide
    caption: str = ""

    def __post_init__(self) -> None:
        if not self.row_positions:
            self.row_positions = list(range(len(self.values)))
        if not self.col_positions:
            self.col_positions = list(range(len(self.values[0]) if self.values else 0))

    @property
    def value_width(self) -> int:
        """Characters a printed value needs."""
        return 4 if self.signed else 3

    def resolved_scale(self) -> float:
        if self.scale is not None:
            return self.scale
        if not self.signed:
            return 1.0
        return max((abs(v) for row in self.values for v in row if v is not None), default=1.0) or 1.0


def pool(values: list[list[float | None]], row_factor: int, col_factor: int) -> list[list[float | None]]:
    """Averages blocks of `row_factor` x `col_factor` cells; a block of masked cells stays masked."""
    out = []
    for r0 in range(0, len(values), row_factor):
        rows = values[r0 : r0 + row_factor]
        line = []
        for c0 in range(0, len(rows[0]), col_factor):
            cells = [v for row in rows for v in row[c0 : c0 + col_factor] if v is not None]
            line.append(sum(cells) / len(cells) if cells else None)
        out.append(line)
    return out


@dataclass
class _Layout:
    values: list[list[float | None]]
    row_positions: list[int]
    col_positions: list[int]
    row_labels: list[str]
    col_labels: list[str]
    label_width: int
    cell_width: int
    show_values: bool
    half: bool
    pooled: int  # 1, or the block size of the averaging


class Heatmap(StripWidget):
    """A heatmap drawn with the Line API from cached strips."""

    COMPONENT_CLASSES = {
        "heatmap--label",
        "heatmap--label-current",
        "heatmap--axis",
        "heatmap--masked",
        "heatmap--caption",
    }

    DEFAULT_CSS = """
    Heatmap {
        height: auto;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.data: HeatmapData | None = None

    def show(self, data: HeatmapData | None) -> None:
        """Draws `data` (None: nothing)."""
        self.data = data
        self.invalidate()

    @property
    def palette(self) -> Palette:
        assert self.data is not None
        return diverging(self.app.current_theme.dark) if self.data.signed else sequential()

    # -- layout ------------------------------------------------------------------------------
    def layout_for(self, width: int) -> _Layout | None:
        """How the data fits in `width` cells: label width, cell width, pooling."""
        d = self.data
        if d is None or not d.values or not d.values[0]:
            return None
        cols = len(d.values[0])
        digits = len(str(max(d.row_positions[-1], 0)))
        longest = max((cell_len(lab) for lab in d.row_labels), default=0)
        # Without token labels a label may name a pair of positions ("128–132") in half-block mode.
        wanted = digits + 1 + longest if longest else 2 * digits + 1
        label_width = min(MAX_LABEL, wanted, max(digits, width // 4))
        avail = max(1, width - label_width - 1)
        longest_col = max((cell_len(lab) for lab in d.col_labels), default=0)
        max_cell = max(d.value_width + 2, min(9, longest_col + 1))
        cell_width = next((w for w in range(max_cell, 0, -1) if cols * w <= avail), 0)
        values, row_pos, col_pos = d.values, d.row_positions, d.col_positions
        row_labels, col_labels = d.row_labels, d.col_labels
        pooled = 1
        if cell_width == 0:
            pooled = math.ceil(cols / avail)
            row_factor = pooled if d.pool_rows else 1
            values = pool(values, row_factor, pooled)
            col_pos = col_pos[::pooled]
            col_labels = []
            if row_factor > 1:
                row_pos = row_pos[::row_factor]
                row_labels = []
            cell_width = 1
        show_values = cell_width >= d.value_width + 1
        half = cell_width == 1 and len(values) > 1
        return _Layout(values, row_pos, col_pos, row_labels, col_labels, label_width, cell_width, show_values, half, pooled)

    # -- drawing -----------------------------------------------------------------------------
    def build_lines(self, width: int) -> list[Strip]:
        layout = self.layout_for(width)
        if layout is None:
            return []
        d = self.data
        assert d is not None
        palette = self.palette
        scale = d.resolved_scale()
        base = self.base_style
        label_style = base + self.style_of("heatmap--label")
        current_style = base + self.style_of("heatmap--label-current")
        axis_style = base + self.style_of("heatmap--axis")
        masked_style = base + self.style_of("heatmap--masked")
        masked_color = masked_style.bgcolor or base.bgcolor
        lines: list[Strip] = []
        pad = " " * (layout.label_width + 1)
        cw = layout.cell_width

        if layout.col_labels and cw >= 5:
            cells = "".join(fit(label, cw - 1, "right") + " " for label in layout.col_labels)
            lines.append(Strip([Segment(pad, base), Segment(cells, label_style)]))
        lines.append(Strip([Segment(pad, base), Segment(self._axis(layout), axis_style)]))

        levels = [[None if v is None else palette.level(v, scale) for v in row] for row in layout.values]
        if layout.half:
            for y in range(0, len(levels), 2):
                top = levels[y]
                bottom = levels[y + 1] if y + 1 < len(levels) else None
                label = self._row_label(layout, y, pair=bottom is not None)
                current = d.highlight_row is not None and self._covers(layout, d.highlight_row, y, 2)
                segments = [Segment(label + " ", current_style if current else label_style)]
                for x, level in enumerate(top):
                    if bottom is None:
                        fg = palette.colors[level] if level is not None else masked_color
                        style = Style(color=fg, bgcolor=base.bgcolor)
                    else:
                        style = palette.half(level, bottom[x], masked_color)
                    segments.append(Segment(HALF_BLOCK, style))
                lines.append(Strip(segments).simplify())
        else:
            for y, row in enumerate(levels):
                current = d.highlight_row is not None and self._covers(layout, d.highlight_row, y, 1)
                label = self._row_label(layout, y, pair=False)
                segments = [Segment(label + " ", current_style if current else label_style)]
                for x, level in enumerate(row):
                    if level is None:
                        text = fit(d.masked_text, cw - 1, "right") + " " if layout.show_values else fit("·", cw, "center")
                        segments.append(Segment(text, masked_style))
                    else:
                        if layout.show_values:
                            text = fit(cell_value(layout.values[y][x], cw - 1), cw - 1, "right") + " "
                        else:
                            text = " " * cw
                        segments.append(Segment(text, palette.cell_styles[level]))
                lines.append(Strip(segments).simplify())
        lines.append(Strip.blank(1, base))
        indent = layout.label_width + 1
        if d.col_labels and not d.row_labels and not (layout.col_labels and cw >= 5) and layout.pooled == 1:
            # Columns too narrow for their tokens, and no row says them either (a patching grid's
            # rows are blocks): each position's token under the picture, numbered as on the axis.
            key = "  ".join(f"{pos}:{quote(label)}" for pos, label in zip(d.col_positions, d.col_labels))
            lines.extend(text_strips(_("Positions: {positions}").format(positions=key), width, label_style, indent))
        lines.extend(fit_strip(self._legend(layout, palette, scale, base, axis_style, masked_style), width))
        if layout.pooled > 1:
            if d.pool_rows:
                note = _("each cell averages a block of {n} × {n} positions")
            else:
                note = ngettext("each cell averages {n} position", "each cell averages {n} positions", layout.pooled)
            lines.extend(text_strips(note.format(n=layout.pooled), width, axis_style, indent))
        if d.caption:
            lines.extend(text_strips(d.caption, width, base + self.style_of("heatmap--caption"), indent))
        return lines

    def _covers(self, layout: _Layout, row: int, y: int, count: int) -> bool:
        """Whether display rows y .. y+count-1 stand for the data row `row`."""
        positions = layout.row_positions
        start = positions[y]
        end_index = y + count
        end = positions[end_index] if end_index < len(positions) else math.inf
        return start <= self.data.row_positions[row] < end

    def _row_label(self, layout: _Layout, y: int, pair: bool) -> str:
        """The label of display row `y`: position (right-aligned) and token, `label_width` wide."""
        digits = len(str(max(layout.row_positions[-1], 0)))
        pos = layout.row_positions[y]
        if pair:
            return fit(f"{pos}–{layout.row_positions[y + 1]}", layout.label_width, "right")
        if layout.row_labels:
            return f"{pos:>{digits}} " + fit(layout.row_labels[y], layout.label_width - digits - 1)
        return fit(str(pos), layout.label_width, "right")

    def _axis(self, layout: _Layout) -> str:
        """Column positions, written where they fit: right-aligned over the cell's value and token
        label (a cell's last character is the space between cells), at its start where the number
        is wider than that."""
        cw = layout.cell_width
        chars = [" "] * (len(layout.col_positions) * cw)
        free_from = 0
        for j, pos in enumerate(layout.col_positions):
            text = str(pos)
            x = j * cw + max(0, cw - 1 - len(text)) if cw > 1 else j * cw
            if x >= free_from and x + len(text) <= len(chars):
                chars[x : x + len(text)] = text
                free_from = x + len(text) + 1
        return "".join(chars)

    def _legend(self, layout, palette: Palette, scale: float, base: Style, axis: Style, masked: Style) -> list[Segment]:
        d = self.data
        low, high = (f"{num(-scale, 2)}", f"+{num(scale, 2)}") if d.signed else ("0", num(scale, 2))
        steps = 16
        segments = [Segment(" " * (layout.label_width + 1), base), Segment(low + " ", axis)]
        for i in range(steps):
            level = round(i / (steps - 1) * (LEVELS - 1))
            segments.append(Segment(" ", Style(bgcolor=palette.colors[level])))
        segments.append(Segment(" " + high, axis))
        if any(v is None for row in d.values for v in row):
            segments.append(Segment("  ", base))
            segments.append(Segment(" " + d.masked_text + " ", masked))
            segments.append(Segment(" " + _("masked"), axis))
        return segments
