"""run_with_cache's ActivationCache: TransformerLens's indexing, and its analyses checked against
what they must add up to in this pass (the components of the stream sum to the stream, the heads
and c_proj's bias to the attention output, the logit attributions and β · wte to the logits)."""

from __future__ import annotations

import pytest
import torch

from gpt2viz.activation_cache import act_name
from gpt2viz.attribution import direct_logit_attribution
from gpt2viz.hooks import HookNameError

PROMPT = "The meaning of life is"


@pytest.fixture(scope="module")
def run(ckpts):
    lm = ckpts.lm("tiny")
    logits, cache = lm.run_with_cache(PROMPT)
    return lm, logits, cache


def test_transformer_lens_s_short_names_index_the_cache(run):
    _lm, _logits, cache = run
    assert act_name("pattern", 1) == "blocks.1.attn.hook_pattern" and act_name("post", 0) == "blocks.0.mlp.hook_post"
    assert act_name("scale", None) == "ln_final.hook_scale" and act_name("scale", 1, "ln2") == "blocks.1.ln2.hook_scale"
    for short, layer, full in (("pattern", 1, "blocks.1.attn.hook_pattern"), ("z", 0, "blocks.0.attn.hook_z"),
                               ("resid_pre", 1, "blocks.1.hook_resid_pre"), ("mlp_out", 0, "blocks.0.hook_mlp_out"),
                               ("embed", None, "hook_embed")):
        assert cache[short, layer] is cache[full]
    with pytest.raises(HookNameError):
        cache["blocks.0.hook_resid_prre"]


def test_the_stream_s_components_add_up_to_the_stream(run):
    lm, _logits, cache = run
    n_layer = lm.config.n_layer
    acc, labels = cache.accumulated_resid(return_labels=True)
    assert labels == [f"{l}_pre" for l in range(n_layer)] + ["final_post"] and acc.shape[0] == n_layer + 1
    parts, names = cache.decompose_resid(return_labels=True)
    assert names[:3] == ["embed", "pos_embed", "0_attn_out"] and len(names) == 2 + 2 * n_layer
    assert torch.allclose(parts.sum(0), acc[-1], atol=1e-5)
    before_1 = cache.decompose_resid(layer=1)
    assert torch.allclose(before_1.sum(0), cache["resid_pre", 1], atol=1e-5)
    assert cache.accumulated_resid(layer=1, incl_mid=True, return_labels=True)[1] == ["0_pre", "0_mid", "1_pre"]


def test_each_head_s_result_adds_up_to_the_attention_output(run):
    lm, _logits, cache = run
    heads, labels = cache.stack_head_results(return_labels=True)
    n_head = lm.config.n_head
    assert labels[: n_head + 1] == [f"L0H{h}" for h in range(n_head)] + ["L1H0"]
    for layer in range(lm.config.n_layer):
        mine = heads[layer * n_head : (layer + 1) * n_head].sum(0) + lm.model.h[layer].attn.c_proj.bias
        assert torch.allclose(mine, cache["attn_out", layer], atol=1e-5)


def test_logit_attributions_add_up_to_the_logits_and_agree_with_direct_logit_attribution(run):
    lm, logits, cache = run
    token = int(logits[0, -1].argmax())
    parts = cache.decompose_resid()
    attrs = cache.logit_attrs(parts, token)  # [components, B, T]: the final LayerNorm applied inside, as TL's
    beta = float(lm.model.ln_f.bias @ lm.model.wte.weight[token])
    assert torch.allclose(attrs.sum(0) + beta, logits[..., token], atol=1e-4)  # every position
    assert torch.equal(attrs, cache.logit_attrs(parts, torch.tensor(token)))
    dla = direct_logit_attribution(lm, lm.encode_prompt(PROMPT), token)
    heads = cache.logit_attrs(cache.stack_head_results(pos_slice=-1), token, pos_slice=-1)[:, 0]  # [heads, B]
    assert heads.tolist() == pytest.approx([x for row in dla.heads for x in row], abs=1e-5)
    other = int(logits[0, -1].topk(2).indices[1])
    diff = cache.logit_attrs(parts, token, incorrect_tokens=other).sum(0)[0, -1]
    beta_diff = float(lm.model.ln_f.bias @ (lm.model.wte.weight[token] - lm.model.wte.weight[other]))
    assert float(diff) + beta_diff == pytest.approx(float(logits[0, -1, token] - logits[0, -1, other]), abs=1e-4)


def test_accumulated_resid_with_the_layernorm_is_the_logit_lens(run):
    lm, logits, cache = run
    streams = cache.accumulated_resid(apply_ln=True, pos_slice=-1)  # [layers + 1, B, C], each by its own scale
    lens = streams * lm.model.ln_f.weight + lm.model.ln_f.bias
    last = lens[-1] @ lm.model.wte.weight.t()
    assert torch.allclose(last, logits[:, -1], atol=1e-4)  # the last stream's lens is the model's prediction
    assert streams.shape == (lm.config.n_layer + 1, 1, lm.config.n_embd)
