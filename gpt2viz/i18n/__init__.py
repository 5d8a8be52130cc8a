"""Every sentence a user reads, in the user's language (English or Simplified Chinese).

Two kinds of text, two standard mechanisms:

- **Short UI strings** (labels, key descriptions, notifications, errors, CLI messages) are English
  msgids marked with `_()`, `ngettext()` or `N_()` and translated through gettext catalogs
  (`gpt2viz/locale/<lang>/LC_MESSAGES/gpt2viz.po`, extracted and compiled with Babel; see
  docs/translating.md). Plurals always go through `ngettext`.
- **Narration** (the paragraphs that explain a stage with this run's numbers) is a table of whole
  templates per language, keyed by stage and paragraph, with named placeholders: `say(key, **facts)`.
  The tables live in `gpt2viz/i18n/<lang>/*.py`, one module per area of the app. Code decides which
  paragraphs apply and formats the facts (numbers, tokens, shapes) once, the same in every language.

The language is process-wide state, set once from `--lang` or the locale (`language_from_env`) and
switched live by the TUI; every lookup reads it at call time, so nothing is frozen at import.
"""

from .catalog import N_, _, ngettext
from .language import LANGUAGES, language, language_from_env, parse_language, set_language
from .templates import placeholders, say, table

__all__ = [
    "LANGUAGES",
    "N_",
    "_",
    "language",
    "language_from_env",
    "ngettext",
    "parse_language",
    "placeholders",
    "say",
    "set_language",
    "table",
]
