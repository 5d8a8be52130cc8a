"""What the generation view says: each step's shapes, the cache, the cost, the comparison.

Like narration.py, every function reads this run's facts (RunFacts of the prompt's trace) and
plain step records, and returns plain text quoting this run's numbers.
"""

from __future__ import annotations

from ..costs import gb_per_s, step_bound
from ..generate import STOP_CANCELLED, STOP_CONTEXT, STOP_EOS, STOP_MAX_TOKENS
from .formatting import count, nbytes, num, percent, shape
from .generation import Comparison, Generation
from .facts import RunFacts
from .narration import ARROW

EOS_TEXT = "<|endoftext|>"


def _q(text: str) -> str:
    return f"'{text}'"


def stop_text(gen: Generation) -> str:
    """Why the generation ended, in one sentence ('' while it runs)."""
    n = len(gen.steps)
    reason = gen.stop_reason
    if reason == STOP_EOS:
        return f"The model wrote {EOS_TEXT} (id {gen.ids[-1]}) after {n} tokens: it ended the text itself."
    if reason == STOP_CONTEXT:
        if n == 0:
            return f"The prompt fills all {gen.n_ctx} positions of the context: there is no room for a new token."
        if not gen.settings.use_cache:
            return f"The context is full: {gen.n_ctx} tokens, {n} of them new."
        # The last token is chosen but never fed in, so the cache holds one position less.
        return f"The context is full: {gen.n_ctx} tokens, {n} of them new; the last was never fed in (cache {gen.n_ctx - 1})."
    if reason == STOP_MAX_TOKENS:
        return f"{n} new tokens, as many as asked."
    if reason == STOP_CANCELLED:
        return f"Stopped after {n} of {gen.settings.max_new_tokens} tokens."
    return ""


def step_kind(gen: Generation, index: int) -> str:
    """'prefill', 'decode', 'full pass' (no cache) or 'prefill (resumed)'."""
    if not gen.steps[index].get("used_cache"):
        return "full pass, no cache"
    if gen.is_first(index):
        return "prefill" if index == 0 else "prefill (resumed)"
    return "decode"


def step_heading(gen: Generation, index: int) -> str:
    """'Step 12 · decode'."""
    return f"Step {index} · {step_kind(gen, index)}"


def step_flow(f: RunFacts, gen: Generation, index: int) -> list[str]:
    """The step's shapes, with this run's numbers: ids in, q, K and V, scores, logits."""
    H, D, V = f.n_head, f.head_dim, f.vocab
    L = gen.context_length(index)  # keys each query can see at the end of this step
    T = gen.input_length(index)
    cached = bool(gen.steps[index].get("used_cache"))
    kv = f"K, V {shape([1, H, L, D])}" + (f" ({L - T} + {T} new)" if cached and L > T else "")
    if L == 1:
        mask = "mask: one query, one key (its own)"
    elif T == 1:
        # The causal mask, shifted by the L - 1 cached positions, lets the one query see every key.
        mask = f"mask tril(diagonal={L - 1}): all {L} keys"
    else:
        mask = "mask: causal, query i sees keys 0–i"
    return [
        f"ids, shape {shape([1, T])}{ARROW}x {shape([1, T, f.n_embd])}",
        f"q {shape([1, H, T, D])}",
        kv,
        f"scores {shape([1, H, T, L])}",
        mask,
        f"pattern @ V{ARROW}{shape([1, H, T, D])}",
        f"logits {shape([1, 1, V])}" + (" (last position)" if T > 1 else ""),
    ]


