"""What the app says at the stages where a LLaMA-family model (SmolLM2) differs from GPT-2: its file
(GGUF blocks), the token table without a position table, RMSNorms, the projections with rotary
positions and grouped key/value heads, SwiGLU. The other stages say the same for both families, or
choose their family's sentence where one word differs (narration.py: the LM head, the logit lens).

As narration.py: each writer reads one Trace and one Stage and returns (text, formula, flow) in the
current language, every number from the trace or its config (templates: gpt2viz/i18n/<lang>/llama.py).
"""

from __future__ import annotations

from ..i18n import _, ngettext, plural, say, sentences
from ..trace import Trace
from ..trace.notices import notice_text
from .block_narration import activity_paragraphs, cache_paragraph
from .facts import (
    RunFacts,
    hook_event,
    last_position,
    layer_norm_event,
    shape_of,
    value_at,
)
from .formatting import count, millions, nbytes, num, shape
from .stages import Stage

ARROW = " → "
# The short names of LLaMA's norms in formulas and flows (Hugging Face's modules: input_layernorm,
# post_attention_layernorm, norm).
NORM_NAMES = {"ln1": "norm_1", "ln2": "norm_2", "ln_final": "norm"}


def _model_files(trace: Trace, stage: Stage, f: RunFacts, head: int, generate_key: str):
    c = f.config
    formats = str(trace.model.get("stored_dtype") or "?")
    source = (trace.model.get("source") or {}).get("kind")
    file_bytes = trace.model.get("file_bytes")
    facts = {"file_bytes": nbytes(file_bytes) if file_bytes is not None else "?", "formats": _(", ").join(formats.split("+")),
             "weight_bytes": nbytes(f.weight_bytes), "vocab": count(f.vocab)}
    gguf = source in ("gguf", "package")
    paragraphs = [say("llama.model_files.gguf" if gguf else "llama.model_files.safetensors", **facts)]
    kinds = formats.split("+")
    if "Q4_1" in kinds:
        paragraphs.append(say("llama.model_files.q4_1"))
    if "Q8_0" in kinds:
        paragraphs[-1] = sentences(paragraphs[-1], say("llama.model_files.q8_0"))
    paragraphs.append(say(
        "llama.model_files.config", n_layer=count(f.n_layer), n_head=count(f.n_head), n_kv_head=count(f.n_kv_head),
        D=count(f.head_dim), n_embd=count(f.n_embd), d_mlp=count(f.d_mlp), n_ctx=count(f.n_ctx), vocab=count(f.vocab),
        theta=f"{c.rope_theta:g}", eps=f"{f.eps:g}",
    ))
    paragraphs += [say("stage.note", notice=notice_text(notice)) for notice in trace.notices]
    p = f.params
    own_head = say("llama.model_files.own_head", lm_head=count(p.lm_head)) if p.lm_head else ""
    formula = say("llama.model_files.formula", wte=count(p.wte), n_layer=count(f.n_layer), block=count(p.block),
                  ln_f=count(p.layer_norm), head=own_head, total=count(p.total))
    tensors = 2 + 9 * f.n_layer + (1 if p.lm_head else 0)  # the table, the final norm; nine per block
    flow = [say("llama.model_files.flow", file=_(", ").join(formats.split("+")),
                tensors=ngettext("{n} tensor", "{n} tensors", tensors).format(n=count(tensors)),
                weight_bytes=nbytes(f.weight_bytes))]
    return "\n\n".join(paragraphs), formula, flow


