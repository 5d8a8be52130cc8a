"""The two-core products (gpt2viz/kernels/split.py) and the choice of kernel per weight
(gpt2viz/kernels/choice.py): a split runs only where it gives the plain product's digits (or the
plain product keeps no digits for it to change: a row's differ alone and among a prefill's) and,
when measured, where it is faster on this CPU."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from helpers import PROMPT

import gpt2viz
from gpt2viz.kernels import cache as kernel_cache, choice
from gpt2viz.kernels.choice import PARTIAL_SUMS, PLAIN, SPLIT, Choice
from gpt2viz.kernels.split import (
    BLOCK_MAX_ROWS,
    HEAD_MAX_ROWS,
    PartialSumsBlockProduct,
    SplitBlockProduct,
    SplitHeadProduct,
    conv1d_halves,
    conv1d_partial_sums,
    unembed_halves,
)
from gpt2viz.model.layers import Conv1D, plain_block_product, plain_head_product


@pytest.fixture
def count_bmm(monkeypatch):
    """How many batched products (the two-core path) ran."""
    calls = []
    from gpt2viz.kernels import split

    for name in ("bmm", "baddbmm"):
        real = getattr(torch, name)

        def counting(*args, _real=real, **kwargs):
            calls.append(args[0].shape)
            return _real(*args, **kwargs)

        monkeypatch.setattr(split.torch, name, counting)
    return calls


def _decide_block(conv: Conv1D, threads: int):
    """The choice `choose_kernels` makes for a block product with `conv`'s weight, measuring."""
    return choice._decide([conv], "block", *conv.weight.shape, threads, "measure")


def _conv(n_in: int, n_out: int) -> Conv1D:
    conv = Conv1D(n_in, n_out)
    conv.weight = torch.nn.Parameter(torch.randn(n_in, n_out), requires_grad=False)
    conv.bias = torch.nn.Parameter(torch.randn(n_out), requires_grad=False)
    return conv


@pytest.mark.parametrize("n_in,n_out", [(64, 96), (100, 112), (112, 336), (768, 2304), (3072, 768)])
def test_a_block_split_runs_only_where_it_gives_the_plain_digits(two_threads, n_in, n_out):
    torch.manual_seed(n_in)
    conv = _conv(n_in, n_out)
    decided = _decide_block(conv, threads=2)
    same = choice._same_digits(conv.weight, conv.bias)
    for rows in (1, 2, BLOCK_MAX_ROWS):
        x = torch.randn(rows, n_in)  # other inputs than the check's
        got, want = conv1d_halves(x, conv.weight, conv.bias), torch.addmm(conv.bias, x, conv.weight)
        # The same dot products: equal within float32's rounding on every CPU ...
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-5)
        # ... and, where the check found the split's digits equal, equal for any input: the BLAS
        # adds in an order set by the shapes, not the values.
        if same:
            assert torch.equal(got, want)
    if not same and choice._plain_rows_hold(conv.weight, conv.bias):
        assert (decided.kernel, decided.reason) == (PLAIN, "other digits")
    if not same and decided.kernel == SPLIT:
        # Chosen with other digits only where the plain product gives a row other digits alone
        # than among a prefill's rows (other rows than the check's): no digits for it to keep.
        prefill = torch.randn(64, n_in)
        whole = plain_block_product(prefill, conv.weight, conv.bias)
        assert not all(torch.equal(plain_block_product(prefill[i : i + 1], conv.weight, conv.bias), whole[i : i + 1])
                       for i in range(BLOCK_MAX_ROWS))