def step_text(f: RunFacts, gen: Generation, index: int) -> str:
    """What this step fed the model and why its shapes are what they are."""
    step = gen.steps[index]
    L = gen.context_length(index)
    H = f.n_head
    if not step.get("used_cache"):
        return (
            f"Without a cache every step runs the whole sequence again: all {L} ids, {shape([1, L])}, go "
            f"through all {f.n_layer} blocks, keys and values of every position are computed anew and thrown "
            f"away, and the scores are a full {L} × {L} triangle, {shape([1, H, L, L])}. Only the last "
            f"position's logits, {shape([1, 1, f.vocab])}, pick the token. The work grows with every token."
        )
    if gen.is_first(index):
        resumed = "" if index == 0 else f" A resumed run starts with a new cache, so the {index} tokens written before are read again too."
        return (
            f"The prefill reads the whole context at once: {L} ids, {shape([1, L])}, positions 0–{L - 1}. "
            f"Each of the {f.n_layer} layers writes their keys and values, {shape([1, H, L, f.head_dim])}, "
            f"into the cache; the scores are {shape([1, H, L, L])} under the causal mask. Only the last "
            f"position's logits, {shape([1, 1, f.vocab])}, are computed: they give the first new token."
            + resumed
        )
    past = L - 1
    previous = gen.steps[index - 1]
    return (
        f"A decode step feeds one id, {shape([1, 1])}: {_q(previous['text'])} (id {previous['id']}), the token "
        f"chosen at step {index - 1}. Its position id is {past}, the past length: {past} positions are already "
        f"in the cache, so it gets wpe[{past}] and continues the sequence instead of restarting at 0. "
        f"Its k and v, {shape([1, H, 1, f.head_dim])}, are appended, and its one query row scores all "
        f"{L} keys: {shape([1, H, 1, L])}."
        f"\n\nThe causal mask is the lower triangle shifted by the past length, tril(diagonal={past}): "
        f"query {past} may see keys 0–{past}, which is every key there is. So a decode step masks nothing."
    )


def choice_text(gen: Generation, index: int) -> str:
    """How this step's token was chosen, with the probabilities before and after the settings."""
    step = gen.steps[index]
    s = gen.settings.sampling
    chosen = f"{_q(step['text'])} (id {step['id']})"
    raw = step.get("raw") or {}
    raw_p = None
    if step["id"] in (raw.get("ids") or []):
        raw_p = raw["probs"][raw["ids"].index(step["id"])]
    if s.greedy:
        return (
            f"Greedy decoding takes the most probable token: {chosen}, p = {percent(step.get('chosen_prob'))}. "
            "No temperature, top-k or top-p: the same prompt always gives the same text."
        )
    kept = []
    if s.top_k is not None:
        kept.append(f"top-k keeps the {s.top_k} most likely")
    if s.top_p is not None:
        kept.append(f"top-p keeps the most likely until their mass reaches {percent(s.top_p)}")
    before = (
        f"{percent(raw_p)} in the plain softmax" if raw_p is not None else f"outside the plain softmax's top {gen.topk}"
    )
    n_left = len((step.get("candidates") or {}).get("ids") or [])
    return (
        f"Sampling: the logits are divided by the temperature {s.temperature:g} "
        + ("(sharper: the likely get likelier)" if s.temperature < 1 else "(flatter)" if s.temperature > 1 else "(unchanged)")
        + (", then " + " and ".join(kept) if kept else "")
        + f". The token is drawn from what is left: {chosen} had p = {percent(step.get('chosen_prob'))} "
        f"after the settings, {before}."
        # The candidates list drops zeros: fewer than top-k entries means these were all there were.
        + (_only_left(n_left) if n_left < gen.topk else "")
        + (f" The seed {s.seed} makes the draws repeatable." if s.seed is not None else " No seed: another run draws differently.")
    )


def _only_left(n: int) -> str:
    if n == 1:
        return " Only 1 token could be drawn at this step."
    return f" Only {n} tokens could be drawn at this step."


