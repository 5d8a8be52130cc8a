"""Where gpt2viz's load time and peak RSS go, phase by phase, in a fresh process.

    python benchmarks/load_breakdown.py DIR [THREADS]

Re-does what `gpt2viz.load_model` does, one phase at a time, calling the core's own functions,
and prints one JSON line: seconds, peak RSS (VmHWM) and resident anonymous / file-backed
memory after each phase.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_probe import maxrss_bytes, status_kib  # noqa: E402


def main() -> None:
    directory = Path(sys.argv[1])
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else os.cpu_count()
    phases = []
    t_last = time.perf_counter()

    def mark(name: str) -> None:
        nonlocal t_last
        now = time.perf_counter()
        st = status_kib()
        phases.append(
            {
                "phase": name,
                "s": now - t_last,
                "maxrss_mb": maxrss_bytes() / 1e6,
                "rss_mb": st["VmRSS"] / 1e3,
                "anon_mb": st.get("RssAnon", 0) / 1e3,
                "file_mb": st.get("RssFile", 0) / 1e3,
            }
        )
        t_last = time.perf_counter()

    import torch

    torch.set_num_threads(threads)
    import gpt2viz  # noqa: F401
    from gpt2viz.model.config import GPT2Config
    from gpt2viz.model.gpt2 import GPT2
    from gpt2viz.model.tokenizer import Tokenizer
    from gpt2viz.model.weights import load_weights

    mark("import torch + gpt2viz")
    config = GPT2Config.from_file(directory / "config.json")
    Tokenizer.from_dir(directory)
    mark("config.json + tokenizer")
    weights = load_weights(directory, config, torch.float32, "cpu")
    mark("load_weights: mmap, shape checks, finiteness check (touches every page)")
    dynamo_before = "torch._dynamo" in sys.modules
    model = GPT2(config)
    dynamo = not dynamo_before and "torch._dynamo" in sys.modules
    mark("GPT2(config) on meta" + (" (imported torch._dynamo)" if dynamo else ""))
    state = {name: torch.nn.Parameter(t, requires_grad=False) for name, t in weights.tensors.items()}
    model.load_state_dict(state, strict=True, assign=True)
    mark("load_state_dict(assign=True)")
    print(json.dumps({"threads": torch.get_num_threads(), "phases": phases}))


if __name__ == "__main__":
    main()
