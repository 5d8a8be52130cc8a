"""Writes the fixed traces the TUI snapshot tests replay (tests/data/).

`tiny-trace.json` comes from the random-weight `tiny` checkpoint (seed 0: 2 layers, 4 heads, 64
wide) and the prompt "The meaning of life is", top 5 tokens per position.

`tiny-generation-trace.json` adds a greedy generation of 12 tokens with the KV cache, from the
bundled model `tiny` when it is installed (its text is readable), else from the same random
checkpoint. Its step times are replaced by fixed numbers (TIMINGS), so nothing on the snapshot
depends on the machine.

`tiny-lab-trace.json` is the generation trace with a cost lab result whose shapes, bytes and
FLOPs are the model's own and whose times, rates and quality numbers are fixed (fixed_lab_result).

Snapshots replay the files, so they do not change when torch's kernels do. Run from the
repository root to regenerate:

    python tests/tui/make_test_trace.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "data" / "tiny-trace.json"
GENERATION_TRACE = ROOT / "tests" / "data" / "tiny-generation-trace.json"
LAB_TRACE = ROOT / "tests" / "data" / "tiny-lab-trace.json"
PROMPT = "The meaning of life is"
NEW_TOKENS = 12


def fixed_ms(step: int) -> float:
    """A made-up but plausible time for step `step`: a slow prefill, then decode steps that vary a little."""
    return 6.0 if step == 0 else 1.0 + 0.25 * (step % 4)


def fix_timings(generation: dict) -> None:
    """Replaces every measured time of a generation record by `fixed_ms`, the numbers derived from
    them, and the machine's measured stream rate and other processes' share of the CPUs by fixed ones."""
    ms = [fixed_ms(i) for i in range(len(generation["steps"]))]
    for step, value in zip(generation["steps"], ms):
        step["ms"] = value
    generation["stream_gb_s"] = 30.0  # this machine's stream rate, fixed like the times
    generation["others_cpu"] = 0.0  # other processes' share of the CPUs meanwhile: measured with the times
    generation["ttft_ms"] = ms[0] if ms else None
    generation["mean_decode_ms"] = round(sum(ms[1:]) / len(ms[1:]), 3) if len(ms) > 1 else None
    generation["tokens_per_s"] = round(len(ms) / (sum(ms) / 1000), 3) if ms else None


def fixed_lab_result(lm, prompt_ids: list[int]) -> dict:
    """A cost lab result for `lm` with fixed, plausible numbers in place of measurements: a naive
    step growing with the position, a nearly flat cached one, a batch step that stays flat up to
    B = 4, and four number formats."""
    from gpt2viz import cost_lab

    costs = cost_lab.StepCosts.of(lm)
    machine = cost_lab.Machine(stream_gb_s=30.0, compute_gflop_s=150.0, threads=2)
    result = cost_lab.LabResult(lm.name, "float32", lm.n_params, machine, costs, lm.config.n_ctx, lm.config.vocab_size)
    n = lm.config.n_ctx
    start = len(prompt_ids)
    positions = cost_lab.context_positions(start, n)
    result.context = cost_lab.ContextSweep(
        positions, [1.5 + 0.035 * p for p in positions], [1.8 + 0.001 * p for p in positions], start, n
    )
    context = cost_lab.cached_positions(cost_lab.BATCH_CONTEXT, n)
    rows = []
    for b, ms in zip(cost_lab.BATCH_SIZES, (2.0, 2.2, 2.4, 3.6, 6.0, 11.0)):
        rows.append(cost_lab.BatchRow(b, ms, costs.flops(b, context), costs.bytes_read(b, context)))
    result.batch = cost_lab.BatchSweep(context, rows)
    context = cost_lab.cached_positions(cost_lab.PRECISION_CONTEXT, n)
    formats = []
    for name, ms, ratio, dlogit, top1, kl in (
        ("float32", 2.0, 1.0, 0.0, 1.0, 0.0),
        ("bfloat16", 2.6, 0.5, 0.16, 1.0, 1.1e-4),
        ("float16", 1.5, 0.5, 0.0084, 1.0, 1.6e-6),
        ("int8", 1.6, 0.47, 0.43, 1.0, 3.0e-4),
    ):
        weights = int(costs.weight_bytes * ratio)
        nbytes = weights + context * costs.kv_bytes_per_position * (1 if name == "int8" else ratio)
        quality = {"positions": len(prompt_ids), "max_abs_dlogit": dlogit, "top1_agreement": top1, "mean_kl": kl}
        formats.append(cost_lab.PrecisionRow(name, ms, int(nbytes), weights, quality))
    result.precision_formats = cost_lab.PrecisionSweep(context, formats)
    return result.to_dict()


def write_lab_trace(lm) -> None:
    from gpt2viz.trace import dump, load

    trace = load(GENERATION_TRACE)
    trace.cost_lab = fixed_lab_result(lm, trace.all_token_ids)
    dump(trace, LAB_TRACE)
    print(f"wrote {LAB_TRACE} ({LAB_TRACE.stat().st_size:,} bytes)")


def anonymise(trace, name: str) -> None:
    """Where it was made is noise: keep the name, drop the path and the timings."""
    trace.model["name"] = name
    trace.model["source"]["path"] = name
    trace.timings = {}


def main() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from checkpoints import write_checkpoint

    import gpt2viz
    from gpt2viz.generate import SamplingSettings
    from gpt2viz.trace import dump, trace_prompt

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "random-tiny"
        write_checkpoint(directory, "tiny", seed=0)
        random_lm = gpt2viz.load_model(str(directory))
        trace = trace_prompt(random_lm, PROMPT, topk=5)
        anonymise(trace, "random-tiny")
        dump(trace, TRACE)
        print(f"wrote {TRACE} ({TRACE.stat().st_size:,} bytes)")

        try:
            lm, name = gpt2viz.load_model("tiny"), "tiny"
        except Exception as err:  # not trained yet
            print(f"no bundled tiny model ({err}); using the random checkpoint")
            lm, name = random_lm, "random-tiny"
        trace = trace_prompt(lm, PROMPT, topk=5, generate_tokens=NEW_TOKENS, settings=SamplingSettings())
        anonymise(trace, name)
        fix_timings(trace.generation)
        dump(trace, GENERATION_TRACE)
        print(f"wrote {GENERATION_TRACE} ({GENERATION_TRACE.stat().st_size:,} bytes): {trace.generation['text']!r}")
        write_lab_trace(lm)


if __name__ == "__main__":
    if sys.argv[1:] == ["--lab-only"]:  # the lab trace alone, from the committed generation trace
        import gpt2viz

        write_lab_trace(gpt2viz.load_model("tiny"))
    else:
        main()
