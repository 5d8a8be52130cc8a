"""Writing a Trace as one JSON document, atomically, and reading one back with checks."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from ..errors import Gpt2VizError
from .model import SCHEMA, Trace


class TraceFileError(Gpt2VizError):
    """A trace file that cannot be read or is not a gpt2viz trace."""


def dumps(trace: Trace) -> str:
    return json.dumps(trace.to_dict(), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dump(trace: Trace, path: str | Path) -> None:
    """Writes `trace` to `path` ('-' for stdout). A file appears whole or not at all: the JSON goes
    to a temporary file beside it, which replaces `path` only once fully written."""
    text = dumps(trace)
    if str(path) == "-":
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return
    write_atomic(Path(path), text + "\n")


def write_atomic(path: Path, text: str) -> None:
    """Writes `text` to `path` through a temporary file and a rename; leaves no debris on error."""
    directory = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise Gpt2VizError(f"--json {path}: is a directory")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as err:
        raise Gpt2VizError(f"--json {path}: cannot write there ({err.strerror})") from None
    try:
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
            raise Gpt2VizError(f"--json {path}: write failed ({err.strerror or err}); nothing was written") from None
        raise


_REQUIRED = {"schema": str, "model": dict, "prompt": str, "tokens": list, "events": list}


def validate(doc: object) -> Trace:
    """Checks a decoded JSON document is a trace this version reads, and returns it."""
    if not isinstance(doc, dict):
        raise TraceFileError("not a gpt2viz trace (expected a JSON object)")
    schema = doc.get("schema")
    if schema != SCHEMA:
        raise TraceFileError(f"unsupported trace schema {schema!r} (this gpt2viz reads {SCHEMA})")
    for key, kind in _REQUIRED.items():
        if not isinstance(doc.get(key), kind):
            raise TraceFileError(f"trace field {key!r} is missing or not a {kind.__name__}")
    if doc.get("generation") is not None and not isinstance(doc["generation"], dict):
        raise TraceFileError("trace field 'generation' must be an object or null")
    config = doc["model"].get("config")
    if not isinstance(config, dict):
        raise TraceFileError("trace field 'model.config' is missing")
    for key in ("n_layer", "n_head", "n_embd", "n_ctx", "vocab_size"):
        value = config.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise TraceFileError(f"trace field 'model.config.{key}' must be a positive integer")
    for i, token in enumerate(doc["tokens"]):
        if not isinstance(token, dict) or not isinstance(token.get("id"), int) or not isinstance(token.get("text"), str):
            raise TraceFileError(f"trace token {i} needs an integer 'id' and a string 'text'")
    for i, event in enumerate(doc["events"]):
        if not isinstance(event, dict) or not isinstance(event.get("stage"), str):
            raise TraceFileError(f"trace event {i} needs a string 'stage'")
        layer = event.get("layer")
        if layer is not None and (isinstance(layer, bool) or not isinstance(layer, int)):
            raise TraceFileError(f"trace event {i} has a non-integer 'layer'")
    return Trace.from_dict(doc)


def load(path: str | Path) -> Trace:
    """Reads and validates a trace written by `dump`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceFileError(f"{path}: no such file") from None
    except UnicodeDecodeError:
        raise TraceFileError(f"{path}: not UTF-8 text, so not a gpt2viz trace") from None
    except OSError as err:
        raise TraceFileError(f"{path}: cannot read ({err.strerror})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise TraceFileError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    except RecursionError:
        raise TraceFileError(f"{path}: JSON nested too deeply") from None
    try:
        return validate(doc)
    except TraceFileError as err:
        raise TraceFileError(f"{path}: {err}") from None