@pytest.mark.parametrize("rows_hold, kernel, reason", [(True, PLAIN, "other digits"), (False, SPLIT, "faster")])
def test_a_split_with_other_digits_runs_only_where_the_plain_product_keeps_none(monkeypatch, rows_hold, kernel, reason):
    """Where the plain product gives a row the digits it has among a prefill's rows, a split that
    adds in another order would make a cached step differ from a full pass: it stays plain. Where
    the plain product does not (an AMD EPYC's BLAS), the split is chosen on speed alone."""
    monkeypatch.setattr(choice, "_same_digits", lambda weight, bias: False)
    monkeypatch.setattr(choice, "_plain_rows_hold", lambda weight, bias: rows_hold)
    monkeypatch.setattr(choice, "_time_both", lambda layers, product, n_rows, *_: (100.0, 50.0))
    decided = _decide_block(_conv(64, 96), threads=2)
    assert (decided.kernel, decided.reason) == (kernel, reason)


@pytest.mark.parametrize("n_in,n_out", [(64, 96), (10, 33), (3072, 768)])
def test_the_partial_sums_are_the_plain_product_within_rounding(count_bmm, two_threads, n_in, n_out):
    torch.manual_seed(n_out)
    conv = _conv(n_in, n_out)
    for rows in (1, 3, BLOCK_MAX_ROWS):
        x = torch.randn(rows, n_in)
        # Two partial sums of n_in / 2 terms each, added: the same sum in another order.
        torch.testing.assert_close(conv1d_partial_sums(x, conv.weight, conv.bias), torch.addmm(conv.bias, x, conv.weight),
                                   atol=1e-4, rtol=1e-5)
    product = PartialSumsBlockProduct(max_rows=4, threads=2)
    count_bmm.clear()
    product(torch.randn(4, n_in), conv.weight, conv.bias)
    assert len(count_bmm) == 1  # up to max_rows: the two halves as a batch of two
    product(torch.randn(5, n_in), conv.weight, conv.bias)
    torch.set_num_threads(1)
    product(torch.randn(1, n_in), conv.weight, conv.bias)
    assert len(count_bmm) == 1  # more rows, or another thread count: the plain product


@pytest.mark.parametrize("rows_hold", [True, False])
def test_the_partial_sums_run_only_where_the_plain_product_keeps_no_digits(monkeypatch, rows_hold):
    """Partial sums add in another order by design: where the plain product gives a row its
    prefill digits, a cached step would then differ from a full pass, so they are not even timed;
    where it does not (an AMD EPYC's BLAS), the faster of the two splits is chosen."""
    timed = []
    monkeypatch.setattr(choice, "_same_digits", lambda weight, bias: True)
    monkeypatch.setattr(choice, "_plain_rows_hold", lambda weight, bias: rows_hold)
    monkeypatch.setattr(choice, "_time_both", lambda layers, product, n_rows, kernel=SPLIT: timed.append(kernel)
                        or ((100.0, 50.0) if kernel == PARTIAL_SUMS else (100.0, 80.0)))
    decided = _decide_block(_conv(64, 96), threads=2)
    if rows_hold:
        assert (decided.kernel, decided.split_us, decided.partial_us) == (SPLIT, 80.0, None)
        assert PARTIAL_SUMS not in timed
    else:
        assert (decided.kernel, decided.reason, decided.max_rows) == (PARTIAL_SUMS, "faster", BLOCK_MAX_ROWS)
        assert (decided.plain_us, decided.split_us, decided.partial_us) == (100.0, 80.0, 50.0)
    # A width whose column halves are not whole vectors can still take the partial sums.
    odd = _decide_block(_conv(10, 33), threads=2)
    assert (odd.kernel, odd.reason) == ((PLAIN, "odd width") if rows_hold else (PARTIAL_SUMS, "faster"))


