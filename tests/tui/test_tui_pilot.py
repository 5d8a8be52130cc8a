"""Driving the app with keys (App.run_test) and reading what it shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tui_helpers import run_async, screen_text, stage_text, stages_in_blocks
from gpt2viz.cli import parse_args
from gpt2viz.trace import dump, load, trace_prompt
from gpt2viz.tui.app import make_app
from gpt2viz.tui.narration import narrate
from gpt2viz.tui.screens.loading import LoadingScreen
from gpt2viz.tui.screens.prompt import PromptScreen
from gpt2viz.tui.screens.step import StepScreen
from gpt2viz.tui.stages import Stage, index_of
from gpt2viz.tui.widgets.heatmap import Heatmap
from gpt2viz.tui.widgets.stage_view import PICTURE_FOR_KIND, StageView
from gpt2viz.tui.widgets.strip_widget import StripWidget

SIZE = (120, 40)


async def step_screen(app, pilot) -> StepScreen:
    """Waits (by events, not time) until the step-through is on screen."""
    for _ in range(200):
        await app.workers.wait_for_complete()
        await pilot.pause()
        if isinstance(app.screen, StepScreen):
            return app.screen
    raise AssertionError(f"still on {type(app.screen).__name__}: {getattr(app, 'error', None)}")


def current_picture(screen: StepScreen) -> str:
    from textual.widgets import ContentSwitcher

    return screen.query_one("#pictures", ContentSwitcher).current


def assert_fits(screen: StepScreen) -> None:
    """Nothing in the stage view is wider than the view: no horizontal scrolling."""
    view = screen.query_one(StageView)
    assert view.max_scroll_x == 0, screen.stage.key
    for widget in view.query(StripWidget):
        if widget.display and widget.parent.display:
            for strip in widget.lines(widget.size.width):
                assert strip.cell_length <= widget.size.width, (screen.stage.key, strip.text)


@run_async
async def test_steps_through_every_stage_of_a_random_checkpoint(ckpts):
    lm = ckpts.lm("tiny")
    app = make_app(lm=lm)
    async with app.run_test(size=SIZE) as pilot:
        screen = await step_screen(app, pilot)
        trace = screen.trace
        assert [t["text"] for t in trace.tokens] == ["The", "␣meaning", "␣of", "␣life", "␣is"]
        screen.go_to(index_of(screen.stages, "tokenize"))
        await pilot.pause()
        text = stage_text(app)
        for token in trace.tokens:
            assert token["text"] in text and str(token["id"]) in text
        screen.go_to(0)  # the model's files, where the walk starts
        await pilot.pause()
        for i, stage in enumerate(screen.stages):
            if i:
                await pilot.press("right")
            assert screen.index == i
            assert current_picture(screen) == PICTURE_FOR_KIND[stage.kind]
            text = stage_text(app)
            words = narrate(trace, stage, screen.head, generate_key="g")
            assert words.title in text and f"stage {i + 1} of {len(screen.stages)}" in text
            assert words.flow[0] in text.replace("\n   → ", " → ")
        assert "[1, 5, 50257]" in "\n".join(narrate(trace, Stage("lm_head"), generate_key="g").flow)
        await pilot.press("right")  # at the end: stays
        assert screen.index == len(screen.stages) - 1
        assert "Next token" in screen_text(app)


@pytest.mark.slow  # gpt2-small's heads and blocks (8 s)
@run_async
async def test_gpt2_small_shapes_heads_and_blocks(small_trace):
    app = make_app(trace=small_trace)
    async with app.run_test(size=SIZE) as pilot:
        screen = await step_screen(app, pilot)
        await pilot.press("right", "right")
        assert "[1, 12, 768]" in stage_text(app)
        # ] from outside the blocks goes to block 0; then the same sub-stage a block later
        await pilot.press("right_square_bracket")
        assert screen.stage == Stage("ln1", 0)
        await pilot.press("right", "right", "right")
        assert screen.stage == Stage("pattern", 0)
        before = [s.text for s in screen.query_one("#attention-map", Heatmap).lines(100)]
        await pilot.press("full_stop", "full_stop")
        assert screen.head == 2
        assert "Block 0 · Attention pattern · head 2" in stage_text(app)
        after = [s.text for s in screen.query_one("#attention-map", Heatmap).lines(100)]
        assert after != before
        await pilot.press("comma", "comma", "comma")
        assert screen.head == 11  # wraps around
        for _ in range(3):
            await pilot.press("right_square_bracket")
        assert screen.stage == Stage("pattern", 3)
        assert "Block 3 · Attention pattern · head 11" in stage_text(app)
        await pilot.press("left_square_bracket")
        assert screen.stage == Stage("pattern", 2)
        await pilot.press("a")
        assert screen.stage == Stage("heads", 2)
        text = stage_text(app)
        assert "▶head 11" in text and "head 0" in text
        await pilot.press("a")
        assert screen.stage == Stage("pattern", 2)
        await pilot.press("end")
        assert screen.stage == Stage("next_token")
        await pilot.press("home")
        assert screen.stage == Stage("model_files")
        # every stage outside the blocks and in blocks 0, 1 and 11 fits 120 x 40 without horizontal
        # scrolling (the middle blocks draw the same pictures and sentences with other numbers, as
        # test_tui_layout_fits.py, which checks blocks 0 and 11 of the same trace at 80 x 24, says)
        for i in stages_in_blocks(screen.stages, {0, 1, 11}):
            screen.go_to(i)
            await pilot.pause()
            assert_fits(screen)


@run_async
async def test_attention_map_labels_and_values(tiny_trace):
    app = make_app(trace=tiny_trace)
    async with app.run_test(size=SIZE) as pilot:
        screen = await step_screen(app, pilot)
        screen.go_to(index_of(screen.stages, "scores", 1))
        await pilot.pause()
        heatmap = screen.query_one("#attention-map", Heatmap)
        lines = [s.text for s in heatmap.lines(90)]
        text = "\n".join(lines)
        assert "-∞" in text and "masked" in text
        assert "␣meaning" in text  # token labels on the rows
        scores = tiny_trace.event("blocks.1.attn.hook_attn_scores")["heads"][0]
        from gpt2viz.tui.formatting import cell_value

        width = heatmap.layout_for(90).cell_width - 1
        assert cell_value(scores[4][0], width) in lines[2 + 4]  # two header lines, then row 4
        screen.go_to(index_of(screen.stages, "pattern", 1))
        await pilot.pause()
        text = "\n".join(s.text for s in screen.query_one("#attention-map", Heatmap).lines(90))
        assert "1.00" in text  # row 0 attends only to itself


@run_async
async def test_replay_of_a_dumped_trace(tmp_path, ckpts):
    trace = trace_prompt(ckpts.lm("tiny"), "Hello [b]world[/b] ↵\n", topk=3)
    path = tmp_path / "trace.json"
    dump(trace, path)
    options = parse_args(["--replay", str(path)])
    app = make_app(trace=load(path), options=options)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = await step_screen(app, pilot)
        text = screen_text(app)
        assert "replay of trace.json" in text
        assert "[b]" in stage_text(app)  # token text shown as it is, never as markup
        await pilot.press("e")
        await pilot.pause()
        assert not isinstance(app.screen, PromptScreen)
        messages = [n.message for n in app._notifications]
        assert any("replay of trace.json" in m and "no model" in m for m in messages)
        for _ in range(len(screen.stages)):
            await pilot.press("right")
        assert screen.stage == Stage("next_token")
        assert json.loads(path.read_text())["prompt"] == screen.trace.prompt


@run_async
async def test_loads_a_model_then_edits_the_prompt(ckpts):
    options = parse_args(["--model", str(ckpts.path("tiny")), "--topk-logits", "4"])
    app = make_app(options=options)
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, LoadingScreen)
        screen = await step_screen(app, pilot)
        assert len(screen.trace.event("unembed.hook_out")["positions"][0]["ids"]) == 4
        screen.go_to(index_of(screen.stages, "mlp", 1))
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, PromptScreen)
        # The hint names the keys of the field and the screen as bound: the Input submits on ⏎.
        assert "⏎: run the model on this prompt    esc: cancel" in screen_text(app)
        await pilot.press("ctrl+u", *"Hello q world", "enter")  # q types, it does not quit
        screen = await step_screen(app, pilot)
        assert [t["text"] for t in screen.trace.tokens] == ["Hello", "␣q", "␣world"]
        assert screen.stage == Stage("mlp", 1)  # the same stage, new numbers
        assert '"Hello q world"' in screen_text(app)


@pytest.mark.parametrize("key", ["q", "ctrl+c"])
@run_async
async def test_q_or_ctrl_c_during_loading_exits_cleanly(ckpts, key):
    """q leaves (exit status 0); ctrl+c on the loading screen is an interruption, as Ctrl-C before
    the app took the terminal is (README): one line, exit status 130. A crash walk read status 0
    and nothing said for ctrl+c while SmolLM2 loaded."""
    app = make_app(options=parse_args(["--model", str(ckpts.path("tiny"))]))
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, LoadingScreen)
        await pilot.press(key)
    if key == "q":
        assert app.return_code == 0 and app.farewell is None
    else:
        assert app.return_code == 130 and app.farewell == "interrupted; nothing was written"


@run_async
async def test_ctrl_c_on_a_later_loading_screen_is_the_quit_key(tiny_trace):
    """Past the first loading screen, one of a new prompt or number format included, ctrl+c quits
    as q does (README), exit status 0."""
    app = make_app(trace=tiny_trace)
    async with app.run_test(size=SIZE) as pilot:
        await step_screen(app, pilot)
        await app.push_screen(LoadingScreen(app.session, "tiny", "Hello", can_cancel=True))
        await pilot.pause()
        await pilot.press("ctrl+c")
    assert app.return_code == 0 and app.farewell is None


@run_async
async def test_a_load_error_is_shown_and_sets_the_exit_code(tmp_path):
    app = make_app(options=parse_args(["--model", str(tmp_path / "missing")]))
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "Loading failed" in screen_text(app)
        await pilot.press("q")
    assert app.return_code == 1 and "missing" in app.error


@run_async
async def test_too_small_a_terminal_says_how_much_room_it_needs(tiny_trace):
    app = make_app(trace=tiny_trace)
    async with app.run_test(size=(70, 20)) as pilot:
        await step_screen(app, pilot)
        text = screen_text(app)
        assert "at least 80 × 24" in text and "70 × 20" in text
        assert "Tokenize" not in text
        # Keys do nothing behind the notice (a crash walk held left there and came back 30 stages
        # earlier), but q leaves, as it says.
        screen, start = app.screen, app.screen.index
        await pilot.press(*["right"] * 5, "o", "question_mark", "g")
        assert app.screen is screen and screen.index == start
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert "Tokenize" in screen_text(app)
        # A screen over it (the help) says so too, and takes no key unseen (it went blank).
        await pilot.press("question_mark")
        await pilot.pause()
        help_screen = app.screen
        await pilot.resize_terminal(70, 20)
        await pilot.pause()
        assert "at least 80 × 24" in screen_text(app)
        await pilot.press("escape", "right")
        assert app.screen is help_screen and screen.index == start
        await pilot.press("q")
    assert app.return_code == 0


@run_async
async def test_palette_jumps_to_a_stage(tiny_trace):
    app = make_app(trace=tiny_trace)
    async with app.run_test(size=SIZE) as pilot:
        screen = await step_screen(app, pilot)
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Block 1 Attention pattern")
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert screen.stage == Stage("pattern", 1)


async def run_from_palette(app, pilot, query: str) -> None:
    """ctrl+p, `query` typed, its search finished, enter: the first hit runs."""
    await pilot.press("ctrl+p")
    await pilot.pause()
    await pilot.press(*(" " if ch == " " else ch for ch in query))
    await app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.press("enter")
    await pilot.pause()


# Each query typed into the palette of one running app per language, one after another (an app
# start for each cost 13 of them); the stage reached is checked after each, and each query moves
# to another stage than the one before it.
STAGE_QUERIES = {
    "en": [
        ("mlp 1", Stage("mlp", 1)),
        ("attn 0", Stage("scores", 0)),
        ("block 1 mlp", Stage("mlp", 1)),
        ("ln_2 1", Stage("ln2", 1)),
        ("1 MLP", Stage("mlp", 1)),
        ("pattern 1", Stage("pattern", 1)),
        ("１ mlp", Stage("mlp", 1)),  # a full-width digit
        ("ln_1 1", Stage("ln1", 1)),  # ln_1 is a name, not block 1
        ("attn out 1", Stage("attn_out", 1)),
    ],
    "zh": [
        ("第 1 层 注意力", Stage("scores", 1)),
        ("mlp 1", Stage("mlp", 1)),
        ("第1层注意力", Stage("scores", 1)),  # typed without spaces
        ("1 层 权重", Stage("pattern", 1)),
    ],
}


@pytest.mark.parametrize("lang", list(STAGE_QUERIES))
@run_async
async def test_the_palette_finds_a_stage_by_its_block_and_part_in_any_order(tiny_trace, lang):
    from gpt2viz.i18n import set_language

    set_language(lang)
    try:
        app = make_app(trace=tiny_trace)
        async with app.run_test(size=SIZE) as pilot:
            screen = await step_screen(app, pilot)
            reached = []
            for query, stage in STAGE_QUERIES[lang]:
                await run_from_palette(app, pilot, query)
                reached.append((query, screen.stage))
            assert reached == [(query, stage) for query, stage in STAGE_QUERIES[lang]]
    finally:
        set_language("en")


def test_a_number_in_the_query_is_a_whole_block_number():
    from gpt2viz.tui.commands import query_terms, term_spans

    assert query_terms("mlp3") == query_terms("3 MLP")[::-1] == ["mlp", "3"]
    assert term_spans(["1"], "Block 11 · MLP") is None
    assert term_spans(["attn"], "Attention pattern") is None  # a word's start, not its middle
    assert term_spans(["pat"], "Attention pattern") == [(10, 13)]
    assert term_spans(["1"], "Block 2 · LayerNorm before attention (ln_1)") is None  # ln_1 is no block 1
    assert query_terms("第1层注意力") == ["第", "1", "层", "注", "意", "力"] and query_terms("３") == ["3"]


@pytest.mark.parametrize(
    "query, screen_name",
    [("cost", "CostLabScreen"), ("lab", "CostLabScreen"), ("generation", "GenerationScreen"), ("which parts", "AttributionScreen"),
     ("show all keys", "HelpScreen")],  # the app's own key (?): run on the app, not the screen
)
@run_async
async def test_the_palette_opens_every_screen_a_key_opens(tiny_lm, query, screen_name):
    app = make_app(lm=tiny_lm)
    async with app.run_test(size=SIZE) as pilot:
        screen = await step_screen(app, pilot)
        await run_from_palette(app, pilot, query)
        assert type(app.screen).__name__ == screen_name
        from gpt2viz.tui.commands import KeyCommands

        offered = {entry.text for entry in KeyCommands(screen)._entries()}
        assert {"Open the generation view", "Go to the next stage"} <= offered
        assert "Search for commands…" not in offered  # not the palette itself


@run_async
async def test_keys_can_be_remapped_and_help_shows_them(tiny_trace):
    app = make_app(trace=tiny_trace)
    async with app.run_test(size=SIZE) as pilot:
        screen = await step_screen(app, pilot)
        app.set_keymap({"next-stage": "n"})
        await pilot.press("n")
        assert screen.index == 1
        await pilot.press("question_mark")
        await pilot.pause()
        text = screen_text(app)
        assert "Go to the next stage" in text and "Open the generation view" in text
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen


@pytest.fixture(scope="module")
def long_trace(tmp_path_factory, ckpts):
    """300 positions through a one-layer random model with room for 512: reduced attention maps."""
    from transformers import GPT2Config, GPT2LMHeadModel

    import gpt2viz

    directory = tmp_path_factory.mktemp("long-model")
    torch.manual_seed(1)
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=32, n_positions=512)).save_pretrained(directory)
    (directory / "tokenizer.json").write_bytes((Path(ckpts.path("tiny")) / "tokenizer.json").read_bytes())
    lm = gpt2viz.load_model(str(directory))
    ids = list(range(1000, 1300))
    return trace_prompt(lm, lm.tokenizer.decode(ids))


@run_async
async def test_long_prompts_stay_usable(long_trace):
    T = len(long_trace.tokens)
    assert T > 256 and long_trace.event("blocks.0.attn.hook_pattern")["reduced"]
    app = make_app(trace=long_trace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await step_screen(app, pilot)
        for kind in ("scores", "pattern", "heads", "embed", "tokenize", "lm_head"):
            screen.go_to(index_of(screen.stages, kind, 0 if kind in ("scores", "pattern", "heads") else None))
            await pilot.pause()
            assert_fits(screen)
        screen.go_to(index_of(screen.stages, "scores", 0))
        await pilot.pause()
        text = stage_text(app)
        assert "64 × 64 grid" in text and f"over all {T} keys" in text
        assert screen.query_one("#last-row", Heatmap).display
        screen.go_to(index_of(screen.stages, "ln1", 0))
        await pilot.pause()
        text = stage_text(app)
        assert f"positions 24–{T - 25} ({T - 48}) not listed" in text
        assert f"{T - 1} " in text  # the last position, the one that predicts, is always listed


@run_async
async def test_the_bundled_model_steps_through_every_stage():
    import gpt2viz

    lm = gpt2viz.load_model("tiny")
    app = make_app(lm=lm)
    async with app.run_test(size=SIZE) as pilot:
        screen = await step_screen(app, pilot)
        assert screen.trace.token_ids == [464, 3616, 286, 1204, 318]  # GPT-2's own ids
        assert screen.stage == Stage("model_files") and "tokenizer.json" in stage_text(app)
        for i in range(1, len(screen.stages)):
            await pilot.press("right")
            assert screen.index == i
            assert narrate(screen.trace, screen.stage, screen.head, generate_key="g").title in stage_text(app)
            if screen.stage == Stage("tokenize"):
                assert "␣meaning" in stage_text(app)
        # The trained model continues "The meaning of life is" with " not", as GPT-2 does.
        assert screen.stage.kind == "next_token"
        assert "'␣not' (id 407" in stage_text(app)


@run_async
async def test_light_theme_draws_every_kind_of_picture(tiny_trace):
    app = make_app(trace=tiny_trace)
    async with app.run_test(size=SIZE) as pilot:
        screen = await step_screen(app, pilot)
        app.theme = "textual-light"
        await pilot.pause()
        for kind in PICTURE_FOR_KIND:
            screen.go_to(index_of(screen.stages, kind, 0 if kind in ("ln1", "ln2", "qkv", "scores", "pattern", "heads",
                                                                        "attn_out", "mlp", "mlp_out") else None))
            await pilot.pause()
            assert narrate(tiny_trace, screen.stage, screen.head, generate_key="g").title in stage_text(app)


@run_async
async def test_navigator_clicks_unfold_blocks_and_choose_stages(tiny_trace):
    from gpt2viz.tui.widgets.pipeline_nav import PipelineNavigator

    app = make_app(trace=tiny_trace)
    async with app.run_test(size=SIZE) as pilot:
        screen = await step_screen(app, pilot)
        nav = screen.query_one(PipelineNavigator)
        rows = [row.text for row in nav.rows]
        assert rows[:5] == ["Model files", "Tokenize", "Embed", "▸ Block 0", "▸ Block 1"]
        await pilot.click(PipelineNavigator, offset=(2, 3))  # unfold block 0
        await pilot.pause()
        assert "  Scores" in [row.text for row in nav.rows]
        scores_row = [row.text for row in nav.rows].index("  Scores")
        await pilot.click(PipelineNavigator, offset=(4, scores_row))
        await pilot.pause()
        assert screen.stage == Stage("scores", 0)
        assert "Block 0 · Attention scores · head 0" in stage_text(app)


@run_async
async def test_a_decode_steps_heads_say_how_their_one_row_is_averaged(ckpts):
    """A decode step's maps are one query row against the cache: past MAX_CELLS positions the grid
    averages columns only, and says so (issue 36: 'each cell averages a block of 2 × 2 positions'
    under maps of 1 × 43)."""
    from gpt2viz.trace import trace_decode_step

    lm = ckpts.lm("tiny")
    ids = lm.tokenizer.encode((Path(__file__).parents[2] / "assets" / "tiny" / "heldout.txt").read_text(encoding="utf-8"))[:60]
    app = make_app(trace=trace_decode_step(lm, ids).resolve_all())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        step = app.screen
        step.go_to(index_of(step.stages, "heads", 0))
        await pilot.pause()
        shown = screen_text(app)
        assert "each cell averages 3 positions" in shown and "block of" not in shown


@pytest.mark.parametrize("lang, key, shown", [("en", "w", "1 2 3 tab"), ("en", "m", "1 2 3 tab"), ("zh", "m", "1 2 3 标签页")])
@run_async
async def test_the_tab_keys_are_in_the_footer_at_80_columns(tiny_lm, lang, key, shown):
    from gpt2viz.i18n import set_language

    set_language(lang)
    try:
        app = make_app(lm=tiny_lm)
        async with app.run_test(size=(80, 24)) as pilot:
            await step_screen(app, pilot)
            await pilot.press(key)
            await pilot.pause()
            assert shown in screen_text(app).splitlines()[-1]
    finally:
        set_language("en")
