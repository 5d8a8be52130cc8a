"""The cost lab's experiments (gpt2viz.cost_lab), the rule that says what bounds a step
(gpt2viz.costs.step_bound), and the lab result in a trace. Times are never asserted: only what
was measured, where, and how the numbers derived from it follow."""

from __future__ import annotations

import json
import os

import pytest
import torch

from gpt2viz import cost_lab
from gpt2viz.costs import step_bound
from gpt2viz.model.config import GPT2Config
from gpt2viz.model.gpt2 import GPT2
from gpt2viz.trace import TraceFileError, dump, load, trace_prompt
from gpt2viz.trace.events import rounded


# -- what bounds a step ---------------------------------------------------------------------------


def test_step_bound_follows_the_measured_rates():
    # 30 GB/s: 300 MB take 10 ms to read.
    assert step_bound(300e6, 12.0, 30.0).kind == "memory"  # 83% of the step
    assert step_bound(300e6, 25.0, 30.0).kind == "partly"  # 40%
    assert step_bound(300e6, 100.0, 30.0).kind == "fixed"  # 10%
    assert step_bound(300e6, 5.0, 30.0).kind == "caches"  # faster than main memory can deliver
    assert step_bound(300e6, 12.0, None).kind == "unmeasured"
    # 3 GFLOP at 100 GFLOP/s take 30 ms, more than reading: compute bound.
    compute = step_bound(300e6, 40.0, 30.0, flops=3e9, compute_gflop_s=100.0)
    assert (compute.kind, compute.resource) == ("compute", "compute")
    assert compute.memory_ms == pytest.approx(10.0) and compute.compute_ms == pytest.approx(30.0)
    assert compute.fixed_ms == pytest.approx(10.0)


# -- the costs of one step, from the shapes ------------------------------------------------------


def test_step_costs_count_gpt2_small_by_hand(tiny_lm):
    config = GPT2Config(n_layer=12, n_head=12, n_embd=768, n_ctx=1024, vocab_size=50257)
    products = 12 * (768 * 3 * 768 + 768 * 768 + 2 * 768 * 3072)  # 84,934,656 weights
    assert products == 84_934_656
    with torch.device("meta"):  # GPT-2 small's layers, no memory
        model = GPT2(config)
    lm = type("LM", (), {"config": config, "weight_bytes": 500_000_000, "model": model,
                         "step_weight_bytes": type(tiny_lm).step_weight_bytes})()
    costs = cost_lab.StepCosts.of(lm)
    assert costs.flops_per_row == 2 * (products + 50257 * 768)
    assert costs.flops_per_cached_position == 4 * 12 * 768
    assert costs.kv_bytes_per_position == 2 * 12 * 768 * 4  # K and V, float32
    assert costs.weight_bytes == 500_000_000 - 1023 * 768 * 4  # of the position table, the row in use
    assert costs.bytes_read(8, 64) == costs.weight_bytes + 8 * 64 * 73_728
    assert costs.flops(2, 10) == 2 * (costs.flops_per_row + 10 * costs.flops_per_cached_position)


def test_a_llama_model_s_step_counts_its_grouped_keys_and_its_gate(llama_lm):
    """Every weight of a product is one multiply-add a row: the k and v projections are as wide as
    the key/value heads (grouped-query attention), the MLP has three matrices (SwiGLU). Counted
    here from the tensors themselves (the token table once more as the tied LM head)."""
    weights = llama_lm.model.state_dict()
    in_products = sum(w.numel() for name, w in weights.items() if name.endswith("proj.weight"))
    head = weights.get("lm_head.weight", weights["model.embed_tokens.weight"]).numel()
    config = llama_lm.config
    assert config.n_kv_head < config.n_head and config.step_multiply_adds == in_products + head
    assert cost_lab.StepCosts.of(llama_lm).flops_per_row == 2 * (in_products + head)


# -- 1. context length ---------------------------------------------------------------------------


def test_context_positions_spread_from_the_prompt_to_the_end():
    assert cost_lab.context_positions(5, 256, 16)[0] == 5
    assert cost_lab.context_positions(5, 256, 16)[-1] == 255
    assert len(cost_lab.context_positions(5, 256, 16)) == 16
    assert cost_lab.context_positions(3, 6, 16) == [3, 4, 5]
    assert cost_lab.context_positions(10, 11) == [10]