def test_remembered_partial_sums_are_used_and_decided_again_where_the_digits_would_change(
    monkeypatch, cache_dir, ckpts, two_threads
):
    _quiet(monkeypatch)
    rows_hold, timed = [False], []
    monkeypatch.setattr(choice, "_same_digits", lambda weight, bias: False)
    monkeypatch.setattr(choice, "_plain_rows_hold", lambda weight, bias: rows_hold[0])
    monkeypatch.setattr(choice, "_time_both", lambda layers, product, n_rows, kernel=SPLIT: timed.append(product)
                        or ((100.0, 50.0) if kernel == PARTIAL_SUMS else (100.0, 100.0)))
    lm = gpt2viz.load_model(str(ckpts.path("distilgpt2")))
    assert {c.kernel for c in lm.kernels if c.product == "block"} == {PARTIAL_SUMS}
    assert isinstance(lm.model.h[1].mlp.c_proj.product, PartialSumsBlockProduct)
    timed.clear()
    again = gpt2viz.load_model(str(ckpts.path("distilgpt2")))  # read back from the cache, not measured
    assert timed == [] and again.kernels == lm.kernels
    assert isinstance(again.model.h[0].attn.c_attn.product, PartialSumsBlockProduct)
    rows_hold[0] = True  # a BLAS that now keeps a row's digits: decided again, and plain for them
    third = gpt2viz.load_model(str(ckpts.path("distilgpt2")))
    assert {(c.kernel, c.reason) for c in third.kernels if c.product == "block"} == {(PLAIN, "other digits")}
    assert third.model.h[0].mlp.c_fc.product is plain_block_product


@pytest.mark.parametrize("n_out", [33, 300])
def test_widths_whose_halves_are_not_whole_vectors_stay_plain(monkeypatch, n_out):
    monkeypatch.setattr(choice, "_plain_rows_hold", lambda weight, bias: True)  # no partial sums either
    decided = _decide_block(_conv(10, n_out), threads=2)
    assert (decided.kernel, decided.reason) == (PLAIN, "odd width")


@pytest.mark.parametrize("vocab", [50, 51])  # GPT-2's vocabulary is odd: one row left over
@pytest.mark.parametrize("rows", [1, 3, HEAD_MAX_ROWS])
def test_unembed_halves_equal_linear(vocab, rows):
    torch.manual_seed(vocab + rows)
    wte = torch.randn(vocab, 24)
    x = torch.randn(rows, 24)
    got = unembed_halves(x, wte)
    assert got.shape == (rows, vocab)
    # Each logit is the same dot product either way; only the kernel's summation order may differ.
    torch.testing.assert_close(got, F.linear(x, wte), atol=1e-5, rtol=1e-5)


def test_a_split_product_splits_up_to_its_rows_at_its_thread_count_only(two_threads, count_bmm):
    conv = _conv(64, 96)
    block, head = SplitBlockProduct(max_rows=4, threads=2), SplitHeadProduct(max_rows=4, threads=2)
    wte = torch.randn(11, 64)
    for rows, split in ((1, True), (4, True), (5, False)):
        count_bmm.clear()
        x = torch.randn(rows, 64)
        torch.testing.assert_close(block(x, conv.weight, conv.bias), plain_block_product(x, conv.weight, conv.bias))
        torch.testing.assert_close(head(x, wte), plain_head_product(x, wte))
        assert len(count_bmm) == (2 if split else 0)
    torch.set_num_threads(1)
    count_bmm.clear()
    block(torch.randn(1, 64), conv.weight, conv.bias)
    head(torch.randn(1, 64), wte)
    assert count_bmm == []


@pytest.mark.parametrize(
    "plain_us, split_us, many, kernel, reach",
    [(100.0, 50.0, (100.0, 60.0), SPLIT, BLOCK_MAX_ROWS), (100.0, 50.0, (100.0, 99.0), SPLIT, 1), (100.0, 95.0, None, PLAIN, 0)],
)
def test_the_split_is_chosen_where_it_is_faster_by_the_margin(monkeypatch, cache_dir, plain_us, split_us, many, kernel, reach):
    timings = iter([(plain_us, split_us)] + ([many] if many else []))
    monkeypatch.setattr(choice, "_time_both", lambda layers, product, n_rows, *_: next(timings))
    monkeypatch.setattr(choice, "_same_digits", lambda weight, bias: True)
    monkeypatch.setattr(choice, "_plain_rows_hold", lambda weight, bias: True)  # the column split alone
    decided = _decide_block(_conv(64, 96), threads=2)
    assert (decided.kernel, decided.max_rows) == (kernel, reach)
    assert (decided.plain_us, decided.split_us) == (plain_us, split_us)  # kept, to show and to cache
    assert _decide_block(_conv(64, 96), threads=1).reason == "one thread"


