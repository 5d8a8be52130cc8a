"""oneDNN's prepacked weights (gpt2viz/model/packed.py): bfloat16 models multiply by them where
fbgemm's float16 product does not take a matrix (and in the LM head), and a float32 batch of
several rows swaps them in for its products only while it runs."""

from __future__ import annotations

import pytest
import torch

import gpt2viz
from gpt2viz.model import packed
from gpt2viz.model.layers import Conv1D, TiedLMHead
from helpers import hf_logits

PROMPTS = ["The capital of France is", "Once upon a time there", "Hello"]


def products(model) -> list:
    return [getattr(parent, name) for parent, name in packed.product_sites(model)] + [model.lm_head]


@pytest.mark.skipif(not packed.available(torch.float32), reason="this torch has no oneDNN")
def test_a_float32_batch_multiplies_by_packed_weights_and_matches_transformers(ckpts):
    lm, hf = ckpts.lm("distilgpt2"), ckpts.hf("distilgpt2")  # 768 wide: weights worth packing
    model = lm.model
    prompts = [lm.tokenizer.encode(p) for p in PROMPTS]
    width = max(map(len, prompts))
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    plain = products(model)
    with packed.for_batches(model, len(prompts)):
        inside = products(model)
        cache = model.new_cache(len(prompts))
        logits, _ = model(ids, cache, attention_mask=mask)
        step, _ = model(torch.tensor([[11]] * 3), cache, attention_mask=torch.cat([mask, torch.ones(3, 1, dtype=mask.dtype)], 1))
    assert all(isinstance(layer, packed.PackedLinear) for layer in inside[:-1])
    assert isinstance(inside[-1], packed.PackedLMHead)
    assert all(a is b for a, b in zip(products(model), plain))  # put back afterwards
    for r, p in enumerate(prompts):
        with torch.no_grad():
            ref = hf_logits(hf, p + [11])[0]
        assert float((logits[r, width - len(p):] - ref[:-1]).abs().max()) <= 1e-4
        assert float((step[r, 0] - ref[-1]).abs().max()) <= 1e-4
    # The batch API uses them too, and its greedy rows are what each prompt gives alone.
    out = lm.generate_prompts(PROMPTS, 4)
    assert [r.token_ids for r in out.rows] == [lm.generate(p, 4).token_ids for p in PROMPTS]


def test_one_row_and_small_models_keep_their_products(tiny_lm, ckpts):
    for lm, rows in ((tiny_lm, 8), (ckpts.lm("distilgpt2"), 1)):
        before = products(lm.model)
        with packed.for_batches(lm.model, rows):
            assert all(a is b for a, b in zip(products(lm.model), before))
    assert all(isinstance(layer, Conv1D) for layer in products(tiny_lm.model)[:-1])
    assert type(tiny_lm.model.lm_head) is TiedLMHead


def test_a_batch_inside_a_batch_puts_back_the_float32_products(ckpts):
    model = ckpts.lm("distilgpt2").model
    before = products(model)
    with packed.for_batches(model, 4):
        with packed.for_batches(model, 2):
            pass
        assert not any(a is b for a, b in zip(products(model), before)) or not packed.available(torch.float32)
    assert all(a is b for a, b in zip(products(model), before))


@pytest.mark.skipif(not packed.available(torch.bfloat16), reason="no oneDNN bfloat16 kernels on this CPU")
def test_bfloat16_multiplies_by_packed_weights(tiny_dir):
    lm = gpt2viz.load_model(str(tiny_dir), dtype="bfloat16")
    assert all(isinstance(layer, packed.PackedLinear) for layer in products(lm.model)[:-1])
    assert isinstance(lm.model.lm_head, packed.PackedLMHead)
    f32 = gpt2viz.load_model(str(tiny_dir))
    ids = torch.tensor([f32.tokenizer.encode(PROMPTS[0])])
    got = lm.model(ids)[0].float()
    want = f32.model(ids)[0]
    assert 0 < float((got - want).abs().max()) < 0.2  # bfloat16's rounding, no more
    assert torch.equal(got.argmax(-1), want.argmax(-1))
