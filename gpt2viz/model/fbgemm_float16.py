"""fbgemm's float16-weight product: the many-row float16 products of CPU models.

A speed trick, kept here on its own. This project's CPUs have no float16 arithmetic, so oneDNN's
float16 `F.linear` multiplies one row at a time (a 128-row product of a 3072 x 768 weight: 15.5
ms against float32's 4.0), and converting the weight to float32 on every call cost a GPT-2-small
prefill at 128 positions 1.05-1.28x float32's time. fbgemm has a product made for this: the
weight is packed once in float16, and the kernel widens each weight to float32 in registers as it
multiplies, adding in float32 (`linear_prepack_fp16` / `linear_dynamic_fp16`). No float32 copy is
ever made: 128 rows of that product take 3.2 ms against float32's 4.5, and the prefill 0.73x
float32's. Each row's result does not depend on how many rows share the call (1 to 300 rows, one
or more threads: bit-identical), so a decode step's products give a full pass's digits.

The trade: one row streams the weights more slowly than oneDNN's float16 kernel did (a GPT-2-small
decode step at 256 positions 20.2 against 17.7 ms, interleaved in one process), and one copy of
the weights can only be in one layout. The prefill gains more than the step loses, and both stay
well under float32's times.

The pack pads: the input side to whole blocks of FBGEMM_BLOCK rows (GPT-2's 768 inputs take 1,024
rows of memory, its 3,072 none) and the output side to whole SIMD columns (32 with AVX-512, 16
with AVX2). A product reads its real rows and every column, so the padded rows are held but never
read. A weight whose padding would add more than a third (the bundled model's 112 inputs: 512
rows), or that holds a value float16 cannot (NaN, infinities, beyond 65,504: fbgemm would
saturate them, with a warning on the terminal, where the rest of the float16 format gives inf or
NaN), stays on model/precision.py's `HalfLinear`.
"""

from __future__ import annotations

import torch

from .layers import Layer

FBGEMM_BLOCK = 512  # fbgemm packs a weight's input side in blocks of this many rows, the last one padded
FLOAT16_MAX = 65504.0  # the largest finite float16


def available() -> bool:
    """Whether this torch build and CPU run fbgemm's float16 product: x86 builds have it, and the
    product itself refuses CPUs without AVX2 (the pack does not), so both are tried."""
    try:
        packed = torch.ops.quantized.linear_prepack_fp16(torch.zeros(1, 1), None)
        torch.ops.quantized.linear_dynamic_fp16(torch.zeros(1, 1), packed)
    except (RuntimeError, AttributeError, NotImplementedError):
        return False
    return True


def padded_rows(n_in: int) -> int:
    """The rows of memory the pack gives a weight's `n_in` inputs."""
    return -(-n_in // FBGEMM_BLOCK) * FBGEMM_BLOCK


def padded_columns(n_out: int) -> int:
    """The columns of memory the pack gives a weight's `n_out` outputs."""
    simd = 32 if "AVX512" in torch.backends.cpu.get_cpu_capability() else 16
    return -(-n_out // simd) * simd


def suits(weight_in_out: torch.Tensor) -> bool:
    """Whether a Conv1D weight `[in, out]` goes through fbgemm: its inputs padded by at most a
    third, and every value one that float16 holds (rounded, not saturated)."""
    n_in = weight_in_out.shape[0]
    return 3 * padded_rows(n_in) <= 4 * n_in and bool((weight_in_out.abs() <= FLOAT16_MAX).all())


class Float16Linear(Layer):
    """A Conv1D's product (`y = x @ W + b`, W `[in, out]`) with W packed in float16 for fbgemm;
    float16 in and out, float32 sums."""

    def __init__(self, weight_in_out: torch.Tensor, bias: torch.Tensor) -> None:
        super().__init__()
        n_in, n_out = weight_in_out.shape
        # fbgemm rounds the float32 weight to float16 as torch does (to nearest, ties to even);
        # the bias is float16's, added in float32.
        self.packed = torch.ops.quantized.linear_prepack_fp16(
            weight_in_out.t().float().contiguous(), bias.to(torch.float16).float()
        )
        self.bytes = padded_rows(n_in) * padded_columns(n_out) * 2 + n_out * 4
        self.unread_bytes = (padded_rows(n_in) - n_in) * padded_columns(n_out) * 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.quantized.linear_dynamic_fp16(x.float(), self.packed).to(torch.float16)
