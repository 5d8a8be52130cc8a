"""What the cost lab says about its three experiments, from this run's measurements only.

Every sentence is a whole template with named placeholders (TEXT); the functions below decide
which sentences apply and supply the numbers. What bounds a step is decided by one rule,
`costs.step_bound`, against the rates the lab measured on this machine; no sentence claims a
bound or a speed-up that the numbers on screen contradict.
"""

from __future__ import annotations

from ..cost_lab import FLAT_WITHIN, BatchSweep, ContextSweep, LabResult, PrecisionSweep
from ..costs import step_bound
from .formatting import nbytes, num, percent

TEXT = {
    "status.machine": "Measuring this machine's memory and compute rates (␣ stops)",
    "status.context": "Timing a new token at position after position, without and with the cache (␣ stops)",
    "status.batch": "Timing batched decode steps (␣ stops)",
    "status.precision": "Loading each number format and timing its decode step (␣ stops)",
    "status.idle": "r runs the experiment on show, a runs all three.",
    "status.replay": "A recorded lab result: there is no model to run the experiments again.",
    "replay.empty": "This trace holds no lab result. Record one with gpt2viz PROMPT --json FILE --cost-lab.",
    "plot.context": "ms per new token, by position",
    "plot.batch": "one decode step for B sequences",
    "plot.precision": "ms a decode step, by number format",
    "legend.naive": "no cache",
    "legend.cached": "cached",
    "legend.step_ms": "ms a step",
    "legend.tokens_per_s": "tokens/s",
    "axis.position": "position",
    "axis.batch": "B",
    "machine": (
        "This machine, measured by the lab: it streams a large matrix from memory at {stream} GB/s and "
        "multiplies at {compute} GFLOP/s (a large float32 product), on {threads} threads."
    ),
    # -- context length
    "context.idle": (
        "Times one new token at positions from the prompt's end ({start}) to {end}, without the KV cache "
        "(a full pass over every position so far) and with it (one position against the cache). r runs it."
    ),
    "context.ends": (
        "At position {first} a new token took {naive_first} ms without the cache and {cached_first} ms with it; "
        "at position {last}, {naive_last} ms against {cached_last} ms."
    ),
    "context.growth": (
        "Without the cache every step computes all its positions again, so its time grows with the position: "
        "{naive_slope} ms more per 100 positions here (a straight line fitted to the measured points). With "
        "it a step computes one position and reads the cached keys and values: {cached_slope} ms per 100 "
        "positions."
    ),
    "context.no_growth": (
        "Without the cache every step computes all its positions again, yet its time did not grow measurably "
        "here ({naive_slope} ms per 100 positions, fitted): in this range a step is dominated by work that "
        "does not depend on the length. With the cache: {cached_slope} ms per 100 positions."
    ),
    "context.one_point": "Only position {position} was measured: choose a longer length (n) to see a trend.",
    "context.crossover_start": "The cache was faster at every measured position, from {crossover} on.",
    "context.crossover": (
        "At position {before} the cache was not yet faster: a short pass costs little more than one position, "
        "because most of a step is work that does not depend on the length. From {crossover} on the cache "
        "was faster at every measured position."
    ),
    "context.no_crossover": (
        "The cache was not faster at the last measured position ({last}): on this model and machine, "
        "recomputing every position costs no more than a cached step in this range."
    ),
    "context.totals": (
        "Generating every token from position {start} to {end} would take about {naive_total} s without the "
        "cache and {cached_total} s with it: {speedup}x faster (summed over the curve, interpolated between "
        "the {points} measured positions)."
    ),
    "context.totals_slower": (
        "Generating every token from position {start} to {end} would take about {naive_total} s without the "
        "cache and {cached_total} s with it: the cache was slower in this range (summed over the curve, "
        "interpolated between the {points} measured positions)."
    ),
    "context.partial": "Stopped after {done} of the positions: the curve ends at {last}.",
    # -- batch size
    "batch.idle": (
        "Times one cached decode step for B sequences at once (B = {sizes}) at {context} cached positions: "
        "the step reads every weight once whatever B is. r runs it."
    ),
    "batch.ends": (
        "One decode step at {context} cached positions took {one_ms} ms for one sequence and {big_ms} ms for "
        "{big} ({ratio}x), so tokens/s went from {one_tps} to {big_tps}."
    ),
    "batch.one_row": "One decode step at {context} cached positions took {ms} ms for B = {batch}.",
    "batch.flat": (
        "The step stayed within {flat_within}x of one sequence's time up to B = {flat}: every weight is read "
        "once per step, and the extra rows reuse it."
    ),
    "batch.not_flat": (
        "Already at B = {second} the step took {second_ratio}x one sequence's time: on this run extra rows are "
        "not free, because each adds its own products, attention over its cache and {vocab} logits."
    ),
    "batch.intensity": (
        "Arithmetic intensity (FLOPs per byte read) grows with B: {one_i} at B = 1, {big_i} at B = {big}. At "
        "this machine's measured rates a step turns from memory- to compute-bound near {ridge} FLOPs per byte."
    ),
    "batch.skipped": "B = {sizes} skipped: their KV caches would take more than a quarter of the free memory.",
    # -- number formats
    "precision.idle": (
        "Loads this checkpoint in {formats}, times a cached decode step at {context} positions in each, and "
        "compares each format's logits over the prompt with float32's. r runs it."
    ),
    "precision.row_base": "float32: {ms} ms a token, reading {read} a step, {gb_s} GB/s effective.",
    "precision.row": (
        "{format}: {ms} ms a token ({ratio}x float32), reading {read} a step, {gb_s} GB/s effective."
    ),
    "precision.fastest": (
        "Fewer bytes a weight means fewer bytes read a step: {fastest} took {fastest_ratio}x float32's time "
        "for {bytes_ratio}x its bytes."
    ),
    "precision.no_faster": "No format was faster than float32 here.",
    "precision.quality": (
        "{format} against float32 over the prompt's {positions} positions: largest logit difference "
        "{max_dlogit}, same top token at {top1}, mean KL {kl} nats."
    ),
    # -- what bounds a step: "{what}" is one of these names of the step
    "what.cached": "A cached step at position {position}",
    "what.batch": "The step of B = {batch}",
    "what.format": "The {format} step",
    "bound.unmeasured": "This machine's rates were not measured, so no bound is claimed.",
    "bound.memory": (
        "{what}: reading its {read} at {stream} GB/s takes {memory_ms} ms, {share} of its {ms} ms: bound by "
        "memory bandwidth."
    ),
    "bound.compute": (
        "{what}: its {gflop} GFLOP at {compute} GFLOP/s take {compute_ms} ms, {share} of its {ms} ms: bound by "
        "compute."
    ),
    "bound.partly_memory": (
        "{what}: reading its {read} at {stream} GB/s takes {memory_ms} ms, {share} of its {ms} ms: memory is "
        "a large part, and the other {rest} ms is fixed work every step does (Python, dispatching each "
        "operation, hand-offs between threads) or kernels slower than the stream rate."
    ),
    "bound.partly_compute": (
        "{what}: its {gflop} GFLOP at {compute} GFLOP/s take {compute_ms} ms, {share} of its {ms} ms: compute "
        "is a large part, and the other {rest} ms is fixed work every step does or kernels slower than the "
        "measured rate."
    ),
    "bound.fixed": (
        "{what}: reading its {read} at {stream} GB/s would take only {memory_ms} ms of its {ms} ms ({share}): "
        "not bound by memory or compute but by fixed work every step does whatever the model's size (Python, "
        "dispatching each operation, hand-offs between threads) or kernels far slower than the stream rate."
    ),
    "bound.faster_compute": (
        "{what}: its {gflop} GFLOP at the {compute} GFLOP/s measured for float32 would take {compute_ms} ms, "
        "more than the {ms} ms it took: this format's kernels compute faster than float32's."
    ),
    "bound.caches": (
        "{what}: reading its {read} at {stream} GB/s would take {memory_ms} ms, more than the {ms} ms it took: "
        "part of it came from the processor's caches, faster than main memory."
    ),
}


