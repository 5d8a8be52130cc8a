"""Turning live tensors into plain numbers: one function per kind of stage.

Everything here returns lists, floats and ints only, rounded to `SIG_DIGITS` significant digits,
so a trace is small, stable under the last-bit noise of different kernels, and JSON as it is.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

SIG_DIGITS = 6
# Attention maps are kept whole up to this many positions; beyond it, each head keeps its last
# query row in full and the map averaged down to DOWNSAMPLED_SIZE x DOWNSAMPLED_SIZE cells.
FULL_ATTENTION_MAX = 256
DOWNSAMPLED_SIZE = 64
TOP_NEURONS = 10


def rnd(x: float) -> float | None:
    """`x` to SIG_DIGITS significant digits; NaN and infinities become None (JSON has neither)."""
    if not math.isfinite(x):
        return None
    return float(f"{x:.{SIG_DIGITS}g}")


def round_sig(t: torch.Tensor) -> torch.Tensor:
    """`t` in float64, each element rounded to SIG_DIGITS significant digits (vectorised `rnd`)."""
    t = t.detach().to("cpu", torch.float64)
    normal = torch.isfinite(t) & (t != 0)
    magnitude = torch.floor(torch.log10(torch.where(normal, t.abs(), torch.ones((), dtype=t.dtype))))
    decimals = SIG_DIGITS - 1 - magnitude
    # Powers of ten up to 1e22 are exact doubles, so x * 10^d / 10^d lands on the nearest double
    # to the rounded decimal, the same one `float(f"{x:.6g}")` gives.
    scale = torch.pow(10.0, decimals.abs())
    rounded = torch.where(decimals >= 0, torch.round(t * scale) / scale, torch.round(t / scale) * scale)
    return torch.where(normal & (decimals.abs() <= 22), rounded, t)


def rnd_list(t: torch.Tensor) -> list:
    """A tensor as nested lists of rounded floats (None where it is not finite)."""
    rounded = round_sig(t)
    if bool(torch.isfinite(rounded).all()):
        return rounded.tolist()
    return _none_for_non_finite(rounded.tolist())


def _none_for_non_finite(values):
    if isinstance(values, list):
        return [_none_for_non_finite(v) for v in values]
    return values if math.isfinite(values) else None


def shape_of(t: torch.Tensor) -> list[int]:
    return list(t.shape)


def norms(t: torch.Tensor) -> list[float]:
    """Per-position L2 norm of a `[1, T, C]` tensor."""
    return rnd_list(t[0].float().norm(dim=-1))


def layer_norm_stats(x: torch.Tensor, out: torch.Tensor, eps: float) -> dict:
    """Per position: mean and std of the input, of the normalized input, and of the output."""
    x = x[0].double()
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, unbiased=False, keepdim=True)
    normalized = (x - mean) / (var + eps).sqrt()
    out = out[0].double()
    return {
        "input_mean": rnd_list(mean[:, 0]),
        "input_std": rnd_list(var[:, 0].sqrt()),
        "normalized_mean": rnd_list(normalized.mean(dim=-1)),
        "normalized_std": rnd_list(normalized.std(dim=-1, unbiased=False)),
        "output_mean": rnd_list(out.mean(dim=-1)),
        "output_std": rnd_list(out.std(dim=-1, unbiased=False)),
    }


def _downsample(maps: torch.Tensor, allowed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Averages `[nh, T, L]` maps over the allowed cells of each block of a coarse grid."""
    size = (min(DOWNSAMPLED_SIZE, maps.size(1)), min(DOWNSAMPLED_SIZE, maps.size(2)))
    values = torch.where(allowed, maps, torch.zeros((), dtype=maps.dtype))
    total = F.adaptive_avg_pool2d(values.unsqueeze(0), size)[0]
    count = F.adaptive_avg_pool2d(allowed.to(maps.dtype)[None, None], size)[0, 0]
    return total / count.clamp_min(1e-12), count > 0


