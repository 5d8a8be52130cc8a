"""Writes tests/data/tiny-trace.json, the fixed trace the TUI snapshot tests replay.

It comes from the random-weight `tiny` checkpoint (seed 0: 2 layers, 4 heads, 64 wide) and the
prompt "The meaning of life is", top 5 tokens per position. Snapshots replay the file, so they do
not change when torch's kernels do. Run from the repository root to regenerate:

    python tests/tui/make_test_trace.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "data" / "tiny-trace.json"
PROMPT = "The meaning of life is"


def main() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from checkpoints import write_checkpoint

    import gpt2viz
    from gpt2viz.trace import dump, trace_prompt

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "random-tiny"
        write_checkpoint(directory, "tiny", seed=0)
        lm = gpt2viz.load_model(str(directory))
        trace = trace_prompt(lm, PROMPT, topk=5)
    # Where it was made is noise: keep the name, drop the temporary path.
    trace.model["name"] = "random-tiny"
    trace.model["source"]["path"] = "random-tiny"
    trace.timings = {}
    dump(trace, TRACE)
    print(f"wrote {TRACE} ({TRACE.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
