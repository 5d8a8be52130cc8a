"""gpt2viz vs transformers on GPT-2-shaped random-weight checkpoints: one command, one table.

    python benchmarks/run.py [--quick] [--out benchmarks/results.json] [--threads N]
                             [--shapes gpt2-small,gpt2-medium] [--no-profile]

See benchmarks/README.md for what every number means.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import gc
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

HERE = Path(__file__).resolve().parent
BUNDLED = HERE.parent / "assets" / "tiny"  # the bundled model
sys.path.insert(0, str(HERE))

import torch  # noqa: E402

from checkpoints import SHAPES, ensure_checkpoint, weights_bytes  # noqa: E402
from quiet import GATE  # noqa: E402
import tui_steps  # noqa: E402

from gpt2viz.cost_lab import StepCosts, interleaved_steps, rewind_to  # noqa: E402

PROMPT = "The quick brown fox jumps over the lazy dog, and then it runs into the forest"  # 17 tokens
MB = 1e6

# How much work each part does. "small" settings are used for gpt2-small, "medium" for gpt2-medium.
FULL = {
    "load_reps": {"gpt2-small": 3, "gpt2-medium": 2},
    "prefill_T": [5, 128, 1024],
    "prefill_reps": {
        "gpt2-small": {5: 15, 128: 7, 1024: 3},
        "gpt2-medium": {5: 5, 128: 3, 1024: 2},
    },
    "decode_ctx": [16, 256, 1000],
    "decode_steps": {"gpt2-small": 60, "gpt2-medium": 16},
    "decode_warmup": 2,
    "gen_n": [50, 200],
    "gen_reps": {50: {"naive": 2, "cached": 3, "hf": 3}, 200: {"naive": 1, "cached": 2, "hf": 2}},
    "hook_T": [5, 128],
    "hook_reps": {5: 40, 128: 11},
    "bw_reps": 9,
    "profile_steps": 20,
    "precision": {"ctx": 256, "steps": 20, "warmup": 2, "prefill_T": 128, "prefill_reps": 9},
    "batch": {"ctx": 64, "sizes": [1, 2, 4, 8, 16, 32], "steps": 9},
    "generate_batch": {"ctx": 64, "new_tokens": 17, "reps": 5},
    "bundled_generation": {"new_tokens": 200, "pairs": 5, "processes": 5},
    "tui_steps": {"rounds": 3, "per_round": 3},
    "heldout_tokens": None,  # the whole text
}
QUICK = {
    "load_reps": {"gpt2-small": 1, "gpt2-medium": 1},
    "prefill_T": [5, 64],
    "prefill_reps": {"gpt2-small": {5: 2, 64: 2}, "gpt2-medium": {5: 1, 64: 1}},
    "decode_ctx": [16, 64],
    "decode_steps": {"gpt2-small": 3, "gpt2-medium": 2},
    "decode_warmup": 1,
    "gen_n": [8],
    "gen_reps": {8: {"naive": 1, "cached": 1, "hf": 1}},
    "hook_T": [5, 32],
    "hook_reps": {5: 2, 32: 2},
    "bw_reps": 3,
    "profile_steps": 3,
    "precision": {"ctx": 32, "steps": 2, "warmup": 1, "prefill_T": 16, "prefill_reps": 1},
    "batch": {"ctx": 16, "sizes": [1, 2, 8], "steps": 2},
    "generate_batch": {"ctx": 16, "new_tokens": 3, "reps": 1},
    "bundled_generation": {"new_tokens": 20, "pairs": 1, "processes": 1},
    "tui_steps": {"rounds": 1, "per_round": 1, "tokens": 8},
    "heldout_tokens": 1024,
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def ms_since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


_ORDER_RNG = random.Random(0)


SETTLE_BELOW_MS = 300.0


def shuffled(names: list[str]) -> list[str]:
    """A fresh random order (seeded), so no contender always follows the same other one."""
    order = list(names)
    _ORDER_RNG.shuffle(order)
    return order


def interleaved(fns: dict[str, callable], reps: int, warmup: int = 1) -> dict[str, list[float]]:
    """Runs every contender `reps` times, round by round in a random order each round, and
    returns each one's wall times in ms. `warmup` untimed rounds first.

    A call that used both cores leaves OpenMP worker threads spinning for tens of ms, which
    slows whatever runs next by ~3 ms (measured: a decode step after a two-thread step, even
    after a 10 ms pause). So a short contender (< SETTLE_BELOW_MS) is run once untimed right
    before each timed call: every timing is of a call that follows a call of its own kind, as
    in real use, whoever ran before it."""
    names = list(fns)
    warm_ms = {n: 0.0 for n in names}
    for _ in range(warmup):
        for n in names:
            t0 = time.perf_counter()
            fns[n]()
            warm_ms[n] = ms_since(t0)
    settle = {n: warmup > 0 and warm_ms[n] < SETTLE_BELOW_MS for n in names}
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(reps):
        for n in shuffled(names):
            if settle[n]:
                fns[n]()
            times[n].append(GATE.measure(fns[n])[0])
    return times


# ---------------------------------------------------------------------------------------------
# machine


def kernel_setting() -> str:
    """Which kernels ran: torch's CPU capability, the steering variables set, and what
    gpt2viz measured of fbgemm (int8 inputs of 7 or 8 bits; float16 rows independent or not)."""
    from gpt2viz.kernels.cpu import this_cpu
    from gpt2viz.kernels import fbgemm_float16, int8 as precision

    cpu = this_cpu()  # the steering variables set (README: the kernels tier) are part of its kind
    measured = [f"int8 inputs {'7' if precision.int8_inputs_reduced() else '8'} bits"]
    if fbgemm_float16.available():
        measured.append("float16 rows " + ("independent" if fbgemm_float16.rows_independent() else "one at a time"))
    return ", ".join([f"torch {cpu.capability}", *(cpu.steered or ["not steered"]), *measured])


def machine_info(threads: int) -> dict:
    from gpt2viz.kernels.cpu import this_cpu

    cpu = this_cpu()
    import transformers

    mem_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu.model,
        "cpu_flags": " ".join(cpu.flags),
        "kernels": kernel_setting(),
        "logical_cpus": os.cpu_count(),
        "mem_gb": mem_gb,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "requested_threads": threads,
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "other_heavy_processes": other_load(),
    }


def other_load() -> list[str]:
    """Names of other processes using a lot of CPU right now (the numbers are noisy if any)."""
    try:
        out = subprocess.run(
            ["ps", "-eo", "pid,pcpu,args", "--sort=-pcpu"], capture_output=True, text=True, timeout=5
        ).stdout.splitlines()[1:]
    except (OSError, subprocess.SubprocessError):
        return []
    busy = []
    for line in out[:6]:
        parts = line.split(None, 2)
        if len(parts) == 3 and int(parts[0]) != os.getpid():
            try:
                if float(parts[1]) > 20:
                    busy.append(f"pid {parts[0]} {parts[1]}% {parts[2][:60]}")
            except ValueError:
                pass
    return busy


def _bandwidth_text(bw: dict) -> str:
    if "variants_gb_s" not in bw:  # results written before the two-core measurements
        return f"bandwidth {bw['gb_s']:.1f} GB/s mv, {bw['sum_gb_s']:.1f} GB/s sum"
    v = bw["variants_gb_s"]
    return (f"bandwidth {bw['gb_s']:.1f} GB/s, the fastest matrix-vector product: the BLAS's own {v['mv']:.1f}, "
            f"two cores by columns {v['split_columns']:.1f}, by rows {v['split_rows']:.1f}; sum {bw['sum_gb_s']:.1f}")


def measure_bandwidth(reps: int) -> tuple[dict, tuple]:
    """Memory read bandwidth from a large fp32 matrix-vector product `x @ A` (8192 x 8192 = 268 MB),
    and the fastest of its reads with the bytes it reads, for bench_decode to time among its steps.

    Three ways, and the fastest counts: `torch.mv` on A's transpose, which the BLAS runs as it
    decides (one core on some machines, all on others); gpt2viz's two-core split by columns
    (`gpt2viz.kernels.split`, used by a decode step where it measured faster); and a split by
    rows, each core streaming one contiguous half of A into a partial sum (not the digits of the
    one-core product: a decode step uses it only where the plain product keeps none). A plain
    `sum` over A is shown too: a read with no arithmetic at all.
    """
    from gpt2viz.costs import bandwidth_probes

    n = 8192
    variants, a = bandwidth_probes(n)
    nbytes = a.numel() * a.element_size()
    for fn in variants.values():
        fn()
        fn()
    times = {k: median(GATE.measure(fn)[0] for _ in range(reps)) for k, fn in variants.items()}
    sums = [GATE.measure(a.sum)[0] for _ in range(max(3, reps // 2))]
    fastest = min(times, key=times.get)
    probe = (variants[fastest], nbytes)
    gb_s = {k: nbytes / ms / 1e6 for k, ms in times.items()}
    return {
        "matrix": f"{n}x{n} fp32",
        "bytes": nbytes,
        "ms": times,
        "variants_gb_s": gb_s,
        "gb_s": max(gb_s.values()),
        "sum_gb_s": nbytes / median(sums) / 1e6,
        "fastest": fastest,
    }, probe


# ---------------------------------------------------------------------------------------------
# load (fresh subprocesses)


def run_script(script: str, *args: object) -> tuple[dict | None, str]:
    """Runs `benchmarks/<script> args...` in a fresh process, timed by the quiet gate; returns the
    last JSON line it printed (None if it failed or printed none) and its stderr."""
    box = {}

    def once():
        box["proc"] = subprocess.run(
            [sys.executable, str(HERE / script), *map(str, args)], capture_output=True, text=True, timeout=600
        )

    GATE.measure(once)
    proc = box["proc"]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return (json.loads(lines[-1]) if proc.returncode == 0 and lines else None), proc.stderr


def bench_load(directory: Path, reps: int, threads: int) -> dict:
    runs: dict[str, list[dict]] = {"ours": [], "transformers": []}
    for r in range(reps):
        order = ["ours", "transformers"] if r % 2 == 0 else ["transformers", "ours"]
        for side in order:
            result, stderr = run_script("load_probe.py", side, directory, threads)
            if result is None:
                raise RuntimeError(f"load probe {side} failed:\n{stderr[-2000:]}")
            runs[side].append(result)
    size = weights_bytes(directory)
    out = {"file_bytes": size}
    for side, rs in runs.items():
        peak = median([r["maxrss_after_load"] for r in rs])
        base = median([r["rss_before_load"] for r in rs])
        peak_ff = median([r["maxrss_after_first_forward"] for r in rs])
        out[side] = {
            "runs": len(rs),
            "import_s": median([r["import_s"] for r in rs]),
            "load_s": median([r["load_s"] for r in rs]),
            "first_forward_s": median([r["first_forward_s"] for r in rs]),
            "load_plus_first_s": median([r["load_s"] + r["first_forward_s"] for r in rs]),
            "rss_before_load": base,
            "peak_rss_after_load": peak,
            "rss_after_load": median([r["rss_after_load"] for r in rs]),
            "rss_file_after_load": median([r["rss_file_after_load"] for r in rs]),
            "peak_rss_after_first_forward": peak_ff,
            "rss_file_after_first_forward": median([r["rss_file_after_first_forward"] for r in rs]),
            "peak_rss_over_size": peak / size,
            "load_increment_over_size": (peak - base) / size,
            "peak_after_first_forward_increment_over_size": (peak_ff - base) / size,
        }
    breakdown, stderr = run_script("load_breakdown.py", directory, threads)
    out["ours_breakdown"] = breakdown["phases"] if breakdown is not None else stderr[-2000:]
    return out


def bench_long_trace(directory: Path, threads: int) -> list[dict]:
    """Long traces as the TUI's worker makes them, at 64 positions (the longest with whole
    attention maps), 65, 255-257 and 1,024: their time against a plain forward pass in the same
    fresh process, the file's size and write time (`dump`), and the peak RSS of a process that
    only loads and records one. Sizes must grow smoothly with T (no cliff where maps get pooled)."""
    out = []
    for T in (64, 65, 255, 256, 257, 1024):
        timing, stderr = run_script("long_trace.py", "time", directory, threads, T)
        if timing is None:
            raise RuntimeError(f"long trace timing failed:\n{stderr[-2000:]}")
        memory, stderr = run_script("long_trace.py", "memory", directory, threads, T)
        if memory is None:
            raise RuntimeError(f"long trace memory probe failed:\n{stderr[-2000:]}")
        out.append({**timing, **memory})
    return out


# ---------------------------------------------------------------------------------------------
# in-process benchmarks


def random_ids(n: int, vocab: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (1, n), generator=g)


def bench_prefill(lm, hf, Ts: list[int], reps: dict[int, int]) -> list[dict]:
    rows = []
    model = lm.model
    for T in Ts:
        ids = random_ids(T, lm.config.vocab_size, T)

        def ours():
            return model(ids, model.new_cache(), last_only=True)

        def theirs():
            with torch.inference_mode():
                return hf(ids, use_cache=True, logits_to_keep=1)

        a, _ = ours()
        b = theirs().logits
        diff = float((a - b).abs().max())
        t = interleaved({"ours": ours, "transformers": theirs}, reps[T])
        nc = interleaved({"new_cache": model.new_cache}, max(3, reps[T]), warmup=0)["new_cache"]
        o, h = median(t["ours"]), median(t["transformers"])
        rows.append(
            {
                "T": T,
                "ours_ms": o,
                "transformers_ms": h,
                "ratio": o / h,
                "ours_new_cache_ms": median(nc),
                "reps": reps[T],
                "max_abs_logit_diff": diff,
            }
        )
        log(f"  prefill T={T}: ours {o:.1f} ms (new_cache {median(nc):.1f}), transformers {h:.1f} ms")
    return rows


def bench_decode(lm, hf, free, contexts: list[int], steps: int, warmup: int, probe: tuple) -> list[dict]:
    """Each side prefills the same `ctx` random ids, then times one-token steps at that context:
    after every step its cache is rewound by one position (untimed), so all steps see `ctx`
    cached positions and a step spoilt by another process can be redone.

    `probe` is `(read, n_bytes)`: the bandwidth probe's fastest read (measure_bandwidth), timed
    as one more contender in the same rounds. The bound a step is held to is the bytes it reads
    at the rate the probe measured among its steps: this host's memory bandwidth drifts by a third
    within minutes (27.9-47.1 GB/s in one session), so a rate measured before the steps would say
    more about the moment than about the step."""
    rows = []
    model = lm.model
    V = lm.config.vocab_size
    for ctx in contexts:
        prefix = random_ids(ctx, V, 1000 + ctx)
        nxt = random_ids(warmup + steps, V, 2000 + ctx)[0]
        c_ours = model.new_cache()
        model(prefix, c_ours, last_only=True)
        c_free = free.new_cache()
        free(prefix, c_free, last_only=True)
        with torch.inference_mode():
            pkv = hf(prefix, use_cache=True, logits_to_keep=1).cache
        last = {}
        tok_box = {}

        def ours():
            last["ours"] = model(tok_box["tok"], c_ours, last_only=True)[0]

        def hookfree():
            last["free"] = free(tok_box["tok"], c_free, last_only=True)

        def theirs():
            with torch.inference_mode():
                out = hf(tok_box["tok"], cache=pkv, use_cache=True)
            last["hf"] = out.logits

        def rewind_hf():
            pkv.crop(-1)

        read, probe_bytes = probe
        fns = {"ours": (ours, rewind_to(c_ours, ctx)), "hookfree": (hookfree, rewind_to(c_free, ctx)),
               "transformers": (theirs, rewind_hf), "probe": (read, lambda: None)}
        times = interleaved_steps(fns, steps, warmup, before_round=lambda r: tok_box.update(tok=nxt[r].view(1, 1)),
                                  measure=GATE.measure)
        assert c_ours.length == ctx and pkv.get_seq_length() == ctx
        o, f, h, p = (median(times[n]) for n in ("ours", "hookfree", "transformers", "probe"))
        bw_gb_s = probe_bytes / p / 1e6
        costs = StepCosts.of(lm)  # what a step reads: the weights, and the cache after it (ctx + 1)
        wbytes, kvbytes = costs.weight_bytes, (ctx + 1) * costs.kv_bytes_per_position
        bound_ms = (wbytes + kvbytes) / (bw_gb_s * 1e6)
        rows.append(
            {
                "context": ctx,
                "steps": steps,
                "ours_ms": o,
                "hookfree_ms": f,
                "transformers_ms": h,
                "ratio": o / h,
                "ours_tok_s": 1000 / o,
                "transformers_tok_s": 1000 / h,
                "speedup_tok_s": h / o,
                "hooks_overhead": o / f - 1,
                "weight_bytes": wbytes,
                "kv_bytes": kvbytes,
                "probe_gb_s": bw_gb_s,
                "bound_ms": bound_ms,
                "ours_bound_fraction": bound_ms / o,
                "transformers_bound_fraction": bound_ms / h,
                "max_abs_logit_diff_vs_transformers": float((last["ours"] - last["hf"]).abs().max()),
                "hookfree_bit_identical": bool(torch.equal(last["ours"], last["free"])),
            }
        )
        log(
            f"  decode ctx={ctx}: ours {o:.2f} ms, hook-free {f:.2f} ms, transformers {h:.2f} ms, "
            f"bound {bound_ms:.2f} ms (probe {bw_gb_s:.1f} GB/s among the steps)"
        )
        del c_ours, c_free, pkv
        gc.collect()
    return rows


def bench_precision(directory: Path, ctx: int, steps: int, warmup: int, prefill_T: int, prefill_reps: int) -> dict:
    """Every number format on the same checkpoint, in one process: the cost lab's number-format
    experiment (a cached decode step at `ctx` positions, interleaved across formats step by step,
    and the logits over 64 random ids against float32), and a prefill of `prefill_T` tokens
    (interleaved)."""
    import gpt2viz
    from gpt2viz.cost_lab import precision_sweep
    from gpt2viz.model.precision import PRECISIONS

    models = {name: gpt2viz.load_model(directory, dtype=name) for name in PRECISIONS}
    V = models["float32"].config.vocab_size
    ids = random_ids(64, V, 6000)[0].tolist()
    sweep = precision_sweep(models["float32"], ids, context=ctx, steps=steps, load=models.__getitem__, measure=GATE.measure)
    decode = {r.format: r for r in sweep.rows}
    names = list(models)
    prompt = random_ids(prefill_T, V, 5000 + prefill_T)
    prefill = interleaved({n: (lambda n=n: models[n].model(prompt, last_only=True)) for n in names}, prefill_reps)
    out = {"context": sweep.context, "prefill_T": prefill_T, "formats": {}}
    f32_decode, f32_prefill = decode["float32"].step_ms, median(prefill["float32"])
    for n in names:
        row = decode[n]
        out["formats"][n] = {
            "decode_ms": row.step_ms,
            "decode_vs_float32": row.step_ms / f32_decode,
            "decode_gb_s": row.gb_s,
            "prefill_ms": median(prefill[n]),
            "prefill_vs_float32": median(prefill[n]) / f32_prefill,
            "weight_bytes": row.weight_bytes,
            "quality_64_random_ids": row.quality,
        }
        log(f"  {n}: decode ctx={sweep.context} {row.step_ms:.2f} ms ({row.step_ms / f32_decode:.2f}x float32), "
            f"prefill T={prefill_T} {median(prefill[n]):.1f} ms, weights {row.weight_bytes / MB:.0f} MB, "
            f"top-1 vs float32 {row.quality['top1_agreement']:.3f}")
    del models
    gc.collect()
    return out

def bench_heldout(directory: Path, max_tokens: int | None = None) -> dict:
    """Every number format of the bundled model against its float32 self over the whole held-out
    text (assets/tiny/heldout.txt, never trained on; its first `max_tokens` with --quick):
    perplexities and next-token agreement."""
    import gpt2viz
    from gpt2viz.model.precision import PRECISIONS
    from gpt2viz.quality import heldout

    reference = gpt2viz.load_model(directory)
    ids = reference.tokenizer.encode((directory / "heldout.txt").read_text(encoding="utf-8"))[:max_tokens]
    out = {"tokens": len(ids), "formats": {}}
    for name in PRECISIONS:
        if name == "float32":
            continue
        h = heldout(gpt2viz.load_model(directory, dtype=name), reference, ids)
        out["formats"][name] = h.to_dict()
        log(f"  {name}: perplexity {h.perplexity:.4f} against float32's {h.reference_perplexity:.4f} "
            f"({(h.perplexity / h.reference_perplexity - 1) * 100:+.2f} %), "
            f"top-1 agreement {h.agreement.top1_agreement:.4f} over {h.predictions} predictions")
    return out


def bench_batch(lm, ctx: int, sizes: list[int], steps: int) -> list[dict]:
    """The cost lab's batch experiment: one cached decode step for B sequences at `ctx` cached
    positions, each B interleaved with the others step by step, caches rewound after each."""
    from gpt2viz.cost_lab import batch_sweep

    ids = random_ids(ctx + 1, lm.config.vocab_size, 7000)[0].tolist()
    sweep = batch_sweep(lm, ids, context=ctx, sizes=tuple(sizes), steps=steps, measure=GATE.measure)
    one_ms = sweep.rows[0].step_ms
    rows = []
    for r in sweep.rows:
        rows.append({"batch": r.batch, "step_ms": r.step_ms, "vs_one": r.step_ms / one_ms, "tokens_per_s": r.tokens_per_s,
                     "intensity": r.intensity})
        log(f"  batch {r.batch}: {r.step_ms:.1f} ms/step ({r.step_ms / one_ms:.2f}x one sequence), "
            f"{r.tokens_per_s:.0f} tokens/s")
    return rows


def bench_generate_batch(lm, ctx: int, new_tokens: int, reps: int) -> dict:
    """A decode step of `lm.generate_batch` for 8 copies of a `ctx`-token prompt against 1 (greedy,
    `new_tokens` each, the runs interleaved): the mean of each run's steps after the prefill,
    the median over runs."""
    ids = random_ids(ctx, lm.config.vocab_size, 7100)[0].tolist()
    steps = {1: [], 8: []}
    lm.generate_batch(ids, 8, 2)  # the packed weights are made by the first batched step
    for r in range(reps):
        for b in (1, 8) if r % 2 else (8, 1):
            steps[b].append(lm.generate_batch(ids, b, new_tokens).mean_decode_ms)
    one, eight = median(steps[1]), median(steps[8])
    log(f"  generate_batch: B=1 {one:.1f} ms/step, B=8 {eight:.1f} ms/step ({eight / one:.2f}x)")
    return {"context": ctx, "new_tokens": new_tokens, "reps": reps, "one_ms": one, "eight_ms": eight,
            "vs_one": eight / one}


def bench_bundled_generation(new_tokens: int, pairs: int, processes: int) -> dict:
    """The bundled model's greedy generation of `new_tokens` tokens, naive against cached
    (bundled_generation.py), in `processes` fresh processes of `pairs` interleaved pairs each: the
    median of the processes' ratios counts, their range beside it."""
    runs = []
    for _ in range(processes):
        result, stderr = run_script("bundled_generation.py", new_tokens, pairs)
        if result is None:
            raise RuntimeError(f"bundled_generation.py failed:\n{stderr[-2000:]}")
        runs.append(result)
        log(f"  bundled model, {new_tokens} new tokens: naive {result['naive_ms']:.0f} ms, cached "
            f"{result['cached_ms']:.0f} ms ({result['cache_speedup']:.2f}x), ids equal {result['ids_naive_eq_cached']}")
    ratios = [r["cache_speedup"] for r in runs]
    return {"new_tokens": new_tokens, "made": runs[0]["made"], "pairs": pairs, "processes": processes, "runs": runs,
            "naive_ms": median([r["naive_ms"] for r in runs]), "cached_ms": median([r["cached_ms"] for r in runs]),
            "cache_speedup": median(ratios), "cache_speedup_range": [min(ratios), max(ratios)],
            "ids_naive_eq_cached": all(r["ids_naive_eq_cached"] for r in runs)}


