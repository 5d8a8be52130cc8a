"""Measurements of this machine that the cost narration compares a run's numbers with.

`stream_bandwidth` is how fast this machine reads a large weight matrix the way a decode step
does: a one-row product with a matrix far larger than the caches. A decode step that reads its
weights near this rate is bound by memory bandwidth; one far below it is bound by something else
(for a small model: the fixed work of every step). benchmarks/ uses the same probes.
"""

from __future__ import annotations

import functools
import statistics
import time
from typing import Callable

import torch

PROBE_N = 4096  # a 4096 x 4096 float32 matrix: 64 MiB, beyond any cache of these machines


def bandwidth_probes(n: int = PROBE_N) -> tuple[dict[str, Callable[[], object]], torch.Tensor]:
    """One-row products with an `n x n` float32 matrix, three ways, and the matrix they read:
    `mv` (the BLAS, one core), `split_columns` (gpt2viz's two-core decode product, by column
    halves) and `split_rows` (two partial sums over row halves: a little faster, but not the
    one-core product's digits, so gpt2viz does not use it)."""
    from .model.layers import conv1d

    a = torch.randn(n, n)
    x = torch.randn(n)
    zero = torch.zeros(n)
    row = x.view(1, n)
    x_halves = x.view(2, 1, n // 2)
    a_halves = a.view(2, n // 2, n)
    probes = {
        "mv": lambda: torch.mv(a.t(), x),
        "split_columns": lambda: conv1d(row, a, zero),
        "split_rows": lambda: torch.bmm(x_halves, a_halves).sum(0),
    }
    return probes, a


@functools.lru_cache(maxsize=1)
def stream_bandwidth(reps: int = 5) -> float:
    """GB/s (10^9 bytes) of the fastest one-row product over a matrix far larger than the caches:
    the rate at which this machine can feed a decode step its weights. Measured once a process."""
    probes, matrix = bandwidth_probes()
    nbytes = matrix.numel() * matrix.element_size()
    best = 0.0
    for probe in probes.values():
        probe()  # first touch of the pages, and the threads' start
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            probe()
            times.append(time.perf_counter() - start)
        best = max(best, nbytes / statistics.median(times) / 1e9)
    return best
