"""The cost lab: three experiments on a loaded model that show what inference costs and why.

1. `context_sweep`: the time of one new token against the position it is at, without the KV cache
   (a full pass over every position so far) and with it (one position against the cache).
2. `batch_sweep`: one cached decode step for B sequences at once, for growing B: the weights are
   read once a step whatever B is, so tokens/s grow with B until compute catches up.
3. `precision_sweep`: one cached decode step in every number format, the bytes it reads, and how
   far each format's logits are from float32's on the prompt.

Each returns plain data (lists, numbers, dictionaries) that the TUI plots, `--json` writes and
benchmarks/ reuses: one implementation of each experiment. Each takes `on_progress(done, total)`
and `should_stop()`, and returns what it measured so far when stopped (`complete` False).

Timings are medians of a few steps. Each timed step follows an untimed one of its own kind: a
two-core product leaves worker threads spinning, which slows whatever runs next, so a timing
taken right after a different kind of work would charge that work's cost to this step.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Callable

import torch

from .costs import compute_rate, gb_per_s, stream_bandwidth
from .cpu_share import cpu_ticks, share_since
from .language_model import LanguageModel, load_model
from .model.precision import PRECISIONS
from .quality import compare_logits

Progress = Callable[[int, int], None]
Stop = Callable[[], bool]

BATCH_SIZES = (1, 2, 4, 8, 16, 32)
BATCH_CONTEXT = 64  # cached positions of the batch experiment's step
PRECISION_CONTEXT = 256  # cached positions of the number-format experiment's step
CONTEXT_POINTS = 16  # positions measured between the prompt and the chosen length
FLAT_WITHIN = 1.25  # a batched step is "flat" while it costs at most this times one sequence's
MEMORY_SHARE_FOR_CACHES = 0.25  # the batch sweep's KV caches may take this share of free memory


def _never() -> bool:
    return False


def _quiet(done: int, total: int) -> None:
    pass


def _time_ms(fn: Callable[[], object], after: Callable[[], object] | None = None) -> float:
    start = time.perf_counter()
    fn()
    ms = (time.perf_counter() - start) * 1000
    if after is not None:
        after()
    return ms


def interleaved_steps(
    fns: dict,
    rounds: int,
    warmup: int = 0,
    before_round: Callable[[int], None] | None = None,
    measure: Callable | None = None,
    should_stop: Stop = _never,
) -> dict[object, list[float]]:
    """Decode steps of several contenders, `fns[name] = (step, rewind)`: each timed step is
    followed by its untimed rewind (the cache back to where it was), so every step sees the same
    cache. Round by round in a fresh random order, each timed step right after an untimed one of
    its own kind; `before_round(r)` sets round r up. The first `warmup` rounds are not kept.
    `measure(fn, after=rewind)` returns `(ms, ...)` (default: the wall time)."""
    order = random.Random(0)
    times: dict[object, list[float]] = {n: [] for n in fns}
    for r in range(warmup + rounds):
        if should_stop():
            break
        if before_round is not None:
            before_round(r)
        names = list(fns)
        order.shuffle(names)
        for n in names:
            step, rewind = fns[n]
            step()  # settle
            rewind()
            ms = measure(step, after=rewind)[0] if measure is not None else _time_ms(step, rewind)
            if r >= warmup:
                times[n].append(ms)
    return times


def _synced(step: Callable[[], object], lm: LanguageModel) -> Callable[[], object]:
    """`step`, waiting for the device to finish it (a GPU runs kernels after the call returns)."""
    if lm.model.device.type != "cuda":
        return step

    def run() -> None:
        step()
        torch.cuda.synchronize(lm.model.device)

    return run


def rewind_to(cache, length: int) -> Callable[[], None]:
    """The untimed step back of a KV cache to `length` positions."""

    def back() -> None:
        cache.length = length

    return back


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def cached_positions(wanted: int, n_ctx: int) -> int:
    """`wanted` cached positions, or as many as leave room for the step's new one."""
    return max(1, min(wanted, n_ctx - 1))


def sweep_start(prompt_length: int, length: int) -> int:
    """The first position the context experiment measures: the prompt's end, before `length`."""
    return max(1, min(prompt_length, length - 1))


