"""What the app says at each stage: title, explanation, formula and shape flow.

Every function here reads one Trace (this run's shapes, config, numbers) and one Stage, and
returns plain text, so the words can be tested without a terminal. Numbers always come from the
trace or the model's config, never from elsewhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..trace import Trace
from ..trace.events import LAYER_NORM_STATS
from .facts import (
    RunFacts,
    argmax,
    attention_event,
    final_choice,
    head_focus,
    hook_event,
    layer_norm_event,
    layer_norm_name,
    lens_event,
    lens_first_top,
    last_row,
    shape_of,
    token_text,
    value_at,
)
from .formatting import clip, count, millions, nbytes, num, percent, shape
from .stages import Stage

ARROW = " → "


@dataclass(frozen=True)
class Narration:
    """The words of one stage."""

    title: str
    text: str  # the explanation, paragraphs separated by blank lines
    formula: str  # the formula, one or more lines
    flow: tuple[str, ...]  # the shape flow, one step per line, with this run's shapes


def _q(text: str) -> str:
    """A token text quoted for a sentence."""
    return f"'{text}'"


def _near_zero(x: float) -> str:
    """A value that is zero up to rounding noise, said so."""
    return "0" if abs(x) < 1e-6 else num(x)


def _root(n: int) -> str:
    r = math.sqrt(n)
    return str(int(r)) if r == int(r) else num(r, 4)


# -- the stages ----------------------------------------------------------------------------


def narrate(trace: Trace, stage: Stage, head: int = 0) -> Narration:
    """The title, explanation, formula and shape flow of `stage` in this run."""
    facts = RunFacts.of(trace)
    writer = _WRITERS[stage.kind]
    text, formula, flow = writer(trace, stage, facts, head)
    title = stage.title
    if stage.kind in ("scores", "pattern"):
        title += f" · head {head}"
    return Narration(title, text, formula, tuple(flow))


def _tokenize(trace: Trace, stage: Stage, f: RunFacts, head: int):
    if f.past:
        return _decode_input(trace, f)
    prompt = trace.prompt
    n_bytes = len(prompt.encode("utf-8"))
    spaced = [t["text"] for t in trace.tokens if t["text"].startswith("␣")]
    kept_bytes = sum(t["bytes"] for t in trace.tokens)
    if not prompt:
        cut = "The prompt is empty, so there is nothing to cut: the model starts from one special token."
    elif kept_bytes < n_bytes:
        cut = (
            f"Its byte-level BPE tokenizer cuts the {count(n_bytes)} bytes of the prompt into more tokens than "
            f"fit in the context; the last {count(f.T)} ({count(kept_bytes)} bytes) are kept."
        )
    else:
        tokens = "1 token" if f.T == 1 else f"{count(f.T)} tokens"
        cut = f"Its byte-level BPE tokenizer cuts the {count(n_bytes)} bytes of the prompt into {tokens}."
    text = (
        f"GPT-2 never sees letters. {cut} Each token is an entry of a {count(f.vocab)}-entry vocabulary; "
        "from here on the model works with the ids alone. Common words are one token, rare ones are "
        "split into pieces, and a piece can even be part of a character."
    )
    if spaced:
        text += (
            f"\n\nA space belongs to the token after it: {len(spaced)} of these tokens start with one, "
            f"shown as ␣ (the vocabulary file writes Ġ), so {_q(spaced[0])} and "
            f"{_q(spaced[0][1:])} are different tokens with different ids."
        )
    for notice in trace.notices:
        text += f"\n\nNote: {notice}."
    formula = "prompt → UTF-8 bytes → BPE merges → token ids"
    flow = [f'"{clip(prompt, 40)}" ({count(len(prompt))} characters, {count(n_bytes)} bytes){ARROW}token ids, shape {shape([1, f.T])}']
    return text, formula, flow


def _decode_input(trace: Trace, f: RunFacts):
    """What a decode step reads: one new id; the earlier positions wait in the KV cache."""
    new = trace.tokens[-1]
    text = (
        f"This is the forward pass of a decode step. Only one id goes in: {_q(new['text'])} (id {new['id']}), "
        f"the token chosen at the step before, at position {new['position']}. The {count(f.past)} tokens before "
        "it are not run again: each layer kept their keys and values in the KV cache, and this pass reads "
        "them from there. Every stage below computes one position, not the whole text."
    )
    formula = "ids in = [the newest token]   (the earlier ones: keys and values in the KV cache)"
    flow = [f"{count(f.past)} cached + 1 new{ARROW}ids, shape {shape([1, f.T])}, position {new['position']}"]
    return text, formula, flow


def _embed(trace: Trace, stage: Stage, f: RunFacts, head: int):
    p = f.params
    tok, pos = hook_event(trace, "hook_embed"), hook_event(trace, "hook_pos_embed")
    x_shape = shape_of(trace, "hook_pos_embed", None, [1, f.T, f.n_embd])
    size = f.T * f.n_embd
    last = f.T - 1
    share = 100 * p.wte / f.n_params if f.n_params else 0
    text = (
        f"Each id picks one row of the token embedding table wte [{count(f.vocab)} × {f.n_embd}]: "
        "a lookup, no multiplication. Each position p picks row p of the position table "
        f"wpe [{count(f.n_ctx)} × {f.n_embd}], which is how the model knows word order. "
        f"Their sum is x, the residual stream: {f.T} × {f.n_embd} = {count(size)} numbers, "
        f"{count(size * f.value_bytes)} bytes in {f.compute_dtype}. Every block reads x and adds its result to it."
        f"\n\nwte holds {count(p.wte)} ({millions(p.wte)}) of this model's {count(f.n_params)} "
        f"parameters ({share:.1f}%); wpe holds {count(p.wpe)}."
    )
    if f.past:
        text += (
            f"\n\nThe new token sits at position {f.past}, after the {count(f.past)} cached ones, so it takes "
            f"row {f.past} of wpe: a decode step continues the sequence, it does not start it again at 0."
        )
    a, b, c = value_at(tok.get("norms"), last), value_at(pos.get("norms"), last), value_at(pos.get("sum_norms"), last)
    if a is not None and b is not None and c is not None:
        text += (
            f" At position {f.past + last} ({_q(token_text(trace, f.past + last))}) the token vector has length {num(a)}, "
            f"the position vector {num(b)}, their sum {num(c)}."
        )
    formula = "x[p] = wte[id[p]] + wpe[p]"
    flow = [
        f"ids, shape {shape([1, f.T])}{ARROW}rows of wte{ARROW}{shape(shape_of(trace, 'hook_embed', None, x_shape))}",
        f"positions {f.past}…{f.past + last}{ARROW}rows of wpe{ARROW}{shape(x_shape)}",
        f"sum{ARROW}x {shape(x_shape)}",
    ]
    return text, formula, flow


def _layer_norm(trace: Trace, stage: Stage, f: RunFacts, head: int):
    name = layer_norm_name(stage)
    ev = layer_norm_event(trace, stage)
    x_shape = list(ev.get("shape") or [1, f.T, f.n_embd])
    where = {
        "ln1": "Before attention",
        "ln2": "Before the MLP",
        "ln_final": f"After the last of the {f.n_layer} blocks",
    }[stage.kind]
    reader = {"ln1": "attention", "ln2": "the MLP", "ln_final": "the LM head"}[stage.kind]
    text = (
        f"{where}, each token's vector is normalized on its own: subtract the mean of its "
        f"{f.n_embd} numbers, divide by their standard deviation, then scale and shift every dimension "
        f"with a learned gain γ and bias β ({count(2 * f.n_embd)} parameters). The variance divides by "
        f"{f.n_embd}, not {f.n_embd - 1}, and ε = {f.eps:g} keeps the division safe. "
    )
    if stage.kind == "ln_final":
        text += "The LM head reads this normalized copy."
    else:
        text += f"This is GPT-2's pre-norm design: x itself is not changed; {reader} reads the normalized copy."
    last = f.T - 1
    stats = [value_at(ev.get(k), last) for k in LAYER_NORM_STATS]
    if all(v is not None for v in stats):
        m, s, nm, ns, om, os_ = stats
        text += (
            f"\n\nAt position {f.past + last} ({_q(token_text(trace, f.past + last))}): mean {num(m)} and std {num(s)} going in; "
            f"{_near_zero(nm)} and {num(ns)} after normalizing; mean {num(om)} and std {num(os_)} after γ and β."
        )
    formula = f"{name}(x) = (x − mean(x)) / √(var(x) + {f.eps:g}) · γ + β"
    flow = [f"x {shape(x_shape)}{ARROW}{name}{ARROW}{shape(x_shape)}"]
    return text, formula, flow


def _qkv(trace: Trace, stage: Stage, f: RunFacts, head: int):
    p = f.params
    i = stage.layer
    C, H, D = f.n_embd, f.n_head, f.head_dim
    head_shape = shape_of(trace, "attn.hook_q", i, [1, H, f.T, D])
    kv = hook_event(trace, "kv_cache")
    layer_kv = (kv.get("layers") or [None] * (i + 1))[i] if kv else None
    if layer_kv:
        kv_bytes = layer_kv["k_bytes"] + layer_kv["v_bytes"]
    else:
        kv_bytes = f.kv_bytes(f.T) // f.n_layer  # one layer's share
    text = (
        f"One matrix multiply, c_attn [{C} × {3 * C}] plus a bias ({count(p.c_attn)} parameters), turns each "
        f"normalized token vector into three vectors of {C} numbers: a query (what this position looks for), "
        "a key (what it can be found by) and a value (what it hands over when found). GPT-2 stores the "
        "weight as [input × output], so it is x @ W + b with no transpose."
        f"\n\nEach of q, k and v is cut into {H} heads of {D} numbers ({H} × {D} = {C}). The heads work "
        "side by side, each with its own slice, and never see each other's numbers."
        f"\n\nThe keys and values are what the KV cache keeps for later tokens: for this layer "
        f"2 × {H} heads × {f.T} positions × {D} = {count(kv_bytes // f.value_bytes)} numbers, {nbytes(kv_bytes)}. "
        "Queries are used once and never cached."
    )
    if f.past:
        text += (
            f" In this decode step the new position's k and v, {shape([1, H, f.T, D])}, are appended to the "
            f"{count(f.past)} cached ones: attention reads K and V {shape([1, H, f.L, D])}."
        )
    formula = (
        "q, k, v = split(ln_1(x) @ W_attn + b_attn)\n"
        "q [T, C] → view [T, H, D] → transpose → [H, T, D]\n"
        f"T = {f.T} positions, H = {H} heads, D = {D} numbers per head"
    )
    flow = [
        f"ln_1(x) {shape([1, f.T, C])}{ARROW}c_attn{ARROW}{shape([1, f.T, 3 * C])}",
        f"split{ARROW}q, k, v {shape([1, f.T, C])} each",
        f"heads{ARROW}q, k, v {shape(head_shape)} each",
    ]
    return text, formula, flow


def _scores(trace: Trace, stage: Stage, f: RunFacts, head: int):
    i, D, T = stage.layer, f.head_dim, f.T
    ev = attention_event(trace, i, "scores")
    L = f.L
    s_shape = list(ev.get("shape") or [1, f.n_head, T, L])
    masked = T * (T - 1) // 2  # query i sees keys 0 .. past + i: the future within the new positions
    text = (
        f"Head {head} compares every query with every key: a dot product of two {D}-number vectors, "
        f"divided by √{D} = {_root(D)} so the scores do not grow with the head size and the softmax "
        "that follows does not saturate."
    )
    if f.past:
        text += (
            f"\n\nA decode step has {T} quer{'y' if T == 1 else 'ies'} and {count(L)} keys: {count(f.past)} from the "
            f"cache and {T} new. The causal mask is shifted by the {count(f.past)} cached positions, "
            f"tril(diagonal={f.past}): query {f.past} may see keys 0–{f.past}, which is every key there is, "
            f"so here {count(masked)} of the {count(T * L)} cells are masked."
        )
    else:
        text += (
            "\n\nThe causal mask sets every cell above the diagonal to −∞ (the grey cells): position i may look "
            f"at itself and earlier positions, never at later ones. Here {count(masked)} of the "
            f"{count(T * L)} cells are masked."
        )
    row = last_row(trace, i, head, "scores")
    j = argmax(row)
    if j is not None:
        text += (
            f" The last query ({_q(token_text(trace, f.L - 1))}) scores highest on position {j} "
            f"({_q(token_text(trace, j))}): {num(row[j])}."
        )
    text += _reduced_note(ev, T)
    formula = f"scores[h, i, j] = q[h, i] · k[h, j] / √{D}\nscores[h, i, j] = −∞ where j > i   (the causal mask)"
    flow = [
        f"q {shape([1, f.n_head, T, D])} @ kᵀ {shape([1, f.n_head, D, L])}{ARROW}scores {shape(s_shape)}",
        f"head {head}{ARROW}{shape(s_shape[2:])} map below",
    ]
    return text, formula, flow


def _reduced_note(event: dict, T: int) -> str:
    if not event.get("reduced"):
        return ""
    rows, cols = event.get("downsampled", [64, 64])
    return (
        f"\n\nWith {count(T)} positions the trace keeps each map averaged over a {rows} × {cols} grid of "
        "blocks (the last query's row is kept whole, below the map)."
    )


def _pattern(trace: Trace, stage: Stage, f: RunFacts, head: int):
    i, T = stage.layer, f.T
    ev = attention_event(trace, i, "pattern")
    p_shape = list(ev.get("shape") or [1, f.n_head, T, T])
    z_shape = shape_of(trace, "attn.hook_z", i, [1, f.n_head, T, f.head_dim])
    text = (
        "A softmax along each row turns the scores into weights: all positive, every row summing to 1, the "
        "masked future exactly 0. Row i is a recipe: the output of position i is the weighted sum of the "
        "value vectors of positions 0 … i."
    )
    row = last_row(trace, i, head, "pattern")
    j = argmax(row)
    if j is not None:
        text += (
            f"\n\nThe last row belongs to {_q(token_text(trace, f.L - 1))}, the position that predicts the next token. "
            f"In head {head} it puts {percent(row[j])} of its weight on position {j} ({_q(token_text(trace, j))})."
        )
    text += _reduced_note(ev, T)
    formula = "pattern[h, i, :] = softmax(scores[h, i, :])\nz[h, i] = Σ_j pattern[h, i, j] · v[h, j]"
    flow = [
        f"softmax(scores){ARROW}pattern {shape(p_shape)}",
        f"pattern @ v {shape([1, f.n_head, T, f.head_dim])}{ARROW}z {shape(z_shape)}",
    ]
    return text, formula, flow


def _heads(trace: Trace, stage: Stage, f: RunFacts, head: int):
    i, H, T = stage.layer, f.n_head, f.T
    focus = head_focus(trace, i)
    on_self = sum(1 for j, _ in focus if j == f.L - 1)
    on_first = sum(1 for j, _ in focus if j == 0)
    text = (
        f"The {H} heads of block {i} side by side, each its own attention pattern (brighter: more weight). "
        "With their own query, key and value slices, heads learn to look for different things. Under each "
        "map: the position the last token looks at most."
        f"\n\nIn this layer the last position ({_q(token_text(trace, f.L - 1))}) looks mostly at itself in "
        f"{on_self} of the {H} heads"
    )
    text += f" and mostly at position 0 ({_q(token_text(trace, 0))}) in {on_first}." if f.L > 1 else "."
    formula = f"head_h = softmax(q_h k_hᵀ / √{f.head_dim} + mask) v_h    h = 0 … {H - 1}"
    p_shape = shape_of(trace, "attn.hook_pattern", i, [1, H, T, T])
    flow = [f"pattern {shape(p_shape)}{ARROW}{H} maps of {shape(p_shape[2:])}"]
    return text, formula, flow


def _attn_out(trace: Trace, stage: Stage, f: RunFacts, head: int):
    p = f.params
    i, C, T = stage.layer, f.n_embd, f.T
    z_shape = shape_of(trace, "attn.hook_z", i, [1, f.n_head, T, f.head_dim])
    out_shape = shape_of(trace, "hook_attn_out", i, [1, T, C])
    text = (
        f"The heads' outputs z are put back side by side ({f.n_head} × {f.head_dim} = {C}) and mixed by "
        f"c_proj [{C} × {C}] ({count(p.attn_proj)} parameters). The result is an update that is added to the "
        "residual stream. Attention is the only step of the model where information moves between positions."
        f"\n\nAll of block {i}'s attention holds {count(p.attention)} parameters: c_attn "
        f"{count(p.c_attn)} + c_proj {count(p.attn_proj)}."
    )
    last = T - 1
    before = value_at(hook_event(trace, "hook_resid_pre", i).get("norms"), last)
    update = value_at(hook_event(trace, "hook_attn_out", i).get("norms"), last)
    after = value_at(hook_event(trace, "hook_resid_mid", i).get("norms"), last)
    if None not in (before, update, after):
        text += (
            f" At position {f.past + last} ({_q(token_text(trace, f.past + last))}) the update has length {num(update)} against "
            f"{num(before)} for x; x + update has length {num(after)}."
        )
    formula = "x ← x + concat(z) @ W_proj + b_proj"
    flow = [
        f"z {shape(z_shape)}{ARROW}concat heads{ARROW}{shape([1, T, C])}",
        f"c_proj{ARROW}update {shape(out_shape)}",
        f"x + update{ARROW}x {shape(shape_of(trace, 'hook_resid_mid', i, out_shape))}",
    ]
    return text, formula, flow


def _mlp(trace: Trace, stage: Stage, f: RunFacts, head: int):
    p = f.params
    i, C, F, T = stage.layer, f.n_embd, f.d_mlp, f.T
    post = hook_event(trace, "mlp.hook_post", i)
    pre_shape = shape_of(trace, "mlp.hook_pre", i, [1, T, F])
    post_shape = list(post.get("shape") or pre_shape)
    out_shape = shape_of(trace, "hook_mlp_out", i, [1, T, C])
    text = (
        "The MLP works on each position separately, with the same weights for all: nothing moves between "
        f"positions here. c_fc widens {C} numbers to {count(F)} ({count(p.c_fc)} parameters), GELU bends each of "
        f"them, and c_proj brings them back to {C} ({count(p.mlp_proj)} parameters)."
        f"\n\nThe MLP holds {count(p.mlp)} parameters, {p.mlp / p.attention:.1f}× the {count(p.attention)} "
        f"of this block's attention. GPT-2 uses the tanh form of GELU ({f.activation}); the exact erf form "
        "gives slightly different numbers."
    )
    last = T - 1
    frac = value_at(post.get("frac_active"), last)
    top = post.get("top_neurons") or []
    if frac is not None:
        text += (
            f"\n\nAt position {f.past + last} ({_q(token_text(trace, f.past + last))}), {percent(frac)} of the {count(F)} neurons are "
            "positive after GELU"
        )
        text += f"; the strongest is neuron {top[0]['index']} at {num(top[0]['value'])}." if top else "."
    formula = "mlp(x) = gelu(x @ W_fc + b_fc) @ W_proj + b_proj\ngelu(u) = 0.5 · u · (1 + tanh(√(2/π) · (u + 0.044715 · u³)))"
    flow = [
        f"ln_2(x) {shape([1, T, C])}{ARROW}c_fc{ARROW}{shape(pre_shape)}",
        f"GELU{ARROW}{shape(post_shape)}",
        f"c_proj{ARROW}update {shape(out_shape)}",
    ]
    return text, formula, flow


def _mlp_out(trace: Trace, stage: Stage, f: RunFacts, head: int):
    p = f.params
    i, T = stage.layer, f.T
    post = hook_event(trace, "hook_resid_post", i)
    x_shape = list(post.get("shape") or [1, T, f.n_embd])
    text = (
        f"The MLP's update is added to the residual stream, and block {i} is done: x leaves with the same "
        f"shape it came in with, {shape(x_shape)}."
        f"\n\nBlock {i} holds {count(p.block)} parameters: attention {count(p.attention)}, MLP "
        f"{count(p.mlp)}, two LayerNorms {count(2 * p.layer_norm)}. All {f.n_layer} blocks together: "
        f"{count(f.n_layer * p.block)} of the model's {count(f.n_params)}."
    )
    last = T - 1
    vals = [value_at(post.get(k), last) for k in ("before_norms", "attn_update_norms", "mlp_update_norms", "norms")]
    if None not in vals:
        before, au, mu, after = vals
        text += (
            f"\n\nAt position {f.past + last} ({_q(token_text(trace, f.past + last))}): x had length {num(before)} entering the block; "
            f"attention added an update of length {num(au)}, the MLP one of {num(mu)}; x leaves with length {num(after)}."
        )
    remaining = f.n_layer - 1 - i
    text += f" {remaining} more block{'s' if remaining != 1 else ''} to go." if remaining else " This was the last block."
    formula = "x ← x + mlp(ln_2(x))"
    flow = [f"x {shape(x_shape)} + update {shape(shape_of(trace, 'hook_mlp_out', i, x_shape))}{ARROW}x {shape(x_shape)}"]
    return text, formula, flow


def _lm_head(trace: Trace, stage: Stage, f: RunFacts, head: int):
    ev = hook_event(trace, "unembed.hook_out")
    out_shape = list(ev.get("shape") or [1, f.T, f.vocab])
    last = f.T - 1
    positions = ev.get("positions") or []
    text = (
        "The LM head multiplies each position's vector by wte transposed: the very table that embedded the "
        "tokens (weight tying), so it adds no parameters. The result is one score, a logit, for every entry "
        f"of the vocabulary: {count(f.vocab)} per position, {count(f.T * f.vocab)} in all."
        "\n\nOnly the last position predicts what comes next. "
        + (
            f"Position p's logits are a guess at token p+1, which for every p before {last} is already in the prompt. "
            if last > 0
            else "Here there is only one position, so its logits are the prediction. "
        )
        + "Softmax turns the last row into probabilities (subtracting the largest logit first, so nothing overflows)."
    )
    entropy = positions[-1].get("entropy") if positions else None
    if entropy is not None:
        text += (
            f" Their entropy is {num(entropy)} nats; a uniform guess over {count(f.vocab)} tokens "
            f"would have ln {f.vocab} = {num(math.log(f.vocab), 4)}."
        )
    text += _quality_paragraph(trace, f)
    formula = f"logits = ln_f(x) @ wteᵀ\np = softmax(logits[{last}])"
    flow = [
        f"ln_f(x) {shape([1, f.T, f.n_embd])} @ wteᵀ {shape([f.n_embd, f.vocab])}{ARROW}logits {shape(out_shape)}",
        f"last position{ARROW}{shape([1, out_shape[-1]])}{ARROW}softmax",
    ]
    return text, formula, flow


def _quality_paragraph(trace: Trace, f: RunFacts) -> str:
    """How far this run's logits are from float32's, when it ran in another format."""
    q = trace.quality
    if not q:
        return ""
    n = q["positions"]
    agree = round(q["top1_agreement"] * n)
    return (
        f"\n\nThis run stores its weights in {f.dtype}: {nbytes(f.weight_bytes)}. Against float32 on the same "
        f"checkpoint, over this prompt's {count(n)} position{'s' if n != 1 else ''}: the most likely token is the "
        f"same at {count(agree)} of {count(n)}, the largest logit differs by {num(q['max_abs_dlogit'])}, and the "
        f"mean KL divergence of the distributions is {num(q['mean_kl'])} nats."
    )


def _logit_lens(trace: Trace, stage: Stage, f: RunFacts, head: int):
    ev = lens_event(trace)
    layers = ev.get("layers") or []
    token = ev.get("final_token", "?")
    text = (
        "What would the model answer if it stopped early? The logit lens takes the last position's residual "
        "stream after each block and sends it through ln_f and the LM head, as if that block were the last. "
        "It shows the prediction forming layer by layer."
    )
    if layers:
        first = lens_first_top(trace)
        text += (
            f"\n\nThe final choice {_q(token)} ranks {count(layers[0]['final_rank'])} of {count(f.vocab)} after "
            f"block 0 (p = {percent(layers[0]['final_prob'])})"
        )
        if first is not None:
            text += f" and is the top token from block {first} on."
        else:
            text += "."
    formula = f"lens_l = softmax(ln_f(x after block l)[{f.T - 1}] @ wteᵀ)    l = 0 … {f.n_layer - 1}"
    lens_shape = list(ev.get("shape") or [f.n_layer, f.vocab])
    flow = [
        f"x after each block, last position {shape([f.n_layer, f.n_embd])}{ARROW}ln_f, @ wteᵀ{ARROW}{shape(lens_shape)}"
    ]
    return text, formula, flow


def _next_token(trace: Trace, stage: Stage, f: RunFacts, head: int):
    token_id, token, prob = final_choice(trace)
    kv = hook_event(trace, "kv_cache")
    text = (
        f"Greedy decoding takes the most probable token: {_q(token)} (id {token_id}"
        + (f", p = {percent(prob)}" if prob is not None else "")
        + f"). Appended to the text it makes {f.L + 1} tokens."
        f"\n\nTo write one more token the model runs again. Without a cache it would recompute all "
        f"{f.L + 1} positions; with the KV cache only the new token goes through the blocks, and each layer "
        f"reads the {f.L} cached keys and values instead of recomputing them."
    )
    if kv:
        text += (
            f" The cache holds {nbytes(kv['total_bytes'])} after this {'step' if f.past else 'prefill'}, "
            f"{count(kv['bytes_per_position'])} bytes per token "
            f"(2 × {f.n_layer} layers × {f.n_head} heads × {f.head_dim} × {f.value_bytes} bytes)."
        )
    text += "\n\nSampling with a temperature instead of the argmax gives other continuations. Press g for the generation view."
    formula = f"next = argmax(p) = {token_id}"
    flow = [f"ids, shape {shape([1, f.L])} + next{ARROW}ids, shape {shape([1, f.L + 1])}"]
    return text, formula, flow


_WRITERS = {
    "tokenize": _tokenize,
    "embed": _embed,
    "ln1": _layer_norm,
    "qkv": _qkv,
    "scores": _scores,
    "pattern": _pattern,
    "heads": _heads,
    "attn_out": _attn_out,
    "ln2": _layer_norm,
    "mlp": _mlp,
    "mlp_out": _mlp_out,
    "ln_final": _layer_norm,
    "lm_head": _lm_head,
    "logit_lens": _logit_lens,
    "next_token": _next_token,
}
