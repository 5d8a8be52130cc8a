"""The top line: which model, how big, which prompt, and what it predicts."""

from __future__ import annotations

from pathlib import Path

from textual.content import Content
from textual.widgets import Static

from ...trace import Trace
from ..formatting import clip, millions
from ..generation import GenerationSettings, settings_label
from ..facts import final_choice


def model_label(trace: Trace) -> str:
    """A short name for the trace's model: the hub id, 'tiny', or a checkpoint folder's name."""
    name = str(trace.model.get("name") or "model")
    kind = (trace.model.get("source") or {}).get("kind")
    return Path(name).name or name if kind == "local" else name


class TopBar(Static):
    """One line: gpt2viz · model · parameters · dtype · prompt → next token."""

    COMPONENT_CLASSES = {"top-bar--dim", "top-bar--token"}

    def _model_parts(self, trace: Trace, replay: str | None) -> list:
        params = trace.model.get("n_params") or 0
        parts: list = [
            (" gpt2viz ", "bold $background on $accent"),  # a background: a style string, see pictures.py
            " ",
            model_label(trace),
            (f" · {millions(params)} params · {trace.model.get('dtype', '')}", ".top-bar--dim"),
        ]
        if replay:
            parts.append((f" · replay of {Path(replay).name}", ".top-bar--dim"))
        return parts

    def draw(self, trace: Trace, replay: str | None = None, step: int | None = None, chosen: str | None = None) -> None:
        """Shows the facts of `trace` (and the file it was replayed from, or the generation step it is
        and the token that step actually chose, when sampling picked another than the most likely)."""
        _, token, _ = final_choice(trace)
        parts = self._model_parts(trace, replay)
        if step is not None:
            parts.append((f" · generation step {step}", ".top-bar--dim"))
        parts += [(" · ", ".top-bar--dim"), f'"{clip(trace.prompt, 36)}"', (" → ", ".top-bar--dim"), (token, ".top-bar--token")]
        if chosen is not None and chosen != token:
            parts += [(" · sampled ", ".top-bar--dim"), (chosen, ".top-bar--token")]
        self.update(Content.assemble(*parts))

    def draw_generation(self, trace: Trace, settings: GenerationSettings, replay: str | None = None) -> None:
        """Shows the model and the settings of the generation on screen."""
        parts = self._model_parts(trace, replay)
        parts += [(" · ", ".top-bar--dim"), (settings_label(settings), "")]
        self.update(Content.assemble(*parts))
