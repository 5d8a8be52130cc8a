"""The command palette in the reader's language, and its entries: every stage of the pipeline, to
jump to by name, and the map of the model."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from ..i18n import _, count
from .screens.base import Lifecycle
from .textual_compat import CompatPalette


class Palette(Lifecycle, CompatPalette):
    """Textual's command palette (made safe against fast keys in gpt2viz.tui.textual_compat), its
    own message in the reader's language, closed by the app's one rule (screens/base.py)."""

    no_matches_text = staticmethod(lambda: _("No matches found"))


class StageCommands(Provider):
    """'Go to Block 3 · Attention pattern' for every stage of the step-through."""

    def _entries(self):
        from .screens.step import StepScreen  # that screen registers this provider: imported late

        screen = self.screen
        if not isinstance(screen, StepScreen):
            return []
        stages = screen.stages
        return [
            (
                _("Go to {stage}").format(stage=stage.title),
                partial(screen.go_to, i),
                _("stage {index} of {total}").format(index=i + 1, total=count(len(stages))),
            )
            for i, stage in enumerate(stages)
        ]

    async def discover(self) -> Hits:
        for text, command, help_text in self._entries():
            yield DiscoveryHit(text, command, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, command, help_text in self._entries():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), command, text=text, help=help_text)


class MapCommands(Provider):
    """'Map of the model': where the stage on screen sits in the whole data flow."""

    def _entry(self):
        from .screens.step import StepScreen  # that screen registers this provider: imported late

        screen = self.screen
        if not isinstance(screen, StepScreen):
            return None
        return _("Map of the model"), screen.action_show_map, _("where this stage sits in the whole data flow")

    async def discover(self) -> Hits:
        entry = self._entry()
        if entry is not None:
            text, command, help_text = entry
            yield DiscoveryHit(text, command, help=help_text)

    async def search(self, query: str) -> Hits:
        entry = self._entry()
        if entry is None:
            return
        text, command, help_text = entry
        score = self.matcher(query).match(text)
        if score > 0:
            yield Hit(score, self.matcher(query).highlight(text), command, text=text, help=help_text)
