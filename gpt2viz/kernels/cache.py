"""The kernels' choices, remembered per machine: `$XDG_CACHE_HOME/gpt2viz/kernels.json` (default
`~/.cache/gpt2viz`).

One JSON file, `{"version": CACHE_VERSION, <section>: {<CPU key>: {<weight shape>: <choice>}}}`:
the float32 products' choices under "cpus" (kernels/choice.py), the other number formats' under
"formats" (kernels/formats.py). Each section's owner checks its entries as it reads them; this module only
reads and writes whole files. A file that cannot be read gives nothing (everything is measured
again); one that cannot be written is left as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ..json_state import read_json, write_json
from ..user_cache import cache_home

T = TypeVar("T")

CACHE_FILE = "kernels.json"
# Raised when a choice's rule changes, so that every machine decides again once: a file of another
# version reads as empty. 2: a block product stays plain for its digits only where the plain
# product keeps a row's digits among a prefill's rows (kernels/choice.py); version 1 kept every
# such block plain on CPUs whose plain product keeps none (an AMD EPYC: all of GPT-2's).
# 3: a block product may be multiplied as two partial sums where the plain product keeps no digits,
# and every kernel is timed on several weights of a shape read in turn, not one weight kept in the
# caches (kernels/choice.py, kernels/formats.py).
CACHE_VERSION = 3


def cache_path() -> Path:
    """$XDG_CACHE_HOME/gpt2viz/kernels.json; ~/.cache where it is unset or not absolute (the XDG
    rule: a relative one is ignored)."""
    return cache_home() / CACHE_FILE


def read_section(section: str) -> dict[str, dict]:
    """The section's entries by CPU key, as the file holds them (each still to be checked); {} for
    a file that is missing, unreadable, of another version, or without the section."""
    data = _read_file()
    entries = data.get(section)
    if not isinstance(entries, dict):
        return {}
    return {key: value for key, value in entries.items() if isinstance(value, dict)}


def read_choices(section: str, parse: Callable[[dict], T]) -> dict[str, dict[str, T]]:
    """The section's choices by CPU key and weight shape, each made by `parse` from its fields; an
    entry `parse` refuses (TypeError, ValueError: not what this version writes) is left out, to be
    measured again and rewritten."""
    kept: dict[str, dict[str, T]] = {}
    for key, entries in read_section(section).items():
        for name, fields in entries.items():
            try:
                kept.setdefault(key, {})[name] = parse(fields)
            except (TypeError, ValueError):
                continue
    return kept


def write_choices(section: str, choices: dict[str, dict]) -> None:
    """Writes a section's choices (objects with `to_dict`) by CPU key and weight shape."""
    write_section(section, {key: {name: c.to_dict() for name, c in entries.items()} for key, entries in choices.items()})


def write_section(section: str, entries: dict[str, dict]) -> None:
    """Replaces one section, keeping the file's others (written whole: gpt2viz/json_state.py)."""
    try:
        path = cache_path()
    except RuntimeError:  # no home directory to put it in
        return
    data = {name: value for name, value in _read_file().items() if isinstance(value, dict)}
    write_json(path, {"version": CACHE_VERSION, **data, section: entries})


def _read_file() -> dict:
    try:
        data = read_json(cache_path())
    except RuntimeError:  # no home directory
        return {}
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
        return {}
    return data
