"""The from-scratch model against transformers' GPT2LMHeadModel on random-weight checkpoints."""

from __future__ import annotations

import pytest
import torch

import gpt2viz
from helpers import PROMPT
from helpers import assert_same_logits, bare_tensors, clone_checkpoint, hf_greedy, hf_logits, read_tensors

# gpt2-small's twelve blocks have distilgpt2's widths: the kernels tier multiplies them once.
SHAPES = ["tiny", "odd-heads", "distilgpt2", pytest.param("gpt2-small", marks=pytest.mark.kernels_once)]
TOL = 1e-4  # max |logit difference| in float32
PATHS_TOL = 5e-5  # fused against written-out attention, same weights (docs/architecture.md)


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return float((a.float() - b.float()).abs().max())


@pytest.mark.parametrize("shape", SHAPES)
def test_logits_match_transformers(ckpts, shape):
    lm, hf = ckpts.lm(shape), ckpts.hf(shape)
    ids = lm.tokenizer.encode(PROMPT)
    assert len(ids) >= 10
    logits, cache = lm.model(torch.tensor([ids]), cache=None)
    assert cache is None
    assert logits.dtype == torch.float32
    assert logits.shape == (1, len(ids), lm.config.vocab_size)
    ref = hf_logits(hf, ids)
    assert max_diff(logits, ref) <= TOL
    # The comparison has teeth: the logits are far from constant across the vocabulary.
    assert float(ref[0, -1].std()) > 100 * TOL


@pytest.mark.parametrize("shape", SHAPES)
def test_explicit_attention_path_matches_transformers(ckpts, shape):
    """Subscribing to hook_pattern switches attention to the written-out path; same logits."""
    lm, hf = ckpts.lm(shape), ckpts.hf(shape)
    ids = lm.tokenizer.encode(PROMPT)
    seen = []
    with lm.hooks.subscribe("blocks.*.attn.hook_pattern", lambda name, value: seen.append(name)):
        logits, _ = lm.model(torch.tensor([ids]))
    assert seen == [f"blocks.{i}.attn.hook_pattern" for i in range(lm.config.n_layer)]
    assert max_diff(logits, hf_logits(hf, ids)) <= TOL
    # docs/architecture.md: the two paths differ by float rounding, within PATHS_TOL of each other.
    fused, _ = lm.model(torch.tensor([ids]))
    assert max_diff(logits, fused) <= PATHS_TOL


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("explicit", [False, True], ids=["fused", "explicit"])
def test_chunked_prefill_matches_full_pass(ckpts, shape, explicit):
    """3 tokens, then 4 more with the same cache == one pass over all 7."""
    lm, hf = ckpts.lm(shape), ckpts.hf(shape)
    ids = lm.tokenizer.encode(PROMPT)[:7]
    full, _ = lm.model(torch.tensor([ids]))
    cache = lm.model.new_cache()
    patterns = []
    sub = lm.hooks.add("blocks.0.attn.hook_pattern", lambda n, v: patterns.append(v)) if explicit else None
    try:
        first, cache = lm.model(torch.tensor([ids[:3]]), cache)
        assert cache.length == 3
        second, cache = lm.model(torch.tensor([ids[3:]]), cache)
        assert cache.length == 7
    finally:
        if sub is not None:
            lm.hooks.remove(sub)
    chunked = torch.cat([first, second], dim=1)
    assert max_diff(chunked, full) <= 1e-5
    assert max_diff(chunked, hf_logits(hf, ids)) <= TOL
    if explicit:
        # The second chunk's pattern: 4 query rows over 7 key columns, causal mask shifted by 3.
        pattern = patterns[1]
        assert pattern.shape == (1, lm.config.n_head, 4, 7)
        allowed = torch.ones(4, 7, dtype=torch.bool).tril(diagonal=3)
        assert torch.all(pattern[..., ~allowed] == 0)
        assert torch.all(pattern[..., allowed] > 0)
        torch.testing.assert_close(pattern.sum(-1), torch.ones(1, lm.config.n_head, 4))