def _embed(trace: Trace, stage: Stage, f: RunFacts, head: int, generate_key: str):
    p = f.params
    tok = hook_event(trace, "hook_embed")
    x_shape = shape_of(trace, "hook_embed", None, [1, f.T, f.n_embd])
    size = f.T * f.n_embd
    share = 100 * p.wte / f.n_params if f.n_params else 0
    paragraphs = [
        say("llama.embed.lookup", vocab=count(f.vocab), n_embd=count(f.n_embd), T=count(f.T), size=count(size),
            size_bytes=count(size * f.value_bytes), dtype=f.compute_dtype),
        say("llama.embed.params", wte=count(p.wte), wte_millions=millions(p.wte), n_params=count(f.n_params),
            share=f"{share:.1f}%"),
    ]
    if f.past:
        paragraphs.append(say(plural("llama.embed.decode", f.past), past=f.past, n=count(f.past)))
    length = value_at(tok.get("norms"), f.T - 1)
    if length is not None:
        paragraphs[1] = sentences(paragraphs[1], say("llama.embed.length", **last_position(trace, f), length=num(length)))
    flow = [say("llama.embed.flow_tokens", ids=shape([1, f.T]), shape=shape(x_shape))]
    return "\n\n".join(paragraphs), "x[p] = embed_tokens[id[p]]", flow


def _norm(trace: Trace, stage: Stage, f: RunFacts, head: int, generate_key: str):
    name = NORM_NAMES[stage.kind]
    ev = layer_norm_event(trace, stage)
    x_shape = list(ev.get("shape") or [1, f.T, f.n_embd])
    text = say(f"llama.{stage.kind}.text", n_layer=count(f.n_layer), n_embd=count(f.n_embd), params=count(f.n_embd),
               eps=f"{f.eps:g}")
    keys = ("input_mean", "input_rms", "normalized_mean", "normalized_rms", "output_mean", "output_rms")
    stats = [value_at(ev.get(k), f.T - 1) for k in keys]
    if all(v is not None for v in stats):
        m, r, nm, nr, om, orms = stats
        text += "\n\n" + say("llama.norm.stats", **last_position(trace, f), mean=num(m), rms=num(r), normalized_mean=num(nm),
                             normalized_rms=num(nr), out_mean=num(om), out_rms=num(orms))
    formula = f"{name}(x) = x / √(mean(x²) + {f.eps:g}) · w"
    flow = [f"x {shape(x_shape)}{ARROW}{name}{ARROW}{shape(x_shape)}"]
    return text, formula, flow


