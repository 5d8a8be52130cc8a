"""What the app says at each stage: title, explanation, formula and shape flow.

Every function here reads one Trace (this run's shapes, config, numbers) and one Stage, and
returns plain text in the current language, so the words can be tested without a terminal. The
sentences are templates (gpt2viz/i18n/<lang>/stages.py); this module decides which of them apply
and formats every number once, the same in every language. Numbers always come from the trace or
the model's config, never from elsewhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..i18n import _, ngettext, plural, say, sentences
from ..text_safety import token_label
from ..trace import Trace
from ..trace.events import LAYER_NORM_STATS
from ..trace.notices import notice_text
from .block_narration import activity_paragraphs, cache_paragraph
from .generation import decoding_label
from .facts import (
    RunFacts,
    StepChoice,
    argmax,
    attention_event,
    cuts_reach,
    final_choice,
    hook_event,
    last_position,
    last_row,
    layer_norm_event,
    layer_norm_name,
    lens_event,
    lens_earliest_top,
    lens_first_top,
    shape_of,
    token_text,
    value_at,
)
from .formatting import clip, count, millions, nbytes, near_zero, num, parts_off, percent, quote, shape
from .llama_narration import WRITERS as LLAMA_WRITERS
from .model_files_narration import model_files_words
from .stages import BEFORE_BLOCKS, Stage

ARROW = " → "


@dataclass(frozen=True)
class Narration:
    """The words of one stage."""

    title: str
    text: str  # the explanation, paragraphs separated by blank lines
    formula: str  # the formula, one or more lines
    flow: tuple[str, ...]  # the shape flow, one step per line, with this run's shapes


def _root(n: int) -> str:
    r = math.sqrt(n)
    return str(int(r)) if r == int(r) else num(r, 4)


# -- the stages ----------------------------------------------------------------------------


def narrate(
    trace: Trace, stage: Stage, head: int = 0, *, generate_key: str, chosen: StepChoice | None = None, run_sampling: str = "",
    replay: bool = False,
) -> Narration:
    """The title, explanation, formula and shape flow of `stage` in this run. `generate_key` is
    the key that opens the generation view, as bound now, which the last stage names. `chosen`:
    what the generation step whose pass this is chose (a sampled step may differ from the argmax).
    `run_sampling`: how this run's generation view samples, in short ('T 0.8 · seed 1'; '' when it
    takes the argmax), which the prompt's own pass names at its last stage. `replay`: the trace was
    read from a file, and the Model files stage says that its run loaded them, not this one."""
    facts = RunFacts.of(trace)
    if stage.kind == "next_token":
        text, formula, flow = _next_token(trace, stage, facts, head, generate_key, chosen, run_sampling)
    elif stage.kind == "model_files" and not facts.llama:
        text, formula, flow = model_files_words(trace, stage, facts, head, generate_key, replay=replay)
    else:
        writer = LLAMA_WRITERS.get(stage.kind) if facts.llama else None
        text, formula, flow = (writer or _WRITERS[stage.kind])(trace, stage, facts, head, generate_key)
    edited = edited_sentence(trace, stage)
    if edited:
        text = f"{edited}\n\n{text}"
    title = stage.title
    if stage.kind in ("scores", "pattern"):
        title = _("{title} · head {head}").format(title=title, head=head)
    return Narration(title, text, formula, tuple(flow))


def edited_sentence(trace: Trace, stage: Stage) -> str:
    """For a stage of a block with parts switched off (what-if), what is off there: its numbers
    are the edited pass's, and may disagree with the model's own ('' elsewhere)."""
    from ..interventions import AblationError

    if not trace.interventions or stage.kind in BEFORE_BLOCKS or stage.kind in ("logit_lens", "next_token"):
        return ""  # before the first block nothing is edited yet; the prediction's stages say it in their box
    try:
        ablations = trace.ablations
    except AblationError:
        return ""
    here = [a for a in ablations if a.layer == stage.layer]
    if not here:
        # After an edit: every number here is the edited pass's too (only the edit's block said so).
        before = [a for a in ablations if stage.layer is None or a.layer < stage.layer]
        return say("stage.edited_later", parts=parts_off(a.spec for a in before)) if before else ""
    said = say("stage.edited", parts=parts_off(a.spec for a in here))
    # Switching the MLP (or the block) off replaces what it writes, not what its neurons compute:
    # on its own stage they still fire (a learner's walk read that as the edit not working).
    if stage.kind == "mlp" and any(a.kind in ("mlp", "block") for a in here):
        said = sentences(said, say("stage.edited_mlp"))
    # The same for heads: a switched-off head's pattern is still drawn (and narrated) as computed;
    # a block switched off replaces what its attention writes, not the heads' z.
    if stage.is_attention and any(a.kind in ("head", "heads") for a in here):
        said = sentences(said, say("stage.edited_heads"))
    elif stage.is_attention and any(a.kind == "block" for a in here):
        said = sentences(said, say("stage.edited_block_attention"))
    return said


def _tokenize(trace: Trace, stage: Stage, f: RunFacts, head: int, generate_key: str):
    if f.past:
        return _decode_input(trace, f)
    prompt = trace.prompt
    n_bytes = len(prompt.encode("utf-8"))
    spaced = [t["text"] for t in trace.tokens if t["text"].startswith("␣")]
    kept_bytes = sum(t["bytes"] for t in trace.tokens)
    the_bytes = ngettext("{n} byte", "{n} bytes", n_bytes).format(n=count(n_bytes))
    if not prompt:
        cut = say("stage.tokenize.empty")
    elif kept_bytes < n_bytes and any(isinstance(n, str) or n["code"] == "prompt_cut" for n in trace.notices):
        # Cut to the context only where the run said so (an old trace's notices are sentences): a
        # prompt edited in the file after recording is not the text of its tokens, and was once
        # said to have been cut.
        kept = ngettext("{n} byte", "{n} bytes", kept_bytes).format(n=count(kept_bytes))
        cut = say("stage.tokenize.cut_kept", bytes=the_bytes, kept=count(f.T), kept_bytes=kept)
    else:
        tokens = ngettext("{n} token", "{n} tokens", f.T).format(n=count(f.T))
        cut = say("stage.tokenize.cut", bytes=the_bytes, tokens=tokens)
    paragraphs = [sentences(say("llama.tokenize.lead" if f.llama else "stage.tokenize.lead"), cut, say("stage.tokenize.vocab", vocab=count(f.vocab)))]
    # The example pair needs a token with something after its space: '␣the' and 'the', never
    # '␣' and '' (a token that is a space alone has no bare twin to name).
    example = next((text for text in spaced if len(text) > 1), None)
    if example is not None:
        paragraphs.append(
            say(
                plural("stage.tokenize.spaces", len(spaced)),
                n=count(len(spaced)),
                spaced=quote(example),
                bare=quote(example[1:]),
            )
        )
    paragraphs += [say("stage.note", notice=notice_text(notice)) for notice in trace.notices]
    characters = ngettext("{n} character", "{n} characters", len(prompt)).format(n=count(len(prompt)))
    flow = [say("stage.tokenize.flow", prompt=clip(prompt, 40), characters=characters, bytes=the_bytes, shape=shape([1, f.T]))]
    return "\n\n".join(paragraphs), say("stage.tokenize.formula"), flow


def _decode_input(trace: Trace, f: RunFacts):
    """What a decode step reads: one new id; the earlier positions wait in the KV cache."""
    new = trace.tokens[-1]
    # The count bends the whole paragraph (is/are, its/their): one template per form.
    text = say(
        plural("stage.tokenize.decode", f.past),
        token=quote(new["text"]),
        id=new["id"],
        position=new["position"],
        n=count(f.past),
    )
    flow = [say("stage.tokenize.decode_flow", past=count(f.past), shape=shape([1, f.T]), position=new["position"])]
    return text, say("stage.tokenize.decode_formula"), flow


def _embed(trace: Trace, stage: Stage, f: RunFacts, head: int, generate_key: str):
    p = f.params
    tok, pos = hook_event(trace, "hook_embed"), hook_event(trace, "hook_pos_embed")
    x_shape = shape_of(trace, "hook_pos_embed", None, [1, f.T, f.n_embd])
    size = f.T * f.n_embd
    last = f.T - 1
    share = 100 * p.wte / f.n_params if f.n_params else 0
    paragraphs = [
        say(
            "stage.embed.lookup", vocab=count(f.vocab), n_embd=count(f.n_embd), n_ctx=count(f.n_ctx), T=count(f.T),
            size=count(size), size_bytes=count(size * f.value_bytes), dtype=f.compute_dtype,
        ),
        say(
            "stage.embed.params", wte=count(p.wte), wte_millions=millions(p.wte), n_params=count(f.n_params),
            share=f"{share:.1f}%", wpe=count(p.wpe),
        ),
    ]
    if f.past:
        paragraphs.append(say(plural("stage.embed.decode", f.past), past=f.past, n=count(f.past)))
    a, b, c = value_at(tok.get("norms"), last), value_at(pos.get("norms"), last), value_at(pos.get("sum_norms"), last)
    if a is not None and b is not None and c is not None:
        lengths = say("stage.embed.lengths", **last_position(trace, f), token_length=num(a), position_length=num(b), sum_length=num(c))
        paragraphs[-1] = sentences(paragraphs[-1], lengths)
    formula = "x[p] = wte[id[p]] + wpe[p]"
    flow = [
        say("stage.embed.flow_tokens", ids=shape([1, f.T]), shape=shape(shape_of(trace, "hook_embed", None, x_shape))),
        say("stage.embed.flow_positions", first=f.past, last=f.past + last, shape=shape(x_shape)),
        say("stage.embed.flow_sum", shape=shape(x_shape)),
    ]
    return "\n\n".join(paragraphs), formula, flow


def _layer_norm(trace: Trace, stage: Stage, f: RunFacts, head: int, generate_key: str):
    name = layer_norm_name(stage)
    ev = layer_norm_event(trace, stage)
    x_shape = list(ev.get("shape") or [1, f.T, f.n_embd])
    text = say(
        f"stage.{stage.kind}.text", n_layer=count(f.n_layer), n_embd=count(f.n_embd),
        n_embd_less=count(f.n_embd - 1), params=count(2 * f.n_embd), eps=f"{f.eps:g}",
    )
    stats = [value_at(ev.get(k), f.T - 1) for k in LAYER_NORM_STATS]
    if all(v is not None for v in stats):
        m, s, nm, ns, om, os_ = stats
        text += "\n\n" + say(
            "stage.layer_norm.stats", **last_position(trace, f), mean=near_zero(m), std=num(s),
            normalized_mean=near_zero(nm), normalized_std=num(ns), out_mean=near_zero(om), out_std=num(os_),
        )
        if abs(1 - ns) >= 5e-4:  # shown as 0.999 or less: ε under a small variance (a learner expects 1)
            text += " " + say("stage.layer_norm.eps", normalized_std=num(ns), eps=f"{f.eps:g}", var=num(s * s))
    formula = f"{name}(x) = (x − mean(x)) / √(var(x) + {f.eps:g}) · γ + β"
    flow = [f"x {shape(x_shape)}{ARROW}{name}{ARROW}{shape(x_shape)}"]
    return text, formula, flow


def _qkv(trace: Trace, stage: Stage, f: RunFacts, head: int, generate_key: str):
    p = f.params
    i = stage.layer
    C, H, D = f.n_embd, f.n_head, f.head_dim
    head_shape = shape_of(trace, "attn.hook_q", i, [1, H, f.T, D])
    heads = ngettext("{n} head", "{n} heads", H).format(n=count(H))
    positions = ngettext("{n} position", "{n} positions", f.T).format(n=count(f.T))
    cache = cache_paragraph(trace, f, i)
    paragraphs = [
        say("stage.qkv.project", C=count(C), C3=count(3 * C), params=count(p.c_attn)),
        say("stage.qkv.heads", H=count(H), D=count(D), C=count(C)),
        cache,
    ]
    numbers = ngettext("{n} number", "{n} numbers", D).format(n=count(D))
    formula = "\n".join(
        [
            "q, k, v = split(ln_1(x) @ W_attn + b_attn)",
            say("stage.qkv.formula_heads"),
            say("stage.qkv.formula_sizes", positions=positions, heads=heads, numbers=numbers),
        ]
    )
    flow = [
        f"ln_1(x) {shape([1, f.T, C])}{ARROW}c_attn{ARROW}{shape([1, f.T, 3 * C])}",
        say("stage.qkv.flow_split", shape=shape([1, f.T, C])),
        say("stage.qkv.flow_heads", shape=shape(head_shape)),
    ]
    return "\n\n".join(paragraphs), formula, flow


def _scores(trace: Trace, stage: Stage, f: RunFacts, head: int, generate_key: str):
    i, D, T = stage.layer, f.head_dim, f.T
    ev = attention_event(trace, i, "scores")
    L = f.L
    s_shape = list(ev.get("shape") or [1, f.n_head, T, L])
    masked = T * (T - 1) // 2  # query i sees keys 0 .. past + i: the future within the new positions
    if f.past:
        mask = say(
            "stage.scores.decode_mask",
            queries=ngettext("{n} query", "{n} queries", T).format(n=count(T)),
            keys=ngettext("{n} key", "{n} keys", L).format(n=count(L)),
            past=count(f.past), new=count(T), diagonal=f.past, masked=count(masked), cells=count(T * L),
            cached=ngettext("{n} cached position", "{n} cached positions", f.past).format(n=count(f.past)),
        )
    elif T * L == 1:  # a one-token prompt: one cell, on the diagonal
        mask = say("stage.scores.mask_single")
    else:
        mask = say(plural("stage.scores.mask", masked), masked=count(masked), cells=count(T * L))
    row = last_row(trace, i, head, "scores")
    j = argmax(row)
    if j is not None:
        top = say(
            "stage.scores.top", token=quote(token_text(trace, L - 1)), position=j, key=quote(token_text(trace, j)),
            score=num(row[j]),
        )
        mask = sentences(mask, top)
    dot = say("stage.scores.dot", head=head, D=count(D), root=_root(D))
    group = f.n_head // f.n_kv_head
    if group > 1:  # grouped-query attention: this head's keys are its group's
        kv = head // group
        dot = sentences(dot, say("llama.scores.group", head=head, kv=kv, first=kv * group, last=kv * group + group - 1))
    paragraphs = [dot, mask, *_reduced_note(ev, T)]
    key = f"k[h ÷ {group}, j]" if group > 1 else "k[h, j]"
    formula = f"scores[h, i, j] = q[h, i] · {key} / √{D}\n" + say("stage.scores.formula_mask")
    flow = [
        f"q {shape([1, f.n_head, T, D])} @ kᵀ {shape([1, f.n_kv_head, D, L])}{ARROW}scores {shape(s_shape)}",
        say("stage.scores.flow_map", head=head, shape=shape(s_shape[2:])),
    ]
    return "\n\n".join(paragraphs), formula, flow


def _reduced_note(event: dict, T: int) -> list[str]:
    """The paragraph saying that a long prompt's maps are averaged (none for a whole map)."""
    if not event.get("reduced"):
        return []
    rows, cols = event.get("downsampled", [64, 64])
    return [say("stage.reduced", positions=count(T), rows=count(rows), cols=count(cols))]


