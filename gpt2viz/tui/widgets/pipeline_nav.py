"""The pipeline navigator: every stage in forward order, blocks folded, the current stage marked."""

from __future__ import annotations

from dataclasses import dataclass

from rich.segment import Segment
from textual import events
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ...i18n import _
from ..formatting import fit
from ..stages import Stage


@dataclass(frozen=True)
class NavRow:
    """One line of the navigator: a stage, or the header of a block."""

    text: str
    stage_index: int | None = None
    block: int | None = None
    number: str = ""


class PipelineNavigator(ScrollView):
    """A list of the stages; click a stage to go there, a block to fold or unfold it."""

    COMPONENT_CLASSES = {
        "pipeline-navigator--stage",
        "pipeline-navigator--current",
        "pipeline-navigator--block",
        "pipeline-navigator--block-current",
        "pipeline-navigator--number",
    }

    DEFAULT_CSS = """
    PipelineNavigator {
        overflow-x: hidden;
    }
    """

    can_focus = False

    class StageChosen(Message):
        """The user clicked a stage."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.stages: list[Stage] = []
        self.current = 0
        self.unfolded: set[int] = set()  # blocks the user unfolded by hand
        self.rows: list[NavRow] = []
        self._strips: list[Strip] = []
        self._strips_width = -1

    def set_stages(self, stages: list[Stage], current: int) -> None:
        """Shows a new list of stages."""
        self.stages = stages
        self.unfolded.clear()
        self.set_current(current)

    def set_current(self, index: int) -> None:
        """Marks stage `index` as current; its block unfolds, and it scrolls into view."""
        self.current = index
        self._rebuild()

    def toggle_block(self, layer: int) -> None:
        """Folds or unfolds block `layer` (the current block always stays unfolded)."""
        self.unfolded ^= {layer}
        self._rebuild()

    @property
    def current_row(self) -> int:
        """The line of the current stage."""
        for y, row in enumerate(self.rows):
            if row.stage_index == self.current:
                return y
        return 0

    def _rebuild(self) -> None:
        stages = self.stages
        current_block = stages[self.current].layer if stages else None
        rows: list[NavRow] = []
        seen_blocks: set[int] = set()
        for i, stage in enumerate(stages):
            if stage.layer is None:
                rows.append(NavRow(stage.label, stage_index=i, number=str(i + 1)))
                continue
            if stage.layer not in seen_blocks:
                seen_blocks.add(stage.layer)
                open_ = stage.layer == current_block or stage.layer in self.unfolded
                last = max(j for j, s in enumerate(stages) if s.layer == stage.layer)
                block = _("Block {layer}").format(layer=stage.layer)
                rows.append(NavRow(f"{'▾' if open_ else '▸'} {block}", block=stage.layer, number=f"{i + 1}–{last + 1}"))
            if stage.layer == current_block or stage.layer in self.unfolded:
                rows.append(NavRow("  " + stage.label, stage_index=i, number=str(i + 1)))
        self.rows = rows
        self._strips_width = -1
        self.virtual_size = Size(self.size.width, len(rows))
        self._scroll_current_into_view()
        self.refresh()

    def _scroll_current_into_view(self) -> None:
        y = self.current_row
        height = max(1, self.scrollable_content_region.height)
        top = int(self.scroll_offset.y)
        if y < top + 1 or y >= top + height - 1:
            self.scroll_to(y=max(0, y - height // 3), animate=False, immediate=True)

    def on_resize(self, event: events.Resize) -> None:
        self._strips_width = -1
        self.virtual_size = Size(event.size.width, len(self.rows))
        self._scroll_current_into_view()

    def render_line(self, y: int) -> Strip:
        index = y + int(self.scroll_offset.y)
        width = self.scrollable_content_region.width
        if self._strips_width != width:
            self._strips = [self._render_row(row, width) for row in self.rows]
            self._strips_width = width
        if index >= len(self._strips):
            return Strip.blank(width, self.rich_style)
        return self._strips[index]

    def _render_row(self, row: NavRow, width: int) -> Strip:
        base = self.rich_style
        current_block = self.stages[self.current].layer if self.stages else None
        current = row.stage_index == self.current
        if row.block is not None:
            style = "pipeline-navigator--block-current" if row.block == current_block else "pipeline-navigator--block"
        else:
            style = "pipeline-navigator--current" if current else "pipeline-navigator--stage"
        text_style = base + self.get_component_rich_style(style)
        # The numbers end one cell short of the right edge, clear of the scrollbar.
        number_width = min(len(row.number), max(0, width - 5))
        text = fit(("›" if current else " ") + row.text, max(0, width - number_width - 2))
        number_style = text_style if current else base + self.get_component_rich_style("pipeline-navigator--number")
        segments = [
            Segment(text + " ", text_style),
            Segment(fit(row.number, number_width, "right"), number_style),
            Segment(" ", text_style),
        ]
        return Strip(segments).crop_extend(0, width, base)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        index = offset.y + int(self.scroll_offset.y)
        if not 0 <= index < len(self.rows):
            return
        row = self.rows[index]
        if row.block is not None:
            self.toggle_block(row.block)
        elif row.stage_index is not None:
            self.post_message(self.StageChosen(row.stage_index))
