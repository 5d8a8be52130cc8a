"""The plain 16-bit products: a weight stored `[out, in]` in float16 or bfloat16, multiplied by
torch's own kernels. The fallback of both 16-bit formats (kernels/formats.py): every CPU and
device runs it, but it is not row by row exact (a row's digits depend on how many rows share the
call), so a format uses it only where no other kernel holds the weight.

Without float16 arithmetic in the CPU, oneDNN's float16 `F.linear` multiplies one row at a time,
so a product of more than FLOAT16_FEW_ROWS rows converts the weight to float32 first and rounds the
result back (benchmarks/RESULTS.md has the measurements).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..model.layers import Layer, TiedLMHead

FLOAT16_FEW_ROWS = 8  # float16 products of at most this many rows use float16 kernels


class HalfLinear(Layer):
    """`x @ W + b` with W stored `[out, in]` in a 16-bit float (the layout oneDNN's kernels want)."""

    def __init__(self, weight_in_out: torch.Tensor, bias: torch.Tensor, dtype: torch.dtype) -> None:
        super().__init__()
        self.weight_t = weight_in_out.t().to(dtype).contiguous()  # (out, in), a copy of its own
        self.bias_ = bias.to(dtype)
        self.bytes = (self.weight_t.numel() + self.bias_.numel()) * self.weight_t.element_size()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return half_linear(x, self.weight_t, self.bias_)


def half_linear(x: torch.Tensor, weight_t: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """A 16-bit product by a `[out, in]` weight; many float16 rows go through float32 (see the
    module doc), bfloat16 has kernels of its own."""
    rows = x.numel() // x.size(-1)
    if x.dtype != torch.float16 or rows <= FLOAT16_FEW_ROWS or not x.is_cpu:
        return F.linear(x, weight_t, bias)
    out = F.linear(x.float(), weight_t.float(), None if bias is None else bias.float())
    return out.to(torch.float16)


class HalfLMHead(TiedLMHead):
    """The tied LM head in a 16-bit float: logits = x @ wte^T."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return half_linear(x, self.wte.weight, None)  # wte (V, C) is already the [out, in] layout
