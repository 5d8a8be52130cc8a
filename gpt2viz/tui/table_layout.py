"""Lines of text laid out in the cells they have: column headers that are never cut, sentences
wrapped by cells (Chinese between characters), chips (tokens, keys) packed into lines.

A picture's row must fit the width it is given: Textual would wrap a longer one, and a table row
broken over two lines no longer reads as a row. These helpers build every line no wider than the
width, so the picture's rendered lines are its rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from textual.content import Content

from ..i18n.layout import wrap_lines


@dataclass(frozen=True)
class Column:
    """A column's place in a table row: its first cell, its width, and how its header aligns."""

    x: int
    width: int
    align: str = "left"  # "left" or "right"


def header_lines(columns: list[tuple[Column, Content | str]], width: int, style: str = "") -> list[Content]:
    """The headers of `columns`, each whole: over its column, running on into free cells next to
    it when it is longer (never into another header, nor past `width`), on a second line where
    the first has no room for it. One line when all fit, two at most; a header wider than the
    whole line is cut only then."""
    placed: list[list[tuple[int, Content]]] = [[], []]
    for column, header in columns:
        text = header if isinstance(header, Content) else Content(header)
        length = text.cell_length
        if column.align == "right":
            start = column.x + column.width - length
        else:
            start = column.x
        start = max(0, min(start, width - length))
        for line in placed:
            end_of_last = max((x + t.cell_length for x, t in line), default=-1)
            if start > end_of_last:
                line.append((start, text))
                break
        else:
            line = placed[1]
            end_of_last = max((x + t.cell_length for x, t in line), default=-1)
            start = end_of_last + 1
            line.append((start, text.truncate(max(1, width - start), ellipsis=True)))
    rows = []
    for line in placed:
        if not line:
            continue
        parts: list[Content] = []
        used = 0
        for x, text in line:
            parts.append(Content(" " * (x - used)))
            parts.append(text)
            used = x + text.cell_length
        row = Content.assemble(*parts)
        rows.append(row.stylize_before(style) if style else row)
    return rows


def wrapped(content: Content | str, width: int, indent: int = 0, keep: re.Pattern | None = None) -> list[Content]:
    """`content` in lines of at most `width` cells, broken at spaces and between Chinese
    characters (gpt2viz.i18n.layout), its styles kept; lines after the first indented by
    `indent` cells. Never inside a match of `keep` (a shape: '[1, 8, 44, 14]')."""
    text = content if isinstance(content, Content) else Content(content)
    if text.cell_length <= width:
        return [text]
    lines: list[Content] = []
    offset = 0
    # Where the lines break is found on a copy whose kept spans have no spaces (same length, so
    # the same offsets); the lines themselves are cut from the text as it is.
    plain = text.plain if keep is None else keep.sub(lambda m: m.group().replace(" ", "_"), text.plain)
    for i, line in enumerate(wrap_lines(plain, max(1, width - indent))):
        start = plain.find(line, offset) if line else offset
        piece = text[start : start + len(line)]
        offset = start + len(line)
        lines.append(Content.assemble(" " * indent, piece) if i else piece)
    return lines


def chip_lines(chips: list[tuple[str, str]], width: int, gap: str = " ") -> list[Content]:
    """Chips (text, style), such as tokens or a form's keys, one after another with `gap`
    between, packed into lines of at most `width` cells; a chip is never split between two lines."""
    lines: list[list[tuple[str, str] | str]] = [[]]
    used = 0
    for text, style in chips:
        length = Content(text).cell_length
        if lines[-1] and used + len(gap) + length > width:
            lines.append([])
            used = 0
        if lines[-1] and gap:
            lines[-1].append(gap)
            used += len(gap)
        lines[-1].append((text, style))
        used += length
    return [Content.assemble(*line) for line in lines]
