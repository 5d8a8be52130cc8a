"""The kernels a batched decode step could multiply by, timed against each other on this CPU.

Issue 32 asks for a decode step of 8 sequences within 1.5x of one sequence's. A step of one row
streams every weight once (kernels/split.py's partial sums, one core each half); a step of 8 rows
must too, and then do 8 times the multiply-adds. This times every product torch offers for 8
rows (and 1, for comparison) on GPT-2 small's shapes: the 48 block products of a step as 12
distinct weights per shape (so each is read from memory, not the caches), the LM head, and the
attention of 8 caches, each kernel the fastest of interleaved rounds (kernels/timing.py).

    python benchmarks/batch_kernels.py [--rows 8] [--positions 65]

Run it under the AVX2 settings too (README: the kernels tier) to see the other CPU kind's kernels.
Prints the CPU (model, flags, steering) with the numbers; benchmarks/RESULTS.md, session 28.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

from gpt2viz.kernels import packed, split
from gpt2viz.kernels.cpu import this_cpu
from gpt2viz.kernels.timing import fastest_calls

SHAPES = ((768, 2304), (768, 768), (768, 3072), (3072, 768))  # c_attn, attn c_proj, c_fc, mlp c_proj
LAYERS = 12
VOCAB = 50257


def block_kernels(rows: int) -> dict[str, float]:
    """ms for the 48 block products of one step, per kernel."""
    total: dict[str, float] = {}
    for n_in, n_out in SHAPES:
        weights = [torch.randn(n_in, n_out) * 0.02 for _ in range(LAYERS)]
        transposed = [w.t().contiguous() for w in weights]
        biases = [torch.randn(n_out) for _ in range(LAYERS)]
        packs = [packed.pack(t, 8) for t in transposed]
        mkl_packs = [torch.ops.mkl._mkl_reorder_linear_weight(t, rows) for t in transposed]
        x = torch.randn(rows, n_in)
        kernels = {
            "MKL addmm (plain)": lambda: [torch.addmm(b, x, w) for w, b in zip(weights, biases)],
            "oneDNN packed": lambda: [packed.packed_linear(x, p, b) for p, b in zip(packs, biases)],
            "column halves": lambda: [split.conv1d_halves(x, w, b) for w, b in zip(weights, biases)],
            "partial sums": lambda: [split.conv1d_partial_sums(x, w, b) for w, b in zip(weights, biases)],
            "MKL, transposed weight": lambda: [F.linear(x, t, b) for t, b in zip(transposed, biases)],
            "MKL packed": lambda: [torch.ops.mkl._mkl_linear(x, m, t, b, rows)
                                   for m, t, b in zip(mkl_packs, transposed, biases)],
        }
        for name, us in fastest_calls(kernels, 5, 0.5).items():
            total[name] = total.get(name, 0.0) + us / 1000
    return total


def head_kernels(rows: int) -> dict[str, float]:
    """ms for the LM head (x @ wte^T), per kernel."""
    wte = torch.randn(VOCAB, 768) * 0.02
    pack = packed.pack(wte, 8)
    x = torch.randn(rows, 768)
    kernels = {
        "plain": lambda: F.linear(x, wte),
        "oneDNN packed": lambda: packed.packed_linear(x, pack, None),
        "row halves (split)": lambda: split.unembed_halves(x, wte),
    }
    return {name: us / 1000 for name, us in fastest_calls(kernels, 5, 1.0).items()}


def attention_kernels(batch: int, positions: int) -> dict[str, float]:
    """ms for one new query's attention over `positions` cached ones in 12 layers, per formulation."""
    heads, dim, capacity = 12, 64, positions + 63
    keys = [torch.randn(batch, heads, capacity, dim) for _ in range(LAYERS)]
    values = [torch.randn(batch, heads, capacity, dim) for _ in range(LAYERS)]
    q = torch.randn(batch, 1, heads, dim).transpose(1, 2)
    scale = 1 / math.sqrt(dim)

    def sdpa():
        return [F.scaled_dot_product_attention(q, k[:, :, :positions], v[:, :, :positions]) for k, v in zip(keys, values)]

    def written_out():
        return [torch.softmax((q @ k[:, :, :positions].transpose(-2, -1)) * scale, -1) @ v[:, :, :positions]
                for k, v in zip(keys, values)]

    def multiply_and_sum():
        out = []
        for k, v in zip(keys, values):
            p = torch.softmax((k[:, :, :positions] * q).sum(-1) * scale, -1)
            out.append((p.unsqueeze(-1) * v[:, :, :positions]).sum(-2, keepdim=True))
        return out

    kernels = {"SDPA": sdpa, "matmul, softmax, matmul": written_out, "multiply and sum": multiply_and_sum}
    return {name: us / 1000 for name, us in fastest_calls(kernels, 10, 1.0).items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8, help="sequences in the batch (default 8)")
    parser.add_argument("--positions", type=int, default=65, help="cached positions for the attention (default 65)")
    args = parser.parse_args()
    torch.manual_seed(0)
    cpu = this_cpu()
    print(f"CPU: {cpu.describe()}; torch {torch.__version__}; "
          f"{torch.get_num_threads()} threads, {os.cpu_count()} CPUs")
    for title, rows in ((f"{args.rows} rows", args.rows), ("1 row", 1)):
        print(f"\nblock products, 48 a step, {title} (ms):")
        for name, ms in block_kernels(rows).items():
            print(f"  {name:24s} {ms:7.2f}")
        print(f"LM head 768 x {VOCAB:,}, {title} (ms):")
        for name, ms in head_kernels(rows).items():
            print(f"  {name:24s} {ms:7.2f}")
        print(f"attention, {args.positions} cached positions, batch {rows}, 12 layers (ms):")
        for name, ms in attention_kernels(rows, args.positions).items():
            print(f"  {name:24s} {ms:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
