"""The checks of a trace's events (gpt2viz.trace.checks): one per stage of the config's blocks, each
field on its own and against the trace's sizes (gpt2viz.trace.field_checks)."""

from __future__ import annotations

import math
import re

from ..hooks import all_hook_names, layer_of, llama_hook_names
from ..i18n import _, ngettext
from ..model.config import LIMITS
from .document import MAX_GRID, MAX_MAGNITUDE, MAX_TOPK
from .events import LAYER_NORM_STATS, LOGIT_LENS, RMS_NORM_STATS, ROTARY_PAIRS
from .field_checks import (
    BIG_INT, ORDER, MAX_BLOCKS, MAX_HEADS, MAX_ID, MAX_POSITIONS, SIZES, STAGES, SUMS, Sizes, _bool, _dict, _equal, _fail,
    _fields, _get, _id, _ids, _increasing, _int, _ints, _length, _list, _most_likely_first, _null, _num, _numbers,
    _probabilities, _shape, _shown, _str, _within,
)
from .recorder import EMBED_PREVIEW_DIMS

# An entropy in bits may pass log2 of the keys it is spread over by its rounding to 6 digits.
ENTROPY_TOLERANCE = 1e-4
MAX_BINS = 64  # bins of a histogram
_BLOCK_STAGES = (
    r"hook_resid_pre|ln1\.hook_scale|ln1\.hook_normalized|attn\.hook_q|attn\.hook_k|attn\.hook_v|"
    r"attn\.hook_attn_scores|attn\.hook_pattern|attn\.hook_z|hook_attn_out|hook_resid_mid|ln2\.hook_scale|"
    r"ln2\.hook_normalized|mlp\.hook_pre|mlp\.hook_post|hook_mlp_out|hook_resid_post|"
    r"attn\.hook_rot_q|attn\.hook_rot_k|mlp\.hook_pre_linear"  # LLaMA's rotary positions and SwiGLU's up
)
# A stage gpt2viz records, of a model of at most MAX_BLOCKS blocks (which of them this trace's
# config has is a cross-field rule).
STAGE = re.compile(
    r"^(hook_embed|hook_pos_embed|blocks\.([0-9]|[1-5][0-9]|6[0-3])\.(" + _BLOCK_STAGES + r")|"
    r"ln_final\.hook_scale|ln_final\.hook_normalized|unembed\.hook_out|kv_cache|logit_lens)$"
)


# -- events --------------------------------------------------------------------------------------

# The fields of each kind of event besides `stage` and `layer` (required, optional), by the end
# of its stage name. Per-position lists hold one number per position; `preview` lists the first
# dims of each position's vector.
_NORMS = ("norms",)
_MAPS = (("reduced", "heads"), ("downsampled", "last_row"))
_KINDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "hook_embed": (("shape", "norms", "preview"), ()),
    "hook_pos_embed": (("shape", "norms", "sum_norms", "preview", "sum_preview"), ()),
    "hook_resid_pre": (("shape", "norms"), ()),
    "hook_resid_mid": (("shape", "norms"), ()),
    "hook_attn_out": (("shape", "norms"), ()),
    "hook_mlp_out": (("shape", "norms"), ()),
    "hook_resid_post": (("shape", "norms", "before_norms", "attn_update_norms", "mlp_update_norms"), ()),
    "hook_scale": (("shape", "scale"), ()),
    "hook_normalized": (("shape",) + LAYER_NORM_STATS, ("histogram",)),
    "hook_q": (("shape",), ()),
    "hook_k": (("shape",), ()),
    "hook_v": (("shape",), ()),
    "hook_z": (("shape",), ()),
    "hook_attn_scores": (("shape",) + _MAPS[0], _MAPS[1]),
    "hook_pattern": (("shape",) + _MAPS[0], _MAPS[1] + ("entropy",)),
    "hook_rot_q": (("shape",), ("rotation",)),
    "hook_rot_k": (("shape",), ("rotation",)),
    "hook_pre": (("shape",), ("histogram",)),
    "hook_pre_linear": (("shape",), ()),
    "hook_post": (("shape", "frac_active", "top_neurons"), ()),
    "hook_out": (("shape", "positions"), ("sampling",)),
    "kv_cache": (("length", "capacity", "bytes_per_position", "total_bytes", "allocated_bytes", "layers"), ()),
    LOGIT_LENS: (("shape", "final_id", "final_token", "layers"), ()),
}
_PER_POSITION = {
    "hook_embed": _NORMS,
    "hook_pos_embed": ("norms", "sum_norms"),
    "hook_resid_pre": _NORMS,
    "hook_resid_mid": _NORMS,
    "hook_attn_out": _NORMS,
    "hook_mlp_out": _NORMS,
    "hook_resid_post": ("norms", "before_norms", "attn_update_norms", "mlp_update_norms"),
    "hook_scale": ("scale",),
    "hook_normalized": LAYER_NORM_STATS,
}
# A LLaMA trace's norms are RMSNorms: their events carry RMS_NORM_STATS instead.
_RMS_KINDS = {**_KINDS, "hook_normalized": (("shape",) + RMS_NORM_STATS, ("histogram",))}
_RMS_PER_POSITION = {**_PER_POSITION, "hook_normalized": RMS_NORM_STATS}
_SIGNED = {"input_mean", "normalized_mean", "output_mean"}  # the other per-position numbers are >= 0
_PREVIEWS = {"hook_embed": ("preview",), "hook_pos_embed": ("preview", "sum_preview")}


