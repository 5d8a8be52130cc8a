"""Two-core products: a weight's two halves multiplied on one core each.

A decode step multiplies one row by each weight matrix: a matrix-vector product, whose cost is
reading the weight from memory. Where the CPU's BLAS runs such a product on one core, and one core
cannot draw the machine's whole memory bandwidth, splitting the weight into two halves run as a
batch of two (torch gives each its own core) reads it up to twice as fast. Where the BLAS already
uses every core, the split only adds work: `choice` measures which is the case.

A block product splits its weight's columns (the two halves of its outputs: each output the plain
product's dot product) or its rows (two partial sums, added: other last digits). The products take
rows `(R, in)` and fall back to the plain product above `max_rows` rows (a prefill: there the
BLAS's own matrix-matrix kernel uses the cores) and at another torch thread count than the one
they were chosen at (one thread has nothing to split over).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..model.layers import plain_block_product, plain_head_product

# The most rows a split is tried for: a decode step has one per sequence.
BLOCK_MAX_ROWS = 8
# The LM head's product with wte [V, C] can stay faster split up to more rows (a prefill that
# keeps every position's logits, the logit lens); beyond, one product without the halves'
# concatenation (a V x T copy: 206 MB at T = 1024).
HEAD_MAX_ROWS = 32


def block_splittable(n_out: int) -> bool:
    """Whether the column halves are whole 8-float SIMD vectors each, the condition under which a
    half's outputs can come out of the same kernel arithmetic as the whole product's."""
    return n_out % 16 == 0


def conv1d_halves(rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """`rows @ weight + bias`, `(R, in) -> (R, out)`, as the left and right halves of the weight's
    columns (which make the left and right halves of the output) on one core each. Each output is
    the same dot product as in the whole product; whether the kernel adds its terms in the same
    order is this machine's BLAS's business, which `choice` checks. (Splitting the weight's rows
    instead, into two partial sums, reads memory a little faster but changes the last digits.)"""
    n_in, n_out = weight.shape
    halves = weight.view(n_in, 2, n_out // 2).permute(1, 0, 2)  # (2, in, out/2), no copy
    out = torch.baddbmm(bias.view(2, 1, n_out // 2), rows.expand(2, *rows.shape), halves)
    return out.permute(1, 0, 2).reshape(rows.size(0), n_out)  # (R, out)


def partial_sums_possible(n_in: int) -> bool:
    """Whether a weight's rows divide into two halves of whole rows (its inputs are even)."""
    return n_in % 2 == 0


def conv1d_partial_sums(rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """`rows @ weight + bias`, `(R, in) -> (R, out)`, as two partial sums: the first half of the
    inputs times the weight's top rows on one core, the second half times its bottom rows on the
    other, then added. Each core streams one contiguous half of the weight, which reads memory
    faster than the column halves' short runs (benchmarks/RESULTS.md). Every output then adds its
    terms in another order than the plain product, so its last digits differ: `choice` takes it
    only where the plain product's digits are not kept anyway (a row alone gets other digits than
    among a prefill's rows)."""
    n_in, n_out = weight.shape
    n_rows = rows.size(0)
    inputs = rows.reshape(n_rows, 2, n_in // 2).transpose(0, 1)  # (2, R, in/2)
    parts = torch.bmm(inputs, weight.view(2, n_in // 2, n_out))  # (2, R, out), no copy of the weight
    return parts[0] + parts[1] + bias


def unembed_halves(rows: torch.Tensor, wte: torch.Tensor) -> torch.Tensor:
    """`rows @ wte^T`, `(R, C) -> (R, V)`: row v of wte makes logit v, so each contiguous half of
    wte's rows makes one half of the logits, on one core each. Computed as `wte_half @ rows^T`,
    which streams wte's rows in the order they lie in memory. An odd vocabulary (GPT-2's 50,257)
    leaves one last row for a product of its own. Each logit is the same dot product as in
    `F.linear`; only the kernel's order of adding may differ, in the last digits."""
    half = wte.size(0) // 2
    halves = wte[: 2 * half].view(2, half, wte.size(1))  # (2, V/2, C), no copy
    cols = rows.t()  # (C, R)
    both = torch.bmm(halves, cols.expand(2, *cols.shape))  # (2, V/2, R)
    return torch.cat([both[0].t(), both[1].t(), F.linear(rows, wte[2 * half :])], dim=1)  # (R, V)


class _TwoCoreProduct:
    """A product that splits at most `max_rows` rows over two cores, at the thread count it was
    chosen at; otherwise (a prefill, or gpt2viz/threads.py lowered the count on a busy machine,
    which may add in another order) the plain product of model/layers.py."""

    def __init__(self, max_rows: int, threads: int) -> None:
        self.max_rows = max_rows
        self.threads = threads

    def splits(self, rows: torch.Tensor) -> bool:
        return rows.size(0) <= self.max_rows and torch.get_num_threads() == self.threads


class SplitBlockProduct(_TwoCoreProduct):
    """A block product (`Conv1D.product`): `conv1d_halves` or the plain `x @ W + b`."""

    def __call__(self, rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return conv1d_halves(rows, weight, bias) if self.splits(rows) else plain_block_product(rows, weight, bias)


class PartialSumsBlockProduct(_TwoCoreProduct):
    """A block product (`Conv1D.product`): `conv1d_partial_sums` or the plain `x @ W + b`."""

    def __call__(self, rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return conv1d_partial_sums(rows, weight, bias) if self.splits(rows) else plain_block_product(rows, weight, bias)


class SplitHeadProduct(_TwoCoreProduct):
    """The LM head's product (`TiedLMHead.product`): `unembed_halves` or the plain `x @ wte^T`."""

    def __call__(self, rows: torch.Tensor, wte: torch.Tensor) -> torch.Tensor:
        return unembed_halves(rows, wte) if self.splits(rows) else plain_head_product(rows, wte)
