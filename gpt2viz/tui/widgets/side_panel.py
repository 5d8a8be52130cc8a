"""The side panel: the tensor shapes met so far, and the KV cache the prefill leaves behind."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from ...trace import Trace
from ..formatting import compact_shape, count, fit
from ..facts import hook_event, stage_shapes
from ..stages import Stage


def shapes_so_far(trace: Trace, stages: list[Stage], index: int) -> list[tuple[str, list[int], bool]]:
    """Distinct shapes met up to stage `index`: (name, shape, produced by the current stage)."""
    current = {tuple(s): name for name, s in stage_shapes(trace, stages[index])}
    seen: dict[tuple, str] = {}
    for stage in stages[: index + 1]:
        for name, dims in stage_shapes(trace, stage):
            seen.setdefault(tuple(dims), name)
    return [(current.get(dims, name), list(dims), dims in current) for dims, name in seen.items()]


def layers_cached(stages: list[Stage], index: int) -> int:
    """How many layers have written their keys and values by stage `index`."""
    return sum(1 for s in stages[: index + 1] if s.kind == "qkv")


class SidePanel(VerticalScroll):
    """Shapes so far and the KV cache, updated at every step."""

    can_focus = False

    COMPONENT_CLASSES = {"side-panel--title", "side-panel--current", "side-panel--dim"}

    def compose(self) -> ComposeResult:
        yield Static(id="shapes")
        yield Static(id="kv-cache")

    def draw(self, trace: Trace, stages: list[Stage], index: int) -> None:
        """Shows what is known at stage `index`."""
        width = max(10, self.scrollable_content_region.width or 26)
        self.query_one("#shapes", Static).update(self._shapes(trace, stages, index, width))
        self.query_one("#kv-cache", Static).update(self._kv(trace, stages, index))

    def _shapes(self, trace: Trace, stages: list[Stage], index: int, width: int) -> Content:
        rows = [Content.styled("Shapes so far", ".side-panel--title")]
        entries = shapes_so_far(trace, stages, index)
        shape_width = min(max(len(compact_shape(s)) for _, s, _ in entries), width - 4)
        for name, dims, current in entries:
            style = ".side-panel--current" if current else ""
            rows.append(
                Content.assemble(
                    (fit(compact_shape(dims), shape_width), style),
                    " ",
                    (fit(name, max(1, width - shape_width - 1)), style or ".side-panel--dim"),
                )
            )
        return Content("\n").join(rows)

    def _kv(self, trace: Trace, stages: list[Stage], index: int) -> Content:
        kv = hook_event(trace, "kv_cache")
        rows = [Content(""), Content.styled("KV cache (prefill)", ".side-panel--title")]
        if not kv:
            rows.append(Content.styled("not recorded (--no-cache)", ".side-panel--dim"))
            return Content("\n").join(rows)
        layers = kv.get("layers") or []
        done = layers_cached(stages, index)
        k_shape = layers[0]["k_shape"] if layers else []
        rows += [
            Content.assemble(
                (f"{done}/{len(layers)}", ".side-panel--current" if done < len(layers) else ""),
                (" layers filled", ".side-panel--dim"),
            ),
            Content.assemble(("K,V ", ".side-panel--dim"), compact_shape(k_shape)),
            Content.assemble(f"{count(kv['bytes_per_position'])} B", (" per token", ".side-panel--dim")),
            Content.assemble(f"{count(kv['total_bytes'])} B", (f" for {kv['length']}", ".side-panel--dim")),
            Content.assemble(f"{count(kv['allocated_bytes'])} B", (" reserved", ".side-panel--dim")),
        ]
        return Content("\n").join(rows)
