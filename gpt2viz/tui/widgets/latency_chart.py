"""Time per step as vertical bars of block characters; two series overlap for a comparison.

One bar per step (bar and gap when there is room; steps averaged in groups when there are more
steps than columns). The first step of a run (the prefill) has a colour of its own. With two
series, the taller bar of each step stands behind the shorter one, each in its series' colour.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from ...i18n import _
from ..formatting import fit, num
from .strip_widget import StripWidget

LEVELS = " ▁▂▃▄▅▆▇█"
ROWS = 5
CLIP_RATIO = 3.0  # a bar more than this many times the steps around it is drawn cut off


@dataclass
class Series:
    """One line of numbers on the chart: ms per step, with a colour (component class) per bar.
    (The panel's legend names the series.)"""

    values: list[float]
    kinds: list[str] = field(default_factory=list)  # per bar: a component class name

    def kind(self, i: int, default: str) -> str:
        return self.kinds[i] if i < len(self.kinds) else default


def groups(n: int, width: int) -> tuple[int, int]:
    """(steps per bar, cells per bar) so that `n` bars fit `width` cells."""
    if n <= 0 or width <= 0:
        return 1, 1
    if 2 * n <= width:
        return 1, 2
    return max(1, math.ceil(n / width)), 1


def pooled(values: list[float], size: int) -> list[float]:
    """Means of consecutive groups of `size` values."""
    return [sum(values[i : i + size]) / len(values[i : i + size]) for i in range(0, len(values), size)]


def chart_scale(series: list[Series], first: str) -> tuple[float, int]:
    """The value of a full-height bar, and how many bars are taller and drawn cut off.

    The scale follows the ordinary steps. A bar is cut off when it is more than CLIP_RATIO times
    what it stands among: a first step (the prefill) against its series' other steps, any other
    step against its neighbours (a one-off spike: a garbage collection, another process). A trend,
    such as full passes that grow with the context, is never cut: each step is near its neighbours."""
    everything = [v for s in series for v in s.values]
    if not everything:
        return 1.0, 0
    outliers = set()
    for n, s in enumerate(series):
        ordinary = [i for i in range(len(s.values)) if s.kind(i, "") != first]
        for k, i in enumerate(ordinary):  # spikes: against the neighbouring steps
            around = [s.values[j] for j in ordinary[max(0, k - 1) : k] + ordinary[k + 1 : k + 2]]
            if around and max(around) > 0 and s.values[i] > CLIP_RATIO * max(around):
                outliers.add((n, i))
        rest = [s.values[i] for i in ordinary if (n, i) not in outliers]
        for i, v in enumerate(s.values):  # first steps: against the series' ordinary steps
            if s.kind(i, "") == first and rest and max(rest) > 0 and v > CLIP_RATIO * max(rest):
                outliers.add((n, i))
    kept = [v for n, s in enumerate(series) for i, v in enumerate(s.values) if (n, i) not in outliers]
    scale = (max(kept) if kept else max(everything)) or 1.0
    return scale, sum(1 for v in everything if v > scale)


def fill(value: float, scale: float, row: int, rows: int) -> int:
    """Eighths (0..8) of the cell in `row` (0 = top) covered by a bar of `value`."""
    eighths = round(min(1.0, value / scale) * rows * 8) if scale > 0 else 0
    if value > 0 and eighths == 0:
        eighths = 1  # every step shows, however short
    return max(0, min(8, eighths - (rows - 1 - row) * 8))


class LatencyChart(StripWidget):
    """Milliseconds per generation step; the selected step is marked under its bar."""

    COMPONENT_CLASSES = {
        "latency-chart--axis",
        "latency-chart--first",
        "latency-chart--decode",
        "latency-chart--naive",
        "latency-chart--cached",
        "latency-chart--marker",
    }

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.series: list[Series] = []
        self.selected: int | None = None
        self.rows = ROWS

    def set_rows(self, rows: int) -> None:
        """Makes the bars `rows` lines tall."""
        if rows != self.rows:
            self.rows = rows
            self.invalidate()

    def show(self, series: list[Series], selected: int | None) -> None:
        """Draws `series` (one, or two to compare) with step `selected` marked."""
        self.series = series
        self.selected = selected
        self.invalidate()

    def build_lines(self, width: int) -> list[Strip]:
        axis = self.style_of("latency-chart--axis")
        series = [s for s in self.series if s.values]
        if not series:
            return [Strip([Segment(fit(_("no steps yet"), width), axis)])]
        n = max(len(s.values) for s in series)
        size, cells = groups(n, width)
        scale, clipped = chart_scale(series, "latency-chart--first")
        tallest = max(v for s in series for v in s.values)
        bars = []  # per series: (values, kinds) per bar
        for s in series:
            values = pooled(s.values, size)
            kinds = [s.kind(i * size, "latency-chart--decode") for i in range(len(values))]
            bars.append((values, kinds))
        # The tallest bar in as many digits as tell it from the top ('top 10.9 · ↑1 up to 10.9' read
        # as a bar cut off at its own height).
        digits = next((d for d in range(3, 8) if num(tallest, d) != num(scale, d)), 3)
        facts = {"top": num(scale, digits), "clipped": clipped, "tallest": num(tallest, digits), "size": size}
        # The fullest header the width holds, never one cut short: the steps per bar go first,
        # then the note on the bars cut off (the '↑' on such a bar still marks it).
        headers = []
        if clipped and size > 1:
            headers.append(_("ms/step · top {top} · ↑{clipped} up to {tallest} · {size} steps/bar"))
        if clipped:
            headers.append(_("ms/step · top {top} · ↑{clipped} up to {tallest}"))
        if size > 1:
            headers.append(_("ms/step · top {top} ms · {size} steps/bar"))
        headers.append(_("ms/step · top {top} ms"))
        texts = [header.format(**facts) for header in headers]
        header = next((text for text in texts if cell_len(text) <= width), texts[-1])
        lines = [Strip([Segment(fit(header, width), axis)])]
        for row in range(self.rows):
            segments = []
            for b in range(math.ceil(n / size)):
                segments.append(self._cell(bars, b, row, scale, clipped))
                if cells == 2:
                    segments.append(Segment(" "))
            lines.append(Strip(segments).simplify())
        lines.append(self._marker_line(n, size, cells, width, axis))
        return lines

    def _cell(self, bars, b: int, row: int, scale: float, clipped: bool) -> Segment:
        present = [(values[b], kinds[b]) for values, kinds in bars if b < len(values)]
        if not present:
            return Segment(" ")
        present.sort(key=lambda vk: vk[0])  # shorter in front
        front_value, front_kind = present[0]
        front = fill(front_value, scale, row, self.rows)
        front_style = self.style_of(front_kind)
        if row == 0 and clipped and front_value > scale:
            return Segment("↑", front_style)
        if len(present) == 1:
            return Segment(LEVELS[front], front_style) if front else Segment(" ")
        back_value, back_kind = present[-1]
        back = fill(back_value, scale, row, self.rows)
        back_style = self.style_of(back_kind)
        if front == 8:
            return Segment("█", front_style)
        if front > 0:
            bg = back_style.color if back > front else None
            return Segment(LEVELS[front], front_style + Style(bgcolor=bg))
        return Segment(LEVELS[back], back_style) if back else Segment(" ")

    def _marker_line(self, n: int, size: int, cells: int, width: int, axis: Style) -> Strip:
        marker = self.style_of("latency-chart--marker")
        bars = math.ceil(n / size)
        line = "▔" * min(width, bars * cells)
        segments = [Segment(line, axis)]
        if self.selected is not None and 0 <= self.selected < n:
            x = (self.selected // size) * cells
            if x < width:
                segments = [Segment(line[:x], axis), Segment("▲", marker), Segment(line[x + 1 :], axis)]
        return Strip(segments)
