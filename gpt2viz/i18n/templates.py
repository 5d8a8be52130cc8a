"""Narration templates: one table per language, keyed `area.stage.paragraph`, named placeholders.

`gpt2viz/i18n/en/` and `gpt2viz/i18n/zh/` hold one module per area of the app, each with a
`TEXT` dict. A translator copies `en/` to a new language's folder and translates the values; the
keys and placeholders stay the same (tests/test_i18n.py checks both).
"""

from __future__ import annotations

import importlib
import pkgutil
import string
from functools import cache

from .language import DEFAULT, LANGUAGES, language


@cache
def table(code: str) -> dict[str, str]:
    """Every template of language `code`, merged from the modules of its folder."""
    package = importlib.import_module(f"{__package__}.{code}")
    merged: dict[str, str] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for key, text in module.TEXT.items():
            if key in merged:
                raise KeyError(f"template {key!r} is defined twice in {code}")
            merged[key] = text
    return merged


def say(key: str, /, **facts: object) -> str:
    """The template `key` in the current language, its placeholders filled with `facts`.

    A key missing from a translation falls back to English (tests keep the tables complete);
    a key missing from English is a bug and raises KeyError."""
    code = language()
    text = table(code).get(key) if code in LANGUAGES else None
    if text is None:
        text = table(DEFAULT)[key]
    return text.format_map(facts)


def sentences(*parts: str) -> str:
    """Whole sentences read as one paragraph, in the current language's way (a space after each
    full stop in English, nothing after a Chinese one); empty parts are left out."""
    return say("sentences.gap").join(part for part in parts if part)


def plural(key: str, n: int) -> str:
    """The key of the template for a count `n`: `key.one` for 1, else `key.other`. A sentence whose
    words bend with a count (is/are, its/their) is written whole for each form, and the count picks
    one; every language has both keys (Chinese writes them alike)."""
    return f"{key}.one" if n == 1 else f"{key}.other"


def placeholders(text: str) -> set[str]:
    """The named placeholders of a template: {'n', 'token'} for 'token {token} at {n}'."""
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}
