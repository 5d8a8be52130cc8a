"""What the cost lab says about its three experiments, from this run's measurements only.

Every sentence is a whole template (`lab.*` in gpt2viz/i18n/<lang>/lab.py); the functions below
decide which sentences apply and format the numbers, the same in every language. What bounds a
step is decided by one rule, `costs.step_bound`, against the rates the lab measured on this
machine; no sentence claims a bound or a speed-up that the numbers on screen contradict. Keys named
in a sentence come in as parameters (the screen passes its keys as they are bound now).
"""

from __future__ import annotations

from ..cost_lab import FLAT_WITHIN, BatchSweep, ContextSweep, LabResult, PrecisionSweep
from ..cpu_share import disturbed
from ..costs import step_bound
from ..i18n import ngettext, say, sentences
from .formatting import count, nbytes, num, percent


def _grows(positions: list[int], ms: list[float]) -> bool:
    """Whether the fitted rise over the range is more than a tenth of the first step; a smaller
    slope, or one that falls, is the timing's noise and is said to be no growth."""
    return _slope(positions, ms) * (positions[-1] - positions[0]) / 100 > 0.1 * ms[0]


def _slope(positions: list[int], ms: list[float]) -> float:
    """Least-squares ms per 100 positions."""
    n = len(positions)
    if n < 2:
        return 0.0
    mx, my = sum(positions) / n, sum(ms) / n
    sxx = sum((x - mx) ** 2 for x in positions)
    return 100 * sum((x - mx) * (y - my) for x, y in zip(positions, ms)) / sxx if sxx else 0.0


def _sizes(sizes) -> str:
    """Batch sizes listed: '1, 2, 4, 8'."""
    return ", ".join(count(b) for b in sizes)


def machine_text(result: LabResult) -> str:
    """The machine's rates; rates measured while other processes were busy say so in the sentence."""
    m = result.machine
    threads = ngettext("{n} thread", "{n} threads", m.threads).format(n=count(m.threads))
    if disturbed(m):
        return say(
            "lab.machine_while_busy", share=percent(m.others_cpu), stream=num(m.stream_gb_s),
            compute=num(m.compute_gflop_s), threads=threads,
        )
    return say("lab.machine", stream=num(m.stream_gb_s), compute=num(m.compute_gflop_s), threads=threads)


def busy_table(sweep, rows: list[str]) -> str:
    """Times measured while other processes kept the CPUs busy: a table under its mark, and no
    slope, speed-up, ranking or cause drawn from them (the busy rule)."""
    return "\n".join([say("lab.busy_table", share=percent(sweep.others_cpu)), *rows])


def busy_sentence(result: LabResult, sweep) -> str | None:
    """The warning that other processes used the CPUs while `sweep` ran, or while the lab measured
    the machine's rates that its steps are judged by (None: neither, or nobody knows); where it
    applies, no sentence says what bounds a step."""
    if disturbed(sweep):
        return say("lab.busy", share=percent(sweep.others_cpu))
    if disturbed(result.machine):
        return say("lab.machine_busy", share=percent(result.machine.others_cpu))
    return None


