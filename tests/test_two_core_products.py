"""Decode-step products split over two cores give the numbers of the plain kernels."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers import PROMPT
from gpt2viz.model import layers
from gpt2viz.model.layers import SPLIT_MAX_ROWS, UNEMBED_SPLIT_MAX_ROWS, Conv1D, unembed


@pytest.fixture
def two_threads():
    """The split runs only with more than one torch thread; make sure the test exercises it."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def any_size(monkeypatch):
    """Split weights of every size, so small test matrices exercise the split's arithmetic."""
    monkeypatch.setattr(layers, "SPLIT_MIN_BYTES", 0)


@pytest.fixture
def count_bmm(monkeypatch):
    """How many batched products (the two-core path) ran."""
    calls = []
    for name in ("bmm", "baddbmm"):
        real = getattr(torch, name)

        def counting(*args, _real=real, **kwargs):
            calls.append(args[0].shape)
            return _real(*args, **kwargs)

        monkeypatch.setattr(layers.torch, name, counting)
    return calls


def _conv(n_in: int, n_out: int) -> Conv1D:
    conv = Conv1D(n_in, n_out)
    conv.weight = torch.nn.Parameter(torch.randn(n_in, n_out), requires_grad=False)
    conv.bias = torch.nn.Parameter(torch.randn(n_out), requires_grad=False)
    return conv


@pytest.mark.parametrize("rows", [1, 2, SPLIT_MAX_ROWS, SPLIT_MAX_ROWS + 1])
@pytest.mark.parametrize("n_in,n_out", [(64, 96), (100, 112), (112, 336), (768, 2304), (3072, 768)])
def test_conv1d_split_equals_addmm(two_threads, any_size, count_bmm, rows, n_in, n_out):
    torch.manual_seed(rows * n_in)
    conv = _conv(n_in, n_out)
    x = torch.randn(1, rows, n_in)
    got = conv(x)
    want = torch.addmm(conv.bias, x[0], conv.weight)
    assert got.shape == (1, rows, n_out)
    # The same dot products as addmm: a cached decode step reproduces a full pass digit for digit.
    assert torch.equal(got[0], want)
    assert len(count_bmm) == (1 if rows <= SPLIT_MAX_ROWS else 0)


@pytest.mark.parametrize("n_out", [33, 300])
def test_conv1d_widths_that_would_round_differently_use_the_plain_product(two_threads, any_size, count_bmm, n_out):
    conv = _conv(10, n_out)
    x = torch.randn(1, 1, 10)
    assert torch.equal(conv(x)[0], torch.addmm(conv.bias, x[0], conv.weight))
    assert count_bmm == []


@pytest.mark.parametrize("vocab", [50, 51])  # GPT-2's vocabulary is odd: one row left over
@pytest.mark.parametrize("rows", [1, 3, SPLIT_MAX_ROWS + 2, UNEMBED_SPLIT_MAX_ROWS, UNEMBED_SPLIT_MAX_ROWS + 1])
def test_unembed_split_equals_linear(two_threads, any_size, count_bmm, vocab, rows):
    torch.manual_seed(vocab + rows)
    wte = torch.randn(vocab, 24)
    x = torch.randn(1, rows, 24)
    got = unembed(x, wte)
    assert got.shape == (1, rows, vocab)
    # Each logit is the same dot product either way; only the kernel's summation order may differ.
    torch.testing.assert_close(got, F.linear(x, wte), atol=1e-5, rtol=1e-5)
    assert len(count_bmm) == (1 if rows <= UNEMBED_SPLIT_MAX_ROWS else 0)


def test_small_weights_use_the_plain_product(two_threads, count_bmm):
    """Below SPLIT_MIN_BYTES one core reads a weight faster than the split costs to set up."""
    conv = _conv(112, 336)  # 147 KiB: the bundled model's c_attn
    conv(torch.randn(1, 1, 112))
    assert count_bmm == []
    big = _conv(768, 2304)  # 6.75 MiB: GPT-2 small's c_attn
    big(torch.randn(1, 1, 768))
    assert len(count_bmm) == 1


def test_one_thread_uses_plain_products(any_size, count_bmm):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        conv = _conv(64, 64)
        conv(torch.randn(1, 1, 64))
        unembed(torch.randn(1, 1, 8), torch.randn(11, 8))
    finally:
        torch.set_num_threads(before)
    assert count_bmm == []


def test_decode_step_on_two_cores_matches_transformers(two_threads, count_bmm, ckpts):
    """A whole cached decode step through the split products, against transformers."""
    lm, hf = ckpts.lm("distilgpt2"), ckpts.hf("distilgpt2")
    ids = lm.tokenizer.encode(PROMPT)
    cache = lm.model.new_cache()
    lm.model(torch.tensor([ids[:-1]]), cache)
    assert SPLIT_MAX_ROWS < len(ids) - 1 <= UNEMBED_SPLIT_MAX_ROWS
    assert len(count_bmm) == 1  # prefill: the block products are plain, the LM head is split
    step, _ = lm.model(torch.tensor([ids[-1:]]), cache)
    # Four products per block (all at least SPLIT_MIN_BYTES) plus the LM head went through the split.
    assert len(count_bmm) == 1 + 4 * lm.config.n_layer + 1
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0, -1]
    assert float((step[0, 0] - ref).abs().max()) <= 1e-4
