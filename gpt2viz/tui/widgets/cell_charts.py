"""Small charts drawn with the terminal's own characters, as plain strings (the pictures style
them): columns of block eighths, a curve of braille dots, an axis with labels at chosen columns."""

from __future__ import annotations

from typing import Callable

from rich.cells import cell_len

from .latency_chart import LEVELS, fill

BRAILLE = 0x2800
# The bit of each dot of a braille cell: [row 0-3][column 0-1].
BRAILLE_DOTS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))


def column_cells(values: list[float], top: float, rows: int, width: int) -> list[list[str]]:
    """Per line (top first), per value, the `width` characters of a column `value / top` of `rows`
    lines tall, in eighths of a line (any value above 0 shows)."""
    return [[LEVELS[fill(v, top, row, rows)] * width for v in values] for row in range(rows)]


def braille_curve(
    f: Callable[[float], float], x_range: tuple[float, float], y_range: tuple[float, float], width: int, rows: int
) -> list[str]:
    """`f` over `x_range` in `width` x `rows` cells of braille dots (2 x 4 a cell), y from
    `y_range[0]` (bottom) to `y_range[1]` (top); each dot column is joined to the one before it,
    so the curve has no gaps."""
    x0, x1 = x_range
    dots_x = 2 * width
    cells = [[0] * width for _ in range(rows)]
    before = None
    for i in range(dots_x):
        row = _dot_row(f(x0 + (i + 0.5) / dots_x * (x1 - x0)), y_range, rows)
        low, high = (row, row) if before is None else (min(before, row), max(before, row))
        for r in range(low, high + 1):
            cells[r // 4][i // 2] |= BRAILLE_DOTS[r % 4][i % 2]
        before = row
    # A cell with no dot is a space: some fonts draw the empty braille pattern as faint dots.
    return ["".join(chr(BRAILLE + bits) if bits else " " for bits in line) for line in cells]


def line_of(y: float, y_range: tuple[float, float], rows: int) -> int:
    """The line (0 = top) of `rows` on which `braille_curve` draws the value `y`."""
    return _dot_row(y, y_range, rows) // 4


def _dot_row(y: float, y_range: tuple[float, float], rows: int) -> int:
    """The row of braille dots (0 = top, 4 a line) that stands for `y`."""
    (y0, y1), dots = y_range, 4 * rows
    row = round((y1 - y) / (y1 - y0) * (dots - 1)) if y1 > y0 else dots - 1
    return max(0, min(dots - 1, row))


def axis_labels(ticks: list[tuple[int, str]], width: int) -> str:
    """`width` cells with each label of `ticks` (column, text) centred on its column (the first
    starting at it, the last ending at it when they are the line's ends), in the order given: a
    label that would touch one placed before it is left out."""
    placed: list[tuple[int, str]] = []
    for column, text in ticks:
        length = cell_len(text)
        if column <= 0:
            start = 0
        elif column >= width:
            start = width - length
        else:
            start = column - length // 2
        start = max(0, min(start, width - length))
        if any(start < x + cell_len(t) + 1 and x < start + length + 1 for x, t in placed):
            continue
        placed.append((start, text))
    line, used = "", 0
    for start, text in sorted(placed):
        line += " " * (start - used) + text
        used = start + cell_len(text)
    return line + " " * (width - used)