def bound_sentence(result: LabResult, what: str, n_bytes: float, flops: float, ms: float, fmt: str | None = None) -> str:
    """What bounds a step of `ms` that reads `n_bytes` and does `flops`, on this machine, for a
    model in number format `fmt` (default: the lab's model's)."""
    m = result.machine
    bound = step_bound(n_bytes, ms, m.stream_gb_s, flops, m.compute_gflop_s)
    if bound.kind == "unmeasured":
        return say("lab.bound.unmeasured")
    key = {"partly": f"partly_{bound.resource}"}.get(bound.kind, bound.kind)
    if key == "faster_compute" and (fmt or result.precision) == "float32":
        key = "faster_than_measured"  # float32's own products beat the rate measured for float32
    # The sentence names one resource's time; its share is of that time.
    named_ms = bound.compute_ms if key in ("compute", "partly_compute", "faster_compute", "faster_than_measured") \
        else bound.memory_ms
    share = named_ms / ms if ms > 0 else 0.0
    return say(
        f"lab.bound.{key}",
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


def context_text(
    result: LabResult | None, sweep: ContextSweep | None, start: int, end: int, run_key: str, length_key: str,
    live: bool = True,
) -> str:
    """The context experiment: what it times (`run_key` runs it), or what it measured
    (`length_key` chooses how far it goes; a `live` lab says where its next run would go when that
    is not what is shown). A length of `end` positions ends at position `end` - 1."""
    if result is None or sweep is None or not sweep.positions:
        return say("lab.context.idle", start=start, end=max(start, end - 1), run=run_key)
    p, naive, cached = sweep.positions, sweep.naive_ms, sweep.cached_ms
    next_run = None
    if live and (start, end) != (sweep.start, sweep.end):  # `length_key` chose another length since
        next_run = say("lab.context.next", run=run_key, start=start, end=max(start, end - 1), length=length_key)
    if disturbed(sweep):  # times slowed by other processes: the table, nothing drawn from it
        rows = [
            say("lab.busy_row.context", position=position, naive=num(n), cached=num(c))
            for position, n, c in zip(p, naive, cached)
        ]
        parts = [busy_sentence(result, sweep), busy_table(sweep, rows)]
        if not sweep.complete:
            parts.append(say("lab.context.partial", done=count(len(p)), last=p[-1]))
        if next_run:  # first: where the learner looks as the length key is pressed
            parts.insert(0, next_run)
        parts.append(machine_text(result))
        return "\n\n".join(parts)
    parts = [
        say(
            "lab.context.ends", first=p[0], naive_first=num(naive[0]), cached_first=num(cached[0]),
            last=p[-1], naive_last=num(naive[-1]), cached_last=num(cached[-1]),
        )
    ]
    if len(p) < 2:
        parts.append(say("lab.context.one_point", position=p[0], length=length_key))
    else:
        naive_slope, cached_slope = _slope(p, naive), _slope(p, cached)
        parts.append(sentences(
            say("lab.context.growth" if _grows(p, naive) else "lab.context.no_growth", naive_slope=num(naive_slope)),
            say("lab.context.cached_growth" if _grows(p, cached) else "lab.context.cached_no_growth",
                cached_slope=num(cached_slope)),
        ))
    crossover = sweep.crossover
    if crossover is None:
        parts.append(say("lab.context.no_crossover", last=p[-1]))
    elif crossover == p[0]:
        parts.append(say("lab.context.crossover_start", crossover=crossover))
    else:
        parts.append(say("lab.context.crossover", before=p[p.index(crossover) - 1], crossover=crossover))
    if sweep.complete:
        naive_total, cached_total = sweep.naive_total_s, sweep.cached_total_s
        key = "lab.context.totals" if cached_total < naive_total else "lab.context.totals_slower"
        if sweep.end > sweep.start and cached_total > 0:
            parts.append(say(
                key, start=sweep.start, end=sweep.end - 1, naive_total=num(naive_total), cached_total=num(cached_total),
                speedup=num(naive_total / cached_total), points=count(len(p)),
            ))
    else:
        parts.append(say("lab.context.partial", done=count(len(p)), last=p[-1]))
    busy = busy_sentence(result, sweep)
    if busy:
        parts.insert(1, busy)
    else:
        mid = len(p) // 2
        costs = result.costs
        what = say("lab.what.cached", position=p[mid])
        parts.append(bound_sentence(result, what, costs.bytes_read(1, p[mid]), costs.flops(1, p[mid]), cached[mid]))
    if next_run:  # first: where the learner looks as the length key is pressed (below, it went unseen)
        parts.insert(0, next_run)
    parts.append(machine_text(result))
    return "\n\n".join(parts)


def batch_text(
    result: LabResult | None, sweep: BatchSweep | None, sizes: tuple[int, ...], context: int, run_key: str
) -> str:
    """The batch experiment: what it times (`run_key` runs it), or what it measured."""
    if result is None or sweep is None or not sweep.rows:
        return say("lab.batch.idle", sizes=_sizes(sizes), context=count(context), run=run_key)
    one, big = sweep.rows[0], sweep.rows[-1]
    busy = busy_sentence(result, sweep)
    if disturbed(sweep):  # times slowed by other processes: the table, nothing drawn from it
        rows = [
            say("lab.busy_row.batch", batch=count(r.batch), ms=num(r.step_ms), tps=num(r.tokens_per_s))
            for r in sweep.rows
        ]
        parts = [busy, busy_table(sweep, rows)]
        if len(sweep.rows) > 1:
            parts.append(say(
                "lab.batch.intensity_only", one_i=num(one.intensity), big_i=num(big.intensity), big=count(big.batch),
            ))
        if sweep.skipped:
            parts.append(say("lab.batch.skipped", sizes=_sizes(sweep.skipped)))
        parts.append(machine_text(result))
        return "\n\n".join(parts)
    if len(sweep.rows) == 1:
        what = say("lab.what.batch", batch=count(one.batch))
        return "\n\n".join([
            say("lab.batch.one_row", context=count(sweep.context), ms=num(one.step_ms), batch=count(one.batch)),
            busy or bound_sentence(result, what, one.bytes_read, one.flops, one.step_ms),
            machine_text(result),
        ])
    parts = [say(
        "lab.batch.ends", context=count(sweep.context), one_ms=num(one.step_ms), big_ms=num(big.step_ms),
        big=count(big.batch),
        ratio=num(big.step_ms / one.step_ms), one_tps=num(one.tokens_per_s), big_tps=num(big.tokens_per_s),
    )]
    if busy:  # the machine's rates were measured busy: no bound named from them
        parts.append(busy)
    flat = sweep.flat_until
    second, *later = sweep.rows[1:]
    quickest = min(later, key=lambda r: r.step_ms, default=None)
    if flat == one.batch and quickest is not None and quickest.step_ms < second.step_ms:
        # A larger B took less time than B = 2: no cause is drawn from one disturbed point.
        parts.append(say(
            "lab.batch.uneven", second=count(second.batch), second_ratio=num(second.step_ms / one.step_ms),
            later=count(quickest.batch), later_ratio=num(quickest.step_ms / one.step_ms),
        ))
    elif flat == one.batch:
        parts.append(say(
            "lab.batch.not_flat", second=count(second.batch), second_ratio=num(second.step_ms / one.step_ms),
            vocab=count(result.vocab_size),
        ))
    else:
        parts.append(say("lab.batch.flat", flat_within=num(FLAT_WITHIN), flat=count(flat)))
    m = result.machine
    # The ridge between memory- and compute-bound comes from the rates: none from rates measured busy.
    parts.append(say(
        "lab.batch.intensity_only" if disturbed(m) else "lab.batch.intensity", one_i=num(one.intensity),
        big_i=num(big.intensity), big=count(big.batch), ridge=num(m.compute_gflop_s / m.stream_gb_s),
    ))
    for row in () if busy else (one, big):
        what = say("lab.what.batch", batch=count(row.batch))
        parts.append(bound_sentence(result, what, row.bytes_read, row.flops, row.step_ms))
    if sweep.skipped:
        parts.append(say("lab.batch.skipped", sizes=_sizes(sweep.skipped)))
    parts.append(machine_text(result))
    return "\n\n".join(parts)


def precision_text(
    result: LabResult | None, sweep: PrecisionSweep | None, formats: tuple[str, ...], context: int, run_key: str
) -> str:
    """The number-format experiment: what it times (`run_key` runs it), or what it measured."""
    if result is None or sweep is None or not sweep.rows:
        return say("lab.precision.idle", formats=", ".join(formats), context=count(context), run=run_key)
    rows = {r.format: r for r in sweep.rows}
    base = rows.get("float32")
    busy = busy_sentence(result, sweep)
    parts = [busy] if busy else []
    parts.append(say("lab.precision.lead", context=count(sweep.context)))  # which step (the generation view's reads less)
    # A float32 step reads nearly all its weights (all but the position table's other rows) unless
    # its LM head multiplies by a float16 copy of the token table (kernels/fbgemm_float16.py's held
    # head): then the bytes a step reads differ from run to run with the kernel chosen, and say why.
    head_copy = None
    if base is not None and base.bytes_read < 0.8 * base.weight_bytes:
        head_copy = say("lab.precision.head_copy", read=nbytes(base.bytes_read), weights=nbytes(base.weight_bytes))
    if disturbed(sweep):  # times slowed by other processes: the table, nothing drawn from it
        table = [say("lab.busy_row.precision", format=r.format, ms=num(r.step_ms), read=nbytes(r.bytes_read)) for r in sweep.rows]
        parts.append(busy_table(sweep, table))
        parts += [head_copy] if head_copy else []
        parts += quality_sentences(sweep)
        parts.append(machine_text(result))
        return "\n\n".join(parts)
    for r in sweep.rows:
        facts = {"format": r.format, "ms": num(r.step_ms), "read": nbytes(r.bytes_read), "gb_s": num(r.gb_s)}
        if base is None or r is base:  # nothing to compare with
            parts.append(say("lab.precision.row", **facts))
        else:
            parts.append(say("lab.precision.row_ratio", **facts, ratio=num(r.step_ms / base.step_ms)))
    parts += [head_copy] if head_copy else []
    fastest = min(sweep.rows, key=lambda r: r.step_ms)
    if base is not None and fastest.step_ms < base.step_ms:
        parts.append(say(
            "lab.precision.fastest", fastest=fastest.format, fastest_ratio=num(fastest.step_ms / base.step_ms),
            bytes_ratio=num(fastest.bytes_read / base.bytes_read),
        ))
    elif base is not None:
        parts.append(say("lab.precision.no_faster"))
    flops = result.costs.flops(1, sweep.context)
    shown = [base] if base is not None else []
    shown += [fastest] if fastest is not base else []
    for r in () if busy else shown:
        what = say("lab.what.format", format=r.format)
        parts.append(bound_sentence(result, what, r.bytes_read, flops, r.step_ms, r.format))
    parts += quality_sentences(sweep)
    parts.append(machine_text(result))
    return "\n\n".join(parts)


def quality_sentences(sweep: PrecisionSweep) -> list[str]:
    """Each format's logits against float32's (counts of the pass, not times: busy or not)."""
    out = []
    for r in sweep.rows:
        if r.format == "float32":
            continue
        q = r.quality
        positions = ngettext("{n} position", "{n} positions", q["positions"]).format(n=count(q["positions"]))
        out.append(say(
            "lab.precision.quality", format=r.format, positions=positions, max_dlogit=num(q["max_abs_dlogit"]),
            top1=percent(q["top1_agreement"]), kl=num(q["mean_kl"]),
        ))
    return out
