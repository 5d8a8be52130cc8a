"""oneDNN's prepacked weights (gpt2viz/kernels/packed.py, gpt2viz/kernels/batch.py): bfloat16 models
multiply by them where fbgemm's float16 product does not take a matrix (and in the LM head), and a
float32 model's batched decode steps (one position of several sequences) go to a packed product
by the input's shape, whoever calls the model."""

from __future__ import annotations

import pytest
import torch

import gpt2viz
from gpt2viz.kernels.batch import BatchBlockProduct, BatchHeadProduct
from gpt2viz.kernels import packed
from gpt2viz.model.layers import Conv1D, TiedLMHead
from helpers import hf_logits

PROMPTS = ["The capital of France is", "Once upon a time there", "Hello"]


def products(model) -> list:
    return [getattr(parent, name) for parent, name in packed.product_sites(model)] + [model.lm_head]


@pytest.fixture
def packed_calls(monkeypatch) -> list[int]:
    """The rows of every product through a packed batch weight."""
    calls: list[int] = []
    real = packed.packed_linear
    monkeypatch.setattr(packed, "packed_linear", lambda x, w, b: calls.append(x.size(0)) or real(x, w, b))
    return calls


@pytest.mark.skipif(not packed.available(torch.float32), reason="this torch has no oneDNN")
def test_a_float32_batched_decode_step_multiplies_by_packed_weights_and_matches_transformers(ckpts, packed_calls):
    lm, hf = ckpts.lm("distilgpt2"), ckpts.hf("distilgpt2")  # 768 wide: weights worth packing
    model = lm.model
    assert all(isinstance(layer.batch_product, BatchBlockProduct) for layer in products(model)[:-1])
    assert isinstance(model.lm_head.batch_product, BatchHeadProduct)
    prompts = [lm.tokenizer.encode(p) for p in PROMPTS]
    width = max(map(len, prompts))
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    cache = model.new_cache(len(prompts))
    logits, _ = model(ids, cache, attention_mask=mask)
    assert packed_calls == []  # a prefill: the products gpt2viz.kernels chose for rows
    step, _ = model(torch.tensor([[11]] * 3), cache, attention_mask=torch.cat([mask, torch.ones(3, 1, dtype=mask.dtype)], 1))
    assert packed_calls == [3] * (4 * model.config.n_layer + 1)  # every product of the step, called directly
    for r, p in enumerate(prompts):
        with torch.no_grad():
            ref = hf_logits(hf, p + [11])[0]
        assert float((logits[r, width - len(p):] - ref[:-1]).abs().max()) <= 1e-4
        assert float((step[r, 0] - ref[-1]).abs().max()) <= 1e-4
    # The batch API goes the same way, and its greedy rows are what each prompt gives alone.
    packed_calls.clear()
    out = lm.generate_prompts(PROMPTS, 4)
    assert packed_calls and set(packed_calls) == {3}
    assert [r.token_ids for r in out.rows] == [lm.generate(p, 4).token_ids for p in PROMPTS]


def test_one_sequence_and_small_models_never_pack(tiny_lm, ckpts, packed_calls):
    lm = ckpts.lm("distilgpt2")
    lm.generate(PROMPTS[0], 3)  # one sequence: one row a decode step
    assert packed_calls == []
    # A small model's weights are too small to gain: its layers have no batch product.
    assert all(layer.batch_product is None for layer in products(tiny_lm.model))
    tiny_lm.generate_batch("Hello", 4, 3)
    assert packed_calls == []
    assert all(isinstance(layer, Conv1D) for layer in products(tiny_lm.model)[:-1])
    assert type(tiny_lm.model.lm_head) is TiedLMHead


def test_plain_kernels_mean_no_packed_batch_products(monkeypatch, ckpts):
    monkeypatch.setenv("GPT2VIZ_KERNELS", "plain")
    lm = gpt2viz.load_model(str(ckpts.path("distilgpt2")))
    assert all(layer.batch_product is None for layer in products(lm.model))


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
