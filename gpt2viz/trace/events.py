"""Turning live tensors into plain numbers: one function per kind of stage.

Events hold lists, floats and ints only, rounded to `SIG_DIGITS` significant digits, so a trace
is small, stable under the last-bit noise of different kernels, and JSON as it is. Two things
keep that cheap while the forward pass runs:
- per-position statistics (norms, LayerNorm statistics, ...) are returned as small tensors, and
  the Recorder rounds all of them in one pass after the forward (`round_tensors`);
- the bulky parts (whole attention maps, every position's top tokens, the logit lens) come as
  `Later` values, worked out when first read.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F

from ..model.layers import causal_mask

SIG_DIGITS = 6
# Attention maps are kept whole up to this many positions; beyond it, each head keeps its last
# query row in full and the map averaged down to DOWNSAMPLED_SIZE x DOWNSAMPLED_SIZE cells. Whole
# maps are 2 kinds x n_layer x n_head x T^2 numbers. The two sizes are equal, so a map never has
# more cells than at the threshold and a trace grows smoothly with T: GPT-2 small, measured
# (JSON bytes): 64 positions 8.8 MB, 65 9.1 MB, 129 9.7 MB, 256 10.7 MB, 1,024 16.4 MB. (With
# whole maps up to 128 positions, 128 took 34.9 MB and 129 9.7 MB: a cliff.) A terminal shows
# at most ~100 columns of a map anyway.
FULL_ATTENTION_MAX = 64
DOWNSAMPLED_SIZE = FULL_ATTENTION_MAX
PROMOTED_TOKENS = 3  # tokens listed per neuron: the ones its value vector raises most
TOP_NEURONS = 10
# Positions worked on at once in float64: 64 rows of GPT-2's 50,257 logits are 26 MB, where all
# 1,024 positions of a long prompt at once would be 412 MB for every temporary.
ROWS_AT_ONCE = 64
# The one event that is not a hook point: the last position's prediction after every block.
LOGIT_LENS = "logit_lens"


class Later:
    """A part of an event that is worked out when it is first read, not during the forward pass.

    Rounding a prompt's attention maps into Python floats (24 maps of 12 x T x T numbers for
    GPT-2 small) costs more than the forward pass that made them, yet the TUI shows one map at a
    time. So the Recorder keeps the tensors and a `Later` turns them into plain data on demand;
    `Trace.event()` and `Trace.to_dict()` resolve them, so readers only ever see plain data.
    """

    __slots__ = ("compute",)

    def __init__(self, compute: Callable[[], object]) -> None:
        self.compute = compute


def is_deferred(event: dict) -> bool:
    """Whether `event` still holds parts to work out."""
    return any(isinstance(value, Later) for value in event.values())


def resolve(event: dict) -> dict:
    """`event` with its `Later` values worked out, in place (so each is computed once)."""
    for key, value in event.items():
        if isinstance(value, Later):
            event[key] = value.compute()
    return event


def float64(t: torch.Tensor) -> torch.Tensor:
    """`t` as float64 on the CPU, where every statistic of a trace is computed (moving first:
    MPS has no float64)."""
    return t.detach().cpu().to(torch.float64)


def rnd(x: float) -> float | None:
    """`x` to SIG_DIGITS significant digits; NaN and infinities become None (JSON has neither)."""
    if not math.isfinite(x):
        return None
    return float(f"{x:.{SIG_DIGITS}g}")


def rounded(value):
    """Plain data (dicts, lists, numbers, text) with every float rounded as `rnd` rounds it: for a
    part of a trace made outside the recorder (the cost lab's result)."""
    if type(value) is float:
        return rnd(value)
    if type(value) is dict:
        return {key: rounded(v) for key, v in value.items()}
    if type(value) is list:
        return [rounded(v) for v in value]
    return value


def round_sig(t: torch.Tensor) -> torch.Tensor:
    """`t` in float64, each element rounded to SIG_DIGITS significant digits (vectorised `rnd`)."""
    t = float64(t)
    normal = torch.isfinite(t) & (t != 0)
    magnitude = torch.floor(torch.log10(torch.where(normal, t.abs(), torch.ones((), dtype=t.dtype))))
    decimals = SIG_DIGITS - 1 - magnitude
    # Powers of ten up to 1e22 are exact doubles, so x * 10^d / 10^d lands on the nearest double
    # to the rounded decimal, the same one `float(f"{x:.6g}")` gives.
    exact = decimals.abs() <= 22
    scale = torch.pow(10.0, torch.where(exact, decimals.abs(), torch.zeros((), dtype=t.dtype)))
    rounded = torch.where(decimals >= 0, torch.round(t * scale) / scale, torch.round(t / scale) * scale)
    rounded = torch.where(normal & exact, rounded, t)
    beyond = normal & ~exact  # below 1e-17 or above 1e27: rare, rounded one by one
    if bool(beyond.any()):
        rounded[beyond] = torch.tensor([rnd(v) for v in t[beyond].tolist()], dtype=t.dtype)
    return rounded


# Below this many elements, rounding in Python is cheaper than a dozen tensor operations.
_SMALL = 32


def rnd_list(t: torch.Tensor) -> list:
    """A tensor as nested lists of rounded floats (None where it is not finite)."""
    if t.numel() <= _SMALL:
        return _rnd_nested(float64(t).tolist())
    return round_tensors([t])[0]


def round_tensors(tensors: list[torch.Tensor]) -> list:
    """Each tensor as nested lists of rounded floats, like `rnd_list`, but all in one pass.

    A hook point's statistics are a few numbers per position; rounding them one tensor at a time
    would cost a dozen small tensor operations each, for hundreds of hook points."""
    if not tensors:
        return []
    flat = round_sig(torch.cat([float64(t).reshape(-1) for t in tensors]))
    finite = bool(torch.isfinite(flat).all())
    parts = flat.split([t.numel() for t in tensors])
    lists = [part.view(t.shape).tolist() for part, t in zip(parts, tensors)]
    return lists if finite else [_none_for_non_finite(v) for v in lists]


def _rnd_nested(values):
    if isinstance(values, list):
        return [_rnd_nested(v) for v in values]
    return rnd(values)


def _none_for_non_finite(values):
    if isinstance(values, list):
        return [_none_for_non_finite(v) for v in values]
    return values if math.isfinite(values) else None


def norms(t: torch.Tensor) -> torch.Tensor:
    """Per-position L2 norm of a `[1, T, C]` tensor, `[T]`."""
    return t[0].float().norm(dim=-1)


# What a LayerNorm event holds per position, in this order: mean and std of the input, of the
# normalized input (before the learned gain and bias) and of the output.
LAYER_NORM_STATS = ("input_mean", "input_std", "normalized_mean", "normalized_std", "output_mean", "output_std")


def layer_norm_stats(x: torch.Tensor, out: torch.Tensor, eps: float) -> dict[str, torch.Tensor]:
    """Per position: mean and std of the input, of the normalized input, and of the output."""
    # A long prompt is taken ROWS_AT_ONCE positions at a time: its float64 temporaries stay small.
    parts = [
        _layer_norm_stats_rows(x[0, start : start + ROWS_AT_ONCE], out[0, start : start + ROWS_AT_ONCE], eps)
        for start in range(0, x.size(1), ROWS_AT_ONCE)
    ]
    stats = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)  # (6, T)
    return dict(zip(LAYER_NORM_STATS, stats))