def _expected_shape(stage: str, s: Sizes) -> tuple[list[int], str] | None:
    """The tensor shape the recorder writes for `stage` in a trace of these sizes, and its formula."""
    kind = stage.rsplit(".", 1)[-1]
    if stage == LOGIT_LENS:
        return [s.n_layer, s.vocab], "[n_layer, vocab_size]"
    if stage == "kv_cache":
        return None
    if kind == "hook_scale":
        return [1, s.T, 1], "[1, T, 1]"
    if kind in ("hook_k", "hook_v", "hook_rot_k") and s.n_kv_head:
        return [1, s.n_kv_head, s.T, s.head_dim], "[1, n_kv_head, T, head_dim]"
    if kind in ("hook_q", "hook_k", "hook_v", "hook_z", "hook_rot_q"):
        return [1, s.n_head, s.T, s.head_dim], "[1, n_head, T, head_dim]"
    if kind in ("hook_attn_scores", "hook_pattern"):
        return [1, s.n_head, s.T, s.L], "[1, n_head, T, L]"
    if kind in ("hook_pre", "hook_post", "hook_pre_linear"):
        return [1, s.T, s.d_mlp], "[1, T, d_mlp]"
    if stage == "unembed.hook_out":
        return [1, s.T, s.vocab], "[1, T, vocab_size]"
    return [1, s.T, s.n_embd], "[1, T, n_embd]"


def _check_events(events: object, s: Sizes) -> None:
    names = llama_hook_names(s.n_layer) if s.architecture == "llama" else all_hook_names(s.n_layer)
    expected = [name for name in names if name != "sample"] + [LOGIT_LENS]
    events = _list(events, "events", len(all_hook_names(MAX_BLOCKS)), non_empty=True)
    known = set(expected)
    seen: set[str] = set()
    for i, event in enumerate(events):
        field = f"events[{i}]"
        event = _dict(event, field)
        stage = _str(_get(event, "stage", f"{field}.stage"), f"{field}.stage")
        if not STAGE.match(stage):
            _fail(f"{field}.stage", _("{field} is {stage}, not a stage of this trace's model").format(
                field=f"{field}.stage", stage=_shown(stage)))
        _check_event(event, stage, f"{field} ({stage})", s)
        if stage not in known:
            _fail(f"{field}.stage", _("{field} is {stage}, not a stage of this trace's model").format(
                field=f"{field}.stage", stage=_shown(stage)), STAGES)
        if stage in seen:
            _fail(f"{field}.stage", _("{field}: stage {stage} appears twice").format(field=f"{field}.stage", stage=stage), STAGES)
        seen.add(stage)
    for stage in expected:
        if stage not in seen and stage != "kv_cache":  # no cache, no kv_cache event
            _fail("events", _("{field} has no {stage} event").format(field="events", stage=stage), STAGES)


