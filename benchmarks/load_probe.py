"""One load measurement in a fresh process: `python load_probe.py ours|transformers DIR THREADS`.

Prints one JSON line: seconds to import, seconds to load, peak RSS (VmHWM) before and after
loading, the resident set split into anonymous and file-backed pages after loading, and the
time and peak RSS of a first one-token forward pass (a model that maps its weights lazily pays
for them there, so "load + first token" is the fair comparison of what a user waits for).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time


def status_kib() -> dict[str, int]:
    out = {}
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
                out[key] = int(rest.split()[0])
    return out


def maxrss_bytes() -> int:
    """Peak RSS of this process: VmHWM, the high-water mark of its own address space.

    Not `ru_maxrss`: Linux carries the parent's high-water mark into a child across fork + exec,
    so a probe started by a benchmark process that already holds a model would report the
    parent's peak (seen: 2.3 GB "before load" in a 240 MB process). `ru_maxrss` is reported too."""
    hwm = status_kib().get("VmHWM")
    if hwm is not None:
        return hwm * 1024
    return ru_maxrss_bytes()


def ru_maxrss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def main() -> None:
    side, directory, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    t0 = time.perf_counter()
    import torch

    torch.set_num_threads(threads)
    if side == "ours":
        import gpt2viz

        load = lambda: gpt2viz.load_model(directory)  # noqa: E731
    else:
        from transformers import GPT2LMHeadModel
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        load = lambda: GPT2LMHeadModel.from_pretrained(directory).eval()  # noqa: E731
    t1 = time.perf_counter()
    before = maxrss_bytes()
    before_now = status_kib()["VmRSS"] * 1024
    model = load()
    t2 = time.perf_counter()
    after = maxrss_bytes()
    st = status_kib()
    ids = torch.tensor([[464]])
    with torch.inference_mode():
        t3 = time.perf_counter()
        if side == "ours":
            model.model(ids, model.model.new_cache(), last_only=True)
        else:
            model(ids, use_cache=True, logits_to_keep=1)
        t4 = time.perf_counter()
    print(
        json.dumps(
            {
                "side": side,
                "threads": torch.get_num_threads(),
                "import_s": t1 - t0,
                "load_s": t2 - t1,
                "rss_before_load": before_now,
                "maxrss_before_load": before,
                "maxrss_after_load": after,
                "ru_maxrss_after_load": ru_maxrss_bytes(),
                "rss_after_load": st["VmRSS"] * 1024,
                "rss_anon_after_load": st.get("RssAnon", 0) * 1024,
                "rss_file_after_load": st.get("RssFile", 0) * 1024,
                "first_forward_s": t4 - t3,
                "maxrss_after_first_forward": maxrss_bytes(),
                "rss_file_after_first_forward": status_kib().get("RssFile", 0) * 1024,
                "rss_anon_after_first_forward": status_kib().get("RssAnon", 0) * 1024,
            }
        )
    )


if __name__ == "__main__":
    main()
