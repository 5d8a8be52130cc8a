"""Command palette entries: every stage of the pipeline, to jump to by name."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from ..i18n import _, count


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