def bench_generation(lm, hf, ns: list[int], reps: dict[int, dict[str, int]]) -> list[dict]:
    rows = []
    prompt = lm.tokenizer.encode(PROMPT)
    p = torch.tensor([prompt])
    eos = lm.config.eos_token_id
    for n in ns:
        res = {}

        def hf_gen():
            with torch.inference_mode():
                out = hf.generate(
                    p,
                    do_sample=False,
                    max_new_tokens=n,
                    attention_mask=torch.ones_like(p),
                    pad_token_id=eos,
                )
            return out[0, len(prompt):].tolist()

        timings: dict[str, list[float]] = {"naive": [], "cached": [], "hf": []}
        r_max = max(reps[n].values())
        for r in range(r_max):
            for kind in ("cached", "hf", "naive") if r % 2 else ("naive", "hf", "cached"):
                if len(timings[kind]) >= reps[n][kind]:
                    continue

                def call(kind=kind):
                    if kind == "hf":
                        res["hf"] = hf_gen()
                    else:
                        res[kind] = lm.generate(prompt, n, use_cache=(kind == "cached")).token_ids

                timings[kind].append(GATE.measure(call)[0])
        naive, cached, theirs = (median(timings[k]) for k in ("naive", "cached", "hf"))
        rows.append(
            {
                "new_tokens": n,
                "prompt_tokens": len(prompt),
                "naive_ms": naive,
                "cached_ms": cached,
                "cache_speedup": naive / cached,
                "transformers_generate_ms": theirs,
                "cached_ms_per_token": cached / max(1, len(res["cached"])),
                "transformers_ms_per_token": theirs / max(1, len(res["hf"])),
                "ratio_cached_vs_transformers": cached / theirs,
                "ids_naive_eq_cached": res["naive"] == res["cached"],
                "ids_cached_eq_transformers": res["cached"] == res["hf"],
                "n_generated": [len(res["naive"]), len(res["cached"]), len(res["hf"])],
                "reps": reps[n],
            }
        )
        log(
            f"  generate {n}: naive {naive:.0f} ms, cached {cached:.0f} ms, transformers {theirs:.0f} ms, "
            f"ids equal {res['naive'] == res['cached']}/{res['cached'] == res['hf']}"
        )
    return rows


