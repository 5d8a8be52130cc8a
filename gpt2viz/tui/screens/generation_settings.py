"""The generation settings form: new tokens, greedy or sampling, the KV cache."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static, Switch

from ...errors import SettingError
from ...generate import SamplingSettings
from ...model.precision import PRECISIONS
from ..generation import GenerationSettings

SAMPLING_FIELDS = ("temperature", "top-k", "top-p", "seed")
# The form's field for each setting the core names in a SettingError.
FIELD_OF_SETTING = {"temperature": "temperature", "top_k": "top-k", "top_p": "top-p", "seed": "seed"}
SWITCH_HINTS = {
    "use-cache": {True: "on: K and V kept between steps", False: "off: every step recomputes it all"},
    "sampling": {True: "on: the token is drawn at random", False: "off: greedy, the most likely token"},
}


def _message(err: SettingError) -> str:
    """A validation message naming the form's field: 'top-k must be an integer >= 1, got 0'."""
    return f"{FIELD_OF_SETTING.get(err.setting, err.setting)} {err.problem}"


PRECISION_HINT = "another format reloads the model"


def parse_settings(
    values: dict[str, str], sampling: bool, use_cache: bool, precision: str = "float32"
) -> tuple[GenerationSettings | None, dict[str, str]]:
    """Settings from the form's texts, or None and a message per field that is wrong.

    The sampling fields are checked by SamplingSettings itself, one at a time, so each message
    lands under its own field.
    """
    errors: dict[str, str] = {}
    text = values.get("new-tokens", "").strip()
    max_new = None
    try:
        max_new = int(text)
        if max_new < 1:
            raise ValueError
    except ValueError:
        errors["new-tokens"] = f"new tokens must be a whole number >= 1, got {text!r}"
    sampling_settings = SamplingSettings()
    if sampling:
        parsed: dict[str, object] = {}
        for name, kind, key in (("temperature", float, "temperature"), ("top-k", int, "top_k"), ("top-p", float, "top_p"), ("seed", int, "seed")):
            raw = values.get(name, "").strip()
            if not raw:
                if name == "temperature":
                    errors[name] = "temperature is needed to sample (0 would be greedy)"
                continue
            try:
                value = kind(raw)
            except ValueError:
                what = "a whole number" if kind is int else "a number"
                errors[name] = f"{name} must be {what}, got {raw!r}"
                continue
            if key != "seed":
                try:
                    SamplingSettings(**{key: value})
                except SettingError as err:
                    errors[name] = _message(err)
                    continue
            parsed[key] = value
        if "temperature" in parsed and parsed["temperature"] == 0:
            errors["temperature"] = "temperature must be > 0 to sample (0 is greedy: switch sampling off)"
        if not errors:
            try:
                sampling_settings = SamplingSettings(**parsed)  # type: ignore[arg-type]
            except SettingError as err:
                errors[FIELD_OF_SETTING.get(err.setting, "temperature")] = _message(err)
    if errors or max_new is None:
        return None, errors
    return GenerationSettings(max_new, sampling_settings, use_cache, precision), {}


class FormSwitch(Switch, inherit_bindings=False):
    """A switch that only Space (or a click) flips: in this form Enter means "generate"."""

    BINDINGS = [Binding("space", "toggle_switch", "toggle", show=False)]


class FormSelect(Select, inherit_bindings=False):
    """A drop-down that opens with space or the arrows: in this form Enter means "generate"."""

    BINDINGS = [Binding("down,space,up", "show_overlay", "open", show=False)]


