"""Which kernel multiplies by each weight of a bfloat16, float16 or int8 model (gpt2viz/kernels/
formats.py): the fastest, measured on this CPU, of those that hold the weight exactly and give each
row the same digits; remembered per machine; recorded in the trace. The timings are replaced where a
test needs one order or the other, so that every branch runs whatever this machine is."""

from __future__ import annotations

import json

import pytest
import torch

import gpt2viz
from gpt2viz.kernels import cache as kernel_cache
from gpt2viz.kernels import formats, packed
from gpt2viz.kernels.fbgemm_float16 import Float16Linear
from gpt2viz.kernels.half import HalfLinear, HalfLMHead
from gpt2viz.trace import trace_prompt
from gpt2viz.trace.checks import check_document

CLASS = {formats.FBGEMM: Float16Linear, formats.ONEDNN: packed.PackedLinear, formats.PLAIN16: HalfLinear}
BOTH = pytest.mark.skipif(
    not (packed.available(torch.bfloat16) and formats.fbgemm_float16.available()),
    reason="this CPU has not both fbgemm's product and oneDNN's bfloat16 kernels",
)


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Each test measures into a cache of its own, with the choice measured (not set)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("GPT2VIZ_KERNELS", raising=False)


def timings(monkeypatch, **us: float) -> list[int]:
    """Replaces the one-row timing with fixed numbers (fbgemm=..., onednn=...); returns a list that
    counts the shapes timed."""
    calls: list[int] = []
    names = {"fbgemm": formats.FBGEMM, "onednn": formats.ONEDNN}

    def fixed(layers, n_in, dtype):
        calls.append(n_in)
        return {name: us[key] for key, name in names.items() if name in layers}

    monkeypatch.setattr(formats, "_time_one_row", fixed)
    return calls


def block_kernels(lm) -> set[type]:
    return {type(getattr(parent, name)) for parent, name in packed.product_sites(lm.model)}


def recorded_kernel(lm, site) -> str:
    """The kernel the record names for one block product: its own entry where the shape's kernel
    could not hold this weight ("h.0.mlp.c_proj"), else its shape's ("mlp.c_proj")."""
    named = {layer: c.kernel for c in lm.format_kernels for layer in c.layers}
    return named.get(formats._path(lm.model, site), named[formats._role(site)])


def weights_of_their_own(lm) -> list[formats.FormatChoice]:
    """The records of weights that run another kernel than their shape's: named whole."""
    return [c for c in lm.format_kernels if c.layers[0].startswith("h.")]


@BOTH
def test_the_fastest_kernel_is_chosen_for_every_product(ckpts, monkeypatch):
    """distilgpt2's four block shapes are each timed once (and the LM head); every product then
    runs the faster kernel, and cached decoding still gives naive decoding's ids."""
    calls = timings(monkeypatch, fbgemm=50.0, onednn=20.0)
    lm = gpt2viz.load_model(str(ckpts.path("distilgpt2")), dtype="bfloat16")
    assert sorted(calls) == [768, 768, 768, 768, 3072]
    assert isinstance(lm.model.lm_head, packed.PackedLMHead)
    # oneDNN's digits are checked again on each real weight: one whose rows disagree (seen on an AMD
    # EPYC for half of the MLPs' c_proj) runs fbgemm's product, recorded under its own name.
    for site in packed.product_sites(lm.model):
        own = recorded_kernel(lm, site) == formats.FBGEMM
        assert isinstance(getattr(*site), Float16Linear if own else packed.PackedLinear)
    own_records = weights_of_their_own(lm)
    assert all((c.kernel, c.reason) == (formats.FBGEMM, "only kernel") for c in own_records)
    blocks = [c for c in lm.format_kernels if c.product == "block" and c not in own_records]
    assert [c.layers for c in blocks] == [("attn.c_attn",), ("attn.c_proj",), ("mlp.c_fc",), ("mlp.c_proj",)]
    assert all(c.kernel == formats.ONEDNN and c.reason == "fastest" for c in blocks)
    assert blocks[0].timed_us == {formats.FBGEMM: 50.0, formats.ONEDNN: 20.0}
    assert lm.generate("Hello", 4).token_ids == lm.generate("Hello", 4, use_cache=False).token_ids