def bench_hooks(lm, free, Ts: list[int], reps: dict[int, int]) -> list[dict]:
    from gpt2viz.trace import record_forward
    from gpt2viz.trace.events import resolve

    model = lm.model
    rows = []
    for T in Ts:
        ids_t = random_ids(T, lm.config.vocab_size, 3000 + T)
        ids = ids_t[0].tolist()

        fns = {
            "ours": lambda: model(ids_t, model.new_cache(), last_only=True),
            "hookfree": lambda: free(ids_t, free.new_cache(), last_only=True),
            # What record_forward runs, minus the subscriber: logits at every position.
            "ours_all_logits": lambda: model(torch.tensor([ids]), model.new_cache()),
            # Every hook site firing into a subscriber that does nothing: the hook machinery plus
            # the written-out attention that a hook_pattern / hook_attn_scores subscriber forces.
            "noop_subscriber": lambda: noop_forward(lm, ids),
            "recorder": lambda: record_forward(lm, ids),
            # ... and then every deferred part worked out: what --json pays, or a TUI user who
            # opens every stage.
            "recorder_resolved": lambda: [resolve(e) for e in record_forward(lm, ids)[0]],
        }
        t = interleaved(fns, reps[T])
        m = {k: median(v) for k, v in t.items()}
        rows.append(
            {
                "T": T,
                **{f"{k}_ms": v for k, v in m.items()},
                "no_subscriber_overhead": m["ours"] / m["hookfree"] - 1,
                "noop_subscriber_overhead": m["noop_subscriber"] / m["ours_all_logits"] - 1,
                "recorder_overhead": m["recorder"] / m["ours_all_logits"] - 1,
                "recorder_resolved_overhead": m["recorder_resolved"] / m["ours_all_logits"] - 1,
                "recorder_vs_last_only_prefill": m["recorder"] / m["ours"] - 1,
                "recorder_breakdown_ms": recorder_breakdown(lm, ids),
                "reps": reps[T],
            }
        )
        log(
            f"  hooks T={T}: ours {m['ours']:.1f}, hook-free {m['hookfree']:.1f}, all-logits "
            f"{m['ours_all_logits']:.1f}, no-op subscriber {m['noop_subscriber']:.1f}, recorder {m['recorder']:.1f}, "
            f"resolved {m['recorder_resolved']:.1f} ms"
        )
    return rows


