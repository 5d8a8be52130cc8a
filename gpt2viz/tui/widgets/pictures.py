"""The pictures of the stages that are tables and bars (text, no heatmap).

Each picture is a Static that draws itself from (trace, stage, head). Token texts go in as
literal text (Content spans, never markup), with spaces and line breaks already made visible.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual.content import Content
from textual.widgets import Static

from ...i18n import _, ngettext
from ...trace import Trace
from ..formatting import clip, count, fit, num, num_in, percent, shape, shown_positions
from ...trace.events import LAYER_NORM_STATS
from ..facts import RunFacts, final_choice, hook_event, layer_norm_event, lens_event, lens_first_top, shape_of
from ..stages import Stage
from ..styled_text import styled

EIGHTHS = " ▏▎▍▌▋▊▉█"

# Span backgrounds are theme-variable style strings: Textual 8 drops an opaque background given by
# a component class to a Content span, so those classes only set colours and text styles.
CHIP_A = "on $primary 30%"
CHIP_B = "on $secondary 30%"
NEW = "bold $foreground on $success 45%"
CURRENT = "bold $background on $accent"
TOKEN_COLUMN = 16


def bar(fraction: float | None, width: int) -> str:
    """A horizontal bar `fraction` (0..1) of `width` cells long, in eighths of a cell."""
    if fraction is None or fraction <= 0:
        return " " * width
    eighths = round(min(1.0, fraction) * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (EIGHTHS[part] if part else "")
    return text + " " * (width - len(text))


def token_column_width(trace: Trace, limit: int = TOKEN_COLUMN) -> int:
    """Cells for a column of this run's token texts (and its header)."""
    return min(limit, max([cell_len(_("token"))] + [cell_len(t["text"]) for t in trace.tokens]))


class Picture(Static):
    """Base of the text pictures: styles by component class, a `draw` that rebuilds the content."""

    COMPONENT_CLASSES = {
        "picture--token",
        "picture--dim",
        "picture--header",
        "picture--bar",
        "picture--bar-alt",
    }

    DEFAULT_CSS = """
    Picture {
        height: auto;
        width: 1fr;
    }
    """

    def draw(self, trace: Trace, stage: Stage, head: int = 0) -> None:
        """Redraws the picture for `stage` of `trace`."""
        self.update(self.build(trace, stage, head))

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        raise NotImplementedError

    def label(self, trace: Trace, index: int, width: int) -> list[tuple[str, str]]:
        """A row label for computed position `index`: its absolute position and the token text,
        padded to `width`."""
        digits = len(str(trace.past + len(trace.tokens) - 1))
        token = trace.tokens[index]
        return [
            (f"{token['position']:>{digits}} ", ".picture--dim"),
            (fit(token["text"], width), ".picture--token"),
        ]


def gap_row(trace: Trace, shown: list[int | None]) -> Content:
    """The line that stands for the positions a long table leaves out."""
    i = shown.index(None)
    first, last = shown[i - 1] + 1, shown[i + 1] - 1
    text = _("… positions {first}–{last} ({n}) not listed …").format(first=first, last=last, n=count(last - first + 1))
    return Content.styled("   " + text, ".picture--dim")


def lines(rows: list[Content]) -> Content:
    """Rows joined with line breaks."""
    return Content("\n").join(rows)


