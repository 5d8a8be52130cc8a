"""The pictures of the stages that are tables and bars (text, no heatmap).

Each picture is handed (trace, stage, head) and builds its lines for the width it is rendered at. Token texts go in as
literal text (Content spans, never markup), with spaces and line breaks already made visible.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual.content import Content

from ...i18n import N_, _, ngettext
from ...text_safety import token_label
from ...trace import Trace
from ..formatting import clip, count, fit, num, num_in, percent, quote, shape, shown_positions
from ...trace.events import LAYER_NORM_STATS, RMS_NORM_STATS
from ..generation import decoding_label
from ..facts import RunFacts, StepChoice, allocated_positions, final_choice, untrained, hook_event, layer_norm_event, lens_event, lens_first_top, shape_of
from ..stages import Stage
from ..styled_text import styled
from ..table_layout import Column, chip_lines, header_lines, wrapped
from .laid import Laid

EIGHTHS = " ▏▎▍▌▋▊▉█"

# Span backgrounds are theme-variable style strings: Textual 8 drops an opaque background given by
# a component class to a Content span, so those classes only set colours and text styles.
CHIP_A = "on $primary 30%"
CHIP_B = "on $secondary 30%"
NEW = "bold $foreground on $success 45%"
CURRENT = "bold $background on $accent"
TOKEN_COLUMN = 16
PROMPT_MIN = 8  # cells of the prompt a line quotes at least


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
    return min(limit, max([cell_len(_("token"))] + [cell_len(token_label(t["text"])) for t in trace.tokens]))


# A token the model's training text never held: its row of wte was never trained on it.
UNTRAINED_MARK = "†"
UNTRAINED_MARK_NOTE = N_("{mark} never in this model's training text: an untrained row of wte")


def promoted_label(token: dict) -> str:
    """A token a neuron's value raises, marked when its row was never trained (the trace says)."""
    label = token_label(token["text"])
    return label + UNTRAINED_MARK if untrained(token) else label


class Picture(Laid):
    """Base of the text pictures: styles by component class; `draw` hands over the data and the
    lines are built when Textual renders the picture, for the width it has then (widgets/laid.py)."""

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

    _room = 80

    def draw(self, trace: Trace, stage: Stage, head: int = 0) -> None:
        """Shows the picture of `stage` of `trace` (with `head` selected)."""
        self.show(lambda width: self._built_at(width, trace, stage, head))

    def _built_at(self, width: int, trace: Trace, stage: Stage, head: int) -> Content:
        self._room = width
        return self.build(trace, stage, head)

    @property
    def room(self) -> int:
        """Cells a line of the picture has: the width it is being laid out for."""
        return self._room

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        """The picture's lines, none wider than `room` (so that none wraps)."""
        raise NotImplementedError

    def label(self, trace: Trace, index: int, width: int) -> list[tuple[str, str]]:
        """A row label for computed position `index`: its absolute position and the token text,
        padded to `width`."""
        digits = len(str(trace.past + len(trace.tokens) - 1))
        token = trace.tokens[index]
        return [
            (f"{token['position']:>{digits}} ", ".picture--dim"),
            (fit(token_label(token["text"]), width), ".picture--token"),
        ]


def gap_row(trace: Trace, shown: list[int | None]) -> Content:
    """The line that stands for the positions a long table leaves out."""
    i = shown.index(None)
    first, last = shown[i - 1] + 1, shown[i + 1] - 1
    text = _("… positions {first}–{last} ({n}) not listed …").format(first=first, last=last, n=count(last - first + 1))
    return Content.styled("   " + text, ".picture--dim")


def whole_tokens(texts: list[str], width: int) -> str:
    """Token texts with a space between, as many whole ones as `width` cells hold (the first one
    cut when not even it fits)."""
    shown = texts[:1]
    for text in texts[1:]:
        if cell_len(" ".join([*shown, text])) > width:
            break
        shown.append(text)
    return fit(" ".join(shown), width).rstrip() if shown else ""


