"""The LM head of a float32 model whose token table holds float16 numbers only (a checkpoint stored
in float16, as the bundled model is), multiplied by fbgemm's float16 copy of the table
(gpt2viz/kernels/fbgemm_float16.py, `held_head`) where that is faster on this CPU
(gpt2viz/kernels/choice.py): the same terms, added in another order, half the bytes read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from helpers import PROMPT
from safetensors.torch import load_file, save_file

import gpt2viz
from gpt2viz.kernels import choice, fbgemm_float16
from gpt2viz.kernels.choice import FLOAT16_HELD, HELD_NAME, PLAIN, SPLIT
from gpt2viz.kernels.fbgemm_float16 import HeldHeadProduct, held_head
from gpt2viz.kernels.split import HEAD_MAX_ROWS
from gpt2viz.model.layers import plain_head_product
from gpt2viz.trace import dumps, trace_prompt, validate

TINY = Path(gpt2viz.__file__).resolve().parent.parent / "assets" / "tiny"

pytestmark = pytest.mark.skipif(not fbgemm_float16.available(), reason="this torch build has no fbgemm")


def float16_table(vocab: int, width: int, seed: int = 0) -> torch.Tensor:
    """A float32 table of float16 numbers, as a float16 checkpoint loads."""
    return (torch.randn(vocab, width, generator=torch.Generator().manual_seed(seed)) * 0.1).half().float()


def held_fastest(monkeypatch) -> list[tuple[str, str]]:
    """Timings in which the head's float16 copy wins and every block stays plain; what was timed."""
    timed: list[tuple[str, str]] = []
    monkeypatch.setattr(choice, "others_share", lambda before, after: 0.0)  # measured on a quiet machine
    monkeypatch.setattr(choice, "quiet_now", lambda: True)

    def fake(layers, product, n_rows, kernel=SPLIT, held=None):
        timed.append((product, kernel))
        if product == "block":
            return 100.0, 100.0
        return (100.0, 30.0) if kernel == FLOAT16_HELD else (100.0, 60.0)

    monkeypatch.setattr(choice, "_time_both", fake)
    return timed


def test_the_copy_is_made_only_of_a_table_of_float16_numbers_within_the_memory_bound():
    table = float16_table(1000, 112)
    assert held_head(table) is not None
    finer = table.clone()
    finer[3, 5] = 0.1  # a float32 number between two float16 numbers
    assert held_head(finer) is None
    beyond = table.clone()
    beyond[999, 0] = 70000.0  # past float16's largest, 65,504
    assert held_head(beyond) is None
    # Many words of few inputs: the pack pads 8 inputs to 512 rows, 64 times the table's memory.
    assert held_head(float16_table(200_000, 8)) is None
    assert held_head(table.double()) is None


@pytest.mark.parametrize("n_rows", [1, 5, HEAD_MAX_ROWS])
def test_the_copy_gives_the_plain_products_terms_added_in_another_order(n_rows):
    table = float16_table(5000, 112)
    rows = torch.randn(n_rows, 112, generator=torch.Generator().manual_seed(n_rows))
    got = held_head(table)(rows)
    exact = rows.double() @ table.double().t()
    # Each term exact (the weight widened, the input as it is), then 112 float32 additions: within
    # 112 units of float32's rounding of the terms' magnitudes, as the plain product. Inputs rounded
    # to float16 on the way would be off by up to 2^-11 of them, 2^13 times as much.
    bound = 112 * 2.0**-24 * (rows.double().abs() @ table.double().abs().t())
    assert ((got.double() - exact).abs() <= bound).all()
    plain = plain_head_product(rows, table)
    assert ((plain.double() - exact).abs() <= bound).all() and got.shape == plain.shape


def test_the_copy_runs_up_to_its_rows_and_never_for_a_table_written_to_since():
    table = float16_table(3000, 112)
    product = HeldHeadProduct(held_head(table), table, 4)
    used = []
    pack = product.pack
    product.pack = lambda rows: used.append(rows.size(0)) or pack(rows)
    rows = torch.randn(5, 112)
    product(rows[:4], table)
    assert used == [4]
    assert torch.equal(product(rows, table), plain_head_product(rows, table)) and used == [4]
    with torch.no_grad():
        table[7].mul_(2.0)  # an edit in place: the copy is out of date
    assert torch.equal(product(rows[:1], table), plain_head_product(rows[:1], table)) and used == [4]
    other = float16_table(3000, 112, seed=1)
    fresh = HeldHeadProduct(held_head(other), other, 4)
    assert torch.equal(fresh(rows[:1], other.clone()), plain_head_product(rows[:1], other))  # another tensor


