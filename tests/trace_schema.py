"""The published trace schema (docs/trace.schema.json), compiled once, for every test that checks
a document against it.

jsonschema takes 4.7 s for one 200-position trace (each of its 575,000 numbers checked as an item
of its own); fastjsonschema, which compiles the schema to Python, 0.04 s. fastjsonschema knows
drafts 4 to 7, the schema says draft 2020-12: it uses no keyword whose meaning differs between
them (`$defs` is reached by a JSON pointer alike; a `$ref` stands alone or in an `allOf`, since
draft 7 ignores a `$ref`'s siblings). test_trace_format.py checks that the two validators judge
every sampled mutation of every trace kind the same, and jsonschema checks the schema itself
against draft 2020-12's metaschema.
"""

from __future__ import annotations

import json
from pathlib import Path

import fastjsonschema

SCHEMA_FILE = Path(__file__).resolve().parents[1] / "docs" / "trace.schema.json"
SCHEMA = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))

# The error a document the schema refuses raises.
SchemaError = fastjsonschema.JsonSchemaValueException



def _no_fetch(uri: str):
    # Every reference points into the schema itself; fastjsonschema would fetch any other (and
    # resolve a reference against the $id's host if the $id were missing): never the network.
    raise ValueError(f"the trace schema refers outside itself: {uri}")


_HANDLERS = {"http": _no_fetch, "https": _no_fetch}
_document = fastjsonschema.compile(SCHEMA, handlers=_HANDLERS)
# One event on its own, its definitions beside it under the schema's $id (the references point
# into $defs).
_event = fastjsonschema.compile(
    {"$schema": SCHEMA["$schema"], "$id": SCHEMA["$id"], "$defs": SCHEMA["$defs"], "$ref": "#/$defs/event"},
    handlers=_HANDLERS,
)


def validate(doc) -> None:
    """Raises SchemaError (naming the first field it refuses) unless `doc` is a valid trace."""
    _document(doc)


def is_valid(doc) -> bool:
    try:
        _document(doc)
    except SchemaError:
        return False
    return True


def event_is_valid(event) -> bool:
    """Whether one event is valid as the schema's `event` says."""
    try:
        _event(event)
    except SchemaError:
        return False
    return True