def test_batched_logits_match_transformers(ckpts):
    lm, hf = ckpts.lm("tiny"), ckpts.hf("tiny")
    batch = [lm.tokenizer.encode("The meaning of life is"), lm.tokenizer.encode("The capital of France is")]
    assert len(batch[0]) == len(batch[1]) == 5
    logits, _ = lm.model(torch.tensor(batch))
    assert logits.shape == (2, 5, lm.config.vocab_size)
    assert max_diff(logits, hf_logits(hf, batch)) <= TOL


@pytest.mark.parametrize("shape", SHAPES)
def test_greedy_generation_matches_transformers(ckpts, shape):
    lm, hf = ckpts.lm(shape), ckpts.hf(shape)
    ids = lm.tokenizer.encode(PROMPT)
    ref = hf_greedy(hf, ids, 20)
    cached = lm.generate(PROMPT, 20, use_cache=True)
    if shape != "gpt2-small":
        # Full recompute per step is the slow path; the 6-layer 768-wide shape already covers
        # the GPT-2 small widths, so the 12-layer run is left to the cached path only.
        naive = lm.generate(PROMPT, 20, use_cache=False)
        assert cached.token_ids == naive.token_ids
        assert cached.stop_reason == naive.stop_reason
    if 50256 in ref:  # generation legitimately stops at <|endoftext|>
        stop = ref.index(50256) + 1
        assert cached.stop_reason == "eos"
        ref = ref[:stop]
    else:
        assert cached.stop_reason == "max_new_tokens"
    assert cached.token_ids == ref
    assert len(cached.step_ms) == len(cached.token_ids)


@pytest.mark.parametrize("shape", ["tiny", "odd-heads"])
def test_bare_naming_with_mask_buffers_gives_the_same_logits(ckpts, tmp_path, shape):
    src = ckpts.path(shape)
    cfg = ckpts.lm(shape).config
    tensors = read_tensors(src)
    assert any(k.startswith("transformer.") for k in tensors)
    bare = bare_tensors(tensors, cfg.n_layer, cfg.n_ctx)
    assert not any(k.startswith("transformer.") or k.startswith("lm_head") for k in bare)
    lm_bare = gpt2viz.load_model(str(clone_checkpoint(src, tmp_path / "bare", bare)), device="cpu")
    ids = torch.tensor([ckpts.lm(shape).tokenizer.encode(PROMPT)])
    a, _ = ckpts.lm(shape).model(ids)
    b, _ = lm_bare.model(ids)
    assert_same_logits(a, b)


def test_prefixed_with_tied_lm_head_loads(ckpts, tmp_path):
    """save_pretrained may also write lm_head.weight, equal to wte: accepted, same logits."""
    src = ckpts.path("tiny")
    tensors = read_tensors(src)
    tensors["lm_head.weight"] = tensors["transformer.wte.weight"].clone()
    lm2 = gpt2viz.load_model(str(clone_checkpoint(src, tmp_path / "tied", tensors)), device="cpu")
    ids = torch.tensor([lm2.tokenizer.encode(PROMPT)])
    assert_same_logits(lm2.model(ids)[0], ckpts.lm("tiny").model(ids)[0])


@pytest.mark.parametrize(
    "shape, params", [("distilgpt2", 81_912_576), pytest.param("gpt2-small", 124_439_808, marks=pytest.mark.kernels_once)]
)
def test_parameter_count_of_loaded_models(ckpts, shape, params):
    lm = ckpts.lm(shape)
    assert lm.n_params == params
    assert lm.config.n_params == params
    hf_unique = sum(p.numel() for p in ckpts.hf(shape).parameters())  # tied head counted once
    assert hf_unique == params


