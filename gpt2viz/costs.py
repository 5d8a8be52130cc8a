"""Measurements of this machine that the cost narration compares a run's numbers with, and the
one rule that says what bounds a step.

`stream_bandwidth` is how fast this machine reads a large weight matrix the way a decode step
does: a one-row product with a matrix far larger than the caches. `compute_rate` is how fast it
multiplies when every weight is reused many times (a large square product). A step that reads its
bytes near the stream rate is bound by memory bandwidth; one that does its FLOPs near the compute
rate is bound by compute; one far from both is bound by something else (for a small model: the
fixed work of every step). benchmarks/ and the cost lab use the same probes.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch

from .cpu_share import cpu_ticks, disturbed, share_since

PROBE_N = 4096  # a 4096 x 4096 float32 matrix: 64 MiB, beyond any cache of these machines
COMPUTE_N = 1024  # a 1024 x 1024 x 1024 float32 product: 2.1 GFLOP, each weight used 1,024 times

# A step is called bound by a resource when that resource's time at this machine's measured rate
# accounts for at least BOUND_SHARE of the step; from FIXED_SHARE on it is "a large part", and
# below that the fixed work of every step dominates.
BOUND_SHARE = 0.6
FIXED_SHARE = 0.25


def bandwidth_probes(n: int = PROBE_N) -> tuple[dict[str, Callable[[], object]], torch.Tensor]:
    """One-row products with an `n x n` float32 matrix, three ways, and the matrix they read:
    `mv` (the BLAS's own kernel, on one core or several as the BLAS decides), `split_columns`
    (gpt2viz's two-core decode product, by column halves) and `split_rows` (two partial sums over
    row halves: not the plain product's digits, so gpt2viz uses it only where the plain product
    keeps none; both in gpt2viz.kernels.split)."""
    from .kernels.split import conv1d_halves, conv1d_partial_sums
    a = torch.randn(n, n)
    x = torch.randn(n)
    zero = torch.zeros(n)
    row = x.view(1, n)
    probes = {
        "mv": lambda: torch.mv(a.t(), x),
        "split_columns": lambda: conv1d_halves(row, a, zero),
        "split_rows": lambda: conv1d_partial_sums(row, a, zero),
    }
    return probes, a


def _median_s(fn: Callable[[], object], reps: int) -> float:
    fn()  # first touch of the pages, and the threads' start
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def gb_per_s(n_bytes: float, ms: float | None) -> float | None:
    """Effective bandwidth in GB/s (10^9 bytes) of moving `n_bytes` in `ms`."""
    return n_bytes / (ms / 1000) / 1e9 if ms else None


@dataclass(frozen=True)
class Rate:
    """A rate of this machine, and the share of the CPUs other processes used while it was
    measured (cpu_share; None: unknown)."""

    value: float
    others_cpu: float | None


_rates: dict[str, Rate] = {}


def _measured_once(name: str, measure: Callable[[], float]) -> Rate:
    """`measure()`'s rate, measured once a process and kept; but a rate measured while other
    processes kept the CPUs busy (cpu_share.disturbed) is too low, so it is measured again."""
    rate = _rates.get(name)
    if rate is None or disturbed(rate):
        started = cpu_ticks()
        value = measure()
        rate = _rates[name] = Rate(value, share_since(started))
    return rate


def stream_bandwidth(reps: int = 5) -> Rate:
    """GB/s (10^9 bytes) of the fastest one-row product over a matrix far larger than the caches:
    the rate at which this machine can feed a decode step its weights."""

    def measure() -> float:
        probes, matrix = bandwidth_probes()
        nbytes = matrix.numel() * matrix.element_size()
        return max(nbytes / _median_s(probe, reps) / 1e9 for probe in probes.values())

    return _measured_once("stream", measure)


def compute_rate(reps: int = 5) -> Rate:
    """GFLOP/s of a large float32 matrix product (`COMPUTE_N`^3, every operand reused from the
    caches): what this machine computes when memory is not the limit."""

    def measure() -> float:
        a, b = torch.randn(COMPUTE_N, COMPUTE_N), torch.randn(COMPUTE_N, COMPUTE_N)
        return 2 * COMPUTE_N**3 / _median_s(lambda: a @ b, reps) / 1e9

    return _measured_once("compute", measure)


@dataclass(frozen=True)
class StepBound:
    """What bounds a step of `ms` that reads `n_bytes` and does `flops`, against this machine's
    measured rates. `kind`: 'memory' or 'compute' (that resource's time is at least BOUND_SHARE of
    the step), 'partly' (the larger of the two is a large part, the rest fixed work), 'fixed'
    (fixed per-step work dominates), 'caches' (the bytes came faster than the stream rate: from
    the processor's caches), 'faster_compute' (the FLOPs were done faster than the measured float32
    rate: kernels of another number format) or 'unmeasured' (no stream rate)."""

    kind: str
    ms: float
    memory_ms: float | None  # reading the bytes at the stream rate
    compute_ms: float | None  # doing the FLOPs at the compute rate
    resource: str  # 'memory' or 'compute': whichever takes longer at its rate

    @property
    def share(self) -> float:
        """The larger resource's time as a share of the step."""
        return max(self.memory_ms or 0.0, self.compute_ms or 0.0) / self.ms if self.ms > 0 else 0.0

    @property
    def fixed_ms(self) -> float:
        """The part of the step that neither resource explains."""
        return max(0.0, self.ms - max(self.memory_ms or 0.0, self.compute_ms or 0.0))


def step_bound(
    n_bytes: float, ms: float, stream_gb_s: float | None, flops: float | None = None, compute_gflop_s: float | None = None
) -> StepBound:
    """The one rule every screen uses to say what bounds a step (see StepBound)."""
    if not stream_gb_s or ms <= 0:
        return StepBound("unmeasured", ms, None, None, "memory")
    memory_ms = n_bytes / (stream_gb_s * 1e9) * 1000
    compute_ms = flops / (compute_gflop_s * 1e9) * 1000 if flops and compute_gflop_s else None
    resource = "compute" if compute_ms is not None and compute_ms > memory_ms else "memory"
    bound = StepBound("", ms, memory_ms, compute_ms, resource)
    if resource == "memory" and memory_ms > ms:
        kind = "caches"
    elif resource == "compute" and compute_ms > ms:
        kind = "faster_compute"
    elif bound.share >= BOUND_SHARE:
        kind = resource
    elif bound.share >= FIXED_SHARE:
        kind = "partly"
    else:
        kind = "fixed"
    return StepBound(kind, ms, memory_ms, compute_ms, resource)
