"""The distribution pictures, in the app: one position's values at a LayerNorm (going in,
normalized, after γ and β), its MLP pre-activations on the GELU curve, and the attention entropy of
each head. The numbers on screen are the trace's (bin counts, edges, the share GELU cuts, the
entropies), the counts add up to n_embd or d_mlp, every line fits at 80x24 and 120x40 in English
and Chinese, and a trace written before the data was recorded says so instead of a picture.

The snapshots replay tests/data/{tiny,small}-pictures-trace.json (tests/tui/make_picture_traces.py).
"""

from __future__ import annotations

import copy
import json
import re

import pytest
from rich.cells import cell_len

from gpt2viz.i18n import _, set_language
from gpt2viz.trace import Trace, load
from gpt2viz.tui.app import make_app
from gpt2viz.tui.distributions import head_entropies, layer_norm_values, pre_activations
from gpt2viz.tui.formatting import count, num, percent
from gpt2viz.tui.screens.step import StepScreen
from gpt2viz.tui.stages import Stage, index_of
from gpt2viz.tui.widgets.distribution_pictures import GeluCurve, HeadEntropyBars, LayerNormHistograms, edge_label
from tui_helpers import TINY_TRACE, run_async
from zh_words import english_words, run_words

TINY_PICTURES = TINY_TRACE.with_name("tiny-pictures-trace.json")
SMALL_PICTURES = TINY_TRACE.with_name("small-pictures-trace.json")
SIZES = {"80x24": (80, 24), "120x40": (120, 40)}
# The three pictures: the stage that shows each, and the widget that draws it.
PICTURES = {"layer-norm": ("ln1", LayerNormHistograms), "gelu": ("mlp", GeluCurve), "entropy": ("heads", HeadEntropyBars)}
LAYER = 1


@pytest.fixture(scope="module")
def tiny_pictures() -> Trace:
    """A trace of the bundled model `tiny` with the pictures' data (committed, for snapshots)."""
    return load(TINY_PICTURES)


async def open_stage(app, pilot, kind: str, layer: int | None, head: int = 0) -> StepScreen:
    """The step-through at stage `kind` of block `layer`, with `head` selected."""
    for _try in range(200):
        await pilot.pause()
        if isinstance(app.screen, StepScreen):
            break
    screen = app.screen
    assert isinstance(screen, StepScreen)
    screen.head = head
    screen.go_to(index_of(screen.stages, kind, layer))
    await pilot.pause()
    await pilot.pause()  # laid out again for the width it got
    return screen


def squashed(text: str) -> str:
    """`text` without white space: a sentence compared whatever its line breaks."""
    return re.sub(r"\s+", "", text)


def shown_histograms(text: str) -> list[dict]:
    """Each histogram of a picture as the screen shows it: the labels of its first and last edges,
    and its counts (under the bars, or on the lines that list them)."""
    prefix = _("counts, left to right: {counts}").split("{counts}")[0].strip()
    lines = text.split("\n")
    found = []
    for i, line in enumerate(lines):
        if not line.strip() or set(line.strip()) != {"▔"}:
            continue
        ticks = lines[i + 1].split()
        numbers, j = [], i + 2
        while j < len(lines):
            row = lines[j].strip()
            if j == i + 2 and row.startswith(prefix):
                row = row[len(prefix) :]
            elif not re.fullmatch(r"[\d ]+", row):
                break
            numbers += [int(n) for n in row.split()]
            j += 1
        found.append({"first": ticks[0], "last": ticks[-1], "counts": numbers})
    return found


def assert_histogram_shown(shown: dict, h, text: str) -> None:
    assert shown["counts"] == list(h.counts)
    assert shown["first"] == edge_label(h.edges[0]) and shown["last"] == edge_label(h.edges[-1])
    if h.below or h.above:
        beyond = _("outside the axis: {below} at or below {low}, {above} above {high}").format(
            below=count(h.below), low=edge_label(h.edges[0]), above=count(h.above), high=edge_label(h.edges[-1])
        )
        assert squashed(beyond) in squashed(text)