def lines(rows: list[Content]) -> Content:
    """Rows joined with line breaks."""
    return Content("\n").join(rows)


class TokenTable(Picture):
    """The prompt as token chips, then a table of position, token, id and bytes."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        chips = [(token_label(tok["text"]), ".picture--dim") for tok in trace.context]  # a decode step's cached positions: dimmed
        for i, tok in enumerate(trace.tokens):
            chips.append((token_label(tok["text"]), CHIP_A if (trace.past + i) % 2 == 0 else CHIP_B))
        width = token_column_width(trace, 24)
        pos = _("pos")
        digits = max(3, len(str(trace.past + len(trace.tokens) - 1)), cell_len(pos))
        rows = [
            *chip_lines(chips, self.room),
            Content(""),
            *(
                wrapped(
                    Content.styled(
                        _("positions 0–{last}: in the KV cache, not run again (dimmed above)").format(last=trace.past - 1),
                        ".picture--dim",
                    ),
                    self.room,
                )
                if trace.past
                else []
            ),
            Content.styled(
                "  ".join([fit(pos, digits, "right"), fit(_("token"), width), fit(_("id"), 6, "right"), _("bytes")]),
                ".picture--header",
            ),
        ]
        # An empty prompt runs from <|endoftext|> alone, which stands for none of its bytes (its 13
        # are the special token's name): a learner read "13 bytes in all" under "0 bytes".
        started = not trace.prompt and not trace.past
        for tok in trace.tokens:
            rows.append(
                Content.assemble(
                    (f"{tok['position']:>{digits}}  ", ".picture--dim"),
                    (fit(token_label(tok["text"]), width), ".picture--token"),
                    f"  {tok['id']:>6}  {'–' if started else tok['bytes']:>5}",
                )
            )
        total = 0 if started else sum(t["bytes"] for t in trace.tokens)
        in_all = ngettext("{n} byte in all", "{n} bytes in all", total).format(n=f"{count(total):>5}")
        rows.append(Content.styled(f"{'':>{digits}}  {fit('', width)}  {'':>6}  {in_all}", ".picture--dim"))
        return lines(rows)


class LayerNormTable(Picture):
    """Per token: mean and std going in, after normalizing, and after the learned gain and bias."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        ev = layer_norm_event(trace, stage)
        width = token_column_width(trace)
        digits = len(str(trace.past + len(trace.tokens) - 1))
        # Three groups of mean and std (17 cells each, an arrow between); where they do not fit,
        # the normalized one goes (LayerNorm: always mean 0 and std 1; RMSNorm: rms 1; the text says
        # so), then token room.
        groups = [0, 1, 2]
        if digits + 1 + width + 2 + 3 * 17 + 2 * 3 > self.room:
            groups = [0, 2]
            width = max(4, min(width, self.room - (2 * 17 + 3) - 2 - digits - 1))
        pad = " " * (digits + 1 + width)
        rms = RunFacts.of(trace).llama  # an RMSNorm: root mean squares, no mean taken away, no bias
        names = (_("going in"), _("normalized"), _("after the weight") if rms else _("after γ, β"))
        stages = "   ".join(fit(names[g], 17, "center") for g in groups)
        spread = _("rms") if rms else _("std")
        stats = "   ".join([fit(_("mean"), 8, "right") + " " + fit(spread, 8, "right")] * len(groups))
        rows = [Content.styled(f"{pad}  {stages}", ".picture--header"), Content.styled(f"{pad}  {stats}", ".picture--header")]
        columns = [ev.get(k) or [] for k in (RMS_NORM_STATS if rms else LAYER_NORM_STATS)]
        shown = shown_positions(len(trace.tokens))
        for p in shown:
            if p is None:
                rows.append(gap_row(trace, shown))
                continue
            vals = [c[p] if p < len(c) else None for c in columns]
            cells = []
            for i, v in enumerate(vals):
                text = "0" if (i == 2 and not rms and v is not None and abs(v) < 1e-6) else num_in(v, 8)
                cells.append(f"{text:>8}")
            rows.append(
                Content.assemble(
                    *self.label(trace, p, width),
                    "  " + " → ".join(" ".join(cells[2 * g : 2 * g + 2]) for g in groups),
                )
            )
        return lines(rows)


