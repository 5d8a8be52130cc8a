"""The stage view: title, explanation, formula, shape flow and the stage's picture."""

from __future__ import annotations

import re
from collections.abc import Callable

from rich.cells import cell_len
from textual import events

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.css.query import NoMatches
from textual.widget import Widget
from textual.widgets import ContentSwitcher

from ...i18n import _, count
from ...i18n.layout import wrap_lines
from ...text_safety import safe_line, safe_text
from ...trace import Trace
from ..facts import StepChoice
from ..language import key_name
from ..narration import narrate
from ..stages import Stage
from ..table_layout import wrapped
from .attention_view import AttentionView, HeadsOverview
from .before_after import BeforeAfter
from .distribution_pictures import GeluCurve, HeadEntropyBars, LayerNormHistograms
from .embedding_strips import EmbedPicture
from .laid import Laid
from .model_files_view import ModelFilesPicture
from .picture_stack import PictureStack
from .strip_widget import Prose
from .pictures import (
    LayerNormTable,
    LogitLensTable,
    MLPActivity,
    NextTokenView,
    QKVDiagram,
    ResidualBars,
    TokenTable,
    TopTokens,
)

# stage kind -> id of the picture that draws it
PICTURE_FOR_KIND = {
    "model_files": "picture-model-files",
    "tokenize": "picture-tokens",
    "embed": "picture-embed",
    "ln1": "picture-layer-norm",
    "ln2": "picture-layer-norm",
    "ln_final": "picture-layer-norm",
    "qkv": "picture-qkv",
    "scores": "picture-attention",
    "pattern": "picture-attention",
    "heads": "picture-heads",
    "attn_out": "picture-residual",
    "mlp_out": "picture-residual",
    "mlp": "picture-mlp",
    "lm_head": "picture-logits",
    "logit_lens": "picture-logit-lens",
    "next_token": "picture-next-token",
}

# Each picture, built the first time a stage of its kind is shown: a start mounts the one picture
# it shows, not all twelve (each mount styles the picture's component classes; measured, all of
# them took a fifth of the app's start, which every screen that opens a step-through pays).
PICTURES: dict[str, Callable[[], Widget]] = {
    "picture-model-files": lambda: ModelFilesPicture(id="picture-model-files"),
    "picture-tokens": lambda: TokenTable(id="picture-tokens"),
    "picture-embed": lambda: EmbedPicture(id="picture-embed"),
    "picture-layer-norm": lambda: PictureStack(
        LayerNormHistograms(id="layer-norm-histograms"), LayerNormTable(), id="picture-layer-norm"),
    "picture-qkv": lambda: QKVDiagram(id="picture-qkv"),
    "picture-attention": lambda: AttentionView(id="picture-attention"),
    "picture-heads": lambda: PictureStack(HeadsOverview(), HeadEntropyBars(id="head-entropy"), id="picture-heads"),
    "picture-residual": lambda: ResidualBars(id="picture-residual"),
    "picture-mlp": lambda: PictureStack(GeluCurve(id="gelu-curve"), MLPActivity(), id="picture-mlp"),
    "picture-logits": lambda: TopTokens(id="picture-logits"),
    "picture-logit-lens": lambda: LogitLensTable(id="picture-logit-lens"),
    "picture-next-token": lambda: NextTokenView(id="picture-next-token"),
}

SHAPE_RE = re.compile(r"\[[0-9][0-9, ]*\]")
ARROW = " → "


def pack_flow(line: str, width: int) -> list[str]:
    """A shape-flow line folded at its arrows (never inside a shape) to fit `width`."""
    parts = line.split(ARROW)
    out, current = [], parts[0]
    for part in parts[1:]:
        if width <= 0 or cell_len(current + ARROW + part) <= width:
            current += ARROW + part
        else:
            out.append(current)
            current = "   →" + " " + part
    out.append(current)
    return out


FORMULA_GAP = re.compile(r" {3,}")  # between a formula and its note: "... where j > i   (the causal mask)"
# Where a formula may break, best first: after a comma ("H = 8 heads, D = 14"), before an operator.
FORMULA_BREAKS = (re.compile(r"(?<=, )|(?<=，)"), re.compile(r" (?=[=+−·@×/] )"))
FORMULA_INDENT = "    "


def pack_formula(line: str, width: int) -> list[str]:
    """A formula line folded to fit `width`: first at the wide gaps before its notes, then after
    a comma, then before an operator, then at a space; each further line indented."""
    if width <= 0 or cell_len(line) <= width:
        return [line]
    indent = FORMULA_INDENT if width > 3 * len(FORMULA_INDENT) else ""
    out: list[str] = []
    for part in FORMULA_GAP.split(line):
        if out and cell_len(out[-1] + "   " + part) <= width:
            out[-1] += "   " + part
            continue
        text = indent + part if out else part
        while cell_len(text) > width:
            breaks = [
                [m.start() for m in where.finditer(text) if text[: m.start()].strip() and cell_len(text[: m.start()].rstrip()) <= width]
                for where in FORMULA_BREAKS
            ]
            cut = next((found[-1] for found in breaks if found), None)
            first = text[:cut] if cut is not None else wrap_lines(text, width)[0]
            if not first.strip() or len(first) >= len(text):
                break
            out.append(first.rstrip())
            text = indent + text[len(first) :].lstrip()
        out.append(text)
    return out


