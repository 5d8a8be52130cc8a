"""How many threads torch's products use: the CPUs this process may run on, less those other
processes keep busy.

A product split over two threads waits for its slower half: where another process keeps one of
two CPUs busy, both threads queue behind it and a step takes several times as long as on one
thread (measured on 2 CPUs while other processes used 81-87 % of them: a GPT-2-small decode step
took 148-184 ms on one thread, 779-1,798 ms on two). So before each piece of model work the
thread count follows the CPUs the process may use (its affinity) and the share other processes
used since the last one (gpt2viz.cpu_share).
"""

from __future__ import annotations

import os

from .cpu_share import BUSY_SHARE, CpuTicks, cpu_ticks, others_share


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity where the system says it), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def threads_for(others: float, cpus: int, machine_cpus: int | None = None) -> int:
    """The threads to use on the `cpus` CPUs this process may run on, when other processes use
    the share `others` of the machine's `machine_cpus` (default: the same CPUs): the CPUs they
    leave free, rounded, at most `cpus`, at least one (2 CPUs: two while others use under a
    quarter of them, else one)."""
    machine = cpus if machine_cpus is None else machine_cpus
    free = machine * (1.0 - min(1.0, max(0.0, others)))
    return max(1, min(cpus, int(free + 0.5)))


# Set to a whole number, torch always uses that many threads (the test suite pins its count, so
# that its numbers never depend on how busy the machine is).
FIXED_ENV = "GPT2VIZ_THREADS"


def fixed_threads() -> int | None:
    """The thread count GPT2VIZ_THREADS fixes, or None (unset, or not a whole number above 0)."""
    value = os.environ.get(FIXED_ENV, "").strip()
    return int(value) if value.isascii() and value.isdecimal() and int(value) > 0 else None


class ThreadPolicy:
    """Sets torch's thread count before each piece of model work: torch's own count (its default,
    or OMP_NUM_THREADS; at most the CPUs of the affinity) while the machine is quiet, fewer only
    while other processes used more than cpu_share.BUSY_SHARE of it since the last piece of work.
    So on a quiet machine every measurement runs on the same threads, and one taken on fewer is
    one the busy rule already marks."""

    def __init__(self) -> None:
        self.cpus = available_cpus()
        self.default: int | None = None  # torch's count, read on the model thread at its first job
        self._since: CpuTicks | None = cpu_ticks()

    def apply(self) -> int:
        """Sets and returns the thread count for the work about to run (never raises: a policy
        that fails leaves the count as it is)."""
        import torch

        try:
            wanted = self._wanted(torch.get_num_threads())
            if wanted != torch.get_num_threads():
                torch.set_num_threads(wanted)
        except Exception:  # noqa: BLE001  (the count is a speed matter: the work runs anyway)
            return torch.get_num_threads()
        return wanted

    def _wanted(self, current: int) -> int:
        fixed = fixed_threads()
        if fixed is not None:
            return fixed
        if self.default is None:
            self.default = max(1, min(current, self.cpus))
        now = cpu_ticks()
        share = others_share(self._since, now)
        if share is None:  # too short a time to tell (cpu_share.MIN_TICKS): as it was
            return current
        self._since = now
        if share <= BUSY_SHARE:
            return self.default
        return min(self.default, threads_for(share, self.cpus, os.cpu_count()))