def _quiet(monkeypatch):
    """Other processes used nothing while the kernels were measured."""
    monkeypatch.setattr(choice, "others_share", lambda before, after: 0.0)


def _quiet_and_timed_at_once(monkeypatch):
    """Quiet, and every measurement a tie: for the tests of the cache file, where the real timing
    (1-2 s of a distilgpt2 load) adds nothing. The measured_cache fixture and
    test_a_left_out_entry_is_measured_again_and_rewritten time the products for real."""
    _quiet(monkeypatch)
    monkeypatch.setattr(choice, "_time_both", lambda layers, product, n_rows, *_: (100.0, 100.0))


def test_a_model_gets_the_kernels_chosen_and_the_next_load_measures_nothing(monkeypatch, cache_dir, ckpts, two_threads):
    _quiet(monkeypatch)
    monkeypatch.setattr(choice, "_same_digits", lambda weight, bias: True)
    measured = []

    def fake_timing(layers, product, n_rows, kernel=SPLIT):
        measured.append(product)
        return (100.0, 40.0) if product == "head" else (100.0, 100.0)

    monkeypatch.setattr(choice, "_time_both", fake_timing)
    lm = gpt2viz.load_model(str(ckpts.path("distilgpt2")))
    by_product = {c.product: c for c in lm.kernels}
    assert by_product["head"].kernel == SPLIT and isinstance(lm.model.lm_head.product, SplitHeadProduct)
    assert all(c.kernel == PLAIN for c in lm.kernels if c.product == "block")
    assert lm.model.h[0].attn.c_attn.product is plain_block_product
    distinct_shapes = len(lm.kernels)
    assert measured.count("head") == 2  # at one row, then at HEAD_MAX_ROWS
    saved = json.loads((cache_dir / "kernels.json").read_text())
    assert len(next(iter(saved["cpus"].values()))) == distinct_shapes

    measured.clear()
    again = gpt2viz.load_model(str(ckpts.path("distilgpt2")))
    assert measured == [] and again.kernels == lm.kernels
    assert isinstance(again.model.lm_head.product, SplitHeadProduct)


def test_a_measurement_on_a_busy_machine_is_kept_marked_and_measured_again_once_quiet(
    monkeypatch, cache_dir, ckpts, two_threads
):
    share, quiet, measured = [0.9], [False], []
    monkeypatch.setattr(choice, "others_share", lambda before, after: share[0])
    monkeypatch.setattr(choice, "quiet_now", lambda: quiet[0])
    monkeypatch.setattr(choice, "_same_digits", lambda weight, bias: True)
    monkeypatch.setattr(choice, "_time_both", lambda layers, product, n_rows, *_: measured.append(product) or (100.0, 100.0))

    def saved():
        return next(iter(json.loads((cache_dir / "kernels.json").read_text())["cpus"].values()))

    lm = gpt2viz.load_model(str(ckpts.path("distilgpt2")))
    assert lm.kernels and all(c.busy for c in lm.kernels)
    assert all(entry["busy"] for entry in saved().values())
    first = len(measured)
    gpt2viz.load_model(str(ckpts.path("distilgpt2")))  # still busy: the busy numbers serve
    assert len(measured) == first
    share[0], quiet[0] = 0.0, True
    again = gpt2viz.load_model(str(ckpts.path("distilgpt2")))  # quiet: measured again, kept unmarked
    assert len(measured) == 2 * first
    assert not any(c.busy for c in again.kernels) and not any(entry["busy"] for entry in saved().values())