class TokenTable(Picture):
    """The prompt as token chips, then a table of position, token, id and bytes."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        chips: list[tuple[str, str] | str] = []
        for i, tok in enumerate(trace.context):  # a decode step's cached positions: dimmed
            chips += [(tok["text"], ".picture--dim"), " "]
        for i, tok in enumerate(trace.tokens):
            chips.append((tok["text"], CHIP_A if (trace.past + i) % 2 == 0 else CHIP_B))
            chips.append(" ")
        width = token_column_width(trace, 24)
        pos = _("pos")
        digits = max(3, len(str(trace.past + len(trace.tokens) - 1)), cell_len(pos))
        rows = [
            Content.assemble(*chips),
            Content(""),
            *(
                [
                    Content.styled(
                        _("positions 0–{last}: in the KV cache, not run again (dimmed above)").format(last=trace.past - 1),
                        ".picture--dim",
                    )
                ]
                if trace.past
                else []
            ),
            Content.styled(
                "  ".join([fit(pos, digits, "right"), fit(_("token"), width), fit(_("id"), 6, "right"), _("bytes")]),
                ".picture--header",
            ),
        ]
        for tok in trace.tokens:
            rows.append(
                Content.assemble(
                    (f"{tok['position']:>{digits}}  ", ".picture--dim"),
                    (fit(tok["text"], width), ".picture--token"),
                    f"  {tok['id']:>6}  {tok['bytes']:>5}",
                )
            )
        total = sum(t["bytes"] for t in trace.tokens)
        in_all = ngettext("{n} byte in all", "{n} bytes in all", total).format(n=f"{count(total):>5}")
        rows.append(Content.styled(f"{'':>{digits}}  {fit('', width)}  {'':>6}  {in_all}", ".picture--dim"))
        return lines(rows)


class LayerNormTable(Picture):
    """Per token: mean and std going in, after normalizing, and after the learned gain and bias."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        ev = layer_norm_event(trace, stage)
        width = token_column_width(trace)
        digits = len(str(trace.past + len(trace.tokens) - 1))
        pad = " " * (digits + 1 + width)
        stages = "   ".join(fit(name, 17, "center") for name in (_("going in"), _("normalized"), _("after γ, β")))
        stats = "   ".join([fit(_("mean"), 8, "right") + " " + fit(_("std"), 8, "right")] * 3)
        rows = [Content.styled(f"{pad}  {stages}", ".picture--header"), Content.styled(f"{pad}  {stats}", ".picture--header")]
        columns = [ev.get(k) or [] for k in LAYER_NORM_STATS]
        shown = shown_positions(len(trace.tokens))
        for p in shown:
            if p is None:
                rows.append(gap_row(trace, shown))
                continue
            vals = [c[p] if p < len(c) else None for c in columns]
            cells = []
            for i, v in enumerate(vals):
                text = "0" if (i == 2 and v is not None and abs(v) < 1e-6) else num_in(v, 8)
                cells.append(f"{text:>8}")
            rows.append(
                Content.assemble(
                    *self.label(trace, p, width),
                    "  " + " ".join(cells[0:2]) + " → " + " ".join(cells[2:4]) + " → " + " ".join(cells[4:6]),
                )
            )
        return lines(rows)


