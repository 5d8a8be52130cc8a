"""What the generation view says: each step's shapes, the cache, the cost, the comparison.

Like narration.py, every function reads this run's facts (RunFacts of the prompt's trace) and
plain step records, and returns plain text quoting this run's numbers, in the current language:
paragraphs are whole templates (gpt2viz/i18n/<lang>/generation.py), short lines gettext msgids.
Sentences that name a key take it as a parameter, since only a widget knows the bindings in force.
"""

from __future__ import annotations

from rich.cells import cell_len

from ..costs import gb_per_s, step_bound
from ..cpu_share import disturbed
from ..generate import STOP_CANCELLED, STOP_CONTEXT, STOP_EOS, STOP_MAX_TOKENS
from ..i18n import _, ngettext, plural, say, sentences
from ..text_safety import token_label
from .formatting import count, nbytes, num, percent, quote, shape
from .generation import Comparison, Generation
from .facts import RunFacts
from .narration import ARROW


def _tokens(n: int) -> str:
    return ngettext("{n} token", "{n} tokens", n).format(n=count(n))


def _layers(n: int) -> str:
    return ngettext("{n} layer", "{n} layers", n).format(n=count(n))


def _heads(n: int) -> str:
    return ngettext("{n} head", "{n} heads", n).format(n=count(n))


def stop_text(gen: Generation) -> str:
    """Why the generation ended, in one sentence ('' while it runs)."""
    n = len(gen.steps)
    reason = gen.stop_reason
    if reason == STOP_EOS:
        return ngettext(
            "The model wrote {eos} (id {id}) after {n} token: it ended the text itself.",
            "The model wrote {eos} (id {id}) after {n} tokens: it ended the text itself.",
            n,
        ).format(eos=token_label(gen.steps[-1]["text"]), id=gen.ids[-1], n=count(n))  # <|im_end|> for SmolLM2
    if reason == STOP_CONTEXT:
        facts = {"n_ctx": count(gen.n_ctx), "n": count(n)}
        if n == 0:
            return _("The prompt fills all {n_ctx} positions of the context: there is no room for a new token.").format(
                **facts
            )
        if not gen.settings.use_cache:
            return _("The context is full: {n_ctx} tokens, {n} of them new.").format(**facts)
        # The last token is chosen but never fed in, so the cache holds one position less.
        return _("The context is full: {n_ctx} tokens, {n} of them new; the last was never fed in (cache {cached}).").format(
            cached=count(gen.n_ctx - 1), **facts
        )
    if reason == STOP_MAX_TOKENS:
        return ngettext("{n} new token, as many as asked.", "{n} new tokens, as many as asked.", n).format(n=count(n))
    if reason == STOP_CANCELLED:
        total = gen.settings.max_new_tokens
        return ngettext("Stopped after {n} of {total} token.", "Stopped after {n} of {total} tokens.", total).format(
            n=count(n), total=count(total)
        )
    return ""


def step_kind(gen: Generation, index: int) -> str:
    """'prefill', 'decode', 'full pass' (no cache) or 'prefill (resumed)'."""
    if not gen.steps[index].get("used_cache"):
        return _("full pass, no cache")
    if gen.is_first(index):
        return _("prefill") if index == 0 else _("prefill (resumed)")
    return _("decode")


def step_heading(gen: Generation, index: int) -> str:
    """'Step 12 · decode'."""
    return _("Step {index} · {kind}").format(index=index, kind=step_kind(gen, index))