def test_a_cache_of_the_rule_before_is_decided_again(monkeypatch, cache_dir, ckpts, two_threads):
    """A cache written under version 1's rule (every block plain for its digits, whatever the plain
    product's own) is read as empty: the next load checks the digits and, where the split keeps
    them, times it; the file is rewritten in this version and the load after measures nothing."""
    _quiet(monkeypatch)
    measured = []
    monkeypatch.setattr(choice, "_same_digits", lambda weight, bias: False)
    monkeypatch.setattr(choice, "_plain_rows_hold", lambda weight, bias: False)
    monkeypatch.setattr(choice, "_time_both", lambda layers, product, n_rows, *_: measured.append(product) or (100.0, 50.0))
    gpt2viz.load_model(str(ckpts.path("distilgpt2")))  # writes this version's file, to age below
    saved = json.loads((cache_dir / "kernels.json").read_text())
    for entry in next(iter(saved["cpus"].values())).values():
        if entry["product"] == "block":
            entry.update(kernel=PLAIN, max_rows=0, reason="other digits", plain_us=None, split_us=None)
    (cache_dir / "kernels.json").write_text(json.dumps({**saved, "version": 1}))
    measured.clear()
    again = gpt2viz.load_model(str(ckpts.path("distilgpt2")))
    assert "block" in measured
    assert {(c.kernel, c.reason) for c in again.kernels if c.product == "block"} == {(SPLIT, "faster")}
    assert isinstance(again.model.h[0].mlp.c_fc.product, SplitBlockProduct)
    rewritten = json.loads((cache_dir / "kernels.json").read_text())
    assert rewritten["version"] == kernel_cache.CACHE_VERSION
    assert {entry["kernel"] for entry in next(iter(rewritten["cpus"].values())).values()} == {SPLIT}
    measured.clear()
    gpt2viz.load_model(str(ckpts.path("distilgpt2")))  # the split remembered, its digits checked again
    assert measured == []


@pytest.mark.kernels_once  # the choice's cache file and trace checks: the same on every CPU kind
@pytest.mark.parametrize("content", ["{not json", '{"version": %d, "cpus": {"k": {"x": {"bogus": 1}}}}' % kernel_cache.CACHE_VERSION,
                                     '[1, 2]', ""])
def test_a_damaged_cache_is_measured_again_and_replaced(monkeypatch, cache_dir, ckpts, two_threads, content):
    _quiet_and_timed_at_once(monkeypatch)
    cache_dir.mkdir(parents=True)
    (cache_dir / "kernels.json").write_text(content)
    lm = gpt2viz.load_model(str(ckpts.path("distilgpt2")))
    assert lm.kernels
    assert json.loads((cache_dir / "kernels.json").read_text())["version"] == kernel_cache.CACHE_VERSION
    assert [p.name for p in cache_dir.iterdir()] == ["kernels.json"]  # no temporary file left


@pytest.mark.kernels_once  # the choice's cache file and trace checks: the same on every CPU kind
def test_a_cache_that_cannot_be_written_leaves_loading_alone(monkeypatch, tmp_path, ckpts, two_threads):
    _quiet_and_timed_at_once(monkeypatch)
    (tmp_path / "file").write_text("in the way")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))  # a file where the directory goes
    lm = gpt2viz.load_model(str(ckpts.path("distilgpt2")))
    assert lm.kernels and (tmp_path / "file").read_text() == "in the way"


@pytest.mark.parametrize("setting, kernel", [("plain", PLAIN), ("split", SPLIT)])
def test_gpt2viz_kernels_sets_the_choice_without_measuring(monkeypatch, cache_dir, ckpts, two_threads, setting, kernel):
    monkeypatch.setenv(choice.MODE_ENV, setting)
    monkeypatch.setattr(choice, "_time_both", lambda *a: pytest.fail("measured although the choice was set"))
    lm = gpt2viz.load_model(str(ckpts.path("distilgpt2")))
    assert lm.model.lm_head.product.__class__ is (SplitHeadProduct if kernel == SPLIT else type(plain_head_product))
    assert not (cache_dir / "kernels.json").exists()


