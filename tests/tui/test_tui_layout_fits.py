"""Nothing wraps or is cut at 80x24, in English and in Chinese: every table row of every stage's
picture is one line (the picture's rendered lines are its rows), no header ends in '…', the
formula folds at its own places, and the top bar, the settings form, the cost chart, the help and
the palette say their whole words."""

from __future__ import annotations

import re

import pytest
from rich.cells import cell_len
from textual.widgets import Label, Static

from gpt2viz.i18n import _, language, ngettext, set_language
from gpt2viz.tui.app import make_app
from gpt2viz.tui.screens.generation_settings import SettingsScreen
from gpt2viz.tui.screens.help import KEY_COLUMN, HelpScreen
from gpt2viz.tui.stages import build_stages
from gpt2viz.tui.table_layout import Column, header_lines
from gpt2viz.tui.widgets.embedding_strips import EmbedPicture
from gpt2viz.tui.widgets.latency_chart import LatencyChart, Series
from gpt2viz.tui.widgets.pictures import Picture
from gpt2viz.tui.formatting import compact_shape
from gpt2viz.tui.widgets.side_panel import SidePanel, shapes_lines, shapes_so_far
from gpt2viz.tui.widgets.stage_view import pack_formula
from gpt2viz.tui.widgets.top_bar import TopBar
from test_tui_generation import finished, live_app, open_generation, wait_for
from test_tui_zh_stages import step_screen
from tui_helpers import GENERATION_TRACE, run_async, screen_text, stages_in_blocks

LANGUAGES = ["en", "zh"]
CUT = re.compile(r"\S…\s*$")  # a line that ends in a word cut short by `fit`


def shown_lines(app, widget) -> list[str]:
    """The lines of the screen inside `widget`'s region, as drawn."""
    region = widget.region
    strips = app.screen._compositor.render_strips()
    return [strip.crop(region.x, region.right).text for strip in strips[region.y : region.bottom]]


def assert_rows_are_lines(widget, what) -> None:
    """A Static's content is drawn line for line: none wider than the widget (Textual would wrap
    it onto a second line), none ending in a word cut short ('hidden s…'; a range's '16·h …' or
    a gap's 'not listed …' is no cut)."""
    rows = widget.content.plain.split("\n")
    width = widget.size.width
    assert widget.size.height == len(rows), (what, width, rows)
    for row in rows:
        assert cell_len(row) <= width, (what, width, row)
        assert not CUT.search(row), (what, row)


# 80 x 24 is where a picture or formula runs out of width first; every stage again at 120 x 40, and
# gpt2-small's shape in English (its Chinese, the wider text, stays fast): the slow tier.
SLOW = pytest.mark.slow


@pytest.mark.parametrize("lang, which, size", [
    ("en", "tiny_trace", (80, 24)), ("zh", "tiny_trace", (80, 24)), ("zh", "small_trace", (80, 24)),
    pytest.param("en", "small_trace", (80, 24), marks=SLOW),
    pytest.param("en", "tiny_trace", (120, 40), marks=SLOW), pytest.param("zh", "tiny_trace", (120, 40), marks=SLOW),
])
@run_async
async def test_every_stage_s_picture_and_formula_fit_their_width(lang, which, size, request):
    trace = request.getfixturevalue(which)
    set_language(lang)
    app = make_app(trace=trace)
    async with app.run_test(size=size) as pilot:
        screen = await step_screen(app, pilot)
        stages = build_stages(trace.n_layer)
        for i in stages_in_blocks(stages, {0, trace.n_layer - 1}):
            stage = stages[i]
            screen.go_to(i)
            await pilot.pause()
            await pilot.pause()  # a picture laid out again for the width it got
            view = screen.query_one("#stage-view")
            picture = next(w for w in view.query("#pictures > *") if w.display)
            for part in [picture, *picture.query(Picture)]:  # a stack of pictures: each of them
                if isinstance(part, Picture):
                    assert_rows_are_lines(part, stage.key)
            if isinstance(picture, EmbedPicture):
                strips = picture.lines(picture.size.width)
                head = strips[0].text + strips[1].text
                assert _("hidden state") in head and "|x|" in head, head
                assert "+" in strips[-1].text and "–" in strips[-1].text, [s.text for s in strips]  # the scale on one line
            for part in ("#stage-formula", "#stage-flow"):
                assert_rows_are_lines(screen.query_one(part), (stage.key, part))
            shapes = screen.query_one(SidePanel).query_one("#shapes")
            assert "…" not in shapes.content.plain, (stage.key, shapes.content.plain)


