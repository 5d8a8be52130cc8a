"""The pictures under the stages and the cost lab, in Chinese: no English left, the same numbers as
in English, tables aligned by terminal cells (a Chinese character takes two), plots and captions
that fit their width, and the lab redrawn on a live switch of language."""

from __future__ import annotations

import dataclasses
import re
import textwrap
from collections import Counter

import pytest
from rich.cells import cell_len
from textual.widgets import ContentSwitcher, Static, TabbedContent

import gpt2viz
from tui_helpers import GENERATION_TRACE, TINY_TRACE, run_async, stages_in_blocks
from zh_words import english_words, run_words
from gpt2viz import cost_lab
from gpt2viz.i18n import _, set_language
from gpt2viz.trace import load, trace_prompt
from gpt2viz.trace.recorder import trace_decode_step
from gpt2viz.tui.app import make_app
from gpt2viz.tui.formatting import percent, quote
from gpt2viz.tui.lab_narration import machine_text, precision_text
from gpt2viz.tui.screens.cost_lab import RECORD_COMMAND, CostLabScreen, LabPlot
from gpt2viz.tui.screens.step import StepScreen
from gpt2viz.tui.stages import Stage
from gpt2viz.tui.widgets.pictures import LayerNormTable, LogitLensTable, TokenTable, TopTokens
from gpt2viz.i18n.layout import wrap_lines as wrap
from gpt2viz.tui.widgets.strip_widget import Prose, StripWidget
from gpt2viz.tui.widgets.laid import Laid

LAB_TRACE = TINY_TRACE.with_name("tiny-lab-trace.json")
NUMBER = re.compile(r"-?\d+(?:[.,]\d+)*(?:e-?\d+)?%?")
EXPERIMENTS = ("context", "batch", "precision")


def numbers(text: str) -> Counter:
    return Counter(NUMBER.findall(text))


def allowed_words(trace) -> set[str]:
    """The run's own text a picture may show: prompt and token texts, the predicted tokens (top
    tokens, logit lens), also cut short ('␣meani…') where a column has no room for all of them."""
    words = run_words(trace)
    texts = [t for position in trace.event("unembed.hook_out").get("positions") or [] for t in position["tokens"]]
    lens = trace.event("logit_lens") or {}
    texts += [lens.get("final_token", "")] + [t for layer in lens.get("layers") or [] for t in layer["tokens"]]
    for text in texts:
        words.update(w.lower() for w in re.findall(r"[A-Za-z][A-Za-z'\-]*", text))
    return words | {w[:n] for w in words for n in range(2, len(w))}


# -- every picture of every stage ----------------------------------------------------------------


@pytest.fixture(scope="module")
def bundled():
    """The bundled tiny model (trained: its predictions are real tokens)."""
    return gpt2viz.load_model("tiny")


def picture_text(screen: StepScreen) -> str:
    """All lines of the stage's picture as built (also those scrolled out of sight); line-drawn
    pictures must fit their width."""
    picture = screen.query_one(f"#{screen.query_one('#pictures', ContentSwitcher).current}")
    parts = []
    for widget in [picture, *picture.query("*")]:
        if not widget.display:
            continue
        if isinstance(widget, StripWidget):
            width = widget.size.width
            lines = widget.lines(width)
            assert all(strip.cell_length <= width for strip in lines), (screen.stage.key, [s.text for s in lines])
            parts += [strip.text for strip in lines]
        elif isinstance(widget, (Static, Laid)):
            parts.append(widget.content.plain)
    return "\n".join(parts)


async def pictures(trace, language: str, size: tuple[int, int], stages=None, blocks=None) -> dict[tuple[str, int], str]:
    """(stage key, head) -> the text of its picture, in `language`, walked in the app (the stages
    `stages`, else every stage; with `blocks`, of the blocks only those)."""
    set_language(language)
    app = make_app(trace=trace)
    shown = {}
    async with app.run_test(size=size) as pilot:
        for _try in range(200):
            await pilot.pause()
            if isinstance(app.screen, StepScreen):
                break
        screen = app.screen
        walk = stages or screen.stages
        for stage in (walk[i] for i in stages_in_blocks(walk, blocks)):
            screen.go_to(screen.stages.index(stage))
            await pilot.pause()
            shown[stage.key, 0] = picture_text(screen)
            if stage.is_attention:  # and the next head, marked in the all-heads grid
                await pilot.press("full_stop")
                shown[stage.key, 1] = picture_text(screen)
                await pilot.press("comma")
    return shown


