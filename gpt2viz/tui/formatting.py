"""Numbers, shapes and token texts as the app prints them (no Textual here: easy to test).

`count` (thousands separators) lives in gpt2viz.i18n.numbers, below the trace, whose notices use it
too; it is imported here so that the app has one module of formats."""

from __future__ import annotations

import codecs
import math
import re

from rich.cells import cell_len, chop_cells, set_cell_size

from ..i18n import _
from ..i18n.numbers import count
from ..text_safety import safe_line, token_label

def parts_off(specs) -> str:
    """The parts switched off in a pass (their specs, 'L0H1', 'L1.mlp'), listed in the reader's
    language ('L0H1、L1.mlp' in Chinese), safe to show (a replayed trace's are anyone's text)."""
    return safe_line(_(", ").join(specs))


# What a number that is not known (yet) shows: a dash, the same in every language.
UNKNOWN = "–"

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


def shape(dims) -> str:
    """A tensor shape as the app writes it: `[1, 5, 768]`."""
    return "[" + ", ".join(str(int(d)) for d in dims) + "]"


def compact_shape(dims) -> str:
    """A shape without spaces, for narrow columns: `[1,5,768]`."""
    return "[" + ",".join(str(int(d)) for d in dims) + "]"


def millions(n: int) -> str:
    """A parameter count in millions: 38.6M."""
    return f"{n / 1e6:.1f}M"


def nbytes(n: int) -> str:
    """A byte count, exact, with a binary-unit reading when large: 368,640 B (360 KiB)."""
    n = int(n)
    if n < 1024:
        return f"{count(n)} B"
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            value = n / size
            text = f"{value:.0f}" if value == int(value) else f"{value:.1f}"
            return f"{count(n)} B ({text} {unit})"
    return f"{count(n)} B"  # pragma: no cover


def num(x: float | None, digits: int = 3) -> str:
    """A float with `digits` significant digits, never in scientific notation for normal sizes."""
    if x is None:
        return UNKNOWN
    if x == 0:
        return "0"
    if not math.isfinite(x):
        return str(x)
    magnitude = math.floor(math.log10(abs(x)))
    if magnitude < -4 or magnitude >= 7:
        return f"{x:.{digits - 1}e}"
    decimals = max(0, digits - 1 - magnitude)
    return f"{x:.{decimals}f}"


def near_zero(x: float | None) -> str:
    """A value that is zero up to rounding noise (a mean taken away: -1.32e-08), said to be 0."""
    return "0" if x is not None and abs(x) < 1e-6 else num(x)


def num_in(x: float | None, width: int = 8) -> str:
    """`x` with 3 significant digits in at most `width` characters ('-4.38e-4' for tiny values)."""
    text = num(x)
    if len(text) <= width or x is None:
        return text
    mantissa, exponent = f"{x:.2e}".split("e")
    text = f"{mantissa}e{int(exponent)}"
    if len(text) > width:
        mantissa, exponent = f"{x:.1e}".split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text


def percent(p: float | None) -> str:
    """A probability as a percentage with sensible precision: 42.1%, 0.032%."""
    if p is None:
        return UNKNOWN
    value = 100 * p
    if value >= 10:
        return f"{value:.1f}%"
    if value >= 0.1:
        return f"{value:.2f}%"
    if value == 0:
        return "0%"
    return f"{num(value, 2)}%"


def cell_value(x: float | None, width: int) -> str:
    """`x` in at most `width` characters, for a heatmap cell: '.42', '-1.3', '12', '1.0'."""
    if x is None:
        return "-∞"[:width]
    for text in _candidates(x):
        if len(text) <= width:
            return text
    return "#" * min(width, 1)


def _candidates(x: float):
    # Most precise first; the first that fits wins. (Every cell of a grid at the same precision:
    # '-0.00' for -0.0032 rather than '-.003' beside '0.00', which read as an odd column.)
    for decimals in (2, 1):
        text = f"{x:.{decimals}f}"
        yield text
        if text.startswith("0."):
            yield text[1:]
        elif text.startswith("-0."):
            yield "-" + text[2:]
    yield f"{x:.0f}"
    if abs(x) >= 1000:
        yield f"{x / 1000:.0f}k"