def test_a_long_formula_folds_at_its_gaps_commas_and_operators():
    assert pack_formula("scores[h, i, j] = −∞ where j > i   (the causal mask)", 40) == [
        "scores[h, i, j] = −∞ where j > i",
        "    (the causal mask)",
    ]
    assert pack_formula("T = 5 个位置，H = 8 个头，D = 每个头 14 个数", 30) == ["T = 5 个位置，H = 8 个头，", "    D = 每个头 14 个数"]
    assert pack_formula("ln_1(x) = (x − mean(x)) / √(var(x) + 1e-05) · γ + β", 50) == [
        "ln_1(x) = (x − mean(x)) / √(var(x) + 1e-05) · γ",
        "    + β",
    ]
    assert pack_formula("x = y + z", 3) == ["x", "= y", "+ z"]  # no room for an indent: still ends


def test_headers_run_on_into_free_cells_or_take_a_second_line_never_cut():
    # The residual table at 80 columns: bars of 6 cells, each with its number (8).
    columns = [(Column(12, 14), "|x| before"), (Column(28, 14), "|attention update|"), (Column(44, 8, "right"), "|x| after")]
    assert [line.plain for line in header_lines(columns, 52)] == [
        " " * 12 + "|x| before" + " " * 6 + "|attention update|",
        " " * 43 + "|x| after",
    ]
    # Where all fit: one line. Past the right edge: moved left, within the line.
    assert [line.plain for line in header_lines([(Column(0, 5), "mean"), (Column(6, 5, "right"), "std")], 20)] == ["mean    std"]
    assert [line.plain for line in header_lines([(Column(0, 3), "a"), (Column(10, 10), "rank and p")], 15)] == ["a    rank and p"]


@pytest.mark.parametrize("lang", LANGUAGES)
@run_async
async def test_the_settings_form_shows_every_hint_whole_and_l_switches_the_language(ckpts, lang):
    app = live_app(ckpts, "--lang", lang, "--generate", "2")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SettingsScreen))
        form = app.screen
        form.query_one("#sampling").value = True  # every field on show and enabled
        await pilot.pause()
        await pilot.pause()
        for hint in form.query(".settings-hint").results(Label):
            text = hint.content.plain if hasattr(hint.content, "plain") else str(hint.content)
            shown = "".join(line.strip() for line in shown_lines(app, hint))
            assert text.replace(" ", "") == shown.replace(" ", ""), (hint.id, text, shown_lines(app, hint))
        keys = form.query_one("#settings-hint")
        for line in keys.content.plain.split("\n"):
            assert cell_len(line) <= keys.size.width, line
        assert keys.size.height == len(keys.content.plain.split("\n"))
        other = "English" if lang == "zh" else "中文"
        assert f"L{'：' if lang == 'zh' else ': '}{other}" in keys.content.plain
        # L switches the language with the focus in a number field, whose value stays as it was.
        field = form.query_one("#new-tokens")
        assert form.focused is field
        await pilot.press("L")
        await pilot.pause()
        assert language() == ("en" if lang == "zh" else "zh") and app.screen is form
        assert field.value == "2"
        assert ("Generation settings" if lang == "zh" else "生成设置") in form.query_one("#settings-title", Static).content.plain
        await pilot.press("L")
        await pilot.pause()
        assert language() == lang
        await pilot.press("end", "5")  # digits are still the field's
        assert field.value == "25"


@pytest.mark.parametrize("lang", LANGUAGES)
@run_async
async def test_the_top_bar_keeps_the_sampling_settings_whole_and_the_panels_fit(ckpts, lang):
    app = live_app(
        ckpts, "--lang", lang, "--generate", "2", "--temperature", "0.8", "--top-k", "40", "--top-p", "0.95", "--seed", "1",
        "--no-cache",
    )
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_generation(app, pilot)
        await finished(pilot, screen)
        bar = screen.query_one(TopBar)
        line = bar.content.plain
        assert cell_len(line) <= bar.size.width, line
        seed = "种子 1" if lang == "zh" else "seed 1"
        # The number format stays too: it goes after the size, the word "sampling" and the token count.
        for part in ("T 0.8", "top-k 40", "top-p 0.95", seed, "KV cache", " · float32 · "):
            assert part in line, (part, line)
        # The sampled legend, the no-cache recompute line, the step's shapes, the chart's legend.
        for panel in ("#choice-table", "#kv-table", "#choice-flow", "#cost-legend"):
            assert_rows_are_lines(screen.query_one(panel), panel)
        assert "top-p" in screen.query_one("#choice-table").content.plain
        for panel in ("#kv-table", "#choice-flow"):  # a shape is never broken over two lines
            for row in screen.query_one(panel).content.plain.split("\n"):
                assert row.count("[") == row.count("]"), (panel, row)
        for row in screen.query_one("#cost-legend").content.plain.split("\n"):
            assert row.startswith("■") and len(row) > 2, row  # a colour's mark with its words