def _layer_norm_stats_rows(x: torch.Tensor, out: torch.Tensor, eps: float) -> torch.Tensor:
    both = float64(torch.stack([x, out]))  # input and output together: (2, rows, C)
    mean = both.mean(dim=-1)
    centered = both - mean[..., None]
    std = centered.square().mean(dim=-1).sqrt()
    scale = (std[0].square() + eps).sqrt()  # the normalized input is centered[0] / scale
    # Its mean is 0 up to rounding, and its std std / sqrt(var + eps).
    return torch.stack([mean[0], std[0], centered[0].mean(dim=-1) / scale, std[0] / scale, mean[1], std[1]])


# An RMSNorm (LLaMA's) divides by the root mean square and does not subtract the mean: its numbers
# are the inputs' mean and root mean square, before and after (the mean is moved, not removed).
RMS_NORM_STATS = ("input_mean", "input_rms", "normalized_mean", "normalized_rms", "output_mean", "output_rms")


def rms_norm_stats(x: torch.Tensor, out: torch.Tensor, eps: float) -> dict[str, torch.Tensor]:
    """Per position: mean and root mean square of the input, of the normalized input, and of the output."""
    parts = []
    for start in range(0, x.size(1), ROWS_AT_ONCE):
        both = float64(torch.stack([x[0, start : start + ROWS_AT_ONCE], out[0, start : start + ROWS_AT_ONCE]]))
        mean, rms = both.mean(dim=-1), both.square().mean(dim=-1).sqrt()  # (2, rows) each
        scale = (rms[0].square() + eps).sqrt()  # the normalized input is x / scale
        parts.append(torch.stack([mean[0], rms[0], mean[0] / scale, rms[0] / scale, mean[1], rms[1]]))
    stats = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)  # (6, T)
    return dict(zip(RMS_NORM_STATS, stats))


