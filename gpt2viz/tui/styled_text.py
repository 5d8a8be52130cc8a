"""A translated sentence drawn with styles: its own words in one style, each fact in its own.

A sentence stays one msgid or template, with named placeholders, while a token or a number in it
stands out: `styled(_("{n} layers filled"), ".dim", n=("3/4", "bold"))`. This is the one way the
app draws such a sentence (pictures, panels, status lines, the top bar).
"""

from __future__ import annotations

from string import Formatter

from textual.content import Content

from ..i18n.layout import wrap_lines
from ..text_safety import safe_line

# A fact: a text in the default style, a (text, style) pair, or Content styled already.
Part = str | tuple[str, str] | Content

_FORMATTER = Formatter()


def styled(template: str, style: str = "", **values: Part) -> Content:
    """`template` (translated already) with its literal words in `style` and each placeholder
    filled with its value from `values`; a placeholder's conversion and format spec ({value!r},
    {n:>5}) apply to the value's text. A value's text is shown by gpt2viz.text_safety's rule (a
    token or a name from a trace may hold control characters), and never read as markup."""
    parts: list[Content] = []
    for literal, name, spec, conversion in _FORMATTER.parse(template):
        if literal:
            parts.append(Content.styled(literal, style) if style else Content(literal))
        if name is None:
            continue
        value = values[name]
        if isinstance(value, Content):
            parts.append(value)
            continue
        text, value_style = value if isinstance(value, tuple) else (value, "")
        if conversion or spec:
            text = _FORMATTER.format_field(_FORMATTER.convert_field(text, conversion), spec or "")
        text = safe_line(str(text))
        parts.append(Content.styled(text, value_style) if value_style else Content(text))
    return Content.assemble(*parts)


def laid_lines(content: Content, width: int) -> Content:
    """`content` broken into lines of at most `width` cells as Chinese text breaks (between two
    wide characters, never before a closing mark; gpt2viz.i18n.layout), its styles kept: Textual
    breaks only at spaces, which left a line of Chinese half empty."""
    plain = content.plain
    lines = wrap_lines(plain, width) if width > 0 and "\n" not in plain else [plain]
    if len(lines) <= 1:
        return content
    pieces, at = [], 0
    for line in lines:
        start = plain.find(line, at)
        if start < 0:  # not a prefix of what is left (a folded word): leave it to Textual
            return content
        pieces.append(content[start : start + len(line)])
        at = start + len(line)
    return Content("\n").join(pieces)