def test_config_matches_checkpoint(ckpts):
    lm = ckpts.lm("odd-heads")
    c = lm.config
    assert (c.n_layer, c.n_head, c.n_embd, c.n_ctx, c.vocab_size) == (2, 25, 100, 96, 50257)
    assert c.head_dim == 4
    assert c.layer_norm_epsilon == 1e-5


@pytest.mark.parametrize(
    "n_layer, n_embd, n_head, params",
    [
        (12, 768, 12, 124_439_808),
        (24, 1024, 16, 354_823_168),
        (36, 1280, 20, 774_030_080),
        (48, 1600, 25, 1_557_611_200),
        (6, 768, 12, 81_912_576),
    ],
)
def test_config_parameter_counts_from_facts(n_layer, n_embd, n_head, params):
    cfg = gpt2viz.GPT2Config(n_layer=n_layer, n_embd=n_embd, n_head=n_head)
    assert cfg.n_params == params
    assert cfg.head_dim == 64 and cfg.d_mlp == 4 * n_embd


@pytest.mark.kernels_once  # counts, not products
def test_block_parameter_counts_from_facts(ckpts):
    block = ckpts.lm("gpt2-small").model.h[0]
    assert sum(p.numel() for p in block.attn.parameters()) == 2_362_368
    assert sum(p.numel() for p in block.mlp.parameters()) == 4_722_432
    assert tuple(ckpts.lm("gpt2-small").model.wte.weight.shape) == (50257, 768)


def test_mlp_uses_gpt2_tanh_gelu(ckpts, tmp_path):
    """Random init keeps MLP inputs near 0, where the erf and tanh GELUs agree to ~1e-5, so the
    parity tests alone would not notice the wrong one. Scale c_fc up so pre-activations reach
    |x| ~ 2..5, where the two forms differ by ~1e-4, and compare in both the hook and the logits."""
    import copy
    import math

    from transformers.activations import NewGELUActivation

    src = ckpts.path("tiny")
    tensors = read_tensors(src)
    hf = copy.deepcopy(ckpts.hf("tiny"))
    with torch.no_grad():
        for i, block in enumerate(hf.transformer.h):
            block.mlp.c_fc.weight.mul_(30)
            tensors[f"transformer.h.{i}.mlp.c_fc.weight"] = block.mlp.c_fc.weight.detach().clone()
    lm = gpt2viz.load_model(str(clone_checkpoint(src, tmp_path / "wide", tensors)), device="cpu")
    ids = lm.tokenizer.encode(PROMPT)
    got = {}
    with lm.hooks.subscribe("blocks.0.mlp.hook_*", lambda n, v: got.__setitem__(n, v.clone())):
        logits, _ = lm.model(torch.tensor([ids]))
    pre, post = got["blocks.0.mlp.hook_pre"], got["blocks.0.mlp.hook_post"]
    erf_gap = (torch.nn.functional.gelu(pre) - NewGELUActivation()(pre)).abs().max()
    assert erf_gap > 1e-4  # the check below can tell the two forms apart
    formula = 0.5 * pre * (1 + torch.tanh(math.sqrt(2 / math.pi) * (pre + 0.044715 * pre**3)))
    torch.testing.assert_close(post, formula, atol=1e-6, rtol=1e-6)
    assert max_diff(logits, hf_logits(hf, ids)) <= TOL


def test_the_two_attention_paths_agree_on_the_bundled_model():
    """The trained `tiny`, whose logits reach about ±14: the paths differ most here (1.7e-5)."""
    lm = gpt2viz.load_model("tiny")
    ids = torch.tensor([lm.tokenizer.encode(PROMPT * 3)])
    fused, _ = lm.model(ids)
    with lm.hooks.subscribe("blocks.*.attn.hook_pattern", lambda name, value: None):
        explicit, _ = lm.model(ids)
    assert 0 < max_diff(fused, explicit) <= PATHS_TOL  # really two paths, within the stated bound