def assert_chinese_with_the_english_numbers(trace, english: dict, chinese: dict) -> None:
    allowed = allowed_words(trace)
    assert english.keys() == chinese.keys()
    for key, text in chinese.items():
        assert english_words(text, allowed) == [], (key, text)
        assert numbers(text) == numbers(english[key]), (key, english[key], text)


# Every picture again at 120 x 40 (the 80 x 24 run reads the same words and numbers): the slow tier.
@pytest.mark.parametrize("size", [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), marks=pytest.mark.slow, id="120x40")])
@run_async
async def test_every_picture_of_a_prompt_speaks_chinese_with_the_english_numbers(tiny_trace, size):
    english = await pictures(tiny_trace, "en", size)
    chinese = await pictures(tiny_trace, "zh", size)
    assert_chinese_with_the_english_numbers(tiny_trace, english, chinese)
    assert "22 个字节（合计）" in chinese["tokenize", 0] and "22 bytes in all" in english["tokenize", 0]
    assert "▶头 1" in chinese["blocks.0.heads", 1]
    # A cache allocated whole (this trace's) says its most only.
    assert "the cache holds at most 128 positions" in " ".join(english["next_token", 0].split())
    assert "allocated now" not in english["next_token", 0]


@run_async
async def test_the_next_token_picture_tells_the_cache_s_most_from_what_is_allocated(bundled):
    """The bundled model's cache may hold 256 positions and has 64 allocated (the side panel's
    "reserved"): a learner read "room for 256 positions" beside "401,408 B reserved"."""
    trace = trace_prompt(bundled, "The capital of France is")
    english = await pictures(trace, "en", (80, 24), stages=[Stage("next_token")])
    chinese = await pictures(trace, "zh", (80, 24), stages=[Stage("next_token")])
    assert "the cache holds at most 256 positions, 64 allocated now" in " ".join(english["next_token", 0].split())
    assert "缓存最多容纳256个位置，目前已分配64个位置" in "".join(chinese["next_token", 0].split())


@run_async
async def test_every_picture_of_a_llama_model_speaks_chinese_with_the_english_numbers(llama_trace):
    """Its own pictures (the token strips without positions, RMSNorm's bars, the grouped heads and
    rotated pairs, SiLU's curve, the map with GPT-2 small beside it) at 80 x 24, where they wrap most."""
    english = await pictures(llama_trace, "en", (80, 24))
    chinese = await pictures(llama_trace, "zh", (80, 24))
    # The test vocabulary's made-up tokens ('tok112') are numbered: as many as a column holds are
    # shown, which its header's width in each language decides. Their numbers are no facts.
    unnumbered = {key: {k: re.sub(r"tok\d+", "tok", v) for k, v in shown.items()} for key, shown in
                  (("en", english), ("zh", chinese))}
    assert_chinese_with_the_english_numbers(llama_trace, unnumbered["en"], unnumbered["zh"])
    assert "第 0 对" in chinese["blocks.0.qkv", 0] and "SiLU 曲线" in chinese["blocks.0.mlp", 0]


@run_async
async def test_every_picture_of_a_decode_step_speaks_chinese(bundled):
    """A decode step: cached positions above the token table, the KV cache after a decode step.
    Block 0 and the last block stand for the blocks between (the same pictures, other numbers)."""
    ids = bundled.tokenizer.encode("The meaning of life is, as everyone knows, not 42")
    trace = trace_decode_step(bundled, ids)
    blocks = {0, bundled.config.n_layer - 1}
    english = await pictures(trace, "en", (120, 40), blocks=blocks)
    chinese = await pictures(trace, "zh", (120, 40), blocks=blocks)
    assert_chinese_with_the_english_numbers(trace, english, chinese)
    assert "位置 0–10：已在 KV cache 中" in chinese["tokenize", 0]
    assert "这一步 decode 之后的 KV cache" in chinese["next_token", 0]
    # All heads: each head's map (one query row against 12 keys) stands under its own title.
    title, row = english["blocks.0.heads", 0].split("\n")[:2]
    assert [m.start() for m in re.finditer("▀+", row)] == [m.start() for m in re.finditer("[▶ ]head", title)]


