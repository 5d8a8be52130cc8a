"""What a trace must be for gpt2viz to show it: every field docs/trace.md describes, checked for its
type, its range and its size against the trace's own config, with the field's path in the error.

A replayed trace is untrusted input (a file anyone may have written), and the screens read it
without checking anything again: whatever passes `check_document` is a trace the recorder could
have written, up to the values of its numbers. So:
- sizes come from the config (n_layer, n_head, n_embd, vocab_size, n_ctx, each within
  `document.CONFIG_LIMITS`) and the prompt's positions (T computed, `past` cached, L = past + T <= n_ctx),
  and every list has the length they give: an attention map is [n_head][T][L], a per-position
  list has T entries, the logit lens one entry per block;
- every number is finite and at most `MAX_MAGNITUDE` in size; probabilities lie in [0, 1], a
  softmax row sums to 1 within the rounding of its number format; ids lie in [0, vocab_size),
  block indices in [0, n_layer); integers are ints, never booleans;
- a field may be missing only where the published schema (docs/trace.schema.json) does not
  require it: traces of an earlier gpt2viz lack some.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

from ..batch import MAX_BATCH
from ..errors import ConfigError, SettingError, TraceError
from ..generate import SamplingSettings
from ..hooks import all_hook_names, layer_of
from ..i18n import _, ngettext
from ..input_files import shown as _shown
from ..interventions import Ablation, AblationError
from ..model.config import LIMITS, GPT2Config
from .document import (
    CONFIG_LIMITS, MAX_GRID, MAX_INTERVENTIONS, MAX_MAGNITUDE, MAX_NOTICES, MAX_TOPK, SCHEMA, SCHEMA_V1,
)
from .events import LAYER_NORM_STATS, LOGIT_LENS
from .notices import is_notice
from .recorder import EMBED_PREVIEW_DIMS

FORMATS = ("float32", "bfloat16", "float16", "int8")
COMPUTE_FORMATS = ("float32", "bfloat16", "float16")
SOURCE_KINDS = ("bundled", "local", "hub")
STOP_REASONS = ("eos", "context", "max_new_tokens", "cancelled")
# How far a softmax row's sum may be from 1 after its numbers were rounded to 6 significant
# digits (at most 5e-6 of the sum) and computed in the run's number format (each value within
# half a unit in its last place: 2^-8 of it in bfloat16, 2^-11 in float16, 2^-24 in float32, so
# the sum within 3.9e-3, 4.9e-4 and 6e-8 of 1; the bundled model's worst rows: 2.9e-3, 3.4e-4, 1.8e-6).
SOFTMAX_TOLERANCE = {"float32": 1e-4, "float16": 2e-3, "bfloat16": 1e-2}
MAX_NEW_TOKENS = LIMITS["n_ctx"]  # what --generate accepts (a run stops at the context)
SHORT_TEXT = 4096  # names, paths, token texts, ablation specs: characters at most
BIG_INT = 2**53  # counts and byte sizes: exact in a double, far beyond any real trace
MIN_POSITIVE = 1e-6  # a measured time (ms) or rate (GB/s) is at least this

_NUMBER_TYPES = {float, int}
_NULLABLE_TYPES = {float, int, type(None)}


def _fail(field: str, message: str) -> NoReturn:
    raise TraceError(message, field)


# -- types and ranges ----------------------------------------------------------------------------


def _get(obj: dict, key: str, field: str) -> object:
    if key not in obj:
        _fail(field, _("{field} is missing").format(field=field))
    return obj[key]


def _dict(value: object, field: str) -> dict:
    if type(value) is not dict:
        _fail(field, _("{field} must be an object, got {value}").format(field=field, value=_shown(value)))
    return value


def _str(value: object, field: str, max_len: int | None = SHORT_TEXT) -> str:
    if type(value) is not str:
        _fail(field, _("{field} must be a string, got {value}").format(field=field, value=_shown(value)))
    if max_len is not None and len(value) > max_len:
        _fail(field, _("{field} is {n} characters long, at most {limit}").format(field=field, n=len(value), limit=max_len))
    return value


def _bool(value: object, field: str) -> bool:
    if type(value) is not bool:
        _fail(field, _("{field} must be true or false, got {value}").format(field=field, value=_shown(value)))
    return value


def _int(value: object, field: str, low: int = 0, high: int = BIG_INT, null: bool = False) -> int | None:
    if value is None and null:
        return None
    if type(value) is not int or not low <= value <= high:
        message = (
            _("{field} must be an integer from {low} to {high} or null, got {value}")
            if null
            else _("{field} must be an integer from {low} to {high}, got {value}")
        )
        _fail(field, message.format(field=field, low=low, high=high, value=_shown(value)))
    return value


def _num(
    value: object, field: str, low: float = -MAX_MAGNITUDE, high: float = MAX_MAGNITUDE, null: bool = False
) -> float | None:
    if value is None and null:
        return None
    if type(value) not in _NUMBER_TYPES or not low <= value <= high:
        message = (
            _("{field} must be a number from {low} to {high} or null, got {value}")
            if null
            else _("{field} must be a number from {low} to {high}, got {value}")
        )
        _fail(field, message.format(field=field, low=f"{low:g}", high=f"{high:g}", value=_shown(value)))
    return value


def _choice(value: object, field: str, choices: tuple) -> object:
    if type(value) is not str or value not in choices:
        _fail(
            field,
            _("{field} must be one of {choices}, got {value}").format(
                field=field, choices=", ".join(choices), value=_shown(value)
            ),
        )
    return value


def _equal(value: object, expected: object, field: str, rule: str = "") -> None:
    """`value` must be `expected`; `rule` says where that comes from, as a formula ('[1, T, n_embd]')."""
    if value != expected or type(value) is not type(expected):
        message = _("{field} must be {expected} ({rule}), got {value}") if rule else _("{field} must be {expected}, got {value}")
        _fail(field, message.format(field=field, expected=_shown(expected), rule=rule, value=_shown(value)))


def _list(
    value: object, field: str, *, length: int | None = None, rule: str = "", at_most: int | None = None,
    limit: int | None = None, non_empty: bool = False,
) -> list:
    """A list, of exactly `length` entries (`rule` says why, as a formula), or of at most `at_most`
    (the config's bound, `rule` again) or `limit` (a trace's, docs/trace.md) entries."""
    if type(value) is not list:
        _fail(field, _("{field} must be a list, got {value}").format(field=field, value=_shown(value)))
    n = len(value)
    if length is not None and n != length:
        _fail(field, ngettext("{field} has {n} entry, expected {rule}", "{field} has {n} entries, expected {rule}", n)
              .format(field=field, n=n, rule=rule))
    if at_most is not None and n > at_most:
        _fail(field, ngettext("{field} has {n} entry, at most {rule}", "{field} has {n} entries, at most {rule}", n)
              .format(field=field, n=n, rule=rule))
    if limit is not None and n > limit:
        _fail(field, ngettext(
            "{field} has {n} entry; a trace holds at most {limit} (docs/trace.md)",
            "{field} has {n} entries; a trace holds at most {limit} (docs/trace.md)", n,
        ).format(field=field, n=n, limit=limit))
    if non_empty and n == 0:
        _fail(field, _("{field} must not be empty").format(field=field))
    return value


def _numbers(
    value: object, field: str, length: int, rule: str, low: float = -MAX_MAGNITUDE, high: float = MAX_MAGNITUDE,
) -> list:
    """A list of `length` numbers (null where the run's value was not finite) in [low, high].
    The bulk of a trace is such lists: checked with builtins, one pass each, and only a list
    that fails is looked at number by number to name the culprit."""
    row = _list(value, field, length=length, rule=rule)
    kinds = set(map(type, row))
    if kinds <= _NUMBER_TYPES:
        finite = row
    elif kinds <= _NULLABLE_TYPES:
        finite = [v for v in row if v is not None]
    else:
        finite = None
    ok = finite is not None
    if ok and finite:
        total = sum(finite)  # NaN when a NaN hides from min and max (only a document built in Python has one)
        ok = low <= min(finite) and max(finite) <= high and total == total
    if not ok:
        for j, v in enumerate(row):
            _num(v, f"{field}[{j}]", low, high, null=True)
    return row


def _probabilities(value: object, field: str, length: int, rule: str, tolerance: float, sums_to_one: bool) -> list:
    """Probabilities in [0, 1]; a whole softmax row (`sums_to_one`) sums to 1 within `tolerance`,
    any other set of them to at most 1 + `tolerance`."""
    row = _numbers(value, field, length, rule, 0.0, 1.0)
    if None in row:
        return row  # a run whose values were not finite: no sum to speak of
    total = sum(row)
    if total > 1 + tolerance or (sums_to_one and total < 1 - tolerance):
        _fail(field, _("{field} sums to {total}; probabilities of one softmax sum to 1").format(
            field=field, total=f"{total:.6g}"))
    return row


def _dict_of(value: object, field: str, keys: tuple[str, ...]) -> dict:
    """An object that has every key of `keys`."""
    obj = _dict(value, field)
    for key in keys:
        _get(obj, key, f"{field}.{key}")
    return obj


# -- the sizes of this trace ---------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    """What the trace's config and token table say every list's length must be."""

    n_layer: int
    n_head: int
    n_embd: int
    d_mlp: int
    vocab: int
    n_ctx: int
    T: int  # positions the recorded pass computed
    past: int  # positions already in the KV cache
    tolerance: float  # how far a softmax row may sum from 1 in this run's number format

    @property
    def L(self) -> int:
        """Every position a query sees: the cached ones and the computed ones."""
        return self.past + self.T

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


def check_document(doc: object) -> None:
    """Refuses `doc` (a decoded JSON document) with a TraceError naming the field at fault unless
    it is a trace as docs/trace.md describes it."""
    if type(doc) is not dict:
        _fail("", _("not a gpt2viz trace (expected a JSON object)"))
    schema = doc.get("schema")
    if schema not in (SCHEMA, SCHEMA_V1):
        _fail("schema", _("unsupported trace schema {schema} (this gpt2viz reads {current} and {old})").format(
            schema=_shown(schema), current=SCHEMA, old=SCHEMA_V1))
    model = _dict(_get(doc, "model", "model"), "model")
    config = _check_model(model)
    _str(_get(doc, "prompt", "prompt"), "prompt", max_len=None)
    context = doc.get("context")
    context = [] if context is None else _list(context, "context", at_most=config.n_ctx - 1, rule=f"n_ctx - 1 = {config.n_ctx - 1}")
    tokens = _list(_get(doc, "tokens", "tokens"), "tokens", non_empty=True,
                   at_most=config.n_ctx - len(context), rule=f"n_ctx - len(context) = {config.n_ctx - len(context)}")
    for name, table, first in (("context", context, 0), ("tokens", tokens, len(context))):
        for i, token in enumerate(table):
            _check_token(token, f"{name}[{i}]", first + i, config.vocab_size)
    compute = model.get("compute_dtype") or ("float32" if model["dtype"] == "int8" else model["dtype"])
    sizes = Sizes(
        config.n_layer, config.n_head, config.n_embd, config.d_mlp, config.vocab_size, config.n_ctx,
        T=len(tokens), past=len(context), tolerance=SOFTMAX_TOLERANCE[compute],
    )
    _check_notices(doc.get("notices", []), old=schema == SCHEMA_V1)
    timings = _dict(doc.get("timings", {}), "timings")
    for key, value in timings.items():
        _num(value, f"timings.{_str(key, 'timings')}", 0.0)
    _check_interventions(doc.get("interventions") or [], config)
    _check_events(_get(doc, "events", "events"), sizes)
    if _get(doc, "generation", "generation") is not None:
        _check_generation(doc["generation"], sizes)
    if doc.get("quality") is not None:
        _check_quality(doc["quality"], sizes)
    if doc.get("batch") is not None:
        _check_batch(doc["batch"], sizes)
    if doc.get("cost_lab") is not None:
        _check_cost_lab(doc["cost_lab"], sizes)


def _check_model(model: dict) -> GPT2Config:
    _str(_get(model, "name", "model.name"), "model.name")
    source = _dict(_get(model, "source", "model.source"), "model.source")
    _choice(_get(source, "kind", "model.source.kind"), "model.source.kind", SOURCE_KINDS)
    _str(_get(source, "path", "model.source.path"), "model.source.path")
    config = _dict(_get(model, "config", "model.config"), "model.config")
    for key, limit in CONFIG_LIMITS.items():
        _int(_get(config, key, f"model.config.{key}"), f"model.config.{key}", 1, limit)
    if config.get("n_inner") is not None:
        _int(config["n_inner"], "model.config.n_inner", 1, 4 * CONFIG_LIMITS["n_embd"])
    if "eos_token_id" in config:
        _int(config["eos_token_id"], "model.config.eos_token_id", 0, 2**31 - 1)
    try:  # the same checks a config.json gets
        checked = GPT2Config.from_saved(config)
    except ConfigError as err:
        _fail("model.config", _("{field}: {problem}").format(field="model.config", problem=err.problem))
    _int(_get(model, "n_params", "model.n_params"), "model.n_params", 1)
    _choice(_get(model, "dtype", "model.dtype"), "model.dtype", FORMATS)
    if model.get("compute_dtype") is not None:
        _choice(model["compute_dtype"], "model.compute_dtype", COMPUTE_FORMATS)
    if model.get("weight_bytes") is not None:
        _int(model["weight_bytes"], "model.weight_bytes")
    if model.get("stored_dtype") is not None:
        _str(model["stored_dtype"], "model.stored_dtype")
    _str(_get(model, "device", "model.device"), "model.device")
    return checked


def _check_token(token: object, field: str, position: int, vocab: int) -> None:
    token = _dict_of(token, field, ("position", "id", "text", "bytes"))
    _equal(token["position"], position, f"{field}.position")
    _int(token["id"], f"{field}.id", 0, vocab - 1)
    _str(token["text"], f"{field}.text")
    _int(token["bytes"], f"{field}.bytes", 0, SHORT_TEXT)


def _check_notices(notices: object, old: bool) -> None:
    """Notices are codes with parameters, said in the reader's language when shown; a trace of the
    old format holds English sentences instead."""
    notices = _list(notices, "notices", limit=MAX_NOTICES)
    for i, item in enumerate(notices):
        field = f"notices[{i}]"
        if old:
            _str(item, field)
            continue
        if not is_notice(item):
            _fail(field, _("{field} is not a notice this gpt2viz knows (a 'code' and its 'params')").format(field=field))
        for name, value in item["params"].items():
            if type(value) is str:
                _str(value, f"{field}.params.{name}")
            elif type(value) is not bool:
                _num(value, f"{field}.params.{name}", -BIG_INT, BIG_INT)


def _check_interventions(specs: object, config: GPT2Config) -> None:
    """Ablation specs ("L3H5") naming parts the trace's model has."""
    specs = _list(specs, "interventions", limit=MAX_INTERVENTIONS)
    for i, spec in enumerate(specs):
        field = f"interventions[{i}]"
        try:
            Ablation.parse(_str(spec, field)).check(config.n_layer, config.n_head, config.d_mlp)
        except AblationError as err:
            _fail(field, _("{field}: {problem}").format(field=field, problem=err))


# -- events --------------------------------------------------------------------------------------

# Per-position lists of each kind of event, by the end of its stage name; `preview` lists hold
# the first dims of each position's vector instead of one number.
_NORMS = ("norms",)
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
_NON_NEGATIVE = {"norms", "sum_norms", "before_norms", "attn_update_norms", "mlp_update_norms", "scale",
                 "input_std", "normalized_std", "output_std"}
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
    if kind in ("hook_q", "hook_k", "hook_v", "hook_z"):
        return [1, s.n_head, s.T, s.head_dim], "[1, n_head, T, head_dim]"
    if kind in ("hook_attn_scores", "hook_pattern"):
        return [1, s.n_head, s.T, s.L], "[1, n_head, T, L]"
    if kind in ("hook_pre", "hook_post"):
        return [1, s.T, s.d_mlp], "[1, T, d_mlp]"
    if stage == "unembed.hook_out":
        return [1, s.T, s.vocab], "[1, T, vocab_size]"
    return [1, s.T, s.n_embd], "[1, T, n_embd]"


def _check_events(events: object, s: Sizes) -> None:
    expected = [name for name in all_hook_names(s.n_layer) if name != "sample"] + [LOGIT_LENS]
    events = _list(events, "events", at_most=len(expected), rule=str(len(expected)))
    known = set(expected)
    seen: set[str] = set()
    for i, event in enumerate(events):
        field = f"events[{i}]"
        event = _dict(event, field)
        stage = _str(_get(event, "stage", f"{field}.stage"), f"{field}.stage")
        if stage not in known:
            _fail(f"{field}.stage", _("{field} is {stage}, not a stage of this trace's model").format(
                field=f"{field}.stage", stage=_shown(stage)))
        if stage in seen:
            _fail(f"{field}.stage", _("{field}: stage {stage} appears twice").format(field=f"{field}.stage", stage=stage))
        seen.add(stage)
        _check_event(event, stage, f"{field} ({stage})", s)
    for stage in expected:
        if stage not in seen and stage != "kv_cache":  # no cache, no kv_cache event
            _fail("events", _("{field} has no {stage} event").format(field="events", stage=stage))


def _check_event(event: dict, stage: str, field: str, s: Sizes) -> None:
    layer = layer_of(stage)
    _equal(_get(event, "layer", f"{field}.layer"), layer, f"{field}.layer", stage)
    expected = _expected_shape(stage, s)
    if expected is not None:
        shape, formula = expected
        _equal(_get(event, "shape", f"{field}.shape"), shape, f"{field}.shape", formula)
    kind = stage.rsplit(".", 1)[-1]
    rule = f"T = {s.T}"
    for key in _PER_POSITION.get(kind, ()):
        low = 0.0 if key in _NON_NEGATIVE else -MAX_MAGNITUDE
        _numbers(_get(event, key, f"{field}.{key}"), f"{field}.{key}", s.T, rule, low)
    for key in _PREVIEWS.get(kind, ()):
        rows = _list(_get(event, key, f"{field}.{key}"), f"{field}.{key}", length=s.T, rule=rule)
        dims = min(EMBED_PREVIEW_DIMS, s.n_embd)
        for t, row in enumerate(rows):
            _numbers(row, f"{field}.{key}[{t}]", dims, f"min(32, n_embd) = {dims}")
    if kind in ("hook_attn_scores", "hook_pattern"):
        _check_maps(event, field, s, pattern=kind == "hook_pattern")
    elif kind == "hook_post":
        _check_mlp(event, field, s)
    elif stage == "unembed.hook_out":
        positions = _list(_get(event, "positions", f"{field}.positions"), f"{field}.positions", length=s.T, rule=rule)
        for t, entry in enumerate(positions):
            _check_topk(entry, f"{field}.positions[{t}]", s, logits=True)
    elif stage == "kv_cache":
        _check_kv_cache(event, field, s, length=s.L)
    elif stage == LOGIT_LENS:
        _check_logit_lens(event, field, s)


def _check_maps(event: dict, field: str, s: Sizes, pattern: bool) -> None:
    """Attention scores or pattern: [n_head][T][L], or, for a long prompt, each head averaged
    down to a grid plus its last query row in full."""
    heads_rule = f"n_head = {s.n_head}"
    heads = _list(_get(event, "heads", f"{field}.heads"), f"{field}.heads", length=s.n_head, rule=heads_rule)
    low, high = (0.0, 1.0) if pattern else (-MAX_MAGNITUDE, MAX_MAGNITUDE)
    if not _bool(_get(event, "reduced", f"{field}.reduced"), f"{field}.reduced"):
        for h, head in enumerate(heads):
            rows = _list(head, f"{field}.heads[{h}]", length=s.T, rule=f"T = {s.T}")
            for i, row in enumerate(rows):
                where = f"{field}.heads[{h}][{i}]"
                if pattern:
                    _probabilities(row, where, s.L, f"L = {s.L}", s.tolerance, sums_to_one=True)
                else:
                    _numbers(row, where, s.L, f"L = {s.L}")
        return
    grid = _list(_get(event, "downsampled", f"{field}.downsampled"), f"{field}.downsampled", length=2, rule="[rows, columns]")
    rows_n = _int(grid[0], f"{field}.downsampled[0]", 1, min(s.T, MAX_GRID))
    cols_n = _int(grid[1], f"{field}.downsampled[1]", 1, min(s.L, MAX_GRID))
    for h, head in enumerate(heads):
        rows = _list(head, f"{field}.heads[{h}]", length=rows_n, rule=f"downsampled[0] = {rows_n}")
        for i, row in enumerate(rows):
            _numbers(row, f"{field}.heads[{h}][{i}]", cols_n, f"downsampled[1] = {cols_n}", low, high)
    last = _list(_get(event, "last_row", f"{field}.last_row"), f"{field}.last_row", length=s.n_head, rule=heads_rule)
    for h, row in enumerate(last):
        where = f"{field}.last_row[{h}]"
        if pattern:
            _probabilities(row, where, s.L, f"L = {s.L}", s.tolerance, sums_to_one=True)
        else:
            _numbers(row, where, s.L, f"L = {s.L}")


def _check_mlp(event: dict, field: str, s: Sizes) -> None:
    _numbers(_get(event, "frac_active", f"{field}.frac_active"), f"{field}.frac_active", s.T, f"T = {s.T}", 0.0, 1.0)
    neurons = _list(_get(event, "top_neurons", f"{field}.top_neurons"), f"{field}.top_neurons", limit=MAX_TOPK)
    for n, neuron in enumerate(neurons):
        where = f"{field}.top_neurons[{n}]"
        neuron = _dict_of(neuron, where, ("index", "value"))
        _int(neuron["index"], f"{where}.index", 0, s.d_mlp - 1)
        _num(neuron["value"], f"{where}.value", null=True)
        _num(neuron.get("pre"), f"{where}.pre", null=True)  # missing in traces written before it was recorded
        promotes = _list(neuron.get("promotes") or [], f"{where}.promotes", limit=MAX_TOPK)
        for p, token in enumerate(promotes):
            at = f"{where}.promotes[{p}]"
            token = _dict_of(token, at, ("id", "text", "logit"))
            _int(token["id"], f"{at}.id", 0, s.vocab - 1)
            _str(token["text"], f"{at}.text")
            _num(token["logit"], f"{at}.logit", null=True)


def _check_topk(entry: object, field: str, s: Sizes, logits: bool = False, non_empty: bool = True) -> None:
    """The top tokens of one distribution: ids, display texts and probabilities (and logits and
    entropy where the trace has them), most likely first."""
    entry = _dict_of(entry, field, ("ids", "tokens", "probs") + (("logits",) if logits else ()))
    ids = _list(entry["ids"], f"{field}.ids", limit=min(MAX_TOPK, s.vocab), non_empty=non_empty)
    n, rule = len(ids), f"len(ids) = {len(ids)}"
    for j, token_id in enumerate(ids):
        _int(token_id, f"{field}.ids[{j}]", 0, s.vocab - 1)
    if len(set(ids)) != n:
        _fail(f"{field}.ids", _("{field} lists a token twice").format(field=f"{field}.ids"))
    tokens = _list(entry["tokens"], f"{field}.tokens", length=n, rule=rule)
    for j, text in enumerate(tokens):
        _str(text, f"{field}.tokens[{j}]")
    probs = _probabilities(entry["probs"], f"{field}.probs", n, rule, s.tolerance, sums_to_one=False)
    _most_likely_first(probs, f"{field}.probs")
    if "logits" in entry:
        _most_likely_first(_numbers(entry["logits"], f"{field}.logits", n, rule), f"{field}.logits")
    if "entropy" in entry:
        _num(entry["entropy"], f"{field}.entropy", 0.0, null=True)


def _most_likely_first(values: list, field: str) -> None:
    known = [v for v in values if v is not None]
    if any(a < b for a, b in zip(known, known[1:])):
        _fail(field, _("{field} is not in order, most likely first").format(field=field))


def _check_logit_lens(event: dict, field: str, s: Sizes) -> None:
    final_id = _int(_get(event, "final_id", f"{field}.final_id"), f"{field}.final_id", 0, s.vocab - 1)
    _str(_get(event, "final_token", f"{field}.final_token"), f"{field}.final_token")
    layers = _list(_get(event, "layers", f"{field}.layers"), f"{field}.layers", length=s.n_layer, rule=f"n_layer = {s.n_layer}")
    for layer, entry in enumerate(layers):
        where = f"{field}.layers[{layer}]"
        _check_topk(entry, where, s, logits=True)
        entry = _dict_of(entry, where, ("layer", "final_id", "final_rank", "final_prob"))
        _equal(entry["layer"], layer, f"{where}.layer")
        _equal(entry["final_id"], final_id, f"{where}.final_id", "final_id")
        _int(entry["final_rank"], f"{where}.final_rank", 1, s.vocab)
        _num(entry["final_prob"], f"{where}.final_prob", 0.0, 1.0, null=True)


def _check_kv_cache(cache: object, field: str, s: Sizes, length: int | None) -> None:
    """A KV cache summary; `length` is the positions it must hold (None: any up to n_ctx)."""
    cache = _dict(cache, field)
    held = _int(_get(cache, "length", f"{field}.length"), f"{field}.length", 0, s.n_ctx)
    if length is not None:
        _equal(held, length, f"{field}.length", f"L = {length}")
    for key in ("capacity", "bytes_per_position"):
        _int(_get(cache, key, f"{field}.{key}"), f"{field}.{key}", 1)
    for key in ("total_bytes", "allocated_bytes"):
        _int(_get(cache, key, f"{field}.{key}"), f"{field}.{key}")
    layers = _list(_get(cache, "layers", f"{field}.layers"), f"{field}.layers", length=s.n_layer, rule=f"n_layer = {s.n_layer}")
    shape = [1, s.n_head, held, s.head_dim]
    for i, layer in enumerate(layers):
        where = f"{field}.layers[{i}]"
        layer = _dict_of(layer, where, ("layer", "k_shape", "v_shape", "k_bytes", "v_bytes"))
        _equal(layer["layer"], i, f"{where}.layer")
        for key in ("k_shape", "v_shape"):
            _equal(layer[key], shape, f"{where}.{key}", "[1, n_head, length, head_dim]")
        for key in ("k_bytes", "v_bytes"):
            _int(layer[key], f"{where}.{key}")


# -- generation, batch, quality, cost lab -------------------------------------------------------


def _check_settings(settings: object, field: str, s: Sizes) -> None:
    """Sampling settings gpt2viz.generate.SamplingSettings takes (the generation view makes one)."""
    settings = _dict_of(settings, field, ("temperature", "top_k", "top_p", "seed", "greedy"))
    try:
        sampling = SamplingSettings(settings["temperature"], settings["top_k"], settings["top_p"], settings["seed"])
    except SettingError as err:
        _fail(f"{field}.{err.setting}", err.naming(f"{field}.{err.setting}"))
    _int(settings["top_k"], f"{field}.top_k", 1, s.vocab, null=True)
    _equal(_bool(settings["greedy"], f"{field}.greedy"), sampling.greedy, f"{field}.greedy", "temperature == 0")


def _check_timing(record: dict, field: str, keys: tuple[str, ...], required: bool = True) -> None:
    for key in keys:
        if required or key in record:
            _num(_get(record, key, f"{field}.{key}"), f"{field}.{key}", 0.0, null=True)


def _check_generation(gen: object, s: Sizes) -> None:
    field = "generation"
    gen = _dict_of(gen, field, ("cache", "settings", "ids", "text", "stop_reason", "steps"))
    _bool(gen["cache"], f"{field}.cache")
    _check_settings(gen["settings"], f"{field}.settings", s)
    if "max_new_tokens" in gen:
        _int(gen["max_new_tokens"], f"{field}.max_new_tokens", 0, MAX_NEW_TOKENS)  # what was asked: may pass the context
    topk = _int(gen.get("topk"), f"{field}.topk", 1, MAX_TOPK, null=True)  # missing in older traces
    _choice(gen["stop_reason"], f"{field}.stop_reason", STOP_REASONS)
    if "cancelled" in gen:
        _bool(gen["cancelled"], f"{field}.cancelled")
    _str(gen["text"], f"{field}.text", max_len=None)
    _check_timing(gen, field, ("ttft_ms", "mean_decode_ms", "tokens_per_s"))
    if gen.get("stream_gb_s") is not None:
        _num(gen["stream_gb_s"], f"{field}.stream_gb_s", 0.0)
    steps = _list(gen["steps"], f"{field}.steps", at_most=s.n_ctx, rule=f"n_ctx = {s.n_ctx}",
                  non_empty=gen["stop_reason"] == "eos")  # the end-of-text token is the last step
    ids = _list(gen["ids"], f"{field}.ids", length=len(steps), rule=f"len(steps) = {len(steps)}")
    candidates = topk or MAX_TOPK
    for n, step in enumerate(steps):
        where = f"{field}.steps[{n}]"
        step = _dict_of(step, where, ("step", "id", "text", "ms", "used_cache", "raw", "candidates", "chosen_prob", "kv_cache"))
        _int(step["step"], f"{where}.step", 0, s.n_ctx)
        _int(step["id"], f"{where}.id", 0, s.vocab - 1)
        _equal(ids[n], step["id"], f"{field}.ids[{n}]", f"{where}.id")
        _str(step["text"], f"{where}.text")
        _num(step["ms"], f"{where}.ms", 0.0, null=True)
        _bool(step["used_cache"], f"{where}.used_cache")
        for key in ("raw", "candidates"):  # empty when the distribution was not finite
            _check_topk(step[key], f"{where}.{key}", s, non_empty=False)
            _list(step[key]["ids"], f"{where}.{key}.ids", at_most=candidates, rule=f"topk = {candidates}")
        _num(step["chosen_prob"], f"{where}.chosen_prob", 0.0, 1.0, null=True)
        if "context_length" in step:
            _int(step["context_length"], f"{where}.context_length", 1, s.n_ctx)
        if step["kv_cache"] is not None:
            _check_kv_cache(step["kv_cache"], f"{where}.kv_cache", s, length=None)


def _check_quality(quality: object, s: Sizes) -> None:
    field = "quality"
    quality = _dict_of(quality, field, ("positions", "max_abs_dlogit", "top1_agreement", "mean_kl"))
    if "reference" in quality:
        _choice(quality["reference"], f"{field}.reference", ("float32",))
    _check_agreement(quality, field, s)


def _check_agreement(quality: dict, field: str, s: Sizes) -> None:
    _int(quality["positions"], f"{field}.positions", 0, s.n_ctx)
    _num(quality["max_abs_dlogit"], f"{field}.max_abs_dlogit", 0.0, null=True)
    _num(quality["top1_agreement"], f"{field}.top1_agreement", 0.0, 1.0)
    _num(quality["mean_kl"], f"{field}.mean_kl", null=True)


def _check_batch(batch: object, s: Sizes) -> None:
    field = "batch"
    batch = _dict_of(batch, field, ("size", "rows", "step_ms"))
    size = _int(batch["size"], f"{field}.size", 1, MAX_BATCH)
    if "settings" in batch:
        _check_settings(batch["settings"], f"{field}.settings", s)
    if "max_new_tokens" in batch:
        _int(batch["max_new_tokens"], f"{field}.max_new_tokens", 0, MAX_NEW_TOKENS)
    rows = _list(batch["rows"], f"{field}.rows", length=size, rule=f"size = {size}")
    for r, row in enumerate(rows):
        where = f"{field}.rows[{r}]"
        row = _dict_of(row, where, ("ids", "text"))
        if "row" in row:
            _equal(row["row"], r, f"{where}.row")
        if "seed" in row:
            _int(row["seed"], f"{where}.seed", 0, 2**64 - 1, null=True)
        for key in ("ids", "prompt_ids"):
            if key in row:
                ids = _list(row[key], f"{where}.{key}", at_most=s.n_ctx, rule=f"n_ctx = {s.n_ctx}")
                for j, token_id in enumerate(ids):
                    _int(token_id, f"{where}.{key}[{j}]", 0, s.vocab - 1)
        _str(row["text"], f"{where}.text", max_len=None)
        if "prompt" in row:
            _str(row["prompt"], f"{where}.prompt", max_len=None)
        if "stop_reason" in row:
            _choice(row["stop_reason"], f"{where}.stop_reason", STOP_REASONS)
    step_ms = _list(batch["step_ms"], f"{field}.step_ms", at_most=s.n_ctx, rule=f"n_ctx = {s.n_ctx}")
    _numbers(step_ms, f"{field}.step_ms", len(step_ms), "", 0.0)
    _check_timing(batch, field, ("ttft_ms", "mean_decode_ms", "tokens_per_s"), required=False)


def _check_cost_lab(lab: object, s: Sizes) -> None:
    """The cost lab's result (gpt2viz.cost_lab.LabResult.to_dict), as the lab screen draws it."""
    field = "cost_lab"
    lab = _dict_of(lab, field, ("model", "precision", "n_params", "n_ctx", "vocab_size", "machine", "costs"))
    _str(lab["model"], f"{field}.model")
    _choice(lab["precision"], f"{field}.precision", FORMATS)
    _int(lab["n_params"], f"{field}.n_params")
    _equal(lab["n_ctx"], s.n_ctx, f"{field}.n_ctx", "model.config.n_ctx")
    _equal(lab["vocab_size"], s.vocab, f"{field}.vocab_size", "model.config.vocab_size")
    machine = _dict_of(lab["machine"], f"{field}.machine", ("stream_gb_s", "compute_gflop_s", "threads"))
    for key in ("stream_gb_s", "compute_gflop_s"):
        _positive(machine[key], f"{field}.machine.{key}")
    _int(machine["threads"], f"{field}.machine.threads", 1, 2**20)
    costs_keys = ("weight_bytes", "kv_bytes_per_position", "flops_per_row", "flops_per_cached_position")
    costs = _dict_of(lab["costs"], f"{field}.costs", costs_keys)
    for key in costs_keys:
        _int(costs[key], f"{field}.costs.{key}")
    if lab.get("context") is not None:
        _check_context_sweep(lab["context"], f"{field}.context", s)
    if lab.get("batch") is not None:
        where = f"{field}.batch"
        sweep = _dict_of(lab["batch"], where, ("context", "rows", "skipped", "complete"))
        _int(sweep["context"], f"{where}.context", 0, s.n_ctx)
        _bool(sweep["complete"], f"{where}.complete")
        rows = _list(sweep["rows"], f"{where}.rows", limit=MAX_BATCH)
        sizes = []
        for r, row in enumerate(rows):
            at = f"{where}.rows[{r}]"
            row = _dict_of(row, at, ("batch", "step_ms", "flops", "bytes_read"))
            sizes.append(_int(row["batch"], f"{at}.batch", 1, 2**20))
            _positive(row["step_ms"], f"{at}.step_ms")
            _int(row["flops"], f"{at}.flops")
            _int(row["bytes_read"], f"{at}.bytes_read", 1)
        if sizes and (sizes[0] != 1 or any(a >= b for a, b in zip(sizes, sizes[1:]))):
            _fail(f"{where}.rows", _("{field}: batch sizes must rise from 1").format(field=f"{where}.rows"))
        skipped = _list(sweep["skipped"], f"{where}.skipped", limit=MAX_BATCH)
        for k, size in enumerate(skipped):
            _int(size, f"{where}.skipped[{k}]", 1, 2**20)
    if lab.get("precision_formats") is not None:
        where = f"{field}.precision_formats"
        sweep = _dict_of(lab["precision_formats"], where, ("context", "rows", "complete"))
        _int(sweep["context"], f"{where}.context", 0, s.n_ctx)
        _bool(sweep["complete"], f"{where}.complete")
        rows = _list(sweep["rows"], f"{where}.rows", at_most=len(FORMATS), rule=f"{len(FORMATS)}")
        names = []
        for r, row in enumerate(rows):
            at = f"{where}.rows[{r}]"
            row = _dict_of(row, at, ("format", "step_ms", "bytes_read", "weight_bytes", "quality"))
            names.append(_choice(row["format"], f"{at}.format", FORMATS))
            _positive(row["step_ms"], f"{at}.step_ms")
            _int(row["bytes_read"], f"{at}.bytes_read", 1)
            _int(row["weight_bytes"], f"{at}.weight_bytes")
            quality = _dict_of(row["quality"], f"{at}.quality", ("positions", "max_abs_dlogit", "top1_agreement", "mean_kl"))
            _check_agreement(quality, f"{at}.quality", s)
        if len(set(names)) != len(names):
            _fail(f"{where}.rows", _("{field}: each number format appears once").format(field=f"{where}.rows"))


def _positive(value: object, field: str) -> float:
    """A time or a rate: more than 0, and not so near it that dividing by it overflows."""
    return _num(value, field, MIN_POSITIVE)


def _check_context_sweep(sweep: object, field: str, s: Sizes) -> None:
    sweep = _dict_of(sweep, field, ("positions", "naive_ms", "cached_ms", "start", "end", "complete"))
    start = _int(sweep["start"], f"{field}.start", 0, s.n_ctx)
    end = _int(sweep["end"], f"{field}.end", start, s.n_ctx)
    _bool(sweep["complete"], f"{field}.complete")
    positions = _list(sweep["positions"], f"{field}.positions", at_most=end - start, rule=f"end - start = {end - start}")
    for k, p in enumerate(positions):
        _int(p, f"{field}.positions[{k}]", start, end - 1)
    if any(a >= b for a, b in zip(positions, positions[1:])):
        _fail(f"{field}.positions", _("{field} must increase").format(field=f"{field}.positions"))
    n = len(positions)
    for key in ("naive_ms", "cached_ms"):
        times = _numbers(sweep[key], f"{field}.{key}", n, f"len(positions) = {n}", 0.0)
        for k, t in enumerate(times):
            _positive(t, f"{field}.{key}[{k}]")
