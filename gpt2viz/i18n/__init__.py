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
  Sentences of one paragraph are joined with `sentences(...)`; a sentence whose words bend with a
  count is a template per form, its key chosen with `plural(key, n)`. Counts are written with
  `count(n)` everywhere (thousands separators), in the UI as in the trace's notices.

The language is process-wide state, set once from `--lang` or the locale (`language_from_env`) and
switched live by the TUI; every lookup reads it at call time, so nothing is frozen at import.
"""

from .catalog import N_, MissingCatalog, _, check_catalogs, ngettext
from .language import LANGUAGES, language, language_from_env, parse_language, set_language
from .numbers import count
from .templates import placeholders, plural, say, sentences, table

__all__ = [
    "LANGUAGES",
    "N_",
    "MissingCatalog",
    "_",
    "check_catalogs",
    "count",
    "language",
    "language_from_env",
    "ngettext",
    "parse_language",
    "placeholders",
    "plural",
    "say",
    "sentences",
    "set_language",
    "table",
]
