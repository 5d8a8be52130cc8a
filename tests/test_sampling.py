"""Decoding: temperature, top-k, top-p on hand-made distributions; seeded sampling end to end."""

from __future__ import annotations

import pytest
import torch

from gpt2viz.errors import UsageError
from gpt2viz.generate import SamplingSettings, choose_token, next_token_probs

PROBS = [0.5, 0.3, 0.15, 0.05]


def logits_of(probs, dtype=torch.float64) -> torch.Tensor:
    return torch.tensor(probs, dtype=torch.float64).log().to(dtype)


def kept(probs: torch.Tensor) -> set[int]:
    return set(probs.nonzero().flatten().tolist())


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(
    "top_p, nucleus",
    [(0.5, {0}), (0.51, {0, 1}), (0.8, {0, 1}), (0.81, {0, 1, 2}), (0.95, {0, 1, 2}),
     (0.96, {0, 1, 2, 3}), (1.0, {0, 1, 2, 3}), (0.1, {0})],
)
def test_top_p_keeps_exactly_the_nucleus(dtype, top_p, nucleus):
    probs = next_token_probs(logits_of(PROBS, dtype), SamplingSettings(temperature=1.0, top_p=top_p))
    assert kept(probs) == nucleus
    mass = sum(PROBS[i] for i in nucleus)
    expected = torch.tensor([PROBS[i] / mass if i in nucleus else 0.0 for i in range(4)], dtype=torch.float64)
    torch.testing.assert_close(probs, expected, atol=1e-6, rtol=0)


def test_top_p_order_does_not_matter():
    shuffled = [0.15, 0.05, 0.5, 0.3]
    probs = next_token_probs(logits_of(shuffled), SamplingSettings(temperature=1.0, top_p=0.8))
    assert kept(probs) == {2, 3}


@pytest.mark.parametrize("temperature", [0.25, 0.7, 1.0, 1.5, 4.0])
def test_temperature_scales_logits(temperature):
    logits = torch.randn(1000, generator=torch.Generator().manual_seed(0)) * 3
    probs = next_token_probs(logits, SamplingSettings(temperature=temperature))
    assert probs.dtype == torch.float64
    expected = torch.softmax(logits.double() / temperature, dim=-1)
    torch.testing.assert_close(probs, expected, atol=1e-12, rtol=1e-9)


def test_temperature_large_logits_do_not_overflow():
    logits = torch.tensor([1000.0, 999.0, -1000.0])
    probs = next_token_probs(logits, SamplingSettings(temperature=0.5))
    assert torch.isfinite(probs).all()
    torch.testing.assert_close(probs, torch.softmax(logits.double() / 0.5, dim=-1))


def test_greedy_distribution_is_plain_softmax_and_choice_is_argmax():
    logits = torch.tensor([0.1, 2.0, -1.0, 1.9])
    probs = next_token_probs(logits, SamplingSettings())
    torch.testing.assert_close(probs, torch.softmax(logits.double(), dim=-1))
    token, _ = choose_token(logits, SamplingSettings(), None)
    assert token == 1


def test_top_k_keeps_the_k_most_likely():
    logits = torch.tensor([0.0, 3.0, 1.0, 2.0, -1.0, 2.5])
    probs = next_token_probs(logits, SamplingSettings(temperature=1.0, top_k=3))
    assert kept(probs) == {1, 3, 5}
    top = logits[[1, 3, 5]].double()
    torch.testing.assert_close(probs[[1, 3, 5]], torch.softmax(top, dim=-1))


def test_top_k_then_top_p():
    probs = next_token_probs(logits_of([0.4, 0.3, 0.2, 0.1]), SamplingSettings(temperature=1.0, top_k=3, top_p=0.7))
    # top-3 renormalised: 4/9, 3/9, 2/9; the nucleus reaching 0.7 is {0, 1} (7/9).
    assert kept(probs) == {0, 1}


def test_sampling_never_leaves_the_nucleus():
    logits = logits_of(PROBS)
    settings = SamplingSettings(temperature=1.0, top_p=0.8)
    gen = torch.Generator().manual_seed(0)
    drawn = [choose_token(logits, settings, gen)[0] for _ in range(300)]
    assert set(drawn) == {0, 1}
    # Frequencies follow the renormalised nucleus (0.625 / 0.375), loosely.
    assert 0.5 < drawn.count(0) / len(drawn) < 0.75


@pytest.mark.parametrize(
    "kwargs",
    [dict(temperature=-0.1), dict(temperature=float("nan")), dict(temperature=float("inf")),
     dict(temperature=1.0, top_k=0), dict(temperature=1.0, top_p=0.0), dict(temperature=1.0, top_p=1.5)],
)
def test_invalid_settings_are_refused(kwargs):
    with pytest.raises(UsageError):
        SamplingSettings(**kwargs)


# --- end to end, on the tiny random checkpoint (a flat-ish distribution over 50,257 tokens) ---

PROMPT = "The capital of France is"


def test_same_seed_same_ids(tiny_lm):
    a = tiny_lm.generate(PROMPT, 12, temperature=1.0, seed=1234)
    b = tiny_lm.generate(PROMPT, 12, temperature=1.0, seed=1234)
    assert len(a.token_ids) == 12
    assert a.token_ids == b.token_ids


def test_different_seeds_differ(tiny_lm):
    runs = {tuple(tiny_lm.generate(PROMPT, 8, temperature=1.0, seed=s).token_ids) for s in range(4)}
    assert len(runs) == 4


def test_seeded_sampling_same_with_and_without_cache(tiny_lm):
    a = tiny_lm.generate(PROMPT, 10, temperature=0.8, top_p=0.9, seed=7, use_cache=True)
    b = tiny_lm.generate(PROMPT, 10, temperature=0.8, top_p=0.9, seed=7, use_cache=False)
    assert a.token_ids == b.token_ids


@pytest.mark.parametrize("temperature", [0.7, 1.0, 5.0])
def test_top_k_1_equals_greedy(tiny_lm, temperature):
    greedy = tiny_lm.generate(PROMPT, 10)
    top1 = tiny_lm.generate(PROMPT, 10, temperature=temperature, top_k=1, seed=99)
    assert top1.token_ids == greedy.token_ids


def test_sampling_is_not_greedy(tiny_lm):
    greedy = tiny_lm.generate(PROMPT, 10).token_ids
    sampled = tiny_lm.generate(PROMPT, 10, temperature=1.0, seed=0).token_ids
    assert sampled != greedy


def test_a_shared_generator_makes_a_resumed_sampled_run_equal_an_uninterrupted_one(tiny_lm):
    from gpt2viz.generate import SamplingSettings, generate, new_generator

    settings = SamplingSettings(temperature=1.0, top_k=40, seed=11)
    prompt = tiny_lm.tokenizer.encode("The meaning of life is")
    whole = generate(tiny_lm.model, prompt, 12, settings=settings).token_ids
    rng = new_generator(settings.seed)
    first = generate(tiny_lm.model, prompt, 5, settings=settings, generator=rng).token_ids
    rest = generate(tiny_lm.model, prompt + first, 7, settings=settings, generator=rng).token_ids
    assert first + rest == whole
    # Without the shared generator the second half restarts the random sequence.
    restarted = generate(tiny_lm.model, prompt + first, 7, settings=settings).token_ids
    assert restarted != rest