def _slope(positions: list[int], ms: list[float]) -> float:
    """Least-squares ms per 100 positions."""
    n = len(positions)
    if n < 2:
        return 0.0
    mx, my = sum(positions) / n, sum(ms) / n
    sxx = sum((x - mx) ** 2 for x in positions)
    return 100 * sum((x - mx) * (y - my) for x, y in zip(positions, ms)) / sxx if sxx else 0.0


def machine_text(result: LabResult) -> str:
    m = result.machine
    return TEXT["machine"].format(stream=num(m.stream_gb_s), compute=num(m.compute_gflop_s), threads=m.threads)


def bound_sentence(result: LabResult, what: str, n_bytes: float, flops: float, ms: float) -> str:
    """What bounds a step of `ms` that reads `n_bytes` and does `flops`, on this machine."""
    m = result.machine
    bound = step_bound(n_bytes, ms, m.stream_gb_s, flops, m.compute_gflop_s)
    if bound.kind == "unmeasured":
        return TEXT["bound.unmeasured"]
    key = {"partly": f"partly_{bound.resource}"}.get(bound.kind, bound.kind)
    # The sentence names one resource's time; its share is of that time.
    named_ms = bound.compute_ms if key in ("compute", "partly_compute", "faster_compute") else bound.memory_ms
    share = named_ms / ms if ms > 0 else 0.0
    return TEXT[f"bound.{key}"].format(
        what=what,
        read=nbytes(n_bytes),
        stream=num(m.stream_gb_s),
        compute=num(m.compute_gflop_s),
        memory_ms=num(bound.memory_ms),
        compute_ms=num(bound.compute_ms),
        gflop=num(flops / 1e9),
        share=percent(share),
        ms=num(ms),
        rest=num(bound.fixed_ms),
    )