@BOTH
def test_a_block_shapes_kernels_are_timed_on_copies_of_its_weight_read_in_turn(monkeypatch):
    """One weight called in a loop stays in the caches, where oneDNN's product was the faster and
    fbgemm's the faster in a real step (benchmarks/RESULTS.md, session 24): each kernel is timed on
    copies of the weight filling COPIES_BYTES, read in turn; the LM head's sample once."""
    seen = {}

    def record(layers, n_in, dtype):
        seen[n_in] = layers
        return {name: 10.0 for name in layers}

    monkeypatch.setattr(formats, "_time_one_row", record)
    monkeypatch.setattr(formats, "COPIES_BYTES", 4 * 512 * 64 * 2)  # four copies' worth in 16 bits
    formats._measure("block", *formats._random_weight(512, 64), torch.bfloat16, "measure")
    row = torch.randn(1, 512).bfloat16()
    for kernel, layers in seen[512].items():
        assert len(layers) == 4
        outputs = [layer(row) for layer in layers]  # distinct weights, not one layer four times
        assert all(not torch.equal(outputs[0], other) for other in outputs[1:]), kernel
    wte_t = formats._random_weight(512, 300)[0]  # the head's weight as [in, out]: wte^T
    formats._measure("head", wte_t, torch.zeros(300), torch.bfloat16, "measure")
    assert len(seen[512]) == 2 and all(len(layers) == 1 for layers in seen[512].values())


@BOTH
@pytest.mark.parametrize("fbgemm, onednn, chosen", [(50.0, 20.0, formats.ONEDNN), (20.0, 50.0, formats.FBGEMM),
                                                    (20.0, 19.5, formats.FBGEMM)])
def test_a_kernel_replaces_the_first_only_below_95_percent_of_its_time(monkeypatch, fbgemm, onednn, chosen):
    timings(monkeypatch, fbgemm=fbgemm, onednn=onednn)
    (kernel, reason, timed), built = formats._measure("block", *formats._random_weight(512, 64), torch.bfloat16, "measure")
    assert (kernel, reason) == (chosen, "fastest") and set(built) == {formats.FBGEMM, formats.ONEDNN}


@BOTH
def test_the_choice_is_remembered_and_measured_again_when_it_was_busy(ckpts, monkeypatch):
    calls = timings(monkeypatch, fbgemm=50.0, onednn=20.0)
    gpt2viz.load_model(str(ckpts.path("distilgpt2")), dtype="bfloat16")
    assert len(calls) == 5
    saved = json.loads(kernel_cache.cache_path().read_text())
    entries = next(iter(saved["formats"].values()))
    assert sorted(entries) == ["bfloat16 block 3072x768", "bfloat16 block 768x2304", "bfloat16 block 768x3072",
                               "bfloat16 block 768x768", "bfloat16 head 768x50257"]
    # The next load measures only a choice timed while the machine was busy (once it is quiet) and
    # a damaged entry; the others are read back as they were, even were fbgemm now faster (the
    # head stays oneDNN's); the float32 choices in the same file are kept.
    for shape, fields in entries.items():
        fields["busy"] = shape.endswith("768x768")
    entries["bfloat16 block 768x3072"]["kernel"] = "magic"
    saved["cpus"] = {"some other cpu": {}}
    kernel_cache.cache_path().write_text(json.dumps(saved))
    monkeypatch.setattr(formats, "quiet_now", lambda: True)
    recount = timings(monkeypatch, fbgemm=20.0, onednn=50.0)
    mixed = gpt2viz.load_model(str(ckpts.path("distilgpt2")), dtype="bfloat16")
    assert sorted(recount) == [768, 768]  # 768x768 (busy) and 768x3072 (damaged)
    kinds = {c.layers[0]: c.kernel for c in mixed.format_kernels}
    assert kinds["attn.c_proj"] == kinds["mlp.c_fc"] == formats.FBGEMM
    assert kinds["attn.c_attn"] == kinds["mlp.c_proj"] == kinds["lm_head"] == formats.ONEDNN
    rewritten = json.loads(kernel_cache.cache_path().read_text())
    assert rewritten["cpus"] == {"some other cpu": {}}
    assert next(iter(rewritten["formats"].values()))["bfloat16 block 768x3072"]["kernel"] == formats.FBGEMM


