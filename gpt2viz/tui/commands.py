"""The command palette in the reader's language, and its entries: every stage of the pipeline, to
jump to by name, and the map of the model."""

from __future__ import annotations

from functools import partial

from rich.align import Align
from rich.text import Text
from textual.command import CommandList, CommandPalette, DiscoveryHit, Hit, Hits, Provider
from textual.widgets.option_list import Option

from ..i18n import _, count


class Palette(CommandPalette):
    """Textual's command palette, its own message ("No matches found") in the reader's language."""

    def _start_no_matches_countdown(self, search_value: str) -> None:
        # Textual 8.2.8's method (the pinned version), its message through the catalog: Textual
        # writes it into the list as a literal. As there, it shows only for a search (not in
        # discovery, the empty search) that found nothing for _NO_MATCHES_COUNTDOWN seconds.
        self._stop_no_matches_countdown()

        def show_no_matches() -> None:
            if search_value:
                self.query_one(CommandList).add_option(
                    Option(Align.center(Text(_("No matches found"), style="not bold")), disabled=True, id=self._NO_MATCHES)
                )
                self._list_visible = True
            else:
                self._list_visible = False

        self._no_matches_timer = self.set_timer(self._NO_MATCHES_COUNTDOWN, show_no_matches)


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