def test_the_bundled_model_gets_the_copy_where_it_is_faster_and_computes_what_transformers_does(
    monkeypatch, cache_dir, two_threads
):
    from transformers import GPT2LMHeadModel

    monkeypatch.setenv(choice.MODE_ENV, "plain")
    plain = gpt2viz.load_model(str(TINY))  # no copy, nothing remembered
    monkeypatch.delenv(choice.MODE_ENV)
    timed = held_fastest(monkeypatch)
    lm = gpt2viz.load_model(str(TINY))
    head = next(c for c in lm.kernels if c.product == "head")
    assert (head.kernel, head.reason, head.max_rows, head.held_us) == (FLOAT16_HELD, "faster", HEAD_MAX_ROWS, 30.0)
    assert ("head", FLOAT16_HELD) in timed and ("head", SPLIT) in timed
    product = lm.model.lm_head.product
    assert isinstance(product, HeldHeadProduct)

    # A decode step reads the copy's rows (not its padding) instead of the float32 table.
    table_bytes = lm.model.wte.weight.numel() * 4
    pack = product.pack
    assert lm.weight_bytes == plain.weight_bytes + pack.bytes
    assert lm.step_weight_bytes == plain.step_weight_bytes - table_bytes + pack.bytes - pack.unread_bytes
    assert lm.step_weight_bytes < plain.step_weight_bytes

    hf = GPT2LMHeadModel.from_pretrained(str(TINY), dtype=torch.float32).eval()
    ids = lm.tokenizer.encode(PROMPT)
    assert len(ids) <= HEAD_MAX_ROWS  # every position through the copy
    with torch.no_grad():
        ref = hf(input_ids=torch.tensor([ids])).logits
    ours, _ = lm.model(torch.tensor([ids]))
    assert (ours - ref).abs().max().item() < 1e-4
    assert lm.generate(PROMPT, 40).token_ids == lm.generate(PROMPT, 40, use_cache=False).token_ids

    # The trace says which kernel multiplied, and a replay accepts it.
    record = json.loads(dumps(trace_prompt(lm, PROMPT)))
    (held_record,) = [p for p in record["model"]["kernels"]["products"] if p["product"] == "head"]
    assert (held_record["kernel"], held_record["held_us"]) == (FLOAT16_HELD, 30.0)
    validate(record)

    timed.clear()
    again = gpt2viz.load_model(str(TINY))  # remembered: nothing timed, the copy made again
    assert timed == [] and isinstance(again.model.lm_head.product, HeldHeadProduct)
    saved = json.loads((cache_dir / "kernels.json").read_text())
    assert any(name == "head 112x50257" + HELD_NAME for entries in saved["cpus"].values() for name in entries)


def test_a_float32_table_of_the_same_shape_is_decided_on_its_own(monkeypatch, cache_dir, two_threads, tmp_path):
    """A choice remembered for a table of float16 numbers is not applied to a float32 table of the
    same shape (its copy could not hold it): that shape is measured, without the copy."""
    timed = held_fastest(monkeypatch)
    gpt2viz.load_model(str(TINY))
    checkpoint = tmp_path / "finer"
    shutil.copytree(TINY, checkpoint)
    tensors = {name: t.float() for name, t in load_file(str(checkpoint / "model.safetensors")).items()}
    wte = next(name for name in tensors if name.endswith("wte.weight"))
    tensors[wte] = tensors[wte] * (1 + 2.0**-20)  # between float16 numbers, float32 ones still
    save_file(tensors, str(checkpoint / "model.safetensors"), metadata={"format": "pt"})
    timed.clear()
    lm = gpt2viz.load_model(str(checkpoint))
    head = next(c for c in lm.kernels if c.product == "head")
    assert head.kernel in (PLAIN, SPLIT) and head.held_us is None
    assert ("head", FLOAT16_HELD) not in timed and ("head", SPLIT) in timed
    assert not isinstance(lm.model.lm_head.product, HeldHeadProduct)
