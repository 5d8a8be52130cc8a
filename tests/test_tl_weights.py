"""TransformerLens's weight names on LanguageModel (gpt2viz/tl_weights.py): each one, used as TL
code uses it, recomputes what the pass's hooks saw (tests/test_transformer_lens.py compares them
with TL's own where it is installed)."""

from __future__ import annotations

import pytest
import torch

from helpers import PROMPT


def _near(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and float((a - b).abs().max()) <= 1e-5


def test_gpt2_s_weights_recompute_the_pass(ckpts):
    lm = ckpts.lm("odd-heads")
    _logits, cache = lm.run_with_cache(PROMPT)
    for layer in range(lm.config.n_layer):
        x = cache["normalized", layer, "ln1"] * lm.model.h[layer].ln_1.weight + lm.model.h[layer].ln_1.bias
        for name in ("q", "k", "v"):  # [B, T, head, d_head] = x @ W[layer] per head, + b
            W, b = getattr(lm, f"W_{name.upper()}")[layer], getattr(lm, f"b_{name.upper()}")[layer]
            assert _near(torch.einsum("btc,hcd->bthd", x, W) + b, cache[name, layer]), (layer, name)
        attn_out = torch.einsum("bthd,hdc->btc", cache["z", layer], lm.W_O[layer]) + lm.b_O[layer]
        assert _near(attn_out, cache["attn_out", layer])
        assert _near(cache["post", layer] @ lm.W_out[layer] + lm.b_out[layer], cache["mlp_out", layer])
        mid = cache["normalized", layer, "ln2"] * lm.model.h[layer].ln_2.weight + lm.model.h[layer].ln_2.bias
        assert _near(mid @ lm.W_in[layer] + lm.b_in[layer], cache["pre", layer])
    ids = torch.tensor(lm.tokenizer.encode(PROMPT))
    assert torch.equal(lm.W_E[ids], cache["embed"][0]) and torch.equal(lm.W_pos[: len(ids)], cache["pos_embed"][0])
    final = cache["ln_final.hook_normalized"] * lm.model.ln_f.weight + lm.model.ln_f.bias
    assert _near(final @ lm.W_U + lm.b_U, _logits)
    with pytest.raises(AttributeError, match="W_gate: GPT-2's MLP has no gate"):
        lm.W_gate
    assert not hasattr(lm, "W_gate")


def test_a_llama_model_s_weights_recompute_the_pass(llama_lm):
    lm = llama_lm
    _logits, cache = lm.run_with_cache("the cat sat")
    config = lm.config
    assert lm.W_K.shape == (config.n_layer, config.n_kv_head, config.n_embd, config.head_dim)  # its key/value heads
    for layer in range(config.n_layer):
        block = lm.model.model.layers[layer]
        x = cache["normalized", layer, "ln1"] * block.input_layernorm.weight
        for name in ("q", "k", "v"):
            assert _near(torch.einsum("btc,hcd->bthd", x, getattr(lm, f"W_{name.upper()}")[layer]), cache[name, layer]), name
        assert _near(torch.einsum("bthd,hdc->btc", cache["z", layer], lm.W_O[layer]), cache["attn_out", layer])
        mid = cache["normalized", layer, "ln2"] * block.post_attention_layernorm.weight
        assert _near(mid @ lm.W_gate[layer], cache["pre", layer])  # hook_pre is the gate's (TL's)
        assert _near(mid @ lm.W_in[layer], cache["pre_linear", layer])
        assert _near(cache["post", layer] @ lm.W_out[layer], cache["mlp_out", layer])
    for name, message in (("W_pos", "no position table"), ("b_Q", "have no biases"), ("b_out", "have no biases")):
        with pytest.raises(AttributeError, match=message):
            getattr(lm, name)


def test_another_number_format_gives_the_checkpoint_s_float32_weights(ckpts):
    import gpt2viz

    low = gpt2viz.load_model(str(ckpts.path("odd-heads")), dtype="int8")
    exact = ckpts.lm("odd-heads")
    for name in ("W_Q", "b_V", "W_O", "W_out", "W_U", "W_E"):
        assert torch.equal(getattr(low, name), getattr(exact, name)), name
        assert getattr(low, name).dtype == torch.float32
