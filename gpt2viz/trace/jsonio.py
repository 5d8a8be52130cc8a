"""Writing a Trace as one JSON document, atomically, and reading one back with checks."""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable

from ..errors import ConfigError, Gpt2VizError, OutputError
from ..i18n import N_, _
from ..model.config import GPT2Config
from .document import SCHEMA, SCHEMA_V1, Trace
from .events import LAYER_NORM_STATS, LOGIT_LENS
from ..interventions import Ablation, AblationError
from .notices import is_notice


class TraceFileError(Gpt2VizError):
    """A trace file that cannot be read or is not a gpt2viz trace."""


def dumps(trace: Trace) -> str:
    return json.dumps(trace.to_dict(), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dump(trace: Trace, path: str | Path) -> None:
    """Writes `trace` to `path` ('-' for stdout). A file appears whole or not at all: see
    `write_atomic`."""
    text = dumps(trace)
    if str(path) == "-":
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return
    write_atomic(Path(path), text + "\n")


def write_atomic(path: Path, text: str) -> None:
    """Writes `text` to `path` through a temporary file and a rename; leaves no debris on error.

    A symbolic link is written through (its target is replaced, the link kept). A pipe or a
    device is written to directly: no temporary file can stand in for it."""
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    if path.is_dir():
        raise OutputError(N_("{path}: is a directory"), path)
    if path.exists() and not path.is_file():
        _write_stream(path, text)
        return
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as err:
        raise OutputError(N_("{path}: cannot write there ({error})"), path, error=err.strerror) from None
    try:
        os.fchmod(fd, _mode_for(path))  # mkstemp makes 0600; a trace is an ordinary file
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(err, OSError):
            raise OutputError(
                N_("{path}: write failed ({error}); nothing was written"), path, error=err.strerror or err
            ) from None
        raise


def _write_stream(path: Path, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as err:
        raise OutputError(N_("{path}: write failed ({error})"), path, error=err.strerror or err) from None


def _mode_for(path: Path) -> int:
    """The permissions the file would get from a plain open(): the old file's, or 0666 - umask."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


_REQUIRED = {"schema": str, "model": dict, "prompt": str, "tokens": list, "events": list}
_NOT_A = {
    str: N_("trace field {key!r} is missing or not a str"),
    dict: N_("trace field {key!r} is missing or not a dict"),
    list: N_("trace field {key!r} is missing or not a list"),
}


def validate(doc: object) -> Trace:
    """Checks a decoded JSON document is a trace this version reads, and returns it."""
    if not isinstance(doc, dict):
        raise TraceFileError(_("not a gpt2viz trace (expected a JSON object)"))
    schema = doc.get("schema")
    if schema not in (SCHEMA, SCHEMA_V1):
        raise TraceFileError(
            _("unsupported trace schema {schema!r} (this gpt2viz reads {current} and {old})").format(
                schema=schema, current=SCHEMA, old=SCHEMA_V1
            )
        )
    for key, kind in _REQUIRED.items():
        if not isinstance(doc.get(key), kind):
            raise TraceFileError(_(_NOT_A[kind]).format(key=key))
    if doc.get("generation") is not None and not isinstance(doc["generation"], dict):
        raise TraceFileError(_("trace field 'generation' must be an object or null"))
    config = doc["model"].get("config")
    if not isinstance(config, dict):
        raise TraceFileError(_("trace field 'model.config' is missing"))
    for key in ("n_layer", "n_head", "n_embd", "n_ctx", "vocab_size"):
        value = config.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise TraceFileError(_("trace field {field!r} must be a positive integer").format(field=f"model.config.{key}"))
    try:  # the same checks a config.json gets: a replay draws from these numbers
        GPT2Config.from_saved(config)
    except ConfigError as err:
        raise TraceFileError(_("trace field 'model.config': {problem}").format(problem=err.problem)) from None
    _check_notices(doc.get("notices", []), old=schema == SCHEMA_V1)
    context = doc.get("context") or []
    if not isinstance(context, list):
        raise TraceFileError(_("trace field 'context' must be a list"))
    for field_name, table in (("context", context), ("tokens", doc["tokens"])):
        for i, token in enumerate(table):
            if not (
                isinstance(token, dict)
                and all(_is_int(token.get(k)) for k in ("id", "position", "bytes"))
                and isinstance(token.get("text"), str)
            ):
                raise TraceFileError(
                    _("trace {field} entry {i} needs integers 'id', 'position', 'bytes' and a string 'text'").format(
                        field=field_name, i=i
                    )
                )
    positions = [t["position"] for t in context + doc["tokens"]]
    if positions != list(range(len(positions))):
        raise TraceFileError(_("trace tokens must hold positions 0, 1, 2, ... in order (after the 'context' ones)"))
    for i, event in enumerate(doc["events"]):
        _check_event(i, event, config)
    if doc.get("generation") is not None:
        _check_generation(doc["generation"])
    if doc.get("quality") is not None:
        _check_quality(doc["quality"])
    if doc.get("batch") is not None:
        _check_batch(doc["batch"])
    if doc.get("cost_lab") is not None:
        _check_cost_lab(doc["cost_lab"])
    _check_interventions(doc.get("interventions") or [], config)
    return Trace.from_dict(doc)


def _check_interventions(specs: object, config: dict) -> None:
    """Ablation specs ("L3H5") naming parts the trace's model has."""
    if not isinstance(specs, list) or not all(isinstance(spec, str) for spec in specs):
        raise TraceFileError(_("trace field 'interventions' must be a list of strings"))
    for spec in specs:
        try:
            Ablation.parse(spec).check(config["n_layer"], config["n_head"], GPT2Config.from_saved(config).d_mlp)
        except AblationError as err:
            raise TraceFileError(_("trace field 'interventions': {problem}").format(problem=err)) from None


def _check_notices(notices: object, old: bool) -> None:
    """Notices are codes with parameters, said in the reader's language when shown; a trace of the
    old format holds English sentences instead."""
    if not isinstance(notices, list):
        raise TraceFileError(_("trace field 'notices' must be a list"))
    for i, item in enumerate(notices):
        if old and not isinstance(item, str):
            raise TraceFileError(_("trace notice {i} must be a string in a {schema} trace").format(i=i, schema=SCHEMA_V1))
        if not old and not is_notice(item):
            raise TraceFileError(
                _("trace notice {i} is not one this gpt2viz knows (a 'code' and its 'params')").format(i=i)
            )


# What each kind of event must carry, by the end of its stage name, for the TUI to draw it.
_EVENT_FIELDS = {
    "hook_embed": {"norms": "numbers"},
    "hook_pos_embed": {"norms": "numbers", "sum_norms": "numbers"},
    "hook_resid_pre": {"norms": "numbers"},
    "hook_resid_mid": {"norms": "numbers"},
    "hook_attn_out": {"norms": "numbers"},
    "hook_mlp_out": {"norms": "numbers"},
    "hook_resid_post": {"norms": "numbers", "before_norms": "numbers", "attn_update_norms": "numbers", "mlp_update_norms": "numbers"},
    "hook_scale": {"scale": "numbers"},
    "hook_normalized": {key: "numbers" for key in LAYER_NORM_STATS},
    "hook_attn_scores": {"heads": "maps"},
    "hook_pattern": {"heads": "maps"},
    "hook_post": {"frac_active": "numbers", "top_neurons": "neurons"},
    "hook_out": {"positions": "topks"},
    "kv_cache": {"length": "int", "total_bytes": "int", "allocated_bytes": "int", "layers": "cache_layers"},
    LOGIT_LENS: {"final_id": "int", "final_token": "str", "layers": "topks"},
}


def _is_number(v: object) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _kind_ok(kind: str, value: object) -> bool:
    if kind == "numbers":
        return isinstance(value, list) and all(_is_number(v) for v in value)
    if kind == "int":
        return _is_int(value)
    if kind == "str":
        return isinstance(value, str)
    if kind == "maps":
        return isinstance(value, list) and all(
            isinstance(head, list) and all(_kind_ok("numbers", row) for row in head) for head in value
        )
    if kind == "neurons":
        return isinstance(value, list) and all(
            isinstance(n, dict)
            and _is_int(n.get("index"))
            and _is_number(n.get("value"))
            and _is_number(n.get("pre"))  # missing (None) in traces written before it was recorded
            and all(
                isinstance(t, dict) and _is_int(t.get("id")) and isinstance(t.get("text"), str) and _is_number(t.get("logit"))
                for t in n.get("promotes") or []
            )
            for n in value
        )
    if kind == "topks":
        return isinstance(value, list) and all(_topk_ok(entry) for entry in value)
    if kind == "cache_layers":
        return isinstance(value, list) and all(
            isinstance(layer, dict)
            and all(_is_int(layer.get(k)) for k in ("k_bytes", "v_bytes"))
            and all(isinstance(layer.get(k), list) and all(_is_int(d) for d in layer[k]) for k in ("k_shape", "v_shape"))
            for layer in value
        )
    raise AssertionError(kind)


def _topk_ok(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    ids, tokens, probs = entry.get("ids"), entry.get("tokens"), entry.get("probs")
    return (
        isinstance(ids, list)
        and all(_is_int(i) for i in ids)
        and isinstance(tokens, list)
        and all(isinstance(t, str) for t in tokens)
        and _kind_ok("numbers", probs)
        and len(ids) == len(tokens) == len(probs)
    )


def _check_event(i: int, event: object, config: dict) -> None:
    if not isinstance(event, dict) or not isinstance(event.get("stage"), str):
        raise TraceFileError(_("trace event {i} needs a string 'stage'").format(i=i))
    stage = event["stage"]
    layer = event.get("layer")
    if layer is not None and (not _is_int(layer) or not 0 <= layer < config["n_layer"]):
        raise TraceFileError(
            _("trace event {i} ({stage}) has a bad 'layer' {layer!r}").format(i=i, stage=stage, layer=layer)
        )
    shape = event.get("shape")
    if shape is not None and not (isinstance(shape, list) and all(_is_int(d) and d >= 0 for d in shape)):
        raise TraceFileError(_("trace event {i} ({stage}) has a bad 'shape'").format(i=i, stage=stage))
    for key, kind in _EVENT_FIELDS.get(stage.rsplit(".", 1)[-1], {}).items():
        if not _kind_ok(kind, event.get(key)):
            raise TraceFileError(
                _("trace event {i} ({stage}) has a missing or malformed {key!r}").format(i=i, stage=stage, key=key)
            )


def _check_generation(gen: dict) -> None:
    if not isinstance(gen.get("ids"), list) or not all(_is_int(i) for i in gen["ids"]):
        raise TraceFileError(_("trace field 'generation.ids' must be a list of integers"))
    stream = gen.get("stream_gb_s")
    if stream is not None and not (_is_number(stream) and stream > 0):
        raise TraceFileError(_("trace field 'generation.stream_gb_s' must be a positive number"))
    topk = gen.get("topk")
    if topk is not None and not (_is_int(topk) and topk >= 1):
        raise TraceFileError(_("trace field 'generation.topk' must be an integer >= 1"))
    steps = gen.get("steps")
    if not isinstance(steps, list):
        raise TraceFileError(_("trace field 'generation.steps' must be a list"))
    for n, step in enumerate(steps):
        if not (
            isinstance(step, dict)
            and _is_int(step.get("id"))
            and isinstance(step.get("text"), str)
            and _is_number(step.get("ms"))
            and _topk_ok(step.get("candidates"))
        ):
            raise TraceFileError(_("trace generation step {n} is malformed").format(n=n))


def _check_quality(quality: object) -> None:
    numbers = ("max_abs_dlogit", "top1_agreement", "mean_kl")
    if not (
        isinstance(quality, dict)
        and _is_int(quality.get("positions"))
        and all(isinstance(quality.get(k), (int, float)) and not isinstance(quality.get(k), bool) for k in numbers)
    ):
        raise TraceFileError(
            _("trace field 'quality' needs 'positions' and numbers 'max_abs_dlogit', 'top1_agreement', 'mean_kl'")
        )


def _check_batch(batch: object) -> None:
    rows = batch.get("rows") if isinstance(batch, dict) else None
    ok = (
        isinstance(batch, dict)
        and _is_int(batch.get("size"))
        and isinstance(rows, list)
        and len(rows) == batch["size"]
        and isinstance(batch.get("step_ms"), list)
        and all(_is_number(v) for v in batch["step_ms"])
        and all(
            isinstance(r, dict)
            and isinstance(r.get("ids"), list)
            and all(_is_int(i) for i in r["ids"])
            and isinstance(r.get("text"), str)
            for r in rows
        )
    )
    if not ok:
        raise TraceFileError(_("trace field 'batch' needs 'size', that many 'rows' (ids, text) and 'step_ms'"))


def _positive(v: object) -> bool:
    return _is_number(v) and v is not None and math.isfinite(v) and v > 0


def _count(v: object) -> bool:
    return _is_int(v) and v >= 0


def _fields_ok(doc: object, kinds: dict[str, Callable[[object], bool]]) -> bool:
    return isinstance(doc, dict) and all(check(doc.get(key)) for key, check in kinds.items())


def _list_of(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda v: isinstance(v, list) and all(check(x) for x in v)


_FORMATS = {"float32", "bfloat16", "float16", "int8"}
_LAB_FIELDS = {
    "model": lambda v: isinstance(v, str),
    "precision": lambda v: v in _FORMATS,
    "n_params": _count,
    "n_ctx": lambda v: _is_int(v) and v >= 1,
    "vocab_size": lambda v: _is_int(v) and v >= 1,
    "machine": lambda v: _fields_ok(v, {"stream_gb_s": _positive, "compute_gflop_s": _positive,
                                         "threads": lambda t: _is_int(t) and t >= 1}),
    "costs": lambda v: _fields_ok(v, dict.fromkeys(
        ("weight_bytes", "kv_bytes_per_position", "flops_per_row", "flops_per_cached_position"), _count)),
}
_CONTEXT_FIELDS = {
    "positions": _list_of(_count), "naive_ms": _list_of(_positive), "cached_ms": _list_of(_positive),
    "start": _count, "end": _count, "complete": lambda v: isinstance(v, bool),
}
# What the lab reads back; derived fields written beside them (tokens_per_s, intensity, gb_s)
# are worked out again from these.
_BATCH_ROW = {
    "batch": lambda v: _is_int(v) and v >= 1, "step_ms": _positive, "flops": _count,
    "bytes_read": lambda v: _is_int(v) and v >= 1,
}
_FORMAT_ROW = {
    "format": lambda v: v in _FORMATS, "step_ms": _positive, "bytes_read": lambda v: _is_int(v) and v >= 1,
    "weight_bytes": _count,
    "quality": lambda v: _fields_ok(v, {"positions": _count, "max_abs_dlogit": _is_number,
                                         "top1_agreement": _is_number, "mean_kl": _is_number}),
}


def _check_cost_lab(lab: object) -> None:
    """The cost lab's result (gpt2viz.cost_lab.LabResult.to_dict), as the lab screen draws it."""
    context = lab.get("context") if isinstance(lab, dict) else None
    batch = lab.get("batch") if isinstance(lab, dict) else None
    formats = lab.get("precision_formats") if isinstance(lab, dict) else None
    ok = (
        _fields_ok(lab, _LAB_FIELDS)
        and (context is None or (
            _fields_ok(context, _CONTEXT_FIELDS)
            and len(context["positions"]) == len(context["naive_ms"]) == len(context["cached_ms"])
        ))
        and (batch is None or _fields_ok(batch, {
            "context": _count, "rows": _list_of(lambda r: _fields_ok(r, _BATCH_ROW)),
            "skipped": _list_of(lambda b: _is_int(b) and b >= 1), "complete": lambda v: isinstance(v, bool),
        }))
        and (formats is None or _fields_ok(formats, {
            "context": _count, "rows": _list_of(lambda r: _fields_ok(r, _FORMAT_ROW)),
            "complete": lambda v: isinstance(v, bool),
        }))
    )
    if ok:  # what the lab screen assumes of the numbers, beyond their types
        n_ctx = lab["n_ctx"]
        positions = context["positions"] if context is not None else []
        sizes = [r["batch"] for r in batch["rows"]] if batch is not None else []
        names = [r["format"] for r in formats["rows"]] if formats is not None else []
        ok = (
            (context is None or (context["start"] <= context["end"] <= n_ctx
                                 and all(a < b for a, b in zip(positions, positions[1:]))
                                 and all(context["start"] <= p < context["end"] for p in positions)))
            and all(a < b for a, b in zip(sizes, sizes[1:])) and (not sizes or sizes[0] == 1)
            and len(set(names)) == len(names)
        )
    if not ok:
        raise TraceFileError(_("trace field 'cost_lab' is not a cost lab result as docs/trace.md describes it"))


def load(path: str | Path) -> Trace:
    """Reads and validates a trace written by `dump`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceFileError(_("{path}: no such file").format(path=path)) from None
    except UnicodeDecodeError:
        raise TraceFileError(_("{path}: not UTF-8 text, so not a gpt2viz trace").format(path=path)) from None
    except OSError as err:
        raise TraceFileError(_("{path}: cannot read ({error})").format(path=path, error=err.strerror)) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise TraceFileError(_("{path}: not valid JSON ({error})").format(path=path, error=err)) from None
    except RecursionError:
        raise TraceFileError(_("{path}: JSON nested too deeply").format(path=path)) from None
    try:
        return validate(doc)
    except TraceFileError as err:
        raise TraceFileError(f"{path}: {err}") from None