def attention_maps(t: torch.Tensor, masked_as_none: bool) -> dict:
    """Per head `[T][L]` maps (scores or pattern) of batch item 0, whole or reduced if long."""
    maps = t[0].double()  # (nh, T, L)
    T, L = maps.shape[1], maps.shape[2]
    past = L - T
    if T <= FULL_ATTENTION_MAX:
        if not masked_as_none:
            return {"reduced": False, "heads": rnd_list(maps)}
        # Query i sees keys 0 .. past + i; the rest of its row is masked.
        visible = torch.where(torch.ones(T, L, dtype=torch.bool).tril(diagonal=past), maps, torch.zeros((), dtype=maps.dtype))
        rows = rnd_list(visible)
        heads = [[row[: past + i + 1] + [None] * (T - 1 - i) for i, row in enumerate(head)] for head in rows]
        return {"reduced": False, "heads": heads}
    allowed = torch.ones(T, L, dtype=torch.bool).tril(diagonal=past)
    last_rows = rnd_list(maps[:, -1])
    pooled, any_allowed = _downsample(maps, allowed)
    data = rnd_list(torch.where(any_allowed, pooled, torch.zeros((), dtype=pooled.dtype)))
    if masked_as_none:
        data = _mask_nested(data, any_allowed)
    return {"reduced": True, "downsampled": list(pooled.shape[1:]), "heads": data, "last_row": last_rows}


def _mask_nested(data: list, allowed: torch.Tensor) -> list:
    ok = allowed.tolist()
    return [[[v if ok[i][j] else None for j, v in enumerate(row)] for i, row in enumerate(head)] for head in data]


def entropy(probs: torch.Tensor) -> float | None:
    """Entropy in nats of a probability vector."""
    p = probs.double()
    return rnd(float(-(p * torch.log(p.clamp_min(1e-300))).sum()))


def top_tokens(logits: torch.Tensor, k: int, display) -> dict:
    """The `k` most likely tokens of one position: ids, display texts, logits, probabilities."""
    logits = logits.double()
    probs = torch.softmax(logits, dim=-1)
    values, ids = torch.topk(logits, min(k, logits.numel()))
    ids_list = ids.tolist()
    return {
        "ids": ids_list,
        "tokens": [display(i) for i in ids_list],
        "logits": rnd_list(values),
        "probs": rnd_list(probs[ids]),
        "entropy": entropy(probs),
    }


def top_of_distribution(probs: torch.Tensor, k: int, display) -> dict:
    """The `k` most likely entries of a probability vector (zeros dropped)."""
    values, ids = torch.topk(probs.double(), min(k, probs.numel()))
    keep = values > 0
    ids_list = ids[keep].tolist()
    return {"ids": ids_list, "tokens": [display(i) for i in ids_list], "probs": rnd_list(values[keep])}


def rank_of(logits: torch.Tensor, token_id: int) -> int:
    """1-based rank of `token_id` among the logits (1 = most likely)."""
    return int((logits > logits[token_id]).sum()) + 1


def mlp_activity(post: torch.Tensor) -> dict:
    """Fraction of GELU outputs above 0 per position, and the most active neurons at the last."""
    h = post[0].float()  # (T, d_mlp)
    values, idx = torch.topk(h[-1], min(TOP_NEURONS, h.size(-1)))
    return {
        "frac_active": rnd_list((h > 0).float().mean(dim=-1)),
        "top_neurons": [{"index": int(i), "value": rnd(float(v))} for i, v in zip(idx, values)],
    }


def kv_cache_summary(cache) -> dict:
    """Per layer K and V shapes and bytes, read off the cache's used part."""
    layers = []
    for i in range(len(cache.keys)):
        info = cache.layer_info(i)
        layers.append(
            {"layer": i, "k_shape": list(info.k_shape), "v_shape": list(info.v_shape), "k_bytes": info.k_bytes, "v_bytes": info.v_bytes}
        )
    return {
        "length": cache.length,
        "capacity": cache.capacity,
        "bytes_per_position": cache.bytes_per_position,
        "total_bytes": cache.used_bytes,
        "allocated_bytes": cache.allocated_bytes,
        "layers": layers,
    }