def noop_forward(lm, ids: list[int]):
    with lm.hooks.subscribe("*", lambda name, value: None):
        return lm.model(torch.tensor([ids]), lm.model.new_cache())


def recorder_breakdown(lm, ids: list[int]) -> dict[str, float]:
    """One record_forward with the Recorder's handlers timed, by the last part of the hook name
    (patched on the class for this call only; gpt2viz itself is not changed)."""
    from collections import defaultdict

    from gpt2viz.trace import record_forward
    from gpt2viz.trace.recorder import Recorder

    acc: dict[str, float] = defaultdict(float)
    orig_call, orig_finish = Recorder.__call__, Recorder.finish

    def timed_call(self, name, value):
        t0 = time.perf_counter()
        orig_call(self, name, value)
        acc[name.rsplit(".", 1)[-1]] += ms_since(t0)

    def timed_finish(self, logits):
        t0 = time.perf_counter()
        out = orig_finish(self, logits)
        acc["finish (rounding, logit lens event)"] += ms_since(t0)
        return out

    Recorder.__call__, Recorder.finish = timed_call, timed_finish
    try:
        t0 = time.perf_counter()
        record_forward(lm, ids)
        total = ms_since(t0)
    finally:
        Recorder.__call__, Recorder.finish = orig_call, orig_finish
    handlers = sum(acc.values())
    out = dict(sorted(acc.items(), key=lambda kv: -kv[1]))
    out["_handlers_total"] = handlers
    out["_record_forward_total"] = total
    return out


