"""The loading screen: progress while the weights load and the forward pass runs."""

from __future__ import annotations

import time

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import LoadingIndicator, ProgressBar, Static

from ...i18n import N_, _
from ...text_safety import safe_line, safe_text
from ..formatting import clip, fit
from ..language import key_name
from ..widgets.footer import AppFooter
from .base import AppScreen


class LoadingScreen(AppScreen[None]):
    """Shows what is being loaded and run, step by step, or why it failed. The app pushes it when
    the session starts a run and closes it when the run ends."""

    BINDINGS = [
        Binding("escape", "cancel", N_("back to the last trace"), id="cancel-run", tooltip=N_("Stop this run and go back")),
        Binding("c", "cancel_download", N_("cancel download"), id="cancel-download",
                tooltip=N_("Stop the download and leave; the next run goes on from where it stopped")),
    ]

    def __init__(self, session, model: str, prompt: str, can_cancel: bool = False) -> None:
        super().__init__(session)
        self.model = model
        self.prompt = prompt
        self.can_cancel = can_cancel
        self.failed = False
        self.downloading = False  # whether a hub download is under way (the cancel key is offered)
        # What the app last reported (already in the language of the moment it was sent): kept
        # so that a switch of language redraws the screen around it.
        self._step: tuple[int, int, str] | None = None
        self._failure: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="loading-box"):
            yield Static(Content.styled("gpt2viz", "bold $accent"), id="loading-title")
            yield Static(self._what(), id="loading-what")
            yield ProgressBar(total=3, show_eta=False, show_percentage=False, id="loading-progress")
            yield Static(Content(_("Starting…")), id="loading-step")
            yield ProgressBar(show_eta=False, id="download-progress")  # bytes of a hub download
            yield Static(id="download-text")
            yield LoadingIndicator(id="loading-indicator")
            yield Static(id="loading-error")
        yield AppFooter()

    def _what(self) -> Content:
        """The model and the prompt, their labels padded to one width (by cells: 模型 is 4)."""
        labels = _("model"), _("prompt")
        width = max(cell_len(label) for label in labels) + 2
        model, prompt = (fit(label, width) for label in labels)
        return Content.assemble(
            (model, "$foreground 60%"), safe_line(self.model), "\n", (prompt, "$foreground 60%"), f'"{clip(self.prompt, 60)}"'
        )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel":
            return self.can_cancel and not self.failed
        if action == "cancel_download":
            return self.downloading and not self.failed
        return True

    def progress(self, step: int, total: int, text: str) -> None:
        """Shows that step `step` of `total` is under way."""
        self._step = (step, total, text)
        bar = self.query_one(ProgressBar)
        bar.update(total=total, progress=step - 1)
        self.query_one("#loading-step", Static).update(Content(f"{step}/{total}  {safe_line(text)}"))
        if step > 1:  # the download, if there was one, is over: its last line would read as still going
            self.query_one("#download-progress", ProgressBar).display = False
            self.query_one("#download-text", Static).update("")

    def download(self, progress) -> None:
        """Shows how far a hub download has come: the file, the bytes of all files, rate and time left."""
        bar = self.query_one("#download-progress", ProgressBar)
        if progress.locating:  # where the file is, not known yet (the package index is asked)
            bar.display = True
            bar.update(total=None)
            self.query_one("#download-text", Static).update(
                Content(_("{file}: asking your package index where it is…").format(file=safe_line(progress.file))))
            return
        now = time.monotonic()
        if self._download_start is None:
            self._download_start = (now, progress.done)
        started, done_then = self._download_start
        rate = (progress.done - done_then) / max(now - started, 1e-6)  # bytes per second, this run
        measured = now - started >= 1.0  # a rate over less than a second says little
        left = (progress.total - progress.done) / rate if rate > 0 and measured else None
        bar.display = True
        bar.update(total=max(progress.total, 1), progress=progress.done)
        text = _("{file}: {done} of {total} MB · {rate} MB/s · {left} left").format(
            file=safe_line(progress.file), done=f"{progress.done / 1e6:,.1f}", total=f"{progress.total / 1e6:,.1f}",
            rate=f"{rate / 1e6:,.1f}" if measured else "…", left="…" if left is None else _("{seconds} s").format(seconds=f"{left:,.0f}"),
        )
        self.query_one("#download-text", Static).update(Content(text))
        downloading = progress.done < progress.total
        if downloading != self.downloading:
            self.downloading = downloading
            self.refresh_bindings()

    _download_start: tuple[float, int] | None = None

    def fail(self, text: str) -> None:
        """Shows why loading failed; the only way on is q."""
        self.failed = True
        self.downloading = False
        self._failure = text
        self.query_one(LoadingIndicator).display = False
        self.query_one("#loading-step", Static).update(Content.styled(_("Loading failed."), "bold $error"))
        quit_key = _("Press {key} to quit.").format(key=key_name(self, "quit"))
        self.query_one("#loading-error", Static).update(
            Content.assemble((safe_text(text), "$error"), "\n\n", (quit_key, "$foreground 60%"))
        )
        self.refresh_bindings()

    def redraw_language(self) -> None:
        """The labels in the new language; the step and the failure as the app reported them
        (the next step comes in the new language)."""
        self.query_one("#loading-what", Static).update(self._what())
        if self._failure is not None:
            self.fail(self._failure)
        elif self._step is not None:
            self.progress(*self._step)
        else:
            self.query_one("#loading-step", Static).update(Content(_("Starting…")))

    def action_cancel(self) -> None:
        """Back to the trace on show: the run is dropped."""
        self.session.cancel_run()
        self.close()

    def action_cancel_download(self) -> None:
        """Leaving during a download is cancelling it (the app says so on the way out)."""
        self.app.action_quit()