def assert_lines_fit(widget) -> None:
    """Drawn line for line: none wider than the widget (Textual would wrap it)."""
    rows = widget.content.plain.split("\n")
    assert widget.size.height == len(rows), (type(widget).__name__, widget.size, rows)
    for row in rows:
        assert cell_len(row) <= widget.size.width, (type(widget).__name__, widget.size.width, row)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("which", ["tiny_pictures", "small_trace"])
@run_async
async def test_the_numbers_on_screen_are_the_trace_s(which, size, lang, request):
    """Each picture's counts, edges, shares and entropies, read off the screen, are the trace's;
    the counts add up to n_embd (LayerNorm) or d_mlp (GELU); every line fits."""
    trace = request.getfixturevalue(which)
    config = trace.model["config"]
    n_embd = int(config["n_embd"])
    d_mlp = int(config.get("n_inner") or 4 * n_embd)
    set_language(lang)
    app = make_app(trace=trace)
    allowed = run_words(trace)
    async with app.run_test(size=SIZES[size]) as pilot:
        for kind, layer in (("ln1", LAYER), ("ln_final", None)):
            screen = await open_stage(app, pilot, kind, layer)
            picture = screen.query_one(LayerNormHistograms)
            text = picture.content.plain
            values = layer_norm_values(trace, Stage(kind, layer))
            assert values is not None and values.position == trace.past + len(trace.tokens) - 1
            shown = shown_histograms(text)
            assert len(shown) == 3
            for part, h in zip(shown, (values.input, values.normalized, values.output)):
                assert h.total == n_embd
                assert_histogram_shown(part, h, text)
            assert values.input.counts == values.normalized.counts  # the same bars on a new axis
            assert_lines_fit(picture)
            if lang == "zh":
                assert english_words(text, allowed) == [], text

        screen = await open_stage(app, pilot, "mlp", LAYER)
        picture = screen.query_one(GeluCurve)
        text = picture.content.plain
        pre = pre_activations(trace, LAYER)
        [shown] = shown_histograms(text)
        assert pre.histogram.total == d_mlp
        assert_histogram_shown(shown, pre.histogram, text)
        cut = _("cut: {n} of {total} ({share}); x ≤ 0, where GELU(x) is between about −0.17 and 0").format(
            n=count(pre.cut), total=count(d_mlp), share=percent(pre.cut / d_mlp)
        )
        passes = _("passes: {n} of {total} ({share}); x > 0, where GELU(x) is more than x/2").format(
            n=count(pre.passed), total=count(d_mlp), share=percent(pre.passed / d_mlp)
        )
        assert squashed(cut) in squashed(text) and squashed(passes) in squashed(text)
        # The share that passes is the MLP stage's own "positive after GELU" at that position.
        frac = trace.event(f"blocks.{LAYER}.mlp.hook_post")["frac_active"][-1]
        assert pre.passed == round(frac * d_mlp)
        assert_lines_fit(picture)
        if lang == "zh":
            assert english_words(text, allowed) == [], text

        screen = await open_stage(app, pilot, "heads", LAYER)
        picture = screen.query_one(HeadEntropyBars)
        entropies = head_entropies(trace, LAYER)
        shown = picture.content.plain.split("\n")
        rows = [row for row in shown if re.match(r"(▶ |  )\S", row)]  # one a head, then the scale
        assert [row.split()[-1] for row in rows] == [num(b) for b in entropies.bits]
        assert shown[-1].split() == ["0", num(entropies.max_bits)]  # the scale: a full bar spreads evenly
        assert_lines_fit(picture)
        if lang == "zh":
            assert english_words(picture.content.plain, allowed) == [], picture.content.plain


@run_async
async def test_the_selected_head_is_marked_in_the_entropy_bars(tiny_pictures):
    app = make_app(trace=tiny_pictures)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_stage(app, pilot, "heads", LAYER)
        await pilot.press("full_stop", "full_stop")
        marked = [row for row in screen.query_one(HeadEntropyBars).content.plain.split("\n") if row.startswith("▶")]
        assert marked == [row for row in marked if _("head {head}").format(head=2) in row] and len(marked) == 1


