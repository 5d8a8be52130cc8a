"""The command palette in the reader's language, and its entries: every stage of the pipeline, to
jump to by name ("mlp 3", "block 3 mlp", "第 3 层 注意力"), the map of the model, and every key of
the screen underneath as a command (so the palette offers every screen the keys open)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content

from ..i18n import _, count
from .screens.base import Lifecycle
from .screens.help import bound_actions
from .textual_compat import CompatPalette

# A query's terms: a LayerNorm's name (ln_1, ln_f), numbers, runs of Latin letters (and _), each
# Chinese character (Chinese is typed without spaces: '第1层注意力').
_TERM = re.compile(r"ln_[12f]|\d+|[A-Za-z_]+|[\u3400-\u9fff]")


def query_terms(query: str) -> list[str]:
    """The terms of a palette query, lower case, full-width forms as their ASCII ('３' is 3):
    'mlp3' and '3 MLP' both give ['mlp', '3'] (in their order)."""
    return [term.lower() for term in _TERM.findall(unicodedata.normalize("NFKC", query))]


def term_spans(terms: list[str], text: str) -> list[tuple[int, int]] | None:
    """Where each term occurs in `text` (any order), or None when one does not: a number as a whole
    number standing on its own (3 is not in 13, 1 is not in ln_1), a Latin term at the start of a
    word (mlp in 'MLP:', attn not in 'pattern'), Chinese anywhere."""
    spans = []
    lowered = text.lower()
    for term in terms:
        if term.isdigit():
            pattern = rf"(?<![\w]){term}(?!\d)"
        elif term[0].isascii():
            pattern = rf"(?<![a-z]){re.escape(term)}"
        else:
            pattern = re.escape(term)
        found = re.search(pattern, lowered)
        if found is None:
            return None
        spans.append(found.span())
    return spans


def highlighted(text: str, spans: list[tuple[int, int]], style) -> Content:
    content = Content(text)
    for start, end in spans:
        content = content.stylize(style, start, end)
    return content


class Palette(Lifecycle, CompatPalette):
    """Textual's command palette (made safe against fast keys in gpt2viz.tui.textual_compat), its
    own message in the reader's language, closed by the app's one rule (screens/base.py)."""

    no_matches_text = staticmethod(lambda: _("No matches found"))


@dataclass(frozen=True)
class Entry:
    """One palette command: the text shown, the words it is also found by, what it runs."""

    text: str
    command: Callable[[], object]
    help: str
    also: str = ""  # searched, not shown: English names, the stage's key, the keys
    name: str = ""  # the entry's short name: a query naming it all ranks first


def search_hits(entries: list[Entry], query: str, style) -> Iterator[Hit]:
    """Hits for every entry in which each term of `query` occurs (terms in any order), the text's
    matched terms highlighted; entries whose short name the query covers first, then the shorter
    texts (the query is more of them), then in their order."""
    terms = query_terms(query)
    if not terms:
        return
    for order, entry in enumerate(entries):
        spans = term_spans(terms, f"{entry.text}\n{entry.also}")
        if spans is None:
            continue
        named = term_spans(query_terms(entry.name), query.lower()) is not None if entry.name else False
        score = 1 + named - len(entry.text) / 1000 - order / 1_000_000
        shown = [(start, end) for start, end in spans if end <= len(entry.text)]
        yield Hit(score, highlighted(entry.text, shown, style), entry.command, text=entry.text, help=entry.help)


class EntryProvider(Provider):
    """A provider of `_entries()`: all of them offered before anything is typed, then searched by
    terms (search_hits)."""

    def _entries(self) -> list[Entry]:
        raise NotImplementedError

    def _commands(self) -> list[Entry]:
        """The entries, each command run only while the screen it is for is still on the stack:
        the palette runs its choice a moment after it closes, and a key typed before may have
        closed that screen, or quit the app."""
        screen, app = self.screen, self.app

        def while_there(command: Callable[[], object]) -> Callable[[], object]:
            return lambda: command() if app.still_there(screen) else None

        return [replace(entry, command=while_there(entry.command)) for entry in self._entries()]

    async def discover(self) -> Hits:
        for entry in self._commands():
            yield DiscoveryHit(entry.text, entry.command, help=entry.help)

    async def search(self, query: str) -> Hits:
        for hit in search_hits(self._commands(), query, self.match_style):
            yield hit


class StageCommands(EntryProvider):
    """'Go to Block 3 · Attention pattern' for every stage of the step-through, found by its block
    and part in either language: 'mlp 3', 'block 3 mlp', '3 MLP', 'attn 3', '第 3 层 注意力'."""

    def _entries(self) -> list[Entry]:
        from .screens.step import StepScreen  # that screen registers this provider: imported late

        screen = self.screen
        if not isinstance(screen, StepScreen):
            return []
        stages = screen.stages
        return [
            Entry(
                _("Go to {stage}").format(stage=stage.title),
                partial(screen.go_to, i),
                _("stage {index} of {total}").format(index=i + 1, total=count(len(stages))),
                also=f"{stage.english_title} {stage.key.replace('.', ' ').replace('_', ' ')} {stage.kind}"
                + (" attn" if stage.is_attention or stage.kind in ("qkv", "attn_out") else ""),
                name=f"{stage.layer if stage.layer is not None else ''} {stage.label}",
            )
            for i, stage in enumerate(stages)
        ]


class AppCommands(EntryProvider):
    """The app's own commands (App.get_system_commands: the language, the lessons, the check
    against transformers, the theme, ...), found by the starts of their words like every entry
    here: Textual's own provider matches the query's letters in order anywhere, so 'cost' found
    "From sCratch: tensOrS, a Token" before the cost lab."""

    def _entries(self) -> list[Entry]:
        return [Entry(command.title, command.callback, command.help)
                for command in self.app.get_system_commands(self.screen)]


class KeyCommands(EntryProvider):
    """Every key of the screen underneath, as a command: 'Open the generation view' (key g)."""

    def _entries(self) -> list[Entry]:
        screen = self.screen
        return [
            Entry(bound.text, partial(self.app.run_action, bound.action, bound.node),
                  _("key {keys}").format(keys=bound.keys), also=bound.action.replace("_", " "))
            for bound in bound_actions(screen)
            if bound.action != "command_palette"
        ]