class QKVDiagram(Picture):
    """How c_attn's output is split into q, k, v and each into heads (a LLaMA-family model: three
    products, fewer key/value heads than query heads, and the pairs rotated by position)."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        f = RunFacts.of(trace)
        if f.llama:
            return self._grouped(trace, stage, head, f)
        C, H, D, T = f.n_embd, f.n_head, f.head_dim, f.T
        head_shape = shape_of(trace, "attn.hook_q", stage.layer, [1, H, T, D])
        span = max(len(f" q {C}") + 1, min(14, (self.room - len(shape([1, T, 3 * C])) - 3) // 3))
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
            *wrapped(
                styled(
                    _("each of q, k, v {qkv} → view {split} → transpose → {heads}"),
                    qkv=(shape([1, T, C]), ".picture--header"),
                    split=(shape([1, T, H, D]), ".picture--header"),
                    heads=(shape(head_shape), ".picture--header"),
                ),
                self.room,
                indent=2,
            ),
            Content(""),
        ]
        chips = [(f" h{h} ", CURRENT if h == head else (CHIP_A if h % 2 == 0 else CHIP_B)) for h in range(H)]
        rows += chip_lines(chips, self.room, gap="")
        split = _("{heads} × {numbers} = {n_embd}; head h uses dims {head_dim}·h … {head_dim}·h+{last} of q, k and v").format(
            heads=ngettext("{n} head", "{n} heads", H).format(n=count(H)),
            numbers=ngettext("{n} number", "{n} numbers", D).format(n=count(D)),
            n_embd=count(C),
            head_dim=D,
            last=D - 1,
        )
        rows += wrapped(Content.styled(split, ".picture--dim"), self.room)
        return lines(rows)

    def _grouped(self, trace: Trace, stage: Stage, head: int, f: RunFacts) -> Content:
        C, H, KVH, D, T = f.n_embd, f.n_head, f.n_kv_head, f.head_dim, f.T
        group = H // KVH
        q_shape = shape_of(trace, "attn.hook_q", stage.layer, [1, H, T, D])
        kv_shape = shape_of(trace, "attn.hook_k", stage.layer, [1, KVH, T, D])
        rows = [
            Content.assemble("norm_1(x) ", (shape([1, T, C]), ".picture--header")),
            *wrapped(styled(_("@ W_qᵀ [{C} × {C}] → q {q} → heads {heads}"), ".picture--dim",
                            C=count(C), q=(shape([1, T, C]), CHIP_A), heads=(shape(q_shape), ".picture--header")),
                     self.room, indent=3),
            *wrapped(styled(_("@ W_kᵀ, W_vᵀ [{C} × {KV}] → k, v {kv} → heads {heads} each"), ".picture--dim",
                            C=count(C), KV=count(KVH * D), kv=(shape([1, T, KVH * D]), CHIP_B),
                            heads=(shape(kv_shape), ".picture--header")),
                     self.room, indent=3),
            Content(""),
        ]
        # The query heads, each in the colour of the key/value head it reads (the chosen one marked).
        chips = [(f" h{h} ", CURRENT if h == head else (CHIP_A if (h // group) % 2 == 0 else CHIP_B)) for h in range(H)]
        rows += chip_lines([(_("query heads"), ".picture--dim"), (" ", ""), *chips], self.room, gap="")
        kv_chips = [(f" kv{k} ", CURRENT if k == head // group else (CHIP_A if k % 2 == 0 else CHIP_B)) for k in range(KVH)]
        rows += chip_lines([(_("key/value heads"), ".picture--dim"), (" ", ""), *kv_chips], self.room, gap="")
        rows += wrapped(Content.styled(
            _("query head h reads key/value head h ÷ {group}: head {head} reads key/value head {kv}").format(
                group=group, head=head, kv=head // group), ".picture--dim"), self.room)
        rotation = hook_event(trace, "attn.hook_rot_q", stage.layer).get("rotation") or {}
        pairs = rotation.get("pairs") or []
        if pairs:
            rows.append(Content(""))
            rows += wrapped(Content.styled(
                _("head 0's query at position {position}, pairs turned by position × {theta}^(−2j/{D}):").format(
                    position=rotation.get("position"), theta=f"{f.config.rope_theta:g}", D=D), ".picture--header"),
                self.room)
            for pair in pairs:
                before, after = pair["before"], pair["after"]
                # Narrow: the numbers in 6 cells each and less room around them (one line a pair at 80 x 24).
                cells, gap = (7, "   ") if self.room >= 72 else (6, " ")
                rows.append(Content.assemble(
                    (fit(_("pair {j}").format(j=pair["pair"]), 8), ".picture--dim"),
                    (fit(_("{angle} rad").format(angle=num(pair["angle"])), 12, "right"), ".picture--header"),
                    f"{gap}({num_in(before[0], cells)}, {num_in(before[1], cells)}) → "
                    f"({num_in(after[0], cells)}, {num_in(after[1], cells)})",
                ))
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
        # Per row: label, two bars with their numbers and the length after: the bars take the room
        # left (4 to 14 cells), then the token column gives some up.
        numbers = 2 + 8 + 2 + 8 + 2 + 8
        bar_width = max(4, min(14, (self.room - (digits + 1 + width) - numbers) // 2))
        width = max(4, min(width, self.room - numbers - 2 * bar_width - digits - 1))
        top = max([v for v in before + update if v is not None] or [1.0]) or 1.0
        x = digits + 1 + width + 2
        rows = header_lines(
            [
                (Column(x, bar_width + 8), names[0]),
                (Column(x + bar_width + 10, bar_width + 8), names[1]),
                (Column(x + 2 * bar_width + 20, 8, "right"), names[2]),
            ],
            self.room,
            ".picture--header",
        )
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
                    f"{num(a):>8}",
                )
            )
        rows.append(Content(""))
        rows += wrapped(
            Content.styled(
                _(
                    "Lengths are L2 norms over the hidden dimensions. x + update is never longer than |x| + |update|, "
                    "and shorter unless the two point the same way or the update is 0."
                ),
                ".picture--dim",
            ),
            self.room,
        )
        return lines(rows)


class MLPActivity(Picture):
    """Per token the fraction of neurons GELU lets through (a LLaMA-family model: silu(gate) × up
    above 0), and the strongest neurons at the last position."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        f = RunFacts.of(trace)
        post = hook_event(trace, "mlp.hook_post", stage.layer)
        frac = post.get("frac_active") or []
        width = token_column_width(trace)
        digits = len(str(trace.past + len(trace.tokens) - 1))
        if f.llama:
            header = _("neurons > 0 after silu(gate) × up (of {n})").format(n=count(f.d_mlp))
        else:
            header = _("neurons > 0 after GELU (of {n})").format(n=count(f.d_mlp))
        pad = " " * min(digits + 1 + width + 2, max(0, self.room - cell_len(header)))
        rows = wrapped(Content.styled(pad + header, ".picture--header"), self.room)
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
                *wrapped(
                    styled(
                        _("Strongest neurons at position {position} {token} (silu(gate) × up)") if f.llama
                        else _("Strongest neurons at position {position} {token} (GELU output)"),
                        ".picture--header",
                        position=(str(trace.tokens[last]["position"]), ".picture--header"),
                        token=(token_label(trace.tokens[last]["text"]), ".picture--token"),
                    ),
                    self.room,
                ),
            ]
            memory = top[0].get("promotes") is not None  # the key-value view (not in older traces)
            # Columns: neuron, key match, GELU bar and value, then the tokens its value raises, as
            # many whole ones as the room left holds (the bar gives up cells for the header).
            index_width = max([6, *(len(str(n["index"])) for n in top)])
            raises = _("its value raises")
            bar_width = max(4, min(8, self.room - (2 + index_width + 10 + 2 + 8 + 2) - cell_len(raises)))
            x = 2 + index_width + 10 + 2
            if memory:
                rows += header_lines(
                    [
                        (Column(2, index_width, "right"), _("neuron")),
                        (Column(2 + index_width, 10, "right"), _("gate") if f.llama else _("key match")),
                        (Column(x, bar_width + 8, "right"), "silu(gate) × up" if f.llama else _("GELU")),
                        (Column(x + bar_width + 10, self.room), raises),
                    ],
                    self.room,
                    ".picture--dim",
                )
            peak = max(abs(n["value"] or 0) for n in top) or 1.0
            for n in top:
                if memory:
                    rows.append(Content.assemble(
                        ("  " + fit(str(n["index"]), index_width, "right"), ".picture--dim"),
                        fit(num(n.get("pre")), 10, "right"), "  ",
                        (bar(abs(n["value"] or 0) / peak, bar_width), ".picture--bar"), fit(num(n["value"]), 8, "right"), "  ",
                        (whole_tokens([promoted_label(t) for t in n["promotes"]], self.room - x - bar_width - 10), ".picture--token"),
                    ))
                    continue
                rows.append(
                    Content.assemble(
                        ("  " + _("neuron {index}").format(index=f"{n['index']:>5}") + "  ", ".picture--dim"),
                        (bar(abs(n["value"] or 0) / peak, 20), ".picture--bar"),
                        f" {num(n['value']):>8}",
                    )
                )
            if memory and any(untrained(t) for n in top for t in n["promotes"]):
                rows += wrapped(Content.styled(_(UNTRAINED_MARK_NOTE).format(mark=UNTRAINED_MARK), ".picture--dim"), self.room)
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
        # Tokens quoted, as the sentences quote them: a bare '-' or '.' in a column read as "none".
        width = max(8, min(18, max([cell_len(_("token"))] + [cell_len(quote(t)) for t in last["tokens"]])))
        n = len(last["ids"])
        header = ngettext(
            "Top {n} next token after position {position} {token}", "Top {n} next tokens after position {position} {token}", n
        )
        # Rank, token, bar and percentage, logit, id: the bar takes the room left (up to 24 cells);
        # where it would be shorter than 16, the id column goes to give it more.
        fixed = 4 + width + 2 + 1 + 7 + 2 + 8
        show_id = self.room - fixed - 8 >= 16
        bar_width = max(4, min(24, self.room - fixed - (8 if show_id else 0)))
        width = max(4, min(width, self.room - fixed + width - bar_width - (8 if show_id else 0)))
        x = 4 + width + 2
        columns = [
            (Column(4, width), _("token")),
            (Column(x, bar_width + 1 + 7), _("probability")),  # over the bars and the percentages
            (Column(x + bar_width + 10, 8, "right"), _("logit")),
        ]
        if show_id:
            columns.append((Column(x + bar_width + 20, 6, "right"), _("id")))
        rows = [
            *wrapped(
                styled(
                    header,
                    ".picture--header",
                    n=(count(n), ".picture--header"),
                    position=(str(trace.tokens[-1]["position"]), ".picture--header"),
                    token=(token_label(trace.tokens[-1]["text"]), ".picture--token"),
                ),
                self.room,
            ),
            *header_lines(columns, self.room, ".picture--dim"),
        ]
        top_p = last["probs"][0] or 1.0
        for r, (tid, tok, prob, logit) in enumerate(zip(last["ids"], last["tokens"], last["probs"], last["logits"]), 1):
            rows.append(
                Content.assemble(
                    (f"{r:>3} ", ".picture--dim"),
                    (fit(quote(tok), width), NEW if r == 1 else ".picture--token"),
                    "  ",
                    (bar((prob or 0) / top_p, bar_width), ".picture--bar"),
                    f" {percent(prob):>7}  {num(logit):>8}" + (f"  {tid:>6}" if show_id else ""),
                )
            )
        rows += wrapped(Content.styled(_("bars are scaled to the top probability"), ".picture--dim"), self.room)
        if T > 1:
            rows += [
                Content(""),
                *wrapped(Content.styled(_("The other positions predict tokens already in the prompt:"), ".picture--header"), self.room),
            ]
            digits = len(str(trace.past + T - 1))
            # Position and token, its guess and the guess's probability, the actual next token.
            # (+2: the guesses and the next tokens are quoted)
            tw = max(4, min(token_column_width(trace, 12) + 2, (self.room - digits - 1 - 2 - 1 - 7 - 3) // 3))
            x = digits + 1 + tw + 2
            rows += header_lines(
                [
                    (Column(x, tw), _("guess")),
                    (Column(x + tw + 1, 7, "right"), "p"),
                    (Column(x + tw + 11, tw), _("actual next")),
                ],
                self.room,
                ".picture--dim",
            )
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
                        (fit(quote(guess["tokens"][0]), tw), ".picture--token"),
                        f" {percent(guess['probs'][0]):>7}   ",
                        (fit(quote(trace.tokens[p + 1]["text"]), max(1, self.room - x - tw - 11)).rstrip(), ".picture--token"),
                    )
                )
        return lines(rows)