EVEN_SPREAD = 1.5  # a last row whose weights are all within this factor of 1/positions is "spread evenly"


def _pattern(trace: Trace, stage: Stage, f: RunFacts, head: int, generate_key: str):
    i, T = stage.layer, f.T
    ev = attention_event(trace, i, "pattern")
    p_shape = list(ev.get("shape") or [1, f.n_head, T, T])
    z_shape = shape_of(trace, "attn.hook_z", i, [1, f.n_head, T, f.head_dim])
    paragraphs = [say("stage.pattern.softmax")]
    row = last_row(trace, i, head, "pattern")
    j = argmax(row)
    if j is not None:
        weights = [w for w in row if w is not None]
        seen = len(weights)
        # A row within EVEN_SPREAD of uniform, its largest and its smallest weight, has no favourite:
        # "puts 20.7% on position 1" beside 0.20 / 0.21 / 0.20 / 0.20 / 0.19 read as a preference (a
        # learner walk); 0.5 / 0.5 / 0 is not even (a review).
        even = seen > 1 and max(weights) <= EVEN_SPREAD / seen and min(weights) >= 1 / (EVEN_SPREAD * seen)
        paragraphs.append(
            say(
                "stage.pattern.last_even" if even else "stage.pattern.last", token=quote(token_text(trace, f.L - 1)),
                head=head, share=percent(row[j]), position=j, key=quote(token_text(trace, j)), positions=count(seen),
            )
        )
    paragraphs += _reduced_note(ev, T)
    group = f.n_head // f.n_kv_head
    value = f"v[h ÷ {group}, j]" if group > 1 else "v[h, j]"
    formula = f"pattern[h, i, :] = softmax(scores[h, i, :])\nz[h, i] = Σ_j pattern[h, i, j] · {value}"
    flow = [
        f"softmax(scores){ARROW}pattern {shape(p_shape)}",
        f"pattern @ v {shape([1, f.n_kv_head, f.L, f.head_dim])}{ARROW}z {shape(z_shape)}",
    ]
    return "\n\n".join(paragraphs), formula, flow