def test_other_formats_get_no_choice(ckpts):
    assert gpt2viz.load_model(str(ckpts.path("distilgpt2")), dtype="bfloat16").kernels == []


def test_decode_step_through_the_split_products_matches_transformers(monkeypatch, cache_dir, two_threads, count_bmm, ckpts):
    """A whole cached decode step with every product split that may be, against transformers."""
    monkeypatch.setenv(choice.MODE_ENV, "split")
    lm, hf = gpt2viz.load_model(str(ckpts.path("distilgpt2"))), ckpts.hf("distilgpt2")
    split_blocks = sum(
        1
        for block in lm.model.h
        for conv in (block.attn.c_attn, block.attn.c_proj, block.mlp.c_fc, block.mlp.c_proj)
        if isinstance(conv.product, SplitBlockProduct)
    )
    count_bmm.clear()  # the load's check of the split's digits
    ids = lm.tokenizer.encode(PROMPT)
    cache = lm.model.new_cache()
    lm.model(torch.tensor([ids[:-1]]), cache)
    assert BLOCK_MAX_ROWS < len(ids) - 1 <= HEAD_MAX_ROWS
    assert len(count_bmm) == 1  # prefill: the block products are plain, the LM head is split
    step, _ = lm.model(torch.tensor([ids[-1:]]), cache)
    assert len(count_bmm) == 1 + split_blocks + 1
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0, -1]
    assert float((step[0, 0] - ref).abs().max()) <= 1e-4


@pytest.mark.kernels_once  # the choice's cache file and trace checks: the same on every CPU kind
def test_a_choice_round_trips_through_the_cache_format():
    made = Choice("head", 768, 50257, SPLIT, HEAD_MAX_ROWS, "faster", 4120.7, 2010.3, busy=True, layers=("lm_head",))
    assert Choice.from_dict(json.loads(json.dumps(made.to_dict()))) == made


ENTRIES_THIS_VERSION_WOULD_NOT_WRITE = [
    {"max_rows": None}, {"max_rows": "x"}, {"max_rows": 64}, {"kernel": "fast"}, {"reason": "because"},
    {"plain_us": float("nan")}, {"plain_us": -1.0}, {"busy": "no"}, {"n_in": 0},
    {"kernel": "two-core split", "max_rows": 8, "reason": "slower"},  # a split the measurement refused
    {"kernel": "plain", "max_rows": 8},
]


@pytest.fixture(scope="module")
def measured_cache(tmp_path_factory, ckpts) -> str:
    """The kernel cache that one load of distilgpt2's shape writes, measured once for the module."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("kernels")))
        monkeypatch.delenv(choice.MODE_ENV, raising=False)
        _quiet(monkeypatch)
        before = torch.get_num_threads()
        torch.set_num_threads(2)
        try:
            gpt2viz.load_model(str(ckpts.path("distilgpt2")))
            return kernel_cache.cache_path().read_text()
        finally:
            torch.set_num_threads(before)


def _with_head_entry_edited(text: str, entry: dict) -> tuple[str, str, str]:
    """The cache's text with its LM head's entry edited; the CPU key and the entry's name."""
    data = json.loads(text)
    key = next(iter(data["cpus"]))
    name = next(n for n in data["cpus"][key] if n.startswith("head"))
    data["cpus"][key][name].update(entry)
    return json.dumps(data), key, name


@pytest.mark.kernels_once  # the choice's cache file and trace checks: the same on every CPU kind
@pytest.mark.parametrize("entry", ENTRIES_THIS_VERSION_WOULD_NOT_WRITE)
def test_a_cache_entry_this_version_would_not_write_is_left_out(cache_dir, measured_cache, entry):
    edited, key, name = _with_head_entry_edited(measured_cache, entry)
    cache_dir.mkdir(parents=True)
    (cache_dir / "kernels.json").write_text(edited)
    kept = choice._read_cache()[key]
    assert name not in kept
    assert set(kept) == set(json.loads(measured_cache)["cpus"][key]) - {name}  # the others are kept


