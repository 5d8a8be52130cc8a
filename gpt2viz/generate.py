"""Choosing next tokens: greedy and sampled decoding, with and without the KV cache.

Both loops call the same step function; the only difference is what they feed it. Without a
cache every step re-reads the whole sequence; with one, the prompt is read once (the prefill)
and each later step reads only the newest token (a decode step).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from .errors import GenerationError, SettingError
from .i18n import N_, _, count
from .input_files import shown
from .model.gpt2 import GPT2
from .model.kv_cache import KVCache

STOP_EOS = "eos"  # the model produced <|endoftext|>
STOP_CONTEXT = "context"  # the sequence filled the context window
STOP_MAX_TOKENS = "max_new_tokens"  # as many tokens as asked for
STOP_CANCELLED = "cancelled"  # the caller asked to stop

# Beyond this temperature every distribution is flat to many digits; a trace records at most 1e15.
MAX_TEMPERATURE = 1e6
# torch seeds are 64-bit; a batch samples row r with seed + r, so seeds stay well below the top.
MAX_SEED = 2**63 - 1
# A top-k is at most the model's vocabulary (a trace records no more): what the command line and
# the settings form say of one beyond it, naming the setting their own way.
TOP_K_OVER_VOCAB = N_("{setting} {k}: more than the model's vocabulary of {vocab} tokens")


@dataclass(frozen=True)
class SamplingSettings:
    """How the next token is picked. Temperature 0 means greedy (always the most likely)."""

    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        # Comparisons that are False for NaN, and no float() of an integer too large for one.
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= MAX_TEMPERATURE:
            raise SettingError("temperature", N_("{setting} must be a number from 0 to {max}, got {value}"),
                               max=count(int(MAX_TEMPERATURE)), value=shown(t))
        if self.top_k is not None and (isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 1):
            raise SettingError("top_k", N_("{setting} must be an integer >= 1, got {value}"), value=shown(self.top_k))
        p = self.top_p
        if p is not None and (isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1):
            raise SettingError("top_p", N_("{setting} must be in (0, 1], got {value}"), value=shown(p))
        seed = self.seed
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED):
            raise SettingError("seed", N_("{setting} must be an integer from 0 to {max}, got {value}"),
                               max=count(MAX_SEED), value=shown(seed))

    @property
    def greedy(self) -> bool:
        """Whether these settings always take the most likely token (temperature 0)."""
        return self.temperature == 0


def next_token_probs(logits: torch.Tensor, settings: SamplingSettings) -> torch.Tensor:
    """The distribution a token is drawn from, `[vocab]` float64, after temperature, top-k, top-p.

    Greedy decoding has no temperature; its distribution is the plain softmax, shown for context.
    Scores that are not finite (NaN, +infinity, or all -infinity) are a GenerationError: no
    distribution can be drawn from them.
    """
    logits = logits.detach().cpu().to(torch.float64)  # on the CPU first: MPS has no float64
    top = float(logits.max())  # NaN if any score is NaN
    if not math.isfinite(top):
        raise non_finite_scores(logits)
    if not settings.greedy:
        # The best score is subtracted before dividing, so that no temperature, however small,
        # makes inf - inf: the best token keeps 0, the others go to -inf at worst.
        logits = (logits - top) / settings.temperature
        if settings.top_k is not None and settings.top_k < logits.numel():
            kth_best = torch.topk(logits, settings.top_k).values[-1]
            logits = logits.masked_fill(logits < kth_best, float("-inf"))
    # Subtracting the max before exp (softmax does) keeps large logits from overflowing.
    probs = torch.softmax(logits, dim=-1)
    if not settings.greedy and settings.top_p is not None and settings.top_p < 1:
        sorted_probs, order = probs.sort(descending=True)
        outside = outside_nucleus(sorted_probs, settings.top_p)
        probs = probs.clone()
        probs[order[outside]] = 0.0
        probs = probs / probs.sum()
    return probs


def outside_nucleus(sorted_probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Which of the probabilities `sorted_probs` (most likely first) fall outside the nucleus of
    mass `top_p`: the most likely tokens, in order, until their mass reaches top_p. Softmax and
    cumsum rounding can leave a mass that reaches top_p (0.5 + 0.3 vs 0.8) a hair below it; the
    1e-9 tolerance keeps such a boundary token out, as the definition says."""
    outside = sorted_probs.cumsum(0) - sorted_probs >= top_p - 1e-9
    outside[0] = False  # the most likely token is always in the nucleus, however small top_p
    return outside


def choose_token(
    logits: torch.Tensor, settings: SamplingSettings, generator: torch.Generator | None
) -> tuple[int, torch.Tensor | None]:
    """Picks the next id from one position's logits; returns it with the distribution sampled
    from (None for greedy: an argmax needs no distribution)."""
    if settings.greedy:
        token = int(torch.argmax(logits))  # argmax takes a NaN as the largest
        if not math.isfinite(float(logits[token])):
            raise non_finite_scores(logits)
        return token, None
    probs = next_token_probs(logits, settings)
    return int(torch.multinomial(probs, 1, generator=generator)), probs


def non_finite_scores(logits: torch.Tensor) -> GenerationError:
    """The error for next-token scores that no token can be chosen from, saying what they hold."""
    if bool(torch.isnan(logits).any()):
        what = _("NaN")
    elif bool(torch.isposinf(logits).any()):
        what = _("+infinity")
    else:
        what = _("-infinity everywhere")
    return GenerationError(
        _("the model's next-token scores hold {what}, so no token can be chosen (non-finite weights, an "
          "overflow in a 16-bit format, or an edit by a hook)").format(what=what)
    )