def _heads(trace: Trace, stage: Stage, f: RunFacts, head: int, generate_key: str):
    i, H, T = stage.layer, f.n_head, f.T
    last = quote(token_text(trace, f.L - 1))
    if f.L == 1:
        focus_text = say("stage.heads.focus_single", token=last)
    else:
        # Where each head's last row gives more than half of its weight (at most one position can).
        halves = [argmax(row) if row and max(row) > 0.5 else None for row in (last_row(trace, i, h) for h in range(H))]
        on_self = sum(1 for j in halves if j == f.L - 1)
        on_first = sum(1 for j in halves if j == 0)
        spread = halves.count(None)
        facts = {
            "token": last, "H": count(H), "on_self": count(on_self), "first": quote(token_text(trace, 0)),
            "on_first": count(on_first), "elsewhere": count(H - on_self - on_first - spread),
        }
        if spread == H:
            focus_text = say("stage.heads.focus_none", token=last, H=count(H), L=count(f.L), uniform=percent(1 / f.L))
        elif spread:
            focus_text = say("stage.heads.focus_spread", **facts, spread=count(spread), L=count(f.L), uniform=percent(1 / f.L))
        else:
            focus_text = say("stage.heads.focus", **facts)
        if f.L > 2 and 2 * on_first >= H:  # most heads park their weight on the first token
            focus_text = sentences(focus_text, say("stage.heads.sink", first=quote(token_text(trace, 0))))
    text = say("stage.heads.intro", H=count(H), layer=i)
    group = H // f.n_kv_head
    if group > 1:  # grouped-query attention: the maps of one group differ only by their queries
        text = sentences(text, say("llama.heads.groups", group=count(group), last_in_group=group - 1, KVH=count(f.n_kv_head)))
    text += "\n\n" + focus_text
    formula = say("stage.heads.formula", D=f.head_dim, last=H - 1, kv=f"(h ÷ {group})" if group > 1 else "h")
    p_shape = shape_of(trace, "attn.hook_pattern", i, [1, H, T, T])
    maps = ngettext("{n} map", "{n} maps", H).format(n=count(H))
    flow = [say("stage.heads.flow", pattern=shape(p_shape), maps=maps, shape=shape(p_shape[2:]))]
    return text, formula, flow


