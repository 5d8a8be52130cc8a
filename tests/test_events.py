"""The pieces that turn tensors into trace numbers: rounding, batched statistics, deferred parts."""

from __future__ import annotations

import gc
import math
import weakref

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from gpt2viz.trace import events as ev
from gpt2viz.trace import recorder as recorder_module
from gpt2viz.trace import record_forward, trace_prompt

PROMPT = "The meaning of life is"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1, max_size=50))
def test_vectorised_rounding_equals_rounding_one_by_one(values):
    got = ev.round_tensors([torch.tensor(values, dtype=torch.float64)])[0]
    assert got == [ev.rnd(v) for v in values]


def test_rounding_reaches_tiny_and_huge_magnitudes():
    # 10^d stops being an exact double beyond d = 22; those values are rounded one by one.
    values = [3.96508223080413e-18, -1.23456789e-30, 9.87654321e35, 5e-324, 1.7976931348623157e308]
    assert ev.round_tensors([torch.tensor(values, dtype=torch.float64)])[0] == [ev.rnd(v) for v in values]
    assert ev.rnd(3.96508223080413e-18) == 3.96508e-18


def test_round_tensors_keeps_each_shape():
    a = torch.tensor([1.23456789, 2.0])
    b = torch.tensor([[1.0, float("nan")], [float("inf"), -7.654321e-5]])
    c = torch.tensor(3.14159265)
    assert ev.round_tensors([a, b, c]) == [[1.23457, 2.0], [[1.0, None], [None, -7.65432e-05]], 3.14159]
    assert ev.round_tensors([]) == []
    assert ev.round_tensors([a, b]) == [ev.rnd_list(a), ev.rnd_list(b)]


@pytest.mark.parametrize("n_rows", [6, ev.ROWS_AT_ONCE * 2 + 3])  # one chunk, and several
def test_top_tokens_of_many_rows_equal_the_straightforward_softmax(n_rows):
    torch.manual_seed(0)
    logits = torch.randn(n_rows, 500) * 4
    logits[2, 7] = 40.0  # one near-certain row: the rest of its probabilities underflow
    logits[4, :100] = float("-inf")  # masked-out tokens: probability 0, nothing in the entropy
    rows = ev.top_tokens_rows(logits, 5, str)
    for row, lg in zip(rows, logits):
        probs = torch.softmax(lg.double(), dim=-1)
        values, ids = torch.topk(lg, 5)
        assert row["ids"] == ids.tolist()
        assert row["tokens"] == [str(i) for i in ids.tolist()]
        assert row["logits"] == ev.rnd_list(values)
        assert row["probs"] == pytest.approx(probs[ids].tolist(), rel=1e-5)
        entropy = float(-(probs * torch.log(probs.clamp_min(1e-300))).sum())
        assert row["entropy"] == pytest.approx(entropy, rel=1e-5, abs=1e-12)
    assert ev.top_tokens(logits[3], 5, str) == rows[3]


@pytest.mark.parametrize("T", [4, ev.ROWS_AT_ONCE * 2 + 5])  # one chunk of positions, and several
def test_layer_norm_statistics_equal_the_textbook_formulas(T):
    torch.manual_seed(1)
    x = torch.randn(1, T, 64) * 3 + 1.5
    eps = 1e-5
    out = torch.nn.functional.layer_norm(x, (64,), torch.rand(64) + 0.5, torch.randn(64), eps)
    stats = {k: v.tolist() for k, v in ev.layer_norm_stats(x, out, eps).items()}
    x64 = x[0].double()
    normalized = (x64 - x64.mean(-1, keepdim=True)) / (x64.var(-1, unbiased=False, keepdim=True) + eps).sqrt()
    want = {
        "input_mean": x64.mean(-1),
        "input_std": x64.std(-1, unbiased=False),
        "normalized_mean": normalized.mean(-1),
        "normalized_std": normalized.std(-1, unbiased=False),
        "output_mean": out[0].double().mean(-1),
        "output_std": out[0].double().std(-1, unbiased=False),
    }
    assert set(stats) == set(want)
    for key, value in want.items():
        assert stats[key] == pytest.approx(value.tolist(), rel=1e-9, abs=1e-12), key


@pytest.mark.parametrize("length, n_bins", [(1024, 64), (990, 64), (300, 64), (70, 64)])
def test_pool_bins_are_the_cells_adaptive_pooling_averages(length, n_bins):
    """The TUI labels a reduced attention map's cells with pool_bins; they must be the very ranges
    the trace averaged."""
    values = torch.randn(length, dtype=torch.float64)
    pooled = F.adaptive_avg_pool1d(values[None, None], n_bins)[0, 0]
    by_bins = torch.stack([values[a:b].mean() for a, b in ev.pool_bins(length, n_bins)])
    torch.testing.assert_close(by_bins, pooled)