def new_generator(seed: int | None) -> torch.Generator:
    """A CPU random generator for sampling: seeded, or from fresh entropy when `seed` is None."""
    generator = torch.Generator()
    if seed is not None:
        generator.manual_seed(seed)
    else:
        generator.seed()
    return generator


@dataclass
class SampleEvent:
    """Payload of the `sample` hook: one step's choice and the distributions behind it."""

    step: int
    token_id: int
    logits: torch.Tensor  # [vocab], raw
    probs: torch.Tensor  # [vocab], after temperature / top-k / top-p
    settings: SamplingSettings
    used_cache: bool


@dataclass
class StepInfo:
    """One generated token, as streamed to a caller while generation runs."""

    step: int
    token_id: int
    ms: float
    context_length: int  # positions processed so far, prompt included


class StepTimes:
    """The cost of a run from the wall time of its steps (`step_ms`, the first is the prefill)
    and the number of tokens it made (`new_tokens`): one sequence or a batch of them."""

    step_ms: list[float]

    @property
    def new_tokens(self) -> int:
        """How many tokens were generated."""
        raise NotImplementedError

    @property
    def ttft_ms(self) -> float | None:
        """Time to first token: the prefill step."""
        return self.step_ms[0] if self.step_ms else None

    @property
    def mean_decode_ms(self) -> float | None:
        """Mean time of the steps after the first."""
        rest = self.step_ms[1:]
        return sum(rest) / len(rest) if rest else None

    @property
    def tokens_per_s(self) -> float | None:
        """New tokens per second of all steps, the prefill included."""
        total = sum(self.step_ms)
        return self.new_tokens / (total / 1000) if total > 0 else None


@dataclass
class GenerationResult(StepTimes):
    """New token ids, their per-step wall time (the first step is the prefill), and why it stopped."""

    prompt_ids: list[int]
    token_ids: list[int] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)
    stop_reason: str = STOP_MAX_TOKENS
    used_cache: bool = True
    settings: SamplingSettings = field(default_factory=SamplingSettings)

    @property
    def new_tokens(self) -> int:
        """How many tokens were generated."""
        return len(self.token_ids)


def forward_step(model: GPT2, ids: list[int], cache: KVCache | None) -> torch.Tensor:
    """Next-token logits `[vocab]` after `ids`. With a cache, only the uncached ids are fed."""
    new_ids = ids[cache.length :] if cache is not None else ids
    input_ids = torch.tensor([new_ids], dtype=torch.long, device=model.device)
    logits, _ = model(input_ids, cache, last_only=True)
    return logits[0, -1]


def check_request(model: GPT2, prompt_ids: list[int], max_new_tokens: int) -> None:
    """Refuses a generation that cannot run: a bad number of new tokens, an empty prompt, or one
    longer than the context."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise SettingError("max_new_tokens", N_("{setting} must be an integer >= 0, got {value!r}"), value=max_new_tokens)
    if not prompt_ids:
        raise SettingError("prompt", N_("{setting} needs at least one token to generate from"))
    if len(prompt_ids) > model.config.n_ctx:
        raise SettingError(
            "prompt",
            N_("{setting} has {tokens} tokens; the context holds {n_ctx}"),
            tokens=count(len(prompt_ids)),
            n_ctx=count(model.config.n_ctx),
        )


def generate(
    model: GPT2,
    prompt_ids: list[int],
    max_new_tokens: int,
    *,
    use_cache: bool = True,
    settings: SamplingSettings | None = None,
    eos_id: int | None = None,
    on_step: Callable[[StepInfo], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    generator: torch.Generator | None = None,
) -> GenerationResult:
    """Extends `prompt_ids` by up to `max_new_tokens` tokens.

    Sampling draws from `generator` (by default a new one seeded with `settings.seed`); passing
    the same generator to a later call continues the same random sequence, so a stopped and
    resumed run samples what an uninterrupted one would."""
    settings = settings or SamplingSettings()
    check_request(model, prompt_ids, max_new_tokens)
    n_ctx = model.config.n_ctx

    if generator is None:
        generator = new_generator(settings.seed)
    ids = list(prompt_ids)
    # Room for the prompt and every new token, reserved once: no decode step allocates.
    cache = model.new_cache(reserve=len(prompt_ids) + max_new_tokens) if use_cache else None
    result = GenerationResult(list(prompt_ids), used_cache=use_cache, settings=settings)
    hooks = model.hooks
    hooks.new_sequence()  # a text of its own: nothing kept from another prompt's pass applies

    for step in range(max_new_tokens):
        if len(ids) >= n_ctx:
            result.stop_reason = STOP_CONTEXT
            break
        if should_stop is not None and should_stop():
            result.stop_reason = STOP_CANCELLED
            break
        start = time.perf_counter()
        logits = forward_step(model, ids, cache)
        token, probs = choose_token(logits, settings, generator)
        ms = (time.perf_counter() - start) * 1000
        ids.append(token)
        result.token_ids.append(token)
        result.step_ms.append(ms)
        if hooks.active:
            if probs is None:
                probs = next_token_probs(logits, settings)
            hooks.fire("sample", SampleEvent(step, token, logits, probs, settings, use_cache))
        if on_step is not None:
            on_step(StepInfo(step, token, ms, len(ids) - 1))
        if eos_id is not None and token == eos_id:
            result.stop_reason = STOP_EOS
            break
    else:
        result.stop_reason = STOP_MAX_TOKENS
    return result