class QKVDiagram(Picture):
    """How c_attn's output is split into q, k, v and each into heads."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        f = RunFacts.of(trace)
        C, H, D, T = f.n_embd, f.n_head, f.head_dim, f.T
        head_shape = shape_of(trace, "attn.hook_q", stage.layer, [1, H, T, D])
        span = 14
        rows = [
            Content.assemble("ln_1(x) ", (shape([1, T, C]), ".picture--header")),
            Content.styled(f"   │  @ W_attn [{C} × {3 * C}] + b_attn", ".picture--dim"),
            Content("   ▼"),
            Content.assemble(
                (shape([1, T, 3 * C]), ".picture--header"),
                " = ",
                (fit(f" q {C}", span), CHIP_A),
                (fit(f" k {C}", span), CHIP_B),
                (fit(f" v {C}", span), NEW),
            ),
            Content(""),
            styled(
                _("each of q, k, v {qkv} → view {split} → transpose → {heads}"),
                qkv=(shape([1, T, C]), ".picture--header"),
                split=(shape([1, T, H, D]), ".picture--header"),
                heads=(shape(head_shape), ".picture--header"),
            ),
            Content(""),
        ]
        chips: list[tuple[str, str] | str] = []
        for h in range(H):
            chips.append((f" h{h} ", CURRENT if h == head else (CHIP_A if h % 2 == 0 else CHIP_B)))
        rows.append(Content.assemble(*chips))
        split = _("{heads} × {numbers} = {n_embd}; head h uses dims {head_dim}·h … {head_dim}·h+{last} of q, k and v").format(
            heads=ngettext("{n} head", "{n} heads", H).format(n=count(H)),
            numbers=ngettext("{n} number", "{n} numbers", D).format(n=count(D)),
            n_embd=count(C),
            head_dim=D,
            last=D - 1,
        )
        rows.append(Content.styled(split, ".picture--dim"))
        return lines(rows)


class ResidualBars(Picture):
    """Per token: the length of the update against the length of the residual stream it is added to."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        i = stage.layer
        if stage.kind == "attn_out":
            before = hook_event(trace, "hook_resid_pre", i).get("norms") or []
            update = hook_event(trace, "hook_attn_out", i).get("norms") or []
            after = hook_event(trace, "hook_resid_mid", i).get("norms") or []
            names = (_("|x| before"), _("|attention update|"), _("|x| after"))
        else:
            post = hook_event(trace, "hook_resid_post", i)
            before = hook_event(trace, "hook_resid_mid", i).get("norms") or []
            update = post.get("mlp_update_norms") or []
            after = post.get("norms") or []
            names = (_("|x| before"), _("|MLP update|"), _("|x| after"))
        width = token_column_width(trace)
        digits = len(str(trace.past + len(trace.tokens) - 1))
        bar_width = 14
        top = max([v for v in before + update if v is not None] or [1.0]) or 1.0
        pad = " " * (digits + 1 + width)
        rows = [
            Content.styled(
                f"{pad}  {fit(names[0], bar_width + 8)}  {fit(names[1], bar_width + 8)}  {fit(names[2], 10, 'right')}",
                ".picture--header",
            )
        ]
        shown = shown_positions(len(trace.tokens))
        for p in shown:
            if p is None:
                rows.append(gap_row(trace, shown))
                continue
            b = before[p] if p < len(before) else None
            u = update[p] if p < len(update) else None
            a = after[p] if p < len(after) else None
            rows.append(
                Content.assemble(
                    *self.label(trace, p, width),
                    "  ",
                    (bar(None if b is None else b / top, bar_width), ".picture--bar-alt"),
                    f"{num(b):>8}  ",
                    (bar(None if u is None else u / top, bar_width), ".picture--bar"),
                    f"{num(u):>8}  ",
                    f"{num(a):>10}",
                )
            )
        rows.append(Content(""))
        rows.append(
            Content.styled(
                _(
                    "Lengths are L2 norms over the hidden dimensions. x + update is shorter than |x| + |update| "
                    "unless the two point the same way."
                ),
                ".picture--dim",
            )
        )
        return lines(rows)


