"""gpt2viz.cpu_share: the share of the CPUs other processes used between two readings."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from gpt2viz.cpu_share import MIN_TICKS, CpuTicks, cpu_ticks, others_share

linux = pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="/proc/stat is Linux's")


@linux
def test_processes_spinning_on_every_cpu_are_counted_as_others():
    """One spinning child per CPU, this process asleep: the others used most of the machine. (The
    reading is taken before the children are waited for: a waited-for child's time counts as
    this process's own.)"""
    spin = "while True: pass"
    children = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(0.3)  # the children start
        before = cpu_ticks()
        time.sleep(1.0)
        after = cpu_ticks()
    finally:
        for child in children:
            child.kill()
        for child in children:
            child.wait()
    assert others_share(before, after) > 0.5


@linux
def test_this_process_s_own_time_is_read():
    """What this process itself used (its CPU time, however busy the machine) shows in `mine`,
    which `others_share` takes away from the busy ticks."""
    before = cpu_ticks()
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    after = cpu_ticks()
    assert after.mine - before.mine >= 25  # ticks of 1/100 s
    assert after.busy - before.busy >= after.mine - before.mine - 2


def test_unknown_readings_give_no_share():
    assert others_share(None, CpuTicks(1, 2, 0)) is None and others_share(CpuTicks(1, 2, 0), None) is None
    assert others_share(CpuTicks(5, 10, 0), CpuTicks(5, 10, 0)) is None  # no tick passed
    # Too few ticks to tell: one stray tick in four would read as 25 %.
    assert others_share(CpuTicks(0, 0, 0), CpuTicks(1, 4, 0)) is None
    assert others_share(CpuTicks(0, 0, 0), CpuTicks(5, MIN_TICKS, 0)) == 5 / MIN_TICKS
    # This process's ticks are not the others'; more of its own than all busy ticks (the counters
    # are read a moment apart) is no negative share.
    assert others_share(CpuTicks(0, 0, 0), CpuTicks(50, 100, 30)) == 0.2
    assert others_share(CpuTicks(0, 0, 0), CpuTicks(10, 100, 30)) == 0.0
