"""Where one cached decode step of gpt2viz spends its time, plus small experiments that put a
number on each candidate improvement to the core.

Run alone:  python benchmarks/profile_decode.py [--shape gpt2-small] [--steps 20] [--ctx 256]
(`run.py` calls `profile_decode` for the first shape.) Writes benchmarks/profile_decode.txt.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import random
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from quiet import GATE  # noqa: E402


def _med_ms(fn, reps: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    return float(statistics.median(GATE.measure(fn)[0] for _ in range(reps)))


def _decode_runner(forward, new_cache, ctx: int, vocab: int):
    """A step function that decodes one token at (about) `ctx` cached positions, forever: the
    cache length is rewound after each step, so every call sees the same context."""
    g = torch.Generator().manual_seed(ctx)
    cache = new_cache()
    forward(torch.randint(0, vocab, (1, ctx), generator=g), cache)
    tok = torch.randint(0, vocab, (1, 1), generator=g)

    def step():
        forward(tok, cache)
        cache.length -= 1

    return step


# Rough groups of aten ops, by what they do in a decode step.
GROUPS = (
    ("matrix products: c_attn, c_proj, c_fc, mlp c_proj, LM head (weight reads)",
     ("aten::bmm", "aten::baddbmm", "aten::addmm", "aten::linear", "aten::mm", "aten::matmul")),
    ("partial sums, bias, concatenating the logits", ("aten::sum", "aten::add_", "aten::cat")),
    ("attention (SDPA)", ("aten::_scaled_dot_product", "aten::scaled_dot_product")),
    ("KV cache append (copy_ into the buffers)", ("aten::copy_",)),
    ("layer_norm", ("aten::native_layer_norm", "aten::layer_norm")),
    ("gelu", ("aten::gelu",)),
    ("residual adds", ("aten::add",)),
    ("views/indexing/split/transpose", ("aten::slice", "aten::view", "aten::transpose", "aten::split", "aten::select",
                                        "aten::index", "aten::reshape", "aten::as_strided", "aten::unsqueeze",
                                        "aten::_reshape_alias", "aten::narrow", "aten::expand", "aten::t",
                                        "aten::embedding", "aten::unsafe_split", "aten::alias", "aten::_unsafe_view")),
    ("allocation (empty/zeros)", ("aten::empty", "aten::zeros", "aten::zero_", "aten::fill_")),
)


def profile_decode(lm, free=None, steps: int = 20, ctx: int = 256, out_dir: Path | None = None) -> dict:
    from gpt2viz.generate import SamplingSettings, choose_token
    from gpt2viz.kernels.split import conv1d_halves, unembed_halves
    from hookfree import HookFreeGPT2

    model = lm.model
    cfg = lm.config
    V = cfg.vocab_size
    free = free or HookFreeGPT2(model)
    res: dict = {"context": ctx, "steps": steps, "threads": torch.get_num_threads()}

    ours_step = _decode_runner(lambda ids, c: model(ids, c, last_only=True), model.new_cache, ctx, V)
    free_step = _decode_runner(lambda ids, c: free(ids, c, last_only=True), free.new_cache, ctx, V)

    # --- torch.profiler: self time per aten op ----------------------------------------------
    from torch.profiler import ProfilerActivity, profile

    GATE.wait_quiet()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(steps):
            ours_step()
    ka = prof.key_averages()
    total_self_us = sum(e.self_cpu_time_total for e in ka)
    groups = {name: 0.0 for name, _ in GROUPS}
    groups["other"] = 0.0
    for e in ka:
        for name, keys in GROUPS:
            if e.key.startswith(keys):
                groups[name] += e.self_cpu_time_total
                break
        else:
            groups["other"] += e.self_cpu_time_total
    res["profiler_ms_per_step_total"] = total_self_us / 1000 / steps
    res["groups_ms_per_step"] = {k: v / 1000 / steps for k, v in sorted(groups.items(), key=lambda kv: -kv[1])}
    res["ops_per_step"] = sum(e.count for e in ka) / steps
    top = sorted(ka, key=lambda e: -e.self_cpu_time_total)[:15]
    res["top_ops"] = [
        {"op": e.key, "calls_per_step": e.count / steps, "self_ms_per_step": e.self_cpu_time_total / 1000 / steps}
        for e in top
    ]
    prof_table = ka.table(sort_by="self_cpu_time_total", row_limit=25)

    # --- cProfile: where the Python time goes -------------------------------------------------
    GATE.wait_quiet()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(steps):
        ours_step()
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18)
    cprof_text = s.getvalue()

    # --- experiments -------------------------------------------------------------------------
    exp: dict = {}
    # (1) new_cache: torch.zeros of the whole capacity, for every layer, K and V.
    shape = (1, cfg.n_head, cfg.n_ctx, cfg.head_dim)
    exp["new_cache_ms"] = _med_ms(model.new_cache, 5, 1)
    exp["new_cache_bytes"] = model.new_cache().allocated_bytes
    exp["empty_cache_alloc_ms"] = _med_ms(lambda: [torch.empty(shape) for _ in range(2 * cfg.n_layer)], 5, 1)

    # (2) the greedy path of generate(): float64 softmax over the vocabulary + argmax, per token.
    logits = torch.randn(V)
    greedy = SamplingSettings()
    exp["choose_token_greedy_ms"] = _med_ms(lambda: choose_token(logits, greedy, None), 20)
    exp["argmax_only_ms"] = _med_ms(lambda: int(torch.argmax(logits)), 20)
    ids = list(range(300))
    exp["input_tensor_from_list_ms"] = _med_ms(lambda: torch.tensor([ids[299:]], dtype=torch.long), 20)

    # (3) parts of the step, each alone, by the BLAS's own matrix-vector product and by gpt2viz's
    # two-core split (gpt2viz/kernels/split.py; whether the model uses it, kernels/choice.py decides). Weights are read cold (500 MB does not fit
    # in L3): the block products are timed over all layers in a row, as the step reads them.
    x1 = torch.randn(1, 1, cfg.n_embd)
    wte = model.wte.weight
    exp["lm_head_bytes"] = wte.numel() * wte.element_size()
    exp["lm_head_one_core_ms"] = _med_ms(lambda: F.linear(x1, wte), steps)
    exp["lm_head_ms"] = _med_ms(lambda: unembed_halves(x1[0], wte), steps)
    # What the [V, C] layout costs: the same product with a [C, V] copy (W stored [in, out],
    # like Conv1D), also split over two cores, for 4 x V x C more bytes of memory.
    wte_t = wte.t().contiguous()
    half = wte_t.size(1) // 2
    halves = wte_t[:, : 2 * half].view(cfg.n_embd, 2, half).permute(1, 0, 2)
    exp["lm_head_transposed_copy_ms"] = _med_ms(lambda: torch.bmm(x1.expand(2, 1, cfg.n_embd), halves), steps)
    del wte_t, halves
    hmlp = torch.randn(1, 1, cfg.d_mlp)

    def all_products(product):
        def run():
            for b in model.h:
                product(x1, b.attn.c_attn.weight, b.attn.c_attn.bias)
                product(x1, b.attn.c_proj.weight, b.attn.c_proj.bias)
                product(x1, b.mlp.c_fc.weight, b.mlp.c_fc.bias)
                product(hmlp, b.mlp.c_proj.weight, b.mlp.c_proj.bias)
        return run

    exp["all_layers_one_core_ms"] = _med_ms(all_products(lambda x, w, b: torch.addmm(b, x.view(1, -1), w)), steps)
    exp["all_layers_ms"] = _med_ms(all_products(lambda x, w, b: conv1d_halves(x.view(1, -1), w, b)), steps)
    exp["all_layers_bytes"] = sum(
        t.numel() * t.element_size()
        for b in model.h
        for t in (b.attn.c_attn.weight, b.attn.c_proj.weight, b.mlp.c_fc.weight, b.mlp.c_proj.weight)
    )

    # (4) SDPA for one query on the cache's strided views vs on contiguous K/V.
    for L in (256, 1000):
        kbuf = torch.randn(1, cfg.n_head, cfg.n_ctx, cfg.head_dim)
        vbuf = torch.randn(1, cfg.n_head, cfg.n_ctx, cfg.head_dim)
        q = torch.randn(1, cfg.n_head, 1, cfg.head_dim)
        kv, vv = kbuf[:, :, :L], vbuf[:, :, :L]
        kc, vc = kv.contiguous(), vv.contiguous()
        exp[f"sdpa_view_ms_L{L}"] = _med_ms(lambda: F.scaled_dot_product_attention(q, kv, vv), 30)
        exp[f"sdpa_contiguous_ms_L{L}"] = _med_ms(lambda: F.scaled_dot_product_attention(q, kc, vc), 30)
        exp[f"explicit_attn_ms_L{L}"] = _med_ms(
            lambda: torch.softmax((q @ kv.transpose(-1, -2)) * cfg.head_dim**-0.5, -1) @ vv, 30
        )

    # (5) the step in variants, interleaved in random order (each also rewinds its cache):
    # ours; hook-free; hook-free with weights copied to anonymous memory (gpt2viz uses them
    # memory-mapped from the file).
    anon = HookFreeGPT2(model, copy_weights=True)
    variants = {
        "ours": ours_step,
        "hookfree": free_step,
        "hookfree_anon_weights": _decode_runner(lambda ids, c: anon(ids, c, last_only=True), anon.new_cache, ctx, V),
    }
    rng = random.Random(0)
    vt: dict[str, list[float]] = {k: [] for k in variants}
    for fn in variants.values():
        fn()
    for _ in range(max(3, steps)):
        order = list(variants)
        rng.shuffle(order)
        for k in order:
            variants[k]()  # settle: a step of the same kind first (see run.interleaved)
            vt[k].append(GATE.measure(variants[k])[0])
    exp["variants_ms"] = {k: float(statistics.median(v)) for k, v in vt.items()}
    res["ours_step_ms"] = exp["variants_ms"]["ours"]
    res["hookfree_step_ms"] = exp["variants_ms"]["hookfree"]
    del anon, variants

    # (5b) Python/dispatch overhead alone: the same comparison on a 12-layer, 12-head model only
    # 96 wide, whose kernels take almost no time.
    import gpt2viz
    from checkpoints import ensure_checkpoint

    narrow = gpt2viz.load_model(ensure_checkpoint("gpt2-small-narrow"))
    nfree = HookFreeGPT2(narrow.model)
    nv = {
        "ours": _decode_runner(lambda ids, c: narrow.model(ids, c, last_only=True), narrow.model.new_cache, ctx, V),
        "hookfree": _decode_runner(lambda ids, c: nfree(ids, c, last_only=True), nfree.new_cache, ctx, V),
    }
    nt: dict[str, list[float]] = {k: [] for k in nv}
    for _ in range(20):
        for fn in nv.values():
            fn()
    for _ in range(200):
        order = list(nv)
        rng.shuffle(order)
        for k in order:
            nv[k]()
            nt[k].append(GATE.measure(nv[k])[0])
    exp["narrow_ours_step_us"] = 1000 * float(statistics.median(nt["ours"]))
    exp["narrow_hookfree_step_us"] = 1000 * float(statistics.median(nt["hookfree"]))
    pr_n = cProfile.Profile()
    pr_n.enable()
    for _ in range(100):
        nv["ours"]()
    pr_n.disable()
    sn = io.StringIO()
    pstats.Stats(pr_n, stream=sn).sort_stats("tottime").print_stats(12)
    narrow_cprof = sn.getvalue()
    del narrow, nfree, nv

    # (6) threads: the same step with 1 thread.
    n = torch.get_num_threads()
    if n > 1:
        torch.set_num_threads(1)
        exp["ours_step_ms_1_thread"] = _med_ms(ours_step, max(3, steps // 2))
        torch.set_num_threads(n)
        exp[f"ours_step_ms_{n}_threads"] = _med_ms(ours_step, max(3, steps // 2))

    # (7) generate()'s loop around the step: ms per token of lm.generate vs the bare step.
    prompt = list(range(100, 100 + ctx))
    n_new = max(4, steps)
    box = {}
    exp["generate_wall_ms"] = GATE.measure(lambda: box.update(r=lm.generate(prompt, n_new, use_cache=True)))[0]
    exp["generate_mean_decode_ms"] = statistics.median(box["r"].step_ms[1:])
    res["experiments"] = exp

    res["summary"] = summarize(res)
    if out_dir is not None:
        text = (
            res["summary"]
            + "\n\n== torch.profiler, self CPU time over "
            + f"{steps} decode steps at context {ctx}\n"
            + prof_table
            + "\n\n== cProfile (tottime)\n"
            + cprof_text
            + "\n\n== cProfile (tottime), 100 decode steps of the 12-layer width-96 model (overhead only)\n"
            + narrow_cprof
        )
        (Path(out_dir) / "profile_decode.txt").write_text(text, encoding="utf-8")
        res["profile_file"] = str(Path(out_dir) / "profile_decode.txt")
    return res


def summarize(res: dict) -> str:
    e = res["experiments"]
    lines = [
        f"\n== profile: one cached decode step, context {res['context']}, {res['threads']} threads",
        f"  step: ours {res['ours_step_ms']:.2f} ms, hook-free {res['hookfree_step_ms']:.2f} ms; "
        f"{res['ops_per_step']:.0f} aten ops/step; profiler self-time sum {res['profiler_ms_per_step_total']:.2f} ms/step",
    ]
    for k, v in res["groups_ms_per_step"].items():
        lines.append(f"    {v:7.3f} ms  {k}")
    lines += [
        "  experiments:",
        f"    new_cache(): {e['new_cache_ms']:.1f} ms to zero {e['new_cache_bytes'] / 1e6:.0f} MB "
        f"(torch.empty of the same: {e['empty_cache_alloc_ms']:.2f} ms)",
        f"    greedy choose_token (float64 softmax + argmax): {e['choose_token_greedy_ms']:.3f} ms/token "
        f"(argmax alone {e['argmax_only_ms']:.3f} ms); input tensor from list {e['input_tensor_from_list_ms']:.3f} ms",
        f"    LM head, {e['lm_head_bytes'] / 1e6:.0f} MB: one core (F.linear) {e['lm_head_one_core_ms']:.2f} ms "
        f"({e['lm_head_bytes'] / e['lm_head_one_core_ms'] / 1e6:.1f} GB/s), two cores (unembed) {e['lm_head_ms']:.2f} ms "
        f"({e['lm_head_bytes'] / e['lm_head_ms'] / 1e6:.1f} GB/s); with a [C, V] copy of wte {e['lm_head_transposed_copy_ms']:.2f} ms "
        f"({e['lm_head_bytes'] / e['lm_head_transposed_copy_ms'] / 1e6:.1f} GB/s)",
        f"    all layers' products (c_attn, c_proj, c_fc, mlp.c_proj), {e['all_layers_bytes'] / 1e6:.0f} MB cold: "
        f"one core (addmm) {e['all_layers_one_core_ms']:.2f} ms ({e['all_layers_bytes'] / e['all_layers_one_core_ms'] / 1e6:.1f} GB/s), "
        f"two cores (conv1d) {e['all_layers_ms']:.2f} ms ({e['all_layers_bytes'] / e['all_layers_ms'] / 1e6:.1f} GB/s)",
        f"    SDPA 1 query, L=256: view {e['sdpa_view_ms_L256']:.3f} / contiguous {e['sdpa_contiguous_ms_L256']:.3f} / "
        f"explicit {e['explicit_attn_ms_L256']:.3f} ms; L=1000: {e['sdpa_view_ms_L1000']:.3f} / "
        f"{e['sdpa_contiguous_ms_L1000']:.3f} / {e['explicit_attn_ms_L1000']:.3f} ms (per layer)",
        "    step variants, interleaved (ms/step): "
        + ", ".join(f"{k} {v:.2f}" for k, v in e["variants_ms"].items()),
    ]
    lines.append(
        f"    Python/dispatch overhead (12 layers, width 96): ours {e['narrow_ours_step_us']:.0f} us/step, "
        f"hook-free {e['narrow_hookfree_step_us']:.0f} us/step: +{e['narrow_ours_step_us'] - e['narrow_hookfree_step_us']:.0f} us "
        f"= {100 * (e['narrow_ours_step_us'] - e['narrow_hookfree_step_us']) / 1000 / res['ours_step_ms']:.1f}% of a GPT-2-small step"
    )
    if "ours_step_ms_1_thread" in e:
        n = res["threads"]
        lines.append(f"    threads: 1 thread {e['ours_step_ms_1_thread']:.2f} ms vs {n} threads {e[f'ours_step_ms_{n}_threads']:.2f} ms")
    if e.get("generate_mean_decode_ms") is not None:
        lines.append(f"    lm.generate cached: median {e['generate_mean_decode_ms']:.2f} ms/token (bare step {res['ours_step_ms']:.2f} ms)")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="gpt2-small")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    import gpt2viz
    from checkpoints import ensure_checkpoint

    lm = gpt2viz.load_model(ensure_checkpoint(args.shape))
    res = profile_decode(lm, steps=args.steps, ctx=args.ctx, out_dir=HERE)
    print((HERE / "profile_decode.txt").read_text())


if __name__ == "__main__":
    main()
