"""The generation view's numbers and words, without a terminal: this run's shapes, bytes and times."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import gpt2viz
from gpt2viz.cli import parse_args
from gpt2viz.model.tokenizer import visible_text
from gpt2viz.generate import SamplingSettings
from gpt2viz.trace import record_generation
from gpt2viz.tui.generation import Comparison, Generation, GenerationSettings, settings_label
from gpt2viz.tui.generation_narration import (
    bandwidth_text,
    choice_text,
    compare_text,
    kv_formula,
    kv_text,
    step_flow,
    step_heading,
    step_text,
    stop_text,
)
from gpt2viz.tui.facts import RunFacts
from gpt2viz.tui.screens.generation_settings import parse_settings
from gpt2viz.tui.widgets.latency_chart import Series, chart_scale, fill, groups, pooled


def generation_of(trace, record, n_ctx=1024) -> Generation:
    return Generation.from_record(record, trace.token_ids, [t["text"] for t in trace.tokens], n_ctx)


@pytest.fixture(scope="module")
def small(ckpts, small_trace):
    """Three greedy tokens after the 12-token prompt of a GPT-2-small-shaped random model, cached and not."""
    lm = ckpts.lm("gpt2-small")
    cached = record_generation(lm, small_trace.token_ids, 3, SamplingSettings(), use_cache=True)
    naive = record_generation(lm, small_trace.token_ids, 3, SamplingSettings(), use_cache=False)
    return RunFacts.of(small_trace), generation_of(small_trace, cached), generation_of(small_trace, naive)


def test_a_decode_step_quotes_this_runs_shapes(small):
    f, gen, _ = small
    assert f.T == 12 and f.n_head == 12 and f.head_dim == 64
    flow = "\n".join(step_flow(f, gen, 2))
    assert "ids, shape [1, 1] → x [1, 1, 768]" in flow
    assert "mask tril(diagonal=13): all 14 keys" in flow
    assert "q [1, 12, 1, 64]" in flow
    assert "K, V [1, 12, 14, 64] (13 + 1 new)" in flow
    assert "scores [1, 12, 1, 14]" in flow
    assert "logits [1, 1, 50257]" in flow
    text = step_text(f, gen, 2)
    assert "Its position id is 13, the past length" in text and "wpe[13]" in text
    assert "tril(diagonal=13)" in text and "masks nothing" in text
    assert step_heading(gen, 2) == "Step 2 · decode"


def test_the_prefill_and_a_full_pass(small):
    f, gen, naive = small
    flow = "\n".join(step_flow(f, gen, 0))
    assert "ids, shape [1, 12]" in flow and "scores [1, 12, 12, 12]" in flow and "logits [1, 1, 50257] (last position)" in flow
    assert step_heading(gen, 0) == "Step 0 · prefill"
    assert "positions 0–11" in step_text(f, gen, 0)
    flow = "\n".join(step_flow(f, naive, 2))
    assert "ids, shape [1, 14]" in flow and "scores [1, 12, 14, 14]" in flow
    assert step_heading(naive, 2) == "Step 2 · full pass, no cache"
    assert "all 14 ids" in step_text(f, naive, 2)


def test_kv_bytes_follow_the_formula(small):
    f, gen, naive = small
    for i, step in enumerate(gen.steps):
        kv = step["kv_cache"]
        T = 12 + i
        assert kv["length"] == T and kv["layers"][0]["k_shape"] == [1, 12, T, 64]
        assert kv["total_bytes"] == 2 * 12 * 12 * T * 64 * 4
        assert kv_formula(f, T)[-1].endswith(f"= {kv['total_bytes']:,} B")
    lines = kv_formula(f, 14, width=36)
    assert all(len(line) <= 36 for line in lines) and lines[-1].endswith("= 1,032,192 B")
    text = kv_text(f, gen, 2, "c")
    assert "One more token adds 73,728 bytes" in text and "75,497,472 B (72 MiB)" in text
    assert "changes the path, not the result" in text
    assert "The cache is off" in kv_text(f, naive, 2, "c")


def test_decode_is_measured_against_the_weights_it_reads(small):
    f, gen, naive = small
    text = bandwidth_text(f, gen, 2, "c")
    # All weights once, but of the position table (1,024 rows of 768) only the row in use.
    assert "the 124,439,808 parameters once, stored in float32: 494,616,576 B" in text
    assert f.weight_bytes == 497_759_232 and f.step_weight_bytes == 497_759_232 - 1023 * 768 * 4  # as recorded
    step = gen.steps[2]
    rate = (494_616_576 + step["kv_cache"]["total_bytes"]) / (step["ms"] / 1000) / 1e9
    from gpt2viz.tui.formatting import num

    assert f"= {num(rate)} GB/s effective" in text
    assert gen.decode_gb_per_s(f) is not None and naive.decode_gb_per_s(f) is None
    assert "grows with every token" in bandwidth_text(f, naive, 2, "c")


def test_a_head_read_through_its_float16_copy_is_not_called_float32(small):
    """Where the LM head multiplies by a float16 copy of the token table (kernels/choice.py), a step
    reads fewer bytes than the parameters take in float32: the sentence says which are read in
    float16 rather than calling all of them float32."""
    from dataclasses import replace

    f, gen, _ = small
    held = replace(f, float16_head=True, step_weight_bytes=f.step_weight_bytes - f.params.wte * 2)
    text = bandwidth_text(held, gen, 2, "c")
    assert ("the 124,439,808 parameters once: 417,421,824 B (398.1 MiB), the token table through the LM head's "
            "float16 copy (two bytes a number) and the rest stored in float32") in text
    assert "stored in float32: " not in text
    assert not f.float16_head  # this trace's head multiplied by the float32 table


def test_the_comparison_verdict(small):
    f, gen, naive = small
    c = Comparison(naive, gen)
    assert c.identical and c.first_divergence is None
    assert c.speedup_total == pytest.approx(naive.total_ms / gen.total_ms)
    text = compare_text(f, c)
    assert "Both runs chose the same 3 ids" in text and "pushed 14 positions" in text
    assert "so the argmax does too" in text
    # Sampled: no argmax was taken (a learner's walk read "so the argmax does too" under a sampled run).
    sampled = dataclasses.replace(gen.settings, sampling=SamplingSettings(temperature=0.8, top_k=50, seed=1))
    text = compare_text(f, Comparison(naive, dataclasses.replace(gen, settings=sampled)))
    assert "(sampling with the same seed, 1)" in text and "argmax" not in text
    assert "the same seed draws from them the same way, so the same token comes out" in text
    other = generation_of_ids(gen, [gen.ids[0], 99, 100])
    bad = Comparison(naive, other)
    assert bad.first_divergence == 1 and not bad.identical
    assert "differ from step 1" in compare_text(f, bad) and "bug" in compare_text(f, bad)
    short = generation_of_ids(gen, gen.ids[:2])
    assert Comparison(naive, short).first_divergence == 2


@pytest.mark.parametrize("cached_ms, pays", [(2.0, True), (3.3, False)])
def test_the_cost_split_says_when_the_cache_did_not_pay(small, monkeypatch, cached_ms, pays):
    """The fitted split of a full pass (2.5 ms fixed + 0.01 ms a position: 2.64 ms at the last step's
    14 positions) against a cached decode step: a faster one is explained as the cache's gain, a
    slower one (a model so small that a step is nearly all fixed work) is said not to have paid."""

    from gpt2viz.tui.generation_narration import cost_split_text

    f, gen, naive = small
    cached = dataclasses.replace(gen, steps=[{**step, "ms": cached_ms} for step in gen.steps])
    comparison = Comparison(naive, cached)
    monkeypatch.setattr(Comparison, "naive_cost_fit", lambda self: (2.5, 0.01))
    text = cost_split_text(comparison)
    assert "At the last step (14 positions) that is 2.64 ms" in text
    assert ("The cache removes the per-position part" in text) is pays
    assert ("a cached decode step took 3.30 ms: here the cache did not pay" in text) is not pays


def test_times_taken_while_other_processes_were_busy_claim_no_bound(small):
    """A run records the share of the CPUs other processes used meanwhile; above
    cpu_share.BUSY_SHARE its view says so, names no bound and fits no cost split from its times."""

    from gpt2viz.i18n import say
    from gpt2viz.tui.formatting import percent

    f, gen, naive = small
    assert gen.others_cpu is None or 0 <= gen.others_cpu <= 1  # measured by record_generation
    quiet, busy = dataclasses.replace(gen, others_cpu=0.05), dataclasses.replace(gen, others_cpu=0.6)
    warning = say("generation.busy", share=percent(0.6))
    assert warning not in bandwidth_text(f, quiet, 2, "c") and "GB/s this machine streams" in bandwidth_text(f, quiet, 2, "c")
    text = bandwidth_text(f, busy, 2, "c")
    assert warning in text and "GB/s this machine streams" not in text
    assert text.startswith(warning)  # first: a short panel shows it above the rates it is about
    # Every sentence that names a rate from those times carries the caveat itself (issue 36's walk
    # found "= 6.56 GB/s effective" two paragraphs below the warning, on its own).
    caveat = f"used {percent(0.6)} of the CPUs"
    rates = [s for s in text.replace("\n", " ").split(". ") if "GB/s" in s]
    assert len(rates) == 2 and all(caveat in s for s in rates), rates
    assert "of the CPUs" not in bandwidth_text(f, quiet, 2, "c")
    # A comparison with a busy run: the warning in place of the fitted cost split.
    slow_naive = dataclasses.replace(naive, others_cpu=0.6)
    assert warning in compare_text(f, Comparison(slow_naive, quiet))
    assert warning not in compare_text(f, Comparison(dataclasses.replace(naive, others_cpu=0.0), quiet))
    # A resumed generation keeps its busiest run's share.
    resumed = dataclasses.replace(gen, others_cpu=None)
    resumed.end_run("max_new_tokens", 0.3)
    resumed.end_run("max_new_tokens", 0.1)
    resumed.end_run("max_new_tokens", None)
    assert resumed.others_cpu == 0.3


def generation_of_ids(like: Generation, ids: list[int]) -> Generation:
    steps = [dict(like.steps[min(i, len(like.steps) - 1)], id=t, text=f"t{t}") for i, t in enumerate(ids)]
    return Generation(like.prompt_ids, like.prompt_tokens, like.settings, like.n_ctx, steps, [0], "max_new_tokens")


def test_stop_reasons_are_said():
    settings = GenerationSettings(5)
    steps = [{"id": 1, "text": "a", "ms": 1.0, "used_cache": True}, {"id": 50256, "text": "<|endoftext|>", "ms": 1.0}]
    gen = Generation([0], ["x"], settings, 8, steps, [0], "eos")
    assert "<|endoftext|> (id 50256) after 2 tokens" in stop_text(gen) and gen.finished and not gen.can_resume
    # The token the model wrote, whatever its model calls the end (SmolLM2's <|im_end|> read <|endoftext|>).
    im_end = Generation([0], ["x"], settings, 8, [steps[0], {"id": 2, "text": "<|im_end|>", "ms": 1.0}], [0], "eos")
    assert stop_text(im_end) == "The model wrote <|im_end|> (id 2) after 2 tokens: it ended the text itself."
    gen.stop_reason = "context"
    assert stop_text(gen) == "The context is full: 8 tokens, 2 of them new; the last was never fed in (cache 7)."
    gen.stop_reason = "max_new_tokens"
    assert stop_text(gen) == "2 new tokens, as many as asked."
    gen.stop_reason = "cancelled"
    assert gen.can_resume and gen.remaining == 3 and "Stopped after 2 of 5" in stop_text(gen)
    gen.begin_run()
    assert gen.starts == [0, 2] and gen.stop_reason is None
    gen.add_step({"id": 2, "text": "b", "ms": 4.0, "used_cache": True, "context_length": 3})
    assert gen.is_prefill(2) and gen.input_length(2) == 3 and gen.decode_ms == [1.0]
    assert gen.context_ids == [0, 1, 50256, 2]


def test_choice_words_for_sampling():
    settings = GenerationSettings(4, SamplingSettings(0.7, 5, 0.9, 3))
    step = {
        "id": 7, "text": "␣cat", "chosen_prob": 0.4, "used_cache": True, "ms": 1.0,
        "raw": {"ids": [7, 8], "tokens": ["␣cat", "␣dog"], "probs": [0.3, 0.2]},
        "candidates": {"ids": [7, 8], "tokens": ["␣cat", "␣dog"], "probs": [0.4, 0.3]},
    }
    gen = Generation([0], ["x"], settings, 8, [step], [0])
    text = choice_text(gen, 0)
    assert "temperature 0.7 (sharper" in text and "top-k keeps the 5 most likely" in text
    assert "until their mass reaches 90.0%" in text and "p = 40.0% after the settings, 30.0% in the plain softmax" in text
    assert "Only 2 tokens could be drawn" in text and "seed 3" in text
    assert settings_label(settings) == "4 new tokens · sampling: T 0.7 · top-k 5 · top-p 0.9 · seed 3 · KV cache on"
    wide = GenerationSettings(4, SamplingSettings(0.7, top_k=50257, seed=3))
    assert "top-k 50,257 ·" in settings_label(wide)  # as every count is written (it read 'top-k 50257')


def test_settings_come_from_the_command_line_and_the_form():
    options = parse_args(["--generate", "7", "--temperature", "0.5", "--seed", "2", "--no-cache"])
    s = GenerationSettings.from_options(options)
    assert s.max_new_tokens == 7 and s.sampling.temperature == 0.5 and s.sampling.seed == 2 and not s.use_cache
    assert GenerationSettings.from_options(parse_args([])) == GenerationSettings(40)
    form = {"new-tokens": "12", "temperature": "0.8", "top-k": "40", "top-p": "0.95", "seed": "1"}
    settings, errors = parse_settings(form, sampling=True, use_cache=True)
    assert not errors and settings == GenerationSettings(12, SamplingSettings(0.8, 40, 0.95, 1), True)
    settings, errors = parse_settings(form, sampling=False, use_cache=False)
    assert settings == GenerationSettings(12, SamplingSettings(), False)
    bad = {"new-tokens": "x", "temperature": "-1", "top-k": "2.5", "top-p": "0", "seed": ""}
    settings, errors = parse_settings(bad, sampling=True, use_cache=True)
    assert settings is None
    assert errors == {  # the values as typed: '-1', not the float's '-1.0'
        "new-tokens": "new tokens must be an integer from 1 to 4,096, got 'x'",
        "temperature": "temperature must be a number from 0 to 1,000,000, got -1",
        "top-k": "top-k must be an integer, got '2.5'",
        "top-p": "top-p must be in (0, 1], got 0",
    }


def test_the_form_says_everything_wrong_at_once_and_keeps_to_the_model():
    """Every field's problem at once (a bad seed was said only once the others were mended), and
    the bounds the command line has: new tokens as --generate's, top-k within the vocabulary (the
    form took 5,999,999,999,999 new tokens and a top-k of 999,999)."""
    bad = {"new-tokens": "", "temperature": "-1", "top-k": "0", "top-p": "2", "seed": "-1"}
    settings, errors = parse_settings(bad, sampling=True, use_cache=True)
    assert settings is None and set(errors) == {"new-tokens", "temperature", "top-k", "top-p", "seed"}
    assert errors["seed"] == "seed must be an integer from 0 to 9,223,372,036,854,775,807, got -1"
    assert errors["new-tokens"] == "new tokens: an integer from 1 to 4,096 is needed"  # not "got ''"
    over = {"new-tokens": "5999999999999", "temperature": "0.5", "top-k": "999999", "top-p": "", "seed": "1"}
    settings, errors = parse_settings(over, sampling=True, use_cache=True, vocab=50257)
    assert settings is None and errors == {
        "new-tokens": "new tokens must be an integer from 1 to 4,096, got 5999999999999",
        "top-k": "top-k 999999: more than the model's vocabulary of 50,257 tokens",
    }
    at_the_bounds = {"new-tokens": "4096", "temperature": "0.5", "top-k": "50257", "top-p": "", "seed": ""}
    settings, errors = parse_settings(at_the_bounds, sampling=True, use_cache=True, vocab=50257)
    assert not errors and settings.max_new_tokens == 4096 and settings.sampling.top_k == 50257


def test_chart_layout_and_scale():
    assert groups(10, 36) == (1, 2) and groups(30, 36) == (1, 1) and groups(40, 36) == (2, 1)
    assert pooled([1, 3, 5, 7, 9], 2) == [2, 6, 9]
    first, decode = "latency-chart--first", "latency-chart--decode"
    tall_prefill = Series([40.0, 2.0, 3.0], [first, decode, decode])
    assert chart_scale([tall_prefill], first) == (3.0, 1)  # the prefill is cut off
    assert chart_scale([Series([5.0, 2.0, 3.0], [first, decode, decode])], first) == (5.0, 0)
    assert chart_scale([Series([40.0, 50.0]), Series([2.0, 3.0])], first) == (50.0, 0)
    # A one-off spike among ordinary decode steps does not flatten them (issue 13: "top 198 ms").
    steps = [60.0] + [10.0, 12.0, 11.0, 9.0, 198.0, 10.0, 13.0, 11.0, 10.0, 12.0]
    spiky = Series(steps, [first] + [decode] * 10)
    assert chart_scale([spiky], first) == (13.0, 2)
    assert [fill(5.0, 5.0, row, 5) for row in range(5)] == [8] * 5
    assert [fill(0.01, 5.0, row, 5) for row in range(5)] == [0, 0, 0, 0, 1]  # never invisible


def test_a_replayed_generation_measured_busy_marks_its_table_and_its_rates(tmp_path):
    """The generation view's table of times and rates says under what load they were measured."""
    import json

    from tui_helpers import GENERATION_TRACE, panel_text, run_async, started

    from gpt2viz.trace import load
    from gpt2viz.tui.app import make_app
    from gpt2viz.tui.screens.generation import GenerationScreen

    doc = json.loads(GENERATION_TRACE.read_text(encoding="utf-8"))
    doc["generation"]["others_cpu"] = 0.637
    path = tmp_path / "busy.json"
    path.write_text(json.dumps(doc), encoding="utf-8")

    @run_async
    async def walk():
        app = make_app(trace=load(path))
        async with app.run_test(size=(120, 40)) as pilot:
            await started(app, pilot)
            await pilot.press("g")
            await started(app, pilot, GenerationScreen)
            text = panel_text(app.screen, "#cost-panel")
            assert "measured while other processes used 63.7% of the CPUs" in text
            assert text.count("used 63.7% of the CPUs") >= 3  # the table, and each rate's sentence

    walk()


