"""The step-through in Chinese: every stage's words, the navigator and the palette's stage list
hold no English, say the same numbers as in English, and follow a live switch of language."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from rich.cells import cell_len

from tui_helpers import run_async, stage_text, stages_in_blocks
from zh_words import english_words, run_words
from gpt2viz.i18n import set_language
from gpt2viz.i18n.layout import NO_LINE_START
from gpt2viz.trace import trace_prompt
from gpt2viz.trace.notices import notice_text
from gpt2viz.tui.app import make_app
from gpt2viz.tui.commands import StageCommands
from gpt2viz.tui.facts import RunFacts, stage_shapes
from gpt2viz.tui.narration import narrate
from gpt2viz.tui.screens.step import StepScreen
from gpt2viz.tui.stages import BLOCK_KINDS, Stage, build_stages, index_of
from gpt2viz.tui.widgets.pipeline_nav import PipelineNavigator
from gpt2viz.tui.widgets.strip_widget import Prose

STAGE_WORDS = ("title", "count", "text", "formula", "flow")  # the stage view's own lines, above the picture
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def numbers(text: str) -> Counter:
    return Counter(NUMBER.findall(text))


def shown_words(trace) -> set[str]:
    """The words of the run's own text that a stage may quote: its prompt and token texts, and the
    tokens the model predicts (top tokens, logit lens), also cut short ('␣mea…', 'w…rd') where a
    label or a quote has no room for all of them."""
    words = run_words(trace)
    texts = []
    for position in (trace.event("unembed.hook_out") or {}).get("positions") or []:
        texts += position["tokens"]
    lens = trace.event("logit_lens") or {}
    texts += [lens.get("final_token", "")] + [t for layer in lens.get("layers") or [] for t in layer["tokens"]]
    for text in texts:
        words.update(w.lower() for w in re.findall(r"[A-Za-z][A-Za-z'\-]*", text))
    return words | {w[:n] for w in words for n in range(2, len(w))} | {w[n:] for w in words for n in range(1, len(w) - 1)}


# Tensors the shapes panel names by their hook's name, as the shape flows write them (code).
TENSOR_NAMES = {"scores", "pattern"}


def words_of(trace, stage: Stage, head: int) -> str:
    """Everything narration.py and facts.py say about one stage."""
    words = narrate(trace, stage, head, generate_key="g")
    names = [name for name, _dims in stage_shapes(trace, stage)]
    return "\n".join([words.title, stage.label, words.text, words.formula, *words.flow, *names])


def every_stage_and_head(trace):
    """Every stage; at the attention stages, every head."""
    for stage in build_stages(RunFacts.of(trace).n_layer, trace.architecture):
        for head in range(RunFacts.of(trace).n_head) if stage.is_attention else (0,):
            yield stage, head


@pytest.mark.parametrize("which", ["tiny_trace", "small_trace", "llama_trace"])
def test_every_stage_is_said_in_chinese_with_the_english_numbers(which, request):
    trace = request.getfixturevalue(which)
    allowed = shown_words(trace) | TENSOR_NAMES
    for stage, head in every_stage_and_head(trace):
        english = words_of(trace, stage, head)
        set_language("zh")
        chinese = words_of(trace, stage, head)
        set_language("en")
        assert english_words(chinese, allowed) == [], (stage.key, head, chinese)
        assert numbers(chinese) == numbers(english), (stage.key, head)


def test_decode_steps_long_prompts_and_int8_are_said_in_chinese(ckpts):
    """The paragraphs only some runs have: a decode step's cache, a prompt cut to the context,
    averaged maps, a one-token prompt, the comparison with float32."""
    import gpt2viz
    from gpt2viz.trace.recorder import trace_decode_step

    lm = ckpts.lm("tiny")
    ids = lm.tokenizer.encode("The meaning of life is")
    int8 = gpt2viz.load_model(str(ckpts.path("tiny")), dtype="int8")
    traces = [
        trace_decode_step(lm, ids),
        trace_decode_step(lm, ids[:2]),  # one cached position
        trace_prompt(lm, "word " * 200),  # more tokens than the context holds: averaged maps
        trace_prompt(lm, "x"),
        trace_prompt(int8, "The meaning of life is", quality=True),
    ]
    for trace in traces:
        allowed = shown_words(trace) | TENSOR_NAMES
        for stage in build_stages(RunFacts.of(trace).n_layer):
            english = words_of(trace, stage, 1)
            set_language("zh")
            chinese = words_of(trace, stage, 1)
            set_language("en")
            assert english_words(chinese, allowed) == [], (trace.prompt[:20], stage.key, chinese)
            assert numbers(chinese) == numbers(english), (trace.prompt[:20], stage.key)


def test_notices_are_said_in_the_reader_s_language(ckpts):
    """An empty prompt's notice sits in the Tokenize narration, inside a translated 'Note'."""
    trace = trace_prompt(ckpts.lm("tiny"), "")
    english = narrate(trace, Stage("tokenize"), generate_key="g").text
    assert f"Note: {notice_text(trace.notices[0])}." in english and "<|endoftext|> (id 50256)" in english
    set_language("zh")
    chinese = narrate(trace, Stage("tokenize"), generate_key="g").text
    assert f"注意：{notice_text(trace.notices[0])}" in chinese
    assert english_words(chinese, shown_words(trace)) == [], chinese
    assert numbers(chinese) == numbers(english)


