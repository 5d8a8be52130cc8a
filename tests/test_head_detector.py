"""The head detector (gpt2viz/head_detector.py): TransformerLens's three jobs on a hand-made
sequence, a head made to do a job scores what a perfect head scores, and the bundled model, which
learned little beyond Shakespeare's surface, has no head near any job but the previous token's."""

from __future__ import annotations

import torch

import gpt2viz
from gpt2viz.head_detector import (
    duplicate_token_pattern,
    induction_pattern,
    previous_token_pattern,
    repeated_random_tokens,
    score_heads,
)


def places(pattern: torch.Tensor) -> set[tuple[int, int]]:
    return {(int(i), int(j)) for i, j in pattern.nonzero()}


def test_the_three_jobs_as_transformerlens_defines_them():
    tokens = torch.tensor([5, 7, 9, 5, 7])
    assert places(previous_token_pattern(tokens)) == {(1, 0), (2, 1), (3, 2), (4, 3)}
    assert places(duplicate_token_pattern(tokens)) == {(3, 0), (4, 1)}
    assert places(induction_pattern(tokens)) == {(3, 1), (4, 2)}  # the token after each earlier copy


def test_a_head_made_to_do_induction_scores_as_a_perfect_one(ckpts):
    model = ckpts.lm("tiny").model
    tokens = repeated_random_tokens(12, model.config.vocab_size, seed=4)
    perfect = induction_pattern(tokens)
    # Rows with no earlier copy attend to themselves; the others split evenly over their places.
    rows = perfect + torch.diag((perfect.sum(-1) == 0).float())
    rows = rows / rows.sum(-1, keepdim=True)

    def make_induction(name: str, pattern: torch.Tensor) -> torch.Tensor:
        edited = pattern.clone()
        edited[0, 1] = rows
        return edited

    with model.hooks.subscribe("blocks.1.attn.hook_pattern", make_induction):
        scores = score_heads(model, tokens)
    assert abs(float(scores.scores["induction"][1, 1]) - scores.best["induction"]) < 1e-6
    assert scores.best["induction"] == 12 / 24  # every row of the second half has a place
    assert scores.top("induction", 1)[0][:2] == (1, 1)
    assert scores.found("induction")[0][:2] == (1, 1)
    # Self-attention on the first half is neither a previous-token nor a duplicate-token job.
    assert float(scores.scores["previous_token"][1, 1]) < 0.1


def test_the_bundled_model_has_no_induction_or_duplicate_heads():
    lm = gpt2viz.load_model("tiny")
    tokens = repeated_random_tokens(30, lm.config.vocab_size, seed=0, first=lm.config.eos_token_id)
    scores = score_heads(lm.model, tokens)
    assert scores.scores["induction"].shape == (lm.config.n_layer, lm.config.n_head)
    # Measured: 0.011 and 0.014 at best, against 0.49 for a head that did the job.
    assert float(scores.scores["induction"].max()) < 0.1 * scores.best["induction"]
    assert float(scores.scores["duplicate_token"].max()) < 0.1 * scores.best["duplicate_token"]
    assert scores.found("induction") == scores.found("duplicate_token") == scores.found("previous_token") == []


def test_a_head_that_spreads_its_attention_evenly_scores_chance(ckpts):
    model = ckpts.lm("tiny").model
    tokens = repeated_random_tokens(10, model.config.vocab_size, seed=2, first=0)
    T = tokens.numel()
    even = torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]  # row i: 1 / (i + 1) on 0..i

    def spread(name: str, pattern: torch.Tensor) -> torch.Tensor:
        return even.expand_as(pattern).clone()

    with model.hooks.subscribe("blocks.*.attn.hook_pattern", spread):
        scores = score_heads(model, tokens)
    for job, chance in scores.chance.items():
        assert torch.allclose(scores.scores[job], torch.full_like(scores.scores[job], chance), atol=1e-6), job
    assert 0 < scores.chance["induction"] < 0.1 * scores.best["induction"]


def test_a_llama_s_heads_are_scored_per_query_head(tmp_path):
    from test_llama import write_llama

    from gpt2viz.model.llama import load_llama

    write_llama(tmp_path, 9, 3, True)
    model = load_llama(tmp_path)
    scores = score_heads(model, repeated_random_tokens(10, model.config.vocab_size, seed=1))
    assert scores.scores["induction"].shape == (model.config.n_layer, 9)
    assert all(0 <= float(s.min()) and float(s.max()) <= 1 for s in scores.scores.values())
