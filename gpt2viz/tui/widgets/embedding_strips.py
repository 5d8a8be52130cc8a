"""The embed stage's picture: token vector + position vector = hidden state, one line per token (a
LLaMA-family model, which has no position table: the token vector alone, which is x)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from ...i18n import _
from ...text_safety import token_label
from ..facts import hook_event
from ..formatting import count, fit, num, shown_positions
from ..palette import LEVELS, diverging
from ..table_layout import Column, header_lines
from .strip_widget import StripWidget, fit_strip

NORM_WIDTH = 7


@dataclass
class EmbeddingData:
    """First dimensions of each token's three vectors, and their lengths."""

    tokens: list[str]
    token_vectors: list[list[float]]
    position_vectors: list[list[float]]  # [] where the model has no position table (LLaMA)
    sums: list[list[float]]  # the token vectors themselves where there is no position table
    sum_norms: list[float]
    n_embd: int
    first_position: int = 0  # the position of the first token (after cached ones in a decode step)


class EmbeddingStrips(StripWidget):
    """Three heatmap strips per token (token, position, sum), on one signed colour scale."""

    COMPONENT_CLASSES = {"embedding-strips--label", "embedding-strips--header", "embedding-strips--op"}

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.data: EmbeddingData | None = None

    def show(self, data: EmbeddingData | None) -> None:
        """Draws `data` (None: nothing)."""
        self.data = data
        self.invalidate()

    def build_lines(self, width: int) -> list[Strip]:
        d = self.data
        if d is None or not d.tokens:
            return []
        base = self.base_style
        label_style = base + self.style_of("embedding-strips--label")
        header_style = base + self.style_of("embedding-strips--header")
        op_style = base + self.style_of("embedding-strips--op")
        palette = diverging(self.app.current_theme.dark)

        digits = len(str(d.first_position + len(d.tokens) - 1))
        label_width = min(14, digits + 1 + max(cell_len(t) for t in d.tokens))
        available = len(d.token_vectors[0])
        positions = bool(d.position_vectors)
        strips = 3 if positions else 1
        room = width - label_width - 1 - (6 if positions else 1) - NORM_WIDTH
        n = max(1, min(available, room // strips))
        scale = max(
            (abs(v) for rows in (d.token_vectors, d.position_vectors, d.sums) for row in rows for v in row[:n] if v is not None),
            default=1.0,
        ) or 1.0

        pad = " " * (label_width + 1)
        x = label_width + 1
        # Each name over its strip, running on over the operator after it (whole: on a second
        # line where the first has no room).
        if positions:
            columns = [
                (Column(x, n), _("token")),
                (Column(x + n + 3, n), _("position")),
                (Column(x + 2 * n + 6, n), _("hidden state")),
                (Column(x + 3 * n + 6, NORM_WIDTH, "right"), "|x|"),
            ]
        else:
            columns = [(Column(x, n), _("token vector = hidden state")), (Column(x + n + 1, NORM_WIDTH, "right"), "|x|")]
        head = header_lines(columns, width)
        lines = [Strip([Segment(line.plain, header_style)]) for line in head]
        shown = shown_positions(len(d.tokens))
        for p in shown:
            if p is None:
                i = shown.index(None)
                note = _("… positions {first}–{last} not drawn …").format(first=shown[i - 1] + 1, last=shown[i + 1] - 1)
                lines.append(Strip([Segment(pad + note, header_style)]))
                continue
            token = d.tokens[p]
            segs = [Segment(f"{d.first_position + p:>{digits}} " + fit(token, label_width - digits - 1) + " ", label_style)]
            groups = ((d.token_vectors, " + "), (d.position_vectors, " = "), (d.sums, "")) if positions else ((d.sums, " "),)
            for group, op in groups:
                for v in group[p][:n]:
                    if v is None:  # not a number (a model with NaN weights): a mark, not a colour
                        segs.append(Segment("?", label_style))
                    else:
                        segs.append(Segment(" ", Style(bgcolor=palette.colors[palette.level(v, scale)])))
                if op:
                    segs.append(Segment(op, op_style))
            norm = d.sum_norms[p]
            segs.append(Segment(fit("NaN" if norm is None else num(norm), NORM_WIDTH, "right"), label_style))
            lines.append(Strip(segs).simplify())
        lines.append(Strip.blank(1, base))
        dims = _("dims 0–{last} of {n_embd}").format(last=n - 1, n_embd=count(d.n_embd))
        legend = [Segment(f"{dims}   {num(-scale, 2)} ", header_style)]
        for i in range(16):
            legend.append(Segment(" ", Style(bgcolor=palette.colors[round(i / 15 * (LEVELS - 1))])))
        legend.append(Segment(f" +{num(scale, 2)}", header_style))
        if len(pad) + sum(segment.cell_length for segment in legend) <= width:  # under the strips if it fits there
            legend.insert(0, Segment(pad, base))
        lines.extend(fit_strip(legend, width))
        return lines


class EmbedPicture(EmbeddingStrips):
    """The embed stage drawn from the trace's preview dimensions."""

    def draw(self, trace, stage, head: int = 0) -> None:
        """Draws the token, position and summed vectors of every token."""
        tok = hook_event(trace, "hook_embed")
        pos = hook_event(trace, "hook_pos_embed")
        if tok.get("preview") and not pos and trace.architecture == "llama":  # no position table: x is the token row
            self.show(
                EmbeddingData(
                    tokens=[token_label(t["text"]) for t in trace.tokens], token_vectors=tok["preview"],
                    position_vectors=[], sums=tok["preview"], sum_norms=tok.get("norms") or [],
                    n_embd=int(trace.model["config"]["n_embd"]), first_position=trace.past,
                )
            )
            return
        if not tok.get("preview") or not pos.get("preview"):
            self.show(None)
            return
        self.show(
            EmbeddingData(
                tokens=[token_label(t["text"]) for t in trace.tokens],
                token_vectors=tok["preview"],
                position_vectors=pos["preview"],
                sums=pos.get("sum_preview") or [],
                sum_norms=pos.get("sum_norms") or [],
                n_embd=int(trace.model["config"]["n_embd"]),
                first_position=trace.past,
            )
        )
