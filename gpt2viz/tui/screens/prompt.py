"""The prompt editor: a new prompt, and the model runs again."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Input, Static

from ...i18n import N_, _
from ..language import key_name
from ..widgets.safe_input import SafeInput
from .base import AppModal


class PromptScreen(AppModal[str | None]):
    """Edit the prompt; Enter runs it, Escape leaves it as it was."""

    BINDINGS = [Binding("escape", "cancel", N_("cancel"), id="cancel-edit", tooltip=N_("Keep the current prompt"))]
    takes_typing = True

    def __init__(self, prompt: str) -> None:
        super().__init__()
        self.prompt = prompt

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt-box"):
            yield Static(id="prompt-title")
            yield SafeInput(value=self.prompt, id="prompt-input")
            yield Static(id="prompt-hint")

    def on_mount(self) -> None:
        self.redraw_language()

    def typing_target(self) -> Input:
        return self.query_one(Input)

    def redraw_language(self) -> None:
        self.query_one("#prompt-title", Static).update(Content.styled(_("Edit the prompt"), "bold"))
        self.query_one(Input).placeholder = _("type a prompt")
        hint = _("{enter}: run the model on this prompt    {escape}: cancel").format(
            enter=key_name(self.query_one(Input), "submit"), escape=key_name(self, "cancel")
        )
        self.query_one("#prompt-hint", Static).update(Content.styled(hint, "$foreground 60%"))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.close(event.value)

    def action_cancel(self) -> None:
        self.close(None)
