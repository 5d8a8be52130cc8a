"""The data behind the distribution pictures (LayerNorm histograms, MLP pre-activations against
GELU, attention entropy per head): recorded from the real pass, bounded in size, and equal to the
same numbers worked out here, independently, from the model's activations (`run_with_cache`)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from gpt2viz.trace import dumps, trace_decode_step, trace_prompt
from gpt2viz.trace.events import HISTOGRAM_BINS

PROMPT = "The meaning of life is, as everyone knows, not 42."


@pytest.fixture(scope="module", params=["tiny", "gpt2-small"])
def run(request, ckpts):
    """A model, the JSON trace of PROMPT, and the pass's activations from `run_with_cache`."""
    lm = ckpts.lm(request.param)
    doc = json.loads(dumps(trace_prompt(lm, PROMPT)))
    _logits, cache = lm.run_with_cache(PROMPT, prepend_bos=False)  # the trace's positions
    return lm, doc, {name: t.detach().double().numpy() for name, t in cache.items()}


def event(doc: dict, stage: str) -> dict:
    return next(e for e in doc["events"] if e["stage"] == stage)


def counted(values: np.ndarray, edges) -> dict:
    """Counts in (edges[b], edges[b+1]], with what lies at or below edges[0] and above edges[-1]:
    numpy's searchsorted, not the recorder's torch.bucketize."""
    index = np.searchsorted(np.asarray(edges, dtype=np.float64), values, side="left")
    tally = np.bincount(index, minlength=len(edges) + 1)
    return {"below": int(tally[0]), "counts": [int(c) for c in tally[1:-1]], "above": int(tally[-1])}


def half_width(*vectors: np.ndarray) -> float:
    """The smallest power of two holding 99% of the values' magnitudes."""
    reach = float(np.quantile(np.abs(np.concatenate(vectors)), 0.99))
    return 2.0 ** math.ceil(math.log2(reach))


def layer_norms(lm):
    """(hook prefix, the residual stream it reads, the LayerNorm module) of every LayerNorm."""
    for i, block in enumerate(lm.model.h):
        yield f"blocks.{i}.ln1", f"blocks.{i}.hook_resid_pre", block.ln_1
        yield f"blocks.{i}.ln2", f"blocks.{i}.hook_resid_mid", block.ln_2
    yield "ln_final", f"blocks.{len(lm.model.h) - 1}.hook_resid_post", lm.model.ln_f


def test_layer_norm_histograms_equal_the_activations(run):
    lm, doc, acts = run
    n_embd, eps, last = lm.config.n_embd, lm.config.layer_norm_epsilon, len(doc["tokens"]) - 1
    for prefix, resid, ln in layer_norms(lm):
        h = event(doc, f"{prefix}.hook_normalized")["histogram"]
        x = acts[resid][0, -1]
        normalized = acts[f"{prefix}.hook_normalized"][0, -1]
        out = normalized * ln.weight.detach().double().numpy() + ln.bias.detach().double().numpy()
        # One axis for both, unless the output reaches 4 times as far or a quarter as far: its own.
        own = max(half_width(normalized), half_width(out)) >= 4 * min(half_width(normalized), half_width(out))
        R = half_width(normalized) if own else half_width(normalized, out)
        edges = np.linspace(-R, R, HISTOGRAM_BINS + 1)
        output_edges = np.linspace(-half_width(out), half_width(out), HISTOGRAM_BINS + 1) if own else edges
        assert h["position"] == last
        assert h["edges"] == pytest.approx(edges.tolist(), abs=1e-12)
        assert ("output_edges" in h) is own and h.get("output_edges", h["edges"]) == pytest.approx(output_edges.tolist())
        assert h["normalized"] == counted(normalized, edges), prefix
        assert h["output"] == counted(out, output_edges), prefix
        input_edges = x.mean() + edges * np.sqrt(x.var() + eps)
        assert h["input_edges"] == pytest.approx(input_edges.tolist(), rel=1e-5, abs=1e-9)
        assert h["input"] == counted(x, input_edges), prefix
        for part in ("input", "normalized", "output"):
            assert h[part]["below"] + sum(h[part]["counts"]) + h[part]["above"] == n_embd
        # Normalizing only moves and rescales: the same counts on the mapped edges.
        assert h["input"] == h["normalized"], prefix


