"""Short UI strings through gettext: `_("Leave gpt2viz")`, `ngettext("{n} token", "{n} tokens", n)`.

The compiled catalogs (`.mo`) are built from the `.po` files by the package build (hatch_build.py,
with Babel) and shipped in the wheel. English is the msgid itself, so it needs no catalog.
"""

from __future__ import annotations

import gettext
from functools import cache
from pathlib import Path

from .language import language

DOMAIN = "gpt2viz"
LOCALE_DIR = Path(__file__).resolve().parent.parent / "locale"


@cache
def translations(code: str) -> gettext.NullTranslations:
    """The catalog of language `code` (English: the msgids themselves)."""
    if code == "en":
        return gettext.NullTranslations()
    return gettext.translation(DOMAIN, localedir=LOCALE_DIR, languages=[code], fallback=True)


def _(message: str) -> str:
    """`message` in the current language."""
    return translations(language()).gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    """The form of `singular`/`plural` that fits the count `n`, in the current language.
    Placeholders are left for the caller: `ngettext("{n} token", "{n} tokens", n).format(n=...)`."""
    return translations(language()).ngettext(singular, plural, n)


def N_(message: str) -> str:
    """Marks `message` for the catalog without translating it now (class attributes, tables):
    translate it with `_()` where it is shown."""
    return message
