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
from ...model.config import GPT2Config
from ...text_safety import safe_line
from ...trace import Trace
from ..facts import RunFacts
from ..file_facts import FileFacts
from ..formatting import clip, count, fit, shape
from ..stages import Stage
from ..table_layout import Column, header_lines, wrapped
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


def _blocks_heading(stage: Stage | None, f: RunFacts) -> tuple[str, str]:
    """The line over the blocks ('block 3 of 12 blocks (0–11), each the same:') and 'N blocks'."""
    last = f.n_layer - 1
    blocks = ngettext("{n} block", "{n} blocks", f.n_layer).format(n=count(f.n_layer))
    if stage is not None and stage.layer is not None:
        return _("block {layer} of {blocks} (0–{last}), each the same:").format(layer=stage.layer, blocks=blocks, last=last), blocks
    return _("{blocks} (0–{last}), each the same:").format(blocks=blocks, last=last), blocks


def map_rows(trace: Trace, stage: Stage | None) -> list[MapRow]:
    """The map's lines for `trace`, the block of `stage` named where it is in one."""
    f = RunFacts.of(trace)
    T, C, H, V, L = f.T, f.n_embd, f.n_head, f.vocab, f.L
    x = f"x {shape([1, T, C])}"
    files = FileFacts.of(trace)
    if f.llama:
        return _llama_rows(trace, stage, f)
    if files.recorded:
        names = ["config.json", *(s.name for s in files.weights.files), *(s.name for s in files.tokenizer.files)]
    else:
        names = ["config.json", "model.safetensors", _("tokenizer")]
    top, blocks = _blocks_heading(stage, f)
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