def context_text(result: LabResult | None, sweep: ContextSweep | None, start: int, end: int) -> str:
    if result is None or sweep is None or not sweep.positions:
        return TEXT["context.idle"].format(start=start, end=end)
    p, naive, cached = sweep.positions, sweep.naive_ms, sweep.cached_ms
    parts = [
        TEXT["context.ends"].format(
            first=p[0], naive_first=num(naive[0]), cached_first=num(cached[0]),
            last=p[-1], naive_last=num(naive[-1]), cached_last=num(cached[-1]),
        )
    ]
    if len(p) < 2:
        parts.append(TEXT["context.one_point"].format(position=p[0]))
    else:
        naive_slope, cached_slope = _slope(p, naive), _slope(p, cached)
        # "Grows" only where the fitted rise over the range is more than a tenth of the first step.
        grows = naive_slope * (p[-1] - p[0]) / 100 > 0.1 * naive[0]
        parts.append(TEXT["context.growth" if grows else "context.no_growth"].format(
            naive_slope=num(naive_slope), cached_slope=num(cached_slope)))
    crossover = sweep.crossover
    if crossover is None:
        parts.append(TEXT["context.no_crossover"].format(last=p[-1]))
    elif crossover == p[0]:
        parts.append(TEXT["context.crossover_start"].format(crossover=crossover))
    else:
        parts.append(TEXT["context.crossover"].format(before=p[p.index(crossover) - 1], crossover=crossover))
    if sweep.complete:
        naive_total, cached_total = sweep.naive_total_s, sweep.cached_total_s
        key = "context.totals" if cached_total < naive_total else "context.totals_slower"
        if sweep.end > sweep.start and cached_total > 0:
            parts.append(TEXT[key].format(
                start=sweep.start, end=sweep.end, naive_total=num(naive_total), cached_total=num(cached_total),
                speedup=num(naive_total / cached_total), points=len(p),
            ))
    else:
        parts.append(TEXT["context.partial"].format(done=len(p), last=p[-1]))
    mid = len(p) // 2
    costs = result.costs
    what = TEXT["what.cached"].format(position=p[mid])
    parts.append(bound_sentence(result, what, costs.bytes_read(1, p[mid]), costs.flops(1, p[mid]), cached[mid]))
    parts.append(machine_text(result))
    return "\n\n".join(parts)


