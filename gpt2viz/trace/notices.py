"""What a run wants its reader to know (an empty prompt, a prompt cut to the context, ...),
kept language-neutral in the trace and said in the reader's language when shown.

A notice is `{"code": str, "params": {name: value}}`; `notice_text` renders it through the
narration templates `notice.<code>` (gpt2viz/i18n/<lang>/notices.py). Traces written before
notices had codes hold English sentences: those are shown as they are.
"""

from __future__ import annotations

from ..i18n import say


def notice(code: str, **params: object) -> dict:
    """A notice for the trace: `notice("prompt_empty", eos=50256)`."""
    return {"code": code, "params": params}


def notice_text(item: dict | str) -> str:
    """The notice as one sentence in the current language."""
    if isinstance(item, str):
        return item
    params = {k: f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else v for k, v in item["params"].items()}
    return say(f"notice.{item['code']}", **params)
