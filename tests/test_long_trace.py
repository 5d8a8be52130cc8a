"""Traces of long prompts stay small in memory and grow smoothly with the prompt: whole attention
maps only up to 64 positions, longer ones pooled to as many cells, every position's top tokens
worked out a few rows at a time."""

from __future__ import annotations

import pytest

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import torch, gpt2viz
    from gpt2viz.trace import dumps, trace_prompt

    def peak_mb():
        # VmHWM, this process's own high-water mark (ru_maxrss may carry the parent's over exec)
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024

    lm = gpt2viz.load_model(sys.argv[1])
    out = {}
    for T in map(int, sys.argv[2:]):
        ids = [(i * 7919) % 50000 for i in range(T)]
        lm.model(torch.tensor([ids]))  # a plain pass: its logits of every position set the baseline
        before = peak_mb()
        trace = trace_prompt(lm, ids).resolve_all()  # what the TUI's worker hands a screen
        pattern = trace.event("blocks.0.attn.hook_pattern")
        out[T] = {"growth_mb": peak_mb() - before, "reduced": pattern["reduced"], "bytes": len(dumps(trace))}
        del trace
    print(json.dumps(out))
    """
)


def run(checkpoint, *lengths: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(checkpoint), *map(str, lengths)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return {int(k): v for k, v in json.loads(proc.stdout).items()}


@pytest.mark.slow  # gpt2-small traces up to 1,024 tokens (40 s)
def test_gpt2_small_traces_grow_smoothly_from_64_to_1024_tokens(ckpts):
    """GPT-2 small's shape: 64 positions keep 24 whole maps of 12 heads, 65 pool them to the same
    64 x 64 cells, so the file never jumps (it was 34.9 MB at 128 positions and 9.7 MB at 129);
    1,024 positions never copy the logits of every position (206 MB) whole into float64 (that was
    1.6 GB more, and whole 256-position maps ~500 MB of Python lists)."""
    result = run(ckpts.path("gpt2-small"), 64, 65, 256, 257, 1024)
    assert result[64]["reduced"] is False and result[65]["reduced"] is True
    for a, b in ((64, 65), (256, 257)):
        assert result[a]["bytes"] <= result[b]["bytes"] <= 1.1 * result[a]["bytes"], result
    # From 65 to 1,024 positions only the per-position parts grow: far less than T.
    assert result[1024]["bytes"] < 2.5 * result[65]["bytes"], result
    assert max(r["growth_mb"] for T, r in result.items() if T < 1024) < 400, result
    # Measured 300-690 MB from run to run (where the allocator's peak falls varies); the float64
    # copy of every position's logits this guards against was 1.6 GB more.
    assert result[1024]["growth_mb"] < 900, result
    assert result[1024]["bytes"] < 40e6, result


def test_the_logits_of_every_position_are_not_multiplied(ckpts):
    """The same on a narrow model, where the logits are nearly all there is."""
    result = run(ckpts.path("long-narrow"), 1024)
    assert result[1024]["growth_mb"] < 300, result