def run_shape(shape: str, cfg: dict, threads: int, with_extras: bool, profile_steps: int, out_dir: Path = HERE) -> dict:
    import gpt2viz
    from transformers import GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    from gpt2viz.process import freeze_startup_objects
    from hookfree import HookFreeGPT2, check_same_logits

    hf_logging.disable_progress_bar()
    directory = ensure_checkpoint(shape, log)
    out: dict = {"checkpoint": {"dir": str(directory), "file_bytes": weights_bytes(directory), "shape": SHAPES[shape]}}

    log(f"{shape}: load time and RSS ({cfg['load_reps'][shape]} fresh processes per side)")
    out["load"] = bench_load(directory, cfg["load_reps"][shape], threads)

    lm = gpt2viz.load_model(directory)
    hf = GPT2LMHeadModel.from_pretrained(directory).eval()
    free = HookFreeGPT2(lm.model)
    # As the app does once its model is loaded (see gpt2viz/process.py): without it, a full
    # garbage collection over torch's and transformers' objects lands in some measurements.
    freeze_startup_objects()
    out["checkpoint"]["n_params"] = lm.n_params
    # Which kernel multiplies by each weight shape on this CPU (gpt2viz/kernels/choice.py).
    out["kernel_choices"] = [dataclasses.asdict(c) for c in lm.kernels]
    log(f"{shape}: kernels " + ", ".join(f"{c.product} {c.n_in}x{c.n_out} {c.kernel} ({c.reason})" for c in lm.kernels))
    out["transformers_attn_implementation"] = hf.config._attn_implementation
    out["hookfree_check"] = check_same_logits(lm.model, free, random_ids(12, lm.config.vocab_size, 7))
    log(f"{shape}: hook-free forward vs ours: {out['hookfree_check']}")

    log(f"{shape}: prefill")
    out["prefill"] = bench_prefill(lm, hf, cfg["prefill_T"], cfg["prefill_reps"][shape])

    out["bandwidth"], probe = measure_bandwidth(cfg["bw_reps"])
    log(f"{shape}: {_bandwidth_text(out['bandwidth'])}")
    log(f"{shape}: cached decode, the bandwidth probe's {out['bandwidth']['fastest']} read timed among the steps")
    out["decode"] = bench_decode(
        lm, hf, free, cfg["decode_ctx"], cfg["decode_steps"][shape], cfg["decode_warmup"], probe
    )
    del probe  # its 268 MB matrix

    if with_extras:
        log(f"{shape}: traces of 128 and 1,024 tokens (fresh processes)")
        out["long_trace"] = bench_long_trace(directory, threads)
        log(f"{shape}: batched decode steps")
        out["batch"] = bench_batch(lm, **cfg["batch"])
        out["generate_batch"] = bench_generate_batch(lm, **cfg["generate_batch"])
        log(f"{shape}: number formats (float32, bfloat16, float16, int8)")
        out["precision"] = bench_precision(directory, **cfg["precision"])
        log("bundled model: number formats over its whole held-out text")
        out["precision"]["heldout_bundled"] = bench_heldout(BUNDLED, cfg["heldout_tokens"])
        log(f"{shape}: generation, naive vs cached vs transformers.generate")
        out["generation"] = bench_generation(lm, hf, cfg["gen_n"], cfg["gen_reps"])
        log("bundled model: generation, naive vs cached")
        out["bundled_generation"] = bench_bundled_generation(**cfg["bundled_generation"])
        if tui_steps.available():
            log("the generation view's decode step against headless, in tmux (bundled model, then this shape)")
            out["tui_steps"] = [tui_steps.measure(str(m), **cfg["tui_steps"], log=log) for m in ("tiny", directory)]
        else:
            log("tmux is not installed: the generation view's timings are not measured")
        log(f"{shape}: hook cost on prefill")
        out["hooks"] = bench_hooks(lm, free, cfg["hook_T"], cfg["hook_reps"])
        if profile_steps:
            from profile_decode import profile_decode

            log(f"{shape}: profiling cached decode")
            out["profile"] = profile_decode(lm, free, steps=profile_steps, out_dir=out_dir)
    del lm, hf, free
    gc.collect()
    return out


# ---------------------------------------------------------------------------------------------
# goals and report