def _attn_out(trace: Trace, stage: Stage, f: RunFacts, head: int, generate_key: str):
    p = f.params
    i, C, T = stage.layer, f.n_embd, f.T
    z_shape = shape_of(trace, "attn.hook_z", i, [1, f.n_head, T, f.head_dim])
    out_shape = shape_of(trace, "hook_attn_out", i, [1, T, C])
    params = say("stage.attn_out.params", layer=i, attention=count(p.attention), c_attn=count(p.c_attn), proj=count(p.attn_proj))
    last = T - 1
    before = value_at(hook_event(trace, "hook_resid_pre", i).get("norms"), last)
    update = value_at(hook_event(trace, "hook_attn_out", i).get("norms"), last)
    after = value_at(hook_event(trace, "hook_resid_mid", i).get("norms"), last)
    if None not in (before, update, after):
        lengths = say("stage.attn_out.lengths", **last_position(trace, f), update=num(update), before=num(before), after=num(after))
        params = sentences(params, lengths)
    mix = say("stage.attn_out.mix", H=count(f.n_head), D=count(f.head_dim), C=count(C), proj=count(p.attn_proj))
    formula = "x ← x + concat(z) @ W_proj + b_proj"
    flow = [
        say("stage.attn_out.flow_concat", z=shape(z_shape), shape=shape([1, T, C])),
        say("stage.flow.update", update=shape(out_shape)),
        say("stage.attn_out.flow_add", shape=shape(shape_of(trace, "hook_resid_mid", i, out_shape))),
    ]
    return mix + "\n\n" + params, formula, flow


