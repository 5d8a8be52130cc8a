"""Timing kernels against each other: interleaved calls, the fastest of each kept.

The choosers (kernels/choice.py, kernels/formats.py) time each candidate kernel this way, the
calls alternating so that a moment of other work on the machine slows every kernel alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def fastest_calls(kernels: dict[str, Callable[[], object]], rounds: int, budget_s: float) -> dict[str, float]:
    """The fastest of several interleaved calls of each kernel, in µs: at least `rounds` rounds,
    and more, up to 40, while the timing has taken less than `budget_s`. The minimum is what a
    kernel costs; slower calls met other work."""
    best = dict.fromkeys(kernels, float("inf"))
    for kernel in kernels.values():
        kernel()  # the first calls pay for allocations
    spent, done = 0.0, 0
    while done < rounds or (spent < budget_s and done < 40):
        for name, kernel in kernels.items():
            start = time.perf_counter()
            kernel()
            took = time.perf_counter() - start
            best[name] = min(best[name], took)
            spent += took
        done += 1
    return {name: round(t * 1e6, 1) for name, t in best.items()}
