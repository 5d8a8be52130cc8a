"""The KV cache: shapes, sizes, positions, and its values against transformers' own cache."""

from __future__ import annotations

import pytest
import torch

from gpt2viz import GPT2Config, KVCache
from gpt2viz.model.kv_cache import GROWTH_CHUNK

PROMPT = "The meaning of life is"  # 5 tokens


def expected_bytes(cfg, T, itemsize=4, batch=1):
    return 2 * cfg.n_layer * batch * cfg.n_head * T * cfg.head_dim * itemsize


@pytest.mark.parametrize("shape", ["tiny", "odd-heads"])
def test_cache_shapes_and_bytes_after_prefill_and_decode(ckpts, shape):
    lm = ckpts.lm(shape)
    cfg = lm.config
    ids = lm.tokenizer.encode(PROMPT)
    T = len(ids)
    cache = lm.model.new_cache()
    assert cache.capacity == cfg.n_ctx
    # Made without a size, it reserves a first chunk, not the whole context.
    assert cache.allocated_bytes == expected_bytes(cfg, min(GROWTH_CHUNK, cfg.n_ctx))
    assert cache.length == 0 and cache.used_bytes == 0

    _, cache = lm.model(torch.tensor([ids]), cache)
    assert cache.length == T
    for layer in range(cfg.n_layer):
        info = cache.layer_info(layer)
        assert info.k_shape == info.v_shape == (1, cfg.n_head, T, cfg.head_dim)
    assert cache.used_bytes == expected_bytes(cfg, T)
    assert cache.bytes_per_position == expected_bytes(cfg, 1)

    logits, cache = lm.model(torch.tensor([[407]]), cache)  # one decode step
    assert logits.shape == (1, 1, cfg.vocab_size)
    assert cache.length == T + 1
    assert cache.layer_info(cfg.n_layer - 1).k_shape == (1, cfg.n_head, T + 1, cfg.head_dim)
    assert cache.used_bytes == expected_bytes(cfg, T + 1)
    assert cache.allocated_bytes == expected_bytes(cfg, min(GROWTH_CHUNK, cfg.n_ctx))  # nothing reallocated


