"""int8 weights: one scale per output channel, multiplied by fbgemm's dynamic-quantized product.

Each product quantizes its input to 8 bits (one scale and zero point per call) and multiplies int8
by int8 into int32. With AVX-512 VNNI the products go straight into int32 and the input uses the
full 8-bit range; without it (AVX2 CPUs) fbgemm first adds two neighbouring products in a
saturating 16-bit sum, which 8-bit inputs overflow, so there the input is quantized to 7 bits,
which cannot (`int8_inputs_reduced`, measured once per process; both checked against exact
integer arithmetic in the tests). Inputs are quantized one position at a time: one scale over a
whole prompt cost the bundled model 2 points of top-1 agreement with float32, and per position a
cached decode step computes exactly what a full pass does. The token embeddings are the LM head's
int8 rows (tied, as in float32), looked up and scaled.

torch marks its quantized tensors deprecated in favour of torchao; torchao's int8 weight-only
linear measured slower than float32 (eager, CPU: benchmarks/RESULTS.md), so this uses torch's ops.
"""

from __future__ import annotations

import functools
import warnings

import torch

from ..model.layers import Layer


def quantize_rows(weight_out_in: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 with one scale per row (output channel): (int8 values, float32 scales)."""
    w = weight_out_in.float()
    scales = (w.abs().amax(dim=1) / 127).clamp_min(torch.finfo(torch.float32).tiny)
    values = torch.round(w / scales[:, None]).clamp_(-127, 127).to(torch.int8)
    return values, scales


def _packed(values: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None):
    """fbgemm's prepacked form of int8 `values` `[out, in]` with per-row `scales`."""
    zero_points = torch.zeros(values.size(0), dtype=torch.long)
    with warnings.catch_warnings():  # quantized tensors are deprecated (see the module doc)
        warnings.simplefilter("ignore")
        q = torch._make_per_channel_quantized_tensor(values, scales.double(), zero_points, 0)
        # The bias is copied: the packed form keeps what it is given, and a view would keep the
        # checkpoint's memory mapping alive.
        return torch.ops.quantized.linear_prepack(q, None if bias is None else bias.to(torch.float32, copy=True))


@functools.cache
def int8_inputs_reduced() -> bool:
    """Whether this CPU's int8 product must quantize its inputs to 7 bits (0..127) rather than 8.
    Without AVX-512 VNNI, fbgemm adds two neighbouring input x weight products in a saturating
    16-bit sum (vpmaddubsw): 255 x 127 twice is 64,770, past 32,767. Measured, not read from the
    CPU's flags (FBGEMM_ENABLE_INSTRUCTIONS can steer fbgemm to its AVX2 kernel anywhere): all 64
    inputs and weights at their largest must add up to 64 exactly, or the sums saturated."""
    values = torch.full((8, 64), 127, dtype=torch.int8)
    packed = _packed(values, torch.full((8,), 1 / 127), None)
    out = torch.ops.quantized.linear_dynamic(torch.ones(1, 64), packed, False)
    return not bool(torch.allclose(out, torch.full_like(out, 64.0)))


def int8_input_levels() -> int:
    """The steps of an int8 product's quantized input: 255 (8 bits) or 127 (7 bits, see above)."""
    return 127 if int8_inputs_reduced() else 255


def int8_linear(x: torch.Tensor, packed) -> torch.Tensor:
    """`x @ W^T (+ b)` through fbgemm, each position's input quantized on its own (float32 out)."""
    rows = x.reshape(-1, x.size(-1))
    reduced = int8_inputs_reduced()
    if rows.size(0) == 1:
        out = torch.ops.quantized.linear_dynamic(rows, packed, reduced)
    else:
        out = torch.cat([torch.ops.quantized.linear_dynamic(row, packed, reduced) for row in rows.split(1)])
    return out.view(*x.shape[:-1], out.size(-1))


class Int8Linear(Layer):
    """A Conv1D's product with int8 weights (per output channel) and a float32 bias."""

    def __init__(self, weight_in_out: torch.Tensor, bias: torch.Tensor) -> None:
        super().__init__()
        values, scales = quantize_rows(weight_in_out.t())
        self.packed = _packed(values, scales, bias)
        self.bytes = values.numel() + scales.numel() * 4 + bias.numel() * 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return int8_linear(x, self.packed)


class Int8Embedding(Layer):
    """Token vectors as int8 rows with one scale each: a lookup scales the rows it reads. The same
    rows, prepacked, are the tied LM head."""

    def __init__(self, wte: torch.Tensor) -> None:
        super().__init__()
        self.values, self.scales = quantize_rows(wte)  # (V, C) int8, (V,) float32
        self.packed = _packed(self.values, self.scales, None)
        self.bytes = 2 * self.values.numel() + self.scales.numel() * 4  # the table and its packed copy

    def lookup(self, ids: torch.Tensor) -> torch.Tensor:
        return self.values[ids].float() * self.scales[ids].unsqueeze(-1)  # (..., C)


class Int8LMHead(Layer):
    """The tied LM head in int8: logits = x @ wte^T through the embedding's packed rows."""

    def __init__(self, embedding: Int8Embedding) -> None:
        super().__init__()
        self.embedding = embedding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return int8_linear(x, self.embedding.packed)
