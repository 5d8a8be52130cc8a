"""oneDNN's prepacked weights: bfloat16 CPU products that fbgemm does not take, and the bfloat16
LM head (gpt2viz/kernels/batch.py packs float32 weights for batched decode steps the same way).

A speed trick, kept here on its own. A CPU matrix product first rearranges ("packs") its weight
into the blocked layout its kernel reads fastest. MKL's `addmm` / `F.linear` pack the weight again
on every call of more than one row, and torch's bfloat16 `F.linear` reads a one-row product
through a general kernel. oneDNN can pack a weight once (`_reorder_linear_weight`) and then
multiply by the packed copy (`_linear_pointwise`). Measured on this project's 2-core AVX-512
machines, torch 2.13 CPU, the 48 block products of GPT-2 small (one row of each, cold caches,
interleaved medians), bfloat16: 16.7 ms with `F.linear`, 8.2-9.0 ms packed; the LM head 5.1
against 3.5 ms; a 128-row prefill's block products 80 against 67 ms. On a later day, measured
together in one process: 15.9 ms with `F.linear`, 12.3 ms packed, and 9.0 ms through
model/fbgemm_float16.py's product. So bfloat16 models use packed weights for the LM head, and for
the block products fbgemm's product cannot hold exactly.

A pack made for one row (the `rows` hint 1) is a matrix-vector layout; a pack for 2 or more rows is
one layout for all row counts (packs for 2, 8 and 32 rows measured alike at 2-32 rows), and a
product whose row count does not suit its pack's layout runs, only slower. float16 has no oneDNN
kernel on these CPUs (it needs AVX-512 FP16 or AVX-NE-CONVERT).
"""

from __future__ import annotations

import torch

from .layers import Layer


def available(dtype: torch.dtype) -> bool:
    """Whether this torch build and CPU can pack weights of `dtype` for oneDNN."""
    if not torch.backends.mkldnn.is_available():
        return False
    if dtype == torch.float32:
        return True
    if dtype == torch.bfloat16:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
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