def _check_event(event: dict, stage: str, field: str, s: Sizes) -> None:
    """One event, each of its fields on its own first; then against the trace's sizes."""
    kind = stage.rsplit(".", 1)[-1]
    llama = s.architecture == "llama"
    required, optional = (_RMS_KINDS if llama else _KINDS)[kind]
    _fields(event, field, ("stage", "layer") + required, optional)
    layer = layer_of(stage)
    if layer is None:
        _null(event["layer"], f"{field}.layer")
    else:
        _equal(_int(event["layer"], f"{field}.layer", 0, MAX_BLOCKS - 1), layer, f"{field}.layer", stage)
    expected = _expected_shape(stage, s)
    if expected is not None:
        shape, formula = expected
        _equal(_shape(event["shape"], f"{field}.shape", len(shape)), shape, f"{field}.shape", formula, SIZES)
    rule = f"T = {s.T}"
    for key in (_RMS_PER_POSITION if llama else _PER_POSITION).get(kind, ()):
        low = -MAX_MAGNITUDE if key in _SIGNED else 0.0
        _length(_numbers(event[key], f"{field}.{key}", MAX_POSITIONS, low), f"{field}.{key}", s.T, rule)
    for key in _PREVIEWS.get(kind, ()):
        rows = _list(event[key], f"{field}.{key}", MAX_POSITIONS)
        for t, row in enumerate(rows):
            _numbers(row, f"{field}.{key}[{t}]", EMBED_PREVIEW_DIMS)
        _length(rows, f"{field}.{key}", s.T, rule)
        dims = min(EMBED_PREVIEW_DIMS, s.n_embd)
        for t, row in enumerate(rows):
            _length(row, f"{field}.{key}[{t}]", dims, f"min(32, n_embd) = {dims}")
    if kind in ("hook_attn_scores", "hook_pattern"):
        _check_maps(event, field, s, pattern=kind == "hook_pattern")
    elif kind == "hook_normalized" and "histogram" in event:
        _check_layer_norm_histogram(event["histogram"], f"{field}.histogram", s)
    elif kind in ("hook_rot_q", "hook_rot_k") and "rotation" in event:
        _check_rotation(event["rotation"], f"{field}.rotation", s)
    elif kind == "hook_pre" and "histogram" in event:
        _check_pre_activation_histogram(event["histogram"], f"{field}.histogram", s)
    elif kind == "hook_post":
        _check_mlp(event, field, s)
    elif stage == "unembed.hook_out":
        positions = _list(event["positions"], f"{field}.positions", MAX_POSITIONS)
        for t, entry in enumerate(positions):
            _check_topk(entry, f"{field}.positions[{t}]", s, kind="logits")
        _length(positions, f"{field}.positions", s.T, rule)
        if "sampling" in event:
            _check_sampling(event["sampling"], f"{field}.sampling", s)
    elif stage == "kv_cache":
        _check_kv_cache(event, field, s, length=s.L, event=True)
    elif stage == LOGIT_LENS:
        _check_logit_lens(event, field, s)