@run_async
async def test_the_pictures_of_a_long_prompt_speak_chinese(bundled):
    """200 positions: rows left out of the tables, attention maps averaged in blocks, captions wrapped."""
    trace = trace_prompt(bundled, bundled.tokenizer.decode(list(range(1000, 1200))))
    kinds = [Stage("tokenize"), Stage("embed"), *(Stage(k, 0) for k in ("ln1", "scores", "heads", "attn_out", "mlp"))]
    english = await pictures(trace, "en", (80, 24), kinds + [Stage("lm_head")])
    chinese = await pictures(trace, "zh", (80, 24), kinds + [Stage("lm_head")])
    assert_chinese_with_the_english_numbers(trace, english, chinese)
    assert "未列出" in chinese["blocks.0.ln1", 0] and "未画出" in chinese["embed", 0]
    assert "按 64 × 64 的网格分块取平均" in chinese["blocks.0.scores", 0].replace("\n", "")
    assert "最后一个查询对全部" in chinese["blocks.0.scores", 0]


# -- tables aligned by cells ---------------------------------------------------------------------


def lines_of(picture, trace, stage: Stage) -> list[str]:
    return picture.build(trace, stage, 0).plain.split("\n")


def end(line: str, text: str, last: bool = False) -> int:
    """The cell just after `text` in `line` (its first or last occurrence)."""
    i = line.rindex(text) if last else line.index(text)
    return cell_len(line[: i + len(text)])


def start(line: str, text: str) -> int:
    return cell_len(line[: line.index(text)])


def field_ends(line: str) -> list[int]:
    """Where each space-separated field of `line` ends, in cells."""
    return [cell_len(line[: m.end()]) for m in re.finditer(r"\S+", line)]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_table_headers_stand_over_their_columns(tiny_trace, language):
    set_language(language)

    rows = lines_of(TokenTable(), tiny_trace, Stage("tokenize"))
    header = next(i for i, line in enumerate(rows) if _("bytes") in line)
    for line in rows[header + 1 : -1]:  # ... id (6 cells), 2 spaces, bytes (5 cells)
        assert end(rows[header], _("id")) == cell_len(line) - 7
        assert start(rows[header], _("bytes")) == cell_len(line) - 5
        assert end(rows[-1], "22") == cell_len(line)  # the total under the bytes

    rows = lines_of(LayerNormTable(), tiny_trace, Stage("ln1", 0))
    labels = field_ends(rows[1])
    assert len(labels) == 6
    for line in rows[2:]:
        values = field_ends(line)[2:]  # after the position and the token: 2 numbers → 2 numbers → 2 numbers
        assert [v for i, v in enumerate(values) if i not in (2, 5)] == labels
    for name, std_end in zip([_("going in"), _("normalized"), _("after γ, β")], labels[1::2]):
        assert std_end - 17 <= start(rows[0], name) and end(rows[0], name) <= std_end

    rows = lines_of(TopTokens(), tiny_trace, Stage("lm_head"))
    last = tiny_trace.event("unembed.hook_out")["positions"][-1]
    for line, tok, token_id in zip(rows[2:], last["tokens"], last["ids"]):
        assert start(rows[1], _("token")) == start(line, quote(tok))  # quoted, as sentences quote tokens
        assert end(rows[1], _("id"), last=True) == cell_len(line.rstrip()) == end(line, str(token_id), last=True)
        assert end(rows[1], _("logit")) == field_ends(line)[-2]

    rows = lines_of(LogitLensTable(), tiny_trace, Stage("logit_lens"))
    for line, layer in zip(rows[1:], tiny_trace.event("logit_lens")["layers"]):
        assert start(rows[0], _("top token")) == start(line, layer["tokens"][0])
        assert end(rows[0], " p") == end(line, percent(layer["probs"][0]))


# -- the cost lab --------------------------------------------------------------------------------


async def open_lab(pilot) -> CostLabScreen:
    for _try in range(200):
        await pilot.pause()
        if isinstance(pilot.app.screen, StepScreen):
            break
    await pilot.press("m")
    for _try in range(200):
        await pilot.pause()
        if isinstance(pilot.app.screen, CostLabScreen) and pilot.app.screen.is_mounted:
            return pilot.app.screen
    raise AssertionError("the lab never opened")


