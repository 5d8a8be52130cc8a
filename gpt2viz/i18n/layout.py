"""Text laid out in terminal cells, where a Chinese character takes two: line breaking.

Textual, Rich's wrapping as Textual uses it, and argparse break lines only at spaces; a line of
Chinese has none, so it would run ragged or be cut mid-sentence. `wrap_wide` also breaks between
wide characters, following the Chinese rules for punctuation.
"""

from __future__ import annotations

import re

from rich.cells import cell_len, chop_cells, get_character_cell_size

# Line-breaking rules of Chinese text: no line starts with a closing mark or ends with an opening one.
NO_LINE_START = frozenset("，。、；：？！）」』】》”’…")
NO_LINE_END = frozenset("（「『【《“‘")
WRAP_UNIT = re.compile(r"\s+|[^\s]\s*")


def _is_wide(ch: str) -> bool:
    return get_character_cell_size(ch) == 2


def wrap_wide(text: str, width: int) -> str:
    """`text` with line breaks such that no line is wider than `width` cells. Textual wraps only at
    spaces, which leaves a line of Chinese ragged or cut mid-sentence; this also breaks between two
    wide characters (never before a closing mark or after an opening one, nor inside a run of Latin
    letters and digits). Text without wide characters comes back as it is, for Textual to wrap."""
    if width <= 0 or not any(_is_wide(ch) for ch in text):
        return text
    return "\n".join(line for paragraph in text.split("\n") for line in wrap_lines(paragraph, width))


def wrap_lines(paragraph: str, width: int) -> list[str]:
    """One paragraph in lines of at most `width` cells, broken at spaces and between wide
    characters; a word wider than a line is folded. A line always takes at least one character,
    so a width narrower than a character (0, or 1 for a Chinese one) still ends."""
    width = max(1, width)
    # Units that a line may break between: a wide character, or a run of narrow ones (a word,
    # a number, a shape), each with the spaces after it.
    units: list[str] = []
    for piece in WRAP_UNIT.findall(paragraph):
        head = piece[0]
        glue = units and (
            head in NO_LINE_START
            or units[-1].rstrip()[-1:] in NO_LINE_END
            or not (_is_wide(head) or head.isspace() or _is_wide(units[-1][-1]) or units[-1][-1].isspace())
        )
        if glue:
            units[-1] += piece
        else:
            units.append(piece)
    lines, line = [], ""
    for unit in units:
        if line.strip() and cell_len((line + unit).rstrip()) > width:
            lines.append(line.rstrip())
            line = unit.lstrip()
        else:
            line += unit
        while cell_len(line.rstrip()) > width:  # one unit wider than the line: folded
            first = chop_cells(line, width)[0] or line[0]  # '' when one character is wider than the line
            lines.append(first)
            line = line[len(first) :].lstrip()
    return [*lines, line.rstrip()]


_SPACE_BETWEEN_WIDE = re.compile(r"(?<=[\u2e80-\u9fff\uff00-\uffef]) (?=[\u2e80-\u9fff\uff00-\uffef])")


def between_wide(text: str) -> str:
    """`text` without a space between two Chinese characters: a sentence that puts a setting's name
    before its words ('{setting} 必须是…', spaced for a Latin name such as top-k) reads '温度必须是…'
    where the name is Chinese."""
    return _SPACE_BETWEEN_WIDE.sub("", text)
