"""Batched decoding: B continuations of one prompt through one cache, one step for all rows."""

from __future__ import annotations

import json

import trace_schema
import pytest

from gpt2viz.errors import SettingError
from gpt2viz.trace import dump, load, trace_prompt

PROMPT = "The meaning of life is"


def test_greedy_rows_equal_the_single_sequence(tiny_lm):
    single = tiny_lm.generate(PROMPT, 12).token_ids
    batch = tiny_lm.generate_batch(PROMPT, 4, 12)
    assert batch.batch_size == 4 and all(row.token_ids == single for row in batch.rows)
    assert len(batch.step_ms) == 12 and batch.tokens_per_s > 0


def test_each_sampled_row_is_its_own_reproducible_stream(tiny_lm):
    batch = tiny_lm.generate_batch(PROMPT, 3, 10, temperature=1.0, seed=7)
    assert batch.seeds == [7, 8, 9]
    texts = [tuple(row.token_ids) for row in batch.rows]
    assert len(set(texts)) == 3  # three different continuations
    again = tiny_lm.generate_batch(PROMPT, 3, 10, temperature=1.0, seed=7)
    assert [tuple(r.token_ids) for r in again.rows] == texts
    # Row 1 draws as a single sequence with its seed does (the rows' logits are the same numbers).
    assert list(texts[1]) == tiny_lm.generate(PROMPT, 10, temperature=1.0, seed=8).token_ids


def test_a_row_that_ends_stops_and_the_others_go_on(tiny_lm, monkeypatch):
    from gpt2viz import batch as batch_module

    eos = tiny_lm.eos_id
    calls = {"n": 0}
    real = batch_module.choose_token

    def choose(logits, settings, generator):  # row 0 ends at its third token
        calls["n"] += 1
        token, probs = real(logits, settings, generator)
        return (eos, probs) if calls["n"] == 7 else (token, probs)

    monkeypatch.setattr(batch_module, "choose_token", choose)
    result = tiny_lm.generate_batch(PROMPT, 3, 6)
    assert result.rows[0].token_ids[-1] == eos and result.rows[0].stop_reason == "eos"
    assert len(result.rows[0].token_ids) == 3 and len(result.rows[1].token_ids) == 6


def test_bad_batch_sizes_are_refused(tiny_lm):
    for bad in (0, -1, 10_000, 2.5, True):
        with pytest.raises(SettingError, match="batch_size"):
            tiny_lm.generate_batch(PROMPT, bad, 3)


def test_the_trace_records_every_row(tmp_path, tiny_lm):
    from gpt2viz.generate import SamplingSettings

    trace = trace_prompt(tiny_lm, PROMPT, generate_tokens=5, settings=SamplingSettings(1.0, seed=2), sequences=4)
    assert trace.generation is None and trace.batch["size"] == 4
    assert [r["seed"] for r in trace.batch["rows"]] == [2, 3, 4, 5]
    assert all(len(r["ids"]) == 5 and r["text"] == tiny_lm.tokenizer.decode(r["ids"]) for r in trace.batch["rows"])
    path = tmp_path / "t.json"
    dump(trace, path)
    trace_schema.validate(json.loads(path.read_text(encoding="utf-8")))
    assert load(path).batch == trace.batch


# -- prompts of different lengths: left padding with an attention mask ---------------------------

PROMPTS = ["The capital of France is", "Once upon a time, in a land far away, there lived a", "Hello"]


@pytest.fixture(scope="module")
def bundled():
    """The trained bundled model: its logits are not nearly tied, so greedy ids are robust to
    the last digits of a kernel's sums (random weights' are not)."""
    import gpt2viz

    return gpt2viz.load_model("tiny")


def test_rows_of_different_lengths_generate_what_each_would_alone(bundled):
    out = bundled.generate_prompts(PROMPTS, 12)
    assert [r.prompt_ids for r in out.rows] == [bundled.tokenizer.encode(p) for p in PROMPTS]
    for row, prompt in zip(out.rows, PROMPTS):
        assert row.token_ids == bundled.generate(prompt, 12).token_ids
    sampled = bundled.generate_prompts(PROMPTS, 8, temperature=1.0, seed=5)
    for r, prompt in enumerate(PROMPTS):  # row r samples as a single sequence with seed + r does
        assert sampled.rows[r].token_ids == bundled.generate(prompt, 8, temperature=1.0, seed=5 + r).token_ids


