"""oneDNN's prepacked weights: a block product of bfloat16 (and, where the CPU has the kernels,
float16) models, the bfloat16 LM head, and float32 weights for batched decode steps
(kernels/batch.py).

A CPU matrix product first rearranges ("packs") its weight into the blocked layout its kernel
reads fastest. MKL's `addmm` / `F.linear` pack the weight again on every call of more than one
row, and torch's bfloat16 `F.linear` reads a one-row product through a general kernel. oneDNN can
pack a weight once (`_reorder_linear_weight`) and then multiply by the packed copy
(`_linear_pointwise`). Where the CPU has bfloat16 dot products (AVX-512 BF16, AMX) this is the
fastest bfloat16 product; kernels/formats.py measures it against fbgemm's on each CPU, and checks
that it gives each row the same digits whatever rows share the call (benchmarks/RESULTS.md).

A pack made for one row (the `rows` hint 1) is a matrix-vector layout; a pack for 2 or more rows is
one layout for all row counts, and a product whose row count does not suit its pack's layout runs,
only slower.
"""

from __future__ import annotations

import torch

from ..model.layers import Layer


def available(dtype: torch.dtype) -> bool:
    """Whether this torch build and CPU can pack weights of `dtype` for oneDNN."""
    if not torch.backends.mkldnn.is_available():
        return False
    if dtype == torch.float32:
        return True
    if dtype == torch.bfloat16:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    if dtype == torch.float16:  # kernels of its own only with AVX-512 FP16 or AVX-NE-CONVERT
        return bool(torch.ops.mkldnn._is_mkldnn_fp16_supported())
    return False


def pack(weight_out_in: torch.Tensor, rows: int) -> torch.Tensor:
    """A packed copy of a CPU weight stored `[out, in]`, laid out for products of `rows` rows."""
    return torch.ops.mkldnn._reorder_linear_weight(weight_out_in.contiguous(), rows)


def packed_linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """`x @ W^T + b` by a packed W: `(..., in) -> (..., out)`."""
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


class PackedLinear(Layer):
    """A Conv1D's product (`y = x @ W + b`, W `[in, out]`) through a packed copy of W."""

    def __init__(self, weight_in_out: torch.Tensor, bias: torch.Tensor, rows: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.packed = pack(weight_in_out.t().to(dtype), rows)
        self.bias_ = bias.to(dtype, copy=True)
        self.bytes = (weight_in_out.numel() + bias.numel()) * self.bias_.element_size()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return packed_linear(x, self.packed, self.bias_)


class PackedLMHead(Layer):
    """The tied LM head (`logits = x @ wte^T`) through a packed copy of wte (V, C)."""

    def __init__(self, wte: torch.Tensor, rows: int) -> None:
        super().__init__()
        self.packed = pack(wte, rows)
        self.bytes = wte.numel() * wte.element_size()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return packed_linear(x, self.packed, None)


def product_sites(model) -> list[tuple[object, str]]:
    """(parent, attribute) of every block product, in the order of the forward pass."""
    return [
        (parent, name)
        for block in model.h
        for parent, name in ((block.attn, "c_attn"), (block.attn, "c_proj"), (block.mlp, "c_fc"), (block.mlp, "c_proj"))
    ]


def replace(parent, name: str, layer) -> None:
    """Puts `layer` at `parent.name` (layers keep sub-layers as plain attributes too: both)."""
    parent._modules[name] = layer
    object.__setattr__(parent, name, layer)