def kv_formula(f: RunFacts, length: int, width: int = 0) -> list[str]:
    """'= 2 (K, V) × 2 layers × 4 heads × 17 positions × 16 dims × 4 B' as lines of at most `width`
    (0: one line), the last one ending in '= 8,704 B'."""
    total = f.kv_bytes(length)
    factors = [
        "2 (K, V)",
        f"{f.n_layer} layers",
        f"{f.n_head} heads",
        f"{length} positions",
        f"{f.head_dim} dims",
        f"{f.value_bytes} B",
    ]
    out = ["  = " + factors[0]]
    for factor in factors[1:]:
        if width and len(out[-1]) + 3 + len(factor) > width:
            out.append("    × " + factor)
        else:
            out[-1] += " × " + factor
    total_text = f" = {count(total)} B"
    if width and len(out[-1]) + len(total_text) > width:
        out.append("   " + total_text)
    else:
        out[-1] += total_text
    return out


def kv_text(f: RunFacts, gen: Generation, index: int | None) -> str:
    """Why K and V are cached and Q is not, with this run's sizes."""
    per_token = f.kv_bytes_per_position
    full = f.kv_bytes(f.n_ctx)
    why = (
        "Why K and V, and not Q: a position's key and value depend only on the tokens up to it, so once "
        "computed they never change, and every later token reads them again. A query is used once, by its "
        "own position, to ask which earlier positions matter; no later step needs it. So each layer keeps K "
        f"and V and drops q. One more token adds {count(per_token)} bytes "
        f"(2 × {f.n_layer} layers × {f.n_head} heads × {f.head_dim} × {f.value_bytes} B, {f.compute_dtype}); the "
        f"buffers are allocated once for the whole context of {f.n_ctx} positions, {nbytes(full)}, and "
        "filled in place, so a decode step allocates nothing."
        "\n\nThe cache changes the path, not the result: the keys and values it holds are the very numbers "
        "a full pass would compute again, so the same tokens come out. c runs both and compares."
    )
    if not gen.settings.use_cache:
        return (
            "The cache is off: nothing is kept between steps, and every step recomputes K and V for all "
            f"positions. With it on, this run would keep {count(per_token)} bytes per token.\n\n" + why
        )
    return why


def bandwidth_text(f: RunFacts, gen: Generation, index: int | None) -> str:
    """What a decode step reads, what it costs on this run, and what bounds it, from this run's
    numbers against this machine's measured stream rate (never a bound the numbers contradict)."""
    weights = f.weight_bytes
    head = (
        "Prefill and decode cost differently. The prefill (time to first token) pushes all prompt positions "
        "through each weight matrix at once: many multiply-adds for every weight read from memory. A decode "
        "step pushes one position: each weight is read once and used for one multiply-add, so a decode step "
        "can go no faster than memory delivers the weights, unless something else takes longer still."
        f"\n\nEvery decode step reads all {count(f.n_params)} parameters, stored in {f.dtype}: "
        f"{nbytes(weights)}, plus the KV cache."
    )
    if not gen.settings.use_cache:
        return head + (
            " Without the cache a step is not one position but the whole sequence, so its time grows with "
            "every token: compare with c."
        )
    mean = gen.mean_decode_ms
    lines = []
    if index is not None and index < len(gen.steps) and not gen.is_first(index):
        step = gen.steps[index]
        kv = (step.get("kv_cache") or {}).get("total_bytes") or 0
        rate = gb_per_s(weights + kv, step.get("ms"))
        lines.append(
            f"Step {index}: {nbytes(weights)} + {nbytes(kv)} of K and V in {num(step.get('ms'))} ms = "
            f"{num(rate)} GB/s effective."
        )
    if mean:
        kv_mean = gen.mean_decode_kv_bytes
        lines.append(
            f"Mean decode step: {num(mean)} ms for {nbytes(int(weights + kv_mean))} = "
            f"{num(gb_per_s(weights + kv_mean, mean))} GB/s effective."
        )
        lines.append(bound_text(weights + kv_mean, mean, gen.stream_gb_s))
    return head + ("\n\n" + " ".join(lines) if lines else "")


