"""Colour scales for the pictures: sequential for probabilities, diverging for signed values.

Both are colour-blind safe: the sequential scale is viridis; the diverging one runs blue to orange,
the pair that stays apart for the common forms of colour blindness. On dark themes the diverging
scale is dark in the middle (zero fades into the background), on light themes light.
"""

from __future__ import annotations

from functools import lru_cache

from rich.color import Color
from rich.style import Style

LEVELS = 33

VIRIDIS = ("#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725")
BLUE_ORANGE_DARK = ("#cfe6ff", "#5aa0e6", "#2a5f9e", "#202226", "#a65418", "#ec8f3a", "#ffd8a8")
BLUE_ORANGE_LIGHT = ("#1d4f91", "#4a8fd1", "#a9cdee", "#f4f4f4", "#f5c28a", "#e0812d", "#8f4205")


def _hex(color: str) -> tuple[int, int, int]:
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


def _interpolate(stops: tuple[str, ...], n: int) -> list[tuple[int, int, int]]:
    rgb = [_hex(s) for s in stops]
    out = []
    for i in range(n):
        t = i / (n - 1) * (len(rgb) - 1)
        k = min(int(t), len(rgb) - 2)
        f = t - k
        a, b = rgb[k], rgb[k + 1]
        out.append(tuple(round(a[c] + (b[c] - a[c]) * f) for c in range(3)))
    return out


def _ink(rgb: tuple[int, int, int]) -> Color:
    """Black or white text, whichever reads better on `rgb`."""
    r, g, b = rgb
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return Color.from_rgb(0, 0, 0) if luminance > 140 else Color.from_rgb(255, 255, 255)


class Palette:
    """A scale of LEVELS colours with cached Styles for full cells and half blocks."""

    def __init__(self, stops: tuple[str, ...], signed: bool) -> None:
        self.signed = signed
        self.rgb = _interpolate(stops, LEVELS)
        self.colors = [Color.from_rgb(*c) for c in self.rgb]
        self.cell_styles = [Style(color=_ink(c), bgcolor=col) for c, col in zip(self.rgb, self.colors)]
        self._half: dict[tuple, Style] = {}

    def level(self, value: float, scale: float) -> int:
        """The level of `value`: 0..1 for sequential scales, -scale..scale for signed ones."""
        if self.signed:
            t = 0.5 + 0.5 * (value / scale if scale > 0 else 0.0)
        else:
            t = value / scale if scale > 0 else 0.0
        return min(LEVELS - 1, max(0, round(t * (LEVELS - 1))))

    def half(self, top: int | None, bottom: int | None, masked: Color) -> Style:
        """The style of an upper-half block '▀' with `top` over `bottom` (None: masked)."""
        key = (top if top is not None else -1, bottom if bottom is not None else -1, masked)
        style = self._half.get(key)
        if style is None:
            fg = self.colors[top] if top is not None else masked
            bg = self.colors[bottom] if bottom is not None else masked
            style = self._half[key] = Style(color=fg, bgcolor=bg)
        return style


@lru_cache(maxsize=None)
def sequential() -> Palette:
    """The scale for probabilities and other values in [0, 1]."""
    return Palette(VIRIDIS, signed=False)


@lru_cache(maxsize=None)
def diverging(dark: bool = True) -> Palette:
    """The scale for signed values, centred on zero."""
    return Palette(BLUE_ORANGE_DARK if dark else BLUE_ORANGE_LIGHT, signed=True)