@pytest.mark.kernels_once  # the choice's cache file and trace checks: the same on every CPU kind
def test_a_left_out_entry_is_measured_again_and_rewritten(monkeypatch, cache_dir, ckpts, two_threads, measured_cache):
    """A damaged or edited cache never reaches a product: a null max_rows once failed every pass."""
    _quiet(monkeypatch)
    edited, key, name = _with_head_entry_edited(measured_cache, {"max_rows": None})
    cache_dir.mkdir(parents=True)
    path = cache_dir / "kernels.json"
    path.write_text(edited)
    measured = []
    real = choice._time_both
    monkeypatch.setattr(choice, "_time_both", lambda *a: measured.append(a[1]) or real(*a))
    lm = gpt2viz.load_model(str(ckpts.path("distilgpt2")))
    assert measured and set(measured) == {"head"}  # only the damaged entry
    lm.model(torch.tensor([lm.tokenizer.encode(PROMPT)]))  # runs
    rewritten = json.loads(path.read_text())["cpus"][key][name]
    assert type(rewritten["max_rows"]) is int
    assert Choice.from_dict(rewritten).product == "head"  # what this version writes


@pytest.mark.kernels_once  # the choice's cache file and trace checks: the same on every CPU kind
@pytest.mark.parametrize("content", ["[" * 200_000, '{"version": %d, "cpus": [1]}' % kernel_cache.CACHE_VERSION,
                                     '{"version": %d, "cpus": {"k": 3}}' % kernel_cache.CACHE_VERSION])
def test_a_cache_file_of_any_shape_is_measured_again(monkeypatch, cache_dir, ckpts, two_threads, content):
    _quiet_and_timed_at_once(monkeypatch)
    cache_dir.mkdir(parents=True)
    (cache_dir / "kernels.json").write_text(content)
    assert gpt2viz.load_model(str(ckpts.path("distilgpt2"))).kernels


@pytest.mark.kernels_once  # the choice's cache file and trace checks: the same on every CPU kind
def test_a_relative_cache_home_is_ignored_and_no_home_is_no_error(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert kernel_cache.cache_path() == tmp_path / ".cache" / "gpt2viz" / "kernels.json"
    monkeypatch.setattr(kernel_cache.Path, "home", lambda: (_ for _ in ()).throw(RuntimeError("no home")))
    assert choice._read_cache() == {}
    choice._write_cache({"k": {}})  # nothing to write to, no error


def test_a_split_chosen_at_two_threads_is_plain_at_one(count_bmm):
    conv = _conv(64, 96)
    block = SplitBlockProduct(max_rows=8, threads=2)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        block(torch.randn(1, 64), conv.weight, conv.bias)
    finally:
        torch.set_num_threads(before)
    assert count_bmm == []


@pytest.mark.kernels_once  # the choice's cache file and trace checks: the same on every CPU kind
@pytest.mark.parametrize("edit", [
    {"kernel": "two-core split", "reason": "slower", "max_rows": 8},
    {"kernel": "plain", "reason": "faster", "max_rows": 0},
    {"kernel": "plain", "reason": "slower", "max_rows": 4},
    {"kernel": "two-core split", "reason": "faster", "max_rows": 0},
    {"kernel": "two-core partial sums", "reason": "set by GPT2VIZ_KERNELS", "max_rows": 8},
    {"kernel": "two-core partial sums", "reason": "faster", "max_rows": 0},
])
def test_a_trace_whose_kernel_disagrees_with_its_reason_is_refused(tiny_lm, edit):
    from gpt2viz.trace import trace_prompt
    from gpt2viz.trace.checks import RuleBroken, check_document

    doc = trace_prompt(tiny_lm, "Hello").to_dict()
    check_document(doc)
    doc["model"]["kernels"]["products"][0].update(edit)
    with pytest.raises(RuleBroken, match=r"model\.kernels\.products\[0\]\.kernel is .* do not agree with") as refused:
        check_document(doc)
    assert refused.value.rule == "same"
