"""Batched decoding: several sequences through one cache, one step for all.

`generate_batch` continues one prompt B times; `generate_prompts` continues several prompts of
different lengths, padded on the left with an attention mask (GPT2.forward's `attention_mask`).

A decode step reads every weight once whatever the number of rows it multiplies, so B sequences
cost little more than one until the products stop being bound by memory. Here the B rows share
the prompt: it is read once (a prefill of one row, copied into every row of the cache), then each
step feeds the B newest tokens as one `[B, 1]` batch. Each row samples from its own random
stream (seed + row), so a row is reproducible on its own. Greedy rows are identical, as they
must be: the same prompt and the same arithmetic.

A batched decode step of float32 rows multiplies by packed copies of the weights
(gpt2viz/kernels/batch.py: MKL packs each weight again on every product of several rows), so on a
model with large weights a row's logits can differ from a single sequence's in their last digits.

A row that ends (end of text) is still fed along with the others until every row has ended or
the steps run out (its extra tokens are dropped): the batch's shape stays fixed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from .errors import SettingError
from .generate import (
    STOP_CANCELLED,
    STOP_CONTEXT,
    STOP_EOS,
    STOP_MAX_TOKENS,
    GenerationResult,
    SamplingSettings,
    StepTimes,
    check_request,
    choose_token,
    new_generator,
)
from .i18n import N_
from .model.gpt2 import GPT2

MAX_BATCH = 256


@dataclass
class BatchResult(StepTimes):
    """Every row's continuation (each row's result holds its prompt), and the time of each
    batched step (the first is the prefill)."""

    rows: list[GenerationResult]
    seeds: list[int | None]
    step_ms: list[float] = field(default_factory=list)

    @property
    def batch_size(self) -> int:
        """Rows decoded together."""
        return len(self.rows)

    @property
    def new_tokens(self) -> int:
        """New tokens of all rows."""
        return sum(len(r.token_ids) for r in self.rows)


def row_seeds(seed: int | None, batch_size: int) -> list[int | None]:
    """The seed of each row: seed, seed + 1, ... (None: fresh entropy for every row)."""
    return [None if seed is None else seed + row for row in range(batch_size)]


@torch.inference_mode()
def generate_batch(
    model: GPT2,
    prompt_ids: list[int],
    batch_size: int,
    max_new_tokens: int,
    *,
    settings: SamplingSettings | None = None,
    eos_id: int | None = None,
    on_step: Callable[[int, list[int], float], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> BatchResult:
    """`batch_size` continuations of `prompt_ids`, up to `max_new_tokens` each, decoded together.
    `on_step(step, tokens, ms)` gets each step's B new tokens."""
    settings = settings or SamplingSettings()
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_BATCH:
        raise SettingError(
            "batch_size", N_("{setting} must be an integer from 1 to {max}, got {value!r}"), max=MAX_BATCH, value=batch_size
        )
    check_request(model, prompt_ids, max_new_tokens)
    cache = model.new_cache(batch_size, capacity=min(model.config.n_ctx, len(prompt_ids) + max_new_tokens))
    model.hooks.new_sequence()  # texts of their own: nothing kept from another prompt's pass applies

    def first() -> torch.Tensor:
        return _prefill(model, prompt_ids, cache).expand(batch_size, -1)  # the same row for all, no copy

    def advance(fed: torch.Tensor) -> torch.Tensor:
        return model(fed, cache, last_only=True)[0][:, -1]  # (B, vocab)

    prompts = [list(prompt_ids)] * batch_size
    return _decode_together(model, prompts, len(prompt_ids), first, advance, max_new_tokens, settings, eos_id,
                            on_step, should_stop)


