"""Which attention heads do a known job: previous-token, duplicate-token and induction heads, scored
as TransformerLens's head detector (`transformer_lens.head_detector.detect_head`) scores them.

A job is a pattern of where a head should look, `[T, T]`, 1 where a query should attend:

- **previous token**: position i looks at i - 1;
- **duplicate token**: at every earlier position holding the same token as i;
- **induction**: at the position just after each earlier copy of i's token (the token that came
  next last time: what an induction head copies).

A head's score is the share of its attention that falls on those places:
`sum(pattern * job) / sum(pattern)` over the whole `[T, T]` pattern (TL's `error_measure="mul"`,
with nothing excluded). Rows without a place to look (the first half of a repeated sequence has
no earlier copy) count in the sum too, so on n random tokens repeated once a perfect induction
head scores n / 2n = 0.5 (n / (2n + 1) with a beginning-of-text token in front); `best` says it.

Works on any model here whose forward fires `blocks.N.attn.hook_pattern` (GPT-2's and LLaMA's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .model.gpt2 import GPT2
    from .model.llama import Llama

__all__ = [
    "HeadScores", "duplicate_token_pattern", "induction_pattern", "previous_token_pattern", "repeated_random_tokens",
    "score_heads",
]

JOBS = ("previous_token", "duplicate_token", "induction")


def previous_token_pattern(tokens: torch.Tensor) -> torch.Tensor:
    """`[T, T]`: 1 at (i, i - 1)."""
    T = tokens.numel()
    pattern = torch.zeros(T, T)
    pattern[1:, :-1] = torch.eye(T - 1)
    return pattern


def duplicate_token_pattern(tokens: torch.Tensor) -> torch.Tensor:
    """`[T, T]`: 1 at (i, j) for every earlier j < i holding i's token."""
    same = (tokens[:, None] == tokens[None, :]).float()
    return torch.tril(same, diagonal=-1)


def induction_pattern(tokens: torch.Tensor) -> torch.Tensor:
    """`[T, T]`: 1 at (i, j + 1) for every earlier copy j of i's token (j + 1 <= i)."""
    duplicates = duplicate_token_pattern(tokens)
    shifted = torch.zeros_like(duplicates)
    shifted[:, 1:] = duplicates[:, :-1]  # the place after each copy
    return torch.tril(shifted)


PATTERNS = {"previous_token": previous_token_pattern, "duplicate_token": duplicate_token_pattern,
            "induction": induction_pattern}


def repeated_random_tokens(n: int, vocab_size: int, seed: int = 0, first: int | None = None) -> torch.Tensor:
    """`n` random token ids, then the same `n` again (`first` in front, a beginning-of-text token,
    when given): the sequence on which induction heads show."""
    generator = torch.Generator().manual_seed(seed)
    half = torch.randint(0, vocab_size, (n,), generator=generator)
    tokens = torch.cat([half, half])
    return tokens if first is None else torch.cat([torch.tensor([first]), tokens])


# A head does a job when it scores at least this share of what a perfect one would (`found`): the
# bundled tiny model's best heads score 0.06, 0.02 and 0.01 of it, SmolLM2's 0.90, 0.59 and 0.83.
FOUND_SHARE = 0.3


@dataclass(frozen=True)
class HeadScores:
    """Each job's score for every head, `[n_layer, n_head]`, on `tokens`; `best`: what a head
    that did the job perfectly would score on them; `chance`: what a head spreading its attention
    evenly over every position it may see would score."""

    tokens: torch.Tensor
    scores: dict[str, torch.Tensor]
    best: dict[str, float]
    chance: dict[str, float]

    def found(self, job: str) -> list[tuple[int, int, float]]:
        """The heads that do `job` (at least FOUND_SHARE of `best`), highest first: (layer, head, score)."""
        return [top for top in self.top(job, self.scores[job].numel()) if top[2] >= FOUND_SHARE * self.best[job]]

    def top(self, job: str, k: int = 3) -> list[tuple[int, int, float]]:
        """The `k` heads that score highest at `job`: (layer, head, score)."""
        scores = self.scores[job]
        values, flat = scores.flatten().topk(min(k, scores.numel()))
        n_head = scores.size(1)
        return [(int(i) // n_head, int(i) % n_head, float(v)) for v, i in zip(values, flat)]


def score_heads(model: GPT2 | Llama, tokens: torch.Tensor) -> HeadScores:
    """Runs `model` (a GPT2 or a Llama) once on `tokens` `(T,)` and scores every head at every job."""
    tokens = tokens.flatten()
    patterns: dict[int, torch.Tensor] = {}

    def keep(name: str, pattern: torch.Tensor) -> None:
        patterns[int(name.split(".")[1])] = pattern[0].float()  # (nh, T, T): the one sequence

    with model.hooks.subscribe("blocks.*.attn.hook_pattern", keep):
        model(tokens[None, :])
    jobs = {job: make(tokens) for job, make in PATTERNS.items()}
    scores = {}
    for job, where in jobs.items():
        per_layer = [(patterns[layer] * where).sum((-2, -1)) / patterns[layer].sum((-2, -1)) for layer in sorted(patterns)]
        scores[job] = torch.stack(per_layer)  # (n_layer, nh)
    T = tokens.numel()
    best = {job: float((where.sum(-1) > 0).sum()) / T for job, where in jobs.items()}
    seen = torch.arange(1, T + 1, dtype=torch.float32)  # the positions query i may attend to
    chance = {job: float((where.sum(-1) / seen).mean()) for job, where in jobs.items()}
    return HeadScores(tokens, scores, best, chance)