def step_flow(f: RunFacts, gen: Generation, index: int) -> list[str]:
    """The step's shapes, with this run's numbers: ids in, q, K and V, scores, logits."""
    H, D, V = f.n_head, f.head_dim, f.vocab
    L = gen.context_length(index)  # keys each query can see at the end of this step
    T = gen.input_length(index)
    cached = bool(gen.steps[index].get("used_cache"))
    kv_shape = shape([1, f.n_kv_head, L, D])  # a grouped model keeps fewer key/value heads than query heads
    if cached and L > T:
        kv = _("K, V {shape} ({cached} + {new} new)").format(shape=kv_shape, cached=count(L - T), new=count(T))
    else:
        kv = f"K, V {kv_shape}"
    if L == 1:
        mask = _("mask: one query, one key (its own)")
    elif T == 1:
        # The causal mask, shifted by the L - 1 cached positions, lets the one query see every key.
        mask = _("mask tril(diagonal={past}): all {n} keys").format(past=L - 1, n=count(L))
    else:
        mask = _("mask: causal, query i sees keys 0–i")
    logits = shape([1, 1, V])
    return [
        _("ids, shape {ids}{arrow}x {x}").format(ids=shape([1, T]), arrow=ARROW, x=shape([1, T, f.n_embd])),
        f"q {shape([1, H, T, D])}",
        kv,
        f"scores {shape([1, H, T, L])}",
        mask,
        f"pattern @ V{ARROW}{shape([1, H, T, D])}",
        _("logits {shape} (last position)").format(shape=logits) if T > 1 else f"logits {logits}",
    ]


def step_text(f: RunFacts, gen: Generation, index: int) -> str:
    """What this step fed the model and why its shapes are what they are."""
    step = gen.steps[index]
    L = gen.context_length(index)
    H = f.n_head
    facts = {"length": count(L), "n_layer": count(f.n_layer), "logits_shape": shape([1, 1, f.vocab])}
    if not step.get("used_cache"):
        # One id or many bends the sentence (its one id goes / all 12 ids go): a template per form.
        return say(
            plural("generation.step.full_pass", L), ids_shape=shape([1, L]), scores_shape=shape([1, H, L, L]), **facts
        )
    if gen.is_first(index):
        facts.update(
            ids_shape=shape([1, L]), last=L - 1, kv_shape=shape([1, f.n_kv_head, L, f.head_dim]), scores_shape=shape([1, H, L, L])
        )
        if index == 0:
            return say(plural("generation.step.prefill", L), **facts)
        return say("generation.step.prefill_resumed", written=_tokens(index), **facts)
    past = L - 1
    previous = gen.steps[index - 1]
    return say(
        plural("generation.step.decode", past),
        ids_shape=shape([1, 1]),
        previous=quote(previous["text"]),
        previous_id=previous["id"],
        previous_step=index - 1,
        past=past,
        n=count(past),
        kv_shape=shape([1, H, 1, f.head_dim]),
        length=count(L),
        scores_shape=shape([1, H, 1, L]),
    )


def choice_text(gen: Generation, index: int) -> str:
    """How this step's token was chosen, with the probabilities before and after the settings."""
    step = gen.steps[index]
    s = gen.settings.sampling
    chosen = {"token": quote(step["text"]), "id": step["id"]}
    p = percent(step.get("chosen_prob"))
    raw = step.get("raw") or {}
    raw_p = None
    if step["id"] in (raw.get("ids") or []):
        raw_p = raw["probs"][raw["ids"].index(step["id"])]
    if s.greedy:
        return say("generation.choice.greedy", **chosen, p=p)
    effect = "sharper" if s.temperature < 1 else "flatter" if s.temperature > 1 else "unchanged"
    temperature = say(f"generation.choice.{effect}", temperature=f"{s.temperature:g}")
    mass = percent(s.top_p) if s.top_p is not None else None
    if s.top_k is not None and s.top_p is not None:
        kept = say("generation.choice.top_k_top_p", k=count(s.top_k), mass=mass)
    elif s.top_k is not None:
        kept = say("generation.choice.top_k", k=count(s.top_k))
    elif s.top_p is not None:
        kept = say("generation.choice.top_p", mass=mass)
    else:
        kept = ""
    if raw_p is not None:
        drawn = say("generation.choice.drawn", **chosen, p=p, plain_p=percent(raw_p))
    else:
        drawn = say("generation.choice.drawn_outside", **chosen, p=p, topk=count(gen.topk))
    # The candidates list drops zeros: fewer than top-k entries means these were all there were.
    n_left = len((step.get("candidates") or {}).get("ids") or [])
    only = say("generation.choice.only_left", tokens=_tokens(n_left)) if n_left < gen.topk else ""
    seed = say("generation.choice.seed", seed=s.seed) if s.seed is not None else say("generation.choice.no_seed")
    return sentences(temperature, kept, drawn, only, seed)