def batch_text(result: LabResult | None, sweep: BatchSweep | None, sizes: tuple[int, ...], context: int) -> str:
    if result is None or sweep is None or not sweep.rows:
        return TEXT["batch.idle"].format(sizes=", ".join(str(b) for b in sizes), context=context)
    one, big = sweep.rows[0], sweep.rows[-1]
    if len(sweep.rows) == 1:
        what = TEXT["what.batch"].format(batch=one.batch)
        return "\n\n".join([
            TEXT["batch.one_row"].format(context=sweep.context, ms=num(one.step_ms), batch=one.batch),
            bound_sentence(result, what, one.bytes_read, one.flops, one.step_ms),
            machine_text(result),
        ])
    parts = [TEXT["batch.ends"].format(
        context=sweep.context, one_ms=num(one.step_ms), big_ms=num(big.step_ms), big=big.batch,
        ratio=num(big.step_ms / one.step_ms), one_tps=num(one.tokens_per_s), big_tps=num(big.tokens_per_s),
    )]
    flat = sweep.flat_until
    if flat == one.batch:
        second = sweep.rows[1]
        parts.append(TEXT["batch.not_flat"].format(
            second=second.batch, second_ratio=num(second.step_ms / one.step_ms), vocab=f"{result.vocab_size:,}",
        ))
    else:
        parts.append(TEXT["batch.flat"].format(flat_within=num(FLAT_WITHIN), flat=flat))
    m = result.machine
    parts.append(TEXT["batch.intensity"].format(
        one_i=num(one.intensity), big_i=num(big.intensity), big=big.batch, ridge=num(m.compute_gflop_s / m.stream_gb_s),
    ))
    for row in (one, big):
        what = TEXT["what.batch"].format(batch=row.batch)
        parts.append(bound_sentence(result, what, row.bytes_read, row.flops, row.step_ms))
    if sweep.skipped:
        parts.append(TEXT["batch.skipped"].format(sizes=", ".join(str(b) for b in sweep.skipped)))
    parts.append(machine_text(result))
    return "\n\n".join(parts)


def precision_text(result: LabResult | None, sweep: PrecisionSweep | None, formats: tuple[str, ...], context: int) -> str:
    if result is None or sweep is None or not sweep.rows:
        return TEXT["precision.idle"].format(formats=", ".join(formats), context=context)
    rows = {r.format: r for r in sweep.rows}
    base = rows.get("float32")
    parts = []
    for r in sweep.rows:
        key = "precision.row_base" if r is base else "precision.row"
        parts.append(TEXT[key].format(
            format=r.format, ms=num(r.step_ms), ratio=num(r.step_ms / base.step_ms) if base else "n/a",
            read=nbytes(r.bytes_read), gb_s=num(r.gb_s),
        ))
    fastest = min(sweep.rows, key=lambda r: r.step_ms)
    if base is not None and fastest.step_ms < base.step_ms:
        parts.append(TEXT["precision.fastest"].format(
            fastest=fastest.format, fastest_ratio=num(fastest.step_ms / base.step_ms),
            bytes_ratio=num(fastest.bytes_read / base.bytes_read),
        ))
    elif base is not None:
        parts.append(TEXT["precision.no_faster"])
    flops = result.costs.flops(1, sweep.context)
    shown = [base] if base is not None else []
    shown += [fastest] if fastest is not base else []
    for r in shown:
        what = TEXT["what.format"].format(format=r.format)
        parts.append(bound_sentence(result, what, r.bytes_read, flops, r.step_ms))
    for r in sweep.rows:
        if r.format == "float32":
            continue
        q = r.quality
        parts.append(TEXT["precision.quality"].format(
            format=r.format, positions=q["positions"], max_dlogit=num(q["max_abs_dlogit"]),
            top1=percent(q["top1_agreement"]), kl=num(q["mean_kl"]),
        ))
    parts.append(machine_text(result))
    return "\n\n".join(parts)