@BOTH
def test_a_kernel_whose_rows_disagree_is_never_chosen(ckpts, monkeypatch):
    """Where oneDNN's product gave a row other digits alone than among others, fbgemm is the only
    kernel left, however fast oneDNN's would be (the LM head's too)."""
    timings(monkeypatch, fbgemm=50.0, onednn=20.0)
    monkeypatch.setattr(formats, "_rows_exact", lambda layer, n_in, dtype: False)
    lm = gpt2viz.load_model(str(ckpts.path("distilgpt2")), dtype="bfloat16")
    assert block_kernels(lm) == {Float16Linear} and isinstance(lm.model.lm_head, Float16Linear)
    assert {c.reason for c in lm.format_kernels if c.product == "block"} == {"only kernel"}


def test_with_no_exact_kernel_the_plain_product_multiplies(tiny_dir, monkeypatch):
    """The bundled model's 112 inputs are too few for fbgemm's pack; without oneDNN's row-exact
    kernel, the plain 16-bit product is all there is, and the record says so."""
    monkeypatch.setattr(formats, "_rows_exact", lambda layer, n_in, dtype: False)
    lm = gpt2viz.load_model(str(tiny_dir), dtype="float16")
    records = {c.layers[0]: c for c in lm.format_kernels}
    assert isinstance(lm.model.h[0].attn.c_attn, HalfLinear)
    assert (records["attn.c_attn"].kernel, records["attn.c_attn"].reason) == (formats.PLAIN16, "only kernel")


def test_the_lm_head_gets_the_fastest_exact_kernel_too(ckpts, monkeypatch):
    """The head's kernels are timed on rows of wte; fbgemm's copy multiplies where it is faster,
    counted in the model's bytes and not read whole by a step (a lookup reads one row of wte)."""
    if not formats.fbgemm_float16.available():
        pytest.skip("no fbgemm float16 product on this CPU")
    monkeypatch.setattr(formats, "_time_one_row", lambda layers, n_in, dtype: {
        name: (10.0 if name == formats.FBGEMM else 90.0) for name in layers})
    lm = gpt2viz.load_model(str(ckpts.path("distilgpt2")), dtype="float16")
    head = lm.model.lm_head
    assert isinstance(head, Float16Linear)
    assert lm.format_kernels[-1].layers == ("lm_head",) and lm.format_kernels[-1].kernel == formats.FBGEMM
    wte = lm.model.wte.weight
    assert lm.weight_bytes - lm.step_weight_bytes >= wte.numel() * 2 + head.unread_bytes
    ids = torch.tensor([lm.tokenizer.encode("Hello there")])
    full, _ = lm.model(ids)
    cache = lm.model.new_cache()
    lm.model(ids[:, :-1], cache)
    step, _ = lm.model(ids[:, -1:], cache)
    assert torch.equal(step[0, -1], full[0, -1])  # the cached step's logits are the full pass's


def test_the_real_measurement_is_what_the_model_runs_and_the_trace_records(ckpts):
    """Unreplaced: whatever this CPU measured, the chosen kernel is the fastest of those timed (or
    the first, within 5 %), every product of the shape runs it, and the trace carries the choices."""
    lm = gpt2viz.load_model(str(ckpts.path("distilgpt2")), dtype="bfloat16")
    for c in lm.format_kernels:
        if c.reason == "fastest":
            first = next(iter(c.timed_us))
            assert c.timed_us[c.kernel] == min(c.timed_us.values()) or c.kernel == first
    for site in packed.product_sites(lm.model):
        assert isinstance(getattr(*site), CLASS[recorded_kernel(lm, site)])
    head = {formats.ONEDNN: packed.PackedLMHead, formats.FBGEMM: Float16Linear, formats.PLAIN16: HalfLMHead}
    [head_kernel] = [c.kernel for c in lm.format_kernels if c.layers == ("lm_head",)]
    assert isinstance(lm.model.lm_head, head[head_kernel])
    doc = trace_prompt(lm, "Hello").to_dict()
    check_document(doc)
    assert doc["model"]["kernels"]["formats"] == [c.to_dict() for c in lm.format_kernels]


def test_int8_records_its_input_width(tiny_dir):
    lm = gpt2viz.load_model(str(tiny_dir), dtype="int8")
    reduced = formats.int8_inputs_reduced()
    assert {(c.kernel, c.reason) for c in lm.format_kernels} == {
        (formats.INT8, "7-bit inputs" if reduced else "8-bit inputs")
    }
    assert [c.layers for c in lm.format_kernels][-1] == ("lm_head",)