def fit(text: str, width: int, align: str = "left") -> str:
    """`text` cut or padded to exactly `width` terminal cells ('…' where it was cut), shown by
    gpt2viz.text_safety's rule (no control character reaches the screen)."""
    if width <= 0:
        return ""
    text = safe_line(text)
    if cell_len(text) > width:
        return set_cell_size(text, width - 1) + "…" if width > 1 else "…"
    pad = width - cell_len(text)
    if align == "right":
        return " " * pad + text
    if align == "center":
        return " " * (pad // 2) + text + " " * (pad - pad // 2)
    return text + " " * pad


def clip(text: str, limit: int) -> str:
    """`text` on one line (line breaks and tabs drawn as ↵ and ⇥, as in token texts, other control
    characters escaped: gpt2viz.text_safety), shortened to `limit` terminal cells with '…' in the
    middle, for quoting prompts."""
    text = safe_line(text)
    if cell_len(text) <= limit:
        return text
    head_cells = (limit - 1) * 2 // 3
    head = chop_cells(text, head_cells)[0] if head_cells > 0 else ""
    tail, room = "", limit - 1 - cell_len(head)
    for ch in reversed(text[len(head) :]):
        if cell_len(ch + tail) > room:
            break
        tail = ch + tail
    return head + "…" + tail


EDGE_ROWS = 24


def shown_positions(n: int, edge: int = EDGE_ROWS) -> list[int | None]:
    """Positions a per-token table lists: all of them, or for long prompts the first and last
    `edge` with None standing for the gap between (the tables stay quick to draw)."""
    if n <= 3 * edge:
        return list(range(n))
    return [*range(edge), None, *range(n - edge, n)]


def quote(text: str) -> str:
    """A token text quoted inside a sentence: 'the' (never '': a token that shows as nothing is
    quoted as '∅'; gpt2viz.text_safety.token_label); one holding an apostrophe in double quotes,
    "'s", where ''s' would read as an empty quote and an s."""
    label = token_label(text)
    mark = '"' if "'" in label and '"' not in label else "'"
    return f"{mark}{label}{mark}"


# A byte that is not UTF-8 alone, as a token's display text writes it (`\\xe5`): half a character.
_BYTE_ESCAPE = re.compile(r"\\x([89a-f][0-9a-f])")


def _display_bytes(display: str) -> bytes:
    """The bytes behind a token's display text: its characters in UTF-8, its escaped bytes as
    themselves (the tokenizer writes a byte that is no character alone as `\\xNN`)."""
    if "\\" not in display:  # most tokens: no escape to undo
        return display.encode("utf-8", "surrogatepass")
    out = bytearray()
    at = 0
    for m in _BYTE_ESCAPE.finditer(display):
        out += display[at:m.start()].encode("utf-8", "surrogatepass")
        out.append(int(m.group(1), 16))
        at = m.end()
    out += display[at:].encode("utf-8", "surrogatepass")
    return bytes(out)


def running_texts(displays: list[str], final: bool = True) -> list[str]:
    """Token display texts as running text, one piece per token: a character whose bytes several
    tokens share (a Chinese character is often two or three of GPT-2's tokens) is put together and
    shown with the token that completes it; bytes that never make a character stay escaped.
    `final=False` (a generation still running) holds back the bytes of a character not complete
    yet, as a terminal does. Joined, the pieces are the text the tokens decode to."""
    decoder = codecs.getincrementaldecoder("utf-8")("backslashreplace")
    pieces = [decoder.decode(_display_bytes(d)) for d in displays]
    if final and pieces:
        pieces[-1] += decoder.decode(b"", final=True)
    return pieces


def prose_line(displays: list[str]) -> str:
    """Token display texts read as one line of running text: '␣' back to a space, line breaks kept
    as '↵', a character split between tokens put together."""
    return "".join(token_label(d) for d in running_texts(displays) if d).replace("␣", " ")


def prose(display: str) -> str:
    """A token's piece of running text (`running_texts`): '␣' back to a space, a line break after
    '↵'; a piece that completes no character yet is nothing."""
    if not display:
        return ""
    return token_label(display).replace("␣", " ").replace("↵", "↵\n")