class SettingsScreen(ModalScreen[GenerationSettings | None]):
    """Edit the generation settings; Enter applies them and generates again, Escape keeps them."""

    BINDINGS = [
        Binding("escape", "cancel", "cancel", id="cancel-settings", tooltip="Keep the current settings"),
        Binding("enter", "apply", "generate", id="apply-settings", tooltip="Apply these settings and generate"),
    ]

    def __init__(self, settings: GenerationSettings) -> None:
        super().__init__()
        self.settings = settings

    def _row(self, name: str, label: str, value: str, hint: str, kind: str = "text") -> ComposeResult:
        with Horizontal(classes="settings-row"):
            yield Label(label, classes="settings-label")
            yield Input(value=value, id=name, type=kind, classes="settings-input", compact=True)
            yield Label(hint, classes="settings-hint")
        yield Static(id=f"{name}-error", classes="settings-error", markup=False)

    def compose(self) -> ComposeResult:
        s = self.settings
        sm = s.sampling
        with Vertical(id="settings-box"):
            yield Static(Content.styled("Generation settings", "bold"), id="settings-title")
            yield from self._row("new-tokens", "new tokens", str(s.max_new_tokens), "at most; stops earlier at the end of text", "integer")
            with Horizontal(classes="settings-row"):
                yield Label("KV cache", classes="settings-label")
                yield FormSwitch(value=s.use_cache, id="use-cache")
                yield Label(SWITCH_HINTS["use-cache"][s.use_cache], id="use-cache-hint", classes="settings-hint")
            with Horizontal(classes="settings-row"):
                yield Label("sampling", classes="settings-label")
                yield FormSwitch(value=not sm.greedy, id="sampling")
                yield Label(SWITCH_HINTS["sampling"][not sm.greedy], id="sampling-hint", classes="settings-hint")
            yield from self._row("temperature", "temperature", f"{sm.temperature:g}" if not sm.greedy else "1", "> 0: < 1 sharper, > 1 flatter", "number")
            yield from self._row("top-k", "top-k", "" if sm.top_k is None else str(sm.top_k), "the k most likely; blank: all", "integer")
            yield from self._row("top-p", "top-p", "" if sm.top_p is None else f"{sm.top_p:g}", "nucleus mass in (0, 1]; blank: all", "number")
            yield from self._row("seed", "seed", "" if sm.seed is None else str(sm.seed), "same seed, same text; blank: random", "integer")
            with Horizontal(classes="settings-row"):
                yield Label("precision", classes="settings-label")
                yield FormSelect(
                    [(name, name) for name in PRECISIONS], value=s.precision, allow_blank=False, id="precision", compact=True
                )
                yield Label(PRECISION_HINT, classes="settings-hint")
            with Horizontal(id="settings-buttons"):
                yield Button("Generate", id="apply", variant="primary", compact=True)
                yield Button("Cancel", id="cancel", compact=True)
            yield Static(
                Content.styled("Enter: generate   Escape: cancel   Tab: next field   Space: flip a switch or open a list", "$foreground 60%"),
                id="settings-hint",
            )

    def on_mount(self) -> None:
        self._enable_sampling(not self.settings.sampling.greedy)
        for error in self.query(".settings-error"):
            error.display = False

    def _enable_sampling(self, on: bool) -> None:
        for name in SAMPLING_FIELDS:
            self.query_one(f"#{name}", Input).disabled = not on

    def on_switch_changed(self, event: Switch.Changed) -> None:
        name = event.switch.id or ""
        self.query_one(f"#{name}-hint", Label).update(SWITCH_HINTS[name][event.value])
        if name == "sampling":
            self._enable_sampling(event.value)

    def values(self) -> dict[str, str]:
        """The texts of the form's fields."""
        return {inp.id: inp.value for inp in self.query(Input) if inp.id}

    def apply(self) -> None:
        """Checks the form; closes it with the new settings, or shows what is wrong under each field."""
        sampling = self.query_one("#sampling", Switch).value
        precision = str(self.query_one("#precision", Select).value)
        settings, errors = parse_settings(self.values(), sampling, self.query_one("#use-cache", Switch).value, precision)
        for inp in self.query(Input):
            error = self.query_one(f"#{inp.id}-error", Static)
            message = errors.get(inp.id or "", "")
            error.update(message)
            error.display = bool(message)
            inp.set_class(bool(message), "-invalid")
        if settings is not None:
            self.dismiss(settings)
        else:
            first = next(name for name in ("new-tokens", *SAMPLING_FIELDS) if name in errors)
            self.query_one(f"#{first}", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.apply()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "apply":
            self.apply()
        else:
            self.dismiss(None)

    def action_apply(self) -> None:
        self.apply()

    def action_cancel(self) -> None:
        self.dismiss(None)
