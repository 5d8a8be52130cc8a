"""Before → after: the next-token probabilities of an edited pass against the model's own."""

from __future__ import annotations

from rich.cells import cell_len
from textual.content import Content

from ...i18n import _, say, sentences
from ...i18n.layout import wrap_wide
from ...text_safety import token_label
from ..formatting import fit, parts_off, percent
from ..language import key_name
from .laid import Laid


def change_text(before: float, after: float) -> str:
    """A change of probability in percentage points, signed: '+3.1 pp', '−19.2 pp' (百分点)."""
    shown = f"{abs(100 * (after - before)):.1f}"
    sign = "" if shown == "0.0" else "+" if after > before else "−"  # no sign on what rounds to nothing ('−0.0')
    # TRANSLATORS: a change of probability in percentage points, its sign included: '−19.2 pp'
    return _("{points} pp").format(points=sign + shown)


def before_after_lines(interventions: list[str], changes: list[dict], undo: str, clear: str, width: int) -> Content:
    """What switching `interventions` off did to the next token (`changes`: {text, before, after,
    rank} per token, the edited run's top tokens first with their rank, then the model's own top
    tokens that fell out of it, rank None), laid out in `width` cells."""
    width = max(40, width)
    edited = say("whatif.edited", parts=parts_off(interventions), undo=undo, clear=clear)
    if any(spec.endswith(":mean") for spec in interventions):
        edited = sentences(edited, say("whatif.mean"))
    rows = [Content(wrap_wide(edited, width))]
    top_before = max(changes, key=lambda c: c["before"])
    top_after = changes[0]
    if top_before["text"] == top_after["text"]:
        summary = say("whatif.same", token=token_label(top_after["text"]), before_p=percent(top_before["before"]), after_p=percent(top_after["after"]))
    else:
        summary = say(
            "whatif.changed", before=token_label(top_before["text"]), before_p=percent(top_before["before"]),
            after=token_label(top_after["text"]), after_p=percent(top_after["after"]),
        )
    rows += [Content(wrap_wide(summary, width)), Content("")]
    change_texts = [change_text(c["before"], c["after"]) for c in changes]
    change_w = max(12, 3 + max(cell_len(text) for text in change_texts))  # at least 3 cells apart from "p after"
    token_w = max(6, min(max(12, max(cell_len(c["text"]) for c in changes) + 1), width - 3 - 9 - 4 - 9 - change_w))
    header = "   " + fit(_("token"), token_w) + fit(_("p before"), 9, "right") + "    " + fit(_("p after"), 9, "right") + fit(_("change"), change_w, "right")
    rows.append(Content.styled(header, "bold"))
    ranked = sum(1 for c in changes if c.get("rank") is not None)
    for c, change in zip(changes, change_texts):
        rank = c.get("rank")
        if rank is None and ranked and c is changes[ranked]:  # not ranks: the model's own top tokens below
            rows.append(Content(wrap_wide(say("whatif.dropped", k=ranked), width)))
        rows.append(Content(
            (f"{rank:>2} " if rank is not None else "   ") + fit(c["text"], token_w) + fit(percent(c["before"]), 9, "right")
            + "  → " + fit(percent(c["after"]), 9, "right") + fit(change, change_w, "right")
        ))
    return Content("\n").join(rows)


class BeforeAfter(Laid):
    """What switching parts off did to the prediction (hidden for the model's own pass)."""

    def draw(self, interventions: list[str], changes: list[dict] | None) -> None:
        """`changes`: {text, before, after} per token, the edited run's top tokens first."""
        self.display = bool(interventions and changes)
        if not self.display:
            self.show(None)
            return
        undo, clear = key_name(self, "undo_intervention"), key_name(self, "clear_interventions")
        self.show(lambda width: before_after_lines(interventions, changes, undo, clear, width))
