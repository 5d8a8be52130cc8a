"""The MLP stage's sentences about this pass's neurons, for both families (narration.py, GPT-2's
GELU; llama_narration.py, SwiGLU's silu(gate) × up): how many fire at the last position, the
strongest, and that one read as a key-value memory. `family` picks the templates: 'stage' or 'llama'."""

from __future__ import annotations

from ..i18n import _, say, sentences
from ..trace import Trace
from .facts import RunFacts, last_position, untrained, value_at
from .formatting import count, num, percent, quote


def activity_paragraphs(trace: Trace, f: RunFacts, post: dict, family: str, gate: str = "") -> list[str]:
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