def test_context_sweep_times_both_ways_at_every_position(tiny_lm):
    ids = tiny_lm.tokenizer.encode("The meaning of life is")
    seen = []
    sweep = cost_lab.context_sweep(tiny_lm, ids, 40, points=4, reps=1, on_progress=lambda d, t: seen.append((d, t)))
    assert sweep.positions == cost_lab.context_positions(len(ids), 40, 4)
    assert len(sweep.naive_ms) == len(sweep.cached_ms) == 4
    assert all(ms > 0 for ms in sweep.naive_ms + sweep.cached_ms)
    assert (sweep.start, sweep.end, sweep.complete) == (len(ids), 40, True)
    assert seen[-1] == (4, 4)
    if os.path.exists("/proc/stat"):  # other processes' share of the CPUs meanwhile (gpt2viz.cpu_share)
        assert sweep.others_cpu is None or 0 <= sweep.others_cpu <= 1  # None: too short to tell (MIN_TICKS)
    # Longer than the context: cut to it.
    n_ctx = tiny_lm.config.n_ctx
    assert cost_lab.context_sweep(tiny_lm, ids, 10 * n_ctx, points=2, reps=1).end == n_ctx


def test_context_sweep_stops_when_asked(tiny_lm):
    calls = []
    sweep = cost_lab.context_sweep(tiny_lm, [1, 2, 3], 40, points=4, reps=1, should_stop=lambda: len(calls) > 0,
                                   on_progress=lambda d, t: calls.append(d))
    assert sweep.positions == [3] and not sweep.complete


def test_crossover_and_totals_follow_the_curve():
    sweep = cost_lab.ContextSweep([10, 20, 30, 40], [1.0, 2.0, 3.0, 4.0], [1.5, 2.5, 2.0, 2.0], start=10, end=41)
    assert sweep.crossover == 30  # cached slower at 10 and 20, faster from 30 on
    # Linear between the points, flat beyond the last: sum over positions 10..40.
    naive = sum(1.0 + (p - 10) / 10 for p in range(10, 41)) / 1000
    assert sweep.naive_total_s == pytest.approx(naive)
    never = cost_lab.ContextSweep([10, 20], [1.0, 2.0], [1.5, 2.5], start=10, end=21)
    assert never.crossover is None
    early_win = cost_lab.ContextSweep([10, 20, 30], [2.0, 2.0, 3.0], [1.0, 2.5, 2.0], start=10, end=31)
    assert early_win.crossover == 30  # faster at 10, slower at 20: the crossover is the last switch
    # The closed-form sum equals summing the interpolation position by position.
    def by_hand(s, ms):
        total = 0.0
        for p in range(s.start, s.end):
            if p <= s.positions[0]:
                total += ms[0]
            elif p >= s.positions[-1]:
                total += ms[-1]
            else:
                i = next(i for i in range(len(s.positions)) if s.positions[i + 1] >= p)
                x0, x1, y0, y1 = s.positions[i], s.positions[i + 1], ms[i], ms[i + 1]
                total += y0 + (y1 - y0) * (p - x0) / (x1 - x0)
        return total / 1000
    odd = cost_lab.ContextSweep([7, 13, 40], [1.0, 4.0, 2.5], [0.5, 0.7, 0.6], start=3, end=52)
    assert odd.naive_total_s == pytest.approx(by_hand(odd, odd.naive_ms))
    assert odd.cached_total_s == pytest.approx(by_hand(odd, odd.cached_ms))


# -- 2. batch size -------------------------------------------------------------------------------


def test_batch_sweep_rows_carry_their_arithmetic(tiny_lm):
    sweep = cost_lab.batch_sweep(tiny_lm, [1, 2, 3], context=16, sizes=(1, 2, 4), steps=1)
    assert [r.batch for r in sweep.rows] == [1, 2, 4] and sweep.complete and sweep.skipped == []
    assert sweep.others_cpu is None or 0 <= sweep.others_cpu <= 1
    costs = cost_lab.StepCosts.of(tiny_lm)
    for r in sweep.rows:
        assert r.flops == costs.flops(r.batch, 16) and r.bytes_read == costs.bytes_read(r.batch, 16)
        assert r.intensity == pytest.approx(r.flops / r.bytes_read)
        assert r.tokens_per_s == pytest.approx(r.batch / r.step_ms * 1000)
    assert sweep.rows[2].intensity > 3.5 * sweep.rows[0].intensity  # the weights are read once


