"""Timing on a shared machine: discard a measurement if other processes used the CPUs during it.

`/proc/stat` counts the CPU ticks (1/100 s) every process used, this process's own
(`/proc/self/stat`, threads and waited-for children included) among them. A measurement during
which the others used more than `threshold` of the machine (and at least 2 ticks) is dropped,
the gate waits until the machine is quiet again, and the measurement is redone (up to
`retries` times; after that, or once the total wait budget is spent, it is kept and counted as
noisy). The counts go into the results, so a reader can see how clean a run was.
"""

from __future__ import annotations

import os
import time

from gpt2viz.cpu_share import CpuTicks, cpu_ticks, others_ticks


def _snapshot() -> CpuTicks:
    return cpu_ticks() or CpuTicks(0, 0, 0)


class QuietGate:
    def __init__(self, threshold: float = 0.10, retries: int = 4, wait_budget_s: float = 900.0, enabled: bool = True):
        self.threshold = threshold
        self.retries = retries
        self.wait_budget_s = wait_budget_s
        self.enabled = enabled and os.path.exists("/proc/stat")
        self.waited_s = 0.0
        self.discarded = 0
        self.kept_noisy = 0
        self.measured = 0

    def _noisy(self, a, b) -> bool:
        others, total = others_ticks(a, b)
        return others >= 2 and others > self.threshold * total

    @property
    def budget_left(self) -> bool:
        return self.waited_s < self.wait_budget_s

    def wait_quiet(self, max_s: float = 120.0, window_s: float = 0.5) -> float:
        """Blocks until two consecutive windows show the others using < threshold of the machine."""
        if not self.enabled or not self.budget_left:
            return 0.0
        start = time.perf_counter()
        calm = 0
        while calm < 2 and time.perf_counter() - start < max_s and self.budget_left:
            a = _snapshot()
            time.sleep(window_s)
            b = _snapshot()
            others, total = others_ticks(a, b)
            calm = calm + 1 if others <= max(1, self.threshold * total) else 0
            self.waited_s += window_s
        return time.perf_counter() - start

    def measure(self, fn, after=None) -> tuple[float, bool]:
        """Wall ms of `fn()`; `after()` runs untimed after every attempt (e.g. to rewind a cache).
        Returns (ms, noisy)."""
        self.measured += 1
        for attempt in range(self.retries + 1):
            a = _snapshot()
            t0 = time.perf_counter()
            fn()
            ms = (time.perf_counter() - t0) * 1000
            b = _snapshot()
            if after is not None:
                after()
            noisy = self.enabled and self._noisy(a, b)
            if not noisy:
                return ms, False
            if attempt == self.retries or not self.budget_left:
                self.kept_noisy += 1
                return ms, True
            self.discarded += 1
            self.wait_quiet()
        return ms, True  # unreachable

    def stats(self) -> dict:
        return {
            "enabled": self.enabled,
            "threshold": self.threshold,
            "measurements": self.measured,
            "discarded_and_redone": self.discarded,
            "kept_noisy": self.kept_noisy,
            "waited_s": round(self.waited_s, 1),
        }


GATE = QuietGate()