def _llama_rows(trace: Trace, stage: Stage | None, f: RunFacts) -> list[MapRow]:
    """A LLaMA-family model's map: no position table, RMSNorms, grouped attention with its
    positions rotated into q and k, SwiGLU."""
    T, C, H, V, L = f.T, f.n_embd, f.n_head, f.vocab, f.L
    x = f"x {shape([1, T, C])}"
    source = (trace.model.get("source") or {}).get("path") or trace.model.get("name") or "?"
    top, blocks = _blocks_heading(stage, f)
    heads = ngettext("{n} head", "{n} heads", H).format(n=count(H))
    head = "W_head" if f.params.lm_head else "embed_tokens"
    return [
        MapRow(" ▤  ", clip(str(source).rsplit("/", 1)[-1], PROMPT_CELLS), "", frozenset({"model_files"})),
        MapRow(" │  ", f'"{clip(trace.prompt, PROMPT_CELLS)}"'),
        MapRow(" ▼  ", _("Tokenize"), f"ids {shape([1, T])}", frozenset({"tokenize"})),
        MapRow(" ▼  ", _("Embed: embed_tokens[id], no position table"), x, frozenset({"embed"})),
        MapRow(" ┃ ┌", top, block_edge=True),
        MapRow(" ┣━┓", _("norm_1 (RMSNorm)"), "", frozenset({"ln1"})),
        MapRow(" ┃ ┃", _("attention: {heads} × {D}, {kv} key/value heads, q and k rotated by position").format(
            heads=heads, D=f.head_dim, kv=count(f.n_kv_head)), f"pattern {shape([1, H, T, L])}",
               frozenset({"qkv", "scores", "pattern", "heads"})),
        MapRow(" ┣◀┛", _("+ attention output"), x, frozenset({"attn_out"})),
        MapRow(" ┣━┓", _("norm_2 (RMSNorm)"), "", frozenset({"ln2"})),
        MapRow(" ┃ ┃", _("MLP: {C} → silu(gate) × up {F} → {C}").format(C=C, F=f.d_mlp), f"{shape([1, T, f.d_mlp])}",
               frozenset({"mlp"})),
        MapRow(" ┣◀┛", _("+ MLP output"), x, frozenset({"mlp_out"})),
        MapRow(" ┃ └", _("× {blocks}").format(blocks=blocks), block_edge=True),
        MapRow(" ┃  ", _("norm (RMSNorm)"), x, frozenset({"ln_final", "logit_lens"})),
        MapRow(" ▼  ", _("LM head: norm(x) @ {table}ᵀ").format(table=head), f"logits {shape([1, T, V])}",
               frozenset({"lm_head", "logit_lens"})),
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
        # Words too long for their line go on under themselves, the spine going on beside them; the
        # shape follows the words' last line, so that it never cuts a sentence in two.
        pieces = wrapped(safe_line(row.label), max(1, width - shape_cells))
        for n, piece in enumerate(pieces):
            last = n == len(pieces) - 1
            text = fit(piece.plain, width - shape_cells) + (" " + row.shape if shape_cells and last else "")
            # The mark of the navigator's current stage, for terminals that show no colours.
            glyphs = row.gutter if n == 0 else row.gutter.translate(GOING_ON)
            gutter = Content.styled(("›" if here else " ") + glyphs[1:], ".picture--bar")
            out.append(Content.assemble(gutter, " ", Content.styled(text.rstrip() if not style else text, style)).truncate(room))
    out.append(Content(""))
    for sentence in LEGEND:
        out += wrapped(Content.styled(_(sentence), ".picture--dim"), room, indent=4)
    return out


def comparison_rows(f: RunFacts) -> list[tuple[str, str, str]]:
    """GPT-2 small and this LLaMA-family model part by part: (what, GPT-2 small, this model), every
    number worked out from the two configs (GPT-2 small's: GPT2Config's defaults)."""
    g = GPT2Config()  # GPT-2 small: 12 blocks of 12 heads, 768 wide, 1,024 positions
    c = f.config
    kv_gpt2, kv_ours = g.kv_bytes_per_position(4), c.kv_bytes_per_position(4)
    return [
        (_("parameters"), count(g.n_params), count(f.n_params)),
        (_("blocks × width"), f"{g.n_layer} × {count(g.n_embd)}", f"{c.n_layer} × {count(c.n_embd)}"),
        (_("positions"), _("a learned table wpe, {n} rows, added once").format(n=count(g.n_ctx)),
         _("q and k rotated in every block (base {theta}), up to {n}").format(theta=f"{c.rope_theta:g}", n=count(c.n_ctx))),
        (_("norms"), _("LayerNorm: minus the mean, over the std, γ and β"),
         _("RMSNorm: over the root mean square, a weight")),
        (_("attention heads"), _("{q} query, {kv} key/value").format(q=g.n_head, kv=g.n_head),
         _("{q} query, {kv} key/value").format(q=c.n_head, kv=c.n_kv_head)),
        (_("head size"), count(g.head_dim), count(c.head_dim)),
        (_("KV cache a token"), _("{bytes} B in float32").format(bytes=count(kv_gpt2)),
         _("{bytes} B in float32").format(bytes=count(kv_ours))),
        (_("MLP"), _("c_fc → GELU → c_proj, {n} wide").format(n=count(g.d_mlp)),
         _("silu(gate) × up → down, {n} wide").format(n=count(c.d_mlp))),
        (_("biases"), _("in every product and norm"), _("none")),
        (_("vocabulary"), count(g.vocab_size), count(c.vocab_size)),
        (_("LM head"), _("the token table itself (tied)"),
         _("the token table itself (tied)") if c.tie_word_embeddings
         else _("a matrix of its own, {rows} × {cols}").format(rows=count(c.vocab_size), cols=count(c.n_embd))),
    ]


def comparison_lines(trace: Trace, room: int) -> list[Content]:
    """'GPT-2 small beside this model' as a table that fits `room` cells (a LLaMA-family model's map
    ends with it): a column each where they fit, else each row's two answers under its name."""
    rows = comparison_rows(RunFacts.of(trace))
    out = [Content(""), *wrapped(Content.styled(_("GPT-2 small beside this model"), ".picture--header"), room)]
    label = min(20, max(cell_len(what) for what, _a, _b in rows)) + 2
    column = (room - label - 2) // 2
    if column >= 24:
        out += header_lines([(Column(label, column), "GPT-2 small"), (Column(label + column + 2, column), _("this model"))],
                            room, ".picture--dim")
        for what, gpt2, ours in rows:
            left, right = wrapped(gpt2, column), wrapped(ours, column)
            for n in range(max(len(left), len(right))):
                out.append(Content.assemble(
                    (fit(what if n == 0 else "", label), ".picture--dim"),
                    fit(left[n].plain if n < len(left) else "", column), "  ",
                    (right[n].plain if n < len(right) else "", ".picture--token"),
                ))
        return out
    for what, gpt2, ours in rows:
        out.append(Content.styled(what, ".picture--dim"))
        out += wrapped(Content.assemble("  GPT-2 small: ", gpt2), room, indent=4)
        out += wrapped(Content.assemble("  ", _("this model"), ": ", (ours, ".picture--token")), room, indent=4)
    return out


class ModelMap(Picture):
    """The map of the model, the stage it was drawn for highlighted (a LLaMA-family model's: then
    GPT-2 small beside it, part by part)."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        rows = map_lines(trace, stage, self.room)
        if RunFacts.of(trace).llama:
            rows += comparison_lines(trace, self.room)
        return lines(rows)