def _filled_ids(prompt_ids: list[int], length: int) -> list[int]:
    """`length` ids: the prompt's, repeated (a step's time does not depend on which ids)."""
    ids = list(prompt_ids) or [0]
    return (ids * (length // len(ids) + 1))[:length]


@dataclass
class StepCosts:
    """What one decode step of a model reads and computes, from its shapes and its weights' bytes:
    every weight read once a step (whatever the batch; of the position table only the rows in
    use, of the token table only the rows looked up where the LM head has a copy of its own, and
    none of the padding of fbgemm's float16 packs), each row's KV cache read, and per row two FLOPs per
    weight of every product and the LM head plus attention's over the cached positions."""

    weight_bytes: int  # the weights one step reads
    kv_bytes_per_position: int  # one row
    flops_per_row: int  # block products and the LM head
    flops_per_cached_position: int  # one row: q.K and p.V, every layer and head

    @classmethod
    def of(cls, lm: LanguageModel) -> "StepCosts":
        config = lm.config
        itemsize = lm.model.dtype.itemsize  # activations and the KV cache
        return cls(
            lm.step_weight_bytes,
            config.kv_bytes_per_position(itemsize),
            2 * config.step_multiply_adds,
            4 * config.n_layer * config.n_embd,
        )

    def bytes_read(self, batch: int, context: int) -> int:
        return self.weight_bytes + batch * context * self.kv_bytes_per_position

    def flops(self, batch: int, context: int) -> int:
        return batch * (self.flops_per_row + context * self.flops_per_cached_position)


@dataclass
class Machine:
    """This machine's measured rates, what the lab compares its step times with."""

    stream_gb_s: float
    compute_gflop_s: float
    threads: int
    others_cpu: float | None = None  # the share of the CPUs other processes used meanwhile (cpu_share)

    @classmethod
    def measure(cls) -> "Machine":
        """The rates (measured once a process, again where they were measured on a busy machine)."""
        stream, compute = stream_bandwidth(), compute_rate()
        shares = [r.others_cpu for r in (stream, compute) if r.others_cpu is not None]
        return cls(stream.value, compute.value, torch.get_num_threads(), max(shares) if shares else None)


# -- 1. per-step time against position ----------------------------------------------------------


@dataclass
class ContextSweep:
    """Per-token time at each measured position, without and with the KV cache."""

    positions: list[int] = field(default_factory=list)
    naive_ms: list[float] = field(default_factory=list)  # a full pass over positions 0..p
    cached_ms: list[float] = field(default_factory=list)  # position p against p cached ones
    start: int = 0  # the prompt's length: where generation would start
    end: int = 0  # the chosen length
    complete: bool = True
    others_cpu: float | None = None  # the share of the CPUs other processes used meanwhile (cpu_share)

    @property
    def crossover(self) -> int | None:
        """The first measured position from which the cached step is faster at every measured
        position after it too (None: nowhere)."""
        found = None
        for p, cached, naive in reversed(list(zip(self.positions, self.cached_ms, self.naive_ms))):
            if cached >= naive:
                break
            found = p
        return found

    def _interpolated_total(self, ms: list[float]) -> float:
        """Seconds for one new token at every position from `start` to `end` - 1, interpolated
        linearly between the measured positions (flat beyond the first and the last)."""
        xs = self.positions
        if not xs or self.end <= self.start:
            return 0.0
        total = 0.0
        # Before the first measured position and from the last on: that position's time.
        total += max(0, min(xs[0], self.end) - self.start) * ms[0]
        total += max(0, self.end - max(xs[-1], self.start)) * ms[-1]
        for (x0, y0), (x1, y1) in zip(zip(xs, ms), zip(xs[1:], ms[1:])):
            lo, hi = max(x0, self.start), min(x1, self.end)  # the positions p in [lo, hi)
            if hi <= lo:
                continue
            slope = (y1 - y0) / (x1 - x0)
            n = hi - lo
            total += n * (y0 + slope * (lo - x0)) + slope * n * (n - 1) / 2
        return total / 1000

    @property
    def naive_total_s(self) -> float:
        return self._interpolated_total(self.naive_ms)

    @property
    def cached_total_s(self) -> float:
        return self._interpolated_total(self.cached_ms)


# Where the context sweep ends unless asked for more: GPT-2's whole context. A longer one (SmolLM2's
# 8,192 positions) is offered, not run by default: without the cache each of its points is a full
# pass over that many positions, minutes of a 2-core machine's time at the far end.
SWEEP_LENGTH = 1024


def default_sweep_length(n_ctx: int) -> int:
    """The context sweep's end for a model of context `n_ctx`: all of it, up to SWEEP_LENGTH."""
    return min(n_ctx, SWEEP_LENGTH)


def context_positions(start: int, end: int, points: int = CONTEXT_POINTS) -> list[int]:
    """`points` positions spread evenly from `start` to `end` - 1 (fewer if the range is short)."""
    start = max(1, start)
    if end - 1 <= start:
        return [start]
    n = min(points, end - start)
    return sorted({round(start + (end - 1 - start) * i / (n - 1)) for i in range(n)})


@torch.inference_mode()
def context_sweep(
    lm: LanguageModel,
    prompt_ids: list[int],
    length: int,
    *,
    points: int = CONTEXT_POINTS,
    reps: int = 3,
    on_progress: Progress = _quiet,
    should_stop: Stop = _never,
) -> ContextSweep:
    """Times one new token at `points` positions from the prompt's end to `length`: naive (a full
    pass over every position so far, as generation without the cache does) and cached (one
    position against the cache holding the rest), interleaved, `reps` times each."""
    model = lm.model
    length = max(2, min(length, lm.config.n_ctx))
    start = sweep_start(len(prompt_ids), length)
    ids = torch.tensor([_filled_ids(prompt_ids, length)], device=model.device)
    positions = context_positions(start, length, points)
    sweep = ContextSweep(start=start, end=length)
    started = cpu_ticks()
    cache = model.new_cache(capacity=length)
    for done, p in enumerate(positions):
        if should_stop():
            sweep.complete = False
            break
        if cache.length < p:  # untimed: fill the cache up to position p
            model(ids[:, cache.length : p], cache, last_only=True)
        new = ids[:, p : p + 1]
        full = ids[:, : p + 1]
        times = interleaved_steps(
            {
                "cached": (_synced(lambda: model(new, cache, last_only=True), lm), rewind_to(cache, p)),
                "naive": (_synced(lambda: model(full, last_only=True), lm), lambda: None),
            },
            reps,
        )
        sweep.positions.append(p)
        sweep.naive_ms.append(_median(times["naive"]))
        sweep.cached_ms.append(_median(times["cached"]))
        on_progress(done + 1, len(positions))
    sweep.others_cpu = share_since(started)
    return sweep


# -- 2. batch size ------------------------------------------------------------------------------


@dataclass
class BatchRow:
    batch: int
    step_ms: float
    flops: int  # of the whole step
    bytes_read: int  # weights once, and every row's cache

    @property
    def tokens_per_s(self) -> float:
        return self.batch / self.step_ms * 1000

    @property
    def intensity(self) -> float:
        """FLOPs per byte read."""
        return self.flops / self.bytes_read

    def to_dict(self) -> dict:
        return {**asdict(self), "tokens_per_s": self.tokens_per_s, "intensity": self.intensity}


@dataclass
class BatchSweep:
    """One cached decode step for B sequences at `context` cached positions, for each B."""

    context: int
    rows: list[BatchRow] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)  # sizes whose caches would not fit in memory
    complete: bool = True
    others_cpu: float | None = None  # the share of the CPUs other processes used meanwhile (cpu_share)

    @property
    def flat_until(self) -> int | None:
        """The largest B up to which every step costs at most FLAT_WITHIN x one sequence's (None:
        no rows)."""
        if not self.rows:
            return None
        one = self.rows[0].step_ms
        flat = self.rows[0].batch
        for row in self.rows[1:]:
            if row.step_ms > FLAT_WITHIN * one:
                break
            flat = row.batch
        return flat

    def to_dict(self) -> dict:
        return {**asdict(self), "rows": [r.to_dict() for r in self.rows]}


def available_memory() -> int | None:
    """Bytes of memory the system can still give (Linux), None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


@torch.inference_mode()
def batch_sweep(
    lm: LanguageModel,
    prompt_ids: list[int],
    *,
    context: int = BATCH_CONTEXT,
    sizes: tuple[int, ...] = BATCH_SIZES,
    steps: int = 5,
    on_progress: Progress = _quiet,
    should_stop: Stop = _never,
    measure: Callable | None = None,
) -> BatchSweep:
    """One cached decode step of B rows at `context` cached positions, each B interleaved with
    the others step by step (the caches rewound after each), `steps` timed steps each. Sizes
    whose caches would take more than a quarter of the free memory are skipped."""
    model = lm.model
    costs = StepCosts.of(lm)
    context = cached_positions(context, lm.config.n_ctx)
    per_row = (context + 1) * costs.kv_bytes_per_position
    free = available_memory()
    fits, rows_so_far = [], 0  # every size's cache is held at once, so the budget is for their sum
    for b in sizes:
        if free is None or (rows_so_far + b) * per_row <= MEMORY_SHARE_FOR_CACHES * free:
            fits.append(b)
            rows_so_far += b
    sweep = BatchSweep(context, skipped=[b for b in sizes if b not in fits])
    started = cpu_ticks()
    ids = torch.tensor([_filled_ids(prompt_ids, context + 1)], device=model.device)
    caches, tokens = {}, {}
    for b in fits:
        caches[b] = model.new_cache(b, capacity=context + 1)
        model(ids[:, :context].expand(b, context), caches[b], last_only=True)
        tokens[b] = ids[:, context:].expand(b, 1).contiguous()
    def one(b):
        def step():
            model(tokens[b], caches[b], last_only=True)  # packed products when B > 1 (kernels/batch.py)

        return step

    times = interleaved_steps(
        {b: (_synced(one(b), lm), rewind_to(caches[b], context)) for b in fits},
        steps,
        warmup=1,
        before_round=lambda r: on_progress(max(0, r - 1), steps),
        measure=measure,
        should_stop=should_stop,
    )
    caches.clear()  # the KV caches' memory back before the results are worked out
    sweep.complete = all(len(t) == steps for t in times.values())
    for b in fits:
        ms = _median(times[b])
        if ms is None:
            continue
        sweep.rows.append(BatchRow(b, ms, costs.flops(b, context), costs.bytes_read(b, context)))
    sweep.others_cpu = share_since(started)
    on_progress(steps, steps)
    return sweep


# -- 3. number formats --------------------------------------------------------------------------


@dataclass
class PrecisionRow:
    format: str
    step_ms: float
    bytes_read: int  # weights and the KV cache, per token
    weight_bytes: int
    quality: dict  # quality.Agreement.to_dict(): against float32 over the prompt's positions

    @property
    def gb_s(self) -> float:
        """Effective GB/s: the bytes read over the step's time."""
        return gb_per_s(self.bytes_read, self.step_ms)

    def to_dict(self) -> dict:
        return {**asdict(self), "gb_s": self.gb_s}


@dataclass
class PrecisionSweep:
    """One cached decode step at `context` positions in each number format."""

    context: int
    rows: list[PrecisionRow] = field(default_factory=list)
    complete: bool = True
    others_cpu: float | None = None  # the share of the CPUs other processes used meanwhile (cpu_share)

    def to_dict(self) -> dict:
        return {**asdict(self), "rows": [r.to_dict() for r in self.rows]}


@torch.inference_mode()
def precision_sweep(
    lm: LanguageModel,
    prompt_ids: list[int],
    *,
    context: int = PRECISION_CONTEXT,
    formats: tuple[str, ...] = tuple(PRECISIONS),
    steps: int = 5,
    load: Callable[[str], LanguageModel] | None = None,
    on_progress: Progress = _quiet,
    should_stop: Stop = _never,
    measure: Callable | None = None,
) -> PrecisionSweep:
    """Every format in `formats` loaded from `lm`'s checkpoint (`load(format)`; `lm` itself for
    its own format), a cached decode step at `context` positions timed interleaved across the
    formats, and each format's logits over the prompt against float32's."""
    load = load or (lambda name: load_model(str(lm.source.path), device=lm.model.device, dtype=name))
    if not lm.model.device.type == "cpu":
        formats = tuple(f for f in formats if not PRECISIONS[f].quantized)  # int8 kernels are CPU only
    context = cached_positions(context, lm.config.n_ctx)
    total = len(formats) + steps + 1
    models: dict[str, LanguageModel] = {}
    sweep = PrecisionSweep(context)
    started = cpu_ticks()
    for i, name in enumerate(formats):
        if should_stop():
            sweep.complete = False
            return sweep
        models[name] = lm if name == lm.precision else (lm.float32_twin() if name == "float32" else load(name))
        on_progress(i + 1, total)
    ids = torch.tensor([_filled_ids(prompt_ids, context + steps + 1)], device=lm.model.device)
    caches = {}
    for name, m in models.items():
        caches[name] = m.model.new_cache(capacity=context + 1)
        m.model(ids[:, :context], caches[name], last_only=True)
    token = {}

    def step(name):
        return lambda: models[name].model(token["ids"], caches[name], last_only=True)

    def before(r: int) -> None:
        token["ids"] = ids[:, context + r : context + r + 1]
        on_progress(len(formats) + max(0, r - 1), total)

    times = interleaved_steps(
        {n: (_synced(step(n), lm), rewind_to(caches[n], context)) for n in models},
        steps,
        warmup=1,
        before_round=before,
        measure=measure,
        should_stop=should_stop,
    )
    caches.clear()  # the KV caches' memory back before the results are worked out
    sweep.complete = all(len(t) == steps for t in times.values())
    reference = models.get("float32") or lm.float32_twin()
    quality_ids = list(prompt_ids)[: lm.config.n_ctx] or [0]
    for name, m in models.items():
        ms = _median(times[name])
        if ms is None:
            continue
        nbytes = StepCosts.of(m).bytes_read(1, context)
        quality = compare_logits(m, reference, quality_ids).to_dict()
        sweep.rows.append(PrecisionRow(name, ms, nbytes, m.weight_bytes, quality))
    sweep.others_cpu = share_since(started)
    on_progress(total, total)
    return sweep


# -- all three ----------------------------------------------------------------------------------


@dataclass
class LabResult:
    """What the lab measured on one model: the machine's rates and each experiment's results
    (None: not run yet)."""

    model: str
    precision: str
    n_params: int
    machine: Machine
    costs: StepCosts  # of the model in its own format
    n_ctx: int
    vocab_size: int
    context: ContextSweep | None = None
    batch: BatchSweep | None = None
    precision_formats: PrecisionSweep | None = None

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "precision": self.precision,
            "n_params": self.n_params,
            "machine": asdict(self.machine),
            "costs": asdict(self.costs),
            "n_ctx": self.n_ctx,
            "vocab_size": self.vocab_size,
            "context": None if self.context is None else asdict(self.context),
            "batch": None if self.batch is None else self.batch.to_dict(),
            "precision_formats": None if self.precision_formats is None else self.precision_formats.to_dict(),
        }

    @classmethod
    def from_dict(cls, doc: dict) -> "LabResult":
        """A result written by `to_dict` (checked by the trace loader first)."""
        context = batch = formats = None
        if doc.get("context") is not None:
            context = _known(ContextSweep, doc["context"])
        if doc.get("batch") is not None:
            b = doc["batch"]
            batch = BatchSweep(
                b["context"], [_known(BatchRow, r) for r in b["rows"]], list(b["skipped"]), b["complete"], b.get("others_cpu")
            )
        if doc.get("precision_formats") is not None:
            p = doc["precision_formats"]
            formats = PrecisionSweep(
                p["context"], [_known(PrecisionRow, r) for r in p["rows"]], p["complete"], p.get("others_cpu")
            )
        return cls(
            doc["model"], doc["precision"], doc["n_params"], _known(Machine, doc["machine"]),
            _known(StepCosts, doc["costs"]), doc["n_ctx"], doc["vocab_size"], context, batch, formats,
        )


def _known(cls, doc: dict):
    """`cls` from the fields of `doc` it has (a later version's extra fields are left out; a field
    an earlier version did not write takes its default)."""
    return cls(**{f.name: doc[f.name] for f in fields(cls) if f.name in doc})


def new_result(lm: LanguageModel) -> LabResult:
    """An empty result for `lm`, with this machine's rates measured (about a second)."""
    return LabResult(
        lm.name, lm.precision, lm.n_params, Machine.measure(), StepCosts.of(lm), lm.config.n_ctx, lm.config.vocab_size
    )