def test_batch_sweep_skips_sizes_that_do_not_fit(tiny_lm, monkeypatch):
    per_row = 17 * cost_lab.StepCosts.of(tiny_lm).kv_bytes_per_position
    # A quarter of the free memory holds 4 rows: the caches of B = 1 and 2 (3 rows, all held at
    # once), not also B = 4's.
    monkeypatch.setattr(cost_lab, "available_memory", lambda: 4 * 4 * per_row)
    sweep = cost_lab.batch_sweep(tiny_lm, [1], context=16, sizes=(1, 2, 4, 8), steps=1)
    assert [r.batch for r in sweep.rows] == [1, 2] and sweep.skipped == [4, 8]


def test_flat_until():
    row = lambda b, ms: cost_lab.BatchRow(b, ms, 1, 1)  # noqa: E731
    assert cost_lab.BatchSweep(64, [row(1, 2.0), row(2, 2.4), row(4, 2.5), row(8, 4.0)]).flat_until == 4
    assert cost_lab.BatchSweep(64, [row(1, 2.0), row(2, 3.0)]).flat_until == 1
    # Flat up to B only if every size before it was: a slow B = 2 ends it, whatever comes after.
    assert cost_lab.BatchSweep(64, [row(1, 2.0), row(2, 3.0), row(4, 2.4), row(8, 5.0)]).flat_until == 1


# -- 3. number formats ---------------------------------------------------------------------------


def test_precision_sweep_measures_each_format_against_float32(tiny_lm):
    ids = tiny_lm.tokenizer.encode("The meaning of life is")
    sweep = cost_lab.precision_sweep(tiny_lm, ids, context=16, formats=("float32", "int8"), steps=1)
    rows = {r.format: r for r in sweep.rows}
    assert set(rows) == {"float32", "int8"} and sweep.context == 16
    assert sweep.others_cpu is None or 0 <= sweep.others_cpu <= 1
    assert rows["float32"].quality["max_abs_dlogit"] == 0 and rows["float32"].quality["top1_agreement"] == 1
    assert rows["int8"].quality["max_abs_dlogit"] > 0 and rows["int8"].quality["positions"] == len(ids)
    assert rows["int8"].weight_bytes < 0.6 * rows["float32"].weight_bytes  # position embeddings stay float32
    for r in rows.values():
        assert r.gb_s == pytest.approx(r.bytes_read / r.step_ms / 1e6)


# -- the result in a trace -----------------------------------------------------------------------


def _small_result(lm):
    result = cost_lab.new_result(lm)
    assert result.machine.stream_gb_s > 0 and result.machine.compute_gflop_s > 0
    result.context = cost_lab.context_sweep(lm, [1, 2], 12, points=3, reps=1)
    result.batch = cost_lab.batch_sweep(lm, [1, 2], context=8, sizes=(1, 2), steps=1)
    return result


def test_a_lab_result_survives_the_trace_file(tiny_lm, tmp_path):
    trace = trace_prompt(tiny_lm, "Hello")
    result = _small_result(tiny_lm)
    trace.cost_lab = result.to_dict()
    path = tmp_path / "lab.json"
    dump(trace, path)
    again = cost_lab.LabResult.from_dict(load(path).cost_lab)
    # A later version's extra fields are left out, not a crash.
    doc = load(path).cost_lab
    doc["machine"]["cache_bytes"] = 1
    doc["context"]["notes"] = "x"
    # Its numbers as a trace writes every number: to 6 significant digits.
    assert cost_lab.LabResult.from_dict(doc).machine == cost_lab.LabResult.from_dict(rounded(result.to_dict())).machine
    assert again.context.positions == result.context.positions
    assert again.batch.rows[1].batch == 2 and again.precision_formats is None
    assert again.costs == result.costs
    assert again.context.others_cpu == result.context.others_cpu and again.batch.others_cpu == result.batch.others_cpu
    # A trace written before other processes' share was measured: unknown, not a crash.
    assert again.machine.others_cpu == result.machine.others_cpu
    for measured in (doc["context"], doc["batch"], doc["machine"]):
        measured.pop("others_cpu", None)
    older = cost_lab.LabResult.from_dict(doc)
    assert older.context.others_cpu is None and older.batch.others_cpu is None and older.machine.others_cpu is None