def _qkv(trace: Trace, stage: Stage, f: RunFacts, head: int, generate_key: str):
    p, c = f.params, f.config
    i, C, H, KVH, D = stage.layer, f.n_embd, f.n_head, f.n_kv_head, f.head_dim
    group = H // KVH
    q_shape = shape_of(trace, "attn.hook_q", i, [1, H, f.T, D])
    kv_shape = shape_of(trace, "attn.hook_k", i, [1, KVH, f.T, D])
    paragraphs = [
        say("llama.qkv.project", C=count(C), KV=count(KVH * D), params=count(p.c_attn)),
        say("llama.qkv.groups", H=count(H), D=count(D), KVH=count(KVH), group=count(group)) if group > 1
        else say("llama.qkv.groups_none", H=count(H), D=count(D)),
    ]
    rotary = say("llama.qkv.rotary", pairs=count(D // 2), half=count(D // 2), theta=f"{c.rope_theta:g}", D=D)
    rotation = hook_event(trace, "attn.hook_rot_q", i).get("rotation") or {}
    pairs = rotation.get("pairs") or []
    if pairs and pairs[0].get("pair") == 0 and len(pairs) > 1:
        first, slow = pairs[0], pairs[-1]
        rotary = sentences(rotary, say(
            "llama.qkv.rotary_numbers", position=rotation.get("position"), angle=num(first["angle"]),
            b0=num(first["before"][0]), b1=num(first["before"][1]), a0=num(first["after"][0]), a1=num(first["after"][1]),
            last=slow["pair"], slow=num(slow["angle"]),
        ))
    paragraphs += [rotary, cache_paragraph(trace, f, i)]
    formula = "\n".join([
        say("llama.qkv.formula_project"),
        say("llama.qkv.formula_rotate", half=D // 2, theta=f"{c.rope_theta:g}", D=D, last=D // 2 - 1),
        say("llama.qkv.formula_sizes", heads=count(H), kv_heads=count(KVH), numbers=count(D)),
    ])
    flow = [
        say("llama.qkv.flow_project", x=shape([1, f.T, C]), q=shape([1, f.T, C]), kv=shape([1, f.T, KVH * D])),
        say("llama.qkv.flow_heads", q=shape(q_shape), kv=shape(kv_shape)),
        say("llama.qkv.flow_rotate"),
    ]
    return "\n\n".join(paragraphs), formula, flow


def _attn_out(trace: Trace, stage: Stage, f: RunFacts, head: int, generate_key: str):
    p = f.params
    i, C, T = stage.layer, f.n_embd, f.T
    z_shape = shape_of(trace, "attn.hook_z", i, [1, f.n_head, T, f.head_dim])
    out_shape = shape_of(trace, "hook_attn_out", i, [1, T, C])
    params = say("llama.attn_out.params", layer=i, attention=count(p.attention), c_attn=count(p.c_attn),
                 proj=count(p.attn_proj))
    last = T - 1
    before = value_at(hook_event(trace, "hook_resid_pre", i).get("norms"), last)
    update = value_at(hook_event(trace, "hook_attn_out", i).get("norms"), last)
    after = value_at(hook_event(trace, "hook_resid_mid", i).get("norms"), last)
    if None not in (before, update, after):
        params = sentences(params, say("stage.attn_out.lengths", **last_position(trace, f), update=num(update), before=num(before),
                                       after=num(after)))
    mix = say("llama.attn_out.mix", H=count(f.n_head), D=count(f.head_dim), C=count(C), proj=count(p.attn_proj))
    flow = [
        say("stage.attn_out.flow_concat", z=shape(z_shape), shape=shape([1, T, C])),
        say("llama.flow.update_o", update=shape(out_shape)),
        say("stage.attn_out.flow_add", shape=shape(shape_of(trace, "hook_resid_mid", i, out_shape))),
    ]
    return mix + "\n\n" + params, "x ← x + concat(z) W_oᵀ", flow


def _mlp(trace: Trace, stage: Stage, f: RunFacts, head: int, generate_key: str):
    p = f.params
    i, C, F, T = stage.layer, f.n_embd, f.d_mlp, f.T
    post = hook_event(trace, "mlp.hook_post", i)
    hidden = shape_of(trace, "mlp.hook_pre", i, [1, T, F])
    out_shape = shape_of(trace, "hook_mlp_out", i, [1, T, C])
    paragraphs = [
        say("llama.mlp.swiglu", C=count(C), F=count(F)),
        say("llama.mlp.params", mlp=count(p.mlp), c_fc=count(p.c_fc), proj=count(p.mlp_proj),
            ratio=f"{p.mlp / p.attention:.1f}", attention=count(p.attention), F=count(F), C=count(C),
            width=f"{F / C:.2f}".rstrip("0").rstrip(".")),
    ]
    histogram = hook_event(trace, "mlp.hook_pre", i).get("histogram") or {}
    gate = say("llama.mlp.gate", cut=count(histogram["cut"]), F=count(F),
               position=histogram.get("position", f.L - 1)) if "cut" in histogram else ""
    paragraphs += activity_paragraphs(trace, f, post, "llama", i, gate)
    flow = [
        say("llama.mlp.flow_widen", x=shape([1, T, C]), hidden=shape(hidden)),
        say("llama.mlp.flow_gate", hidden=shape(list(post.get("shape") or hidden))),
        say("llama.flow.update_down", update=shape(out_shape)),
    ]
    return "\n\n".join(paragraphs), say("llama.mlp.formula"), flow


WRITERS = {
    "model_files": _model_files,
    "embed": _embed,
    "ln1": _norm,
    "ln2": _norm,
    "ln_final": _norm,
    "qkv": _qkv,
    "attn_out": _attn_out,
    "mlp": _mlp,
}
