"""The distribution pictures of one position (the last, which predicts the next token): its values
at a LayerNorm, going in, normalized and after γ and β; its MLP pre-activations on the GELU curve;
each head's attention entropy. Every bar has its number on screen, so that the figure and the
text agree; the numbers are the trace's (gpt2viz.tui.distributions), none is worked out here.
"""

from __future__ import annotations

from typing import Callable

from rich.cells import cell_len
from textual.content import Content

from ...i18n import _, ngettext
from ...trace import Trace
from ...trace.events import LAYER_NORM_STATS, RMS_NORM_STATS
from ..distributions import Histogram, gelu, head_entropies, layer_norm_values, pre_activations, silu
from ..facts import RunFacts, layer_norm_event, token_text, value_at
from ..formatting import count, fit, near_zero, num, percent
from ..stages import Stage
from ..styled_text import styled
from ..table_layout import chip_lines, wrapped
from .cell_charts import axis_labels, braille_curve, column_cells, line_of
from .pictures import Picture, bar, lines

CHART_ROWS = 4  # lines of a histogram's bars
CURVE_ROWS = 5  # lines of the GELU curve
MAX_BIN_CELLS = 5  # cells a bin takes at most (one of them a gap from 3 on)
BAR = ".picture--bar"
CUT = ".picture--bar-alt"


def not_recorded(room: int) -> Content:
    """What a picture says when its data is not in the trace (one written by an earlier gpt2viz)."""
    text = _("This picture is not in this trace: it was written before gpt2viz recorded the numbers it needs.")
    return lines(wrapped(Content.styled(text, ".picture--dim"), room))


def edge_label(x: float) -> str:
    """A bin edge or width on an axis: 3 significant digits, no trailing zeros (-4, 0.5, -0.414)."""
    text = f"{x:.3g}"
    return "0" if text in ("0", "-0") else text