# Histograms of one position's values (a LayerNorm's input, normalized input and output; the MLP's
# pre-activations): HISTOGRAM_BINS equal bins over [-R, R], what lies beyond counted apart. R is the
# smallest power of two that holds HISTOGRAM_SHARE of the values, so that a few huge dimensions
# (GPT-2's residual stream has some) do not squeeze the rest into one bin; 0 is always an edge.
HISTOGRAM_BINS = 16
HISTOGRAM_SHARE = 0.99
_HALF_WIDTH_RANGE = (2.0**-10, 2.0**40)


def histogram_half_width(*vectors: torch.Tensor) -> float:
    """R for `vectors` together: the smallest power of two holding HISTOGRAM_SHARE of their finite
    values within [-R, R] (1 when none is finite or all are 0)."""
    values = torch.cat([float64(v).reshape(-1) for v in vectors]).abs()
    values = values[torch.isfinite(values)]
    if values.numel() == 0:
        return 1.0
    reach = float(torch.quantile(values, HISTOGRAM_SHARE))
    if reach <= 0:
        return 1.0
    low, high = _HALF_WIDTH_RANGE
    return min(high, max(low, 2.0 ** math.ceil(math.log2(reach))))


def histogram_edges(half_width: float, bins: int = HISTOGRAM_BINS) -> torch.Tensor:
    """`bins` + 1 equal steps from -half_width to half_width (float64; `bins` even, so 0 is one)."""
    return torch.linspace(-half_width, half_width, bins + 1, dtype=torch.float64)


def histogram(values: torch.Tensor, edges: torch.Tensor) -> dict:
    """Counts of `values` in the bins between `edges`: `below` (x <= edges[0]), `counts[b]`
    (edges[b] < x <= edges[b + 1]) and `above` (x > edges[-1]). A NaN is in none of them."""
    x = float64(values).reshape(-1)
    x = x[~torch.isnan(x)]
    tally = torch.bincount(torch.bucketize(x, edges), minlength=edges.numel() + 1).tolist()
    return {"below": tally[0], "counts": tally[1:-1], "above": tally[-1]}


def layer_norm_histogram(x: torch.Tensor, normalized: torch.Tensor, out: torch.Tensor, eps: float, position: int) -> dict:
    """One position's `n_embd` values going into a LayerNorm (`x`), normalized (before γ and β)
    and coming out (`out`), counted in bins. The normalized and output values share `edges`; the
    input is counted between `input_edges`, the same edges mapped back through the normalization
    (mean + edge · sqrt(var + eps)), so its counts equal the normalized ones up to rounding at an
    edge: normalizing moves and rescales the values, it does not change their shape."""
    return _norm_histogram(x, normalized, out, position,
                           lambda x64: (x64.mean(), (x64.var(unbiased=False) + eps).sqrt()))


def rms_norm_histogram(x: torch.Tensor, normalized: torch.Tensor, out: torch.Tensor, eps: float, position: int) -> dict:
    """As `layer_norm_histogram`, for an RMSNorm: the input's edges are the shared edges times
    sqrt(mean(x^2) + eps), since the norm only rescales (it moves no value by a mean)."""
    return _norm_histogram(x, normalized, out, position, lambda x64: (0.0, (x64.square().mean() + eps).sqrt()))


# Where the values after the norm's weight reach this many times further than the normalized
# values, or this many times less far, they are counted on edges of their own (`output_edges`):
# SmolLM2's early weights of ~0.1 put 576 values in two bins of the normalized values' axis.
OWN_AXIS_RATIO = 4


