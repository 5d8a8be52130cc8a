"""Torch's thread count follows the CPUs the process may use and the load of other processes."""

from __future__ import annotations

import time

import torch

from gpt2viz import threads
from gpt2viz.cpu_share import CpuTicks
from gpt2viz.threads import ThreadPolicy, threads_for


def test_threads_are_the_cpus_other_processes_leave_free():
    assert [threads_for(share, 2) for share in (0.0, 0.2, 0.26, 0.5, 0.87, 1.0)] == [2, 2, 1, 1, 1, 1]
    assert [threads_for(share, 8) for share in (0.0, 0.3, 0.83)] == [8, 6, 1]
    # Other processes' share is of the whole machine; this process may use only its own CPUs.
    assert threads_for(0.5, 2, machine_cpus=64) == 2 and threads_for(0.99, 2, machine_cpus=64) == 1


def test_the_policy_sets_torch_s_threads_from_the_load_since_the_last_job(monkeypatch):
    monkeypatch.delenv("GPT2VIZ_THREADS", raising=False)  # the suite pins the count (conftest.py)
    before = torch.get_num_threads()
    ticks = iter([CpuTicks(0, 0, 0), CpuTicks(170, 200, 0), CpuTicks(170, 205, 0), CpuTicks(190, 400, 20)])
    monkeypatch.setattr(threads, "cpu_ticks", lambda: next(ticks))
    monkeypatch.setattr(threads, "available_cpus", lambda: 2)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)
    try:
        torch.set_num_threads(2)  # torch's own count: the policy's ceiling
        policy = ThreadPolicy()
        assert policy.apply() == 1 == torch.get_num_threads()  # others used 170 of 200 ticks: busy
        assert policy.apply() == 1  # 5 ticks: too few to tell, the count stays
        assert policy.apply() == 2 == torch.get_num_threads()  # quiet again since the last reading
    finally:
        torch.set_num_threads(before)


def test_below_the_busy_share_the_count_stays_torch_s_own(monkeypatch):
    # On 8 CPUs, others at 10 % leave 7 free, but a quiet machine's measurements all run on the
    # same threads: the count moves only where the busy rule marks the times anyway.
    monkeypatch.delenv("GPT2VIZ_THREADS", raising=False)
    before = torch.get_num_threads()
    ticks = iter([CpuTicks(0, 0, 0), CpuTicks(100, 1000, 0), CpuTicks(700, 2000, 0)])
    monkeypatch.setattr(threads, "cpu_ticks", lambda: next(ticks))
    monkeypatch.setattr(threads, "available_cpus", lambda: 8)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 8)
    try:
        torch.set_num_threads(4)  # torch's own count (physical cores, say): never exceeded
        policy = ThreadPolicy()
        assert policy.apply() == 4  # others used 10 %
        assert policy.apply() == 3  # others used 60 %: 3.2 CPUs free, rounded, at most 4
    finally:
        torch.set_num_threads(before)


def test_the_model_thread_applies_the_policy_before_each_job(monkeypatch):
    from gpt2viz.tui.jobs import JobService

    applied = []
    monkeypatch.setattr(ThreadPolicy, "apply", lambda self: applied.append(1) or 1)
    results = []
    service = JobService(lambda call: call(), lambda text, code: None)
    service.submit(object(), "work", lambda job: 42, on_result=results.append)
    for _ in range(3000):  # until the job has run (a condition, not a duration)
        if results:
            break
        time.sleep(0.01)
    service.close()
    assert applied and results == [42]


def test_gpt2viz_threads_fixes_the_count(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "cpu_ticks", lambda: CpuTicks(0, 0, 0))
    try:
        for value, fixed in (("1", 1), (" 2 ", 2), ("0", None), ("two", None), ("", None), ("²", None)):
            monkeypatch.setenv("GPT2VIZ_THREADS", value)
            assert threads.fixed_threads() == fixed, value
        monkeypatch.setenv("GPT2VIZ_THREADS", "1")
        assert ThreadPolicy().apply() == 1 == torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def test_a_headless_trace_runs_on_the_cpus_other_processes_leave_free(monkeypatch, tmp_path):
    # A --json trace on two CPUs that another process kept half busy took ~10x a step's time on
    # two threads (the TUI lowered its count; the CLI did not): the trace and its cost lab now run
    # on the threads the policy sets, as the TUI's jobs do.
    import gpt2viz.trace
    from gpt2viz import cli, cost_lab

    monkeypatch.delenv("GPT2VIZ_THREADS", raising=False)
    before = torch.get_num_threads()
    ticks = iter(CpuTicks(170 * n, 200 * n, 0) for n in range(1000))  # others use 85 % throughout
    monkeypatch.setattr(threads, "cpu_ticks", lambda: next(ticks))
    monkeypatch.setattr(threads, "available_cpus", lambda: 2)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)
    seen = []
    record = gpt2viz.trace.trace_prompt
    monkeypatch.setattr(gpt2viz.trace, "trace_prompt", lambda *a, **k: seen.append(torch.get_num_threads()) or record(*a, **k))
    for name in ("context_sweep", "batch_sweep", "precision_sweep"):
        monkeypatch.setattr(cost_lab, name, lambda *a, name=name, **k: seen.append((name, torch.get_num_threads())))
    try:
        torch.set_num_threads(2)
        assert cli.main(["--model", "tiny", "--json", str(tmp_path / "t.json"), "--cost-lab", "Hi"]) == 0
    finally:
        torch.set_num_threads(before)
    assert seen == [1, ("context_sweep", 1), ("batch_sweep", 1), ("precision_sweep", 1)]
