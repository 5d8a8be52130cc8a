"""TransformerLens's weight names on LanguageModel (gpt2viz/tl_weights.py): each one, used as TL
code uses it, recomputes what the pass's hooks saw, the norms' γ and β folded in as TL folds them
(tests/test_transformer_lens.py compares them with TL's own where it is installed)."""

from __future__ import annotations

import pytest
import torch

from helpers import PROMPT


def _near(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal up to float32's rounding of sums in another order (relative to the larger values)."""
    return a.shape == b.shape and float((a - b).abs().max()) <= 1e-5 * max(1.0, float(b.abs().max()))


@pytest.mark.parametrize("model", ["odd-heads", "tiny"])  # 5 heads; trained norms (γ ≠ 1, β ≠ 0)
def test_gpt2_s_weights_recompute_the_pass(ckpts, bundled, model):
    lm = bundled if model == "tiny" else ckpts.lm(model)
    _logits, cache = lm.run_with_cache(PROMPT, prepend_bos=False)  # the positions of encode(PROMPT)
    for layer in range(lm.config.n_layer):
        x = cache["normalized", layer, "ln1"]  # before γ and β, which the weights hold
        for name in ("q", "k", "v"):  # [B, T, head, d_head] = x @ W[layer] per head, + b
            W, b = getattr(lm, f"W_{name.upper()}")[layer], getattr(lm, f"b_{name.upper()}")[layer]
            assert _near(torch.einsum("btc,hcd->bthd", x, W) + b, cache[name, layer]), (layer, name)
        attn_out = torch.einsum("bthd,hdc->btc", cache["z", layer], lm.W_O[layer]) + lm.b_O[layer]
        assert _near(attn_out, cache["attn_out", layer])
        assert _near(cache["post", layer] @ lm.W_out[layer] + lm.b_out[layer], cache["mlp_out", layer])
        assert _near(cache["normalized", layer, "ln2"] @ lm.W_in[layer] + lm.b_in[layer], cache["pre", layer])
    ids = torch.tensor(lm.tokenizer.encode(PROMPT))
    assert torch.equal(lm.W_E[ids], cache["embed"][0]) and torch.equal(lm.W_pos[: len(ids)], cache["pos_embed"][0])
    assert _near(cache["ln_final.hook_normalized"] @ lm.W_U + lm.b_U, _logits)
    with pytest.raises(AttributeError, match="W_gate: GPT-2's MLP has no gate"):
        lm.W_gate
    assert not hasattr(lm, "W_gate")


def test_a_llama_model_s_weights_recompute_the_pass(llama_lm):
    lm = llama_lm
    _logits, cache = lm.run_with_cache("the cat sat")
    config = lm.config
    assert lm.W_K.shape == (config.n_layer, config.n_kv_head, config.n_embd, config.head_dim)  # its key/value heads
    for layer in range(config.n_layer):  # its norms' γ are random, from 0.5 to 1.5
        x = cache["normalized", layer, "ln1"]
        for name in ("q", "k", "v"):
            assert _near(torch.einsum("btc,hcd->bthd", x, getattr(lm, f"W_{name.upper()}")[layer]), cache[name, layer]), name
        assert _near(torch.einsum("bthd,hdc->btc", cache["z", layer], lm.W_O[layer]), cache["attn_out", layer])
        mid = cache["normalized", layer, "ln2"]
        assert _near(mid @ lm.W_gate[layer], cache["pre", layer])  # hook_pre is the gate's (TL's)
        assert _near(mid @ lm.W_in[layer], cache["pre_linear", layer])
        assert _near(cache["post", layer] @ lm.W_out[layer], cache["mlp_out", layer])
    assert _near(cache["ln_final.hook_normalized"] @ lm.W_U + lm.b_U, _logits)
    for name, message in (("W_pos", "no position table"), ("b_Q", "have no biases"), ("b_out", "have no biases")):
        with pytest.raises(AttributeError, match=message):
            getattr(lm, name)


def test_another_number_format_gives_the_float32_twin_s_weights(ckpts):
    import gpt2viz

    low = gpt2viz.load_model(str(ckpts.path("odd-heads")), dtype="int8")
    exact = ckpts.lm("odd-heads")
    for name in ("W_Q", "b_V", "W_O", "W_out", "W_U", "W_E"):
        assert torch.equal(getattr(low, name), getattr(exact, name)), name
        assert getattr(low, name).dtype == torch.float32
    assert low.cfg.dtype == torch.float32  # what it computes in (a review read torch.int8 there)


@pytest.mark.parametrize("model", ["tiny", "llama"])
def test_the_logit_lens_and_direct_attribution_with_w_u_give_the_logits(bundled, llama_lm, model):
    """TransformerLens's two most common recipes, written with `lm.W_U` and `lm.b_U`: the logit
    lens of the last block is the model's logits, and the components' attributions to a logit
    difference, plus the bias's, are that difference (the norms' γ and β folded into W_U and b_U,
    as TL folds them; with the checkpoint's own W_U the lens missed the logits by up to 4.3)."""
    lm = bundled if model == "tiny" else llama_lm
    ids = lm.to_tokens("When Mary and John went to the store, John gave a drink to")
    logits, cache = lm.run_with_cache(ids)
    lens = cache.accumulated_resid(layer=-1, pos_slice=-1, apply_ln=True) @ lm.W_U + lm.b_U
    assert float((lens[-1, 0] - logits[0, -1]).abs().max()) <= 1e-4
    a, b = 11, 12
    parts = cache.apply_ln_to_stack(cache.decompose_resid(layer=-1, pos_slice=-1), layer=-1, pos_slice=-1)
    attributed = (parts @ (lm.W_U[:, a] - lm.W_U[:, b])).sum(0) + lm.b_U[a] - lm.b_U[b]
    assert abs(float(attributed[0] - (logits[0, -1, a] - logits[0, -1, b]))) <= 1e-4
    assert torch.allclose((parts @ (lm.W_U[:, a] - lm.W_U[:, b])).sum(0),
                          cache.logit_attrs(cache.decompose_resid(layer=-1, pos_slice=-1), a, b, pos_slice=-1).sum(0), atol=1e-4)


@pytest.mark.parametrize("model", ["tiny", "llama"])
def test_cfg_gives_transformer_lens_s_names_for_the_settings(bundled, llama_lm, model):
    """`lm.cfg` (TL's `model.cfg`, in nearly every notebook) was an AttributeError: TL's names for
    lm.config's numbers, agreeing with the weights' shapes."""
    lm = bundled if model == "tiny" else llama_lm
    cfg, config = lm.cfg, lm.config
    assert (cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_mlp, cfg.d_vocab, cfg.n_ctx) == (
        config.n_layer, config.n_embd, config.n_head, config.head_dim, config.d_mlp, config.vocab_size, config.n_ctx)
    assert lm.W_Q.shape == (cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_head)
    assert lm.W_in.shape == (cfg.n_layers, cfg.d_model, cfg.d_mlp) and lm.W_U.shape == (cfg.d_model, cfg.d_vocab)
    assert cfg.default_prepend_bos and cfg.dtype == torch.float32 and cfg.device == "cpu"
    if model == "tiny":
        assert (cfg.act_fn, cfg.normalization_type, cfg.positional_embedding_type) == ("gelu_new", "LNPre", "standard")
        assert cfg.n_key_value_heads is None and not cfg.gated_mlp
    else:
        assert (cfg.act_fn, cfg.normalization_type, cfg.positional_embedding_type) == ("silu", "RMSPre", "rotary")
        assert cfg.n_key_value_heads == config.n_kv_head and lm.W_K.shape[1] == cfg.n_key_value_heads and cfg.gated_mlp


def test_a_layernorm_s_readers_are_centred_and_an_rmsnorm_s_are_not(bundled, llama_lm):
    """As TL's fold_ln: a LayerNorm's output has mean 0 over d_model, so its readers' mean over
    their input rows reads nothing and is taken away; an RMSNorm does not centre, so its are kept."""
    for name in ("W_Q", "W_K", "W_V", "W_in"):
        assert float(getattr(bundled, name).mean(-2).abs().max()) < 1e-6, name
    assert float(bundled.W_U.mean(0).abs().max()) < 1e-6
    assert float(llama_lm.W_Q.mean(-2).abs().max()) > 1e-3 and float(llama_lm.W_U.mean(0).abs().max()) > 1e-3
    assert bundled.cfg.dtype == torch.float32


def test_a_folded_weight_is_made_once_and_again_after_an_edit():
    """Made once and kept (gpt2-small's W_U was three 154 MB copies at each access), made again
    once a parameter, or the kept tensor itself, is changed in place."""
    import gpt2viz

    lm = gpt2viz.load_model("tiny")  # its own: this test edits a parameter
    first = lm.W_U
    assert lm.W_U is first and lm.b_Q is lm.b_Q
    first[0, 0] += 1  # an edit of what was handed out is not what the model holds
    again = lm.W_U
    assert again is not first and float((again - first).abs().max()) == 1.0
    with torch.no_grad():
        lm.model.ln_f.weight[0] += 1
    changed = lm.W_U
    assert changed is not again and not torch.equal(changed, again)
    # Replaced rather than edited (an engineer's walk: the W_U read 11.3 away from the logits'):
    # a new Parameter, and a new tensor given through `.data`.
    tokens = lm.to_tokens("The king hath sent for thee")
    lm.model.ln_f.weight = torch.nn.Parameter(lm.model.ln_f.weight.detach() * 2)
    logits, cache = lm.run_with_cache(tokens)
    assert float((cache.accumulated_resid(apply_ln=True)[-1] @ lm.W_U + lm.b_U - logits).abs().max()) < 1e-4
    before = lm.W_Q
    lm.model.h[1].attn.c_attn.weight.data = lm.model.h[1].attn.c_attn.weight.data * 1.5
    assert not torch.equal(lm.W_Q[1], before[1]) and torch.equal(lm.W_Q[0], before[0])
    # Replaced through .data again and again: a freed tensor's address is often handed out again,
    # and the kept weight once looked unchanged from the second replacement on (a review).
    for _ in range(4):
        served = lm.W_U
        lm.model.wte.weight.data = lm.model.wte.weight.data * 0.5
        again = lm.W_U
        assert float(again.abs().sum()) == pytest.approx(0.5 * float(served.abs().sum()), rel=1e-5)


def test_qk_and_ov_are_each_head_s_circuits_factored(bundled, llama_lm):
    """lm.QK / lm.OV, as TL circuit code reads them: the product is W_Q W_Kᵀ (W_V W_O), the scores
    and the head's writes recomputed through them; SVD, eigenvalues and norm agree with the whole
    matrix's; indexing leaves the product factored. A LLaMA-family model's key/value heads are
    repeated for the query heads that read them."""
    lm = bundled
    _logits, cache = lm.run_with_cache(PROMPT, prepend_bos=False)
    layer, head = 1, 3
    qk, ov = lm.QK[layer, head], lm.OV[layer, head]
    assert lm.QK.shape == lm.OV.shape == (lm.config.n_layer, lm.config.n_head, lm.config.n_embd, lm.config.n_embd)
    assert qk.mdim == ov.mdim == lm.config.n_embd // lm.config.n_head
    assert _near(qk.AB, lm.W_Q[layer, head] @ lm.W_K[layer, head].T)
    x = cache["normalized", layer, "ln1"][0]
    # Scores without the biases: (x W_Q)(x W_K)ᵀ, through the factored matrix from both sides.
    q, k = x @ lm.W_Q[layer, head], x @ lm.W_K[layer, head]
    assert _near((x @ qk @ x.T).AB, q @ k.T)
    assert _near((x @ ov).AB, (x @ lm.W_V[layer, head]) @ lm.W_O[layer, head])
    M = ov.AB
    U, S, V = ov.svd()
    assert _near(U @ torch.diag(S) @ V.mT, M)
    assert torch.allclose(S, torch.linalg.svdvals(M)[: ov.mdim], rtol=1e-4, atol=1e-6)
    assert torch.allclose(ov.norm(), torch.linalg.norm(M), rtol=1e-5)
    top = lambda values: sorted(values.abs().tolist())[-5:]  # noqa: E731
    assert top(ov.eigenvalues) == pytest.approx(top(torch.linalg.eigvals(M)), rel=1e-3)
    assert _near(ov.T.AB, M.T) and _near(ov.make_even().AB, M)
    assert _near((2 * ov).AB, 2 * M) and _near(ov.get_corner(4), M[:4, :4])
    assert _near(ov[5:9, -1].AB, M[5:9, -1:]) and _near(lm.OV[:, head, 2].AB, lm.OV.AB[:, head, 2:3])
    assert _near(ov[torch.tensor(5)].AB, M[5:6]) and _near(ov[:, torch.tensor(7)].AB, M[:, 7:8])  # 0-d tensors too
    assert _near(lm.OV[..., 0:2, :].AB, lm.OV.AB[..., 0:2, :])
    assert _near(ov @ torch.ones(lm.config.n_embd), M @ torch.ones(lm.config.n_embd))
    with pytest.raises(IndexError, match="no new axis"):
        lm.OV[None]
    # GQA: query head h reads key/value head h // group.
    group = llama_lm.config.n_head // llama_lm.config.n_kv_head
    assert group > 1
    for h in range(llama_lm.config.n_head):
        assert _near(llama_lm.QK[0, h].AB, llama_lm.W_Q[0, h] @ llama_lm.W_K[0, h // group].T)
        assert _near(llama_lm.OV[1, h].AB, llama_lm.W_V[1, h // group] @ llama_lm.W_O[1, h])
    assert lm.W_E_pos.shape == (lm.config.vocab_size + lm.config.n_ctx, lm.config.n_embd)
    with pytest.raises(AttributeError, match="W_pos"):
        llama_lm.W_E_pos