class MLPActivity(Picture):
    """Per token the fraction of neurons GELU lets through, and the strongest neurons at the last position."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        f = RunFacts.of(trace)
        post = hook_event(trace, "mlp.hook_post", stage.layer)
        frac = post.get("frac_active") or []
        width = token_column_width(trace)
        digits = len(str(trace.past + len(trace.tokens) - 1))
        pad = " " * (digits + 1 + width)
        rows = [Content.styled(f"{pad}  " + _("neurons > 0 after GELU (of {n})").format(n=count(f.d_mlp)), ".picture--header")]
        shown = shown_positions(len(trace.tokens))
        for p in shown:
            if p is None:
                rows.append(gap_row(trace, shown))
                continue
            v = frac[p] if p < len(frac) else None
            rows.append(
                Content.assemble(*self.label(trace, p, width), "  ", (bar(v, 20), ".picture--bar"), f" {percent(v):>7}")
            )
        top = post.get("top_neurons") or []
        if top:
            last = len(trace.tokens) - 1
            rows += [
                Content(""),
                styled(
                    _("Strongest neurons at position {position} {token} (GELU output)"),
                    ".picture--header",
                    position=(str(trace.tokens[last]["position"]), ".picture--header"),
                    token=(trace.tokens[last]["text"], ".picture--token"),
                ),
            ]
            memory = top[0].get("promotes") is not None  # the key-value view (not in older traces)
            if memory:
                rows.append(Content.styled(
                    "  " + fit(_("neuron"), 8, "right") + fit(_("key match"), 10, "right") + "  "
                    + fit(_("GELU"), 8 + 1 + 8, "right") + "  " + _("its value raises"),
                    ".picture--dim",
                ))
            peak = max(abs(n["value"] or 0) for n in top) or 1.0
            for n in top:
                if memory:
                    rows.append(Content.assemble(
                        ("  " + fit(str(n["index"]), 8, "right"), ".picture--dim"),
                        fit(num(n.get("pre")), 10, "right"), "  ",
                        (bar((n["value"] or 0) / peak, 8), ".picture--bar"), fit(num(n["value"]), 9, "right"), "  ",
                        (" ".join(t["text"] for t in n["promotes"]), ".picture--token"),
                    ))
                    continue
                rows.append(
                    Content.assemble(
                        ("  " + _("neuron {index}").format(index=f"{n['index']:>5}") + "  ", ".picture--dim"),
                        (bar((n["value"] or 0) / peak, 20), ".picture--bar"),
                        f" {num(n['value']):>8}",
                    )
                )
        return lines(rows)


class TopTokens(Picture):
    """The last position's top tokens as probability bars, then what the other positions guess."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        ev = hook_event(trace, "unembed.hook_out")
        positions = ev.get("positions") or []
        if not positions:
            return Content(_("no logits in this trace"))
        last = positions[-1]
        T = len(trace.tokens)
        width = max(8, min(18, max(cell_len(t) for t in [_("token"), *last["tokens"]])))
        n = len(last["ids"])
        header = ngettext(
            "Top {n} next token after position {position} {token}", "Top {n} next tokens after position {position} {token}", n
        )
        rows = [
            styled(
                header,
                ".picture--header",
                n=(count(n), ".picture--header"),
                position=(str(trace.tokens[-1]["position"]), ".picture--header"),
                token=(trace.tokens[-1]["text"], ".picture--token"),
            ),
            Content.styled(  # "probability" stands over the bars (24 cells) and the percentages (7)
                " " * 4 + fit(_("token"), width) + "  " + fit(_("probability"), 24 + 1 + 7) + "  "
                + fit(_("logit"), 8, "right") + "  " + fit(_("id"), 6, "right"),
                ".picture--dim",
            ),
        ]
        top_p = last["probs"][0] or 1.0
        for r, (tid, tok, prob, logit) in enumerate(zip(last["ids"], last["tokens"], last["probs"], last["logits"]), 1):
            rows.append(
                Content.assemble(
                    (f"{r:>3} ", ".picture--dim"),
                    (fit(tok, width), NEW if r == 1 else ".picture--token"),
                    "  ",
                    (bar((prob or 0) / top_p, 24), ".picture--bar"),
                    f" {percent(prob):>7}  {num(logit):>8}  {tid:>6}",
                )
            )
        rows.append(Content.styled(_("bars are scaled to the top probability"), ".picture--dim"))
        if T > 1:
            rows += [Content(""), Content.styled(_("The other positions predict tokens already in the prompt:"), ".picture--header")]
            tw = token_column_width(trace, 12)
            shown = range(max(0, T - 1 - 8), T - 1)
            if shown.start > 0:
                earlier = ngettext("… {n} earlier position", "… {n} earlier positions", shown.start).format(
                    n=count(shown.start)
                )
                rows.append(Content.styled("  " + earlier, ".picture--dim"))
            for p in shown:
                guess = positions[p]
                rows.append(
                    Content.assemble(
                        *self.label(trace, p, tw),
                        "  ",
                        styled(
                            _("guesses {guess} {p}   actual next: {actual}"),
                            ".picture--dim",
                            guess=(fit(guess["tokens"][0], tw), ".picture--token"),
                            p=f"{percent(guess['probs'][0]):>7}",
                            actual=(trace.tokens[p + 1]["text"], ".picture--token"),
                        ),
                    )
                )
        return lines(rows)