def test_english_plurals_follow_the_count(ckpts):
    from gpt2viz.trace.recorder import trace_decode_step

    lm = ckpts.lm("tiny")
    one = trace_prompt(lm, "x")
    words = narrate(one, Stage("tokenize"), generate_key="g")
    assert "cuts the 1 byte of the prompt into 1 token." in words.text
    assert "(1 character, 1 byte)" in words.flow[0]
    assert "reads the 1 cached key and value instead" in narrate(one, Stage("next_token"), generate_key="g").text
    two = trace_prompt(lm, "x y")
    assert "into 2 tokens." in narrate(two, Stage("tokenize"), generate_key="g").text
    assert "1 of these tokens starts with one" in narrate(two, Stage("tokenize"), generate_key="g").text
    assert "reads the 2 cached keys and values" in narrate(two, Stage("next_token"), generate_key="g").text
    ids = lm.tokenizer.encode("The meaning of life is")
    step = trace_decode_step(lm, ids[:2])
    assert "The 1 token before it is not run again" in narrate(step, Stage("tokenize"), generate_key="g").text
    assert "shifted by the 1 cached position," in narrate(step, Stage("scores", 0), generate_key="g").text
    assert "1 more block to go." in narrate(step, Stage("mlp_out", 0), generate_key="g").text
    assert "appended to the 1 cached one:" in narrate(step, Stage("qkv", 0), generate_key="g").text
    assert "after the 1 cached one," in narrate(step, Stage("embed"), generate_key="g").text
    step = trace_decode_step(lm, ids)
    assert "The 4 tokens before it are not run again" in narrate(step, Stage("tokenize"), generate_key="g").text
    qkv = narrate(step, Stage("qkv", 0), generate_key="g")
    assert "appended to the 4 cached ones" in qkv.text
    # A decode step computes one position: 1 position, never "1 positions"; its layer's cache then
    # holds the 4 cached positions and the new one.
    assert "2 × 4 heads × 5 positions × 16 =" in qkv.text and "T = 1 position, H = 4 heads, D = 16 numbers" in qkv.formula
    assert "2 × 4 heads × 1 position × 16 =" in narrate(one, Stage("qkv", 0), generate_key="g").text
    # The causal mask: one masked cell is, several are, a single cell has none.
    assert "Here 1 of the 4 cells is masked." in narrate(two, Stage("scores", 0), generate_key="g").text
    assert "Here 3 of the 9 cells are masked." in narrate(trace_prompt(lm, "x y z"), Stage("scores", 0), generate_key="g").text
    single = narrate(one, Stage("scores", 0), generate_key="g").text
    assert "there is one cell, on the diagonal, so nothing is masked" in single and "cells are" not in single


def test_the_key_of_the_generation_view_must_be_named(tiny_trace):
    """No default key: a sentence that names a key always gets the key bound now."""
    with pytest.raises(TypeError):
        narrate(tiny_trace, Stage("next_token"))  # type: ignore[call-arg]


def test_titles_and_the_key_named_come_from_the_catalog_and_the_bindings(tiny_trace):
    set_language("zh")
    assert narrate(tiny_trace, Stage("pattern", 1), head=3, generate_key="g").title == "第 1 层 · 注意力权重 · 头 3"
    assert Stage("attn_out", 0).label == "注意力输出+残差"
    assert "按 G 打开生成视图" in narrate(tiny_trace, Stage("next_token"), generate_key="G").text


async def step_screen(app, pilot) -> StepScreen:
    """Waits (by events, not time) until the step-through is on screen."""
    for _ in range(200):
        await pilot.pause()
        if isinstance(app.screen, StepScreen):
            return app.screen
    raise AssertionError(f"still on {type(app.screen).__name__}")


async def visit(pilot, screen: StepScreen, i: int, previous: int | None) -> None:
    """To stage `i`: the right arrow from the stage before it, else a jump (as the palette does)."""
    if previous is not None and i == previous + 1:
        await pilot.press("right")
    elif previous is not None:
        screen.go_to(i)
        await pilot.pause()
    assert screen.index == i


