"""Generation: why it stops (eos, context limit, max tokens) and one timing entry per token."""

from __future__ import annotations

import pytest
import torch

import gpt2viz
from gpt2viz.errors import UsageError
from gpt2viz.generate import generate
from helpers import clone_checkpoint, hf_greedy, read_tensors

PROMPT = "The meaning of life is"


@pytest.fixture(scope="module")
def eos_lm(tiny_dir, tmp_path_factory):
    """The tiny checkpoint edited so that <|endoftext|> wins at every position: ln_f outputs a
    constant vector b (weight 0), and wte[50256] = 10 b."""
    tensors = read_tensors(tiny_dir)
    b = torch.randn(64, generator=torch.Generator().manual_seed(0))
    tensors["transformer.ln_f.weight"] = torch.zeros(64)
    tensors["transformer.ln_f.bias"] = b
    wte = tensors["transformer.wte.weight"].clone()
    wte[50256] = 10 * b
    tensors["transformer.wte.weight"] = wte
    directory = clone_checkpoint(tiny_dir, tmp_path_factory.mktemp("eos") / "ckpt", tensors)
    return gpt2viz.load_model(str(directory), device="cpu")


@pytest.mark.parametrize("use_cache", [True, False])
def test_stops_at_endoftext(eos_lm, use_cache):
    out = eos_lm.generate(PROMPT, 10, use_cache=use_cache)
    assert out.token_ids == [50256]
    assert out.stop_reason == "eos"
    assert len(out.step_ms) == 1


def test_sampling_stops_at_endoftext(eos_lm):
    out = eos_lm.generate(PROMPT, 10, temperature=1.0, seed=3)
    assert out.token_ids == [50256] and out.stop_reason == "eos"


def test_eos_id_is_honoured(tiny_lm):
    ids = tiny_lm.tokenizer.encode(PROMPT)
    free = generate(tiny_lm.model, ids, 5)
    assert free.stop_reason == "max_new_tokens" and len(free.token_ids) == 5
    first = free.token_ids[0]
    stopped = generate(tiny_lm.model, ids, 5, eos_id=first)
    assert stopped.token_ids == [first]
    assert stopped.stop_reason == "eos"
    third = free.token_ids[2]
    if third not in free.token_ids[:2]:
        stopped3 = generate(tiny_lm.model, ids, 5, eos_id=third)
        assert stopped3.token_ids == free.token_ids[:3] and stopped3.stop_reason == "eos"


@pytest.mark.parametrize("use_cache", [True, False])
def test_stops_at_context_limit(tiny_lm, tiny_hf, use_cache):
    n_ctx = tiny_lm.config.n_ctx
    assert n_ctx == 128
    base = tiny_lm.tokenizer.encode("The meaning of life is, as everyone knows, not 42. ")
    prompt = (base * 20)[: n_ctx - 3]
    out = tiny_lm.generate(prompt, 10, use_cache=use_cache)
    assert out.stop_reason == "context"
    assert len(out.token_ids) == 3
    assert len(out.step_ms) == 3
    assert out.token_ids == hf_greedy(tiny_hf, prompt, 3)


def test_full_prompt_generates_nothing(tiny_lm):
    out = tiny_lm.generate([464] * tiny_lm.config.n_ctx, 5)
    assert out.token_ids == [] and out.step_ms == [] and out.stop_reason == "context"


def test_prompt_longer_than_context_is_refused(tiny_lm):
    with pytest.raises(UsageError):
        tiny_lm.generate([464] * (tiny_lm.config.n_ctx + 1), 5)


def test_step_ms_one_entry_per_token(tiny_lm):
    for use_cache in (True, False):
        out = tiny_lm.generate(PROMPT, 6, use_cache=use_cache)
        assert out.stop_reason == "max_new_tokens"
        assert len(out.token_ids) == len(out.step_ms) == 6
        assert all(isinstance(ms, float) and ms > 0 for ms in out.step_ms)
        assert out.ttft_ms == out.step_ms[0]
        assert out.prompt_ids == tiny_lm.tokenizer.encode(PROMPT)


def test_zero_new_tokens(tiny_lm):
    out = tiny_lm.generate(PROMPT, 0)
    assert out.token_ids == [] and out.step_ms == [] and out.stop_reason == "max_new_tokens"


def test_prompt_as_ids_equals_prompt_as_text(tiny_lm):
    a = tiny_lm.generate(PROMPT, 4)
    b = tiny_lm.generate(tiny_lm.tokenizer.encode(PROMPT), 4)
    assert a.token_ids == b.token_ids
