"""The bundled model's greedy generation, naive and cached, in a fresh process:
`python bundled_generation.py NEW_TOKENS PAIRS`.

Generates NEW_TOKENS tokens after "ROMEO:" without and with the KV cache, PAIRS times each,
interleaved (the order swapped every pair), and prints one JSON line: each kind's median ms,
their ratio, and whether both made the same ids. run.py runs it in several processes: on this
project's machines one process's ratio differs from the next one's by up to a third
(benchmarks/RESULTS.md, session 25), so a single process's figure is one sample.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

BUNDLED = Path(__file__).resolve().parent.parent / "assets" / "tiny"
PROMPT = "ROMEO:"


def measure(new_tokens: int, pairs: int) -> dict:
    import gpt2viz

    lm = gpt2viz.load_model(BUNDLED)
    lm.generate(PROMPT, 20)  # threads started, pages touched
    lm.generate(PROMPT, 20, use_cache=False)
    times: dict[str, list[float]] = {"naive": [], "cached": []}
    made: dict[str, list[int]] = {}
    for r in range(pairs):
        for kind in ("cached", "naive") if r % 2 else ("naive", "cached"):
            start = time.perf_counter()
            made[kind] = lm.generate(PROMPT, new_tokens, use_cache=kind == "cached").token_ids
            times[kind].append((time.perf_counter() - start) * 1000)
    naive, cached = statistics.median(times["naive"]), statistics.median(times["cached"])
    return {"kernels": [f"{c.product} {c.n_in}x{c.n_out}: {c.kernel}" for c in lm.kernels],
            "new_tokens": new_tokens, "made": len(made["cached"]), "pairs": pairs, "naive_ms": naive,
            "cached_ms": cached, "cache_speedup": naive / cached, "ids_naive_eq_cached": made["naive"] == made["cached"]}


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[1]), int(sys.argv[2]))))