def kv_formula(f: RunFacts, length: int, width: int = 0) -> list[str]:
    """'= 2 (K, V) × 2 layers × 4 heads × 17 positions × 16 dims × 4 B' as lines of at most `width`
    cells (0: one line), the last one ending in '= 8,704 B'."""
    total = f.kv_bytes(length)
    factors = [
        "2 (K, V)",
        _layers(f.n_layer),
        _heads(f.n_kv_head),
        ngettext("{n} position", "{n} positions", length).format(n=count(length)),
        ngettext("{n} dim", "{n} dims", f.head_dim).format(n=count(f.head_dim)),
        f"{f.value_bytes} B",
    ]
    out = ["  = " + factors[0]]
    for factor in factors[1:]:
        if width and cell_len(out[-1]) + 3 + cell_len(factor) > width:
            out.append("    × " + factor)
        else:
            out[-1] += " × " + factor
    total_text = f" = {count(total)} B"
    if width and cell_len(out[-1]) + len(total_text) > width:
        out.append("   " + total_text)
    else:
        out[-1] += total_text
    return out


def kv_text(f: RunFacts, gen: Generation, index: int | None, compare_key: str) -> str:
    """Why K and V are cached and Q is not, with this run's sizes; `compare_key` runs the comparison."""
    per_token = count(f.kv_bytes_per_position)
    why = say(
        "generation.kv.why",
        per_token=per_token,
        layers=_layers(f.n_layer),
        heads=_heads(f.n_kv_head),
        head_dim=count(f.head_dim),
        value_bytes=count(f.value_bytes),
        dtype=f.compute_dtype,
        n_ctx=count(f.n_ctx),
        full=nbytes(f.kv_bytes(f.n_ctx)),
        compare_key=compare_key,
    )
    if not gen.settings.use_cache:
        return say("generation.kv.off", per_token=per_token) + "\n\n" + why
    return why


def bandwidth_text(f: RunFacts, gen: Generation, index: int | None, compare_key: str) -> str:
    """What a decode step reads, what it costs on this run, and what bounds it, from this run's
    numbers against this machine's measured stream rate (never a bound the numbers contradict).
    `compare_key` runs the comparison, which a run without the cache points to."""
    weights = f.step_weight_bytes
    reads = {"n_params": count(f.n_params), "dtype": f.dtype, "weights": nbytes(weights)}
    head = say("generation.cost.prefill_decode")
    # A model with a position table reads one row of it a step; a LLaMA-family model has none, and
    # its tied LM head reads the token table whole.
    reads_key = "generation.cost.reads_all" if f.llama else "generation.cost.reads"
    if f.float16_head:  # the token table read through the LM head's float16 copy: half its float32 bytes
        reads_key += "_float16_head"
    if not gen.settings.use_cache:
        return head + "\n\n" + sentences(say(reads_key, **reads), say("generation.cost.no_cache", compare_key=compare_key))
    head += "\n\n" + say(reads_key, **reads)
    mean = gen.mean_decode_ms
    lines = []
    share = busy_share(gen)
    # A rate from times measured busy says so itself (the busy rule), not only in the warning above.
    caveat = {} if share is None else {"share": percent(share)}
    suffix = "" if share is None else "_busy"
    if index is not None and index < len(gen.steps) and not gen.is_first(index):
        step = gen.steps[index]
        kv = (step.get("kv_cache") or {}).get("total_bytes") or 0
        rate = gb_per_s(weights + kv, step.get("ms"))
        lines.append(
            say(
                "generation.cost.step_rate" + suffix,
                **caveat,
                index=index,
                weights=nbytes(weights),
                kv=nbytes(kv),
                ms=num(step.get("ms")),
                rate=num(rate),
            )
        )
    busy = busy_text(gen)
    if mean:
        read = weights + gen.mean_decode_kv_bytes
        lines.append(
            say("generation.cost.mean_rate" + suffix, **caveat, ms=num(mean), bytes=nbytes(int(read)),
                rate=num(gb_per_s(read, mean)))
        )
        if not busy:
            lines.append(bound_text(read, mean, gen.stream_gb_s))
    # Times measured busy: the warning first, above the rates it is about (a short panel shows it).
    return (busy + "\n\n" if busy else "") + head + ("\n\n" + sentences(*lines) if lines else "")


