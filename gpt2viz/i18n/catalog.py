"""Short UI strings through gettext: `_("Leave gpt2viz")`, `ngettext("{n} token", "{n} tokens", n)`.

The compiled catalogs (`.mo`) are built from the `.po` files by the package build (hatch_build.py,
with Babel) and shipped in the wheel. English is the msgid itself, so it needs no catalog. Every
other language of LANGUAGES must have one: without it the app would show English wherever that
language was asked for, so a missing catalog is an error (`MissingCatalog`), not a fallback.
"""

from __future__ import annotations

import gettext
from functools import cache
from pathlib import Path

from .language import DEFAULT, LANGUAGES, language

DOMAIN = "gpt2viz"
LOCALE_DIR = Path(__file__).resolve().parent.parent / "locale"


class MissingCatalog(Exception):
    """A language of LANGUAGES whose compiled catalog is not installed (a build that skipped the
    catalogs, or a checkout where they were never compiled). Its message is English: there is no
    catalog to say it in. The command line prints it on one line, like a Gpt2VizError."""

    exit_code = 1


@cache
def translations(code: str) -> gettext.NullTranslations:
    """The catalog of language `code` (English: the msgids themselves); MissingCatalog if the
    compiled catalog of another language is not there."""
    if code == DEFAULT:
        return gettext.NullTranslations()
    try:
        return gettext.translation(DOMAIN, localedir=LOCALE_DIR, languages=[code])
    except FileNotFoundError:
        mo = LOCALE_DIR / code / "LC_MESSAGES" / f"{DOMAIN}.mo"
        raise MissingCatalog(
            f"no compiled catalog for {LANGUAGES[code]} ({code}): {mo} is missing; reinstall gpt2viz, "
            "or in a checkout run: python tools/catalog.py update"
        ) from None


def check_catalogs() -> None:
    """Raises MissingCatalog unless every language can be shown: the command line checks this
    before it says anything, so a broken install fails at once instead of mixing languages."""
    for code in LANGUAGES:
        translations(code)


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
