"""A long trace of GPT-2 small, in a fresh process: `python long_trace.py time|memory DIR THREADS [T]`.

T (default 1,024) is the prompt length; 64 is the longest prompt whose attention maps a trace
keeps whole, 1,024 GPT-2's whole context.
`time`: the median of plain forward passes over T tokens (every position's logits, as the
recorded pass computes them) and of recorded passes worked out completely (`trace_prompt(...)
.resolve_all()`, what the TUI's worker hands to a screen), in the same process.
`memory`: peak RSS (VmHWM) of a process that loads the model and records one such trace, nothing else.

Prints one JSON line.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from load_probe import maxrss_bytes  # this folder's: VmHWM, the process's own peak RSS


def main() -> None:
    mode, directory, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    T = int(sys.argv[4]) if len(sys.argv) > 4 else 1024
    torch.set_num_threads(threads)
    import gpt2viz
    from gpt2viz.process import freeze_startup_objects
    from gpt2viz.trace import dump, trace_prompt

    lm = gpt2viz.load_model(directory)
    freeze_startup_objects()
    ids = [(i * 7919) % lm.config.vocab_size for i in range(T)]
    if mode == "memory":
        before = maxrss_bytes()
        trace_prompt(lm, ids).resolve_all()
        print(json.dumps({"T": T, "peak_rss_before_trace": before, "peak_rss": maxrss_bytes()}))
        return
    batch = torch.tensor([ids])
    forward, traced = [], []
    lm.model(batch)  # warm-up
    for _ in range(3):
        start = time.perf_counter()
        lm.model(batch)
        forward.append(time.perf_counter() - start)
        start = time.perf_counter()
        trace_prompt(lm, ids).resolve_all()
        traced.append(time.perf_counter() - start)
    f, t = statistics.median(forward), statistics.median(traced)
    trace = trace_prompt(lm, ids)
    with tempfile.TemporaryDirectory() as tmp:  # writing it as --json does: the file's size and time
        start = time.perf_counter()
        dump(trace, Path(tmp) / "trace.json")
        write_s = time.perf_counter() - start
        size = (Path(tmp) / "trace.json").stat().st_size
    print(json.dumps({"T": T, "forward_s": f, "trace_s": t, "ratio": t / f, "write_s": write_s, "bytes": size}))


if __name__ == "__main__":
    main()
