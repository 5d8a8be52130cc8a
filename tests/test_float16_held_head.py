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
    same shape (its copy could not hold it), nor is such a choice under the float32 table's own
    name (an edited cache): that shape is measured, without the copy."""
    timed = held_fastest(monkeypatch)
    gpt2viz.load_model(str(TINY))
    # And an edited cache that gives the float32 table's shape the copy is not believed.
    path = cache_dir / "kernels.json"
    saved = json.loads(path.read_text())
    for entries in saved["cpus"].values():
        if "head 112x50257" + HELD_NAME in entries:
            entries["head 112x50257"] = entries["head 112x50257" + HELD_NAME]
    path.write_text(json.dumps(saved))
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


def test_a_model_loaded_in_inference_mode_makes_no_copy_and_runs(monkeypatch, cache_dir, two_threads):
    """A table made under torch.inference_mode has no version counter to notice an edit by."""
    held_fastest(monkeypatch)
    with torch.inference_mode():
        lm = gpt2viz.load_model(str(TINY))
        ids = lm.generate(PROMPT, 5).token_ids
    assert len(ids) == 5 and not isinstance(lm.model.lm_head.product, HeldHeadProduct)


def test_gradients_go_through_the_plain_head_and_nothing_is_copied_where_the_choice_is_remembered(
    monkeypatch, cache_dir, two_threads
):
    timed = held_fastest(monkeypatch)
    lm = gpt2viz.load_model(str(TINY))
    assert isinstance(lm.model.lm_head.product, HeldHeadProduct)
    logits, cache = lm.run_with_cache(PROMPT, "blocks.1.attn.hook_z", grad=True)
    (grad,) = torch.autograd.grad(logits[0, -1].max(), cache["blocks.1.attn.hook_z"])
    assert float(grad.abs().sum()) > 0  # fbgemm's product would have cut the graph

    # A remembered split: the float16 numbers are checked (for the name), no copy is made.
    path = cache_dir / "kernels.json"
    saved = json.loads(path.read_text())
    for entries in saved["cpus"].values():
        entry = entries.get("head 112x50257" + HELD_NAME)
        if entry:
            entry.update(kernel=SPLIT, reason="faster")
    path.write_text(json.dumps(saved))
    made = []
    monkeypatch.setattr(choice, "held_head", lambda wte: made.append(wte) or held_head(wte))
    timed.clear()
    again = gpt2viz.load_model(str(TINY))
    assert timed == [] and made == [] and not isinstance(again.model.lm_head.product, HeldHeadProduct)


def test_the_model_files_stage_names_the_copy_in_both_languages():
    """A trace whose LM head multiplied by the float16 copy (its kernel's numbers fixed here: which
    kernel wins is the machine's) says so, with its timing and the memory it holds, in English and
    in Chinese, with the same numbers."""
    import re
    from collections import Counter

    from zh_words import english_words, run_words

    from gpt2viz.i18n import set_language
    from gpt2viz.trace import Trace
    from gpt2viz.tui.narration import narrate
    from gpt2viz.tui.stages import Stage

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(choice.MODE_ENV, "split")
        doc = trace_prompt(gpt2viz.load_model(str(TINY)), "Hello").to_dict()
    for product in doc["model"]["kernels"]["products"]:
        if product["product"] == "head":
            product.update(kernel=FLOAT16_HELD, reason="faster", max_rows=HEAD_MAX_ROWS, plain_us=631.0,
                           split_us=455.0, held_us=267.0)
    doc["model"]["weight_bytes"] = 6_721_568 * 4 + 51_679_556  # its parameters, and the copy
    doc["model"]["source"]["path"] = "tiny"  # the checkout's directory is no word of either language
    trace = Trace.from_dict(doc)
    english = narrate(trace, Stage("model_files"), generate_key="g").text
    assert ("• lm_head (112 × 50,257): every number of the token table is a float16 number (as in a checkpoint stored "
            "in float16), so a float16 copy holds it exactly and fbgemm multiplies by that, adding in float32: 267 µs "
            "against 631 µs as one product (one row).") in english
    # The opening names the copy among the kernels it was chosen from (and only where it was a candidate).
    assert ("one product as the BLAS computes it, the weight's two halves on one core each, or, for the LM head, "
            "whose token table holds float16 numbers only, fbgemm's product by a float16 copy of the table.") in english
    assert "That is 51,679,556 B (49.3 MiB) more than its 6,721,568 parameters take in float32" in english
    assert "the LM head multiplies by a float16 copy of the table" in english
    # Why the copy takes more room than the float32 table, yet a step reads half its bytes.
    assert ("padded past a row's 112 numbers, so it takes more room than the float32 table itself: the copy is "
            "the 51,679,556 B (49.3 MiB) above, the table 22,515,136 B (21.5 MiB). A step reads only the numbers "
            "in it, two bytes each (11,257,568 B (10.7 MiB))") in english
    set_language("zh")  # tests/conftest.py sets English again after each test
    chinese = narrate(trace, Stage("model_files"), generate_key="g").text
    assert "fbgemm 乘这个副本" in chinese and "267 微秒" in chinese and "LM head 乘的是词嵌入表的 float16 副本" in chinese
    assert "副本就是上面多出的 51,679,556 B (49.3 MiB)，词嵌入表是 22,515,136 B (21.5 MiB)。" in chinese
    assert "或者（LM head 的词嵌入表里只有 float16 数）让 fbgemm 乘词嵌入表的 float16 副本" in chinese
    assert english_words(chinese, run_words(trace)) == []
    number = re.compile(r"\d+(?:[.,]\d+)*")
    assert Counter(number.findall(chinese)) == Counter(number.findall(english))
