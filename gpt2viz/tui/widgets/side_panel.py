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


def shapes_lines(entries: list[ShapeRow], width: int, room: int | None = None) -> Content:
    """'Shapes so far': each distinct shape and the names that had it, in `width` cells and at most
    `room` lines. Where they do not all fit, whole rows are left out, never a row's first or last
    lines: the current stage's rows first kept, then the latest met, and a line says how many are
    not shown. With no room for the title and one more line, nothing (the KV cache below keeps its
    lines)."""
    width = max(10, width)
    title = Content.styled(_("Shapes so far"), ".side-panel--title")
    dim = ".side-panel--dim"
    if not entries:  # before the pass (the model's files): nothing computed yet
        said = wrap_lines(_("none yet: the pass starts at Tokenize"), width)
        if room is not None and 1 + len(said) > room:
            return Content("")
        return Content("\n").join([title] + [Content.styled(line, dim) for line in said])
    shape_width = min(max(len(compact_shape(e.dims)) for e in entries), width - 4)
    name_width = max(1, width - shape_width - 1)
    blocks = []
    for entry in entries:
        style = ".side-panel--current" if entry.current else ""
        # Names wrap under each other rather than being cut: every name met stays readable
        # (by terminal cells: a Chinese name takes two a character).
        lines = wrap_lines(", ".join(entry.names), name_width)
        blocks.append([
            Content.assemble((fit(compact_shape(entry.dims) if n == 0 else "", shape_width), style), " ",
                             (fit(line, name_width), style or dim))
            for n, line in enumerate(lines)
        ])
    if room is None or 1 + sum(map(len, blocks)) <= room:
        return Content("\n").join([title] + [row for block in blocks for row in block])
    if room < 2:
        return Content("")

    notes: dict[int, list[str]] = {}

    def note(hidden: int) -> list[str]:  # its lines, worked out once for each count
        if hidden not in notes:
            notes[hidden] = wrap_lines(
                ngettext("{n} more shape not shown", "{n} more shapes not shown", hidden).format(n=count(hidden)), width)
        return notes[hidden]

    # The current stage's rows first, then the others from the latest met back, each where it fits.
    order = [i for i, e in enumerate(entries) if e.current] + [i for i in reversed(range(len(entries))) if not entries[i].current]
    shown: set[int] = set()
    for index in order:
        hidden = len(entries) - len(shown) - 1
        used = 1 + sum(len(blocks[i]) for i in shown) + len(blocks[index]) + (len(note(hidden)) if hidden else 0)
        if used <= room:
            shown.add(index)
    rows = [title] + [row for i in sorted(shown) for row in blocks[i]]
    said = note(len(entries) - len(shown))
    if len(rows) + len(said) > room:  # not even one row and the note: nothing rather than a fragment
        return Content("")
    return Content("\n").join(rows + [Content.styled(line, dim) for line in said])


class SidePanel(VerticalScroll):
    """Shapes so far and the KV cache, updated at every step. It is as tall as what it shows
    (up to a share of the column, app.tcss), laid out for its width when rendered."""

    can_focus = False

    COMPONENT_CLASSES = {"side-panel--title", "side-panel--current", "side-panel--dim"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._entries: list[ShapeRow] = []
        self._kv_rows: list[Content] = []  # the KV cache's title and facts, a line each
        self._cap = 0  # the lines the column gives the panel under the navigator (narrow layouts)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """Under the navigator (a grid row of auto height) the panel asks for the lines it needs,
        up to SHARE of the column (`container`); the shapes are laid out for what is left."""
        cap = max(MIN_LINES, int(container.height * SHARE) - 1)
        if cap != self._cap:
            self._cap = cap
            for part in self.query(Laid):
                part.forget()  # laid out again for the new room, in this layout
        return max(MIN_LINES, min(super().get_content_height(container, viewport, width), cap))

    def on_resize(self) -> None:
        if self.screen.has_class("-wide"):  # a column of its own, as tall as the screen's body
            self.query_one("#kv-cache", Laid).show(self._kv_block)
            self.query_one("#shapes", Laid).show(self._shapes)

    def _room(self) -> int | None:
        """The lines the panel has: the whole column where it has one (wide layouts), else its
        share under the navigator; None before it is laid out."""
        if self.screen.has_class("-wide"):
            return self.scrollable_content_region.height or None
        return self._cap or None

    def _kv_block(self, width: int) -> Content:
        """The KV cache's title and as many of its facts, from the top, as the room holds (at
        80 x 24 under a lesson page it may hold 5 of the 6 lines): whole lines, the title first,
        never a scroll that starts below it."""
        room = self._room()
        styles = self.query_one("#kv-cache", Laid).styles  # measured as Laid lays it out
        rows, used = [], 0
        for row in self._kv_rows:
            height = row.get_height(styles, max(1, width))
            if room is not None and rows and used + height > room:
                break
            rows.append(row)
            used += height
        return Content("\n").join(rows)

    def _shapes(self, width: int) -> Content:
        """The shapes in the lines that the KV cache below them leaves (both at `width`)."""
        room = self._room()
        if room is not None:
            kv = self.query_one("#kv-cache", Laid)
            room -= kv.content_for(width).get_height(kv.styles, width)
        return shapes_lines(self._entries, width, room)

    def on_mount(self) -> None:
        self.name_the_lab()

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
        self._entries = shapes_so_far(trace, stages, index)
        self._kv_rows = self._kv(trace, stages, index)
        self.query_one("#kv-cache", Laid).show(self._kv_block)
        self.query_one("#shapes", Laid).show(self._shapes)

    def _kv(self, trace: Trace, stages: list[Stage], index: int) -> list[Content]:
        kv = hook_event(trace, "kv_cache")
        title = _("KV cache (after this step)") if trace.past else _("KV cache (prefill)")
        rows = [Content.styled(title, ".side-panel--title")]
        if not kv:
            rows.append(Content.styled(_("none: this pass ran without one"), ".side-panel--dim"))
            return rows
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
        return rows