def bin_cells(bins: int, room: int) -> int:
    """Cells each of `bins` bins gets in `room` cells (1 to MAX_BIN_CELLS)."""
    return max(1, min(MAX_BIN_CELLS, room // max(1, bins)))


def axis_ticks(edges: tuple[float, ...], cells: int) -> list[tuple[int, str]]:
    """Labels for the edges of bins `cells` wide: every edge, else every second, fourth, ...
    whichever is the first whose labels all fit with a space between; at least the ends and the
    middle."""
    bins = len(edges) - 1
    step = 1
    while step < bins:
        ticks = [(b * cells, edge_label(edges[b])) for b in range(0, bins + 1, step)]
        if all(cell_len(text) + 1 <= step * cells for _column, text in ticks[1:-1]) and _ends_fit(ticks, step * cells):
            return ticks
        step *= 2
    return [(b * cells, edge_label(edges[b])) for b in (0, bins, bins // 2)]


def _ends_fit(ticks: list[tuple[int, str]], gap: int) -> bool:
    """Whether the first and last labels (drawn from and up to their columns) leave a space
    before their neighbours (drawn centred)."""
    first, second = cell_len(ticks[0][1]), cell_len(ticks[1][1]) if len(ticks) > 2 else 0
    last, before = cell_len(ticks[-1][1]), cell_len(ticks[-2][1]) if len(ticks) > 2 else 0
    return first + 1 + second // 2 <= gap and last + 1 + (before + 1) // 2 <= gap


def histogram_lines(h: Histogram, cells: int, style_of_bin: Callable[[int], str], room: int, indent: int = 0) -> list[Content]:
    """A histogram's bars (bin b in `cells` cells from column b · cells, a gap after it from 3
    cells on), the axis with its edges labelled, and the count of every bin: under its bar where
    it fits, else on lines of their own; then what lies outside the axis, if anything."""
    n = len(h.counts)
    width = cells - 1 if cells >= 3 else cells
    pad = " " * indent
    out = []
    for row in column_cells(list(h.counts), max(h.counts) or 1, CHART_ROWS, width):
        parts: list[str | tuple[str, str]] = [pad]
        for b, text in enumerate(row):
            parts += [(text, style_of_bin(b)), " " * (cells - width)]
        out.append(Content.assemble(*parts))
    span = n * cells
    out.append(Content.styled(pad + "▔" * span, ".picture--dim"))
    out.append(Content(pad + axis_labels(axis_ticks(h.edges, cells), span).rstrip()))
    room_for_count = width if cells > width else width - 1  # a cell between two counts
    if max(len(str(c)) for c in h.counts) <= room_for_count:
        under = "".join(fit(str(c), width, "center") + " " * (cells - width) for c in h.counts)
        out.append(Content.styled(pad + under.rstrip(), ".picture--dim"))
    else:
        numbers = " ".join(str(c) for c in h.counts)
        out += wrapped(Content.styled(pad + _("counts, left to right: {counts}").format(counts=numbers), ".picture--dim"), room, indent)
    if h.below or h.above:
        beyond = _("outside the axis: {below} at or below {low}, {above} above {high}").format(
            below=count(h.below), low=edge_label(h.edges[0]), above=count(h.above), high=edge_label(h.edges[-1])
        )
        out += wrapped(Content.styled(pad + beyond, ".picture--dim"), room, indent)
    return out


def position_header(trace: Trace, template: str, position: int, room: int, **values) -> list[Content]:
    """A header naming a position and its token, wrapped to `room`."""
    return wrapped(
        styled(
            template,
            ".picture--header",
            position=(str(position), ".picture--header"),
            token=(token_text(trace, position), ".picture--token"),
            **values,
        ),
        room,
    )


class LayerNormHistograms(Picture):
    """One position's values going into a LayerNorm, normalized, and after γ and β: three histograms."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        values = layer_norm_values(trace, stage)
        if values is None:
            return not_recorded(self.room)
        event = layer_norm_event(trace, stage)
        rms = RunFacts.of(trace).llama  # an RMSNorm: root mean squares, no mean taken away, no bias
        stats = [value_at(event.get(k), values.position - trace.past) for k in (RMS_NORM_STATS if rms else LAYER_NORM_STATS)]
        n = values.input.total
        bins = len(values.normalized.counts)
        rows = position_header(
            trace,
            ngettext(
                "Position {position} {token}: its {n} value in {bins} bins",
                "Position {position} {token}: its {n} values in {bins} bins",
                n,
            ),
            values.position,
            self.room,
            n=count(n),
            bins=str(bins),
        )
        cells = bin_cells(bins, self.room)
        parts = (
            (_("going in"), values.input, stats[0], stats[1]),
            (_("normalized"), values.normalized, stats[2], stats[3]),
            (_("after the weight") if rms else _("after γ, β"), values.output, stats[4], stats[5]),
        )
        for name, h, mean, spread in parts:
            rows.append(Content(""))
            # The name and each fact whole, on as many lines as they need.
            facts = [
                (name, ".picture--header"),
                (_("mean {mean}").format(mean=num(mean) if rms else near_zero(mean)), ".picture--dim"),
                (_("rms {rms}").format(rms=num(spread)) if rms else _("std {std}").format(std=num(spread)), ".picture--dim"),
                (_("bins of {width}").format(width=edge_label(h.bin_width)), ".picture--dim"),
            ]
            rows += chip_lines(facts, self.room, gap=" · ")
            rows += histogram_lines(h, cells, lambda b: BAR, self.room)
        rows.append(Content(""))
        if rms:
            note = _(
                "Going in and normalized: the same bars on a new axis. An RMSNorm only divides by the root mean "
                "square, which keeps the shape and leaves 0 where it was (nothing is subtracted); the weight then "
                "scales each dimension on its own, which changes it."
            )
        else:
            note = _(
                "Going in and normalized: the same bars on a new axis. Normalizing subtracts the mean and divides "
                "by the standard deviation, which keeps the shape; γ and β then scale and shift each dimension on "
                "its own, which changes it."
            )
        rows += wrapped(Content.styled(note, ".picture--dim"), self.room)
        return lines(rows)


class GeluCurve(Picture):
    """GELU's curve over the range of one position's pre-activations, their histogram under it on
    the same axis, and how many GELU cuts (x <= 0) and lets pass (x > 0). A LLaMA-family model's:
    SiLU's curve over its gate values (SwiGLU bends the gate, then multiplies by up)."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        pre = pre_activations(trace, stage.layer)
        if pre is None:
            return not_recorded(self.room)
        h = pre.histogram
        n, total = len(h.counts), h.total
        llama = RunFacts.of(trace).llama
        curve_of = silu if llama else gelu
        if llama:
            header = ngettext(
                "SiLU, and the {n} gate value x of position {position} {token} (gate_proj's output) under it",
                "SiLU, and the {n} gate values x of position {position} {token} (gate_proj's output) under it",
                total,
            )
        else:
            header = ngettext(
                "GELU, and the {n} pre-activation x of position {position} {token} (c_fc's output) under it",
                "GELU, and the {n} pre-activations x of position {position} {token} (c_fc's output) under it",
                total,
            )
        rows = position_header(trace, header, pre.position, self.room, n=count(total))
        low, high = h.edges[0], h.edges[-1]
        y_range = (min(curve_of(low + (high - low) * i / 400) for i in range(401)), curve_of(high))
        top, zero = edge_label(y_range[1]), "0"
        gutter = max(cell_len(top), 1) + 1
        cells = bin_cells(n, self.room - gutter)
        span = n * cells
        curve = braille_curve(curve_of, (low, high), y_range, span, CURVE_ROWS)
        # Each cell of the curve in the colour of its bin: grey where x <= 0 (cut), bright where x > 0.
        cut_cells = sum(cells for b in range(n) if h.edges[b + 1] <= 0)
        zero_line = line_of(0.0, y_range, CURVE_ROWS)
        rows.append(Content(""))
        for y, text in enumerate(curve):
            label = top if y == 0 else zero if y == zero_line else ""
            axis = "┤" if label else "│"
            rows.append(
                Content.assemble(
                    (fit(label, gutter - 1, "right") + axis, ".picture--dim"), (text[:cut_cells], CUT), (text[cut_cells:], BAR)
                )
            )
        rows += wrapped(
            Content.styled(
                " " * gutter + _("how many x fall in each bin (bins of {width}):").format(width=edge_label(h.bin_width)),
                ".picture--dim",
            ),
            self.room,
            gutter,
        )
        rows += histogram_lines(h, cells, lambda b: CUT if h.edges[b + 1] <= 0 else BAR, self.room, gutter)
        rows.append(Content(""))
        share = (lambda k: percent(k / total)) if total else (lambda k: percent(None))
        if llama:
            shares = (
                (_("cut: {n} of {total} ({share}); x ≤ 0, where SiLU(x) is between about −0.28 and 0"), pre.cut, CUT),
                (_("passes: {n} of {total} ({share}); x > 0, where SiLU(x) is more than x/2, then times up"), pre.passed, BAR),
            )
        else:
            shares = (
                (_("cut: {n} of {total} ({share}); x ≤ 0, where GELU(x) is between about −0.17 and 0"), pre.cut, CUT),
                (_("passes: {n} of {total} ({share}); x > 0, where GELU(x) is more than x/2"), pre.passed, BAR),
            )
        for sentence, n, style in shares:
            rows += wrapped(
                styled(sentence, "", n=(count(n), style), total=count(total), share=share(n)), self.room, 2
            )
        return lines(rows)


class HeadEntropyBars(Picture):
    """Per head, the entropy of the last position's attention weights, as bars in bits."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        entropies = head_entropies(trace, stage.layer)
        if entropies is None:
            return not_recorded(self.room)
        keys, most = entropies.keys, entropies.max_bits
        rows = position_header(
            trace, _("Attention entropy of position {position} {token}, per head, in bits"), entropies.position, self.room
        )
        scale = ngettext(
            "0: all weight on one key · {most} = log2 {keys}: spread evenly over its {keys} key",
            "0: all weight on one key · {most} = log2 {keys}: spread evenly over its {keys} keys",
            keys,
        ).format(most=num(most), keys=count(keys))
        rows += wrapped(Content.styled(scale, ".picture--dim"), self.room)
        names = [_("head {head}").format(head=h) for h in range(len(entropies.bits))]
        name_width = max(cell_len(name) for name in names)
        bar_width = max(4, min(24, self.room - (2 + name_width + 2 + 8)))
        for h, (name, bits) in enumerate(zip(names, entropies.bits)):
            mark = "▶ " if h == head else "  "
            style = ".picture--token" if h == head else ".picture--dim"
            fraction = None if bits is None else (bits / most if most > 0 else 0.0)
            rows.append(
                Content.assemble(
                    (mark + fit(name, name_width) + "  ", style), (bar(fraction, bar_width), BAR), f" {num(bits):>7}"
                )
            )
        # The scale under the bars: a full bar is an even spread.
        indent = " " * (2 + name_width + 2)
        rows.append(Content.styled(indent + "▔" * bar_width, ".picture--dim"))
        rows.append(Content.styled(indent + axis_labels([(0, "0"), (bar_width, num(most))], bar_width).rstrip(), ".picture--dim"))
        return lines(rows)
