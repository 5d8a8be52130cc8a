"""fbgemm's float16-weight product: a block product of float16 and bfloat16 CPU models.

Most x86 CPUs have no float16 arithmetic, so oneDNN's float16 `F.linear` multiplies one row at a
time, and converting the weight to float32 on every call costs more than float32 itself. fbgemm
has a product made for this: the weight is packed once in float16, and the kernel widens each
weight to float32 in registers as it multiplies, adding in float32 (`linear_prepack_fp16` /
`linear_dynamic_fp16`). No float32 copy is ever made. kernels/formats.py times it against the
other kernels of the format on this CPU and keeps the fastest (benchmarks/RESULTS.md: on AVX2 and
AVX-512 CPUs without bfloat16 dot products it streams a one-row product's weights fastest).

The pack pads: the input side to whole blocks of FBGEMM_BLOCK rows (GPT-2's 768 inputs take 1,024
rows of memory, its 3,072 none) and the output side to whole SIMD columns (32 with AVX-512, 16
with AVX2). A product reads its real rows and every column, so the padded rows are held but never
read. A weight whose padding would add more than a third (the bundled model's 112 inputs: 512
rows), or that holds a value float16 cannot (NaN, infinities, beyond 65,504: fbgemm would
saturate them, with a warning on the terminal, where the rest of the float16 format gives inf or
NaN), is not taken (`layer_for` gives None) and another kernel multiplies by it.

bfloat16 weights go through the same product, held exactly. A bfloat16 value has 8 significant
bits and float16 has 11, so float16 holds every bfloat16 value of its range, and scaling a matrix
by a power of two (exact) moves the matrix into that range: its largest value just under 2^16.
float16's finest step is 2^-24 (its subnormals), so a value keeps all 8 of its bits down to 2^-17:
a matrix fits unless its smallest nonzero values lie more than about 2^32 below its largest
(`bfloat16_scaled` checks every value, once, at load; k lies in 0..126, so both 2^k and 2^-k are
normal float32 numbers). The product multiplies the input by 2^-k before the sum (exact unless an
input is below 2^(k-126), where the scaled input turns subnormal), so each term is the bfloat16
weight times the bfloat16 input, exact in float32, and the sum is float32's, as in oneDNN's kernel.

Row by row, exactly, on every CPU: fbgemm's AVX-512 kernels give a row the same digits however
many rows share the call, its AVX2 kernel does not (a single row takes another kernel, and the
float32 sums of a row are added in an order that depends on the call's row count: one float16
unit in the last place once rounded). `rows_independent` measures which kernel this process has;
where rows are not independent, a many-row product is done one row at a time, so a decode step
still gives a full pass's digits (a prefill is then slower; a decode step is unchanged).
"""

from __future__ import annotations

import functools
import math
import weakref

import torch

from ..model.layers import Layer, plain_head_product

FBGEMM_BLOCK = 512  # fbgemm packs a weight's input side in blocks of this many rows, the last one padded
FLOAT16_MAX = 65504.0  # the largest finite float16
MAX_SCALE = 126  # 2^126 is float32's largest power of two whose inverse is normal


def available() -> bool:
    """Whether this torch build and CPU run fbgemm's float16 product: x86 builds have it, and the
    product itself refuses CPUs without AVX2 (the pack does not), so both are tried."""
    try:
        packed = torch.ops.quantized.linear_prepack_fp16(torch.zeros(1, 1), None)
        torch.ops.quantized.linear_dynamic_fp16(torch.zeros(1, 1), packed)
    except (RuntimeError, AttributeError, NotImplementedError):
        return False
    return True


