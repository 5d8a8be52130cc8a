"""Sentences of a block's stages that both families say alike (narration.py for GPT-2,
llama_narration.py for LLaMA): what the layer's KV cache holds after the pass, and the MLP's
neurons at the last position (how many fire, the strongest, read as a key-value memory; `family`
picks the templates: 'stage' or 'llama')."""

from __future__ import annotations

from ..i18n import _, ngettext, plural, say, sentences
from ..model.kv_cache import GROWTH_CHUNK
from ..trace import Trace
from .facts import RunFacts, allocated_positions, hook_event, last_position, untrained, value_at
from .formatting import count, nbytes, num, percent, quote, shape


def cache_paragraph(trace: Trace, f: RunFacts, layer: int) -> str:
    """What layer `layer`'s KV cache holds after the pass: every position its queries saw (on a
    decode step the cached ones and the new one), keys and values of every key/value head (GPT-2:
    one per query head; a grouped model's fewer say how much that saves)."""
    KVH, D = f.n_kv_head, f.head_dim
    group = f.n_head // KVH
    kv = hook_event(trace, "kv_cache")
    layer_kv = (kv.get("layers") or [None] * (layer + 1))[layer] if kv else None
    numbers = 2 * KVH * f.L * D
    kv_bytes = layer_kv["k_bytes"] + layer_kv["v_bytes"] if layer_kv else numbers * f.value_bytes
    facts = {"heads": ngettext("{n} head", "{n} heads", KVH).format(n=count(KVH)),
             "positions": ngettext("{n} position", "{n} positions", f.L).format(n=count(f.L)),
             "D": count(D), "numbers": count(numbers), "bytes": nbytes(kv_bytes)}
    cache = say("llama.qkv.cache", **facts, group=count(group)) if group > 1 else say("stage.qkv.cache", **facts)
    if f.past:
        cache = sentences(cache, say(plural("stage.qkv.decode", f.past), new=shape([1, KVH, f.T, D]), n=count(f.past),
                                     all=shape([1, KVH, f.L, D])))
    if kv and kv.get("bytes_per_position"):  # why "reserved" exceeds what the positions use
        cache = sentences(cache, say("stage.qkv.reserve", room=count(allocated_positions(kv)), reserved=nbytes(kv["allocated_bytes"]),
                                     chunk=count(GROWTH_CHUNK)))
    return cache


def activity_paragraphs(trace: Trace, f: RunFacts, post: dict, family: str, layer: int, gate: str = "") -> list[str]:
    """The share of neurons above 0 at the last position and the strongest one (its sentence then
    `gate`, a sentence of LLaMA's gate, if any), and the strongest read as a key-value memory."""
    paragraphs = []
    frac = value_at(post.get("frac_active"), f.T - 1)
    top = post.get("top_neurons") or []
    if frac is not None:
        facts = {**last_position(trace, f), "share": percent(frac), "F": count(f.d_mlp)}
        if top:
            active = say(f"{family}.mlp.active_top", **facts, neuron=top[0]["index"], value=num(top[0]["value"]))
        else:
            active = say(f"{family}.mlp.active", **facts)
        # Neurons of this block switched off at this position (what if) count as their replaced
        # outputs here, while the histogram beside it shows what went into the activation.
        off = {n for a in trace.ablations if a.kind == "neurons" and a.layer == layer
               for n in a.neurons}
        if off:
            active = sentences(active, say(plural("stage.mlp.switched_off", len(off)), n=count(len(off))))
        paragraphs.append(sentences(active, gate) if gate else active)
    if top and top[0].get("promotes"):  # recorded since the key-value view (not in older traces)
        first = top[0]
        tokens = _(", ").join(quote(t["text"]) for t in first["promotes"])
        memory = say(f"{family}.mlp.memory", neuron=first["index"], pre=num(first["pre"]), value=num(first["value"]),
                     tokens=tokens)
        never_seen = [quote(t["text"]) for t in first["promotes"] if untrained(t)]
        if never_seen:
            memory = sentences(memory, say("stage.mlp.untrained", tokens=_(", ").join(never_seen)))
        paragraphs.append(memory)
    return paragraphs
