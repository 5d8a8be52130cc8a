"""The app on a LLaMA-family model (a two-block GGUF model with 8 query heads sharing 2 key/value
heads, tests/test_gguf.py): its stages say and draw the family's own parts with the trace's numbers
(RMSNorm, rotary positions, grouped heads, SwiGLU), the map sets GPT-2 small beside it, the KV
numbers count the key/value heads, the attribution splits its logit exactly, and what runs only on
GPT-2 models (the number-format experiment, the lessons) says so instead of failing."""

from __future__ import annotations

import math

import pytest
import torch
from tui_helpers import run_async, screen_text, stage_text

from gpt2viz.attribution import direct_logit_attribution
from gpt2viz.model.config import GPT2Config
from gpt2viz.tui.app import make_app
from gpt2viz.tui.facts import RunFacts
from gpt2viz.tui.formatting import count, num
from gpt2viz.tui.generation_narration import kv_formula
from gpt2viz.tui.narration import narrate
from gpt2viz.tui.stages import Stage, index_of
from gpt2viz.tui.widgets.model_map import comparison_rows

SIZE = (120, 40)


def close(x: float):
    return pytest.approx(x, rel=1e-4, abs=1e-6)


async def steps(app, pilot):
    for _ in range(200):
        if hasattr(app.screen, "stages"):
            return app.screen
        await pilot.pause()
    raise AssertionError(f"no step-through, on {type(app.screen).__name__}")


@run_async
async def test_every_stage_of_a_llama_model_is_its_own_with_the_trace_s_numbers(llama_trace):
    trace, f = llama_trace, RunFacts.of(llama_trace)
    assert f.llama and (f.n_head, f.n_kv_head) == (8, 2)
    app = make_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        screen = await steps(app, pilot)
        assert [s.family for s in screen.stages] == ["llama"] * (3 + 9 * f.n_layer + 4)
        seen = {}
        for i in range(1, len(screen.stages)):
            await pilot.press("right")
            assert screen.index == i
            words = narrate(trace, screen.stage, screen.head, generate_key="g")
            text = stage_text(app)
            assert words.title in text
            seen.setdefault(screen.stage.kind, text)
    embed, norm, qkv, mlp = seen["embed"], seen["ln1"], seen["qkv"], seen["mlp"]
    assert "embed_tokens" in embed and "wpe" not in embed and "There is no position table" in embed
    assert "RMSNorm before attention (input_layernorm)" in norm and "γ" not in norm
    # The RMSNorm's numbers are the trace's: the last position's root mean square going in.
    event = trace.event("blocks.0.ln1.hook_normalized")
    assert f"root mean square {num(event['input_rms'][-1])} going in" in norm
    # Grouped heads and rotary positions, with the rotation the trace recorded.
    assert "into only 2: each key/value head serves 4 query heads" in qkv
    pairs = trace.event("blocks.0.attn.hook_rot_q")["rotation"]["pairs"]
    assert f"turns by {num(pairs[0]['angle'])} rad" in qkv and f"by only {num(pairs[-1]['angle'])} rad" in qkv
    assert "pair 0" in qkv and "key/value heads" in qkv  # the picture: query heads over their key/value heads
    assert "SwiGLU" in mlp and "SiLU, and the" in mlp and "GELU" not in mlp
    # All heads at once: each reads its group's keys and values (a learner walk read k_h, v_h).
    heads = narrate(trace, Stage("heads", 0, family="llama"), generate_key="g")
    assert "q_h k_(h ÷ 4)ᵀ" in heads.formula and "v_(h ÷ 4)" in heads.formula


def test_the_numbers_of_the_cache_count_key_value_heads_and_the_map_sets_gpt2_small_beside(llama_trace):
    f = RunFacts.of(llama_trace)
    kv = llama_trace.event("kv_cache")
    assert kv["bytes_per_position"] == f.kv_bytes_per_position == 2 * f.n_layer * f.n_kv_head * f.head_dim * 4
    assert "× 2 heads ×" in " ".join(kv_formula(f, 10))
    next_token = narrate(llama_trace, Stage("next_token", family="llama"), generate_key="g").text
    assert f"2 × {f.n_layer} layers × 2 heads × {f.head_dim}" in next_token
    rows = {what: (gpt2, ours) for what, gpt2, ours in comparison_rows(f)}
    small = GPT2Config()
    assert rows["parameters"] == (count(small.n_params), count(f.n_params)) and small.n_params == 124_439_808
    assert rows["KV cache a token"] == (f"{count(small.kv_bytes_per_position(4))} B in float32",
                                        f"{count(kv['bytes_per_position'])} B in float32")
    assert rows["attention heads"] == ("12 query, 12 key/value", "8 query, 2 key/value")
    assert rows["head size"] == ("64", count(f.head_dim))
    tied = f.config.tie_word_embeddings
    assert rows["LM head"][0] == "the token table itself (tied)"
    assert rows["LM head"][1] == ("the token table itself (tied)" if tied else
                                  f"a matrix of its own, {count(f.vocab)} × {count(f.n_embd)}")