@pytest.mark.parametrize("lang", LANGUAGES)
@run_async
async def test_the_cost_chart_s_header_is_never_cut(lang):
    from gpt2viz.trace import load

    set_language(lang)
    app = make_app(trace=load(GENERATION_TRACE))
    async with app.run_test(size=(80, 24)) as pilot:
        await step_screen(app, pilot)
        await pilot.press("g")
        await wait_for(pilot, lambda: app.screen.query(LatencyChart))
        await pilot.pause()
        chart = app.screen.query_one(LatencyChart)
        # A spike cut off and more steps than columns: the header has two notes to make.
        chart.show([Series([10.0] * 40 + [100.0] + [10.0] * 40)], None)
        await pilot.pause()
        header = chart.lines(chart.size.width)[0].text.rstrip()
        assert "…" not in header and cell_len(header) <= chart.size.width, header
        assert "↑1" in header, header
        # A bar cut off a hair above the top: both in the digits that tell them apart (a learner's
        # walk read "top 10.9 · ↑1 up to 10.9").
        chart.show([Series([10.9] * 20), Series([1.0] * 5 + [10.91] + [1.0] * 5)], None)
        await pilot.pause()
        header = chart.lines(chart.size.width)[0].text
        assert "10.90" in header and "10.9 " not in header, header
        assert "10.91" in header or (lang == "en" and "↑" not in header), header  # the note fits in Chinese here


