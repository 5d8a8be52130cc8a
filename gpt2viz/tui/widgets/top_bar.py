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
from ..styled_text import styled


def model_label(trace: Trace) -> str:
    """A short name for the trace's model: the hub id, 'tiny', or a checkpoint folder's name (a
    trace that names none: 'model', in the current language)."""
    name = str(trace.model.get("name") or _("model"))
    kind = (trace.model.get("source") or {}).get("kind")
    return Path(name).name or name if kind == "local" else name


PROMPT_MIN, PROMPT_MAX = 8, 60  # characters of the prompt the top line quotes


class TopBar(Static):
    """One line: gpt2viz · model · parameters · dtype · prompt → next token."""

    COMPONENT_CLASSES = {"top-bar--dim", "top-bar--token"}

    def _line(self, fields: list[Content | str]) -> Content:
        """The line: the app's name, then its fields one after another, a dim dot between them."""
        name = Content.styled(" gpt2viz ", "bold $background on $accent")  # a background: a style string, see pictures.py
        return Content.assemble(name, " ", Content.styled(" · ", ".top-bar--dim").join(fields))

    def _model_fields(self, trace: Trace, replay: str | None) -> list[Content | str]:
        """Which model, how big, in which format, and the file it was replayed from."""
        dim = ".top-bar--dim"
        params = trace.model.get("n_params") or 0
        fields: list[Content | str] = [
            model_label(trace),
            Content.styled(_("{params} params").format(params=millions(params)), dim),
            Content.styled(str(trace.model.get("dtype", "")), dim),
        ]
        if replay:
            fields.append(Content.styled(_("replay of {file}").format(file=Path(replay).name), dim))
        checked = getattr(self.app, "verification", None)
        if checked is not None:  # the palette's check against transformers
            mark = _("✓ = transformers") if checked.ok else _("✗ ≠ transformers")
            fields.append(Content.styled(mark, "$success" if checked.ok else "bold $error"))
        if trace.interventions:  # so nobody takes an edited pass for the model's own answer
            edited = _("edited: {parts} off").format(parts=", ".join(trace.interventions))
            fields.append(Content.styled(edited, "bold $warning"))
        return fields

    def draw(self, trace: Trace, replay: str | None = None, step: int | None = None, chosen: str | None = None) -> None:
        """Shows the facts of `trace` (and the file it was replayed from, or the generation step it is
        and the token that step actually chose, when sampling picked another than the most likely).
        The prompt is shortened to what the line has room for: the predicted token always shows."""
        token = final_choice(trace)[1]
        fields = self._model_fields(trace, replay)
        if step is not None:
            fields.append(Content.styled(_("generation step {step}").format(step=step), ".top-bar--dim"))
        if chosen is not None and chosen != token:
            said = _("→ {token} · sampled instead {chosen}")
        else:
            said = "→ {token}"  # no words to translate
        tokens = {"token": (token, ".top-bar--token"), "chosen": (chosen or "", ".top-bar--token")}
        answer = Content.assemble(" ", styled(said, ".top-bar--dim", **tokens))
        width = self.size.width or self.app.size.width
        used = Content.assemble(self._line([*fields, '""']), answer).cell_length
        room = max(PROMPT_MIN, min(PROMPT_MAX, width - used))
        self.update(Content.assemble(self._line([*fields, f'"{clip(trace.prompt, room)}"']), answer))
        self._redraw = lambda: self.draw(trace, replay, step, chosen)

    def on_resize(self) -> None:
        if self._redraw is not None:
            self._redraw()

    _redraw = None

    def draw_generation(self, trace: Trace, settings: GenerationSettings, replay: str | None = None) -> None:
        """Shows the model and the settings of the generation on screen."""
        self.update(self._line([*self._model_fields(trace, replay), settings_label(settings)]))

    def draw_lab(self, trace: Trace, replay: str | None = None) -> None:
        """Shows the model the cost lab measures."""
        self.update(self._line([*self._model_fields(trace, replay), Content.styled(_("cost lab"), "bold")]))
