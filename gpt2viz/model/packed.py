"""oneDNN's prepacked weights: bfloat16 CPU products that fbgemm does not take, the bfloat16 LM
head, and float32's batched decode steps.

A speed trick, kept here on its own. A CPU matrix product first rearranges ("packs") its weight
into the blocked layout its kernel reads fastest. MKL's `addmm` / `F.linear` pack the weight again
on every call of more than one row, and torch's bfloat16 `F.linear` reads a one-row product
through a general kernel. oneDNN can pack a weight once (`_reorder_linear_weight`) and then
multiply by the packed copy (`_linear_pointwise`). Measured on this project's 2-core AVX-512
machines, torch 2.13 CPU, the 48 block products of GPT-2 small (one row of each, cold caches,
interleaved medians):

- bfloat16: 16.7 ms with `F.linear`, 8.2-9.0 ms packed; the LM head 5.1 against 3.5 ms; a 128-row
  prefill's block products 80 against 67 ms. On a later day, measured together in one process:
  15.9 ms with `F.linear`, 12.3 ms packed, and 9.0 ms through model/fbgemm_float16.py's product.
  So bfloat16 models use packed weights for the LM head, and for the block products fbgemm's
  product cannot hold exactly.
- float32, several rows (a batched decode step): 8 rows 28 ms with the two-core product
  (gpt2viz/kernels/split.py) against 16-20 ms packed, and the LM head 16.6 against 6.2 ms. One row
  stays on the kernel gpt2viz.kernels chose (as fast, and a full pass's digits), so float32 packs its
  weights only for batched decoding (`for_batches`): a copy of every product's weight, made once
  on the first batched step and kept for the model's life (GPT-2 small: +490 MB).

A pack made for one row (the `rows` hint 1) is a matrix-vector layout; a pack for 2 or more rows is
one layout for all row counts (packs for 2, 8 and 32 rows measured alike at 2-32 rows), and a
product whose row count does not suit its pack's layout runs, only slower. float16 has no oneDNN
kernel on these CPUs (it needs AVX-512 FP16 or AVX-NE-CONVERT).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

import torch

from .layers import Conv1D, Layer, TiedLMHead

BATCH_ROWS_HINT = 8  # the rows a float32 batch pack is made for (any count from 2 reads the same)
MIN_BYTES = 2**20  # smaller weights (the bundled model's) gain nothing measurable from a pack


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


_swap_lock = threading.RLock()  # a batch inside a batch (same thread) swaps nothing new


def _batch_layers(model) -> tuple[list, PackedLMHead] | None:
    """The float32 model's packed layers for batches, made on first use; None where packing is not
    worth it or not possible (not float32 on a CPU with oneDNN, or small weights)."""
    made = getattr(model, "_batch_packs", None)
    if made is not None:
        return made or None
    convs = [getattr(parent, name) for parent, name in product_sites(model)]
    worth_it = (
        model.precision == "float32"
        and model.device.type == "cpu"
        and available(torch.float32)
        and all(isinstance(c, Conv1D) for c in convs)
        and isinstance(model.lm_head, TiedLMHead)
        and any(c.weight.numel() * 4 >= MIN_BYTES for c in convs)
    )
    if not worth_it:
        object.__setattr__(model, "_batch_packs", ())
        return None
    layers = [PackedLinear(c.weight, c.bias, BATCH_ROWS_HINT, torch.float32) for c in convs]
    made = (layers, PackedLMHead(model.wte.weight, BATCH_ROWS_HINT))
    object.__setattr__(model, "_batch_packs", made)  # not a sub-module: not in parameters()
    return made


@contextmanager
def for_batches(model, rows: int) -> Iterator[None]:
    """Inside, a float32 CPU model multiplies by packed copies of its weights (see the module
    doc) when `rows` (the batch's sequences) is 2 or more; otherwise nothing changes. Other
    threads' passes during the block use the packed products too (same maths, other last digits)."""
    if rows < 2:
        yield
        return
    with _swap_lock:
        packs = _batch_layers(model)
        if packs is None:
            yield
            return
        layers, head = packs
        sites = product_sites(model) + [(model, "lm_head")]
        originals = [getattr(parent, name) for parent, name in sites]
        for (parent, name), layer in zip(sites, [*layers, head]):
            replace(parent, name, layer)
        try:
            yield
        finally:
            for (parent, name), layer in zip(sites, originals):
                replace(parent, name, layer)
