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

from .cpu_share import CpuTicks, cpu_ticks, others_share


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
    return int(value) if value.isdigit() and int(value) > 0 else None


class ThreadPolicy:
    """Sets torch's thread count before each piece of model work, from the load since the last."""

    def __init__(self) -> None:
        self.cpus = available_cpus()
        self._since: CpuTicks | None = cpu_ticks()

    def apply(self) -> int:
        """Sets and returns the thread count for the work about to run. Where too little time
        passed to tell the load (cpu_share.MIN_TICKS), or the system does not say, the count
        stays as it was; the first time, it is the available CPUs."""
        import torch

        fixed = fixed_threads()
        if fixed is not None:
            if fixed != torch.get_num_threads():
                torch.set_num_threads(fixed)
            return fixed
        now = cpu_ticks()
        share = others_share(self._since, now)
        if share is not None:
            self._since = now
            wanted = threads_for(share, self.cpus, os.cpu_count())
        else:
            wanted = min(torch.get_num_threads(), self.cpus)
        if wanted != torch.get_num_threads():
            torch.set_num_threads(wanted)
        return wanted
