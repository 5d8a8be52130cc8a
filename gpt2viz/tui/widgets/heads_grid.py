"""All heads of one layer at a glance: a small attention pattern per head, the selected one marked."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from ...i18n import _, ngettext
from ..formatting import fit, percent
from ..palette import sequential
from .heatmap import HALF_BLOCK, pool
from .strip_widget import StripWidget, text_strips

GAP = 2
MAX_CELLS = 24  # positions per side of a small map before they are averaged


@dataclass
class HeadsData:
    """Per head: its pattern (None = masked), and where the last query looks most."""

    maps: list[list[list[float | None]]]
    focus: list[tuple[int, float]]  # (position, weight) per head
    tokens: list[str]
    selected: int = 0


class HeadsGrid(StripWidget):
    """A grid of small attention maps, one per head."""

    COMPONENT_CLASSES = {"heads-grid--title", "heads-grid--selected", "heads-grid--caption", "heads-grid--masked"}

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.data: HeadsData | None = None

    def show(self, data: HeadsData | None) -> None:
        """Draws `data` (None: nothing)."""
        self.data = data
        self.invalidate()

    def build_lines(self, width: int) -> list[Strip]:
        d = self.data
        if d is None or not d.maps:
            return []
        base = self.base_style
        title_style = base + self.style_of("heads-grid--title")
        selected_style = base + self.style_of("heads-grid--selected")
        caption_style = base + self.style_of("heads-grid--caption")
        masked = (base + self.style_of("heads-grid--masked")).bgcolor or base.bgcolor
        palette = sequential()

        # Queries x keys: square in a prefill, one row of query against the cache in a decode step.
        factor = math.ceil(max(len(d.maps[0]), len(d.maps[0][0])) / MAX_CELLS)
        row_factor = factor if len(d.maps[0]) > 1 else 1  # a decode step's one row is not averaged
        maps = [pool(m, row_factor, factor) if factor > 1 else m for m in d.maps]
        n_rows, n_cols = len(maps[0]), len(maps[0][0])
        cell_width = 2 if n_cols <= 8 else 1  # small maps get square cells of two columns, larger ones half blocks
        half = cell_width == 1
        map_width = n_cols * cell_width
        tile = max(map_width, 14)
        per_row = max(1, (width + GAP) // (tile + GAP))
        levels = [[[None if v is None else palette.level(v, 1.0) for v in row] for row in m] for m in maps]

        lines: list[Strip] = []
        for first in range(0, len(maps), per_row):
            heads = range(first, min(first + per_row, len(maps)))
            title: list[Segment] = []
            for h in heads:
                j, w = d.focus[h]
                name = ("▶" if h == d.selected else " ") + _("head {head}").format(head=h)
                text = fit(name, tile - 6) + fit(percent(w), 6, "right")
                title += [Segment(text, selected_style if h == d.selected else title_style), Segment(" " * GAP, base)]
            lines.append(Strip(title).crop(0, width))  # the gap after the last tile may not fit
            map_lines = math.ceil(n_rows / 2) if half else n_rows
            for y in range(map_lines):
                segs: list[Segment] = []
                for h in heads:
                    rows = levels[h]
                    if half:
                        top = rows[2 * y]
                        bottom = rows[2 * y + 1] if 2 * y + 1 < n_rows else None
                        for x in range(n_cols):
                            if bottom is None:
                                fg = palette.colors[top[x]] if top[x] is not None else masked
                                segs.append(Segment(HALF_BLOCK, Style(color=fg, bgcolor=base.bgcolor)))
                            else:
                                segs.append(Segment(HALF_BLOCK, palette.half(top[x], bottom[x], masked)))
                    else:
                        for level in rows[y]:
                            bg = palette.colors[level] if level is not None else masked
                            segs.append(Segment("  ", Style(bgcolor=bg)))
                    segs.append(Segment(" " * (tile - map_width + GAP), base))
                lines.append(Strip(segs).simplify().crop(0, width))
            caption: list[Segment] = []
            for h in heads:
                j, _weight = d.focus[h]
                token = d.tokens[j] if j < len(d.tokens) else "?"
                caption += [Segment(fit(f"→{j} {token}", tile), caption_style), Segment(" " * GAP, base)]
            lines.append(Strip(caption).crop(0, width))
            lines.append(Strip.blank(1, base))
        if factor > 1:
            if row_factor > 1:
                note = _("each cell averages a block of {n} × {n} positions").format(n=factor)
            else:
                note = ngettext("each cell averages {n} position", "each cell averages {n} positions", factor).format(n=factor)
            lines.extend(text_strips(note, width, caption_style))
        return lines
