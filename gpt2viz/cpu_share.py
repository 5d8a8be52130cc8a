"""How much of the CPUs other processes used while something was measured.

A time measured while other processes kept the CPUs busy says more about them than about the
model. `/proc/stat` counts the CPU time (in ticks) every process used, and `/proc/self/stat` this
process's own (all its threads, and the children it has waited for); the difference is the other
processes'. Linux only: elsewhere nothing is known (None).
"""

from __future__ import annotations

from dataclasses import dataclass

# Above this share of the CPUs used by other processes while something was timed, its times are
# theirs as much as the model's, and no screen claims what bounds a step (measured: 0.4 % with the
# TUI in tmux on a quiet machine, the tmux server being the other process).
BUSY_SHARE = 0.2
# Fewer ticks than this (on all CPUs together: 0.1 s on two) give no share: the counters tick every
# 1/100 s, so over a 20 ms run on two CPUs one stray tick of another process would read as 25 %.
MIN_TICKS = 20


@dataclass(frozen=True)
class CpuTicks:
    """CPU ticks counted since boot: busy on all CPUs, in all (idle too), and this process's own."""

    busy: int
    total: int
    mine: int


def cpu_ticks() -> CpuTicks | None:
    """The counts now; None where the system does not give them (not Linux)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            user, nice, system, idle, iowait, irq, softirq, steal = (int(v) for v in f.readline().split()[1:9])
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, ValueError):
        return None
    busy = user + nice + system + irq + softirq + steal
    mine = sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
    return CpuTicks(busy, busy + idle + iowait, mine)


def others_ticks(before: CpuTicks, after: CpuTicks) -> tuple[int, int]:
    """(ticks other processes used, ticks that passed on all CPUs) between two readings."""
    return max(0, (after.busy - before.busy) - (after.mine - before.mine)), after.total - before.total


def others_share(before: CpuTicks | None, after: CpuTicks | None) -> float | None:
    """The share of all CPUs' time between two readings that other processes used, 0 to 1; None
    where it is unknown or too few ticks passed (MIN_TICKS) to tell."""
    if before is None or after is None:
        return None
    others, total = others_ticks(before, after)
    return min(1.0, others / total) if total >= MIN_TICKS else None


def disturbed(measured) -> bool:
    """Whether other processes used more than BUSY_SHARE of the CPUs while `measured` (anything
    with an `others_cpu`: a lab experiment, the machine's rates, a generation) was timed."""
    return measured.others_cpu is not None and measured.others_cpu > BUSY_SHARE


def share_since(before: CpuTicks | None) -> float | None:
    """Other processes' share of the CPUs since `before`, to three decimals (None: unknown)."""
    share = others_share(before, cpu_ticks())
    return None if share is None else round(share, 3)