def test_pre_activation_histograms_equal_the_activations(run):
    lm, doc, acts = run
    d_mlp, last = lm.config.d_mlp, len(doc["tokens"]) - 1
    for i in range(lm.config.n_layer):
        h = event(doc, f"blocks.{i}.mlp.hook_pre")["histogram"]
        x = acts[f"blocks.{i}.mlp.hook_pre"][0, -1]
        edges = np.linspace(-half_width(x), half_width(x), HISTOGRAM_BINS + 1)
        assert h["position"] == last
        assert h["edges"] == pytest.approx(edges.tolist(), abs=1e-12)
        assert {k: h[k] for k in ("below", "counts", "above")} == counted(x, edges)
        assert h["below"] + sum(h["counts"]) + h["above"] == d_mlp
        assert h["cut"] == int((x <= 0).sum())
        # 0 is the middle edge, so the cut ones are exactly the bins left of it and those below.
        assert h["cut"] == h["below"] + sum(h["counts"][: HISTOGRAM_BINS // 2])
        # What passes (x > 0) is what the MLP stage counts as positive after GELU.
        frac = event(doc, f"blocks.{i}.mlp.hook_post")["frac_active"][-1]
        assert d_mlp - h["cut"] == round(frac * d_mlp)


def test_attention_entropy_equals_the_pattern(run):
    lm, doc, acts = run
    L = len(doc["tokens"])
    for i in range(lm.config.n_layer):
        entropy = event(doc, f"blocks.{i}.attn.hook_pattern")["entropy"]
        p = acts[f"blocks.{i}.attn.hook_pattern"][0, :, -1]  # (n_head, L)
        with np.errstate(divide="ignore", invalid="ignore"):
            bits = -np.where(p > 0, p * np.log2(p), 0.0).sum(-1)
        assert entropy["position"] == L - 1
        assert entropy["bits"] == pytest.approx(bits.tolist(), rel=1e-5, abs=1e-9)
        assert all(0 <= b <= math.log2(L) + 1e-6 for b in entropy["bits"])


def test_a_decode_step_counts_its_new_position(ckpts):
    lm = ckpts.lm("tiny")
    ids = lm.tokenizer.encode(PROMPT)
    trace = trace_decode_step(lm, ids)
    position = len(ids) - 1
    assert trace.event("blocks.0.ln1.hook_normalized")["histogram"]["position"] == position
    assert trace.event("blocks.1.mlp.hook_pre")["histogram"]["position"] == position
    entropy = trace.event("blocks.1.attn.hook_pattern")["entropy"]
    assert entropy["position"] == position and len(entropy["bits"]) == lm.config.n_head


def test_the_pictures_data_does_not_grow_with_the_prompt(ckpts):
    """A fixed number of bins per event, whatever the prompt's length."""
    lm = ckpts.lm("tiny")

    def added_bytes(prompt: str) -> int:
        doc = json.loads(dumps(trace_prompt(lm, prompt)))
        picture = [{k: e[k] for k in ("histogram", "entropy") if k in e} for e in doc["events"]]
        return len(json.dumps(picture))

    short, long = added_bytes("Hello"), added_bytes(PROMPT * 4)
    assert long < 1.2 * short
    assert long < 2_500 * (lm.config.n_layer + 1)  # ~1.7 KB a block: two LayerNorms, the MLP, the pattern


def test_an_output_far_from_the_normalized_values_gets_an_axis_of_its_own():
    # SmolLM2's early RMSNorm weights (~0.1) put its 576 values in two bins of the normalized
    # values' axis; the output is counted on edges of its own where its reach is 4x off.
    import torch

    from gpt2viz.trace.events import rms_norm_histogram

    x = torch.randn(576, generator=torch.Generator().manual_seed(0)) * 3
    normalized = x / x.square().mean().add(1e-5).sqrt()
    for gain, own in ((0.05, True), (0.5, False), (1.5, False), (9.0, True)):
        h = rms_norm_histogram(x, normalized, normalized * gain, 1e-5, 3)
        assert ("output_edges" in h) is own, gain
        edges = h.get("output_edges", h["edges"])
        assert h["output"] == counted((normalized * gain).double().numpy(), edges)
        inside = sum(h["output"]["counts"])
        assert inside >= 0.95 * 576 and sum(c > 0 for c in h["output"]["counts"]) > 4, gain  # spread, not two bins
