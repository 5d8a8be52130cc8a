"""Writes the fixed traces the distribution pictures' snapshot tests replay (tests/data/):

- `tiny-pictures-trace.json`: the bundled model `tiny` on "The meaning of life is", top 5 tokens;
- `small-pictures-trace.json`: the random checkpoint with GPT-2 small's shape (tests/checkpoints.py,
  seed 0: 12 blocks, 12 heads, 768 wide) on the same prompt.

Replayed, the snapshots do not change when torch's kernels do. Run from the repository root:

    python tests/tui/make_picture_traces.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny-pictures-trace.json"
SMALL = ROOT / "tests" / "data" / "small-pictures-trace.json"
PROMPT = "The meaning of life is"


def write(lm, name: str, path: Path) -> None:
    from gpt2viz.trace import dump, trace_prompt

    trace = trace_prompt(lm, PROMPT, topk=5)
    # Where it was made is noise: keep the name, drop the path and the timings.
    trace.model["name"] = name
    trace.model["source"]["path"] = name
    trace.timings = {}
    dump(trace, path)
    print(f"wrote {path} ({path.stat().st_size:,} bytes)")


def main() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from checkpoints import write_checkpoint

    import gpt2viz

    write(gpt2viz.load_model("tiny"), "tiny", TINY)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "random-gpt2-small"
        write_checkpoint(directory, "gpt2-small", seed=0)
        write(gpt2viz.load_model(str(directory)), "random-gpt2-small", SMALL)


if __name__ == "__main__":
    main()