def busy_share(*runs: Generation) -> float | None:
    """The largest share of the CPUs other processes used during one of `runs`, where it was over
    the busy threshold (cpu_share.disturbed); None where none was busy, or nobody knows."""
    busiest = max((gen for gen in runs if disturbed(gen)), key=lambda gen: gen.others_cpu, default=None)
    return busiest.others_cpu if busiest else None


def busy_text(*runs: Generation) -> str:
    """The warning that other processes kept the CPUs busy during one of `runs` ('' where none
    was, or nobody knows): its times are not the model's own, so no bound is claimed from them."""
    share = busy_share(*runs)
    return say("generation.busy", share=percent(share)) if share is not None else ""


def bound_text(n_bytes: float, ms: float, stream_gb_s: float | None) -> str:
    """What bounds a step that reads `n_bytes` in `ms`, judged against the stream rate measured
    on this machine (costs.step_bound): memory bandwidth, or the fixed work every step does."""
    bound = step_bound(n_bytes, ms, stream_gb_s)
    if bound.kind == "unmeasured":
        return say("generation.bound.unmeasured")
    facts = {"stream": num(stream_gb_s), "floor": num(bound.memory_ms), "ms": num(ms)}
    if bound.kind == "caches":
        return say("generation.bound.caches", **facts)
    # Without FLOPs the bound is memory, partly memory, or else the fixed work of every step.
    kind = bound.kind if bound.kind in ("memory", "partly") else "fixed"
    return say(f"generation.bound.{kind}", share=percent(bound.share), **facts)


def cost_split_text(comparison: Comparison) -> str:
    """Why the speed-up is what it is, from this run: a full pass's time fitted as a fixed part
    plus a part per position, against the cached run's decode step ('' when it does not fit)."""
    fit = comparison.naive_cost_fit()
    cached = comparison.cached.mean_decode_ms
    if fit is None or cached is None:
        return ""
    fixed, per_position = fit
    last = comparison.naive.context_length(len(comparison.naive.steps) - 1)
    at_last = fixed + per_position * last
    # A cached step no faster than the fitted full pass at the last length: the cache did not pay here.
    key = "generation.compare.cost_split" if cached < at_last else "generation.compare.cost_split_no_gain"
    return say(
        key,
        fixed=num(fixed),
        per_position=num(per_position),
        last=count(last),
        at_last=num(at_last),
        cached=num(cached),
    )


def compare_text(f: RunFacts, comparison: Comparison) -> str:
    """The verdict of a comparison, and why the cache changes the path and not the result."""
    naive, cached = comparison.naive, comparison.cached
    n = len(cached.steps)
    same = ""
    if comparison.identical:
        ids = ngettext("{n} id", "{n} ids", n).format(n=count(n))
        if cached.settings.sampling.greedy:
            same = say("generation.compare.same", ids=ids)
        else:
            same = say("generation.compare.same_seeded", ids=ids, seed=cached.settings.sampling.seed)
    L = cached.context_length(n - 1) if n else len(cached.prompt_ids)
    # Times slowed by other processes say nothing about where a step's time goes.
    why = busy_text(naive, cached) or cost_split_text(comparison)
    path = "generation.compare.path" if cached.settings.sampling.greedy else "generation.compare.path_sampled"
    paragraphs = [sentences(same, say(path, positions=count(L))), why]
    if not comparison.identical:
        i = comparison.first_divergence
        stopped = _("(stopped)")
        a = naive.steps[i]["text"] if i < len(naive.steps) else stopped
        b = cached.steps[i]["text"] if i < len(cached.steps) else stopped
        paragraphs.insert(0, say("generation.compare.differ", step=i, naive=quote(a), cached=quote(b)))
    return "\n\n".join(p for p in paragraphs if p)