def test_a_reduced_map_averages_only_the_unmasked_cells():
    torch.manual_seed(2)
    T = ev.FULL_ATTENTION_MAX + 44
    scores = torch.randn(1, 2, T, T).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    event = ev.attention_maps(scores, masked_as_none=True)
    heads = ev.resolve(event)["heads"]
    assert event["reduced"] and event["downsampled"] == [64, 64]
    rows, cols = ev.pool_bins(T, 64), ev.pool_bins(T, 64)
    for r, c in [(0, 0), (5, 3), (63, 63), (30, 31)]:
        block = scores[0, 1, rows[r][0] : rows[r][1], cols[c][0] : cols[c][1]].double()
        visible = block[torch.isfinite(block)]
        want = None if visible.numel() == 0 else ev.rnd(float(visible.mean()))
        assert heads[1][r][c] == want, (r, c)
    assert heads[1][0][63] is None  # a block wholly in the future stays masked


def test_recorded_events_defer_the_bulky_parts_until_read(tiny_lm):
    ids = tiny_lm.tokenizer.encode(PROMPT)
    events, _ = record_forward(tiny_lm, ids)
    by_stage = {e["stage"]: e for e in events}
    deferred = {(e["stage"], k) for e in events for k, v in e.items() if isinstance(v, ev.Later)}
    assert ("blocks.0.attn.hook_pattern", "heads") in deferred
    assert ("blocks.0.attn.hook_attn_scores", "heads") in deferred
    assert ("unembed.hook_out", "positions") in deferred
    assert ("logit_lens", "layers") in deferred
    # Everything else is plain data already: no tensors left behind.
    assert not any(isinstance(v, torch.Tensor) for e in events for v in e.values())

    pattern = ev.resolve(by_stage["blocks.0.attn.hook_pattern"])["heads"]
    assert len(pattern) == tiny_lm.config.n_head and len(pattern[0]) == len(ids)
    assert by_stage["blocks.0.attn.hook_pattern"]["heads"] is pattern  # resolved once, in place


def test_a_trace_only_ever_shows_plain_data(tiny_lm):
    trace = trace_prompt(tiny_lm, PROMPT)
    lens = trace.event("logit_lens")
    assert isinstance(lens["layers"], list) and len(lens["layers"]) == tiny_lm.config.n_layer
    assert lens["layers"][-1]["ids"][0] == lens["final_id"]  # the last block's lens is the output
    assert lens["layers"][-1]["final_rank"] == 1

    def plain(value) -> bool:
        if isinstance(value, dict):
            return all(plain(v) for v in value.values())
        if isinstance(value, list):
            return all(plain(v) for v in value)
        return value is None or isinstance(value, (str, int, float, bool))

    assert plain(trace.to_dict())


def test_deferred_parts_equal_what_the_pass_computed(tiny_lm):
    """The pattern read later is the pattern of the pass, not of a later one."""
    ids = tiny_lm.tokenizer.encode(PROMPT)
    first = trace_prompt(tiny_lm, PROMPT)
    captured = {}
    with tiny_lm.hooks.subscribe("blocks.1.attn.hook_pattern", lambda n, v: captured.setdefault(n, v.clone())):
        tiny_lm.model(torch.tensor([ids]))
    trace_prompt(tiny_lm, "Something else entirely, and longer than the first prompt")  # another pass
    heads = first.event("blocks.1.attn.hook_pattern")["heads"]
    assert heads == ev.rnd_list(captured["blocks.1.attn.hook_pattern"][0])


def test_the_recorder_is_freed_without_the_garbage_collector(tiny_lm, monkeypatch):
    """Deferred parts must not hold the Recorder in a reference cycle: with the collector frozen
    out (as the app does) cycles would pile up, and the recorder holds every live tensor."""
    refs = []
    original_init = recorder_module.Recorder.__init__

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        refs.append(weakref.ref(self))

    monkeypatch.setattr(recorder_module.Recorder, "__init__", init)
    gc.disable()
    try:
        events, _ = record_forward(tiny_lm, tiny_lm.tokenizer.encode(PROMPT))
        assert refs and refs[0]() is None, "the Recorder outlived record_forward"
        for event in events:
            ev.resolve(event)
        assert math.isfinite(events[-1]["layers"][0]["probs"][0])
    finally:
        gc.enable()