def _mlp(trace: Trace, stage: Stage, f: RunFacts, head: int, generate_key: str):
    p = f.params
    i, C, F, T = stage.layer, f.n_embd, f.d_mlp, f.T
    post = hook_event(trace, "mlp.hook_post", i)
    pre_shape = shape_of(trace, "mlp.hook_pre", i, [1, T, F])
    post_shape = list(post.get("shape") or pre_shape)
    out_shape = shape_of(trace, "hook_mlp_out", i, [1, T, C])
    paragraphs = [
        say("stage.mlp.widen", C=count(C), F=count(F), c_fc=count(p.c_fc), proj=count(p.mlp_proj)),
        say(
            "stage.mlp.params", mlp=count(p.mlp), ratio=f"{p.mlp / p.attention:.1f}", attention=count(p.attention),
            activation=f.activation,
        ),
    ]
    paragraphs += activity_paragraphs(trace, f, post, "stage", i)
    formula = "mlp(x) = gelu(x @ W_fc + b_fc) @ W_proj + b_proj\ngelu(u) = 0.5 · u · (1 + tanh(√(2/π) · (u + 0.044715 · u³)))"
    flow = [
        f"ln_2(x) {shape([1, T, C])}{ARROW}c_fc{ARROW}{shape(pre_shape)}",
        f"GELU{ARROW}{shape(post_shape)}",
        say("stage.flow.update", update=shape(out_shape)),
    ]
    return "\n\n".join(paragraphs), formula, flow


