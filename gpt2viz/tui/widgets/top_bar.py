"""The top line: which model, how big, which prompt, and what it predicts."""

from __future__ import annotations

from pathlib import Path

from textual.content import Content
from textual.widgets import Static

from ...i18n import _
from ...trace import Trace
from ..formatting import clip, millions
from ..generation import GenerationSettings, settings_label
from ..facts import final_choice


def model_label(trace: Trace) -> str:
    """A short name for the trace's model: the hub id, 'tiny', or a checkpoint folder's name."""
    name = str(trace.model.get("name") or "model")
    kind = (trace.model.get("source") or {}).get("kind")
    return Path(name).name or name if kind == "local" else name


PROMPT_MIN, PROMPT_MAX = 8, 60  # characters of the prompt the top line quotes


class TopBar(Static):
    """One line: gpt2viz · model · parameters · dtype · prompt → next token."""

    COMPONENT_CLASSES = {"top-bar--dim", "top-bar--token"}

    def _model_parts(self, trace: Trace, replay: str | None) -> list:
        params = trace.model.get("n_params") or 0
        parts: list = [
            (" gpt2viz ", "bold $background on $accent"),  # a background: a style string, see pictures.py
            " ",
            model_label(trace),
            (" · " + _("{params} params").format(params=millions(params)), ".top-bar--dim"),
            (f" · {trace.model.get('dtype', '')}", ".top-bar--dim"),
        ]
        if replay:
            parts.append((" · " + _("replay of {file}").format(file=Path(replay).name), ".top-bar--dim"))
        return parts

    def draw(self, trace: Trace, replay: str | None = None, step: int | None = None, chosen: str | None = None) -> None:
        """Shows the facts of `trace` (and the file it was replayed from, or the generation step it is
        and the token that step actually chose, when sampling picked another than the most likely).
        The prompt is shortened to what the line has room for: the predicted token always shows."""
        token = final_choice(trace)[1]
        head = self._model_parts(trace, replay)
        if step is not None:
            head.append((" · " + _("generation step {step}").format(step=step), ".top-bar--dim"))
        tail = [(" → ", ".top-bar--dim"), (token, ".top-bar--token")]
        if chosen is not None and chosen != token:
            tail += [(" · " + _("sampled instead") + " ", ".top-bar--dim"), (chosen, ".top-bar--token")]
        width = self.size.width or self.app.size.width
        used = Content.assemble(*head, " · ", '""', *tail).cell_length
        room = max(PROMPT_MIN, min(PROMPT_MAX, width - used))
        self.update(Content.assemble(*head, (" · ", ".top-bar--dim"), f'"{clip(trace.prompt, room)}"', *tail))
        self._redraw = lambda: self.draw(trace, replay, step, chosen)

    def on_resize(self) -> None:
        if self._redraw is not None:
            self._redraw()

    _redraw = None

    def draw_generation(self, trace: Trace, settings: GenerationSettings, replay: str | None = None) -> None:
        """Shows the model and the settings of the generation on screen."""
        parts = self._model_parts(trace, replay)
        parts += [(" · ", ".top-bar--dim"), (settings_label(settings), "")]
        self.update(Content.assemble(*parts))

    def draw_lab(self, trace: Trace, replay: str | None = None) -> None:
        """Shows the model the cost lab measures."""
        parts = self._model_parts(trace, replay)
        parts += [(" · ", ".top-bar--dim"), (_("cost lab"), "bold")]
        self.update(Content.assemble(*parts))
