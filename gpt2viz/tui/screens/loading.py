"""The loading screen: progress while the weights load and the forward pass runs."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, LoadingIndicator, ProgressBar, Static

from ..formatting import clip
from ..widgets.room_notice import RoomNotice


class LoadingScreen(Screen):
    """Shows what is being loaded and run, step by step, or why it failed."""

    BINDINGS = [
        Binding("escape", "cancel", "back to the last trace", id="cancel-run", tooltip="Stop this run and go back"),
    ]

    def __init__(self, model: str, prompt: str, can_cancel: bool = False) -> None:
        super().__init__()
        self.model = model
        self.prompt = prompt
        self.can_cancel = can_cancel
        self.failed = False

    def compose(self) -> ComposeResult:
        with Vertical(id="loading-box"):
            yield Static(Content.styled("gpt2viz", "bold $accent"), id="loading-title")
            yield Static(
                Content.assemble(("model   ", "$foreground 60%"), self.model, "\n", ("prompt  ", "$foreground 60%"), f'"{clip(self.prompt, 60)}"'),
                id="loading-what",
            )
            yield ProgressBar(total=3, show_eta=False, show_percentage=False, id="loading-progress")
            yield Static(Content("Starting…"), id="loading-step")
            yield LoadingIndicator(id="loading-indicator")
            yield Static(id="loading-error")
        yield RoomNotice(id="room-notice")
        yield Footer()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel":
            return self.can_cancel and not self.failed
        return True

    def progress(self, step: int, total: int, text: str) -> None:
        """Shows that step `step` of `total` is under way."""
        bar = self.query_one(ProgressBar)
        bar.update(total=total, progress=step - 1)
        self.query_one("#loading-step", Static).update(Content(f"{step}/{total}  {text}"))

    def fail(self, text: str) -> None:
        """Shows why loading failed; the only way on is q."""
        self.failed = True
        self.query_one(LoadingIndicator).display = False
        self.query_one("#loading-step", Static).update(Content.styled("Loading failed.", "bold $error"))
        self.query_one("#loading-error", Static).update(
            Content.assemble((text, "$error"), "\n\n", ("Press q to quit.", "$foreground 60%"))
        )
        self.refresh_bindings()

    def action_cancel(self) -> None:
        self.app.cancel_run()
