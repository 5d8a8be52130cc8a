"""The attention pictures: one head's scores or pattern, and all heads of a layer."""

from __future__ import annotations

from textual.containers import Vertical

from ...i18n import _, count, ngettext
from ...text_safety import token_label
from ...trace import Trace
from ...trace.events import pool_bins
from ..facts import attention_event, head_focus, key_texts, last_row, masked_pattern
from ..stages import Stage
from .heads_grid import HeadsData, HeadsGrid
from .heatmap import Heatmap, HeatmapData


def attention_data(trace: Trace, stage: Stage, head: int) -> tuple[HeatmapData | None, HeatmapData | None]:
    """The map of one head (and, for long prompts, the last query's full row)."""
    which = "scores" if stage.kind == "scores" else "pattern"
    event = attention_event(trace, stage.layer, which)
    heads = event.get("heads") or []
    if not heads:
        return None, None
    head = min(head, len(heads) - 1)
    values = heads[head] if which == "scores" else masked_pattern(trace, stage.layer, head)
    tokens = [token_label(t["text"]) for t in trace.tokens]  # the queries: the positions this pass computed
    keys = key_texts(trace)  # the keys: cached positions too, in a decode step
    T, L = len(tokens), len(keys)
    signed = which == "scores"
    masked_text = "-∞" if signed else "0"
    if not event.get("reduced"):
        data = HeatmapData(
            values=values,
            row_labels=tokens,
            col_labels=keys,
            row_positions=[t["position"] for t in trace.tokens],
            signed=signed,
            highlight_row=T - 1,
            masked_text=masked_text,
            caption=_("rows: queries i · columns: keys j"),
        )
        return data, None
    rows, cols = len(values), len(values[0])
    row_starts = [trace.past + start for start, _end in pool_bins(T, rows)]
    col_starts = [start for start, _end in pool_bins(L, cols)]
    data = HeatmapData(
        values=values,
        row_labels=[],
        col_labels=[],
        row_positions=row_starts,
        col_positions=col_starts,
        signed=signed,
        highlight_row=rows - 1,
        masked_text=masked_text,
        caption=_("averaged over a {rows} × {cols} grid; rows: queries, columns: keys (first position of each block)").format(
            rows=rows, cols=cols
        ),
    )
    row = last_row(trace, stage.layer, head, which)
    last = HeatmapData(
        values=[row],
        row_labels=[tokens[-1]],
        col_labels=[],
        row_positions=[trace.past + T - 1],
        signed=signed,
        scale=data.resolved_scale() if signed else None,
        pool_rows=False,
        masked_text=masked_text,
        caption=ngettext("the last query's full row over all {n} key", "the last query's full row over all {n} keys", L).format(n=count(L)),
    )
    return data, last


class AttentionView(Vertical):
    """One head's scores or pattern as a heatmap; for long prompts also the last row in full."""

    DEFAULT_CSS = """
    AttentionView {
        height: auto;
    }
    AttentionView #last-row {
        margin-top: 1;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        # Made here, not in compose: the view is drawn as it is mounted (widgets/stage_view.py).
        self._map, self._last_row = Heatmap(id="attention-map"), Heatmap(id="last-row")
        super().__init__(self._map, self._last_row, id=id)

    def draw(self, trace: Trace, stage: Stage, head: int = 0) -> None:
        """Draws `head` of the stage's layer."""
        data, last = attention_data(trace, stage, head)
        self._map.show(data)
        self._last_row.display = last is not None
        self._last_row.show(last)


class HeadsOverview(HeadsGrid):
    """All heads of a layer, drawn from the trace."""

    def draw(self, trace: Trace, stage: Stage, head: int = 0) -> None:
        """Draws every head of the stage's layer, `head` marked."""
        n_head = int(trace.model["config"]["n_head"])
        maps = [masked_pattern(trace, stage.layer, h) for h in range(n_head)]
        if not maps or not maps[0]:
            self.show(None)
            return
        self.show(HeadsData(maps=maps, focus=head_focus(trace, stage.layer), tokens=key_texts(trace), selected=head))