class LogitLensTable(Picture):
    """Per block: the lens's top token, and the rank and probability of the final choice."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        ev = lens_event(trace)
        layers = ev.get("layers") or []
        final = ev.get("final_token", "?")
        top = _("top token")
        width = max(9, cell_len(top), min(16, max((cell_len(e["tokens"][0]) for e in layers), default=9)))
        blocks = [_("block {layer}").format(layer=e["layer"]) for e in layers]
        after = _("after")
        block_width = max(9, *(cell_len(text) + 1 for text in [after, *blocks]))
        rows = [
            Content.assemble(
                (f"{fit(after, block_width)}{fit(top, width)} {'p':>7}   ", ".picture--header"),
                styled(_("{token}: rank and probability"), ".picture--header", token=(fit(final, 16), NEW)),
            )
        ]
        first = lens_first_top(trace)
        for e, block in zip(layers, blocks):
            rank, prob = e.get("final_rank"), e.get("final_prob")
            rows.append(
                Content.assemble(
                    (fit(block, block_width), CURRENT if e["layer"] == first else ".picture--dim"),
                    (fit(e["tokens"][0], width), NEW if e["ids"][0] == ev.get("final_id") else ".picture--token"),
                    f" {percent(e['probs'][0]):>7}   ",
                    f"#{count(rank):<7} " if rank is not None else " " * 9,
                    (bar(prob, 16), ".picture--bar"),
                    f" {percent(prob):>7}",
                )
            )
        rows.append(Content(""))
        rows.append(
            Content.styled(_("p: the lens's probability for its top token; bars: the final choice's probability"), ".picture--dim")
        )
        return lines(rows)


class NextTokenView(Picture):
    """The prompt's tokens with the chosen one appended, and the runners-up."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        token_id, token, prob = final_choice(trace)
        chips: list[tuple[str, str] | str] = []
        for i, tok in enumerate((trace.context + trace.tokens)[-40:]):
            chips.append((tok["text"], CHIP_A if i % 2 == 0 else CHIP_B))
            chips.append(" ")
        chips.append((f"{token}", NEW))
        rows = [Content.assemble(*chips), Content("")]
        rows.append(
            Content.assemble(
                (_("next token") + " ", ".picture--header"),
                (token, NEW),
                f"   id {token_id}" + (f"   p = {percent(prob)}" if prob is not None else ""),
            )
        )
        last = (hook_event(trace, "unembed.hook_out").get("positions") or [{}])[-1]
        if last.get("ids"):
            rows.append(Content(""))
            rows.append(Content.styled(_("runners-up"), ".picture--dim"))
            for tok, p in list(zip(last["tokens"], last["probs"]))[1:4]:
                rows.append(Content.assemble("  ", (fit(tok, 16), ".picture--token"), f" {percent(p):>7}"))
        kv = hook_event(trace, "kv_cache")
        if kv:
            layers = kv.get("layers") or []
            per_token = kv["bytes_per_position"]
            size = _("{layers} × K and V {shape} = {total}, {per_token} per token").format(
                layers=ngettext("{n} layer", "{n} layers", len(layers)).format(n=count(len(layers))),
                shape=shape(layers[0]["k_shape"]) if layers else "",
                total=ngettext("{n} byte", "{n} bytes", kv["total_bytes"]).format(n=count(kv["total_bytes"])),
                per_token=count(per_token),
            )
            room = _("the next token adds {bytes}; room for {positions}").format(
                bytes=ngettext("{n} byte", "{n} bytes", per_token).format(n=count(per_token)),
                positions=ngettext("{n} position", "{n} positions", kv["capacity"]).format(n=count(kv["capacity"])),
            )
            after = _("KV cache after this decode step") if trace.past else _("KV cache after this prefill")
            rows += [Content(""), Content.styled(after, ".picture--header"), Content("  " + size), Content("  " + room)]
        rows.append(Content(""))
        rows.append(Content.styled(_('prompt: "{prompt}"').format(prompt=clip(trace.prompt, 60)), ".picture--dim"))
        return lines(rows)
