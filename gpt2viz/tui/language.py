"""The TUI's side of translation: key bindings in the current language, key names for prose,
and the live switch between languages.

Bindings are declared with English msgids (`N_("stage")`); Textual shows `description`,
`tooltip` and group descriptions as they are, so `translate_bindings` swaps in translated copies
of a node's bindings, always from the English originals, whenever the language changes.
"""

from __future__ import annotations

from dataclasses import replace

from textual.binding import Binding
from textual.dom import DOMNode

from ..i18n import N_, _, language
from .textual_compat import binding_table, declared_bindings

# Textual's own binding texts, so that the catalog translates them too.
TEXTUAL_TEXTS = (N_("palette"), N_("Open the command palette"), N_("Quit the app"))

_ENGLISH = "_gpt2viz_english_bindings"


def _english(node: DOMNode) -> dict[tuple[str, str | None, str], Binding]:
    """The node's bindings as declared (English), remembered the first time they are seen."""
    found = getattr(node, _ENGLISH, None)
    if found is None:
        found = {(b.action, b.id, b.key): b for b in declared_bindings(node)}
        setattr(node, _ENGLISH, found)
    return found


def _translated(binding: Binding, english: Binding) -> Binding:
    group = english.group
    if group is not None:
        group = Binding.Group(_(group.description), compact=group.compact)
    return replace(
        binding,
        description=_(english.description) if english.description else english.description,
        tooltip=_(english.tooltip) if english.tooltip else english.tooltip,
        group=group,
    )


_LANGUAGE = "_gpt2viz_bindings_language"


def translate_bindings(node: DOMNode) -> None:
    """Gives `node`'s bindings the current language's texts (keys and actions unchanged). A node
    whose bindings speak the current language already is left alone: telling the footer of a new
    set of bindings makes it build all its keys again."""
    if getattr(node, _LANGUAGE, None) == language():
        return
    setattr(node, _LANGUAGE, language())
    english = _english(node)
    by_id = {(b.action, b.id): b for b in english.values()}
    table = binding_table(node)
    for key, bindings in table.items():
        table[key] = [
            _translated(b, english.get((b.action, b.id, b.key)) or by_id.get((b.action, b.id), b)) for b in bindings
        ]
    node.refresh_bindings()


def key_name(node: DOMNode, action: str) -> str:
    """How the first key bound to `action` shows on screen ('g', '⏎', '[' ...), for sentences that
    name a key: from the bindings active now (the user's key map applied), else, for an action
    disabled or out of focus at the moment (resume while running, a widget's own key), from the
    node's, its screen's or the app's bindings."""
    app = node.app
    screen = app.screen if node is app else node.screen
    names = (action, f"app.{action}", f"screen.{action}")
    active = [a.binding for a in screen.active_bindings.values() if a.binding.action in names]
    # A key the footer shows before a hidden one (q before ctrl+c for quit).
    for binding in sorted(active, key=lambda b: not b.show):
        return app.get_key_display(binding)
    for holder in dict.fromkeys((node, screen, app)):
        for binding in declared_bindings(holder):
            if binding.action in names:
                return app.get_key_display(binding)
    raise KeyError(f"no key is bound to {action!r}")