@pytest.mark.parametrize("lang", LANGUAGES)
@run_async
async def test_the_help_wraps_what_a_key_does_under_itself(tiny_trace, lang):
    set_language(lang)
    app = make_app(trace=tiny_trace)
    async with app.run_test(size=(80, 24)) as pilot:
        await step_screen(app, pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause()
        keys = app.screen.query_one("#help-text")
        rows = keys.content.plain.split("\n")[1:]  # under the title
        assert keys.size.height == len(rows) + 1
        continued = [row for row in rows if not row[:KEY_COLUMN].strip()]
        assert continued, rows  # at 80 columns some key's words take two lines
        for row in rows:
            assert cell_len(row) <= keys.size.width and row[KEY_COLUMN : KEY_COLUMN + 2] == "  ", row
            assert row[KEY_COLUMN + 2 : KEY_COLUMN + 3].strip(), row  # the words start in their column


@pytest.mark.parametrize("lang, said", [("en", "No matches found"), ("zh", "没有找到匹配项")])
@run_async
async def test_the_palette_says_no_matches_in_the_language(tiny_trace, lang, said):
    set_language(lang)
    app = make_app(trace=tiny_trace)
    async with app.run_test(size=(80, 24)) as pilot:
        await step_screen(app, pilot)
        app.action_command_palette()
        await pilot.pause()
        await pilot.press(*"zzqx")
        await wait_for(pilot, lambda: said in screen_text(app), timeout=10, what="the no-matches line")
        assert (lang == "en") == ("No matches found" in screen_text(app))


def panel_lines(app, panel) -> list[str]:
    """The side panel's lines as drawn, without its border title's line."""
    return [line.strip() for line in shown_lines(app, panel)[1:]]


def kv_whole(lines: list[str], panel) -> bool:
    """Whether the panel's drawn `lines` start at a title and show the KV cache's title and its
    first facts (two at least), each whole however it wraps, and nothing scrolled."""
    title = _("KV cache (prefill)")
    if panel.max_scroll_y != 0 or title not in lines or lines[0] not in (_("Shapes so far"), title):
        return False
    shown = "".join("".join(line.split()) for line in lines[lines.index(title):])
    facts = ["".join(row.plain.split()) for row in panel._kv_rows]
    return any(shown == "".join(facts[:k]) for k in range(2, len(facts) + 1))


def lesson_app(trace, lang: str):
    """The app on `trace` with lesson 000's page open below, in `lang`."""
    from gpt2viz.options import RunOptions

    set_language(lang)
    return make_app(trace=trace, options=RunOptions(lesson="000"))


@pytest.mark.parametrize("lang", LANGUAGES)
@run_async
async def test_the_shapes_leave_out_whole_rows_under_a_short_column_at_80x24(small_trace, lang):
    # gpt2-small's shapes list outgrows the short column by the last stages. The panel shows whole
    # rows and says how many it left out, the current stage's and the latest kept, the KV cache
    # whole below them, and nothing scrolled (once, the list was scrolled to its end and began with
    # the tail of a wrapped row, or with no title).
    set_language(lang)
    app = make_app(trace=small_trace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await step_screen(app, pilot)
        screen.go_to(len(screen.stages) - 3)  # the LM head: every shape met
        panel = screen.query_one(SidePanel)
        reserved = _("{n} reserved").format(n="").strip()
        filled = ngettext("{n} layer filled", "{n} layers filled", 12).format(n="12/12")
        await wait_for(pilot, lambda: filled in screen_text(app) and reserved in screen_text(app), what="the KV block")
        await pilot.pause()
        entries = shapes_so_far(small_trace, screen.stages, screen.index)
        lines = panel_lines(app, panel)
        assert panel.max_scroll_y == 0 and not panel.show_vertical_scrollbar, lines
        assert lines[0] == _("Shapes so far"), lines
        kv = lines.index(_("KV cache (prefill)"))
        assert reserved in lines[-1]
        rows = [line for line in lines[1:kv] if line[:1] == "["]
        hidden = len(entries) - len(rows)
        assert hidden > 0 and rows, lines
        assert lines[kv - 1] == ngettext("{n} more shape not shown", "{n} more shapes not shown", hidden).format(n=hidden)
        shown = [compact_shape(e.dims) for e in entries if any(row.startswith(compact_shape(e.dims) + " ") for row in rows)]
        assert len(shown) == len(rows)
        current = [compact_shape(e.dims) for e in entries if e.current]
        assert set(current) & set(shown), (current, shown)  # the current rows first, each where it fits
        assert shown[-1] == compact_shape(entries[-1].dims) or entries[-1].current  # the latest met kept
        # Every drawn line between the title and the note is a shown row's: a row's first line
        # starts with its shape, its next lines are its names alone (no fragment of a left-out row).
        full = shapes_lines(entries, panel.query_one("#shapes").size.width).plain.split("\n")
        for line in lines[1 : kv - 1]:
            assert any(line == row.strip() for row in full), line


@pytest.mark.parametrize("lang", LANGUAGES)
@run_async
async def test_under_a_lesson_at_80x24_the_panel_starts_at_a_title(tiny_trace, lang):
    # With a lesson page below, the column leaves the panel a few lines: the KV cache's, whole,
    # with its title; the shapes go rather than show a fragment.
    app = lesson_app(tiny_trace, lang)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await step_screen(app, pilot)
        reserved = _("{n} reserved").format(n="").strip()
        for stage in (4, 6, len(screen.stages) - 1):
            screen.go_to(stage)
            await wait_for(pilot, lambda: reserved in screen_text(app), what="the KV block")
            panel = screen.query_one(SidePanel)
            lines = panel_lines(app, panel)
            assert panel.max_scroll_y == 0 and not panel.show_vertical_scrollbar, lines
            assert lines[0] in (_("Shapes so far"), _("KV cache (prefill)")), lines
            assert reserved in lines[-1], lines


@pytest.mark.parametrize("lang", LANGUAGES)
@run_async
async def test_a_resize_from_wide_to_narrow_under_a_lesson_leaves_no_fragment(small_trace, lang):
    # 150x40 -> 80x24 with a lesson page once left the panel scrolled, its KV title away and a line
    # wrapped by the scrollbar's column, which kept the bar (the wrapped line overflowed).
    app = lesson_app(small_trace, lang)
    async with app.run_test(size=(150, 40)) as pilot:
        screen = await step_screen(app, pilot)
        screen.go_to(len(screen.stages) - 3)
        await pilot.pause()
        await pilot.resize_terminal(80, 24)
        panel = screen.query_one(SidePanel)

        def whole() -> bool:  # the state it settles in (the broken one stayed for good); in Chinese a
            # fact may wrap, and the last may not fit under the lesson page
            return panel.region.width < 40 and kv_whole(panel_lines(app, panel), panel)

        await wait_for(pilot, whole, timeout=20, what="the panel whole after the resize")
        screen.go_to(len(screen.stages) - 4)
        await wait_for(pilot, whole, timeout=20, what="the panel after a step")


@run_async
async def test_where_even_the_kv_cache_has_too_few_lines_it_keeps_its_title_and_first_facts():
    # An older trace under a lesson page at 80x24: 5 lines for the KV cache's 6. It showed its last
    # 5, scrolled, the title gone; now its title and first facts, whole lines, nothing scrolled.
    from gpt2viz.trace import load
    from tui_helpers import TINY_TRACE

    app = lesson_app(load(TINY_TRACE), "en")  # (a language an earlier test left would wrap other lines)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await step_screen(app, pilot)
        panel = screen.query_one(SidePanel)
        title = _("KV cache (prefill)")
        await wait_for(pilot, lambda: title in screen_text(app), what="the KV title")
        lines = panel_lines(app, panel)
        facts = [row.plain for row in panel._kv_rows]
        assert panel.max_scroll_y == 0 and lines[0] == title, lines
        assert 2 <= len(lines) <= len(facts) and lines == facts[: len(lines)], (lines, facts)
        assert kv_whole(lines, panel)
