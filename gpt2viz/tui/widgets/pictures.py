"""The pictures of the stages that are tables and bars (text, no heatmap).

Each picture is a Static that draws itself from (trace, stage, head). Token texts go in as
literal text (Content spans, never markup), with spaces and line breaks already made visible.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual.content import Content
from textual.widgets import Static

from ...trace import Trace
from ..formatting import clip, count, fit, num, num_in, percent, shape, shown_positions
from ...trace.events import LAYER_NORM_STATS
from ..facts import RunFacts, final_choice, hook_event, layer_norm_event, lens_event, lens_first_top, shape_of
from ..stages import Stage

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
    """Cells for a column of this run's token texts."""
    return min(limit, max([cell_len("token")] + [cell_len(t["text"]) for t in trace.tokens]))


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
    return Content.styled(f"   … positions {first}–{last} ({last - first + 1}) not listed …", ".picture--dim")


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
        digits = max(3, len(str(trace.past + len(trace.tokens) - 1)))
        rows = [
            Content.assemble(*chips),
            Content(""),
            *(
                [Content.styled(f"positions 0–{trace.past - 1}: in the KV cache, not run again (dimmed above)", ".picture--dim")]
                if trace.past
                else []
            ),
            Content.styled(f"{'pos':>{digits}}  {fit('token', width)}  {'id':>6}  bytes", ".picture--header"),
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
        rows.append(Content.styled(f"{'':>{digits}}  {fit('', width)}  {'':>6}  {total:>5} bytes in all", ".picture--dim"))
        return lines(rows)


class LayerNormTable(Picture):
    """Per token: mean and std going in, after normalizing, and after the learned gain and bias."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        ev = layer_norm_event(trace, stage)
        width = token_column_width(trace)
        digits = len(str(trace.past + len(trace.tokens) - 1))
        pad = " " * (digits + 1 + width)
        rows = [
            Content.styled(f"{pad}  {'going in':^17}   {'normalized':^17}   {'after γ, β':^17}", ".picture--header"),
            Content.styled(f"{pad}  {'mean':>8} {'std':>8}   {'mean':>8} {'std':>8}   {'mean':>8} {'std':>8}", ".picture--header"),
        ]
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
            Content.assemble(
                "each of q, k, v ",
                (shape([1, T, C]), ".picture--header"),
                " → view ",
                (shape([1, T, H, D]), ".picture--header"),
                " → transpose → ",
                (shape(head_shape), ".picture--header"),
            ),
            Content(""),
        ]
        chips: list[tuple[str, str] | str] = []
        for h in range(H):
            chips.append((f" h{h} ", CURRENT if h == head else (CHIP_A if h % 2 == 0 else CHIP_B)))
        rows.append(Content.assemble(*chips))
        rows.append(Content.styled(f"{H} heads × {D} numbers = {C}; head h uses dims {D}·h … {D}·h+{D - 1} of q, k and v", ".picture--dim"))
        return lines(rows)


class ResidualBars(Picture):
    """Per token: the length of the update against the length of the residual stream it is added to."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        i = stage.layer
        if stage.kind == "attn_out":
            before = hook_event(trace, "hook_resid_pre", i).get("norms") or []
            update = hook_event(trace, "hook_attn_out", i).get("norms") or []
            after = hook_event(trace, "hook_resid_mid", i).get("norms") or []
            names = ("|x| before", "|attention update|", "|x| after")
        else:
            post = hook_event(trace, "hook_resid_post", i)
            before = hook_event(trace, "hook_resid_mid", i).get("norms") or []
            update = post.get("mlp_update_norms") or []
            after = post.get("norms") or []
            names = ("|x| before", "|MLP update|", "|x| after")
        width = token_column_width(trace)
        digits = len(str(trace.past + len(trace.tokens) - 1))
        bar_width = 14
        top = max([v for v in before + update if v is not None] or [1.0]) or 1.0
        pad = " " * (digits + 1 + width)
        rows = [
            Content.styled(
                f"{pad}  {fit(names[0], bar_width + 8)}  {fit(names[1], bar_width + 8)}  {names[2]:>10}",
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
                "Lengths are L2 norms over the hidden dimensions. x + update is shorter than |x| + |update| "
                "unless the two point the same way.",
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
        rows = [Content.styled(f"{pad}  neurons > 0 after GELU (of {count(f.d_mlp)})", ".picture--header")]
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
                Content.assemble(
                    ("Strongest neurons at position ", ".picture--header"),
                    (f"{trace.tokens[last]['position']} ", ".picture--header"),
                    (trace.tokens[last]["text"], ".picture--token"),
                    (" (GELU output)", ".picture--header"),
                ),
            ]
            peak = max(abs(n["value"] or 0) for n in top) or 1.0
            for n in top:
                rows.append(
                    Content.assemble(
                        (f"  neuron {n['index']:>5}  ", ".picture--dim"),
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
            return Content("no logits in this trace")
        last = positions[-1]
        T = len(trace.tokens)
        width = max(8, min(18, max(cell_len(t) for t in last["tokens"])))
        rows = [
            Content.assemble(
                (f"Top {len(last['ids'])} next tokens after position {trace.tokens[-1]['position']} ", ".picture--header"),
                (trace.tokens[-1]["text"], ".picture--token"),
            ),
            Content.styled(f"{'':>3} {fit('token', width)}  {'probability':<24} {'':>7}  {'logit':>8}  {'id':>6}", ".picture--dim"),
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
        rows.append(Content.styled("bars are scaled to the top probability", ".picture--dim"))
        if T > 1:
            rows += [Content(""), Content.styled("The other positions predict tokens already in the prompt:", ".picture--header")]
            tw = token_column_width(trace, 12)
            shown = range(max(0, T - 1 - 8), T - 1)
            if shown.start > 0:
                rows.append(Content.styled(f"  … {shown.start} earlier positions", ".picture--dim"))
            for p in shown:
                guess = positions[p]
                rows.append(
                    Content.assemble(
                        *self.label(trace, p, tw),
                        ("  guesses ", ".picture--dim"),
                        (fit(guess["tokens"][0], tw), ".picture--token"),
                        (f" {percent(guess['probs'][0]):>7}", ""),
                        ("   actual next: ", ".picture--dim"),
                        (trace.tokens[p + 1]["text"], ".picture--token"),
                    )
                )
        return lines(rows)


class LogitLensTable(Picture):
    """Per block: the lens's top token, and the rank and probability of the final choice."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        ev = lens_event(trace)
        layers = ev.get("layers") or []
        final = ev.get("final_token", "?")
        width = max(9, min(16, max((cell_len(e["tokens"][0]) for e in layers), default=9)))
        rows = [
            Content.assemble(
                (f"{'after':<9}{fit('top token', width)} {'p':>7}   ", ".picture--header"),
                (fit(final, 16), NEW),
                (": rank and probability", ".picture--header"),
            )
        ]
        first = lens_first_top(trace)
        for e in layers:
            rank, prob = e.get("final_rank"), e.get("final_prob")
            rows.append(
                Content.assemble(
                    (f"block {e['layer']:<3}", CURRENT if e["layer"] == first else ".picture--dim"),
                    (fit(e["tokens"][0], width), NEW if e["ids"][0] == ev.get("final_id") else ".picture--token"),
                    f" {percent(e['probs'][0]):>7}   ",
                    f"#{count(rank):<7} " if rank is not None else " " * 9,
                    (bar(prob, 16), ".picture--bar"),
                    f" {percent(prob):>7}",
                )
            )
        rows.append(Content(""))
        rows.append(Content.styled("p: the lens's probability for its top token; bars: the final choice's probability", ".picture--dim"))
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
                ("next token ", ".picture--header"),
                (token, NEW),
                f"   id {token_id}" + (f"   p = {percent(prob)}" if prob is not None else ""),
            )
        )
        last = (hook_event(trace, "unembed.hook_out").get("positions") or [{}])[-1]
        if last.get("ids"):
            rows.append(Content(""))
            rows.append(Content.styled("runners-up", ".picture--dim"))
            for tok, p in list(zip(last["tokens"], last["probs"]))[1:4]:
                rows.append(Content.assemble("  ", (fit(tok, 16), ".picture--token"), f" {percent(p):>7}"))
        kv = hook_event(trace, "kv_cache")
        if kv:
            layer = kv["layers"][0] if kv.get("layers") else None
            rows += [
                Content(""),
                Content.styled("KV cache after this " + ("decode step" if trace.past else "prefill"), ".picture--header"),
                Content(
                    f"  {len(kv.get('layers') or [])} layers × K and V "
                    + (shape(layer["k_shape"]) if layer else "")
                    + f" = {count(kv['total_bytes'])} bytes, {count(kv['bytes_per_position'])} per token"
                ),
                Content(f"  the next token adds {count(kv['bytes_per_position'])} bytes; room for {count(kv['capacity'])} positions"),
            ]
        rows.append(Content(""))
        rows.append(Content.styled(f'prompt: "{clip(trace.prompt, 60)}"', ".picture--dim"))
        return lines(rows)