def test_running_text_puts_a_character_split_between_tokens_together():
    """GPT-2 writes most Chinese characters as two or three byte tokens, each shown alone as
    `\\xe5\\xb7`: running text joins them (with the token that completes one), keeps a byte that
    never makes a character escaped, and holds back an unfinished one while a run goes on."""
    from gpt2viz.model.tokenizer import Tokenizer
    from gpt2viz.tui.formatting import running_texts

    tok = Tokenizer.from_dir(Path(gpt2viz.__file__).resolve().parents[1] / "assets" / "tokenizer")
    text = "人工智能的意义 is 42"
    ids = tok.encode(text)
    displays = [tok.display(i) for i in ids]
    assert any("\\x" in d for d in displays)  # some tokens are half a character
    pieces = running_texts(displays)
    assert len(pieces) == len(ids) and "".join(pieces) == visible_text(text)
    assert all(tok.decode(ids[: i + 1]).startswith("".join(pieces[: i + 1]).replace("␣", " ")) for i in range(len(ids)))
    assert running_texts(["\\xe5\\xb7", "a"]) == ["", "\\xe5\\xb7a"]  # never completed: escaped
    assert running_texts(["a", "\\xe5\\xb7"], final=False) == ["a", ""]
    assert running_texts(["a", "\\xe5\\xb7"]) == ["a", "\\xe5\\xb7"]
    # A whole character written escaped (NBSP, two bytes) completes no byte before it: the half
    # character '\\xe4\\xb8' stays escaped, where reading NBSP's escape as a byte made '丠'.
    nbsp = tok.display(tok.encode("\u00a0")[0])
    assert running_texts(["\\xe4\\xb8", nbsp]) == ["", "\\xe4\\xb8" + nbsp]