def goals(results: dict) -> list[dict]:
    gs = []

    def add(shape, goal, detail, met):
        gs.append({"shape": shape, "goal": goal, "detail": detail, "met": bool(met)})

    for shape, r in results["models"].items():
        for d in r["decode"]:
            # Issue 32's goals at 256 positions, issue 7's at the others.
            speedup, share = (1.6, 0.75) if d["context"] == 256 else (1.5, 0.70)
            add(shape, f"decode ctx {d['context']}: tokens/s >= {speedup}x transformers",
                f"{d['speedup_tok_s']:.2f}x", d["speedup_tok_s"] >= speedup)
        for d in r["decode"]:
            speedup, share = (1.6, 0.75) if d["context"] == 256 else (1.5, 0.70)
            add(shape, f"decode ctx {d['context']}: >= {share:.0%} of bandwidth bound",
                f"{100 * d['ours_bound_fraction']:.1f}% (transformers {100 * d['transformers_bound_fraction']:.1f}%)",
                d["ours_bound_fraction"] >= share)
        for p in r["prefill"]:
            add(shape, f"prefill T={p['T']}: no slower than transformers",
                f"ours/theirs {p['ratio']:.2f}", p["ratio"] <= 1.0)
        for h in r.get("hooks", []):
            add(shape, f"prefill T={h['T']}: hooks, no subscriber, within 2% of no hook sites",
                f"{100 * h['no_subscriber_overhead']:+.1f}%", h["no_subscriber_overhead"] <= 0.02)
        if r.get("hooks"):
            for d in r["decode"]:
                add(shape, f"decode ctx {d['context']}: hooks, no subscriber, within 2% of no hook sites",
                    f"{100 * d['hooks_overhead']:+.1f}%", d["hooks_overhead"] <= 0.02)
        for h in r.get("hooks", []):
            add(shape, f"prefill T={h['T']}: Recorder within 25%",
                f"{100 * h['recorder_overhead']:+.0f}% vs same forward without subscriber",
                h["recorder_overhead"] <= 0.25)
        batch = {row["batch"]: row for row in r.get("batch") or []}
        if 1 in batch and 8 in batch:
            add(shape, "decode step of lm.model with B=8 <= 1.5x B=1",
                f"{batch[8]['vs_one']:.2f}x ({batch[8]['step_ms']:.1f} ms against {batch[1]['step_ms']:.1f})",
                batch[8]["vs_one"] <= 1.5)
        gb = r.get("generate_batch")
        if gb:
            add(shape, "decode step of generate_batch with B=8 <= 1.5x B=1",
                f"{gb['vs_one']:.2f}x ({gb['eight_ms']:.1f} ms against {gb['one_ms']:.1f})", gb["vs_one"] <= 1.5)
        for ts in r.get("tui_steps") or []:
            add(shape if ts["model"] != "tiny" else "bundled", "the generation view's decode step <= 1.2x headless",
                f"{ts['ratio']:.2f}x ({ts['tui_median_ms']:.2f} ms against {ts['headless_median_ms']:.2f}, tmux {ts['size']})",
                ts["ratio"] <= 1.2)
        bg = r.get("bundled_generation")
        if bg:
            spread = (f", {bg['cache_speedup_range'][0]:.2f}-{bg['cache_speedup_range'][1]:.2f}x over "
                      f"{bg['processes']} processes" if "processes" in bg else "")
            add("bundled", f"{bg['new_tokens']} new tokens: cached >= 3x naive, the same ids",
                f"{bg['cache_speedup']:.2f}x ({bg['cached_ms']:.0f} ms against {bg['naive_ms']:.0f}{spread}), "
                f"ids equal {bg['ids_naive_eq_cached']}",
                bg["cache_speedup"] >= 3 and bg["ids_naive_eq_cached"])
        upto16 = [batch[b]["tokens_per_s"] for b in sorted(batch) if b <= 16]
        if len(upto16) > 1:
            add(shape, "tokens/s nondecreasing from B=1 to B=16", " / ".join(f"{t:.0f}" for t in upto16),
                all(b >= a for a, b in zip(upto16, upto16[1:])))
        pr = r.get("precision")
        if pr:
            for name, limit in (("bfloat16", 0.60), ("float16", 0.60), ("int8", 0.35)):
                f = pr["formats"][name]
                add(shape, f"{name} decode ctx {pr['context']}: <= {limit}x float32's ms/token",
                    f"{f['decode_vs_float32']:.2f}x ({f['decode_ms']:.2f} ms)", f["decode_vs_float32"] <= limit)
            for name in ("bfloat16", "float16"):
                f = pr["formats"][name]
                add(shape, f"{name} prefill T={pr['prefill_T']}: no slower than float32",
                    f"{f['prefill_vs_float32']:.2f}x ({f['prefill_ms']:.1f} ms)", f["prefill_vs_float32"] <= 1.0)
        traces = {lt["T"]: lt for lt in r.get("long_trace") or []}
        for a, b in ((64, 65), (255, 256), (256, 257)):
            if a in traces and b in traces and "bytes" in traces[a]:
                ratio = traces[b]["bytes"] / traces[a]["bytes"]
                add(shape, f"trace file from T={a} to T={b}: no jump (<= 1.1x)", f"{ratio:.3f}x", ratio <= 1.1)
        for lt in r.get("long_trace") or []:
            add(shape, f"a {lt['T']}-token trace, worked out, in <= 4x a plain forward pass",
                f"{lt['ratio']:.2f}x ({lt['trace_s']:.2f} s against {lt['forward_s']:.2f} s)", lt["ratio"] <= 4)
            add(shape, f"a {lt['T']}-token trace: peak RSS <= 1.5 GB", f"{lt['peak_rss'] / 1e9:.2f} GB",
                lt["peak_rss"] <= 1.5e9)
        ld = r["load"]["ours"]
        add(shape, "peak RSS after loading <= 1.3x checkpoint size (whole process)",
            f"{ld['peak_rss_over_size']:.2f}x", ld["peak_rss_over_size"] <= 1.3)
        add(shape, "peak RSS after loading <= 1.3x checkpoint size (added by load_model)",
            f"{ld['load_increment_over_size']:.2f}x", ld["load_increment_over_size"] <= 1.3)
    return gs


