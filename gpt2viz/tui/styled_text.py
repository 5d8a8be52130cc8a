"""A translated sentence drawn with styles: its own words in one style, each fact in its own.

A sentence stays one msgid or template, with named placeholders, while a token or a number in it
stands out: `styled(_("{n} layers filled"), ".dim", n=("3/4", "bold"))`. This is the one way the
app draws such a sentence (pictures, panels, status lines, the top bar).
"""

from __future__ import annotations

from string import Formatter

from textual.content import Content

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