def test_padded_logits_match_transformers_on_every_real_position(ckpts):
    """Left padding with a mask, in one pass and continued through the cache, against
    transformers on each prompt alone."""
    import torch

    lm, hf = ckpts.lm("tiny"), ckpts.hf("tiny")
    prompts = [lm.tokenizer.encode(p) for p in PROMPTS]
    width = max(map(len, prompts))
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    cache = lm.model.new_cache(len(prompts))
    logits, _ = lm.model(ids, cache, attention_mask=mask)
    step, _ = lm.model(torch.tensor([[11]] * len(prompts)), cache, attention_mask=torch.cat([mask, torch.ones(3, 1, dtype=mask.dtype)], 1))
    for r, p in enumerate(prompts):
        with torch.no_grad():
            ref = hf(torch.tensor([p + [11]])).logits[0]
        assert float((logits[r, width - len(p):] - ref[:-1]).abs().max()) <= 1e-4
        assert float((step[r, 0] - ref[-1]).abs().max()) <= 1e-4


def test_a_mask_that_does_not_fit_is_refused(tiny_lm):
    import torch

    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match="shape"):
        tiny_lm.model(ids, attention_mask=torch.ones(1, 2))
    with pytest.raises(ValueError, match="pad on the left"):  # into a cache: the last must be real
        tiny_lm.model(ids, tiny_lm.model.new_cache(), attention_mask=torch.tensor([[1, 1, 0]]))
    with pytest.raises(SettingError, match="prompts"):
        tiny_lm.generate_prompts("one prompt", 3)
    with pytest.raises(SettingError, match="prompt"):
        tiny_lm.generate_prompts(["a", ""], 3)


def test_no_attention_lands_on_padding(tiny_lm):
    import torch

    prompts = [tiny_lm.tokenizer.encode(p) for p in PROMPTS]
    width = max(map(len, prompts))
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    patterns = []
    with tiny_lm.hooks.subscribe("blocks.*.attn.hook_pattern", lambda name, t: patterns.append(t.clone())):
        explicit, _ = tiny_lm.model(ids, attention_mask=mask)
    fused, _ = tiny_lm.model(ids, attention_mask=mask)
    torch.testing.assert_close(explicit, fused, atol=1e-5, rtol=1e-5)  # the shown pattern is the one used
    for pattern in patterns:  # (B, nh, T, L)
        for r, p in enumerate(prompts):
            pad = width - len(p)
            if pad:
                assert float(pattern[r, :, pad:, :pad].abs().max()) == 0.0  # real queries, padding keys
            torch.testing.assert_close(pattern[r].sum(-1), torch.ones_like(pattern[r].sum(-1)))


def test_the_cli_decodes_prompts_of_different_lengths_together(tmp_path):
    """--batch-prompt: every row of the trace's batch is its prompt's own greedy continuation."""
    import gpt2viz
    from test_cli_errors import gpt2viz as run_cli, one_error_line

    out = tmp_path / "batch.json"
    code, stderr, _ = run_cli(PROMPTS[0], "--model", "tiny", "--json", str(out), "--generate", "6",
                              "--batch-prompt", PROMPTS[1], "--batch-prompt", PROMPTS[2])
    assert code == 0, stderr
    batch = load(out).batch
    lm = gpt2viz.load_model("tiny")
    assert batch["size"] == 3
    for row, prompt in zip(batch["rows"], PROMPTS):
        assert row["prompt_ids"] == lm.tokenizer.encode(prompt) and row["prompt"] == prompt
        assert row["ids"] == lm.generate(prompt, 6).token_ids
    trace_schema.validate(json.loads(out.read_text()))
    code, stderr, _ = run_cli("a", "--model", "tiny", "--json", "-", "--batch-prompt", "b")
    assert code == 2 and "--generate" in one_error_line(stderr)
    code, stderr, _ = run_cli("a", "--model", "tiny", "--json", "-", "--generate", "2", "--batch-prompt", "b",
                              "--sequences", "2")
    assert code == 2 and "do not go together" in one_error_line(stderr)