def _norm_histogram(x: torch.Tensor, normalized: torch.Tensor, out: torch.Tensor, position: int, shift_and_scale) -> dict:
    """The three histograms of a norm; `shift_and_scale(x64)` says how the input's finite values were
    normalized (the normalized value is (x - shift) / scale). The output shares the normalized
    values' edges, unless its reach differs from theirs by OWN_AXIS_RATIO or more: then it has its
    own, `output_edges`."""
    norm_reach, out_reach = histogram_half_width(normalized), histogram_half_width(out)
    own = max(norm_reach, out_reach) >= OWN_AXIS_RATIO * min(norm_reach, out_reach)
    edges = histogram_edges(norm_reach if own else histogram_half_width(normalized, out))
    x64 = float64(x).reshape(-1)
    x64 = x64[torch.isfinite(x64)]  # (all of it, unless the run's numbers were not finite)
    shift, scale = shift_and_scale(x64) if x64.numel() else (0.0, 1.0)
    input_edges = shift + edges * scale
    output_edges = histogram_edges(out_reach) if own else edges
    counted = {
        "position": position,
        "edges": rnd_list(edges),
        "input_edges": rnd_list(input_edges),
        "input": histogram(x, input_edges),
        "normalized": histogram(normalized, edges),
        "output": histogram(out, output_edges),
    }
    if own:
        counted["output_edges"] = rnd_list(output_edges)
    return counted


# Rotary positions (LLaMA): the pairs of one head's query or key listed before and after their turn.
ROTARY_PAIRS = 4  # the fastest pairs shown; the slowest one is added


def rotary_pairs(before: torch.Tensor, after: torch.Tensor, position: int, theta: float) -> dict:
    """Head 0's vector at the last position, `before` and `after` rotation (`[hd]` each): for the
    first ROTARY_PAIRS pairs (numbers j and j + hd/2) and the last, the angle it turned by
    (position x theta^(-2j/hd), radians) and the pair's two numbers before and after."""
    hd = before.size(-1)
    half = hd // 2
    pairs = sorted(set(range(min(ROTARY_PAIRS, half))) | {half - 1})
    b, a = float64(before), float64(after)
    return {
        "position": position,
        "head": 0,
        "pairs": [
            {
                "pair": j,
                "angle": rnd(position * theta ** (-2 * j / hd)),
                "before": [rnd(float(b[j])), rnd(float(b[j + half]))],
                "after": [rnd(float(a[j])), rnd(float(a[j + half]))],
            }
            for j in pairs
        ],
    }


def pre_activation_histogram(pre: torch.Tensor, position: int) -> dict:
    """One position's MLP pre-activations (c_fc's output, what GELU is applied to) counted in bins,
    and `cut`: how many are <= 0, where GELU gives back a value between -0.17 and 0. The others
    (> 0) pass: GELU gives back more than half of each."""
    edges = histogram_edges(histogram_half_width(pre))
    x = float64(pre).reshape(-1)
    return {"position": position, "edges": rnd_list(edges), **histogram(x, edges), "cut": int((x <= 0).sum())}


def attention_entropy_bits(rows: torch.Tensor, position: int) -> dict:
    """Per head, the entropy in bits of one query's attention weights `rows` `[n_head, L]`:
    -sum p log2 p over the keys it sees (0 when all weight is on one key, log2 of the number of
    keys when it is spread evenly)."""
    p = float64(rows)
    terms = torch.where(p > 0, p * torch.log2(p.clamp_min(1e-300)), torch.zeros((), dtype=p.dtype))
    bits = (-terms.sum(dim=-1)).clamp_min(0.0)
    bits[~torch.isfinite(p).all(dim=-1)] = math.nan  # a row that is not finite has no entropy (null)
    return {"position": position, "bits": rnd_list(bits)}