@pytest.mark.parametrize(
    "damage",
    [
        lambda lab: lab["context"].update(naive_ms=[1.0]),  # not one per position
        lambda lab: lab["context"].update(cached_ms=[0.0] * len(lab["context"]["positions"])),  # no time
        lambda lab: lab["machine"].update(stream_gb_s="fast"),
        lambda lab: lab["batch"]["rows"][0].update(step_ms=None),
        lambda lab: lab.update(precision="float64"),
        lambda lab: lab.pop("costs"),
        lambda lab: lab["context"].update(positions=list(reversed(lab["context"]["positions"]))),
        lambda lab: lab["context"].update(end=10**9),  # beyond the context
        lambda lab: lab["batch"]["rows"].reverse(),  # sizes must rise from 1
        lambda lab: lab["context"].update(others_cpu=1.5),  # a share of the CPUs: at most all of them
        lambda lab: lab["batch"].update(others_cpu="busy"),
        lambda lab: lab["machine"].update(others_cpu=-0.1),
    ],
)
def test_a_damaged_lab_result_is_refused(tiny_lm, tmp_path, damage):
    trace = trace_prompt(tiny_lm, "Hello")
    lab = _small_result(tiny_lm).to_dict()
    damage(lab)
    trace.cost_lab = lab
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(trace.to_dict()), encoding="utf-8")
    with pytest.raises(TraceFileError, match="cost_lab"):
        load(path)


# -- the command line ----------------------------------------------------------------------------


def test_cost_lab_on_the_command_line(tiny_dir, tmp_path):
    from test_cli_errors import gpt2viz, one_error_line

    code, stderr, _ = gpt2viz("--cost-lab")
    assert code == 2 and "--cost-lab works with --json" in one_error_line(stderr)
    out = tmp_path / "lab.json"
    code, stderr, _ = gpt2viz("Hello there", "--model", str(tiny_dir), "--json", str(out), "--cost-lab", timeout=300)
    assert code == 0, stderr
    assert "cost lab: per-token time against position" in stderr
    lab = cost_lab.LabResult.from_dict(load(out).cost_lab)
    assert lab.context.end == 128 and lab.context.complete  # the random tiny's whole context
    assert [r.batch for r in lab.batch.rows] == list(cost_lab.BATCH_SIZES)
    assert [r.format for r in lab.precision_formats.rows] == ["float32", "bfloat16", "float16", "int8"]


def test_rates_measured_on_a_busy_machine_are_measured_again(monkeypatch):
    """The machine's rates are measured once a process and kept; a rate measured while other
    processes kept the CPUs busy is too low to judge by, so the next call measures it again."""
    from gpt2viz import costs

    calls: list[int] = []
    shares = iter([0.9, 0.0])
    monkeypatch.setattr(costs, "_rates", {})
    monkeypatch.setattr(costs, "share_since", lambda started: next(shares))

    def measure() -> float:
        calls.append(1)
        return float(len(calls))

    assert costs._measured_once("probe", measure) == costs.Rate(1.0, 0.9)
    again = costs._measured_once("probe", measure)  # busy the first time: measured again
    assert again == costs.Rate(2.0, 0.0)
    assert costs._measured_once("probe", measure) is again and len(calls) == 2  # quiet: kept
    # The lab's machine: a kept quiet rate as it is, a busy one measured again; the busier share.
    monkeypatch.setattr(costs, "_rates", {"stream": costs.Rate(30.0, 0.05), "compute": costs.Rate(90.0, 0.3)})
    monkeypatch.setattr(costs, "share_since", lambda started: 0.0)
    machine = cost_lab.Machine.measure()
    assert machine.stream_gb_s == 30.0 and machine.compute_gflop_s > 0 and machine.others_cpu == 0.05
