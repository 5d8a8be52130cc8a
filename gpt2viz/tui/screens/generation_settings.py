"""The generation settings form: new tokens, greedy or sampling, the KV cache."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Button, Input, Label, Select, Static, Switch

from ...errors import SettingError
from ...generate import TOP_K_OVER_VOCAB, SamplingSettings
from ...i18n import N_, _, count
from ...i18n.layout import between_wide
from ...model.config import LIMITS
from ...model.precision import PRECISIONS
from ...text_safety import safe_text
from ..generation import GenerationSettings
from ..language import key_name
from ..table_layout import chip_lines
from ..widgets.laid import Laid
from .base import AppModal

SAMPLING_FIELDS = ("temperature", "top-k", "top-p", "seed")
MAX_NEW_TOKENS = LIMITS["n_ctx"]  # as --generate: no model gpt2viz loads holds more positions
# Each row's label (msgids, translated where shown; top-k and top-p stay as they are).
LABELS = {
    "new-tokens": N_("new tokens"),
    "use-cache": N_("KV cache"),
    "sampling": N_("sampling"),
    "temperature": N_("temperature"),
    "top-k": "top-k",
    "top-p": "top-p",
    "seed": N_("seed"),
    "precision": N_("precision"),
}
# What each row takes; a switch's hint follows its position.
HINTS = {
    "new-tokens": N_("at most; stops earlier at the end of text"),
    "temperature": N_("> 0: < 1 sharper, > 1 flatter"),
    "top-k": N_("the k most likely; blank: all"),
    "top-p": N_("nucleus mass in (0, 1]; blank: all"),
    "seed": N_("same seed, same text; blank: random"),
    "precision": N_("another format reloads the model"),
}
SWITCH_HINTS = {
    "use-cache": {True: N_("on: K and V kept between steps"), False: N_("off: every step recomputes it all")},
    "sampling": {True: N_("on: the token is drawn at random"), False: N_("off: greedy, the most likely token")},
}


def _problem(field: str, message: str, **params: object) -> str:
    """A validation message (a msgid with `{setting}`, as the core's SettingError messages have)
    naming the form's field: 'top-k must be an integer >= 1, got 0'."""
    return between_wide(_(message).format(setting=_(LABELS[field]), **params))


def _core_problem(err: SettingError, field: str, typed: str) -> str:
    """The core's SettingError naming the form's field, with the value as the user typed it
    ('-1', where the core would say '-1.0')."""
    return _problem(field, err.message, **{**err.params, "value": typed})


def parse_settings(
    values: dict[str, str], sampling: bool, use_cache: bool, precision: str = "float32", vocab: int | None = None,
) -> tuple[GenerationSettings | None, dict[str, str]]:
    """Settings from the form's texts, or None and a message per field that is wrong: every
    field's at once.

    The sampling fields are checked by SamplingSettings itself, one at a time, so each message
    lands under its own field. New tokens are bounded as `--generate` is (no model gpt2viz loads
    holds more positions; a run that reaches its model's context stops there and says so), and,
    with the model's `vocab`, a top-k beyond the vocabulary is refused as the command line does.
    """
    errors: dict[str, str] = {}
    text = values.get("new-tokens", "").strip()
    max_new = None
    try:
        max_new = int(text)
        if not 1 <= max_new <= MAX_NEW_TOKENS:
            raise ValueError
    except ValueError:
        if not text:
            errors["new-tokens"] = _problem("new-tokens", N_("{setting}: an integer from 1 to {max} is needed"),
                                            max=count(MAX_NEW_TOKENS))
        elif max_new is None:  # not an integer: the text quoted, as the other fields quote text
            errors["new-tokens"] = _problem("new-tokens", N_("{setting} must be an integer from 1 to {max}, got {value!r}"),
                                            max=count(MAX_NEW_TOKENS), value=text)
        else:  # an integer out of range: as typed, as the other fields write numbers
            errors["new-tokens"] = _problem("new-tokens", N_("{setting} must be an integer from 1 to {max}, got {value}"),
                                            max=count(MAX_NEW_TOKENS), value=text)
        max_new = None
    sampling_settings = SamplingSettings()
    if sampling:
        parsed: dict[str, object] = {}
        for name, kind, key in (("temperature", float, "temperature"), ("top-k", int, "top_k"), ("top-p", float, "top_p"), ("seed", int, "seed")):
            raw = values.get(name, "").strip()
            if not raw:
                if name == "temperature":
                    errors[name] = _problem(name, N_("{setting} is needed to sample (0 would be greedy)"))
                continue
            try:
                value = kind(raw)
            except ValueError:
                if kind is int:
                    errors[name] = _problem(name, N_("{setting} must be an integer, got {value!r}"), value=raw)
                else:
                    errors[name] = _problem(name, N_("{setting} must be a number, got {value!r}"), value=raw)
                continue
            try:
                SamplingSettings(**{key: value})
            except SettingError as err:
                errors[name] = _core_problem(err, name, raw)
                continue
            if key == "top_k" and vocab is not None and value > vocab:
                errors[name] = _problem(name, TOP_K_OVER_VOCAB, k=raw, vocab=count(vocab))
                continue
            parsed[key] = value
        if "temperature" in parsed and parsed["temperature"] == 0:
            errors["temperature"] = _problem(
                "temperature", N_("{setting} must be > 0 to sample (0 is greedy: switch sampling off)")
            )
        if not errors:
            try:  # each value was checked above; this is for a rule between them, should one come
                sampling_settings = SamplingSettings(**parsed)  # type: ignore[arg-type]
            except SettingError as err:
                field = err.setting.replace("_", "-") if err.setting.replace("_", "-") in LABELS else "temperature"
                errors[field] = err.naming(_(LABELS[field]))
    if errors or max_new is None:
        return None, errors
    return GenerationSettings(max_new, sampling_settings, use_cache, precision), {}


class NumberInput(Input):
    """A field of the form. Each takes a number, so a letter that is no part of one (any but the
    exponent's e) is not the field's key: it is left to the form's bindings (L, the language)."""

    def check_consume_key(self, key: str, character: str | None) -> bool:
        if character is not None and character.isalpha() and character not in "eE":
            return False
        return super().check_consume_key(key, character)


class FormSwitch(Switch, inherit_bindings=False):
    """A switch that only Space (or a click) flips: in this form Enter means "generate"."""

    BINDINGS = [Binding("space", "toggle_switch", N_("toggle"), show=False)]


class FormSelect(Select, inherit_bindings=False):
    """A drop-down that opens with space or the arrows: in this form Enter means "generate"."""

    BINDINGS = [Binding("down,space,up", "show_overlay", N_("open"), show=False)]


class SettingsScreen(AppModal[GenerationSettings | None]):
    """Edit the generation settings; Enter applies them and generates again, Escape keeps them."""

    BINDINGS = [
        Binding("escape", "cancel", N_("cancel"), id="cancel-settings", tooltip=N_("Keep the current settings")),
        Binding("enter", "apply", N_("generate"), id="apply-settings", tooltip=N_("Apply these settings and generate")),
        # A modal screen hides the app's keys: the language switch, again; before the focused
        # field (priority), which takes a number and leaves L alone (NumberInput).
        Binding("L", "app.switch_language", N_("中文"), id="settings-switch-language", show=False, priority=True,
                tooltip=N_("Show the app in Chinese (again: back to English)")),
        # No field takes a q (NumberInput): q quits here as everywhere, before the focused field.
        Binding("q", "app.quit", N_("quit"), id="settings-quit", show=False, priority=True, tooltip=N_("Leave gpt2viz")),
    ]
    takes_typing = True

    def __init__(self, settings: GenerationSettings, vocab: int | None = None) -> None:
        """`vocab`: the model's, which bounds top-k."""
        super().__init__()
        self.settings = settings
        self.vocab = vocab

    def _row(self, name: str, value: str, kind: str = "text") -> ComposeResult:
        with Horizontal(classes="settings-row"):
            yield Label(id=f"{name}-label", classes="settings-label")
            # The form's own checks mark a field wrong (`_check`); Textual's, which a number field
            # has, took a blank optional field (top-k, top-p, seed) for a wrong one at blur.
            yield NumberInput(value=value, id=name, type=kind, classes="settings-input", compact=True, validate_on=())
            yield Label(id=f"{name}-hint", classes="settings-hint")
        yield Static(id=f"{name}-error", classes="settings-error", markup=False)

    def _switch_row(self, name: str, value: bool) -> ComposeResult:
        with Horizontal(classes="settings-row"):
            yield Label(id=f"{name}-label", classes="settings-label")
            yield FormSwitch(value=value, id=name)
            yield Label(id=f"{name}-hint", classes="settings-hint")

    def compose(self) -> ComposeResult:
        s = self.settings
        sm = s.sampling
        with Vertical(id="settings-box"):
            yield Static(id="settings-title")
            yield from self._row("new-tokens", str(s.max_new_tokens), "integer")
            yield from self._switch_row("use-cache", s.use_cache)
            yield from self._switch_row("sampling", not sm.greedy)
            yield from self._row("temperature", f"{sm.temperature:g}" if not sm.greedy else "1", "number")
            yield from self._row("top-k", "" if sm.top_k is None else str(sm.top_k), "integer")
            yield from self._row("top-p", "" if sm.top_p is None else f"{sm.top_p:g}", "number")
            yield from self._row("seed", "" if sm.seed is None else str(sm.seed), "integer")
            with Horizontal(classes="settings-row"):
                yield Label(id="precision-label", classes="settings-label")
                yield FormSelect(
                    [(name, name) for name in PRECISIONS], value=s.precision, allow_blank=False, id="precision", compact=True
                )
                yield Label(id="precision-hint", classes="settings-hint")
            with Horizontal(id="settings-buttons"):
                yield Button("", id="apply", variant="primary", compact=True)
                yield Button("", id="cancel", compact=True)
            yield Laid(id="settings-hint")

    def typing_target(self) -> Input:
        """The first field, where the form's focus starts."""
        return self.query_one("#new-tokens", Input)

    def on_mount(self) -> None:
        self._enable_sampling(not self.settings.sampling.greedy)
        for error in self.query(".settings-error"):
            error.display = False
        self.redraw_language()

    def redraw_language(self) -> None:
        """Every text of the form in the current language; what the user typed stays."""
        self.query_one("#settings-title", Static).update(Content.styled(_("Generation settings"), "bold"))
        for name, text in LABELS.items():
            self.query_one(f"#{name}-label", Label).update(_(text))
        for name, text in HINTS.items():
            self.query_one(f"#{name}-hint", Label).update(_(text))
        for name in SWITCH_HINTS:
            self._show_switch_hint(name, self.query_one(f"#{name}", Switch).value)
        self.query_one("#apply", Button).label = _("Generate")
        self.query_one("#cancel", Button).label = _("Cancel")
        self._draw_keys()
        self._check_again()  # the messages on show, said again

    def _draw_keys(self) -> None:
        """The form's keys under it, in lines that break only between two keys."""
        keys = _(
            "{apply}: generate   {cancel}: cancel   {next}: next field   {flip}: flip a switch or open a list   "
            "{language}: {other}"
        ).format(
            apply=key_name(self, "apply"),  # Enter is the focused field's own key too: not always active
            cancel=key_name(self, "cancel"),
            next=key_name(self, "focus_next"),
            flip=self.app.get_key_display(FormSwitch.BINDINGS[0]),
            language=key_name(self, "switch_language"),
            other=_("中文"),  # the other language, named in it (as the key's own description)
        )
        items = [(item.strip(), "$foreground 60%") for item in keys.split("   ") if item.strip()]
        self.query_one("#settings-hint", Laid).show(lambda width: Content("\n").join(chip_lines(items, width, gap="   ")))

    def _show_switch_hint(self, name: str, on: bool) -> None:
        self.query_one(f"#{name}-hint", Label).update(_(SWITCH_HINTS[name][on]))

    def _enable_sampling(self, on: bool) -> None:
        for name in SAMPLING_FIELDS:
            self.query_one(f"#{name}", Input).disabled = not on

    def on_switch_changed(self, event: Switch.Changed) -> None:
        name = event.switch.id or ""
        self._show_switch_hint(name, event.value)
        if name == "sampling":
            self._enable_sampling(event.value)
        self._check_again()  # greedy: the sampling fields' messages no longer apply

    def values(self) -> dict[str, str]:
        """The texts of the form's fields."""
        return {inp.id: inp.value for inp in self.query(Input) if inp.id}

    def _check(self) -> tuple[GenerationSettings | None, dict[str, str]]:
        """The settings the form holds, with what is wrong shown under each field."""
        sampling = self.query_one("#sampling", Switch).value
        precision = str(self.query_one("#precision", Select).value)
        settings, errors = parse_settings(self.values(), sampling, self.query_one("#use-cache", Switch).value, precision,
                                          self.vocab)
        for inp in self.query(Input):
            error = self.query_one(f"#{inp.id}-error", Static)
            message = errors.get(inp.id or "", "")
            error.update(safe_text(message))
            error.display = bool(message)
            inp.set_class(bool(message), "-invalid")
        return settings, errors

    def apply(self) -> None:
        """Checks the form; closes it with the new settings, or shows what is wrong under each field."""
        settings, errors = self._check()
        if settings is not None:
            self.close(settings)
        else:
            first = next(name for name in ("new-tokens", *SAMPLING_FIELDS) if name in errors)
            self.query_one(f"#{first}", Input).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self._check_again()

    def _check_again(self) -> None:
        """Once the form has said what is wrong, each change (a field typed in, a switch flipped,
        the language) checks it again, so a mended field's message goes as it is mended (a crash
        walk read 'an integer from 1 to 4,096 is needed' under a field holding 34)."""
        if any(error.display for error in self.query(".settings-error")):
            self._check()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.apply()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "apply":
            self.apply()
        else:
            self.close(None)

    def action_apply(self) -> None:
        self.apply()

    def action_cancel(self) -> None:
        self.close(None)
