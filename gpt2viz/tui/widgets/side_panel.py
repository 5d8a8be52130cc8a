"""The side panel: the tensor shapes met so far, and the KV cache the prefill leaves behind."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.content import Content

from ...i18n import _, ngettext
from ...i18n.layout import wrap_lines
from ...trace import Trace
from ..formatting import compact_shape, count, fit
from ..facts import hook_event, stage_shapes
from ..language import key_name
from ..stages import Stage
from ..styled_text import styled
from .laid import Laid


@dataclass(frozen=True)
class ShapeRow:
    """One distinct shape met so far, every tensor name that had it, and whether the stage on
    screen produces it."""

    dims: tuple[int, ...]
    names: tuple[str, ...]
    current: bool


def shapes_so_far(trace: Trace, stages: list[Stage], index: int) -> list[ShapeRow]:
    """The distinct shapes met up to stage `index`, in the order first met. A row's names only
    grow as the walk goes on (q, k, v, then z), so a row never changes what it stands for."""
    names: dict[tuple[int, ...], list[str]] = {}
    for stage in stages[: index + 1]:
        for name, dims in stage_shapes(trace, stage):
            met = names.setdefault(tuple(dims), [])
            if name not in met:
                met.append(name)
    current = {tuple(dims) for _, dims in stage_shapes(trace, stages[index])}
    return [ShapeRow(dims, tuple(met), dims in current) for dims, met in names.items()]


def layers_cached(stages: list[Stage], index: int) -> int:
    """How many layers have written their keys and values by stage `index`."""
    return sum(1 for s in stages[: index + 1] if s.kind == "qkv")


SHARE = 0.55  # of the column's height, at most, under the navigator
MIN_LINES = 2


def shapes_lines(entries: list[ShapeRow], width: int) -> Content:
    """'Shapes so far': each distinct shape and the names that had it, in `width` cells."""
    width = max(10, width)
    rows = [Content.styled(_("Shapes so far"), ".side-panel--title")]
    if not entries:  # before the pass (the model's files): nothing computed yet
        rows += [Content.styled(line, ".side-panel--dim") for line in wrap_lines(_("none yet: the pass starts at Tokenize"), width)]
        return Content("\n").join(rows)
    shape_width = min(max(len(compact_shape(e.dims)) for e in entries), width - 4)
    name_width = max(1, width - shape_width - 1)
    for entry in entries:
        style = ".side-panel--current" if entry.current else ""
        # Names wrap under each other rather than being cut: every name met stays readable
        # (by terminal cells: a Chinese name takes two a character).
        lines = wrap_lines(", ".join(entry.names), name_width)
        for n, line in enumerate(lines):
            shape_cell = fit(compact_shape(entry.dims) if n == 0 else "", shape_width)
            rows.append(Content.assemble((shape_cell, style), " ", (fit(line, name_width), style or ".side-panel--dim")))
    return Content("\n").join(rows)


class SidePanel(VerticalScroll):
    """Shapes so far and the KV cache, updated at every step. It is as tall as what it shows
    (up to a share of the column, app.tcss), laid out for its width when rendered."""

    can_focus = False

    COMPONENT_CLASSES = {"side-panel--title", "side-panel--current", "side-panel--dim"}

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """Under the navigator (a grid row of auto height) the panel asks for the lines it needs,
        up to SHARE of the column (`container`), and scrolls for the rest."""
        needed = super().get_content_height(container, viewport, width)
        return max(MIN_LINES, min(needed, int(container.height * SHARE) - 1))

    def on_mount(self) -> None:
        self.name_the_lab()
        # Kept scrolled to its end (Textual's anchor): where the column is short, the shapes met
        # first scroll away and the latest ones and the KV cache below them stay in sight.
        self.anchor()

    def name_the_lab(self) -> None:
        """The border names the keys of the map of the model and of the cost lab (what the cache and
        the rest cost, measured): neither has room in the footer at 80 columns."""
        self.border_title = _("{map_key}: map · {lab_key}: cost lab").format(
            map_key=key_name(self, "show_map"), lab_key=key_name(self, "cost_lab")
        )

    def compose(self) -> ComposeResult:
        yield Laid(id="shapes")
        yield Laid(id="kv-cache")

    def draw(self, trace: Trace, stages: list[Stage], index: int) -> None:
        """Shows what is known at stage `index`."""
        entries = shapes_so_far(trace, stages, index)
        self.query_one("#shapes", Laid).show(lambda width: shapes_lines(entries, width))
        self.query_one("#kv-cache", Laid).show(self._kv(trace, stages, index))

    def _kv(self, trace: Trace, stages: list[Stage], index: int) -> Content:
        kv = hook_event(trace, "kv_cache")
        title = _("KV cache (after this step)") if trace.past else _("KV cache (prefill)")
        rows = [Content.styled(title, ".side-panel--title")]
        if not kv:
            rows.append(Content.styled(_("none: this pass ran without one"), ".side-panel--dim"))
            return Content("\n").join(rows)
        layers = kv.get("layers") or []
        done = layers_cached(stages, index)
        k_shape = layers[0]["k_shape"] if layers else []
        # Each line: the number in full ink, its words dimmed; the words are one msgid with the
        # number's place marked by {n}, so a language can put them on either side.
        dim = ".side-panel--dim"
        rows += [
            styled(
                ngettext("{n} layer filled", "{n} layers filled", len(layers)),
                dim,
                n=(f"{count(done)}/{count(len(layers))}", ".side-panel--current" if done < len(layers) else ""),
            ),
            styled(_("K,V {n} each"), dim, n=compact_shape(k_shape)),
            styled(_("{n} per token"), dim, n=f"{count(kv['bytes_per_position'])} B"),
            styled(
                ngettext("{n} for {length} token", "{n} for {length} tokens", kv["length"]),
                dim,
                n=f"{count(kv['total_bytes'])} B",
                length=(count(kv["length"]), dim),
            ),
            styled(_("{n} reserved"), dim, n=f"{count(kv['allocated_bytes'])} B"),
        ]
        return Content("\n").join(rows)