def formula_lines(formula: str, width: int) -> Content:
    """The stage's formula, each line folded to fit `width` (its padding taken off)."""
    room = width - 2  # the formula's padding
    return Content("\n".join(packed for line in formula.split("\n") for packed in pack_formula(line, room)))


def flow_lines(flow: tuple[str, ...], width: int) -> Content:
    """The shape flow folded at its arrows; a piece still too wide (a long prompt quoted) wrapped
    by cells, never inside a shape. The shapes are styled as such."""
    lines = [piece for line in flow for packed in pack_flow(line, width) for piece in wrapped(packed, width, 5, keep=SHAPE_RE)]
    return Content("\n").join(lines).highlight_regex(SHAPE_RE, style=".stage-view--shape")


class StageCount(Widget):
    """'stage 5 of 114 · blocks 0–11', ended by '↓ more below' while part of the stage view is
    out of sight: read off the view's scroll state each time it is rendered."""

    DEFAULT_CSS = """
    StageCount {
        height: auto;
    }
    """

    where = ""

    @property
    def content(self) -> Content:
        """The line as it reads now."""
        return self.render()

    def render(self) -> Content:
        view = self.parent
        more = isinstance(view, StageView) and view.max_scroll_y > 0 and view.scroll_y < view.max_scroll_y
        return Content(_("{where} · ↓ more below").format(where=self.where) if more else self.where)


class StageView(VerticalScroll):
    """Everything about the current stage, scrolled as one column."""

    can_focus = False

    COMPONENT_CLASSES = {"stage-view--shape"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._count = StageCount(id="stage-count")

    def compose(self) -> ComposeResult:
        yield Laid(id="stage-title")
        yield self._count
        yield Prose(id="stage-text")
        yield Laid(id="stage-formula")
        yield Laid(id="stage-flow")
        yield ContentSwitcher(id="pictures")  # the pictures come as they are first shown
        yield BeforeAfter(id="before-after")

    def picture(self, picture_id: str) -> Widget:
        """The picture `picture_id` ('picture-tokens'), mounted (hidden) the first time it is asked for."""
        switcher = self.query_one("#pictures", ContentSwitcher)
        try:
            return switcher.get_child_by_id(picture_id)
        except NoMatches:
            picture = PICTURES[picture_id]()
            picture.display = False
            switcher.mount(picture)  # in the DOM now; composed and styled before the next refresh
            return picture

    def on_resize(self, event: events.Resize) -> None:
        # Sent for a new size and for a new height of the content (the view's virtual size).
        self._count.refresh(layout=True)

    def watch_scroll_y(self, old: float, new: float) -> None:
        # Also for a view whose screen has gone (a scroll Textual had deferred): no queries here.
        super().watch_scroll_y(old, new)
        self._count.refresh(layout=True)

    @staticmethod
    def _where(trace: Trace, stages: list[Stage], index: int, head: int) -> str:
        """'stage 5 of 114 · blocks 0–11 · heads 0–11' (blocks and heads count from 0)."""
        stage = stages[index]
        parts = [_("stage {index} of {total}").format(index=index + 1, total=count(len(stages)))]
        if stage.layer is not None:
            parts.append(_("blocks 0–{last}").format(last=trace.n_layer - 1))
        if stage.is_attention:
            parts.append(_("heads 0–{last}").format(last=int(trace.model["config"]["n_head"]) - 1))
        return " · ".join(parts)

    def draw(
        self, trace: Trace, stages: list[Stage], index: int, head: int, new_stage: bool = True, chosen: StepChoice | None = None,
        run_sampling: str = "", replay: bool = False,
    ) -> None:
        """Shows stage `index` (with `head` selected); back to the top when the stage changed.
        `chosen`: what the generation step whose pass this is chose (facts.StepChoice);
        `run_sampling`: how the run's generation samples; `replay`: a saved trace, no model (narrate's)."""
        stage = stages[index]
        words = narrate(trace, stage, head, generate_key=key_name(self, "generate"), chosen=chosen, run_sampling=run_sampling,
                        replay=replay)
        # The narration quotes the trace (a prompt, token texts, a replay's fields): every line of
        # it shown by gpt2viz.text_safety's rule, as the Prose below does.
        self.query_one("#stage-title", Laid).show(Content(safe_line(words.title)))
        self._count.where = self._where(trace, stages, index, head)
        self._count.refresh(layout=True)
        self.query_one("#stage-text", Prose).update(words.text)
        formula, flow = safe_text(words.formula), tuple(safe_line(line) for line in words.flow)
        self.query_one("#stage-formula", Laid).show(lambda width: formula_lines(formula, width))
        self.query_one("#stage-flow", Laid).show(lambda width: flow_lines(flow, width))
        picture_id = PICTURE_FOR_KIND[stage.kind]
        picture = self.picture(picture_id)
        if isinstance(picture, NextTokenView):
            picture.chosen = chosen
        self.query_one("#pictures", ContentSwitcher).current = picture_id
        picture.draw(trace, stage, head)
        if new_stage:
            self.scroll_home(animate=False, immediate=True)
