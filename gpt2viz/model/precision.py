"""Number formats: how the weights are stored and which kernels multiply by them.

The forward pass is the same maths in every format; only the matrix products and the storage of
their weights change, so this module swaps those layers after loading and leaves the rest alone.
Measured on this project's 2-core AVX-512 (VNNI, BF16) machines, torch 2.13 CPU:

- **float32**: the checkpoint's own layout, `[in, out]`, multiplied by the plain products or, where
  gpt2viz.kernels measured it faster on this CPU, the two-core split. Exact against transformers.
- **bfloat16**: weights in bfloat16. The block products go through fbgemm's float16-weight
  product, which holds every bfloat16 weight exactly once the matrix is scaled by a power of two
  (model/fbgemm_float16.py: a decode step at 256 positions 0.59x float32's time, against 0.73x
  through oneDNN's bfloat16 kernel, whose one-row products stream the weights at 12-14 GB/s). A
  matrix no scale holds exactly, and the inputs fbgemm pads too much (the bundled model's), are
  packed once for oneDNN's kernels (model/packed.py; the CPU has bf16 dot products, so there a
  many-row product, the prefill, runs several times faster than float32). The LM head multiplies
  by a packed copy of wte (the token lookup keeps the table). Activations and the KV cache are
  bfloat16. Without oneDNN's bf16 kernels and fbgemm the weights stay plain (`HalfLinear`).
- **float16**: this CPU has no float16 arithmetic. The block products go through fbgemm's
  float16-weight product (model/fbgemm_float16.py: the weights packed once in float16, widened to
  float32 in registers; a prefill at 128 positions 0.73x float32's time, where converting each
  weight to float32 on every call took 1.05-1.28x). Weights it does not suit (inputs padded by
  more than a third, as the bundled model's 112; values float16 cannot hold) and the LM head stay
  on `HalfLinear`: weights `[out, in]` in float16, oneDNN's kernel for at most FLOAT16_FEW_ROWS
  rows (it multiplies one row at a time), and for more the weight converted to float32 first and
  the result rounded back (also the path of builds without fbgemm, non-x86). A packed copy of the
  head would cost GPT-2 small 103 MB for 0.3 ms a decode step (2.4 against 2.7 ms). Activations
  and the KV cache are float16.
- **int8**: weights int8 with one scale per output channel (symmetric, round to nearest), run by
  torch's fbgemm dynamic-quantized linear: each product quantizes its input to 8 bits (one scale
  and zero point per call) and multiplies int8 by int8 into int32. With AVX-512 VNNI the products
  go straight into int32 and the input uses the full 8-bit range; without it (AVX2 CPUs) fbgemm
  first adds two neighbouring products in a saturating 16-bit sum, which 8-bit inputs overflow
  (a product 9 % off was measured), so there the input is quantized to 7 bits, which cannot
  (`int8_inputs_reduced`, measured once per process; both checked against exact integer
  arithmetic in the tests). Inputs are quantized one position at a time: one scale over a whole
  prompt cost the bundled model 2 points of top-1 agreement with float32, and per position a
  cached decode step computes exactly what a full pass does. Every block product and the LM head
  are int8; the token embeddings are the LM head's int8 rows (tied, as in float32), looked up and
  scaled; position embeddings, LayerNorm and biases stay float32, as do activations and the KV
  cache. torch marks its quantized tensors deprecated in favour of torchao; torchao's int8
  weight-only linear measured slower than float32 here (eager, CPU), so this uses torch's ops.
"""

from __future__ import annotations

import ctypes
import functools
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..errors import SettingError
from ..i18n import N_
from . import fbgemm_float16, packed
from .fbgemm_float16 import Float16Linear
from .layers import Layer, TiedLMHead

FLOAT16_FEW_ROWS = 8  # float16 products of at most this many rows use float16 kernels


@dataclass(frozen=True)
class Precision:
    """A number format: its name, how the weights are read from the file, what activations use."""

    name: str
    load_dtype: torch.dtype  # what the loader converts the file's tensors to
    compute_dtype: torch.dtype  # activations, the KV cache, the logits

    @property
    def quantized(self) -> bool:
        return self.name == "int8"


# Every format loads the file as float32 (read into memory, as read where the file is float32) and
# converts once, layer by layer, into memory of its own: what was read is then released, so
# resident memory after loading is what the format stores.
PRECISIONS = {
    "float32": Precision("float32", torch.float32, torch.float32),
    "bfloat16": Precision("bfloat16", torch.float32, torch.bfloat16),
    "float16": Precision("float16", torch.float32, torch.float16),
    "int8": Precision("int8", torch.float32, torch.float32),
}
# A name or torch dtype that is no format here ({value}: 'float64', or torch.float64 as it is).
UNSUPPORTED = N_("{setting} {value} is not supported (choose float32, bfloat16, float16 or int8)")
ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16", "qint8": "int8"}