def plot_lines(lab: CostLabScreen, name: str) -> list[str]:
    plot = lab.query_one(f"#plot-{name}", LabPlot)
    lines = [strip.text for strip in (plot.render_line(y) for y in range(plot.size.height))]
    assert all(cell_len(line) == plot.size.width for line in lines), lines  # wide characters take two cells
    return lines


async def lab_texts(language: str, size: tuple[int, int]) -> dict[str, str]:
    """The replayed lab's words and plot per experiment, its status, tab labels and help."""
    set_language(language)
    app = make_app(trace=load(LAB_TRACE))
    texts = {}
    async with app.run_test(size=size) as pilot:
        lab = await open_lab(pilot)
        for key, name in zip("123", EXPERIMENTS):
            await pilot.press(key)
            await pilot.pause()
            texts[name] = lab.query_one(f"#words-{name}", Prose).text
            texts[f"{name} plot"] = "\n".join(plot_lines(lab, name))
        texts["status"] = str(lab.query_one("#lab-status-text", Static).render())
        texts["tabs"] = " ".join(str(tab.label) for tab in lab.query_one(TabbedContent).query("ContentTab"))
        texts["help"] = lab.help_text()
    return texts


# The lab again at 120 x 40: the slow tier.
@pytest.mark.parametrize("size", [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), marks=pytest.mark.slow, id="120x40")])
@run_async
async def test_the_replayed_lab_speaks_chinese_with_the_english_numbers(size):
    english = await lab_texts("en", size)
    chinese = await lab_texts("zh", size)
    if size == (80, 24):  # a plot of a few rows labels its y axis at 0 and the top only (cost_lab.FEW_ROWS)
        for name in EXPERIMENTS:
            rows = [line for line in english[f"{name} plot"].splitlines() if "┤" in line]
            assert [row.split("┤")[0].strip() for row in rows] == [rows[0].split("┤")[0].strip(), "0"], name
    for key, text in chinese.items():
        assert english_words(text) == [], (key, text)
        if not key.endswith("plot"):  # a plot's ticks depend on its labels' room
            assert numbers(text) == numbers(english[key]), key
    assert "每个新 token 的 ms，按位置" in chinese["context plot"] and "无缓存" in chinese["context plot"]
    assert "位置" in chinese["context plot"].splitlines()[-1]
    assert chinese["tabs"] == "上下文长度 批大小 数值格式"
    assert "r 运行当前显示的实验，a 运行全部三个，␣ 停止运行，n 更改上下文实验的长度" in chinese["help"]
    assert "float16：每个 token 1.50 ms（float32 的 0.750 倍）" in chinese["precision"]


@run_async
async def test_a_trace_without_a_lab_result_says_how_to_record_one_in_chinese():
    set_language("zh")
    app = make_app(trace=load(GENERATION_TRACE))
    async with app.run_test(size=(80, 24)) as pilot:
        lab = await open_lab(pilot)
        text = lab.query_one("#words-context", Prose).text
        assert text == f"这份 trace 里没有实验结果。可以用 {RECORD_COMMAND} 录制一份。"
        assert english_words(text.replace(RECORD_COMMAND, "")) == []


@run_async
async def test_the_lab_follows_a_live_switch_of_language_without_running_again():
    app = make_app(trace=load(LAB_TRACE))
    async with app.run_test(size=(120, 40)) as pilot:
        lab = await open_lab(pilot)
        result = lab.result
        english = {name: lab.query_one(f"#words-{name}", Prose).text for name in EXPERIMENTS}
        app.switch_language("zh")
        await pilot.pause()
        assert lab.result is result
        for name in EXPERIMENTS:
            text = lab.query_one(f"#words-{name}", Prose).text
            assert english_words(text) == [] and numbers(text) == numbers(english[name])
        assert str(lab.query_one(TabbedContent).get_tab("lab-batch").label) == "批大小"
        assert "录制下来的实验结果" in str(lab.query_one("#lab-status-text", Static).render())
        await pilot.press("1")
        await pilot.pause()
        assert "每个新 token 的 ms，按位置" in "\n".join(plot_lines(lab, "context"))
        app.switch_language("en")
        await pilot.pause()
        assert {name: lab.query_one(f"#words-{name}", Prose).text for name in EXPERIMENTS} == english