def _mlp_out(trace: Trace, stage: Stage, f: RunFacts, head: int, generate_key: str):
    p = f.params
    i, T = stage.layer, f.T
    post = hook_event(trace, "hook_resid_post", i)
    x_shape = list(post.get("shape") or [1, T, f.n_embd])
    paragraphs = [
        say("stage.mlp_out.done", layer=i, shape=shape(x_shape)),
        say(
            "llama.mlp_out.params" if f.llama else "stage.mlp_out.params", layer=i, block=count(p.block), attention=count(p.attention), mlp=count(p.mlp),
            layer_norms=count(2 * p.layer_norm), n_layer=count(f.n_layer), blocks=count(f.n_layer * p.block),
            n_params=count(f.n_params),
        ),
    ]
    vals = [value_at(post.get(k), T - 1) for k in ("before_norms", "attn_update_norms", "mlp_update_norms", "norms")]
    if None not in vals:
        before, au, mu, after = vals
        paragraphs.append(
            say("stage.mlp_out.lengths", **last_position(trace, f), before=num(before), attention=num(au), mlp=num(mu), after=num(after))
        )
    remaining = f.n_layer - 1 - i
    if remaining:
        blocks = ngettext("{n} more block", "{n} more blocks", remaining).format(n=count(remaining))
        paragraphs[-1] = sentences(paragraphs[-1], say("stage.mlp_out.remaining", blocks=blocks))
    else:
        paragraphs[-1] = sentences(paragraphs[-1], say("stage.mlp_out.last"))
    formula = "x ← x + mlp(norm_2(x))" if f.llama else "x ← x + mlp(ln_2(x))"
    update = shape(shape_of(trace, "hook_mlp_out", i, x_shape))
    flow = [say("stage.mlp_out.flow", x=shape(x_shape), update=update)]
    return "\n\n".join(paragraphs), formula, flow


