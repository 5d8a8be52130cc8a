"""float16 and bfloat16 products through fbgemm (gpt2viz/kernels/fbgemm_float16.py): float16
weights (bfloat16's held exactly, scaled by a power of two), float32 sums, one rounding; GPT-2's
widths use them, weights they do not suit stay on HalfLinear (float16) or oneDNN's pack (bfloat16)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import gpt2viz
from gpt2viz.kernels import fbgemm_float16 as F16, formats, packed
from gpt2viz.kernels.half import HalfLinear

PROMPT = "The meaning of life is, as everyone knows, not 42."
pytestmark = pytest.mark.skipif(not F16.available(), reason="no fbgemm float16 product in this torch build or CPU")


def test_a_product_is_float16_weights_added_up_in_float32():
    """Weights rounded to float16 as torch rounds them, the bias float16's, float32 sums, one
    rounding to float16 at the end; each row's result does not depend on the rows beside it; and
    HalfLinear (the fallback) gives the same numbers within that rounding."""
    torch.manual_seed(0)
    edges = torch.randn(8, 4)
    edges[0] = torch.tensor([1e-7, 3e-6, 65504.0, -65519.0])  # subnormals, the largest, one rounding to it
    unpacked, _ = torch.ops.quantized.linear_unpack_fp16(F16.Float16Linear(edges, torch.zeros(4)).packed)
    assert torch.equal(unpacked, edges.t().to(torch.float16).float())
    weight = torch.randn(768, 3072) * 0.05  # [in, out]
    bias = torch.randn(3072)
    layer = F16.Float16Linear(weight, bias)
    unpacked, unpacked_bias = torch.ops.quantized.linear_unpack_fp16(layer.packed)
    assert torch.equal(unpacked, weight.t().to(torch.float16).float())
    assert torch.equal(unpacked_bias, bias.to(torch.float16).float())
    assert torch.equal(layer(torch.zeros(1, 768, dtype=torch.float16))[0], bias.to(torch.float16))
    x = (torch.randn(16, 768) * 3).to(torch.float16)
    got = layer(x)
    assert got.dtype == torch.float16
    exact = x.double() @ weight.to(torch.float16).double() + bias.to(torch.float16).double()
    # Within one float16 rounding of the exact sum (half a unit in the last place), plus the
    # float32 additions' own error, far smaller.
    assert torch.all((got.double() - exact).abs() <= exact.abs() * 2**-11 + 1e-3)
    assert torch.equal(torch.cat([layer(row) for row in x.split(1)]), got)
    assert torch.equal(layer(x.view(2, 8, 768)).view(16, 3072), got)
    fallback = HalfLinear(weight, bias, torch.float16)(x)
    assert torch.allclose(fallback.double(), got.double(), rtol=2**-10, atol=1e-2)


def bundled_with_block_0(directory: Path, edit) -> Path:
    """A copy of the bundled model in `directory` whose block 0 MLP c_proj (448 inputs: fbgemm's,
    where it holds the values), stored float32, was changed by `edit`."""
    bundled = gpt2viz.load_model("tiny").source.path
    tensors = load_file(str(bundled / "model.safetensors"))
    name = "transformer.h.0.mlp.c_proj.weight"
    tensors[name] = tensors[name].float()
    edit(tensors[name])
    for f in bundled.iterdir():
        if f.name != "model.safetensors":
            (directory / f.name).write_bytes(f.read_bytes())
    save_file(tensors, str(directory / "model.safetensors"))
    return directory


def scale_of(weight: torch.Tensor) -> int | None:
    """The power of two fbgemm_float16.bfloat16_scaled finds for `weight` (None: none holds it)."""
    held = F16.bfloat16_scaled(weight)
    return None if held is None else held[0]


def test_a_bfloat16_product_holds_the_bfloat16_weights_exactly():
    """The pack holds each weight rounded to bfloat16 times 2^k, exactly; the input is scaled back
    by 2^-k; so the result is the bfloat16 weights times the bfloat16 input summed in float32, one
    rounding to bfloat16 at the end, row by row."""
    torch.manual_seed(0)
    weight = torch.randn(768, 3072) * 0.05
    weight[0, :4] = torch.tensor([3e-9, -1.7e-7, 2.5, 0.0])  # tiny values keep all their bits; a zero
    bias = torch.randn(3072)
    k = scale_of(weight)
    assert k == 15 - 1  # the largest value, 2.5, just under 2^16 once scaled
    layer = F16.layer_for(weight, bias, torch.bfloat16)
    unpacked, unpacked_bias = torch.ops.quantized.linear_unpack_fp16(layer.packed)
    assert torch.equal(unpacked * 2.0**-k, weight.t().to(torch.bfloat16).float())
    assert torch.equal(unpacked_bias, bias.to(torch.bfloat16).float())
    x = (torch.randn(16, 768) * 3).to(torch.bfloat16)
    got = layer(x)
    assert got.dtype == torch.bfloat16
    exact = x.double() @ weight.to(torch.bfloat16).double() + bias.to(torch.bfloat16).double()
    assert torch.all((got.double() - exact).abs() <= exact.abs() * 2**-8 + 1e-3)  # one bfloat16 rounding
    assert torch.equal(torch.cat([layer(row) for row in x.split(1)]), got)
    # oneDNN's bfloat16 kernel, the fallback, adds the same terms in another order.
    if packed.available(torch.bfloat16):
        onednn = packed.PackedLinear(weight, bias, 1, torch.bfloat16)(x)
        assert torch.allclose(onednn.double(), got.double(), rtol=2**-7, atol=1e-2)


@pytest.mark.parametrize("edit", ["nan", "inf", "spread"])
def test_bfloat16_weights_no_scale_holds_exactly_stay_on_onednn(edit):
    weight = torch.randn(768, 3072) * 0.05
    assert F16.layer_for(weight, torch.zeros(3072), torch.bfloat16) is not None
    # NaN and inf have no scale; 1e-9 beside 1e4 lies 2^43 below it: float16 cannot hold both.
    weight[5, 9], weight[6, 9] = {"nan": (float("nan"), 0.0), "inf": (float("inf"), 0.0), "spread": (1e4, 1.1e-9)}[edit]
    assert scale_of(weight) is None and F16.layer_for(weight, torch.zeros(3072), torch.bfloat16) is None
    # No scale below 2^0 (2^-k times an input could overflow) or above 2^126 (2^k would): oneDNN's.
    assert scale_of(torch.tensor([[1e6, -3.0]])) is None
    assert scale_of(torch.full((4, 4), 2.0**-120)) is None
    assert scale_of(torch.full((4, 4), 2.0**-100)) == 115


@pytest.mark.skipif(not packed.available(torch.bfloat16), reason="no oneDNN bfloat16 kernels on this CPU")
def test_a_bfloat16_matrix_no_scale_holds_loads_onto_onednn(tmp_path, monkeypatch):
    """In a bfloat16 model, the one matrix float16 cannot hold exactly at any scale (1e4 beside
    1.1e-9) is multiplied by oneDNN's pack; the same product in the next block, by fbgemm (the
    kernel its shape takes when nothing is measured: kernels/formats.py), and the load's choices
    name the one that had to differ."""
    monkeypatch.setenv("GPT2VIZ_KERNELS", "plain")

    def edit(c_proj: torch.Tensor) -> None:
        c_proj[0, 0], c_proj[0, 1] = 1e4, 1.1e-9

    lm = gpt2viz.load_model(str(bundled_with_block_0(tmp_path, edit)), dtype="bfloat16")
    assert isinstance(lm.model.h[0].mlp.c_proj, packed.PackedLinear)
    assert isinstance(lm.model.h[1].mlp.c_proj, F16.Float16Linear)
    assert lm.generate("Hello", 3).token_ids == lm.generate("Hello", 3, use_cache=False).token_ids
    by_layer = {layer: c for c in lm.format_kernels for layer in c.layers}
    assert (by_layer["h.0.mlp.c_proj"].kernel, by_layer["h.0.mlp.c_proj"].reason) == (formats.ONEDNN, "only kernel")
    assert (by_layer["mlp.c_proj"].kernel, by_layer["mlp.c_proj"].reason) == (formats.FBGEMM, "set by GPT2VIZ_KERNELS")


def test_what_the_pack_holds_and_what_a_product_reads():
    layer = F16.Float16Linear(torch.randn(768, 3072), torch.randn(3072))
    assert layer.bytes == 1024 * 3072 * 2 + 3072 * 4  # 768 inputs held as 1,024 rows; the bias float32
    assert layer.unread_bytes == 256 * 3072 * 2
    assert F16.padded_rows(3072) == 3072 and F16.padded_rows(448) == 512
    assert F16.padded_columns(112) in (112, 128)  # AVX2 pads to 16 columns, AVX-512 to 32
    def suits(n_in: int) -> bool:
        return F16.layer_for(torch.zeros(n_in, 32), torch.zeros(32), torch.float16) is not None

    assert suits(768) and suits(448) and not suits(112)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e5])
def test_a_weight_float16_cannot_hold_stays_on_the_fallback(tmp_path, value, capfd, monkeypatch):
    """fbgemm would saturate it to +-65,504 (and say so on the terminal); the float16 format gives
    what float16 gives everywhere else: NaN stays NaN, a value beyond the range becomes inf. (The
    other block's fbgemm: the kernel its shape takes when nothing is measured.)"""
    monkeypatch.setenv("GPT2VIZ_KERNELS", "plain")
    weight = torch.randn(768, 3072) * 0.05
    assert F16.layer_for(weight, torch.zeros(3072), torch.float16) is not None
    weight[5, 9] = value
    assert F16.layer_for(weight, torch.zeros(3072), torch.float16) is None
    capfd.readouterr()

    def edit(c_proj: torch.Tensor) -> None:
        assert F16.layer_for(c_proj, torch.zeros(c_proj.size(1)), torch.float16) is not None
        c_proj[0, 0] = value  # float32 in the file: 1e5 is beyond float16's range

    lm = gpt2viz.load_model(str(bundled_with_block_0(tmp_path, edit)), dtype="float16")
    # The plain product, or oneDNN's where the CPU has float16 kernels and the rows agree (NaN
    # never agrees with itself: the plain product).
    fallback = lm.model.h[0].mlp.c_proj
    assert isinstance(fallback, HalfLinear if value != value else (HalfLinear, packed.PackedLinear))
    assert isinstance(lm.model.h[1].mlp.c_proj, F16.Float16Linear)
    got = fallback(torch.ones(1, 448, dtype=torch.float16))[0, 0].item()
    assert got != got if value != value else got == float("inf")
    assert "out of range" not in capfd.readouterr().err


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gpt2_widths_multiply_through_fbgemm(ckpts, dtype, monkeypatch):
    """GPT-2's widths (768 and 3,072 inputs) all go through fbgemm (the kernel tried first; which
    is fastest on this CPU is measured in tests/test_format_kernels.py); with hooks on (the
    written-out attention, row by row like the products), a cached decode step gives the full
    pass's digits in every block; and cached and naive generation agree."""
    monkeypatch.setenv("GPT2VIZ_KERNELS", "plain")
    lm = gpt2viz.load_model(str(ckpts.path("distilgpt2")), dtype=dtype)
    layers = [getattr(parent, name) for parent, name in packed.product_sites(lm.model)]
    assert all(isinstance(layer, F16.Float16Linear) for layer in layers)
    # The padding (768 inputs held as 1,024 rows) is in memory but no step reads it, as the
    # position table's other 1,023 rows.
    padding = 6 * (1024 - 768) * (3 * 768 + 768 + 3072) * 2
    # Where the LM head multiplies by a copy of its own (oneDNN's, or fbgemm's with its padding), a
    # step reads neither wte whole nor the padding.
    head, wte = lm.model.lm_head, lm.model.wte.weight.numel() * 2
    unread_head = wte + head.unread_bytes if isinstance(head, F16.Float16Linear) else wte if isinstance(
        head, packed.PackedLMHead) else 0
    assert formats.unread_bytes(lm.model) == padding + 1023 * 768 * 2 + unread_head
    assert lm.weight_bytes > padding + 2 * lm.n_params
    ids = lm.tokenizer.encode(PROMPT)
    seen: dict[str, list[torch.Tensor]] = {}

    def keep(name: str, value: torch.Tensor) -> None:
        if name.endswith("hook_resid_post"):
            seen.setdefault(name, []).append(value[0, -1].clone())

    sub = lm.hooks.add("blocks.*", keep)  # attention hooks on: the written-out attention
    try:
        lm.model(torch.tensor([ids]))
        cache = lm.model.new_cache()
        lm.model(torch.tensor([ids[:-1]]), cache)
        lm.model(torch.tensor([ids[-1:]]), cache)
    finally:
        lm.hooks.remove(sub)
    assert len(seen) == 6
    for full, _prefill, step in seen.values():
        assert torch.equal(full, step)
    assert lm.generate(PROMPT, 6).token_ids == lm.generate(PROMPT, 6, use_cache=False).token_ids