def _check_rotation(rotation: object, field: str, s: Sizes) -> None:
    """Head 0's rotated pairs at the last position (events.rotary_pairs)."""
    rotation = _fields(rotation, field, ("position", "head", "pairs"))
    position = _int(rotation["position"], f"{field}.position", 0, MAX_POSITIONS - 1)
    _int(rotation["head"], f"{field}.head", 0, 0)  # head 0's pairs
    pairs = _list(rotation["pairs"], f"{field}.pairs", ROTARY_PAIRS + 1, non_empty=True)
    indices = []
    for i, pair in enumerate(pairs):
        where = f"{field}.pairs[{i}]"
        pair = _fields(pair, where, ("pair", "angle", "before", "after"))
        indices.append(_int(pair["pair"], f"{where}.pair"))
        _num(pair["angle"], f"{where}.angle", 0.0)
        for key in ("before", "after"):
            _length(_numbers(pair[key], f"{where}.{key}", 2), f"{where}.{key}", 2, "a pair")
    # Against the trace: the last position, pairs of this head size, each once in order.
    _equal(position, s.L - 1, f"{field}.position", f"L - 1 = {s.L - 1}")
    for i, index in enumerate(indices):
        _within(index, f"{field}.pairs[{i}].pair", 0, s.head_dim // 2 - 1)
    _increasing(indices, f"{field}.pairs[].pair")


def _check_sampling(value: object, field: str, s: Sizes) -> None:
    """What the sampling cuts keep of the next token's distribution: nucleus sizes (1 to the
    vocabulary, growing with p) and top-k masses (0 to 1, growing with k)."""
    reach = _fields(value, field, ("top_p", "top_k"))
    nuclei = _list(reach["top_p"], f"{field}.top_p", 8)
    sizes = []
    for i, entry in enumerate(nuclei):
        where = f"{field}.top_p[{i}]"
        entry = _fields(entry, where, ("p", "tokens"))
        _num(entry["p"], f"{where}.p", 1e-9, 1.0)
        sizes.append(_int(entry["tokens"], f"{where}.tokens", 1, BIG_INT))
        _within(sizes[-1], f"{where}.tokens", 1, s.vocab)
    masses = []
    for i, entry in enumerate(_list(reach["top_k"], f"{field}.top_k", 8)):
        where = f"{field}.top_k[{i}]"
        entry = _fields(entry, where, ("k", "mass"))
        _int(entry["k"], f"{where}.k", 1, BIG_INT)
        masses.append(_num(entry["mass"], f"{where}.mass", 0.0, 1.0 + 1e-4))
    for name, values in (("top_p", sizes), ("top_k", masses)):
        if any(b < a for a, b in zip(values, values[1:])):
            _fail(f"{field}.{name}", _("{field} must not decrease").format(field=f"{field}.{name}"), ORDER)


def _check_maps(event: dict, field: str, s: Sizes, pattern: bool) -> None:
    """Attention scores or pattern: [n_head][T][L], or, for a long prompt, each head averaged
    down to a grid plus its last query row in full."""
    heads_rule = f"n_head = {s.n_head}"
    low, high = (0.0, 1.0) if pattern else (-MAX_MAGNITUDE, MAX_MAGNITUDE)
    reduced = _bool(event["reduced"], f"{field}.reduced")
    heads = _list(event["heads"], f"{field}.heads", MAX_HEADS)
    for h, head in enumerate(heads):
        for i, row in enumerate(_list(head, f"{field}.heads[{h}]", MAX_POSITIONS)):
            _numbers(row, f"{field}.heads[{h}][{i}]", MAX_POSITIONS, low, high)
    if not reduced:
        for key in _MAPS[1]:
            if key in event:
                _fail(f"{field}.{key}", _("{field}: a trace has no such field").format(field=f"{field}.{key}"))
    else:
        grid = _ints(_get(event, "downsampled", f"{field}.downsampled"), f"{field}.downsampled", 2, 1, MAX_GRID)
        if len(grid) != 2:
            _fail(f"{field}.downsampled", ngettext(
                "{field} has {n} entry, expected {rule}", "{field} has {n} entries, expected {rule}", len(grid),
            ).format(field=f"{field}.downsampled", n=len(grid), rule="[rows, columns]"))
        last = _list(_get(event, "last_row", f"{field}.last_row"), f"{field}.last_row", MAX_HEADS)
        for h, row in enumerate(last):
            _numbers(row, f"{field}.last_row[{h}]", MAX_POSITIONS, low, high)
    if pattern and "entropy" in event:
        _check_attention_entropy(event["entropy"], f"{field}.entropy", s)
    # Against the sizes.
    _length(heads, f"{field}.heads", s.n_head, heads_rule)
    if not reduced:
        for h, head in enumerate(heads):
            _length(head, f"{field}.heads[{h}]", s.T, f"T = {s.T}")
            for i, row in enumerate(head):
                where = f"{field}.heads[{h}][{i}]"
                _length(row, where, s.L, f"L = {s.L}")
                if pattern:
                    _probabilities(row, where, s.tolerance, sums_to_one=True)
        return
    rows_n, cols_n = grid
    _within(rows_n, f"{field}.downsampled[0]", 1, min(s.T, MAX_GRID))
    _within(cols_n, f"{field}.downsampled[1]", 1, min(s.L, MAX_GRID))
    for h, head in enumerate(heads):
        _length(head, f"{field}.heads[{h}]", rows_n, f"downsampled[0] = {rows_n}")
        for i, row in enumerate(head):
            _length(row, f"{field}.heads[{h}][{i}]", cols_n, f"downsampled[1] = {cols_n}")
    _length(last, f"{field}.last_row", s.n_head, heads_rule)
    for h, row in enumerate(last):
        where = f"{field}.last_row[{h}]"
        _length(row, where, s.L, f"L = {s.L}")
        if pattern:
            _probabilities(row, where, s.tolerance, sums_to_one=True)


def _check_attention_entropy(entropy: object, field: str, s: Sizes) -> None:
    """Per head, the entropy in bits of the last query's weights over the L keys it sees."""
    entropy = _fields(entropy, field, ("position", "bits"))
    position = _int(entropy["position"], f"{field}.position", 0, MAX_POSITIONS - 1)
    bits = _numbers(entropy["bits"], f"{field}.bits", MAX_HEADS, 0.0)
    _equal(position, s.L - 1, f"{field}.position", "L - 1")
    _length(bits, f"{field}.bits", s.n_head, f"n_head = {s.n_head}")
    most = math.log2(s.L) + ENTROPY_TOLERANCE
    for h, value in enumerate(bits):
        if value is not None:
            _within(value, f"{field}.bits[{h}]", 0.0, most)


def _check_bins(bins: dict, field: str, keys: tuple[str, str, str] = ("below", "counts", "above")) -> tuple[int, list]:
    """`below`, `counts` and `above` of a histogram, each on its own; returns their total and the counts."""
    below, counts, above = keys
    low = _int(bins[below], f"{field}.{below}" if field else below)
    counts_ = _ints(bins[counts], f"{field}.{counts}", MAX_BINS, 0, BIG_INT, non_empty=True)
    high = _int(bins[above], f"{field}.{above}")
    return low + sum(counts_) + high, counts_


def _check_edges(edges: object, field: str) -> list:
    return _numbers(edges, field, MAX_BINS + 1, null=False, non_empty=True)


def _edges_fit(edges: list, field: str, bins: list, bins_field: str) -> None:
    """`edges` bound the bins: one more than `bins`, increasing."""
    _length(edges, field, len(bins) + 1, f"len({bins_field}) + 1 = {len(bins) + 1}")
    _increasing(edges, field)


def _check_layer_norm_histogram(histogram: object, field: str, s: Sizes) -> None:
    """The last position's n_embd values going into a LayerNorm, normalized and coming out, in bins."""
    keys = ("input", "normalized", "output")
    # output_edges: the output's own, where its reach is far from the normalized values' (events.py).
    h = _fields(histogram, field, ("position", "edges", "input_edges") + keys, ("output_edges",))
    position = _int(h["position"], f"{field}.position", 0, MAX_POSITIONS - 1)
    edges = _check_edges(h["edges"], f"{field}.edges")
    input_edges = _check_edges(h["input_edges"], f"{field}.input_edges")
    own = "output_edges" in h
    output_edges = _check_edges(h["output_edges"], f"{field}.output_edges") if own else edges
    fits = {"input": (input_edges, "input_edges"), "normalized": (edges, "edges"),
            "output": (output_edges, "output_edges" if own else "edges")}
    counted = {}
    for key in keys:
        bins = _fields(h[key], f"{field}.{key}", ("below", "counts", "above"))
        counted[key] = _check_bins(bins, f"{field}.{key}")
    _equal(position, s.L - 1, f"{field}.position", "past + T - 1")
    for key, (total, counts) in counted.items():
        bounds, name = fits[key]
        _edges_fit(bounds, f"{field}.{name}", counts, f"{key}.counts")
        _counted_at_most(total, f"{field}.{key}", s.n_embd, "n_embd")


def _check_pre_activation_histogram(histogram: object, field: str, s: Sizes) -> None:
    """The last position's d_mlp MLP pre-activations in bins, and how many are <= 0."""
    h = _fields(histogram, field, ("position", "edges", "below", "counts", "above", "cut"))
    position = _int(h["position"], f"{field}.position", 0, MAX_POSITIONS - 1)
    edges = _check_edges(h["edges"], f"{field}.edges")
    total, counts = _check_bins(h, field)
    cut = _int(h["cut"], f"{field}.cut")
    _equal(position, s.L - 1, f"{field}.position", "past + T - 1")
    _edges_fit(edges, f"{field}.edges", counts, "counts")
    _counted_at_most(total, field, s.d_mlp, "d_mlp")
    _counted_at_most(cut, f"{field}.cut", total, "below + sum(counts) + above")


def _counted_at_most(total: int, field: str, limit: int, what: str) -> None:
    if total > limit:
        _fail(field, _("{field} counts {n} values, more than {what} = {limit}").format(
            field=field, n=total, what=what, limit=limit), SUMS)


def _check_mlp(event: dict, field: str, s: Sizes) -> None:
    frac = _numbers(event["frac_active"], f"{field}.frac_active", MAX_POSITIONS, 0.0, 1.0)
    neurons = _list(event["top_neurons"], f"{field}.top_neurons", MAX_TOPK)
    for n, neuron in enumerate(neurons):
        where = f"{field}.top_neurons[{n}]"
        neuron = _fields(neuron, where, ("index", "value"), ("pre", "promotes"))  # older traces lack the last two
        index = _int(neuron["index"], f"{where}.index", 0, LIMITS["n_inner"] - 1)
        _num(neuron["value"], f"{where}.value", null=True)
        if "pre" in neuron:
            _num(neuron["pre"], f"{where}.pre", null=True)
        for p, token in enumerate(_list(neuron.get("promotes", []), f"{where}.promotes", MAX_TOPK)):
            at = f"{where}.promotes[{p}]"
            token = _fields(token, at, ("id", "text", "logit"), ("trained",))
            _id(token["id"], f"{at}.id", s)
            _str(token["text"], f"{at}.text")
            _num(token["logit"], f"{at}.logit", null=True)
            if "trained" in token:
                _bool(token["trained"], f"{at}.trained")
        _within(index, f"{where}.index", 0, s.d_mlp - 1)
    _length(frac, f"{field}.frac_active", s.T, f"T = {s.T}")


# What a list of top tokens holds: (required, optional) by kind. `probs`: a distribution's top
# (generation steps); `logits`: a position's top tokens; `lens`: a block's, with the final prediction.
_TOPK = {
    "probs": (("ids", "tokens", "probs"), ()),
    "logits": (("ids", "tokens", "logits", "probs", "entropy"), ()),
    "lens": (("ids", "tokens", "logits", "probs", "entropy", "layer", "final_id", "final_rank", "final_prob"), ()),
}


def _check_topk(entry: object, field: str, s: Sizes, kind: str) -> dict:
    """The top tokens of one distribution: ids, display texts and probabilities (and logits and
    entropy where the trace has them), most likely first."""
    required, optional = _TOPK[kind]
    entry = _fields(entry, field, required, optional)
    ids = _ids(entry["ids"], f"{field}.ids", s, MAX_TOPK, non_empty=kind != "probs")  # empty: not finite
    if len(set(ids)) != len(ids):
        _fail(f"{field}.ids", _("{field} lists a token twice").format(field=f"{field}.ids"))
    tokens = _list(entry["tokens"], f"{field}.tokens", MAX_TOPK)
    for j, text in enumerate(tokens):
        _str(text, f"{field}.tokens[{j}]")
    probs = _numbers(entry["probs"], f"{field}.probs", MAX_TOPK, 0.0, 1.0)
    logits = _numbers(entry["logits"], f"{field}.logits", MAX_TOPK) if "logits" in entry else None
    if "entropy" in entry:
        _num(entry["entropy"], f"{field}.entropy", 0.0, null=True)
    n, rule = len(ids), f"len(ids) = {len(ids)}"
    _length(tokens, f"{field}.tokens", n, rule)
    _length(probs, f"{field}.probs", n, rule)
    _probabilities(probs, f"{field}.probs", s.tolerance, sums_to_one=False)
    _most_likely_first(probs, f"{field}.probs")
    if logits is not None:
        _length(logits, f"{field}.logits", n, rule)
        _most_likely_first(logits, f"{field}.logits")
    return entry


def _check_logit_lens(event: dict, field: str, s: Sizes) -> None:
    final_id = _id(event["final_id"], f"{field}.final_id", s)
    _str(event["final_token"], f"{field}.final_token")
    layers = _list(event["layers"], f"{field}.layers", MAX_BLOCKS)
    for layer, entry in enumerate(layers):
        where = f"{field}.layers[{layer}]"
        entry = _check_topk(entry, where, s, kind="lens")
        _int(entry["layer"], f"{where}.layer", 0, MAX_BLOCKS - 1)
        _id(entry["final_id"], f"{where}.final_id", s)
        _int(entry["final_rank"], f"{where}.final_rank", 1, MAX_ID + 1)
        _num(entry["final_prob"], f"{where}.final_prob", 0.0, 1.0, null=True)
    _length(layers, f"{field}.layers", s.n_layer, f"n_layer = {s.n_layer}")
    for layer, entry in enumerate(layers):
        where = f"{field}.layers[{layer}]"
        _equal(entry["layer"], layer, f"{where}.layer")
        _equal(entry["final_id"], final_id, f"{where}.final_id", "final_id")
        _within(entry["final_rank"], f"{where}.final_rank", 1, s.vocab)


_KV_CACHE = ("length", "capacity", "bytes_per_position", "total_bytes", "allocated_bytes", "layers")


def _check_kv_cache(cache: object, field: str, s: Sizes, length: int | None, event: bool = False) -> None:
    """A KV cache summary; `length` is the positions it must hold (None: any up to n_ctx)."""
    if not event:
        cache = _fields(cache, field, _KV_CACHE)
    held = _int(cache["length"], f"{field}.length", 0, MAX_POSITIONS)
    for key in ("capacity", "bytes_per_position"):
        _int(cache[key], f"{field}.{key}", 1)
    for key in ("total_bytes", "allocated_bytes"):
        _int(cache[key], f"{field}.{key}")
    layers = _list(cache["layers"], f"{field}.layers", MAX_BLOCKS)
    for i, layer in enumerate(layers):
        where = f"{field}.layers[{i}]"
        layer = _fields(layer, where, ("layer", "k_shape", "v_shape", "k_bytes", "v_bytes"))
        _int(layer["layer"], f"{where}.layer", 0, MAX_BLOCKS - 1)
        for key in ("k_shape", "v_shape"):
            _shape(layer[key], f"{where}.{key}", 4)
        for key in ("k_bytes", "v_bytes"):
            _int(layer[key], f"{where}.{key}")
    _within(held, f"{field}.length", 0, s.n_ctx)
    if length is not None:
        _equal(held, length, f"{field}.length", f"L = {length}")
    _length(layers, f"{field}.layers", s.n_layer, f"n_layer = {s.n_layer}")
    shape = [1, s.kv_heads, held, s.head_dim]
    heads = "n_kv_head" if s.n_kv_head else "n_head"
    for i, layer in enumerate(layers):
        where = f"{field}.layers[{i}]"
        _equal(layer["layer"], i, f"{where}.layer")
        for key in ("k_shape", "v_shape"):
            _equal(layer[key], shape, f"{where}.{key}", f"[1, {heads}, length, head_dim]", SIZES)


