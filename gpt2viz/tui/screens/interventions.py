"""The "what if" menu: which part of the model to switch off, offered for the stage on screen."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ...i18n import N_, _, ngettext
from ...interventions import Ablation
from ...trace import Trace
from ..facts import hook_event
from ..stages import Stage
from .base import AppModal

TOP_NEURONS = 5  # the most active neurons at the last position, offered together


def ablation_choices(trace: Trace, stage: Stage, head: int) -> list[tuple[str, Ablation]]:
    """(label, ablation) pairs that make sense at `stage` (none outside the blocks), the stage's own
    part first: the head shown on an attention stage, the MLP on an MLP stage."""
    layer = stage.layer
    if layer is None:
        return []
    mlp = (_("the MLP of block {layer}").format(layer=layer), Ablation("mlp", layer))
    choices = [mlp] if stage.kind in ("ln2", "mlp", "mlp_out") else []
    if stage.kind in ("qkv", "scores", "pattern", "heads", "attn_out"):
        choices += [
            (_("head {head} of block {layer}: set to zero").format(head=head, layer=layer), Ablation("head", layer, head=head)),
            (
                _("head {head} of block {layer}: set to its mean over the positions").format(head=head, layer=layer),
                Ablation("head", layer, head=head, how="mean"),
            ),
        ]
    choices.append((_("every head of block {layer}").format(layer=layer), Ablation("heads", layer)))
    if stage.kind in ("ln2", "mlp", "mlp_out"):
        top = [n["index"] for n in (hook_event(trace, "mlp.hook_post", layer).get("top_neurons") or [])][:TOP_NEURONS]
        if top:
            label = ngettext(
                "the {n} most active neuron of block {layer}'s MLP, at the last position",
                "the {n} most active neurons of block {layer}'s MLP, at the last position",
                len(top),
            ).format(n=len(top), layer=layer)
            choices.append((label, Ablation("neurons", layer, neurons=tuple(top))))
    if mlp not in choices:
        choices.append(mlp)
    choices.append((_("the whole of block {layer} (attention and MLP)").format(layer=layer), Ablation("block", layer)))
    return choices


class InterventionMenu(AppModal[Ablation | None]):
    """Lists what can be switched off here; Enter picks one, Escape leaves the model as it is."""

    BINDINGS = [
        Binding("escape", "cancel", N_("cancel"), id="cancel-intervention", tooltip=N_("Switch nothing off")),
        Binding("q", "app.quit", N_("quit"), id="intervention-quit", show=False, tooltip=N_("Leave gpt2viz")),
        # A modal screen hides the app's keys: the language switch, again, for a list of words.
        Binding("L", "app.switch_language", N_("中文"), id="intervention-switch-language", show=False,
                tooltip=N_("Show the app in Chinese (again: back to English)")),
    ]

    def __init__(self, trace: Trace, stage: Stage, head: int) -> None:
        super().__init__()
        self.trace, self.stage, self.head = trace, stage, head

    def compose(self) -> ComposeResult:
        with Vertical(id="intervention-box"):
            yield Static(id="intervention-title")
            yield OptionList(id="intervention-list")

    def on_mount(self) -> None:
        self.redraw_language()
        self.query_one(OptionList).focus()

    def redraw_language(self) -> None:
        self.choices = ablation_choices(self.trace, self.stage, self.head)
        self.query_one("#intervention-title", Static).update(
            Content.styled(_("What if this part were switched off?"), "bold")
        )
        options = self.query_one(OptionList)
        highlighted = options.highlighted
        options.clear_options()
        options.add_options([Option(label) for label, _ablation in self.choices])
        options.highlighted = highlighted if highlighted is not None else 0

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.close(self.choices[event.option_index][1])

    def action_cancel(self) -> None:
        self.close(None)
