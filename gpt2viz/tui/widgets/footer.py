"""The footer of every screen: Textual's, built again only when what it shows changed."""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer


class AppFooter(Footer):
    """Textual's Footer builds all its keys again (a widget each, with its styles) whenever the
    screen's bindings are refreshed, which Textual does at every change of focus or screen: most
    of what opening a screen costs. This one builds them again only when the keys it would show
    differ (another key, description, language, or a key enabled or disabled)."""

    _shown: tuple | None = None

    def _keys(self, screen: Screen) -> tuple:
        app = screen.app
        return tuple(
            (binding.key, binding.action, binding.description, enabled, tooltip, app.get_key_display(binding),
             binding.group.description if binding.group else None)
            for (_node, binding, enabled, tooltip) in screen.active_bindings.values()
            if binding.show or binding.action == "command_palette"
        )

    def bindings_changed(self, screen: Screen) -> None:
        if self.is_attached and screen is self.screen:
            keys = self._keys(screen)
            if keys == self._shown:
                return
            self._shown = keys
        super().bindings_changed(screen)