def _lm_head(trace: Trace, stage: Stage, f: RunFacts, head: int, generate_key: str):
    ev = hook_event(trace, "unembed.hook_out")
    out_shape = list(ev.get("shape") or [1, f.T, f.vocab])
    last = f.T - 1
    positions = ev.get("positions") or []
    prediction = say("stage.lm_head.last", last=last) if last > 0 else say("stage.lm_head.only")
    entropy = positions[-1].get("entropy") if positions else None
    if entropy is not None:
        prediction = sentences(
            prediction,
            say(
                "stage.lm_head.entropy", entropy=num(entropy), vocab=count(f.vocab), vocab_size=f.vocab,
                uniform=num(math.log(f.vocab), 4),
            ),
        )
    p = f.params
    if p.lm_head:  # a LLaMA-family model whose head is not tied to its token table
        head_words = say("llama.lm_head.own", vocab=count(f.vocab), n_embd=count(f.n_embd), params=count(p.lm_head),
                         total=count(f.T * f.vocab))
    else:
        head_words = say("llama.lm_head.tied" if f.llama else "stage.lm_head.tying", vocab=count(f.vocab),
                         total=count(f.T * f.vocab))
    paragraphs = [head_words, prediction]
    paragraphs += _untrained_paragraph(trace, f)
    paragraphs += _quality_paragraph(trace, f)
    norm, table = ("norm", "W_head" if p.lm_head else "embed_tokens") if f.llama else ("ln_f", "wte")
    formula = f"logits = {norm}(x) @ {table}ᵀ\np = softmax(logits[{last}])"
    flow = [
        f"{norm}(x) {shape([1, f.T, f.n_embd])} @ {table}ᵀ {shape([f.n_embd, f.vocab])}{ARROW}logits {shape(out_shape)}",
        say("stage.lm_head.flow_last", shape=shape([1, out_shape[-1]])),
    ]
    return "\n\n".join(paragraphs), formula, flow


# A prediction whose entropy is at least this share of a uniform guess's (ln vocab) at every
# position is an untrained model's: random-weight checkpoints give 0.98-0.999 of it, the bundled
# model (a few minutes of training) 0.28-0.67 and GPT-2 far less.
UNTRAINED_ENTROPY_SHARE = 0.95


def _untrained_paragraph(trace: Trace, f: RunFacts) -> list[str]:
    """A warning that this checkpoint predicts like a random one, when every position's
    prediction is almost uniform (its entropy from the trace)."""
    positions = hook_event(trace, "unembed.hook_out").get("positions") or []
    entropies = [p["entropy"] for p in positions if p.get("entropy") is not None]
    uniform = math.log(f.vocab)
    if not entropies or min(entropies) < UNTRAINED_ENTROPY_SHARE * uniform:
        return []
    return [say("stage.untrained", lowest=num(min(entropies)), uniform=num(uniform, 4))]


def _quality_paragraph(trace: Trace, f: RunFacts) -> list[str]:
    """How far this run's logits are from float32's, when it ran in another format."""
    q = trace.quality
    if not q:
        return []
    n = q["positions"]
    return [
        say(
            "stage.lm_head.quality", dtype=f.dtype, weight_bytes=nbytes(f.weight_bytes),
            positions=ngettext("{n} position", "{n} positions", n).format(n=count(n)),
            agree=count(round(q["top1_agreement"] * n)), n=count(n), dlogit=num(q["max_abs_dlogit"]), kl=num(q["mean_kl"]),
        )
    ]


