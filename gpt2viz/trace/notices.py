"""What a run wants its reader to know (an empty prompt, a prompt cut to the context, ...),
kept language-neutral in the trace and said in the reader's language when shown.

A notice is `{"code": str, "params": {name: value}}` (made with `notice`, which the core shares);
`notice_text` renders it through the narration templates `notice.<code>`
(gpt2viz/i18n/<lang>/notices.py): one clause without a final full stop, which whoever shows it
frames ("gpt2viz: ..." on the command line, a "Note" paragraph in the app). Integer parameters
are counts, shown with thousands separators, except ids (names ending in `_id`), shown as they
are. Traces written before notices had codes (schema gpt2viz.trace/1) hold English sentences:
those are shown as they are.
"""

from __future__ import annotations

from ..errors import notice
from ..i18n import count, placeholders, say, table
from ..i18n.language import DEFAULT
from ..text_safety import safe_line

# What docs/trace.schema.json allows a notice to hold: these keys, and scalar parameters.
NOTICE_KEYS = {"code", "params"}
PARAM_TYPES = (str, int, float, bool)

__all__ = ["is_notice", "notice", "notice_text"]


def notice_text(item: dict | str) -> str:
    """The notice as one clause in the current language, safe to show (a replayed trace's notice
    may hold any text: gpt2viz.text_safety)."""
    if isinstance(item, str):
        return safe_line(item)
    params = {name: _shown(name, value) for name, value in item["params"].items()}
    return say(f"notice.{item['code']}", **params)


def _shown(name: str, value: object) -> object:
    if isinstance(value, int) and not isinstance(value, bool) and not name.endswith("_id"):
        return count(value)
    return safe_line(value) if isinstance(value, str) else value


def is_notice(item: object) -> bool:
    """Whether `item` is a notice this gpt2viz can say, as strictly as the trace's schema has it:
    exactly a string `code` (a known one) and `params`, whose values are strings, numbers or
    booleans and include every parameter the code's template names (a replayed trace is checked
    with this when it is read, not when shown)."""
    if not (isinstance(item, dict) and item.keys() == NOTICE_KEYS):
        return False
    code, params = item["code"], item["params"]
    if not (isinstance(code, str) and isinstance(params, dict)):
        return False
    if not all(isinstance(name, str) and isinstance(value, PARAM_TYPES) for name, value in params.items()):
        return False
    template = table(DEFAULT).get(f"notice.{code}")
    return template is not None and placeholders(template) <= params.keys()