@run_async
async def test_the_lab_names_the_keys_as_they_are_bound(bundled):
    """A live lab: its idle texts and status line name the keys of the user's key map."""
    set_language("zh")
    app = make_app(lm=bundled)
    async with app.run_test(size=(120, 40)) as pilot:
        app.set_keymap({"lab-run": "x", "lab-run-all": "y", "lab-stop": "z"})
        lab = await open_lab(pilot)
        status = lab.query_one("#lab-status-text", Static)
        for name in EXPERIMENTS:
            text = lab.query_one(f"#words-{name}", Prose).text
            assert text.endswith("按 x 运行。") and english_words(text) == [], text
        assert str(status.render()) == "x 运行当前显示的实验，y 运行全部三个。"
        lab.running = "batch"  # what the status line says while the batch experiment runs
        lab._status()
        assert str(status.render()) == "正在测量批处理的 decode 步耗时（z 停止）"


# -- English plurals and wrapping ---------------------------------------------------------------


def test_english_counts_are_singular_for_one(bundled):
    one = trace_prompt(bundled, "a")
    assert one.tokens[0]["bytes"] == 1
    assert "1 byte in all" in TokenTable().build(one, Stage("tokenize"), 0).plain
    # An empty prompt: the <|endoftext|> it starts from is none of its bytes (the table said 13).
    table = TokenTable().build(trace_prompt(bundled, ""), Stage("tokenize"), 0).plain
    assert "0 bytes in all" in table and "50256      –" in table and "13" not in table
    result = cost_lab.LabResult.from_dict(load(LAB_TRACE).cost_lab)
    result.machine = dataclasses.replace(result.machine, threads=1)
    assert machine_text(result).endswith("on 1 thread.")
    sweep = result.precision_formats
    rows = [dataclasses.replace(r, quality={**r.quality, "positions": 1}) for r in sweep.rows]
    text = precision_text(result, dataclasses.replace(sweep, rows=rows), (), sweep.context, "r")
    assert "over the prompt's 1 position:" in text


def test_formats_measured_without_float32_are_said_without_a_ratio():
    """No float32 to compare with: each row says its own numbers, in either language ("n/a" was
    English on a Chinese screen)."""
    result = cost_lab.LabResult.from_dict(load(LAB_TRACE).cost_lab)
    sweep = result.precision_formats
    alone = dataclasses.replace(sweep, rows=[r for r in sweep.rows if r.format != "float32"])
    english = precision_text(result, alone, (), sweep.context, "r")
    set_language("zh")
    chinese = precision_text(result, alone, (), sweep.context, "r")
    assert "x float32" not in english and "n/a" not in english
    assert english_words(chinese) == [] and numbers(chinese) == numbers(english), chinese


def test_captions_wrap_by_cells_and_break_between_chinese_characters():
    chinese = "按 64 × 64 的网格分块取平均；行：查询，列：键（标出的是每块的第一个位置）"
    for width in (8, 20, 40):
        lines = wrap(chinese, width)
        assert all(cell_len(line) <= width for line in lines)
        assert "".join(lines).replace(" ", "") == chinese.replace(" ", "")
        assert not any(line.startswith(("，", "；", "）")) for line in lines)
    assert wrap(chinese, 40) == ["按 64 × 64 的网格分块取平均；行：查询，", "列：键（标出的是每块的第一个位置）"]
    english = "averaged over a 64 × 64 grid; rows: queries, columns: keys (first position of each block)"
    for width in (8, 20, 40):
        assert wrap(english, width) == textwrap.wrap(english, width)


@pytest.mark.parametrize("language, said, words", [("en", "… 5 tokens before", "tokens before"), ("zh", "… 前面还有 5 个 token", "前面还有")])
def test_the_next_token_picture_says_how_much_text_it_leaves_out(bundled, language, said, words):
    """A learner's walk: the Next token stage showed a 45-token text's last 40 tokens with nothing
    to say the first ones were left out (its words counted all of them)."""
    from gpt2viz.tui.widgets.pictures import NEXT_TOKEN_CHIPS, NextTokenView

    ids = list(range(300, 300 + NEXT_TOKEN_CHIPS + 5))
    set_language(language)
    long = NextTokenView().build(trace_prompt(bundled, ids), Stage("next_token"), 0).plain
    short = NextTokenView().build(trace_prompt(bundled, ids[:NEXT_TOKEN_CHIPS]), Stage("next_token"), 0).plain
    assert long.startswith(said) and words not in short