def _logit_lens(trace: Trace, stage: Stage, f: RunFacts, head: int, generate_key: str):
    ev = lens_event(trace)
    layers = ev.get("layers") or []
    family = "llama" if f.llama else "stage"
    paragraphs = [say(f"{family}.logit_lens.intro")]
    if layers:
        first = lens_first_top(trace)
        facts = {
            "token": quote(ev.get("final_token", "?")),
            "rank": count(layers[0]["final_rank"]),
            "vocab": count(f.vocab),
            "p": percent(layers[0]["final_prob"]),
        }
        earliest = lens_earliest_top(trace)
        # Top from block `first` on; a top place held earlier and lost again (an ablation's run,
        # often) is said too, so that the table's earlier #1 rows do not contradict the sentence.
        again = "_regained" if earliest is not None and first is not None and earliest < first else ""
        if first is not None and first == f.n_layer - 1:  # "from the last block on" is only at the end
            paragraphs.append(say(f"stage.logit_lens.rank_top_last{again}", **facts, first=first, earliest=earliest))
        elif first is not None:
            paragraphs.append(say(f"stage.logit_lens.rank_top{again}", **facts, first=first, earliest=earliest))
        else:
            paragraphs.append(say("stage.logit_lens.rank", **facts))
    table = ("W_head" if f.params.lm_head else "embed_tokens") if f.llama else "wte"
    formula = say(f"{family}.logit_lens.formula", last=f.T - 1, last_layer=f.n_layer - 1, **({"table": table} if f.llama else {}))
    lens_shape = list(ev.get("shape") or [f.n_layer, f.vocab])
    flow = [say(f"{family}.logit_lens.flow", x=shape([f.n_layer, f.n_embd]), shape=shape(lens_shape), **({"table": table} if f.llama else {}))]
    return "\n\n".join(paragraphs), formula, flow


def _next_token(trace: Trace, stage: Stage, f: RunFacts, head: int, generate_key: str, chosen: StepChoice | None = None,
                run_sampling: str = ""):
    top_id, top, top_prob = final_choice(trace)
    kv = hook_event(trace, "kv_cache")
    sampled = chosen is not None and chosen.sampling is not None
    token_id = chosen.id if sampled else top_id
    if sampled:
        token = token_label(chosen.text)
        choice = say(
            "stage.next_token.sampled_top" if chosen.id == top_id else "stage.next_token.sampled",
            sampling=decoding_label(chosen.sampling, short=True), token=quote(token), id=chosen.id, p=percent(chosen.prob), top=quote(top),
            top_p=percent(top_prob), total=count(f.L + 1),
        )
    elif top_prob is not None:
        choice = say("stage.next_token.choice", token=quote(top), id=top_id, p=percent(top_prob), total=count(f.L + 1))
    else:
        choice = say("stage.next_token.choice_no_p", token=quote(top), id=top_id, total=count(f.L + 1))
    cached = ngettext("{n} cached key and value", "{n} cached keys and values", f.L).format(n=count(f.L))
    rerun = say("stage.next_token.rerun", total=count(f.L + 1), cached=cached)
    if kv:
        size = say(
            "stage.next_token.cache_step" if f.past else "stage.next_token.cache_prefill",
            bytes=nbytes(kv["total_bytes"]), per_token=count(kv["bytes_per_position"]),
            layers=ngettext("{n} layer", "{n} layers", f.n_layer).format(n=count(f.n_layer)),
            heads=ngettext("{n} head", "{n} heads", f.n_kv_head).format(n=count(f.n_kv_head)),
            D=count(f.head_dim), value_bytes=count(f.value_bytes),
        )
        rerun = sentences(rerun, size)
    paragraphs = [choice, *_untrained_paragraph(trace, f), rerun]
    reach = cuts_reach(trace) if chosen is None else None  # the prompt pass's distribution
    if reach is not None and 0.9 in reach[0] and 0.5 in reach[0] and 50 in reach[1]:
        paragraphs.append(say("stage.next_token.reach", p90=count(reach[0][0.9]), p50=count(reach[0][0.5]),
                              k50=percent(reach[1][50])))
    if not sampled and chosen is None and run_sampling:
        # The argmax above is this pass's; the run's generation draws from p instead (issue 36's walk).
        paragraphs.append(say("stage.next_token.run_samples", sampling=run_sampling, token=quote(top), key=generate_key))
    elif not sampled:
        paragraphs.append(say("stage.next_token.sample", key=generate_key))
    formula = say("stage.next_token.formula_sampled" if sampled else "stage.next_token.formula", id=token_id)
    flow = [say("stage.next_token.flow", ids=shape([1, f.L]), more=shape([1, f.L + 1]))]
    return "\n\n".join(paragraphs), formula, flow


_WRITERS = {
    "model_files": model_files_words,
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
    # next_token: narrate calls _next_token itself, with what a generation step chose.
}
