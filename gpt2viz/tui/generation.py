"""A generation as the generation view holds it: plain step records and what follows from them.

The worker hands over one plain-data step record per token (the `steps[]` entries of a trace's
`generation`, see docs/trace.md); everything the view shows is computed here from those records,
so it can be tested without a terminal and a replayed trace shows the very same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..model.precision import parse_precision
from ..generate import STOP_CANCELLED, STOP_CONTEXT, STOP_EOS, STOP_MAX_TOKENS, SamplingSettings
from ..options import DEFAULT_TOPK
from ..costs import gb_per_s
from ..i18n import _, count, ngettext
from .facts import RunFacts

DEFAULT_NEW_TOKENS = 40
FINISHED = (STOP_EOS, STOP_CONTEXT, STOP_MAX_TOKENS)


@dataclass(frozen=True)
class GenerationSettings:
    """What the next generation uses: how many new tokens, how they are chosen, and the cache."""

    max_new_tokens: int = DEFAULT_NEW_TOKENS
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    use_cache: bool = True
    precision: str = "float32"  # the model's number format; another one reloads the model

    @classmethod
    def from_options(cls, options) -> "GenerationSettings":
        """The settings a run was started with (RunOptions: new tokens, sampling, the cache). No
        number of new tokens means the default; 0 means none until the user asks."""
        if options is None:
            return cls()
        new_tokens = DEFAULT_NEW_TOKENS if options.generate is None else options.generate
        return cls(new_tokens, options.sampling(), options.use_cache, parse_precision(options.dtype).name)

    @classmethod
    def from_record(cls, record: dict) -> "GenerationSettings":
        """The settings a recorded generation (a trace's `generation`) was made with."""
        s = record.get("settings") or {}
        sampling = SamplingSettings(
            float(s.get("temperature") or 0.0), s.get("top_k"), s.get("top_p"), s.get("seed")
        )
        return cls(int(record.get("max_new_tokens") or len(record.get("ids") or [])), sampling, bool(record.get("cache")))

    def with_seed(self, seed: int) -> "GenerationSettings":
        """The same settings with the sampling seed fixed."""
        return replace(self, sampling=replace(self.sampling, seed=seed))


def decoding_label(sampling: SamplingSettings, short: bool = False) -> str:
    """'greedy' or 'sampling: T 0.8 · top-k 40 · top-p 0.95 · seed 1' (short: without 'sampling: ',
    for a line with little room)."""
    if sampling.greedy:
        return _("greedy")
    parts = [f"T {sampling.temperature:g}"]
    if sampling.top_k is not None:
        parts.append(f"top-k {count(sampling.top_k)}")  # 50,257 as every count is written
    if sampling.top_p is not None:
        parts.append(f"top-p {sampling.top_p:g}")
    parts.append(_("seed {seed}").format(seed=sampling.seed) if sampling.seed is not None else _("no seed"))
    settings = " · ".join(parts)
    return settings if short else _("sampling: {settings}").format(settings=settings)


def settings_fields(settings: GenerationSettings, short: bool = False) -> list[str]:
    """'40 new tokens', 'greedy', 'KV cache on' (short: the sampling settings without 'sampling: ')."""
    n = settings.max_new_tokens
    return [
        ngettext("{n} new token", "{n} new tokens", n).format(n=count(n)),
        decoding_label(settings.sampling, short),
        _("KV cache on") if settings.use_cache else _("KV cache off"),
    ]


def settings_label(settings: GenerationSettings) -> str:
    """One line: '40 new tokens · greedy · KV cache on'."""
    return " · ".join(settings_fields(settings))


@dataclass
class Generation:
    """A prompt and the tokens generated after it so far, one plain step record per token.

    A stopped generation can be resumed: the next run starts from the prompt and everything
    generated so far, with a prefill of its own. `starts` lists the steps where a run began.
    """

    prompt_ids: list[int]
    prompt_tokens: list[str]  # display texts of the prompt's tokens
    settings: GenerationSettings
    n_ctx: int
    steps: list[dict] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    stop_reason: str | None = None  # None while running (or before the first run)
    label: str = ""  # 'no cache' / 'cached' in a comparison: a msgid, translated where it is shown
    rng: object = None  # the sampling generator, kept so that a resumed run samples on where it stopped
    topk: int = DEFAULT_TOPK  # candidates each step record keeps
    stream_gb_s: float | None = None  # this machine's large one-row product, GB/s (gpt2viz.costs)
    others_cpu: float | None = None  # the most of the CPUs other processes used in one of its runs (cpu_share)

    @classmethod
    def from_record(cls, record: dict, prompt_ids: list[int], prompt_tokens: list[str], n_ctx: int) -> "Generation":
        """A recorded generation (a trace's `generation` section), e.g. from a replayed trace."""
        steps = [dict(s) for s in record.get("steps") or []]
        starts = [i for i, s in enumerate(steps) if s.get("step") == 0] or ([0] if steps else [])
        # Traces written before `topk` was recorded: the longest list of plain-softmax candidates
        # (that softmax has no zeros to drop, so each list is as long as the top-k asked for).
        longest = max((len((s.get("raw") or {}).get("ids") or []) for s in steps), default=DEFAULT_TOPK)
        topk = record.get("topk")
        return cls(
            list(prompt_ids),
            list(prompt_tokens),
            GenerationSettings.from_record(record),
            n_ctx,
            steps,
            starts,
            record.get("stop_reason"),
            topk=topk if isinstance(topk, int) and not isinstance(topk, bool) and topk > 0 else longest,
            stream_gb_s=record.get("stream_gb_s"),
            others_cpu=record.get("others_cpu"),
        )

    # -- growing -----------------------------------------------------------------------------
    def begin_run(self) -> None:
        """A run (the first, or a resume) starts: its first step will be a prefill."""
        self.starts.append(len(self.steps))
        self.stop_reason = None

    def add_step(self, step: dict) -> None:
        """Appends one step record as the worker sent it."""
        self.steps.append(step)

    def end_run(self, stop_reason: str, others_cpu: float | None = None) -> None:
        """The run ended; `stop_reason` is eos, context, max_new_tokens or cancelled; other
        processes used `others_cpu` of the CPUs meanwhile (None: unknown). A generation resumed
        several times keeps its busiest run's share: any busy run's steps are in its means."""
        self.stop_reason = stop_reason
        if others_cpu is not None:
            self.others_cpu = max(others_cpu, self.others_cpu or 0.0)

    # -- reading -----------------------------------------------------------------------------
    @property
    def ids(self) -> list[int]:
        """The generated ids so far."""
        return [s["id"] for s in self.steps]

    @property
    def context_ids(self) -> list[int]:
        """Prompt and generated ids: where a resumed run starts."""
        return self.prompt_ids + self.ids

    @property
    def remaining(self) -> int:
        """How many more tokens the settings allow."""
        return max(0, self.settings.max_new_tokens - len(self.steps))

    @property
    def finished(self) -> bool:
        """Ended for good (end of text, full context, or as many tokens as asked): resuming is pointless."""
        return self.stop_reason in FINISHED or (self.stop_reason == STOP_CANCELLED and self.remaining == 0)

    @property
    def can_resume(self) -> bool:
        """Stopped by the user with tokens still to go and room in the context."""
        return self.stop_reason == STOP_CANCELLED and self.remaining > 0 and len(self.context_ids) < self.n_ctx

    def is_first(self, index: int) -> bool:
        """Whether step `index` began a run: the prefill (with a cache) or the first full pass."""
        return index in self.starts

    def is_prefill(self, index: int) -> bool:
        """Whether step `index` read the whole context at once into a fresh cache."""
        return self.is_first(index) and bool(self.steps[index].get("used_cache"))

    def input_length(self, index: int) -> int:
        """How many ids step `index` fed the model: the whole context, or one with the cache."""
        if self.steps[index].get("used_cache") and not self.is_first(index):
            return 1
        return self.context_length(index)

    def context_length(self, index: int) -> int:
        """Positions step `index` processed, prompt included (its output token not counted)."""
        step = self.steps[index]
        return int(step.get("context_length") or len(self.prompt_ids) + index)

    @property
    def step_ms(self) -> list[float]:
        return [float(s.get("ms") or 0.0) for s in self.steps]

    @property
    def total_ms(self) -> float:
        return sum(self.step_ms)

    @property
    def ttft_ms(self) -> float | None:
        """Time to first token: the first step (the prefill, with a cache)."""
        return self.step_ms[0] if self.steps else None

    @property
    def decode_ms(self) -> list[float]:
        """Times of the steps that did not begin a run."""
        return [ms for i, ms in enumerate(self.step_ms) if not self.is_first(i)]

    @property
    def mean_decode_ms(self) -> float | None:
        decode = self.decode_ms
        return sum(decode) / len(decode) if decode else None

    @property
    def tokens_per_s(self) -> float | None:
        total = self.total_ms
        return len(self.steps) / (total / 1000) if total > 0 else None

    @property
    def mean_decode_kv_bytes(self) -> float:
        """Mean bytes of K and V the decode steps read from the cache (0 without decode steps)."""
        kvs = [(s.get("kv_cache") or {}).get("total_bytes") or 0 for i, s in enumerate(self.steps) if not self.is_first(i)]
        return sum(kvs) / len(kvs) if kvs else 0.0

    def decode_gb_per_s(self, facts: RunFacts) -> float | None:
        """Effective GB/s of the mean decode step: the weights and the mean KV cache read, over its mean time."""
        if not self.settings.use_cache or not self.mean_decode_ms:
            return None
        return gb_per_s(facts.step_weight_bytes + self.mean_decode_kv_bytes, self.mean_decode_ms)


@dataclass
class Comparison:
    """The same prompt and settings generated twice: without the cache and with it."""

    naive: Generation
    cached: Generation

    @property
    def first_divergence(self) -> int | None:
        """The first step whose ids differ (or where one run stopped early); None if identical."""
        a, b = self.naive.ids, self.cached.ids
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return i
        return None if len(a) == len(b) else min(len(a), len(b))

    @property
    def identical(self) -> bool:
        return self.first_divergence is None

    @property
    def speedup_total(self) -> float | None:
        """Naive total time over cached total time."""
        cached = self.cached.total_ms
        return self.naive.total_ms / cached if cached > 0 and self.naive.steps else None

    def naive_cost_fit(self) -> tuple[float, float] | None:
        """The full passes' times fitted as `fixed + per_position * positions` (least squares over
        the steps after the first); None when they do not fit a positive cost of both kinds."""
        points = [
            (self.naive.context_length(i), ms) for i, ms in enumerate(self.naive.step_ms) if not self.naive.is_first(i)
        ]
        if len(points) < 3:
            return None
        n = len(points)
        mean_x = sum(x for x, _y in points) / n
        mean_y = sum(y for _x, y in points) / n
        var_x = sum((x - mean_x) ** 2 for x, _y in points)
        if var_x == 0:
            return None
        slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / var_x
        fixed = mean_y - slope * mean_x
        return (fixed, slope) if fixed > 0 and slope > 0 else None

    @property
    def speedup_decode(self) -> float | None:
        """Naive mean time per later step over the cached mean decode step."""
        naive, cached = self.naive.mean_decode_ms, self.cached.mean_decode_ms
        return naive / cached if naive and cached else None