def fmt_table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda cells: "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def render(results: dict) -> str:
    m = results["machine"]
    parts = [
        f"gpt2viz benchmarks  {m['date_utc']}  {m['cpu']} ({m['cpu_flags']}; kernels: {m.get('kernels', '?')}), "
        f"{m['logical_cpus']} logical CPUs, "
        f"torch {m['torch']}, transformers {m['transformers']}, threads {m['threads']} (both sides)"
        + ("  [QUICK]" if results["quick"] else ""),
    ]
    g = results.get("quiet_gate")
    if g:
        parts.append(
            f"quiet gate: {g['measurements']} measurements, {g['discarded_and_redone']} redone because other processes "
            f"were busy, {g['kept_noisy']} kept although noisy, {g['waited_s']} s spent waiting"
            + ("" if g["enabled"] else " (gate disabled)")
        )
    if m["other_heavy_processes"]:
        parts.append("NOTE: other busy processes during the run (noisy numbers): " + "; ".join(m["other_heavy_processes"]))
    for shape, r in results["models"].items():
        ck = r["checkpoint"]
        parts.append(f"\n== {shape}  ({ck['n_params'] / 1e6:.1f} M params, file {ck['file_bytes'] / MB:.0f} MB, "
                     f"transformers attn: {r['transformers_attn_implementation']}; "
                     + _bandwidth_text(r["bandwidth"]) + ")")
        ld = r["load"]
        rows = []
        for key, label, scale, f in (
            ("load_s", "load time (s)", 1, "{:.2f}"),
            ("first_forward_s", "first 1-token forward after load (s)", 1, "{:.3f}"),
            ("load_plus_first_s", "load + first forward (s)", 1, "{:.2f}"),
            ("rss_before_load", "RSS before load (MB)", MB, "{:.0f}"),
            ("peak_rss_after_load", "peak RSS after load (MB)", MB, "{:.0f}"),
            ("peak_rss_over_size", "  / checkpoint size", 1, "{:.2f}x"),
            ("load_increment_over_size", "  (peak - before) / size", 1, "{:.2f}x"),
            ("peak_rss_after_first_forward", "peak RSS after first forward (MB)", MB, "{:.0f}"),
            ("rss_file_after_first_forward", "  of which file-backed (MB)", MB, "{:.0f}"),
            ("peak_after_first_forward_increment_over_size", "  (peak - before) / size", 1, "{:.2f}x"),
        ):
            o, h = ld["ours"][key] / scale, ld["transformers"][key] / scale
            rows.append([label, f.format(o), f.format(h), f"{o / h:.2f}" if h else "-"])
        parts.append(fmt_table(rows, ["load (fresh process, median)", "ours", "transformers", "ours/theirs"]))
        if isinstance(ld.get("ours_breakdown"), list):
            parts.append("  ours, load_model phase by phase (fresh process):")
            parts += [f"    {p['s']:6.2f} s  peak RSS {p['maxrss_mb']:5.0f} MB  {p['phase']}" for p in ld["ours_breakdown"]]
        rows = [[f"T={p['T']}", f"{p['ours_ms']:.1f}", f"{p['transformers_ms']:.1f}", f"{p['ratio']:.2f}",
                 f"{p['ours_new_cache_ms']:.1f}", f"{p['max_abs_logit_diff']:.1e}"] for p in r["prefill"]]
        parts.append(fmt_table(rows, ["prefill (ms)", "ours", "transformers", "ours/theirs", "of which new_cache", "max|dlogit|"]))
        rows = [[f"ctx {d['context']}", f"{d['ours_ms']:.2f}", f"{d['transformers_ms']:.2f}", f"{d['ratio']:.2f}",
                 f"{d['speedup_tok_s']:.2f}x", f"{d['hookfree_ms']:.2f}", f"{100 * d['hooks_overhead']:+.1f}%",
                 f"{d['bound_ms']:.2f}", f"{d['probe_gb_s']:.1f}" if "probe_gb_s" in d else "-",
                 f"{100 * d['ours_bound_fraction']:.0f}%",
                 f"{100 * d['transformers_bound_fraction']:.0f}%"] for d in r["decode"]]
        parts.append(fmt_table(rows, ["decode (ms/token)", "ours", "transformers", "ours/theirs", "tok/s gain",
                                      "hook-free", "hooks cost", "bound", "at GB/s", "ours % bound",
                                      "theirs % bound"]))
        if r.get("generation"):
            rows = [[f"{g['new_tokens']} new", f"{g['naive_ms']:.0f}", f"{g['cached_ms']:.0f}",
                     f"{g['cache_speedup']:.1f}x", f"{g['transformers_generate_ms']:.0f}",
                     f"{g['ratio_cached_vs_transformers']:.2f}", str(g["ids_naive_eq_cached"]),
                     str(g["ids_cached_eq_transformers"])] for g in r["generation"]]
            parts.append(fmt_table(rows, ["greedy generation (ms)", "ours naive", "ours cached", "speedup",
                                          "transformers", "cached/theirs", "ids naive==cached", "==transformers"]))
        bg = r.get("bundled_generation")
        if bg:
            spread = (f"medians of {bg['processes']} processes of {bg['pairs']} pairs, ratios "
                      f"{bg['cache_speedup_range'][0]:.2f}-{bg['cache_speedup_range'][1]:.2f}x"
                      if "processes" in bg else f"median of {bg['reps']}")
            parts.append(f"  bundled model, {bg['new_tokens']} new tokens after 'ROMEO:' ({bg['made']} made): naive "
                         f"{bg['naive_ms']:.0f} ms, cached {bg['cached_ms']:.0f} ms, {bg['cache_speedup']:.2f}x; "
                         f"ids equal {bg['ids_naive_eq_cached']} ({spread})")
        for ts in r.get("tui_steps") or []:
            parts.append(f"  generation view, {Path(ts['model']).name}: decode step {ts['tui_median_ms']:.2f} ms in the TUI "
                         f"(tmux {ts['size']}), {ts['headless_median_ms']:.2f} ms headless, {ts['ratio']:.2f}x "
                         f"(medians of {ts['rounds'] * ts['per_round']} runs of {ts['tokens']} tokens each)")
        if r.get("hooks"):
            rows = [[f"T={h['T']}", f"{h['hookfree_ms']:.1f}", f"{h['ours_ms']:.1f}",
                     f"{100 * h['no_subscriber_overhead']:+.1f}%", f"{h['ours_all_logits_ms']:.1f}",
                     f"{h['noop_subscriber_ms']:.1f}", f"{h['recorder_ms']:.1f}",
                     f"{100 * h['recorder_overhead']:+.0f}%",
                     f"{h['recorder_resolved_ms']:.1f}" if "recorder_resolved_ms" in h else "-",
                     f"{100 * h['recorder_resolved_overhead']:+.0f}%" if "recorder_resolved_ms" in h else "-",
                     ] for h in r["hooks"]]
            parts.append(fmt_table(rows, ["hook cost, prefill (ms)", "no hook sites", "ours, no sub",
                                          "cost", "ours all logits", "no-op sub '*'", "Recorder",
                                          "Recorder cost", "+ resolved", "resolved cost"]))
            for h in r["hooks"]:
                b = h["recorder_breakdown_ms"]
                top = ", ".join(f"{k} {v:.0f}" for k, v in list(b.items())[:8] if not k.startswith("_"))
                parts.append(f"  Recorder T={h['T']}: {b['_record_forward_total']:.0f} ms, of which handlers "
                             f"{b['_handlers_total']:.0f} ms: {top}")
        if r.get("batch"):
            rows = [[f"B={b['batch']}", f"{b['step_ms']:.1f}", f"{b['vs_one']:.2f}x", f"{b['tokens_per_s']:.0f}"]
                    for b in r["batch"]]
            parts.append(fmt_table(rows, ["batched decode step", "ms", "vs B=1", "tokens/s"]))
        gb = r.get("generate_batch")
        if gb:
            parts.append(f"  generate_batch, {gb['context']}-token prompt, {gb['new_tokens']} new tokens: B=1 "
                         f"{gb['one_ms']:.1f} ms/step, B=8 {gb['eight_ms']:.1f} ms/step, {gb['vs_one']:.2f}x "
                         f"(median of {gb['reps']} runs)")
        pr = r.get("precision")
        if pr:
            rows = [[n, f"{f['decode_ms']:.2f}", f"{f['decode_vs_float32']:.2f}x", f"{f['prefill_ms']:.1f}",
                     f"{f['prefill_vs_float32']:.2f}x", f"{f['weight_bytes'] / MB:.0f}",
                     f"{f['quality_64_random_ids']['max_abs_dlogit']:.3g}",
                     f"{f['quality_64_random_ids']['top1_agreement']:.3f}"] for n, f in pr["formats"].items()]
            parts.append(fmt_table(rows, ["number format", f"decode ctx {pr['context']} (ms)", "vs float32",
                                          f"prefill T={pr['prefill_T']} (ms)", "vs float32", "weights (MB)",
                                          "max|dlogit| vs f32", "top-1 vs f32"]))
            held = pr.get("heldout_bundled")
            if held:
                rows = [[n, f"{h['perplexity']:.4f}", f"{h['reference_perplexity']:.4f}",
                         f"{(h['perplexity'] / h['reference_perplexity'] - 1) * 100:+.2f} %",
                         f"{h['agreement']['top1_agreement'] * 100:.2f} %"] for n, h in held["formats"].items()]
                parts.append(fmt_table(rows, [f"bundled model, held-out text ({held['tokens']:,} tokens)", "perplexity",
                                              "float32's", "difference", "top-1 vs f32"]))
        if r.get("long_trace"):
            rows = [[f"T={lt['T']}", f"{lt['trace_s']:.2f}", f"{lt['ratio']:.2f}x", f"{lt.get('bytes', 0) / 1e6:.1f}",
                     f"{lt.get('write_s', 0):.2f}", f"{lt['peak_rss'] / MB:.0f}", f"{lt['peak_rss_before_trace'] / MB:.0f}"]
                    for lt in r["long_trace"]]
            parts.append(fmt_table(rows, ["trace (recorded, worked out)", "s", "vs forward", "file MB", "write s",
                                          "peak RSS MB", "before MB"]))
        if r.get("profile"):
            parts.append(r["profile"]["summary"])
    parts.append("\n== goals")
    for g in results["goals"]:
        parts.append(f"  [{'MET' if g['met'] else 'NOT MET'}] {g['shape']}: {g['goal']}: {g['detail']}")
    return "\n".join(parts)