def parse_precision(name: str | torch.dtype | Precision) -> Precision:
    """The Precision for a name ('float32', 'bf16', 'int8', ...) or a torch float dtype."""
    if isinstance(name, Precision):
        return name
    if isinstance(name, torch.dtype):
        for precision in PRECISIONS.values():
            if precision.compute_dtype == name and not precision.quantized:
                return precision
        raise SettingError("dtype", UNSUPPORTED, value=str(name))
    key = str(name).lower()
    precision = PRECISIONS.get(ALIASES.get(key, key))
    if precision is None:
        raise SettingError("dtype", UNSUPPORTED, value=repr(name))
    return precision


# -- float16 ------------------------------------------------------------------------------------


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


# -- int8 ---------------------------------------------------------------------------------------


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


# -- switching a loaded model -------------------------------------------------------------------


@torch.inference_mode()
def apply_precision(model, precision: Precision) -> None:
    """Converts a model loaded in float32 to `precision`, once: the matrix products get their
    format's layers, and every other weight (embeddings, LayerNorms) is copied into the format,
    so nothing keeps the checkpoint's memory mapping alive. float32 needs no change."""
    model.precision = precision.name
    if precision.name == "float32":
        return
    if precision.quantized and model.device.type != "cpu":
        raise SettingError("dtype", N_("{setting} int8 runs on the CPU only (fbgemm)"))
    dtype = precision.compute_dtype
    on_cpu = model.device.type == "cpu"
    pack = on_cpu and not precision.quantized and packed.available(dtype)  # bfloat16 (see packed.py)
    fbgemm16 = on_cpu and not precision.quantized and fbgemm_float16.available()
    sites = packed.product_sites(model)

    def layer_for(conv) -> Layer:
        """The layer that multiplies by `conv`'s weight in this format, on the CPU."""
        with torch.inference_mode():  # a worker thread's own mode
            if precision.quantized:
                return Int8Linear(conv.weight, conv.bias)
            if fbgemm16 and (fast := fbgemm_float16.layer_for(conv.weight, conv.bias, dtype)) is not None:
                return fast
            if pack:
                return packed.PackedLinear(conv.weight, conv.bias, 1, dtype)
            return HalfLinear(conv.weight, conv.bias, dtype)

    if on_cpu:
        # Matrices convert independently, so one per thread: fbgemm's packs, int8's quantization
        # and the checks run on one core each. GPT-2 small loads in 1.2-1.4 s against 1.6-1.75 in
        # bfloat16, 1.2 against 1.7 in float16, 1.1 against 1.45 in int8; the worker's heap
        # leaves 10-18 MB more resident.
        with ThreadPoolExecutor(max_workers=max(1, torch.get_num_threads())) as pool:
            layers = list(pool.map(layer_for, [getattr(parent, name) for parent, name in sites]))
        for (parent, name), layer in zip(sites, layers):
            packed.replace(parent, name, layer)
    else:  # GPUs multiply 16-bit floats in the checkpoint's layout well
        for parent, name in sites:
            conv = getattr(parent, name)
            conv.weight.data, conv.bias.data = conv.weight.to(dtype), conv.bias.to(dtype)
    if precision.quantized:
        embedding = Int8Embedding(model.wte.weight)
        packed.replace(model, "wte", embedding)
        model.lm_head = Int8LMHead(embedding)
    elif pack:
        model.lm_head = packed.PackedLMHead(model.wte.weight.to(dtype), 1)
    elif on_cpu:
        model.lm_head = HalfLMHead(model.wte)
    for parameter in model.parameters():  # wpe, LayerNorms (and wte in 16 bits): own copies
        parameter.data = parameter.data.to(dtype, copy=True)
    give_back_freed_heap()


def give_back_freed_heap() -> None:
    """Returns to the system the heap pages a conversion's temporaries freed. They lie between the
    converted weights' allocations, so the C allocator keeps them resident (GPT-2 small in float16:
    650-675 MB resident after loading without this, 521-535 MB with it). The call trims the whole
    process's heap, whoever freed the pages, in milliseconds (8-19 ms measured on a loaded
    machine). glibc only (`malloc_trim`); elsewhere a no-op."""
    if not sys.platform.startswith("linux"):
        return
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # musl and other C libraries have no malloc_trim
        return
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    trim(0)


def weight_bytes(model) -> int:
    """Bytes the model's weights take in memory as they are stored now (int8 layers counted with
    their scales and their packed copies)."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    stored = (HalfLinear, Float16Linear, Int8Linear, Int8Embedding, packed.PackedLinear, packed.PackedLMHead)
    return total + sum(layer.bytes for layer in model.modules() if isinstance(layer, stored))


def unread_bytes(model) -> int:
    """Bytes of the weights in memory that a decode step does not read: the position table's rows
    but its own; the token table where the LM head reads a copy of its own (int8's packed rows,
    bfloat16's packed wte), of which a step looks up one row; and the padding of fbgemm's float16
    packs, which a product skips. Where the head multiplies by wte itself, the table is read whole
    every step."""
    wpe = model.wpe.weight
    unread = (wpe.size(0) - 1) * wpe.size(1) * wpe.element_size()
    unread += sum(layer.unread_bytes for layer in model.modules() if isinstance(layer, Float16Linear))
    if isinstance(model.lm_head, packed.PackedLMHead):
        unread += model.wte.weight.numel() * model.wte.weight.element_size()
    elif isinstance(model.wte, Int8Embedding):
        unread += model.wte.values.numel()
    return unread