def pool_bins(length: int, n_bins: int) -> list[tuple[int, int]]:
    """The [start, end) ranges that average `length` positions into `n_bins` cells, as torch's
    adaptive pooling cuts them (ranges overlap by one where `length` does not divide evenly)."""
    return [((b * length) // n_bins, -((-(b + 1) * length) // n_bins)) for b in range(n_bins)]


def _downsample(maps: torch.Tensor, allowed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Averages `[nh, T, L]` maps over the allowed cells of each block of a coarse grid.

    One head at a time in float64: a whole float64 copy of 12 heads at 1,024 positions would be
    100 MB for every map of the pass."""
    size = (min(DOWNSAMPLED_SIZE, maps.size(1)), min(DOWNSAMPLED_SIZE, maps.size(2)))
    count = F.adaptive_avg_pool2d(allowed.to(torch.float64)[None, None], size)[0, 0]
    blocked = ~allowed
    total = torch.empty(maps.size(0), *size, dtype=torch.float64)
    head = torch.empty(maps.shape[1:], dtype=torch.float64)  # one buffer, reused for every head
    for h in range(maps.size(0)):
        head.copy_(maps[h])
        head.masked_fill_(blocked, 0.0)  # scores hold -inf there, patterns 0
        total[h] = F.adaptive_avg_pool2d(head[None], size)[0]
    return total / count.clamp_min(1e-12), count > 0


def attention_maps(t: torch.Tensor, masked_as_none: bool) -> dict:
    """Per head `[T][L]` maps (scores or pattern) of batch item 0, whole or reduced if long.

    Whole maps keep a reference to `t` until read (the forward pass never writes to it again);
    long ones are reduced now, so only the small results wait."""
    maps = t[0].detach().cpu()  # (nh, T, L); the masks below are built on the CPU
    T, L = maps.shape[1], maps.shape[2]
    if T <= FULL_ATTENTION_MAX:
        return {"reduced": False, "heads": Later(lambda: _whole_maps(maps, masked_as_none))}
    allowed = causal_mask(T, L)
    last_rows = float64(maps[:, -1])
    pooled, any_allowed = _downsample(maps, allowed)

    def heads() -> list:
        data = rnd_list(torch.where(any_allowed, pooled, torch.zeros((), dtype=pooled.dtype)))
        return _mask_nested(data, any_allowed) if masked_as_none else data

    return {
        "reduced": True,
        "downsampled": list(pooled.shape[1:]),
        "heads": Later(heads),
        "last_row": Later(lambda: rnd_list(last_rows)),
    }


def _whole_maps(maps: torch.Tensor, masked_as_none: bool) -> list:
    T, L = maps.size(1), maps.size(2)
    rows = rnd_list(maps.masked_fill(~causal_mask(T, L), 0.0))
    # Query i sees keys 0 .. past + i; the rest of its row is masked: None in the scores (they are
    # -inf), 0 in the pattern. One shared object stands for every masked cell, not a float each.
    past = L - T
    masked = None if masked_as_none else 0.0
    return [[row[: past + i + 1] + [masked] * (T - 1 - i) for i, row in enumerate(head)] for head in rows]


def _mask_nested(data: list, allowed: torch.Tensor) -> list:
    ok = allowed.tolist()
    return [[[v if ok[i][j] else None for j, v in enumerate(row)] for i, row in enumerate(head)] for head in data]


def top_tokens(logits: torch.Tensor, k: int, display) -> dict:
    """The `k` most likely tokens of one position: ids, display texts, logits, probabilities."""
    return top_tokens_rows(logits.unsqueeze(0), k, display)[0]


TOP_P = (0.5, 0.9, 0.95)  # the nucleus sizes a trace records for the next token
TOP_K = (10, 50)  # the top-k cuts whose probability mass it records


def sampling_reach(logits: torch.Tensor) -> dict:
    """What the usual sampling cuts keep of one position's next-token distribution (temperature
    1): `top_p`, how many tokens the nucleus of each mass in TOP_P holds (generate's own rule,
    `outside_nucleus`, on the distribution sampling draws from), and `top_k`, the probability mass of the k most likely
    tokens for each k in TOP_K."""
    from ..generate import SamplingSettings, next_token_probs, outside_nucleus

    top = next_token_probs(logits, SamplingSettings(temperature=1.0)).sort(descending=True).values
    return {
        "top_p": [{"p": p, "tokens": int((~outside_nucleus(top, p)).sum())} for p in TOP_P],
        "top_k": [{"k": k, "mass": rnd(float(top[:k].sum()))} for k in TOP_K],
    }


def top_tokens_rows(logits: torch.Tensor, k: int, display, final_id: int | None = None) -> list[dict]:
    """`top_tokens` of every row of `[N, V]` logits. With `final_id` (the logit lens), each row also
    tells that token's rank (1 = most likely) and probability."""
    rows = []
    for chunk in logits.split(ROWS_AT_ONCE):
        rows.extend(_top_tokens_chunk(chunk, k, display, final_id))
    return rows


def _top_tokens_chunk(logits: torch.Tensor, k: int, display, final_id: int | None) -> list[dict]:
    ranks = None
    if final_id is not None:
        ranks = ((logits > logits[:, final_id : final_id + 1]).sum(-1) + 1).tolist()
    logits = float64(logits)
    log_total = torch.logsumexp(logits, dim=-1, keepdim=True)
    probs = torch.exp(logits - log_total)
    values, ids = torch.topk(logits, min(k, logits.size(-1)), dim=-1)
    top_probs = probs.gather(-1, ids)
    # Entropy -sum p log p, with log p = logit - log_total: no logarithm per token needed. Where p
    # is 0 (a logit of -inf) the term is 0, not 0 * -inf.
    weighted = (probs * logits).masked_fill_(probs == 0, 0.0)
    entropies = log_total[:, 0] - weighted.sum(-1)
    rows = []
    for n, (row_ids, row_values, row_probs, h) in enumerate(zip(ids.tolist(), values, top_probs, entropies.tolist())):
        row = {
            "ids": row_ids,
            "tokens": [display(i) for i in row_ids],
            "logits": rnd_list(row_values),
            "probs": rnd_list(row_probs),
            "entropy": rnd(h),
        }
        if ranks is not None:
            row.update(final_id=final_id, final_rank=ranks[n], final_prob=rnd(float(probs[n, final_id])))
        rows.append(row)
    return rows


def top_of_distribution(probs: torch.Tensor, k: int, display) -> dict:
    """The `k` most likely entries of a probability vector (zeros dropped)."""
    values, ids = torch.topk(float64(probs), min(k, probs.numel()))
    keep = values > 0
    ids_list = ids[keep].tolist()
    return {"ids": ids_list, "tokens": [display(i) for i in ids_list], "probs": rnd_list(values[keep])}


def mlp_activity(post: torch.Tensor, pre: torch.Tensor, writes, display, trained_on: frozenset[int] | None = None,
                 by_magnitude: bool = False) -> dict:
    """Fraction of GELU outputs above 0 per position (a tensor), and the most active neurons at the
    last position read as a key-value memory: `pre`, the key's match (the neuron's pre-GELU value:
    its row of c_fc's weight dotted with the input, plus bias), `value`, what GELU lets through,
    and `promotes`, the tokens its value vector (its row of c_proj's weight, scaled by `value`)
    raises most through the final norm and the unembedding (`writes`), each marked `"trained": false` when the model's training
    text never held it (`trained_on`, the ids it held, where known). `writes(indices)` gives those
    vectors' logits `[k, V]`, worked out only when the event is read (`Later`). `by_magnitude`: the
    neurons largest in size whatever their sign (SwiGLU's silu(gate) x up may be far below 0;
    GELU's output never is), each `value` keeping its sign."""
    h = post[0]  # (T, d_mlp)
    last = h[-1].float()
    _sizes, idx = torch.topk(last.abs() if by_magnitude else last, min(TOP_NEURONS, h.size(-1)))
    values = last[idx]
    keys = pre[0, -1, idx].float()
    indices = idx.tolist()

    def neurons() -> list[dict]:
        logits = writes(indices).float() * values[:, None]  # each value vector, as strongly as it fires
        top = torch.topk(logits, PROMOTED_TOKENS, dim=-1)
        return [
            {
                "index": i,
                "value": rnd(v),
                "pre": rnd(k),
                "promotes": [
                    {"id": t, "text": display(t), "logit": rnd(l)} | ({} if trained_on is None or t in trained_on else {"trained": False})
                    for t, l in zip(ids, scores)
                ],
            }
            for i, v, k, ids, scores in zip(indices, values.tolist(), keys.tolist(), top.indices.tolist(), top.values.tolist())
        ]

    return {"frac_active": (h > 0).sum(dim=-1, dtype=torch.int32) / h.size(-1), "top_neurons": Later(neurons)}


def kv_cache_summary(state) -> dict:
    """Per layer K and V shapes and bytes of a cache's used part, from its `CacheState`."""
    layers = [
        {"layer": i.layer, "k_shape": list(i.k_shape), "v_shape": list(i.v_shape), "k_bytes": i.k_bytes, "v_bytes": i.v_bytes}
        for i in state.layers
    ]
    return {
        "length": state.length,
        "capacity": state.capacity,
        "bytes_per_position": state.bytes_per_position,
        "total_bytes": state.used_bytes,
        "allocated_bytes": state.allocated_bytes,
        "layers": layers,
    }
