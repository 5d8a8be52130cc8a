"""How gpt2viz shows text it did not write: a prompt, token texts, a model's name, a trace's
fields, file paths, error messages. One rule, used by the core, the TUI and the command line.

Characters that could act on the terminal or hide or reorder the text around them are never
passed through: C0 and C1 control characters, DEL, lone surrogates, bidi overrides and isolates,
zero-width characters, line and paragraph separators (the Unicode categories Cc, Cf, Cs, Zl,
Zp). Each is shown as an escape a person can read, `\\x1b`, `\\u202e`, `\\U000e0041`; line breaks
and tabs, where text is shown on one line, as ↵ and ⇥ (the marks the token table uses too).
The rule is idempotent: what it returns passes through it unchanged.

It only decides which characters are shown how. Markup is the drawing code's business: the app
hands such text to Textual as plain text (`Content`, `markup=False`), never as markup.

Nothing here imports gpt2viz: every layer may use it.
"""

from __future__ import annotations

import unicodedata

# Control characters (C0, DEL, C1), format characters (bidi marks, overrides and isolates,
# zero-width space and joiners, the BOM, tag characters), surrogates, line/paragraph separators.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})

# The marks of a line break and a tab when text is shown on one line.
LINE_BREAK, TAB = "↵", "⇥"

# What a text that shows as nothing at all is shown as (a token of no characters, say).
EMPTY = "∅"


def is_hidden(ch: str) -> bool:
    """Whether the character `ch` must not reach the terminal as it is."""
    return unicodedata.category(ch) in HIDDEN_CATEGORIES


def escaped(ch: str) -> str:
    """The visible form of one character: `\\x1b`, `\\u202e`, `\\U000e0041`. A surrogate from
    U+DC80 to U+DCFF is how Python holds a byte of a file name or an argument that is not UTF-8
    (os.fsdecode's surrogateescape): shown as that byte, `\\x9b`, as the name has it (so a lone
    U+DC9B and the C1 character U+009B read alike: both are hidden, either way)."""
    n = ord(ch)
    if 0xDC80 <= n <= 0xDCFF:
        n -= 0xDC00
    if n < 0x100:
        return f"\\x{n:02x}"
    return f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def one_cell_mark(ch: str) -> str:
    """A hidden character's mark where its escape cannot take its place one for one (a text field
    being edited, whose cursor counts characters): ␛ for ESC and the other C0 control pictures,
    ␡ for DEL, � for the rest."""
    n = ord(ch)
    if n < 0x20:
        return chr(0x2400 + n)
    return "␡" if n == 0x7F else "\ufffd"


def safe_field(text: str) -> str:
    """`text` as a text field being edited shows it: each hidden character as its one-cell mark,
    so that the field's cursor, which counts characters, stays on the character it is on."""
    if text.isprintable():
        return text
    return "".join(one_cell_mark(ch) if is_hidden(ch) else ch for ch in text)


def safe_line(text: str) -> str:
    """`text` on one line, safe to show: line breaks as ↵, tabs as ⇥, every other hidden
    character escaped (`\\x1b`)."""
    if text.isprintable():  # the common case, checked in C: nothing to do
        return text
    text = text.replace("\r\n", LINE_BREAK).replace("\n", LINE_BREAK).replace("\r", LINE_BREAK).replace("\t", TAB)
    return _escape_hidden(text)


def safe_text(text: str) -> str:
    """`text` safe to show on several lines: its line breaks kept (`\\r\\n` as `\\n`), tabs as ⇥,
    every other hidden character escaped."""
    if text.isprintable():
        return text
    return "\n".join(_escape_hidden(line.replace("\t", TAB)) for line in text.replace("\r\n", "\n").split("\n"))


# A token shown on its own: whitespace as a mark, so no token looks blank.
_TOKEN_MARKS = {" ": "␣", "\n": LINE_BREAK, "\t": TAB, "\r": "␍"}
# Besides the hidden ones, a token escapes the characters that would look like nothing or like
# something else there: other spaces (U+00A0, U+3000), private-use and unassigned code points.
_TOKEN_ESCAPED = HIDDEN_CATEGORIES | {"Zs", "Co", "Cn"}


def visible_token(text: str) -> str:
    """A token's text as a person should see it: whitespace as ␣ ↵ ⇥ ␍, hidden and blank-looking
    characters escaped, and a lone combining mark on a dotted circle (◌́), so that only a token
    of no characters at all shows as nothing."""
    out = []
    for i, ch in enumerate(text):
        category = unicodedata.category(ch)
        if ch in _TOKEN_MARKS:
            out.append(_TOKEN_MARKS[ch])
        elif category in _TOKEN_ESCAPED:
            # A character from U+0080 to U+00FF as \u00a0, never \xa0: in a token's text \xNN is a
            # raw byte that is no character alone (the tokenizer's), and running text puts those
            # together (tui/formatting.py); NBSP, two bytes, would read as one.
            out.append(f"\\u{ord(ch):04x}" if 0x80 <= ord(ch) < 0x100 else escaped(ch))
        elif category in ("Mn", "Me") and i == 0:
            out.append("◌" + ch)
        else:
            out.append(ch)
    return "".join(out)


def token_label(text: str) -> str:
    """A token text (as a trace holds it) ready for the screen: `visible_token`, and ∅ for a token
    that would show as nothing."""
    return visible_token(text) or EMPTY


def _escape_hidden(text: str) -> str:
    return "".join(escaped(ch) if is_hidden(ch) else ch for ch in text)
