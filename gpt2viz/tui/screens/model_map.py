"""The map of the model over the step-through: the whole data flow with this model's sizes, the stage
on screen highlighted. Opened from any stage with one key; the same key or escape closes it."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from ...i18n import N_, _
from ...trace import Trace
from ..language import key_name
from ..stages import Stage
from ..styled_text import styled
from ..widgets.model_map import ModelMap
from .base import AppModal


class ModelMapScreen(AppModal[None]):
    """The map of the model, `stage` highlighted."""

    BINDINGS = [
        Binding("escape,o", "close", N_("close"), id="close-map", tooltip=N_("Close the map")),
        Binding("q", "app.quit", N_("quit"), id="map-quit", show=False, tooltip=N_("Leave gpt2viz")),
        # A modal screen hides the app's keys: the language switch, again, for a screen of words.
        Binding("L", "app.switch_language", N_("中文"), id="map-switch-language", show=False,
                tooltip=N_("Show the app in Chinese (again: back to English)")),
    ]

    def __init__(self, trace: Trace, stage: Stage) -> None:
        super().__init__()
        self.trace = trace
        self.stage = stage

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="map-box"):
            yield Static(id="map-where")
            yield ModelMap(id="model-map")

    def on_mount(self) -> None:
        self.redraw_language()

    def redraw_language(self) -> None:
        """Every text in the current language."""
        box = self.query_one("#map-box")
        box.border_title = _("Map of the model")
        box.border_subtitle = _("{key}: close").format(key=key_name(self, "close"))
        # The mark › and the highlight on the map stand for the stage named here.
        where = styled(_("› you are at {stage}"), stage=(self.stage.title, "bold $accent"))
        self.query_one("#map-where", Static).update(where)
        self.query_one(ModelMap).draw(self.trace, self.stage)

    def action_close(self) -> None:
        self.close()
