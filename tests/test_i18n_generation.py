"""The generation view's words in Chinese, without a terminal: every paragraph and line it can say
has no English left, quotes the same numbers as in English, and English plurals are right."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from gpt2viz.generate import SamplingSettings
from gpt2viz.i18n import set_language
from gpt2viz.trace import load
from gpt2viz.tui.facts import RunFacts
from gpt2viz.tui.generation import Comparison, Generation, GenerationSettings, settings_label
from gpt2viz.tui.generation_narration import (
    bandwidth_text,
    bound_text,
    choice_text,
    compare_text,
    kv_formula,
    kv_text,
    step_flow,
    step_heading,
    step_text,
    stop_text,
)
from gpt2viz.tui.screens.generation_settings import parse_settings
from zh_words import english_words

TRACE = Path(__file__).resolve().parent / "data" / "tiny-generation-trace.json"
CODE_WORDS = {"tril", "diagonal"}  # the shifted causal mask, written as the code writes it: tril(diagonal=11)


def allowed_words(trace, *gens: Generation) -> set[str]:
    """The words a run brings itself (prompt, model name, every token text shown), and code."""
    texts = [trace.prompt, str(trace.model.get("name", ""))] + [t["text"] for t in trace.tokens]
    for gen in gens:
        texts.append("".join(step["text"] for step in gen.steps).replace("␣", " "))  # as the text runs on
        for step in gen.steps:
            texts.append(step["text"])
            for part in ("raw", "candidates"):
                texts += (step.get(part) or {}).get("tokens") or []
    return {w.lower() for text in texts for w in re.findall(r"[A-Za-z][A-Za-z'\-]*", text)} | CODE_WORDS


def numbers(text: str) -> list[str]:
    """The numbers of a text, in order of size as written: '6,272', '1.5', '11'."""
    return sorted(re.findall(r"\d+(?:[.,]\d+)*", text))


def said_in_both(say_it, allowed: set[str]) -> tuple[str, str]:
    """`say_it()` in English and in Chinese; the Chinese has no English words and the same numbers."""
    english = say_it()
    set_language("zh")
    try:
        chinese = say_it()
    finally:
        set_language("en")
    assert english != chinese, english
    assert english_words(chinese, allowed) == [], chinese
    assert numbers(chinese) == numbers(english), (english, chinese)
    return english, chinese


@pytest.fixture(scope="module")
def recorded():
    """The committed greedy generation with the KV cache (12 tokens after a 5-token prompt)."""
    trace = load(TRACE)
    f = RunFacts.of(trace)
    gen = Generation.from_record(trace.generation, trace.token_ids, [t["text"] for t in trace.tokens], f.n_ctx)
    return trace, f, gen


def with_settings(gen: Generation, sampling: SamplingSettings, use_cache: bool = True, **changes) -> Generation:
    """The same steps as if chosen with other settings (without the cache: full passes, no KV)."""
    steps = gen.steps if use_cache else [dict(s, used_cache=False, kv_cache=None) for s in gen.steps]
    return replace(gen, settings=replace(gen.settings, sampling=sampling, use_cache=use_cache), steps=steps, **changes)


def variants(gen: Generation) -> list[Generation]:
    """Every way the view words a generation: greedy or sampling (each temperature effect, top-k,
    top-p, both, none, a seed or none), with or without the cache, and a resumed run."""
    return [
        gen,
        with_settings(gen, SamplingSettings(), use_cache=False),
        with_settings(gen, SamplingSettings(0.7, 5, None, 3)),
        with_settings(gen, SamplingSettings(1.5, None, 0.9, None)),
        with_settings(gen, SamplingSettings(1.0, 40, 0.95, 1)),
        with_settings(gen, SamplingSettings(1.0, None, None, 2), use_cache=False, topk=3),
        replace(gen, starts=[0, 5], stop_reason="cancelled", settings=replace(gen.settings, max_new_tokens=20)),
    ]


def test_every_step_of_a_recorded_generation_in_chinese(recorded):
    trace, f, gen = recorded
    for variant in variants(gen):
        allowed = allowed_words(trace, variant)
        said_in_both(lambda: settings_label(variant.settings), allowed)
        said_in_both(lambda: stop_text(variant), allowed)
        for i in range(len(variant.steps)):
            said_in_both(lambda: step_heading(variant, i), allowed)
            said_in_both(lambda: "\n".join(step_flow(f, variant, i)), allowed)
            said_in_both(lambda: step_text(f, variant, i), allowed)
            said_in_both(lambda: choice_text(variant, i), allowed)
            said_in_both(lambda: kv_text(f, variant, i, "c"), allowed)
            said_in_both(lambda: bandwidth_text(f, variant, i, "c"), allowed)
            said_in_both(lambda: "\n".join(kv_formula(f, f.T + i, 36)), allowed)


def test_the_chinese_is_what_the_english_says(recorded):
    """A few facts, checked in both languages: the same shapes and numbers at the same places."""
    trace, f, gen = recorded
    english, chinese = said_in_both(lambda: step_text(f, gen, 7), allowed_words(trace, gen))
    assert "Its position id is 11, the past length: 11 positions are already in the cache" in english
    assert "它的位置 id 是 11" in chinese and "缓存里已有 11 个位置" in chinese and "tril(diagonal=11)" in chinese
    english, chinese = said_in_both(lambda: choice_text(variants(gen)[2], 7), allowed_words(trace, gen))
    assert "temperature 0.7 (sharper" in english and "Then top-k keeps the 5 most likely." in english
    assert "温度 0.7（更尖锐" in chinese and "top-k 只保留最可能的 5 个" in chinese
    lines = kv_formula(f, 12, width=30)
    set_language("zh")
    chinese_lines = kv_formula(f, 12, width=30)
    assert all(len(line) <= 30 for line in lines)
    assert all(sum(2 if ord(ch) > 0x2E80 else 1 for ch in line) <= 30 for line in chinese_lines)  # by cells
    assert chinese_lines[-1].endswith("= 75,264 B") and lines[-1].endswith("= 75,264 B")


def test_the_comparison_in_chinese(recorded):
    trace, f, gen = recorded
    naive_steps = [dict(s, used_cache=False, kv_cache=None, ms=6.0 + 0.5 * i) for i, s in enumerate(gen.steps)]
    naive = replace(with_settings(gen, gen.settings.sampling, use_cache=False), steps=naive_steps, label="no cache")
    allowed = allowed_words(trace, gen)
    english, chinese = said_in_both(lambda: compare_text(f, Comparison(naive, gen)), allowed)
    assert "Both runs chose the same 12 ids." in english and "Where the time goes" in english
    assert "两次运行选出了相同的 12 个 id。" in chinese
    seeded = with_settings(gen, SamplingSettings(0.8, 40, None, 9))
    english, _ = said_in_both(lambda: compare_text(f, Comparison(naive, seeded)), allowed)
    assert "(sampling with the same seed, 9)" in english
    differing = replace(gen, steps=[*gen.steps[:3], dict(gen.steps[3], id=99, text="x")])  # stops early too
    english, chinese = said_in_both(lambda: compare_text(f, Comparison(naive, differing)), allowed | {"x"})
    assert "The runs differ from step 3" in english and "第 3 步开始不同" in chinese
    short = replace(gen, steps=gen.steps[:4])
    english, chinese = said_in_both(lambda: compare_text(f, Comparison(naive, short)), allowed)
    assert "with it '(stopped)'" in english and "（已停止）" in chinese


@pytest.mark.parametrize("reason", ["eos", "context", "max_new_tokens", "cancelled"])
@pytest.mark.parametrize("use_cache", [True, False])
def test_every_stop_reason_in_chinese(recorded, reason, use_cache):
    trace, _, gen = recorded
    stopped = with_settings(gen, gen.settings.sampling, use_cache=use_cache, stop_reason=reason)
    said_in_both(lambda: stop_text(stopped), allowed_words(trace))
    if reason == "context":
        full = replace(stopped, steps=[])  # the prompt filled the context: nothing generated
        said_in_both(lambda: stop_text(full), allowed_words(trace))


@pytest.mark.parametrize("ms, stream", [(1.0, None), (0.5, 1.0), (1.2, 1.0), (2.0, 1.0), (10.0, 1.0)])
def test_every_bound_in_chinese(ms, stream):
    """Unmeasured, from the caches, memory, partly memory, fixed work: 1 MB at 1 GB/s is 1 ms."""
    said_in_both(lambda: bound_text(1e6, ms, stream), set())


def test_settings_form_messages_in_chinese():
    bad = {"new-tokens": "0", "temperature": "-1", "top-k": "0", "top-p": "1.5", "seed": "q"}
    english, chinese = said_in_both(lambda: "\n".join(parse_settings(bad, True, True)[1].values()), {"q"})
    assert "top-k must be an integer >= 1, got 0" in english and "seed must be an integer, got 'q'" in english
    # The form's own checks say what the core says, in the same words (one msgid a sentence).
    assert "new tokens must be an integer from 1 to 4,096, got 0" in english
    assert "top-k 必须是 >= 1 的整数，实际为 0" in chinese
    # No space between a Chinese field name and the Chinese words after it; the value as typed.
    assert "温度必须是 0 到 1,000,000 之间的数，实际为 -1" in chinese
    over = {"new-tokens": "300", "temperature": "1", "top-k": "60000"}
    english, chinese = said_in_both(lambda: "\n".join(parse_settings(over, True, True, vocab=50257)[1].values()),
                                    set())
    assert "top-k 60000：超过了模型词表的 50,257 个 token" in chinese
    for temperature in ("", "0", "x"):
        values = {"new-tokens": "1", "temperature": temperature}
        said_in_both(lambda: "\n".join(parse_settings(values, True, True)[1].values()), {"x"})


def test_english_plurals_of_one():
    one = GenerationSettings(1)
    step = {
        "id": 7, "text": "␣cat", "ms": 1.0, "used_cache": True, "chosen_prob": 0.5,
        "raw": {"ids": [7], "tokens": ["␣cat"], "probs": [0.5]},
        "candidates": {"ids": [7], "tokens": ["␣cat"], "probs": [1.0]},
    }
    gen = Generation([0], ["x"], replace(one, sampling=SamplingSettings(1.0, 1, None, 1)), 8, [step], [0], "eos")
    assert settings_label(one) == "1 new token · greedy · KV cache on"
    assert "after 1 token: it ended the text itself" in stop_text(gen)
    assert stop_text(replace(gen, stop_reason="max_new_tokens")) == "1 new token, as many as asked."
    assert "Only 1 token could be drawn at this step." in choice_text(gen, 0)
    # A decode step after a one-token prompt: one position in the cache.
    decode = replace(gen, steps=[step, dict(step, context_length=2)], stop_reason=None)
    f = RunFacts.of(load(TRACE))
    assert "the past length: 1 position is already in the cache" in step_text(f, decode, 1)
    resumed = replace(decode, starts=[0, 1])
    assert "so it reads the 1 token written before again too" in step_text(f, resumed, 1)
    longer = replace(decode, steps=[step, step, dict(step, context_length=3)])
    assert "2 positions are already in the cache" in step_text(f, longer, 2)
    # A one-token prompt's prefill and full pass: one id goes in, not "1 ids".
    assert "1 id, [1, 1], at position 0. Each of the 7 layers writes its keys" in step_text(f, gen, 0)
    full = replace(gen, settings=replace(gen.settings, use_cache=False), steps=[dict(step, used_cache=False)])
    assert "here its 1 id, [1, 1], goes through" in step_text(f, full, 0)
    assert "1 ids" not in step_text(f, full, 0) and "1 ids" not in step_text(f, gen, 0)


def test_the_chosen_token_and_its_id_are_written_by_each_language(recorded):
    """The token and its id are separate facts: each language writes the parentheses its way."""
    trace, f, gen = recorded
    english, chinese = said_in_both(lambda: choice_text(gen, 3), allowed_words(trace, gen))
    step = gen.steps[3]
    assert f"'{step['text']}' (id {step['id']})" in english
    assert f"'{step['text']}'（id {step['id']}）" in chinese and "(id" not in chinese


def test_counts_have_thousands_separators(recorded):
    """Every count the view says goes through count(): positions, ids, keys."""
    trace, f, gen = recorded
    assert "× 1,024 positions ×" in " ".join(kv_formula(f, 1024))
    long_step = dict(gen.steps[0], context_length=1500, used_cache=True)
    long = replace(gen, steps=[gen.steps[0], long_step])
    text = step_text(f, long, 1)
    assert "1,499 positions are already in the cache" in text and "all 1,500 keys" in text
    assert "(1,499 + 1 new)" in "\n".join(step_flow(f, long, 1))