@functools.cache
def rows_independent() -> bool:
    """Whether fbgemm's product on this CPU gives each row the same digits whatever rows share the
    call (see the module's doc): measured once per process on a GPT-2-sized weight, 1 to 9 rows
    against the same rows in one call of 9. FBGEMM_ENABLE_INSTRUCTIONS can steer fbgemm to its AVX2
    kernel on any x86 CPU, so the CPU's flags alone would not say."""
    generator = torch.Generator().manual_seed(0)
    packed = torch.ops.quantized.linear_prepack_fp16(torch.randn(3072, 768, generator=generator), None)
    rows = torch.randn(9, 768, generator=generator)
    whole = torch.ops.quantized.linear_dynamic_fp16(rows, packed)
    return all(torch.equal(torch.ops.quantized.linear_dynamic_fp16(rows[:m], packed), whole[:m]) for m in range(1, 9))


def padded_rows(n_in: int) -> int:
    """The rows of memory the pack gives a weight's `n_in` inputs."""
    return -(-n_in // FBGEMM_BLOCK) * FBGEMM_BLOCK


def padded_columns(n_out: int) -> int:
    """The columns of memory the pack gives a weight's `n_out` outputs."""
    simd = 32 if "AVX512" in torch.backends.cpu.get_cpu_capability() else 16
    return -(-n_out // simd) * simd


def layer_for(weight_in_out: torch.Tensor, bias: torch.Tensor, dtype: torch.dtype) -> Float16Linear | None:
    """fbgemm's product for a Conv1D weight `[in, out]` of a `dtype` model (float16 or bfloat16),
    or None where it does not suit: inputs padded by more than a third, or a value float16 cannot
    hold (float16: rounded, not saturated; bfloat16: exactly, once scaled)."""
    n_in = weight_in_out.shape[0]
    if 3 * padded_rows(n_in) > 4 * n_in:
        return None
    if dtype == torch.bfloat16:
        held = bfloat16_scaled(weight_in_out)
        return None if held is None else Float16Linear(held[1], bias, dtype, scale=held[0])
    if not bool((weight_in_out.abs() <= FLOAT16_MAX).all()):
        return None
    return Float16Linear(weight_in_out, bias)


def bfloat16_scaled(weight: torch.Tensor) -> tuple[int, torch.Tensor] | None:
    """(k, the values in float32) for the power of two k for which float16 holds every value of
    `weight`, rounded to bfloat16 and multiplied by 2^k, exactly (its largest value just under
    2^16); None when no k does (values
    spread over more than float16's range, NaN, infinities), or when k would be negative or beyond
    MAX_SCALE (weights of 2^16 and more, or all below 2^-111): then 2^-k times an input could
    overflow, or 2^k itself would, in float32."""
    values = weight.to(torch.bfloat16)
    top = values.abs().max().item() if values.numel() else 0.0
    if not math.isfinite(top):
        return None
    k = 15 - math.floor(math.log2(top)) if top > 0 else 0
    if not 0 <= k <= MAX_SCALE:
        return None
    scaled = values.float().mul_(2.0**k)  # exact: a power of two, and no value reaches 2^16
    return (k, scaled) if torch.equal(scaled.to(torch.float16).float(), scaled) else None


class Float16Linear(Layer):
    """A Conv1D's product (`y = x @ W + b`, W `[in, out]`) with W packed in float16 for fbgemm;
    `dtype` (float16, or bfloat16 held exactly: see the module's doc) in and out, float32 sums."""

    def __init__(
        self, values_in_out: torch.Tensor, bias: torch.Tensor, dtype: torch.dtype = torch.float16, scale: int = 0
    ) -> None:
        """`values_in_out` are what the pack holds: a float16 layer's weights, which fbgemm rounds
        to float16 as torch does (to nearest, ties to even), or a bfloat16 layer's weights times
        2^`scale`, float16 numbers already (`bfloat16_scaled`). The bias is the format's, added in
        float32."""
        super().__init__()
        n_in, n_out = values_in_out.shape
        self.dtype = dtype
        self.shrink = 2.0**-scale  # what the input is multiplied by, where the pack holds W * 2^scale
        self.packed = torch.ops.quantized.linear_prepack_fp16(
            values_in_out.t().float().contiguous(), bias.to(dtype).float()
        )
        self.bytes = padded_rows(n_in) * padded_columns(n_out) * 2 + n_out * 4
        self.unread_bytes = (padded_rows(n_in) - n_in) * padded_columns(n_out) * 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.float() if self.shrink == 1.0 else x.float() * self.shrink
        if rows.dim() > 1 and rows.numel() > rows.size(-1) and not rows_independent():
            flat = rows.reshape(-1, rows.size(-1))
            out = torch.cat([torch.ops.quantized.linear_dynamic_fp16(row, self.packed) for row in flat.split(1)])
            return out.view(*rows.shape[:-1], out.size(-1)).to(self.dtype)
        return torch.ops.quantized.linear_dynamic_fp16(rows, self.packed).to(self.dtype)


# -- a float32 model's LM head, where its token table holds float16 numbers only --------------------------
# A checkpoint stored in float16 (the bundled model) loads into float32 as float16 numbers widened,
# exactly. Its LM head is then the same product by a float16 copy of the table: each term is the
# float32 product's (a float16 weight widened, times the float32 input, exact), only the order of
# the sums differs (a last digit or two, as between any two BLAS kernels), and a step reads half the
# bytes (the bundled model's table: 11 MB instead of 22.5). Its pack pads the inputs to whole blocks
# (the bundled model's 112 to 512), so it is made only where it takes no more memory than the table
# itself, or at most HELD_EXTRA_BYTES: a table of many words and few inputs (a hostile config)
# would otherwise make a pack many times its size.
HELD_EXTRA_BYTES = 64 * 2**20
HELD_CHECK_NUMBERS = 2**22  # the table is checked this many numbers at a time: a float32 table fails at once


def holds_float16(wte: torch.Tensor) -> bool:
    """Whether a float16 copy of the float32 token table `wte` `[vocab, n_embd]` (`held_head`) holds
    every number of it exactly, takes no more memory than allowed, and fbgemm's product is here.
    A table made under `torch.inference_mode` has no version counter to notice edits by: no copy."""
    if wte.dtype != torch.float32 or wte.is_inference() or not available():
        return False
    n_out, n_in = wte.shape
    if padded_rows(n_in) * padded_columns(n_out) * 2 > max(wte.numel() * wte.element_size(), HELD_EXTRA_BYTES):
        return False
    for rows in wte.split(max(1, HELD_CHECK_NUMBERS // max(1, n_in))):
        if not torch.equal(rows.to(torch.float16).float(), rows):  # beyond float16's range: inf, not equal
            return False
    return True


def held_head(wte: torch.Tensor) -> Float16Linear | None:
    """fbgemm's product by a float16 copy of the float32 token table `wte` for the LM head
    (`x @ wte^T`), or None where `holds_float16` says no."""
    if not holds_float16(wte):
        return None
    return Float16Linear(wte.t(), torch.zeros(wte.size(0)), dtype=torch.float32)


class HeldHeadProduct:
    """The LM head's product (`TiedLMHead.product`) by the float16 copy `pack` of `wte` (`held_head`)
    for products of at most `max_rows` rows (a decode step, a short prompt), the plain `x @ wte^T`
    beyond, for a pass with gradients, and once the table was written to in place since the copy
    was made (its version counter moved) or is another tensor. An edit through `wte.data` moves no
    counter and is not seen, as the packed weights of batched steps (kernels/batch.py) see no edit:
    load the model again after editing its weights that way."""

    def __init__(self, pack: Float16Linear, wte: torch.Tensor, max_rows: int) -> None:
        self.pack = pack
        self.max_rows = max_rows
        self._table = weakref.ref(wte)
        self._version = wte._version

    def __call__(self, rows: torch.Tensor, wte: torch.Tensor) -> torch.Tensor:
        # fbgemm's product has no gradient: a pass with gradients (attribution patching) multiplies plainly.
        if (rows.size(0) <= self.max_rows and not rows.requires_grad and self._table() is wte
                and wte._version == self._version):
            return self.pack(rows)
        return plain_head_product(rows, wte)
