"""gpt2viz's hook values against TransformerLens's, on the same random-weight checkpoint.

Runs where `transformer-lens` is installed (it pulls in wandb, pandas, datasets ...: too much for
the test extra, so CI skips it; `pip install transformer-lens` to run it). TransformerLens 4's
`TransformerBridge` without weight processing (`enable_compatibility_mode(no_processing=True)`)
is the reference: the model as the checkpoint stores it, with the classic hook names.
"""

from __future__ import annotations

import pytest
import torch

from helpers import PROMPT

transformer_lens = pytest.importorskip("transformer_lens")

PER_HEAD = ("attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_z")  # ours [B, nh, T, hd]; TL [B, T, nh, hd]
TOL = 1e-4


@pytest.fixture(scope="module")
def runs(ckpts):
    from transformer_lens.model_bridge import TransformerBridge

    lm = ckpts.lm("odd-heads")
    bridge = TransformerBridge.boot_transformers(str(ckpts.path("odd-heads")), device="cpu")
    bridge.enable_compatibility_mode(no_processing=True)
    ids = lm.tokenizer.encode(PROMPT)
    ours: dict[str, torch.Tensor] = {}
    with lm.hooks.subscribe("*", lambda name, value: ours.setdefault(name, value.clone()) if isinstance(value, torch.Tensor) else None):
        logits, _cache = lm.model(torch.tensor([ids]))
    tl_logits, cache = bridge.run_with_cache(torch.tensor([ids]))
    return lm, ours, dict(cache.items()), logits, tl_logits


def test_the_logits_agree(runs):
    _lm, _ours, _theirs, logits, tl_logits = runs
    assert float((logits - tl_logits).abs().max()) <= TOL


def test_every_shared_hook_carries_the_same_values(runs):
    lm, ours, theirs, _logits, _tl = runs
    shared = sorted(set(ours) & set(theirs))
    assert len(shared) >= 4 + 16 * lm.config.n_layer  # everything but gpt2viz's own (kv_cache, sample)
    for name in shared:
        mine, tl = ours[name], theirs[name]
        if name.endswith(PER_HEAD):
            mine = mine.transpose(1, 2)
        if name.endswith("hook_attn_scores"):  # masked entries: -inf here, a large negative number there
            seen = torch.isfinite(mine)
            mine, tl = mine[seen], tl[seen]
        assert mine.shape == tl.shape, name
        assert float((mine.float() - tl.float()).abs().max()) <= TOL, name


def test_hook_normalized_is_the_layernorm_before_its_learned_scale_and_bias(runs):
    """TransformerLens versions differ here; gpt2viz fires what the TransformerBridge fires:
    (x - mean) / sqrt(var + eps)."""
    lm, ours, theirs, _logits, _tl = runs
    x = ours["blocks.0.hook_resid_pre"]
    expected = torch.nn.functional.layer_norm(x, (x.size(-1),), eps=lm.model.h[0].ln_1.eps)
    assert float((ours["blocks.0.ln1.hook_normalized"] - expected).abs().max()) <= 1e-5
    assert float((theirs["blocks.0.ln1.hook_normalized"] - expected).abs().max()) <= TOL
