"""Small JSON files gpt2viz keeps for itself (the kernels' choices, lesson progress): read
forgivingly, written whole.

A file that is missing, unreadable or not JSON reads as None (the caller starts afresh). A write
goes through a new temporary file beside the target, renamed over it, so a reader never sees half a
file; a write that fails (no home directory, a read-only disk) leaves the old file as it was and
says nothing: what these files hold can always be worked out again.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def read_json(path: Path) -> object | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except Exception:  # noqa: BLE001 (missing, unreadable, not JSON, nested too deep, no home directory)
        return None


def write_json(path: Path, data: object) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(data, out, indent=1, allow_nan=False)
            os.replace(temporary, path)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
    except (OSError, RuntimeError, ValueError):  # RuntimeError: no home directory to put it in
        pass
