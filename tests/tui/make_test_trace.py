"""Writes the fixed traces the TUI snapshot tests replay (tests/data/).

`tiny-trace.json` comes from the random-weight `tiny` checkpoint (seed 0: 2 layers, 4 heads, 64
wide) and the prompt "The meaning of life is", top 5 tokens per position.

`tiny-generation-trace.json` adds a greedy generation of 12 tokens with the KV cache, from the
bundled model `tiny` when it is installed (its text is readable), else from the same random
checkpoint. Its step times are replaced by fixed numbers (TIMINGS), so nothing on the snapshot
depends on the machine.

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
PROMPT = "The meaning of life is"
NEW_TOKENS = 12


def fixed_ms(step: int) -> float:
    """A made-up but plausible time for step `step`: a slow prefill, then decode steps that vary a little."""
    return 6.0 if step == 0 else 1.0 + 0.25 * (step % 4)


def fix_timings(generation: dict) -> None:
    """Replaces every measured time of a generation record by `fixed_ms`, the numbers derived from
    them, and the machine's measured stream rate by a fixed one."""
    ms = [fixed_ms(i) for i in range(len(generation["steps"]))]
    for step, value in zip(generation["steps"], ms):
        step["ms"] = value
    generation["stream_gb_s"] = 30.0  # this machine's stream rate, fixed like the times
    generation["ttft_ms"] = ms[0] if ms else None
    generation["mean_decode_ms"] = round(sum(ms[1:]) / len(ms[1:]), 3) if len(ms) > 1 else None
    generation["tokens_per_s"] = round(len(ms) / (sum(ms) / 1000), 3) if ms else None


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


if __name__ == "__main__":
    main()