def test_cached_keys_and_values_equal_transformers(ckpts):
    lm, hf = ckpts.lm("tiny"), ckpts.hf("tiny")
    ids = lm.tokenizer.encode(PROMPT)
    cache = lm.model.new_cache()
    lm.model(torch.tensor([ids]), cache)
    with torch.no_grad():
        ref = hf(torch.tensor([ids]), use_cache=True).cache
    for layer in range(lm.config.n_layer):
        k = cache.keys[layer][:, :, : cache.length]
        v = cache.values[layer][:, :, : cache.length]
        torch.testing.assert_close(k, ref.layers[layer].keys, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(v, ref.layers[layer].values, atol=1e-5, rtol=1e-5)


def test_gpt2_small_sizes_from_facts():
    cfg = GPT2Config()  # the GPT-2 small shape
    fp32 = KVCache(cfg, dtype=torch.float32, reserve=1024)
    assert fp32.keys[0].shape == (1, 12, 1024, 64)
    assert fp32.bytes_per_position == 73_728
    assert fp32.allocated_bytes == 72 * 2**20
    fp16 = KVCache(cfg, capacity=8, dtype=torch.float16)
    assert fp16.bytes_per_position == 36_864
    assert fp16.itemsize == 2


def test_decode_step_uses_position_offset(tiny_lm, tiny_hf):
    """A decode step's position id is past_len: its pos embedding is wpe[past_len], and its
    logits equal the last row of a full pass."""
    lm = tiny_lm
    ids = lm.tokenizer.encode(PROMPT) + [407]
    cache = lm.model.new_cache()
    lm.model(torch.tensor([ids[:-1]]), cache)
    seen = {}
    with lm.hooks.subscribe("hook_pos_embed", lambda name, value: seen.setdefault(name, value.clone())):
        step, _ = lm.model(torch.tensor([ids[-1:]]), cache)
    torch.testing.assert_close(seen["hook_pos_embed"][0, 0], lm.model.wpe.weight[len(ids) - 1])
    full, _ = lm.model(torch.tensor([ids]))
    torch.testing.assert_close(step[0, 0], full[0, -1], atol=1e-5, rtol=0)
    with torch.no_grad():
        ref = tiny_hf(torch.tensor([ids])).logits[0, -1]
    assert float((step[0, 0] - ref).abs().max()) <= 1e-4


def test_reset_forgets_positions(tiny_lm):
    ids = torch.tensor([tiny_lm.tokenizer.encode(PROMPT)])
    cache = tiny_lm.model.new_cache()
    first, _ = tiny_lm.model(ids, cache)
    cache.reset()
    assert cache.length == 0 and cache.used_bytes == 0
    again, _ = tiny_lm.model(ids, cache)
    assert torch.equal(first, again)
    assert cache.length == ids.shape[1]


def test_context_overflow_is_refused(tiny_lm):
    n_ctx = tiny_lm.config.n_ctx
    with pytest.raises(ValueError):
        tiny_lm.model(torch.zeros(1, n_ctx + 1, dtype=torch.long))
    cache = tiny_lm.model.new_cache()
    tiny_lm.model(torch.zeros(1, n_ctx - 1, dtype=torch.long), cache)
    with pytest.raises(ValueError):
        tiny_lm.model(torch.zeros(1, 2, dtype=torch.long), cache)


def test_batched_cache_shapes(tiny_lm):
    cfg = tiny_lm.config
    cache = tiny_lm.model.new_cache(batch_size=2)
    tiny_lm.model(torch.tensor([[464, 3616, 286], [464, 3139, 286]]), cache)
    assert cache.layer_info(0).k_shape == (2, cfg.n_head, 3, cfg.head_dim)
    assert cache.used_bytes == expected_bytes(cfg, 3, batch=2)


def test_a_cache_without_a_size_grows_in_chunks_and_keeps_what_it_holds(tiny_lm):
    """Past its first chunk a cache doubles, in whole chunks, up to the context; the positions it
    held before growing are the same numbers after, and the logits equal a full pass's."""
    lm = tiny_lm
    n_ctx = lm.config.n_ctx
    ids = (lm.tokenizer.encode(PROMPT * 40))[: GROWTH_CHUNK + 10]
    cache = lm.model.new_cache()
    lm.model(torch.tensor([ids[:GROWTH_CHUNK - 1]]), cache)
    assert cache.allocated == GROWTH_CHUNK
    before = cache.keys[-1][:, :, : cache.length].clone()
    for token in ids[GROWTH_CHUNK - 1 : -1]:
        lm.model(torch.tensor([[token]]), cache)
    assert cache.allocated == min(2 * GROWTH_CHUNK, n_ctx)
    torch.testing.assert_close(cache.keys[-1][:, :, : before.size(2)], before, rtol=0, atol=0)
    step, _ = lm.model(torch.tensor([ids[-1:]]), cache)
    full, _ = lm.model(torch.tensor([ids]))
    torch.testing.assert_close(step[0, -1], full[0, -1], atol=1e-4, rtol=1e-4)
    # A pass that needs more than twice the room gets what it needs, rounded up to a chunk.
    big = lm.model.new_cache()
    lm.model(torch.tensor([ids[: GROWTH_CHUNK + 1]]), big)
    assert big.allocated == min(2 * GROWTH_CHUNK, n_ctx)
    small = lm.model.new_cache(reserve=3)
    lm.model(torch.tensor([ids[: GROWTH_CHUNK + 1]]), small)
    assert small.allocated == min(2 * GROWTH_CHUNK, n_ctx)  # what it needs, rounded up to a chunk


def test_generation_reserves_what_the_run_needs_once(tiny_lm):
    """Generation reserves the prompt plus the new tokens up front (not n_ctx) and never grows."""
    lm = tiny_lm
    seen = []
    with lm.hooks.subscribe("kv_cache", lambda name, state: seen.append(state)):
        lm.generate(PROMPT, 6)
    per_position = seen[0].bytes_per_position
    assert {s.allocated_bytes for s in seen} == {per_position * (5 + 6)}
    assert seen[0].capacity == lm.config.n_ctx  # the most it may hold is still the context