async def _walk(app, pilot, screen: StepScreen, allowed: set[str], indices: list[int]) -> list[str]:
    """Goes through the stages `indices` with the keys; at the first block's attention stages,
    through every head. Checks each stage view and the navigator for English; returns the stage
    texts."""
    texts = []
    n_head = RunFacts.of(screen.trace).n_head
    previous = None
    for i in indices:
        stage = screen.stages[i]
        await visit(pilot, screen, i, previous)
        previous = i
        shown = [screen.query_one(f"#stage-{part}") for part in STAGE_WORDS]
        words = "\n".join(w.text if isinstance(w, Prose) else str(w.content) for w in shown)
        assert english_words(words, allowed) == [], (stage.key, words)
        prose = screen.query_one("#stage-text", Prose)  # wrapped by cells, Chinese between characters
        for line in (strip.text.rstrip() for strip in prose.lines(prose.size.width)):
            assert cell_len(line) <= prose.size.width and line[:1] not in NO_LINE_START, (stage.key, line)
        text = stage_text(app)  # and the stage's picture below
        assert english_words(text, allowed) == [], (stage.key, text)
        navigator = screen.query_one(PipelineNavigator)
        rows = "\n".join(row.text for row in navigator.rows)
        assert english_words(rows, allowed) == [], (stage.key, rows)
        texts.append(text)
        if stage.layer == 0 and stage.kind in ("scores", "pattern"):
            for _ in range(n_head):
                await pilot.press("full_stop")
                assert english_words(stage_text(app), allowed) == [], (stage.key, screen.head)
    return texts


@pytest.mark.parametrize("which, size", [
    # The same words and numbers at 120 x 40 (a second walk of every stage): the slow tier.
    ("tiny_trace", (80, 24)), pytest.param("tiny_trace", (120, 40), marks=pytest.mark.slow),
    # gpt2-small's widths: the stages outside the blocks and those of blocks 0, 1 and 11 (11 s)
    pytest.param("small_trace", (120, 40), marks=pytest.mark.slow),
])
@run_async
async def test_the_step_through_in_chinese_has_no_english_and_the_same_numbers(which, size, request):
    trace = request.getfixturevalue(which)
    allowed = shown_words(trace)
    n_layer = RunFacts.of(trace).n_layer
    stages = build_stages(n_layer, trace.architecture)
    # gpt2-small: blocks 0, 1 and 11 (test_every_stage_is_said_in_chinese_with_the_english_numbers
    # reads every stage's words)
    indices = stages_in_blocks(stages, None if which == "tiny_trace" else {0, 1, n_layer - 1})
    walks = {}
    for code in ("en", "zh"):
        set_language(code)
        app = make_app(trace=trace)
        async with app.run_test(size=size) as pilot:
            screen = await step_screen(app, pilot)
            if code == "en":
                walks[code], previous = [], None
                for i in indices:
                    await visit(pilot, screen, i, previous)
                    walks[code].append(stage_text(app))
                    previous = i
            else:
                walks[code] = await _walk(app, pilot, screen, allowed, indices)
    for i, english, chinese in zip(indices, walks["en"], walks["zh"], strict=True):
        assert numbers(chinese) == numbers(english), (stages[i].key, english, chinese)


@run_async
async def test_a_live_switch_redraws_the_stage_and_keeps_it(tiny_trace):
    app = make_app(trace=tiny_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await step_screen(app, pilot)
        screen.go_to(index_of(screen.stages, "pattern", 1))
        await pilot.press("full_stop")
        english = stage_text(app)
        assert "Block 1 · Attention pattern · head 1" in english
        app.switch_language("zh")
        await pilot.pause()
        chinese = stage_text(app)
        assert "第 1 层 · 注意力权重 · 头 1" in chinese and screen.stage == Stage("pattern", 1) and screen.head == 1
        assert numbers(chinese) == numbers(english)
        rows = [row.text for row in screen.query_one(PipelineNavigator).rows]
        assert "▾ 第 1 层" in rows and "  注意力权重" in rows
        app.switch_language("en")
        await pilot.pause()
        assert stage_text(app) == english


@run_async
async def test_the_palette_goes_to_stages_by_their_chinese_names(tiny_trace):
    set_language("zh")
    app = make_app(trace=tiny_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        await step_screen(app, pilot)
        provider = StageCommands(app.screen)
        entries = provider._entries()
        assert len(entries) == len(build_stages(2)) == 3 + 2 * len(BLOCK_KINDS) + 4
        entry = entries[index_of(app.screen.stages, "mlp", 1)]
        assert entry.text == "转到：第 1 层 · MLP：c_fc → GELU → c_proj" and entry.help == "阶段 20 / 25"
        for entry in entries:
            assert english_words(f"{entry.text} {entry.help}") == [], entry.text
