"""Which language the app speaks: chosen by `--lang`, else by the locale, else English."""

from __future__ import annotations

import os
from collections.abc import Mapping

# Code -> the language's own name (what the switch key and the palette show).
LANGUAGES = {"en": "English", "zh": "中文"}
DEFAULT = "en"

_current = DEFAULT


def language() -> str:
    """The language every lookup uses now: 'en' or 'zh'."""
    return _current


def set_language(code: str) -> None:
    """Switches every later lookup to `code` (one of LANGUAGES)."""
    global _current
    _current = parse_language(code)


def parse_language(name: str) -> str:
    """'en', 'zh' (and locale spellings: 'zh_CN.UTF-8', 'zh-Hans', 'en_US'); ValueError otherwise."""
    base = name.strip().replace("-", "_").split(".")[0].split("@")[0].split("_")[0].lower()
    if base in LANGUAGES:
        return base
    raise ValueError(f"unknown language {name!r}: choose {' or '.join(LANGUAGES)}")


def language_from_env(environ: Mapping[str, str] | None = None) -> str:
    """The language the locale asks for, as gettext reads it: the first set of LC_ALL,
    LC_MESSAGES and LANG (LANGUAGE is not read: it is a list of fallbacks for translations, and
    a zh entry there should not turn an English locale into Chinese). zh_* -> 'zh', else 'en'."""
    environ = os.environ if environ is None else environ
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(var, "")
        if value:
            try:
                return parse_language(value)
            except ValueError:
                return DEFAULT  # C, POSIX, de_DE, ...: the first one set decides, as in gettext
    return DEFAULT