def test_the_attribution_of_a_llama_model_splits_its_logit_exactly(llama_lm):
    """No position table, no biases, no β: the token embedding, the heads (each through its slice
    of o_proj) and the MLPs add up to the logit, and the terms are what an independent
    computation from the cached activations gives."""
    ids = llama_lm.tokenizer.encode("the cat sat on the mat")
    a = direct_logit_attribution(llama_lm, ids)
    assert a.architecture == "llama" and a.pos_embed == 0 and a.ln_bias == 0 and not any(a.attn_bias)
    assert math.isclose(a.total, a.logit, abs_tol=1e-4)
    _logits, cache = llama_lm.run_with_cache(ids)
    model = llama_lm.model
    scale = cache["ln_final.hook_scale"][0, -1].double()
    row = model.model.embed_tokens.weight[a.token_id].double() * model.model.norm.weight.double()
    mlp = [float(cache[f"blocks.{l}.hook_mlp_out"][0, -1].double() / scale @ row) for l in range(llama_lm.config.n_layer)]
    assert a.mlp == [close(x) for x in mlp]
    z = cache["blocks.1.attn.hook_z"][0, -1, 3].double()  # [batch, position, head, d_head]: head 3 at the last position
    D = llama_lm.config.head_dim
    o = model.model.layers[1].self_attn.o_proj.weight.double()[:, 3 * D : 4 * D]
    assert a.heads[1][3] == close(float((o @ z) / scale @ row))


@run_async
async def test_the_attribution_screen_shows_no_bias_column_for_a_llama_model(llama_lm):
    app = make_app(lm=llama_lm)
    async with app.run_test(size=SIZE) as pilot:
        await steps(app, pilot)
        await app.workers.wait_for_complete()
        await pilot.press("w")
        for _ in range(400):
            await pilot.pause()
            text = screen_text(app)
            if "The terms add up to" in text:
                break
        assert "The terms add up to" in text and "position embedding (wpe)" not in text
        assert "no biases, no position table and no β" in text and "token embedding (embed_tokens)" in text


@run_async
async def test_what_runs_only_on_gpt2_models_says_so(llama_lm, tmp_path, monkeypatch):
    """On a first start (an empty state directory) the lesson menu, which offers only GPT-2's
    lessons, stays shut; opened with i it says why its lessons cannot open here and they cannot be
    chosen (an engineer's walk: listed, then refused), nor started over; the menu still does not
    count as the choice that stops it opening at start (a learner walk saw both)."""
    from gpt2viz.tui.lesson_run import menu_at_start
    from gpt2viz.tui.screens.lesson_menu import LessonMenu

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "fresh"))
    app = make_app(lm=llama_lm)
    async with app.run_test(size=SIZE) as pilot:
        screen = await steps(app, pilot)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.screen is screen  # no lesson menu over the step-through
        await pilot.press("i")
        await pilot.pause()
        assert isinstance(app.screen, LessonMenu)
        assert "The lessons tell GPT-2's story" in screen_text(app)
        options = app.screen.query_one("#lesson-menu-list")
        assert all(options.get_option_at_index(i).disabled for i in range(4))
        menu = app.screen
        menu._highlighted_lesson = lambda: "000"  # as if one could be highlighted: r still starts none
        assert not menu.check_action("start_over", ())
        menu.action_start_over()
        await pilot.press("up", "up", "r", "enter")  # "Not now"
        await pilot.pause()
        assert app.screen is screen and app.session.lesson is None and menu_at_start()
        screen.go_to(index_of(screen.stages, "next_token"))
        await pilot.press("m")
        await pilot.pause()
        await pilot.press("3")
        await pilot.pause()
        assert "LLaMA-family models load in float32 only so far" in screen_text(app)
        await pilot.press("r")
        await pilot.pause()
        assert app.screen.running is None  # nothing started


def test_a_llama_model_s_picture_of_its_queries_names_torch_s_numbers(llama_lm, llama_trace):
    """The rotated pair the trace keeps is the rotated query the model computed."""
    ids = llama_trace.token_ids
    _logits, cache = llama_lm.run_with_cache(ids, names_filter="blocks.0.attn.hook_rot_q")
    rotated = cache["blocks.0.attn.hook_rot_q"][0, -1, 0]  # TL's layout [batch, position, head, d_head]
    half = llama_lm.config.head_dim // 2
    for pair in llama_trace.event("blocks.0.attn.hook_rot_q")["rotation"]["pairs"]:
        j = pair["pair"]
        assert pair["after"] == [close(float(rotated[j])), close(float(rotated[j + half]))]
    assert torch.isfinite(rotated).all()


@run_async
async def test_the_logit_lens_keeps_one_line_a_block_at_80_columns_when_the_answer_is_unlikely(llama_trace):
    """On a 49,152-token vocabulary the final answer's probability after block 0 reads '8.0e-09%':
    its column widens and the bar gives up the cells, so no block's row wraps."""
    import copy

    from rich.cells import cell_len

    from gpt2viz.tui.widgets.pictures import LogitLensTable

    trace = copy.deepcopy(llama_trace)
    for layer in trace.event("logit_lens")["layers"]:
        layer["final_prob"] = 8.0e-11
        layer["final_rank"] = 12345
    app = make_app(trace=trace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await steps(app, pilot)
        screen.go_to(index_of(screen.stages, "logit_lens"))
        await pilot.pause()
        table = screen.query_one(LogitLensTable)
        rows = [line for line in table.content.plain.splitlines() if line.startswith("block")]
        assert len(rows) == RunFacts.of(trace).n_layer
        assert all("8.0e-09%" in row and "#12,345" in row and cell_len(row) <= table.size.width for row in rows)


def test_a_map_row_too_long_for_its_line_keeps_its_shape_after_its_last_words(llama_trace):
    """'q and k rotated by pattern [1, 9, 5, 5]' / 'position' (a learner walk on SmolLM2's Model
    files stage): the shape goes after the words' last line, never inside the sentence."""
    from gpt2viz.tui.widgets.model_map import map_lines

    plain = [line.plain for line in map_lines(llama_trace, None, 80)]
    first = next(i for i, line in enumerate(plain) if "attention: 8 heads" in line)
    assert "pattern" not in plain[first]
    T = len(llama_trace.tokens)
    assert plain[first + 1].rstrip().endswith(f"pattern [1, 8, {T}, {T}]") and "rotated by position" in plain[first + 1]
