"""The top line: which model, how big, which prompt, and what it predicts."""

from __future__ import annotations

from pathlib import Path

from textual.content import Content

from ...i18n import _
from ...text_safety import safe_line, token_label
from ...trace import Trace
from ..formatting import clip, millions, parts_off
from ..generation import GenerationSettings, settings_fields
from ..facts import final_choice
from ..styled_text import styled
from .laid import Laid


MODEL_NAME_MAX = 40  # cells of the model's name on the top line: a hub id fits, a trace's junk is cut


def model_label(trace: Trace) -> str:
    """A short name for the trace's model: the hub id, 'tiny', or a checkpoint folder's name (a
    trace that names none: 'model', in the current language), safe to show (gpt2viz.text_safety)
    and cut to MODEL_NAME_MAX cells, so the rest of the line keeps its room."""
    name = str(trace.model.get("name") or _("model"))
    kind = (trace.model.get("source") or {}).get("kind")
    return clip(Path(name).name or name if kind == "local" else name, MODEL_NAME_MAX)  # clip applies safe_line


PROMPT_MIN, PROMPT_MAX = 8, 60  # characters of the prompt the top line quotes


class TopBar(Laid):
    """One line: gpt2viz · model · parameters · dtype · prompt → next token, laid out for the
    width the bar has when it is rendered: fields are left out whole where it is short."""

    COMPONENT_CLASSES = {"top-bar--dim", "top-bar--token"}

    def _line(self, fields: list[Content | str]) -> Content:
        """The line: the app's name, then its fields one after another, a dim dot between them."""
        name = Content.styled(" gpt2viz ", "bold $background on $accent")  # a background: a style string, see pictures.py
        return Content.assemble(name, " ", Content.styled(" · ", ".top-bar--dim").join(fields))

    def _model_fields(self, trace: Trace, replay: str | None, checked) -> list[Content | str]:
        """Which model, how big, in which format, the file it was replayed from, and the check
        against transformers (gpt2viz.verify.Verification), if it ran."""
        dim = ".top-bar--dim"
        params = trace.model.get("n_params") or 0
        fields: list[Content | str] = [
            model_label(trace),
            Content.styled(_("{params} params").format(params=millions(params)), dim),
            Content.styled(safe_line(str(trace.model.get("dtype", ""))), dim),
        ]
        if replay:
            fields.append(Content.styled(_("replay of {file}").format(file=safe_line(Path(replay).name)), dim))
        if checked is not None:  # the palette's check against transformers
            mark = _("✓ = transformers") if checked.ok else _("✗ ≠ transformers")
            fields.append(Content.styled(mark, "$success" if checked.ok else "bold $error"))
        if trace.interventions:  # so nobody takes an edited pass for the model's own answer
            edited = _("edited: {parts} off").format(parts=parts_off(trace.interventions))
            fields.append(Content.styled(edited, "bold $warning"))
        return fields

    def _model_choices(self, trace: Trace, replay: str | None, checked) -> list[list[Content | str]]:
        """The model's fields, then shorter for a narrow line: without the parameter count, then
        without the number format too (the name, a replay, a check and parts switched off stay)."""
        fields = self._model_fields(trace, replay, checked)
        return [fields, [fields[0], *fields[2:]], [fields[0], *fields[3:]]]

    def _fitting(self, choices: list[list[Content | str]], width: int) -> Content:
        """The line of the first of `choices` (the fullest first) that `width` has room for, else
        of the last: a field is left out whole, never cut."""
        lines = [self._line(fields) for fields in choices]
        return next((line for line in lines if line.cell_length <= width), lines[-1])

    def draw(
        self, trace: Trace, replay: str | None = None, step: int | None = None, chosen: str | None = None, checked=None
    ) -> None:
        """Shows the facts of `trace` (and the file it was replayed from, or the generation step it is
        and the token that step actually chose, when sampling picked another than the most likely).
        The prompt is shortened to what the line has room for: the predicted token always shows."""
        token = final_choice(trace)[1]
        chosen = None if chosen is None else token_label(chosen)
        extra = []
        if step is not None:
            extra.append(Content.styled(_("generation step {step}").format(step=step), ".top-bar--dim"))
        if chosen is not None and chosen != token:
            said = _("→ {token} · sampled instead {chosen}")
        else:
            said = "→ {token}"  # no words to translate
        tokens = {"token": (token, ".top-bar--token"), "chosen": (chosen or "", ".top-bar--token")}
        answer = Content.assemble(" ", styled(said, ".top-bar--dim", **tokens))
        models = self._model_choices(trace, replay, checked)

        def build(width: int) -> Content:
            for model in models:  # the fullest that leaves the prompt some room
                fields = [*model, *extra]
                used = Content.assemble(self._line([*fields, '""']), answer).cell_length
                if width - used >= PROMPT_MIN:
                    break
            room = max(PROMPT_MIN, min(PROMPT_MAX, width - used))
            return Content.assemble(self._line([*fields, f'"{clip(trace.prompt, room)}"']), answer)

        self.show(build)

    def draw_generation(self, trace: Trace, settings: GenerationSettings, replay: str | None = None, checked=None) -> None:
        """Shows the model and the settings of the generation on screen; where the line is short,
        the model's size goes first, then the word 'sampling', then the token count (the status
        line under the text says it too), and only then the number format (it changes every number)."""
        full, sized, named = self._model_choices(trace, replay, checked)  # all; without the size; nor the format
        wide, short = settings_fields(settings), settings_fields(settings, short=True)
        choices = [full + wide, sized + wide, sized + short, sized + short[1:], named + short, named + short[1:]]
        self.show(lambda width: self._fitting(choices, width))

    def draw_lab(self, trace: Trace, replay: str | None = None, checked=None) -> None:
        """Shows the model the cost lab measures."""
        lab = Content.styled(_("cost lab"), "bold")
        choices = [model + [lab] for model in self._model_choices(trace, replay, checked)]
        self.show(lambda width: self._fitting(choices, width))
