"""Batched decode steps: one new position of several sequences, multiplied by packed weights.

A CPU matrix product first rearranges ("packs") its weight into the blocked layout its kernel
reads fastest. MKL's `addmm` packs the weight again on every call of more than one row, so a
decode step of B sequences (B rows per product) pays for reading each weight twice. oneDNN packs a
weight once (model/packed.py) and then multiplies by the packed copy. benchmarks/RESULTS.md has the
measurements on each CPU kind (an 8-sequence step of GPT-2 small: 28 ms unpacked, 16-20 ms packed
on the AVX-512 EPYC machines).

So the layers (model/layers.py) give a batched decode step, an input of one position for two or
more sequences, to `batch_product` when it is set; `give_batch_products` sets it on float32 CPU
models whose weights are large enough to gain. The packed copy (a copy of every weight: GPT-2
small +490 MB) is made by the first batched step that needs it and kept for the model's life;
one-sequence runs never make it. A batch passed to `lm.model` directly is served the same way as
`generate_batch`'s: the layer dispatches by the input's shape, nothing is swapped.
"""

from __future__ import annotations

import threading

import torch

from ..model.layers import Conv1D, TiedLMHead
from . import packed

# The rows a pack is laid out for: any count from 2 reads the same layout (measured at 2-32).
BATCH_ROWS_HINT = 8
# Smaller weights (the bundled model's) gain nothing measurable from a pack.
MIN_BYTES = 2**20


class _PackedOnFirstUse:
    """Holds a weight's packed copy, made once by whichever thread needs it first."""

    def __init__(self) -> None:
        self._packed: torch.Tensor | None = None
        self._lock = threading.Lock()

    def packed(self, weight_out_in: torch.Tensor) -> torch.Tensor:
        made = self._packed
        if made is None:
            with self._lock:
                if self._packed is None:
                    self._packed = packed.pack(weight_out_in, BATCH_ROWS_HINT)
                made = self._packed
        return made


class BatchBlockProduct(_PackedOnFirstUse):
    """A block product for batched decode steps (`Conv1D.batch_product`): `x @ W + b` by W packed."""

    def __call__(self, rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return packed.packed_linear(rows, self.packed(weight.t()), bias)


class BatchHeadProduct(_PackedOnFirstUse):
    """The LM head's product for batched decode steps (`TiedLMHead.batch_product`): `x @ wte^T`."""

    def __call__(self, rows: torch.Tensor, wte: torch.Tensor) -> torch.Tensor:
        return packed.packed_linear(rows, self.packed(wte), None)


def give_batch_products(model) -> bool:
    """Sets a packed product for batched decode steps on every product of a float32 CPU `model`
    where oneDNN can pack and some weight is large enough to gain; returns whether it did."""
    convs = [layer for layer in model.modules() if isinstance(layer, Conv1D)]
    heads = [layer for layer in model.modules() if isinstance(layer, TiedLMHead)]
    worth_it = (
        model.precision == "float32"
        and model.device.type == "cpu"
        and packed.available(torch.float32)
        and any(conv.weight.numel() * 4 >= MIN_BYTES for conv in convs)
    )
    if not worth_it:
        return False
    for conv in convs:
        conv.batch_product = BatchBlockProduct()
    for head in heads:
        head.batch_product = BatchHeadProduct()
    return True
