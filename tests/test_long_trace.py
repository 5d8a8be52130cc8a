"""A trace of a prompt that fills GPT-2's context stays small in memory and in the file."""

from __future__ import annotations

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
    ids = [(i * 7919) % 50000 for i in range(1024)]
    lm.model(torch.tensor([ids]))  # a plain pass: its [1024, 50257] logits set the baseline
    before = peak_mb()
    trace = trace_prompt(lm, ids).resolve_all()
    after = peak_mb()
    pattern = trace.event("blocks.0.attn.hook_pattern")
    print(json.dumps({"growth_mb": after - before, "reduced": pattern["reduced"], "bytes": len(dumps(trace))}))
    """
)


def test_a_1024_token_trace_does_not_multiply_the_logits_in_memory(ckpts):
    """The logits of every position are 206 MB in float32; working out each position's top tokens
    must not hold float64 copies of all of them at once (that was 1.2 GB more)."""
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(ckpts.path("long-narrow"))], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["reduced"] is True  # maps beyond 256 positions are pooled
    assert result["growth_mb"] < 300, result
    assert result["bytes"] < 20e6, result