def markdown(results: dict, command: str) -> str:
    m = results["machine"]
    busy = m["other_heavy_processes"] + m.get("other_heavy_processes_end", [])
    lines = [
        "# Benchmark results",
        "",
        f"Command: `{command}` ({results['wall_s'] / 60:.1f} min)",
        "",
        "| | |",
        "|---|---|",
        f"| date | {m['date_utc']} |",
        f"| CPU | {m['cpu']} ({m['cpu_flags']}), {m['logical_cpus']} logical CPUs, {m['mem_gb']} GB RAM |",
        f"| kernels | {m.get('kernels', 'not recorded')} |",
        f"| software | Python {m['python']}, torch {m['torch']}, transformers {m['transformers']} |",
        f"| threads | {m['threads']} intra-op (torch.set_num_threads, both sides), {m['interop_threads']} inter-op |",
        f"| load average | {m['loadavg_start']} at start, {m.get('loadavg_end')} at end |",
        f"| other busy processes | {'; '.join(busy) if busy else 'none'} |",
        "",
        "```",
        results["table"],
        "```",
        "",
    ]
    return "\n".join(lines)


NOTES_MARKER = "<!-- hand-written notes below: kept when run.py --md rewrites this file -->"


def write_md(path: Path, text: str) -> None:
    """Writes the generated report, keeping any hand-written notes after NOTES_MARKER."""
    notes = ""
    if path.exists():
        old = path.read_text(encoding="utf-8")
        if NOTES_MARKER in old:
            notes = old[old.index(NOTES_MARKER):]
    path.write_text(text + ("\n" + notes if notes else ""), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny settings for a smoke test (gpt2-small only)")
    ap.add_argument("--out", default=str(HERE / "results.json"), help="where to write the JSON results")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads for both sides")
    ap.add_argument("--shapes", default=None, help="comma-separated, default gpt2-small,gpt2-medium")
    ap.add_argument("--no-profile", action="store_true", help="skip the decode-step profile")
    ap.add_argument("--no-gate", action="store_true",
                    help="keep measurements during which other processes were busy (default: redo them)")
    ap.add_argument("--md", default=None, help="also write the machine description and table as Markdown here")
    ap.add_argument("--rerender", action="store_true",
                    help="measure nothing: re-evaluate the goals and re-print the table of the JSON at --out")
    args = ap.parse_args(argv)
    if args.rerender:
        results = json.loads(Path(args.out).read_text(encoding="utf-8"))
        results["goals"] = goals(results)
        results["table"] = render(results)
        Path(args.out).write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
        print(results["table"])
        if args.md:
            write_md(Path(args.md), markdown(results, results.get("command", "python benchmarks/run.py")))
        return 0

    torch.set_num_threads(args.threads)
    GATE.enabled = GATE.enabled and not args.no_gate
    cfg = QUICK if args.quick else FULL
    benchable = ["gpt2-small", "gpt2-medium"]
    shapes = args.shapes.split(",") if args.shapes else (["gpt2-small"] if args.quick else benchable)
    for s in shapes:
        if s not in benchable:
            ap.error(f"unknown shape {s!r} (choose from {', '.join(benchable)})")
    started = time.perf_counter()
    results = {"quick": args.quick, "machine": machine_info(args.threads), "models": {}}
    log(f"threads={torch.get_num_threads()} shapes={shapes} quick={args.quick}")
    for i, shape in enumerate(shapes):
        results["models"][shape] = run_shape(
            shape,
            cfg,
            args.threads,
            with_extras=(i == 0),
            profile_steps=0 if args.no_profile else cfg["profile_steps"],
            out_dir=Path(args.out).resolve().parent,  # profile_decode.txt goes next to the JSON
        )
    results["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    results["machine"]["other_heavy_processes_end"] = other_load()
    results["wall_s"] = time.perf_counter() - started
    results["quiet_gate"] = GATE.stats()
    results["command"] = " ".join(["python benchmarks/run.py"] + (argv if argv is not None else sys.argv[1:]))
    results["goals"] = goals(results)
    text = render(results)
    results["table"] = text
    Path(args.out).write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    print(text)
    print(f"\n(wall {results['wall_s']:.0f} s; JSON written to {args.out})")
    if args.md:
        write_md(Path(args.md), markdown(results, results["command"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
