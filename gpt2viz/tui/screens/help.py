"""The help screen: every key (as currently mapped) and how to read the screens."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from ...i18n import N_, _
from ..widgets.strip_widget import Prose

READING = N_(
    "How to read it: the left column lists every stage of one forward pass, in order; the middle shows "
    "the current stage: what happens, its formula, the shapes of this run's tensors, and a picture of "
    "the real numbers. Under the list (in a column of its own at the right on terminals 150 or more "
    "wide) are the shapes met so far and the KV cache the pass leaves behind. Heatmaps: blue to orange "
    "for signed values, dark purple to yellow for probabilities; grey cells are masked (the future). "
    "␣ is a space, ↵ a line break."
)


PALETTE_TEXT = N_("Command palette: jump to any stage by name")


def key_rows(screen: Screen) -> list[tuple[str, str]]:
    """(keys, what they do) for the bindings active on `screen`, with the user's key map applied."""
    by_action: dict[str, tuple[list[str], str]] = {}
    for key, active in screen.active_bindings.items():
        binding = active.binding
        palette = binding.action == "command_palette"
        if binding.id is None and not palette:  # Textual's own focus and copy keys
            continue
        text = _(getattr(screen, "PALETTE_TEXT", PALETTE_TEXT)) if palette else binding.tooltip or binding.description
        keys, _text = by_action.setdefault(binding.action, ([], text))
        display = screen.app.get_key_display(binding)
        if display not in keys:
            keys.append(display)
    return [(" ".join(keys), text) for keys, text in by_action.values()]


class HelpScreen(ModalScreen[None]):
    """Keys and reading hints; any of escape, q or ? closes it."""

    BINDINGS = [
        Binding("escape,question_mark,q", "close", N_("close"), id="close-help", tooltip=N_("Close the help")),
    ]

    def __init__(self, underneath: Screen) -> None:
        super().__init__()
        self.underneath = underneath

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(id="help-text")
            # Running text wrapped by terminal cells (a Chinese paragraph has no spaces to wrap at).
            yield Prose(id="help-reading")

    def on_mount(self) -> None:
        self.redraw_language()

    def redraw_language(self) -> None:
        rows = [Content.styled(_("Keys"), "bold $accent")]
        for keys, text in key_rows(self.underneath):
            rows.append(Content.assemble((f"{keys:>14}", "bold"), "  ", text))
        self.query_one("#help-text", Static).update(Content("\n").join(rows))
        self.query_one(Prose).update(_(getattr(self.underneath, "HELP_TEXT", READING)))

    def action_close(self) -> None:
        self.dismiss(None)