@pytest.mark.parametrize("lang", ["en", "zh"])
@run_async
async def test_a_trace_written_before_the_pictures_says_they_are_not_in_it(tiny_trace, lang):
    """The committed tiny-trace.json has no histograms or entropies: each picture says so, and the
    stage's table or grid is still there."""
    assert tiny_trace.event("blocks.0.mlp.hook_pre").get("histogram") is None
    set_language(lang)
    app = make_app(trace=tiny_trace)
    missing = squashed(_("This picture is not in this trace: it was written before gpt2viz recorded the numbers it needs."))
    async with app.run_test(size=(80, 24)) as pilot:
        for name, (kind, widget_type) in PICTURES.items():
            screen = await open_stage(app, pilot, kind, 0)
            assert squashed(screen.query_one(widget_type).content.plain) == missing, name
        screen = await open_stage(app, pilot, "ln1", 0)
        assert _("going in") in screen.query_one("#picture-layer-norm").query_one("LayerNormTable").content.plain


BREAKAGES = {
    "counts one short": lambda h: h["normalized"]["counts"].pop(),
    "a negative count": lambda h: h["output"]["counts"].__setitem__(0, -1),
    "a count that is a float": lambda h: h["input"].__setitem__("below", 1.0),
    "edges out of order": lambda h: h["edges"].reverse(),
    "a position not computed": lambda h: h.__setitem__("position", 999),
    "no edges": lambda h: h.pop("edges"),
    "not an object": lambda h: h.clear(),
}


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_data_that_cannot_be_drawn_is_not_drawn(tiny_pictures, breakage):
    """A replayed trace may hold anything where checks do not look (yet): a picture whose data
    has the wrong shape is left out, not drawn wrong."""
    doc = json.loads(json.dumps(tiny_pictures.to_dict()))
    stage = Stage("ln1", LAYER)
    event = next(e for e in doc["events"] if e["stage"] == f"blocks.{LAYER}.ln1.hook_normalized")
    assert layer_norm_values(Trace.from_dict(copy.deepcopy(doc)), stage) is not None
    BREAKAGES[breakage](event["histogram"])
    assert layer_norm_values(Trace.from_dict(doc), stage) is None


def test_broken_gelu_and_entropy_data_is_not_drawn(tiny_pictures):
    doc = json.loads(json.dumps(tiny_pictures.to_dict()))
    pre = next(e for e in doc["events"] if e["stage"] == f"blocks.{LAYER}.mlp.hook_pre")["histogram"]
    pattern = next(e for e in doc["events"] if e["stage"] == f"blocks.{LAYER}.attn.hook_pattern")["entropy"]
    pre["cut"] = sum(pre["counts"]) + pre["below"] + pre["above"] + 1  # more cut than counted
    pattern["bits"].append(1.0)  # one head too many
    trace = Trace.from_dict(doc)
    assert pre_activations(trace, LAYER) is None and head_entropies(trace, LAYER) is None


# -- snapshots --------------------------------------------------------------------------------


def show_picture(kind: str, widget_type):
    """Goes to `kind` in block LAYER and scrolls its picture to the top of the stage view."""

    async def run_before(pilot) -> None:
        screen = await open_stage(pilot.app, pilot, kind, LAYER)
        view = screen.query_one("#stage-view")
        view.scroll_to_widget(screen.query_one(widget_type), animate=False, top=True)
        await pilot.pause()
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("picture", list(PICTURES))
@pytest.mark.parametrize("model", ["tiny", "small"])
def test_picture_snapshot(snap_compare, model, picture, size):
    trace = load(TINY_PICTURES if model == "tiny" else SMALL_PICTURES)
    app = make_app(trace=trace)
    assert snap_compare(app, terminal_size=SIZES[size], run_before=show_picture(*PICTURES[picture]))


@pytest.mark.parametrize("picture", list(PICTURES))
def test_picture_snapshot_zh(snap_compare, picture):
    set_language("zh")
    app = make_app(trace=load(TINY_PICTURES))
    assert snap_compare(app, terminal_size=(80, 24), run_before=show_picture(*PICTURES[picture]))