class LogitLensTable(Picture):
    """Per block: the lens's top token, and the rank and probability of the final choice."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        ev = lens_event(trace)
        layers = ev.get("layers") or []
        final = token_label(ev.get("final_token", "?"))
        top = _("top token")
        width = max(9, cell_len(top), min(16, max((cell_len(e["tokens"][0]) for e in layers), default=9)))
        blocks = [_("block {layer}").format(layer=e["layer"]) for e in layers]
        after = _("after")
        block_width = max(9, *(cell_len(text) + 1 for text in [after, *blocks]))
        # Block, the lens's top token and its p, then the final choice's rank, bar and p: the bar
        # takes the room left (4 to 16 cells), then the token column gives some up.
        rank_width = max([2, *(len("#" + count(e["final_rank"])) for e in layers if e.get("final_rank") is not None)])
        # The final choice's probability: 7 cells, more where a block gives it almost none ('8.0e-09%'
        # on a 49,152-token vocabulary), the bar giving up the cells so that each block stays one line.
        p_width = max([7, *(len(percent(e.get("final_prob"))) for e in layers)])
        fixed = block_width + width + 1 + 7 + 2 + rank_width + 1 + 1 + p_width
        bar_width = max(4, min(16, self.room - fixed))
        width = max(4, min(width, self.room - (fixed - width) - bar_width))
        x = block_width + width + 10
        token = final if cell_len(final) <= 16 else fit(final, 16)
        rows = header_lines(
            [
                (Column(0, block_width), after),
                (Column(block_width, width), top),
                (Column(block_width + width + 1, 7, "right"), "p"),
                (Column(x, self.room - x), styled(_("{token}: rank and probability"), token=(token, NEW))),
            ],
            self.room,
            ".picture--header",
        )
        first = lens_first_top(trace)
        for e, block in zip(layers, blocks):
            rank, prob = e.get("final_rank"), e.get("final_prob")
            rows.append(
                Content.assemble(
                    (fit(block, block_width), CURRENT if e["layer"] == first else ".picture--dim"),
                    (fit(token_label(e["tokens"][0]), width), NEW if e["ids"][0] == ev.get("final_id") else ".picture--token"),
                    f" {percent(e['probs'][0]):>7}  ",
                    fit(f"#{count(rank)}" if rank is not None else "", rank_width) + " ",
                    (bar(prob, bar_width), ".picture--bar"),
                    f" {percent(prob):>{p_width}}",
                )
            )
        rows.append(Content(""))
        rows += wrapped(
            Content.styled(_("p: the lens's probability for its top token; bars: the final choice's probability"), ".picture--dim"),
            self.room,
        )
        return lines(rows)


NEXT_TOKEN_CHIPS = 40  # the text's last tokens shown before the next one


class NextTokenView(Picture):
    """The prompt's tokens with the chosen one appended, and the runners-up. `chosen` (set before
    `draw`): what the generation step whose pass this is chose, which sampling may have taken from
    below the top."""

    chosen: StepChoice | None = None

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        token_id, token, prob = final_choice(trace)
        chosen = self.chosen if self.chosen is not None and self.chosen.sampling is not None else None
        if chosen is not None:
            token_id, token, prob = chosen.id, token_label(chosen.text), chosen.prob
        text = trace.context + trace.tokens
        chips = [(token_label(tok["text"]), CHIP_A if i % 2 == 0 else CHIP_B) for i, tok in enumerate(text[-NEXT_TOKEN_CHIPS:])]
        if len(text) > NEXT_TOKEN_CHIPS:  # the text's start left out, and said so
            left = len(text) - NEXT_TOKEN_CHIPS
            chips.insert(0, (ngettext("… {n} token before", "… {n} tokens before", left).format(n=count(left)), ".picture--dim"))
        chips.append((f"{token}", NEW))
        rows = [*chip_lines(chips, self.room), Content("")]
        rows.append(
            Content.assemble(
                (_("sampled token") if chosen is not None else _("next token"), ".picture--header"),
                " ",
                (token, NEW),
                f"   id {token_id}" + (f"   p = {percent(prob)}" if prob is not None else ""),
            )
        )
        if chosen is not None:
            rows += wrapped(Content.styled(decoding_label(chosen.sampling, short=True), ".picture--dim"), self.room)
        last = (hook_event(trace, "unembed.hook_out").get("positions") or [{}])[-1]
        if last.get("ids"):
            rows.append(Content(""))
            # Sampled: the pass's own most probable tokens, the chosen one marked where it is one.
            ranked = list(zip(last["ids"], last["tokens"], last["probs"]))
            shown = ranked[:4] if chosen is not None else ranked[1:4]
            rows.append(Content.styled(_("most probable in this pass") if chosen is not None else _("runners-up"), ".picture--dim"))
            for tid, tok, p in shown:
                mark = " ◀" if chosen is not None and tid == chosen.id else ""
                rows.append(Content.assemble("  ", (fit(token_label(tok), 16), ".picture--token"), f" {percent(p):>7}{mark}"))
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
            # The most it may hold (the context), and what its buffers have room for now (they grow
            # in chunks: the side panel's "reserved").
            allocated = allocated_positions(kv)
            room = (_("the next token adds {bytes}; the cache holds at most {positions}, {allocated} allocated now")
                    if 0 < allocated < kv["capacity"] else _("the next token adds {bytes}; the cache holds at most {positions}")).format(
                bytes=ngettext("{n} byte", "{n} bytes", per_token).format(n=count(per_token)),
                positions=ngettext("{n} position", "{n} positions", kv["capacity"]).format(n=count(kv["capacity"])),
                allocated=count(allocated),
            )
            after = _("KV cache after this decode step") if trace.past else _("KV cache after this prefill")
            rows += [Content(""), Content.styled(after, ".picture--header")]
            rows += wrapped(Content("  " + size), self.room, indent=2) + wrapped(Content("  " + room), self.room, indent=2)
        rows.append(Content(""))
        said = _('prompt: "{prompt}"')
        limit = max(PROMPT_MIN, min(60, self.room - cell_len(said.format(prompt=""))))
        rows += wrapped(Content.styled(said.format(prompt=clip(trace.prompt, limit)), ".picture--dim"), self.room)
        return lines(rows)