@torch.inference_mode()
def generate_prompts(
    model: GPT2,
    prompts: list[list[int]],
    max_new_tokens: int,
    *,
    settings: SamplingSettings | None = None,
    eos_id: int | None = None,
    on_step: Callable[[int, list[int], float], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    pad_id: int | None = None,
) -> BatchResult:
    """Continues each of `prompts` (lists of ids, of any lengths) by up to `max_new_tokens`,
    decoded together: the prompts are padded on the left to the longest, with an attention mask,
    so that every row computes what it would alone (to the last digits of the kernels' sums).
    Row r samples with seed + r. The batch stops at the context limit when its longest row
    reaches it. Padding is `pad_id` (default: `eos_id`, else 0); no position ever attends to it."""
    settings = settings or SamplingSettings()
    if not isinstance(prompts, list) or not 1 <= len(prompts) <= MAX_BATCH:
        raise SettingError("prompts", N_("{setting} must be a list of 1 to {max} prompts"), max=MAX_BATCH)
    for prompt in prompts:
        check_request(model, prompt, max_new_tokens)
    if pad_id is None:
        pad_id = eos_id if eos_id is not None else 0
    width = max(len(p) for p in prompts)
    cache = model.new_cache(len(prompts), capacity=min(model.config.n_ctx, width + max_new_tokens))
    model.hooks.new_sequence()
    device = model.device
    ids = torch.tensor([[pad_id] * (width - len(p)) + list(p) for p in prompts], device=device)
    mask = [torch.tensor([[False] * (width - len(p)) + [True] * len(p) for p in prompts], device=device)]

    def first() -> torch.Tensor:
        return model(ids, cache, last_only=True, attention_mask=mask[0])[0][:, -1]  # (B, vocab)

    def advance(fed: torch.Tensor) -> torch.Tensor:
        mask[0] = torch.cat([mask[0], torch.ones(len(prompts), 1, dtype=torch.bool, device=device)], dim=1)
        return model(fed, cache, last_only=True, attention_mask=mask[0])[0][:, -1]  # (B, vocab)

    return _decode_together(model, prompts, width, first, advance, max_new_tokens, settings, eos_id, on_step,
                            should_stop)


def _decode_together(
    model: GPT2,
    prompts: list[list[int]],
    length: int,
    first: Callable[[], torch.Tensor],
    advance: Callable[[torch.Tensor], torch.Tensor],
    max_new_tokens: int,
    settings: SamplingSettings,
    eos_id: int | None,
    on_step: Callable[[int, list[int], float], None] | None,
    should_stop: Callable[[], bool] | None,
) -> BatchResult:
    """The decoding loop of a batch: `first()` gives the logits `[B, vocab]` after the prompts,
    `advance(fed)` those after feeding each row's newest token `[B, 1]`;
    `length` is the batch's padded length so far."""
    batch_size = len(prompts)
    n_ctx = model.config.n_ctx
    seeds = row_seeds(settings.seed, batch_size)
    generators = [new_generator(seed) for seed in seeds]
    rows = [GenerationResult(list(prompt), settings=settings) for prompt in prompts]
    result = BatchResult(rows, seeds)
    done = [False] * batch_size
    for step in range(max_new_tokens):
        if length >= n_ctx:
            stop = STOP_CONTEXT
            break
        if should_stop is not None and should_stop():
            stop = STOP_CANCELLED
            break
        start = time.perf_counter()
        if step == 0:
            logits = first()
        else:
            fed = torch.tensor([[r.token_ids[-1]] for r in rows], device=model.device)  # each row's newest
            logits = advance(fed)
        picks = [choose_token(logits[b], settings, g)[0] for b, g in enumerate(generators)]
        ms = (time.perf_counter() - start) * 1000
        result.step_ms.append(ms)
        length += 1
        for b, token in enumerate(picks):
            if done[b]:
                continue
            rows[b].token_ids.append(token)
            if eos_id is not None and token == eos_id:
                done[b] = True
                rows[b].stop_reason = STOP_EOS
        if on_step is not None:
            on_step(step, picks, ms)
        if all(done):
            return result
    else:
        stop = STOP_MAX_TOKENS
    for b in range(batch_size):
        if not done[b]:
            rows[b].stop_reason = stop
    return result


def _prefill(model: GPT2, prompt_ids: list[int], cache) -> torch.Tensor:
    """The prompt's pass for one row, its keys and values copied into every row of `cache`."""
    single = model.new_cache(1, capacity=cache.capacity)
    logits, _ = model(torch.tensor([prompt_ids], device=model.device), single, last_only=True)
    for layer in range(len(cache.keys)):
        cache.keys[layer][:, :, : single.length] = single.keys[layer][:, :, : single.length]
        cache.values[layer][:, :, : single.length] = single.values[layer][:, :, : single.length]
    cache.length = single.length
    return logits[:, -1]  # (1, vocab)
