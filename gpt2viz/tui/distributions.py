"""The data behind the distribution pictures, read off a Trace: one position's values at a LayerNorm
(going in, normalized, after γ and β), its MLP pre-activations against GELU, and each head's
attention entropy (gpt2viz.trace.events records them; docs/trace.md describes the fields).

Traces written before these were recorded lack them, and a replayed trace may hold anything: each
reader returns None unless the data has the shape a picture can draw, and the picture then says
that it is not in this trace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..trace import Trace
from .facts import LAYER_NORMS, hook_event, layer_norm_event
from .stages import Stage

MAX_BINS = 64  # bins a picture draws at most (the recorder writes gpt2viz.trace.events.HISTOGRAM_BINS)
MAX_COUNT = 2**53

def gelu(x: float) -> float:
    """GPT-2's GELU, the tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Positive for
    x > 0 (more than x / 2), at most 0 for x <= 0 (no lower than about -0.17, at x = -0.75)."""
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def silu(x: float) -> float:
    """LLaMA's SiLU, x · sigmoid(x): more than x / 2 for x > 0, at most 0 for x <= 0 (no lower than
    about -0.28, at x = -1.28)."""
    return x / (1.0 + math.exp(-x)) if x > -700 else 0.0


@dataclass(frozen=True)
class Histogram:
    """Counts in bins: `counts[b]` of the values in (edges[b], edges[b + 1]], `below` at or below
    edges[0], `above` over edges[-1]."""

    edges: tuple[float, ...]
    counts: tuple[int, ...]
    below: int
    above: int

    @property
    def total(self) -> int:
        """Every value counted, in the bins or outside them."""
        return self.below + sum(self.counts) + self.above

    @property
    def bin_width(self) -> float:
        return (self.edges[-1] - self.edges[0]) / len(self.counts)


@dataclass(frozen=True)
class LayerNormValues:
    """One position's values at a LayerNorm, counted in bins three times."""

    position: int
    input: Histogram  # going in: x
    normalized: Histogram  # (x - mean) / sqrt(var + eps), before γ and β
    output: Histogram  # after γ and β


@dataclass(frozen=True)
class PreActivations:
    """One position's MLP pre-activations x (c_fc's output) in bins, and how many GELU cuts (x <= 0)."""

    position: int
    histogram: Histogram
    cut: int

    @property
    def passed(self) -> int:
        """How many pass GELU: x > 0, where GELU(x) is more than x / 2."""
        return self.histogram.total - self.cut


@dataclass(frozen=True)
class HeadEntropies:
    """Per head, the entropy (bits) of one query's attention weights over the keys it sees."""

    position: int
    bits: tuple[float | None, ...]

    @property
    def keys(self) -> int:
        """Keys the query sees: positions 0 to its own."""
        return self.position + 1

    @property
    def max_bits(self) -> float:
        """The entropy of weights spread evenly over those keys: log2 of their number."""
        return math.log2(self.keys)


def layer_norm_values(trace: Trace, stage: Stage) -> LayerNormValues | None:
    """The LayerNorm histograms of an ln1, ln2 or ln_final stage, or None."""
    if stage.kind not in LAYER_NORMS:
        return None
    data = layer_norm_event(trace, stage).get("histogram")
    if not isinstance(data, dict):
        return None
    edges, position = data.get("edges"), _position(trace, data)
    parts = (
        _histogram(data.get("input"), data.get("input_edges")),
        _histogram(data.get("normalized"), edges),
        _histogram(data.get("output"), data.get("output_edges") or edges),  # its own axis where recorded
    )
    if position is None or None in parts:
        return None
    return LayerNormValues(position, *parts)


def pre_activations(trace: Trace, layer: int) -> PreActivations | None:
    """Block `layer`'s MLP pre-activation histogram, or None."""
    data = hook_event(trace, "mlp.hook_pre", layer).get("histogram")
    if not isinstance(data, dict):
        return None
    histogram, position, cut = _histogram(data, data.get("edges")), _position(trace, data), data.get("cut")
    if histogram is None or position is None or not _count(cut) or cut > histogram.total:
        return None
    return PreActivations(position, histogram, cut)


def head_entropies(trace: Trace, layer: int) -> HeadEntropies | None:
    """Block `layer`'s attention entropy per head, or None."""
    data = hook_event(trace, "attn.hook_pattern", layer).get("entropy")
    if not isinstance(data, dict):
        return None
    bits, position = data.get("bits"), _position(trace, data)
    n_head = int(trace.model["config"]["n_head"])
    if position is None or not isinstance(bits, list) or len(bits) != n_head:
        return None
    if not all(b is None or (_number(b) and b >= 0) for b in bits):
        return None
    return HeadEntropies(position, tuple(bits))


def _count(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_COUNT


def _number(value: object) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def _position(trace: Trace, data: dict) -> int | None:
    """The recorded position, if it is one this pass computed."""
    position = data.get("position")
    if type(position) is not int or not trace.past <= position < trace.past + len(trace.tokens):
        return None
    return position


def _histogram(data: object, edges: object) -> Histogram | None:
    if not isinstance(data, dict) or not isinstance(edges, list) or not 2 <= len(edges) <= MAX_BINS + 1:
        return None
    counts, below, above = data.get("counts"), data.get("below"), data.get("above")
    if not isinstance(counts, list) or len(counts) != len(edges) - 1:
        return None
    if not all(_count(c) for c in [*counts, below, above]) or not all(_number(e) for e in edges):
        return None
    if any(b <= a for a, b in zip(edges, edges[1:])):
        return None
    return Histogram(tuple(edges), tuple(counts), below, above)
