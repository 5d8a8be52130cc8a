"""The map of the model: embeddings, the blocks, ln_f and the LM head down the residual stream, with
attention and the MLP as side branches of a block, this run's shapes at the right, and the stage
on screen highlighted.

`map_lines` draws it (the Model files stage ends with it; the map screen shows it on its own);
`ModelMap` is the widget that holds it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from textual.content import Content

from ...i18n import N_, _, ngettext
from ...text_safety import safe_line
from ...trace import Trace
from ..facts import RunFacts
from ..file_facts import FileFacts
from ..formatting import clip, count, fit, shape
from ..stages import Stage
from ..table_layout import wrapped
from .pictures import CURRENT, Picture, lines

GUTTER = 4  # cells of the spine and the branches, left of the labels
# A line's glyphs on the lines its words run on to: the spine and an open branch go on.
GOING_ON = str.maketrans({"▤": "│", "▼": "│", "●": " ", "┌": "│", "└": " ", "┣": "┃", "━": " ", "┓": "┃", "◀": " ", "┛": " "})
SHAPE_MIN_LABEL = 14  # a label keeps at least this many cells before the shapes give way
PROMPT_CELLS = 40  # of the prompt quoted at the top

# The sentences under the map that say how to read it.
LEGEND = (
    N_("┃ the residual stream x runs down the middle: every block reads it and adds to it."),
    N_("┣━┓ … ┣◀┛ a side branch: attention and the MLP each read a normalized copy of x and add their output back."),
)


@dataclass(frozen=True)
class MapRow:
    """One line of the map: the spine and branch glyphs, the words, the shape at the right, and the
    stage kinds it stands for (highlighted when one of them is on screen)."""

    gutter: str
    label: str
    shape: str = ""
    kinds: frozenset[str] = frozenset()
    block_edge: bool = False  # the line above or below the blocks: highlighted within any block


def map_rows(trace: Trace, stage: Stage | None) -> list[MapRow]:
    """The map's lines for `trace`, the block of `stage` named where it is in one."""
    f = RunFacts.of(trace)
    T, C, H, V, L = f.T, f.n_embd, f.n_head, f.vocab, f.L
    x = f"x {shape([1, T, C])}"
    files = FileFacts.of(trace)
    if files.recorded:
        names = ["config.json", *(s.name for s in files.weights.files), *(s.name for s in files.tokenizer.files)]
    else:
        names = ["config.json", "model.safetensors", _("tokenizer")]
    last = f.n_layer - 1
    blocks = ngettext("{n} block", "{n} blocks", f.n_layer).format(n=count(f.n_layer))
    if stage is not None and stage.layer is not None:
        top = _("block {layer} of {blocks} (0–{last}), each the same:").format(layer=stage.layer, blocks=blocks, last=last)
    else:
        top = _("{blocks} (0–{last}), each the same:").format(blocks=blocks, last=last)
    heads = ngettext("{n} head", "{n} heads", H).format(n=count(H))
    return [
        MapRow(" ▤  ", " · ".join(names), "", frozenset({"model_files"})),
        MapRow(" │  ", f'"{clip(trace.prompt, PROMPT_CELLS)}"'),
        MapRow(" ▼  ", _("Tokenize"), f"ids {shape([1, T])}", frozenset({"tokenize"})),
        MapRow(" ▼  ", _("Embed: wte[id] + wpe[pos]"), x, frozenset({"embed"})),
        MapRow(" ┃ ┌", top, block_edge=True),
        MapRow(" ┣━┓", "ln_1", "", frozenset({"ln1"})),
        MapRow(" ┃ ┃", _("attention: {heads} × {D}").format(heads=heads, D=f.head_dim), f"pattern {shape([1, H, T, L])}",
               frozenset({"qkv", "scores", "pattern", "heads"})),
        MapRow(" ┣◀┛", _("+ attention output"), x, frozenset({"attn_out"})),
        MapRow(" ┣━┓", "ln_2", "", frozenset({"ln2"})),
        MapRow(" ┃ ┃", _("MLP: {C} → {F} → {C}").format(C=C, F=f.d_mlp), f"gelu {shape([1, T, f.d_mlp])}", frozenset({"mlp"})),
        MapRow(" ┣◀┛", _("+ MLP output"), x, frozenset({"mlp_out"})),
        MapRow(" ┃ └", _("× {blocks}").format(blocks=blocks), block_edge=True),
        MapRow(" ┃  ", "ln_f", x, frozenset({"ln_final", "logit_lens"})),
        MapRow(" ▼  ", _("LM head: ln_f(x) @ wteᵀ"), f"logits {shape([1, T, V])}", frozenset({"lm_head", "logit_lens"})),
        MapRow(" ●  ", _("Next token: from the last row"), shape([V]), frozenset({"next_token"})),
    ]


def map_lines(trace: Trace, stage: Stage | None, room: int) -> list[Content]:
    """The map in lines of at most `room` cells, the rows of `stage` highlighted (and marked › for
    terminals without colours), then its legend."""
    rows = map_rows(trace, stage)
    width = max(1, room - GUTTER - 1)  # the words and the shape of a line, right of its glyphs
    # The shapes line up at the right; where a line is too narrow for both, its words keep
    # SHAPE_MIN_LABEL cells and the shape goes (the stage's own flow lists the shapes).
    keep_shapes = all(width - cell_len(row.shape) - 1 >= SHAPE_MIN_LABEL for row in rows)
    out = []
    for row in rows:
        here = stage is not None and (stage.kind in row.kinds or (row.block_edge and stage.layer is not None))
        style = CURRENT if here else (".picture--header" if row.block_edge else "")
        shape_cells = cell_len(row.shape) + 1 if keep_shapes and row.shape else 0
        # Words too long for their line go on under themselves, the spine going on beside them.
        pieces = wrapped(safe_line(row.label), max(1, width - shape_cells))
        for n, piece in enumerate(pieces):
            text = fit(piece.plain, width - shape_cells) + (" " + row.shape if shape_cells and n == 0 else "")
            # The mark of the navigator's current stage, for terminals that show no colours.
            glyphs = row.gutter if n == 0 else row.gutter.translate(GOING_ON)
            gutter = Content.styled(("›" if here else " ") + glyphs[1:], ".picture--bar")
            out.append(Content.assemble(gutter, " ", Content.styled(text.rstrip() if not style else text, style)).truncate(room))
    out.append(Content(""))
    for sentence in LEGEND:
        out += wrapped(Content.styled(_(sentence), ".picture--dim"), room, indent=4)
    return out


class ModelMap(Picture):
    """The map of the model, the stage it was drawn for highlighted."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        return lines(map_lines(trace, stage, self.room))
