"""The prompt editor: a new prompt, and the model runs again."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class PromptScreen(ModalScreen[str | None]):
    """Edit the prompt; Enter runs it, Escape leaves it as it was."""

    BINDINGS = [Binding("escape", "cancel", "cancel", id="cancel-edit", tooltip="Keep the current prompt")]

    def __init__(self, prompt: str) -> None:
        super().__init__()
        self.prompt = prompt

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt-box"):
            yield Static(Content.styled("Edit the prompt", "bold"), id="prompt-title")
            yield Input(value=self.prompt, placeholder="type a prompt", id="prompt-input")
            yield Static(
                Content.styled("Enter: run the model on this prompt    Escape: cancel", "$foreground 60%"),
                id="prompt-hint",
            )

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