def bound_text(n_bytes: float, ms: float, stream_gb_s: float | None) -> str:
    """What bounds a step that reads `n_bytes` in `ms`, judged against the stream rate measured
    on this machine (costs.step_bound): memory bandwidth, or the fixed work every step does."""
    bound = step_bound(n_bytes, ms, stream_gb_s)
    if bound.kind == "unmeasured":
        return "This machine's memory bandwidth was not measured for this run, so no bound is claimed."
    floor, share = bound.memory_ms, bound.share
    reading = f"Reading that at the {num(stream_gb_s)} GB/s this machine streams a large matrix takes {num(floor)} ms"
    if bound.kind == "caches":
        return (
            f"{reading}, more than the {num(ms)} ms a step took: part of the weights comes from the processor's "
            "caches, faster than main memory, so the step is bound by neither memory nor fixed work alone."
        )
    if bound.kind == "memory":
        return f"{reading}, {percent(share)} of the {num(ms)} ms a step takes: the step is bound by memory bandwidth."
    if bound.kind == "partly":
        return (
            f"{reading}, {percent(share)} of the {num(ms)} ms a step takes: memory is a large part of the cost, "
            "and the rest is fixed work every step does (Python, dispatching each operation, hand-offs "
            "between the two cores)."
        )
    return (
        f"{reading}, only {percent(share)} of the {num(ms)} ms a step takes: this step is not bound by memory "
        "but by fixed work every step does whatever the model's size (Python, dispatching each of its "
        "operations, hand-offs between the two cores). A bigger model reads more per step and comes closer "
        "to the memory bound."
    )


def cost_split_text(comparison: Comparison) -> str:
    """Why the speed-up is what it is, from this run: a full pass's time fitted as a fixed part
    plus a part per position, against the cached run's decode step."""
    fit = comparison.naive_cost_fit()
    cached = comparison.cached.mean_decode_ms
    if fit is None or cached is None:
        return ""
    fixed, per_position = fit
    last = comparison.naive.context_length(len(comparison.naive.steps) - 1)
    return (
        f"\n\nWhere the time goes, fitted to this run's full passes: each step costs about {num(fixed)} ms "
        f"whatever its length (reading the LM head's weights, Python, dispatching operations), plus about "
        f"{num(per_position)} ms for each position it recomputes. At the last step ({last} positions) that is "
        f"{num(fixed + per_position * last)} ms, against {num(cached)} ms for a cached decode step. The cache "
        "removes the per-position part, not the fixed part: the shorter the sequence, or the larger the fixed "
        "part, the smaller the speed-up."
    )


def compare_text(f: RunFacts, comparison: Comparison) -> str:
    """The verdict of a comparison, and why the cache changes the path and not the result."""
    naive, cached = comparison.naive, comparison.cached
    n = len(cached.steps)
    seed = cached.settings.sampling.seed
    same = (
        f"Both runs chose the same {n} ids"
        + (f" (sampling with the same seed, {seed})" if not cached.settings.sampling.greedy else "")
        + ". "
        if comparison.identical
        else ""
    )
    L = cached.context_length(n - 1) if n else len(cached.prompt_ids)
    path = (
        f"{same}The cache changes the path, not the result: a decode step computes the newest position's "
        f"q, k and v exactly as the full pass does, and reads the other positions' keys and values from the "
        f"cache instead of recomputing them; they are the same numbers, because a position's k and v never "
        f"depend on later tokens. The last row of the scores, the softmax and the logits come out the same "
        f"(up to float rounding), so the argmax does too. What changes is the work: at the last step the "
        f"full pass pushed {L} positions through every block, the decode step one."
    )
    path += cost_split_text(comparison)
    if comparison.identical:
        return path
    i = comparison.first_divergence
    a = naive.steps[i]["text"] if i < len(naive.steps) else "(stopped)"
    b = cached.steps[i]["text"] if i < len(cached.steps) else "(stopped)"
    return (
        f"The runs differ from step {i}: without the cache {_q(a)}, with it {_q(b)}. The cache should never "
        f"change the result, so this is a bug (or two near-equal top tokens that rounding put in another "
        f"order).\n\n" + path
    )
