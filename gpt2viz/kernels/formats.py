"""The number formats' kernels: which product multiplies by each weight of a bfloat16, float16 or
int8 model, chosen on this CPU, and the conversion of a loaded float32 model into the format.

The forward pass is the same maths in every format (gpt2viz/model/precision.py names them); only
the matrix products and the storage of their weights change, so a conversion swaps those layers
after loading and leaves the rest alone:

- **bfloat16 and float16** block products have up to three kernels: fbgemm's float16-weight product
  (kernels/fbgemm_float16.py; bfloat16 weights held exactly once scaled by a power of two),
  oneDNN's prepacked product (kernels/packed.py, where the CPU has oneDNN kernels for the format)
  and the plain 16-bit product (kernels/half.py, every CPU). Which is fastest depends on the CPU:
  fbgemm streams a one-row product's weights faster on an AVX2 or AVX-512 CPU without bfloat16 dot
  products, oneDNN's bfloat16 kernel can be where the CPU has them (AMX; on an AMD EPYC with
  AVX-512 BF16 only for some shapes) (benchmarks/RESULTS.md). So the kernels that hold a weight
  exactly and give each row the same digits whatever rows share the call (a cached decode step then
  computes what a full pass does) are timed on one row, the decode step's product, once per weight
  shape, interleaved, each on copies of the weight read in turn (so from memory, as in a step), and
  the fastest kept. The plain product is not row by row exact: it is used only where no other
  kernel holds a weight. The LM head is oneDNN's packed copy of wte in bfloat16 where the CPU has
  the kernels, else the plain product (a packed float16 copy would cost GPT-2 small ~100 MB for a
  fraction of a millisecond a step). Activations and the KV cache are in the format.
- **int8**: every block product and the LM head through fbgemm (kernels/int8.py), its inputs
  quantized to 8 bits or, on CPUs without VNNI, 7 (measured once per process). Activations and
  the KV cache stay float32.

The choices are cached with the float32 ones (kernels/cache.py, section "formats"), under the CPU
kind's key and the thread count; a measurement taken while the machine was busy is measured again
on a quiet load, as kernels/choice.py does. `GPT2VIZ_KERNELS=plain` (or `split`) measures nothing:
each weight then takes the first kernel that holds it in the order fbgemm, oneDNN, plain.
"""

from __future__ import annotations

import ctypes
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace

import torch

from ..cpu_share import BUSY_SHARE, cpu_ticks, others_share
from ..errors import SettingError
from ..i18n import N_
from ..model.layers import Layer
from ..model.precision import Precision
from . import fbgemm_float16, packed
from .cache import read_choices, write_choices
from .choice import MODE_ENV, mode, quiet_now
from .cpu import this_cpu
from .fbgemm_float16 import Float16Linear, HeldHeadProduct
from .half import HalfLinear, HalfLMHead
from .int8 import Int8Embedding, Int8Linear, Int8LMHead, int8_inputs_reduced
from .packed import PackedLinear, PackedLMHead
from .timing import fastest_calls

SECTION = "formats"  # the cache file's section of these choices
MARGIN = 0.95  # another kernel replaces the first that holds a weight only below 95 % of its time
ROUNDS = 3  # timed rounds of each kernel, interleaved, at least
COPIES_BYTES = 40 * 2**20  # a block shape's kernels are timed on copies of its weight filling this (above an L3)
COPIES_MAX = 8
BUDGET_S = 0.03  # and more, up to 40, while one shape's timing has taken less than this
CHECK_ROWS = 9  # rows of the exactness check: each alone against all in one call
HEAD_SAMPLE = 8192  # the LM head's kernels are timed on this many of wte's rows

# The kernels, in the order a weight tries them when nothing is measured.
FBGEMM = "fbgemm float16"
ONEDNN = "oneDNN packed"
PLAIN16 = "plain 16-bit"
INT8 = "fbgemm int8"
KERNELS = (FBGEMM, ONEDNN, PLAIN16, INT8)
# Why a kernel was chosen: the fastest measured; the only one that holds the weight exactly and
# row by row; the first that does, where nothing was measured; fbgemm's int8 product with 8-bit or
# (without VNNI) 7-bit inputs.
REASONS = ("fastest", "only kernel", "set by " + MODE_ENV, "8-bit inputs", "7-bit inputs")
FORMATS = ("bfloat16", "float16", "int8")


@dataclass(frozen=True)
class FormatChoice:
    """The kernel of a format's products with one weight shape, and why."""

    product: str  # "block" (x @ W + b) or "head" (x @ wte^T)
    n_in: int
    n_out: int
    dtype: str  # "bfloat16", "float16" or "int8"
    kernel: str  # one of KERNELS
    reason: str  # one of REASONS
    timed_us: dict[str, float]  # kernel -> its fastest one-row call; {} where nothing was measured
    busy: bool = False  # measured while other processes kept the CPUs busy
    layers: tuple[str, ...] = ()  # the model's layers with this shape and kernel: "attn.c_attn", "h.0.mlp.c_proj"

    def to_dict(self) -> dict:
        """As a trace and the cache record it (docs/trace.md, `model.kernels.formats`)."""
        return {**asdict(self), "timed_us": dict(self.timed_us), "layers": list(self.layers)}

    @classmethod
    def from_dict(cls, fields: dict) -> FormatChoice:
        """A choice read back from the cache; a ValueError for one this version could not have
        written (measured again)."""
        choice = cls(**{**fields, "layers": tuple(fields.get("layers", ()))})
        if not (
            choice.product in ("block", "head")
            and all(type(n) is int and n > 0 for n in (choice.n_in, choice.n_out))
            and choice.dtype in FORMATS
            and choice.kernel in KERNELS
            and choice.reason in REASONS
            and isinstance(choice.timed_us, dict)
            and all(k in KERNELS and type(t) in (int, float) and 0 < t < 1e9 for k, t in choice.timed_us.items())
            and (choice.reason != "fastest" or choice.kernel in choice.timed_us)
            and type(choice.busy) is bool
        ):
            raise ValueError("not a format's kernel choice this version writes")
        return choice


# -- the candidates ------------------------------------------------------------------------------


def _candidates(product: str, weight: torch.Tensor, bias: torch.Tensor, dtype: torch.dtype) -> list[tuple[str, object]]:
    """(kernel, a way to build its layer) for each kernel of this CPU that may suit a 16-bit weight
    `[in, out]` (the LM head's: wte^T, a zero bias), in the order tried when nothing is measured.
    fbgemm's builder gives None for a weight it cannot hold. The head tries oneDNN's copy first: it
    is unpadded (fbgemm's pads GPT-2's 768 inputs to 1,024 rows: 26 MB more for GPT-2 small)."""
    found: list[tuple[str, object]] = []
    if fbgemm_float16.available():
        found.append((FBGEMM, lambda: fbgemm_float16.layer_for(weight, bias, dtype)))
    if packed.available(dtype):
        onednn = (lambda: PackedLinear(weight, bias, 1, dtype)) if product == "block" else (
            lambda: PackedLMHead(weight.t().to(dtype), 1))
        found.insert(0 if product == "head" else len(found), (ONEDNN, onednn))
    return found


def _rows_exact(layer: Layer, n_in: int, dtype: torch.dtype) -> bool:
    """Whether `layer` gives each of CHECK_ROWS rows the digits it gives them all in one call."""
    generator = torch.Generator().manual_seed(0)
    rows = torch.randn(CHECK_ROWS, n_in, generator=generator).to(dtype)
    whole = layer(rows)
    return all(torch.equal(layer(rows[i : i + 1]), whole[i : i + 1]) for i in range(CHECK_ROWS))


def _time_one_row(layers: dict[str, list[Layer]], n_in: int, dtype: torch.dtype) -> dict[str, float]:
    """Each kernel's one-row call, in µs: the fastest of several interleaved rounds, a round a call
    with each of its layers (copies of one weight: so each is read from memory, not the caches, as
    in a decode step, where every other weight is read between two products with one)."""
    row = torch.randn(1, n_in).to(dtype)
    rounds = {name: (lambda kernel_layers=kernel_layers: [layer(row) for layer in kernel_layers])
              for name, kernel_layers in layers.items()}
    return {name: round(us / len(layers[name]), 1) for name, us in fastest_calls(rounds, ROUNDS, BUDGET_S).items()}


def _copies(weight: torch.Tensor) -> list[torch.Tensor]:
    """Other weights of `weight`'s shape, enough that with it they fill COPIES_BYTES in a 16-bit
    format (COPIES_MAX in all at most): the timing's rounds read them all in turn."""
    n = max(0, min(COPIES_MAX, -(-COPIES_BYTES // (weight.numel() * 2))) - 1)
    return [weight + (k + 1) * 1e-4 for k in range(n)]


def _built_copies(kernel: str, product: str, copies: list[torch.Tensor], bias: torch.Tensor, dtype: torch.dtype) -> list[Layer]:
    """`kernel`'s layers for `copies` of a weight (those it holds)."""
    layers = (dict(_candidates(product, copy, bias, dtype))[kernel]() for copy in copies)
    return [layer for layer in layers if layer is not None]


def _measure(
    product: str, weight: torch.Tensor, bias: torch.Tensor, dtype: torch.dtype, how: str
) -> tuple[tuple[str, str, dict], dict[str, Layer]]:
    """((kernel, reason, timings), the layers built) for a weight `[in, out]`: a block shape's is
    measured on random values, which every kernel holds, the LM head's on rows of wte (whether a
    kernel holds the real weight is checked weight by weight: `_layer`)."""
    n_in = weight.size(0)
    built: dict[str, Layer] = {}
    for kernel, build in _candidates(product, weight, bias, dtype):
        layer = build()
        if layer is not None and (kernel == FBGEMM or _rows_exact(layer, n_in, dtype)):
            built[kernel] = layer  # fbgemm's product is row by row exact by construction
        if built and how != "measure":
            break
    if not built:
        return (PLAIN16, "only kernel", {}), built
    if how != "measure":
        return (next(iter(built)), "set by " + MODE_ENV, {}), built
    if len(built) == 1:
        return (next(iter(built)), "only kernel", {}), built
    copies = _copies(weight) if product == "block" else []  # the head's sample is one large read already
    timed = _time_one_row({kernel: [layer] + _built_copies(kernel, product, copies, bias, dtype)
                           for kernel, layer in built.items()}, n_in, dtype)
    first = next(iter(built))
    fastest = min(timed, key=timed.__getitem__)
    return ((fastest if timed[fastest] < MARGIN * timed[first] else first), "fastest", timed), built


def _random_weight(n_in: int, n_out: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(n_in, n_out, generator=generator) * 0.02, torch.zeros(n_out)


def _layer(
    kernel: str, product: str, weight: torch.Tensor, bias: torch.Tensor, dtype: torch.dtype, plain
) -> tuple[str, Layer]:
    """The layer of `kernel` for one weight, or the next kernel that holds it (fbgemm cannot hold
    some weights; oneDNN's digits are checked again on each); `plain()` where none does."""
    builders = dict(_candidates(product, weight, bias, dtype))
    names = list(builders)
    order = names[names.index(kernel):] + names[: names.index(kernel)] if kernel in names else names
    for name in order:
        layer = builders[name]()
        if layer is not None and (name == FBGEMM or _rows_exact(layer, weight.size(0), dtype)):
            return name, layer
    return PLAIN16, plain()


# -- converting a loaded model -------------------------------------------------------------------


@torch.inference_mode()
def apply_precision(model, precision: Precision) -> list[FormatChoice]:
    """Converts a model loaded in float32 to `precision`, once: the matrix products get their
    format's kernels (chosen on this CPU), and every other weight (embeddings, LayerNorms) is
    copied into the format, so nothing keeps the checkpoint's memory mapping alive. Returns the
    choices, one per weight shape and kernel; float32 needs no change (kernels/choice.py chooses
    its products) and a GPU keeps the checkpoint's layout (it multiplies 16-bit floats well)."""
    model.precision = precision.name
    if precision.name == "float32":
        return []
    if precision.quantized and model.device.type != "cpu":
        raise SettingError("dtype", N_("{setting} int8 runs on the CPU only (fbgemm)"))
    dtype = precision.compute_dtype
    sites = packed.product_sites(model)
    if model.device.type != "cpu":
        for parent, name in sites:
            conv = getattr(parent, name)
            conv.weight.data, conv.bias.data = conv.weight.to(dtype), conv.bias.to(dtype)
        _own_copies(model, dtype)
        return []
    choices = _int8(model, sites) if precision.quantized else _sixteen_bits(model, sites, precision.name, dtype)
    _own_copies(model, dtype)
    give_back_freed_heap()
    return choices


def _int8(model, sites) -> list[FormatChoice]:
    reason = "7-bit inputs" if int8_inputs_reduced() else "8-bit inputs"
    shapes = [(_role(site), *getattr(*site).weight.shape) for site in sites]
    # Matrices convert independently, so one per thread: quantizing and packing run on one core
    # each (benchmarks/RESULTS.md: load times).
    with ThreadPoolExecutor(max_workers=max(1, torch.get_num_threads())) as pool:
        layers = list(pool.map(_int8_layer, [getattr(*site) for site in sites]))
    for (parent, name), layer in zip(sites, layers):
        packed.replace(parent, name, layer)
    embedding = Int8Embedding(model.wte.weight)
    packed.replace(model, "wte", embedding)
    model.lm_head = Int8LMHead(embedding)
    vocab, width = embedding.values.shape
    made = [(role, "block", n_in, n_out, INT8, reason, {}, False) for role, n_in, n_out in shapes]
    return _grouped(made + [("lm_head", "head", width, vocab, INT8, reason, {}, False)], "int8")


def _int8_layer(conv) -> Layer:
    with torch.inference_mode():  # a worker thread's own mode
        return Int8Linear(conv.weight, conv.bias)


def _sixteen_bits(model, sites, name: str, dtype: torch.dtype) -> list[FormatChoice]:
    """Each block product's kernel: measured once per weight shape (or read from the cache), then
    built for every weight of the shape, one matrix per thread."""
    how = mode()
    key = this_cpu().key(torch.get_num_threads())
    cache = _read_cache()
    remembered = cache.get(key, {})
    decided: dict[str, FormatChoice] = {}
    before = cpu_ticks()
    for site in sites:
        n_in, n_out = getattr(*site).weight.shape
        shape = f"{name} block {n_in}x{n_out}"
        if shape in decided:
            continue
        if _still_good(remembered.get(shape), how):
            decided[shape] = remembered[shape]
            continue
        measured_as, _ = _measure("block", *_random_weight(n_in, n_out), dtype, how)
        decided[shape] = FormatChoice("block", n_in, n_out, name, *measured_as)
    # The LM head (x @ wte^T), unless remembered: measured on wte's first HEAD_SAMPLE rows (a
    # kernel's time grows with the rows it streams; packing all of them twice took over a second).
    vocab, width = model.wte.weight.shape
    head_shape = f"{name} head {width}x{vocab}"
    if _still_good(remembered.get(head_shape), how):
        decided[head_shape] = remembered[head_shape]
    else:
        sample = model.wte.weight[:HEAD_SAMPLE]
        measured_as, _ = _measure("head", sample.t(), torch.zeros(sample.size(0)), dtype, how)
        decided[head_shape] = FormatChoice("head", width, vocab, name, *measured_as)

    measured = {shape: c for shape, c in decided.items() if c is not remembered.get(shape)}
    if measured and how == "measure":
        share = others_share(before, cpu_ticks())
        busy = share is not None and share > BUSY_SHARE  # unknown (no /proc/stat): taken as it is
        decided.update({shape: replace(c, busy=busy) for shape, c in measured.items()})
        _write_cache({**cache, key: {**remembered, **{shape: decided[shape] for shape in measured}}})

    head_choice, wte = decided[head_shape], model.wte

    def layer_for(index: int) -> tuple[str, Layer]:
        with torch.inference_mode():  # a worker thread's own mode
            if index == len(sites):  # the LM head, its pack the largest: started first
                return _layer(head_choice.kernel, "head", wte.weight.t(), torch.zeros(vocab), dtype,
                              lambda: HalfLMHead(wte))
            conv = getattr(*sites[index])
            n_in, n_out = conv.weight.shape
            return _layer(decided[f"{name} block {n_in}x{n_out}"].kernel, "block", conv.weight, conv.bias, dtype,
                          lambda: HalfLinear(conv.weight, conv.bias, dtype))

    # Matrices convert independently, so one per thread: fbgemm's packs and the checks run on one
    # core each (benchmarks/RESULTS.md: load times).
    with ThreadPoolExecutor(max_workers=max(1, torch.get_num_threads())) as pool:
        head_layer = pool.submit(layer_for, len(sites))
        layers = list(pool.map(layer_for, range(len(sites))))
        head, model.lm_head = head_layer.result()
    made = []
    for site, (kernel, layer) in zip(sites, layers):
        n_in, n_out = getattr(*site).weight.shape
        choice = decided[f"{name} block {n_in}x{n_out}"]
        if kernel == choice.kernel:
            made.append((_role(site), "block", n_in, n_out, kernel, choice.reason, choice.timed_us, choice.busy))
        else:  # a weight its shape's kernel cannot hold (fbgemm): named whole ("h.0.mlp.c_proj")
            made.append((_path(model, site), "block", n_in, n_out, kernel, "only kernel", {}, False))
        packed.replace(*site, layer)
    timed, busy = (head_choice.timed_us, head_choice.busy) if head == head_choice.kernel else ({}, False)
    reason = head_choice.reason if head == head_choice.kernel else "only kernel"
    return _grouped(made + [("lm_head", "head", width, vocab, head, reason, timed, busy)], name)


def _still_good(known: FormatChoice | None, how: str) -> bool:
    """Whether a remembered choice stands: measured before, and not on a busy machine that is quiet
    now (then it is measured again, as kernels/choice.py does)."""
    return known is not None and how == "measure" and not (known.busy and quiet_now())


def _grouped(made: list[tuple], dtype: str) -> list[FormatChoice]:
    """One choice per (product, shape, kernel, reason), naming its layers in the pass's order."""
    groups: dict[tuple, tuple[dict, bool, list[str]]] = {}
    for role, product, n_in, n_out, kernel, reason, timed, busy in made:
        group = groups.setdefault((product, n_in, n_out, kernel, reason), (timed, busy, []))
        if role not in group[2]:
            group[2].append(role)
    return [
        FormatChoice(product, n_in, n_out, dtype, kernel, reason, timed, busy, tuple(layers))
        for (product, n_in, n_out, kernel, reason), (timed, busy, layers) in groups.items()
    ]


def _role(site) -> str:
    """A block product's name within its block: "attn.c_attn", "mlp.c_proj"."""
    parent, name = site
    return f"{'attn' if hasattr(parent, 'c_attn') else 'mlp'}.{name}"


def _path(model, site) -> str:
    """A block product's full name: "h.0.mlp.c_proj"."""
    parent = site[0]
    for index, block in enumerate(model.h):
        if parent is block.attn or parent is block.mlp:
            return f"h.{index}.{_role(site)}"
    return _role(site)


def _own_copies(model, dtype: torch.dtype) -> None:
    for parameter in model.parameters():  # wpe, LayerNorms (and wte in 16 bits): own copies
        parameter.data = parameter.data.to(dtype, copy=True)


def _read_cache() -> dict[str, dict[str, FormatChoice]]:
    return read_choices(SECTION, FormatChoice.from_dict)


def _write_cache(cache: dict[str, dict[str, FormatChoice]]) -> None:
    write_choices(SECTION, cache)


def give_back_freed_heap() -> None:
    """Returns to the system the heap pages a conversion's temporaries freed. They lie between the
    converted weights' allocations, so the C allocator keeps them resident (GPT-2 small in float16:
    ~130 MB more without this). The call trims the whole process's heap, whoever freed the pages,
    in milliseconds. glibc only (`malloc_trim`); elsewhere a no-op."""
    if not sys.platform.startswith("linux"):
        return
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # musl and other C libraries have no malloc_trim
        return
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    trim(0)


STORED = (HalfLinear, Float16Linear, Int8Linear, Int8Embedding, PackedLinear, PackedLMHead)  # layers with `bytes`


def weight_bytes(model) -> int:
    """Bytes the model's weights take in memory as they are stored now (int8 layers counted with
    their scales and their packed copies; a float32 LM head's float16 copy)."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    held = _held_head(model)
    return total + sum(layer.bytes for layer in model.modules() if isinstance(layer, STORED)) + (held.bytes if held else 0)


def _held_head(model) -> Float16Linear | None:
    """The float16 copy a float32 model's LM head multiplies by (kernels/fbgemm_float16.py,
    `held_head`), if it has one."""
    product = getattr(model.lm_head, "product", None)
    return product.pack if isinstance(product, HeldHeadProduct) else None


def unread_bytes(model) -> int:
    """Bytes of the weights in memory that a decode step does not read: the position table's rows
    but its own; the token table where the LM head reads a copy of its own (int8's packed rows,
    a 16-bit format's oneDNN or fbgemm pack, a float32 table of float16 numbers' fbgemm pack), of
    which a step looks up one row; and the padding of fbgemm's float16 packs, which a product skips. Where the head multiplies by wte itself, the table is read whole
    every step."""
    wpe = model.wpe.weight
    unread = (wpe.size(0) - 1) * wpe.size(1) * wpe.element_size()
    unread += sum(layer.unread_bytes for layer in model.modules() if isinstance(layer, Float16Linear))
    held = _held_head(model)
    if held is not None:  # a float32 head's float16 copy: its padding is skipped too
        unread += held.unread_bytes
    if held is not None or isinstance(model.lm_head, (PackedLMHead, Float16Linear)):  # a copy of its own
        unread += model.wte.weight.numel() * model.wte.weight.element_size()
    elif isinstance(model.wte, Int8Embedding):
        unread += model.wte.values.numel()
    return unread
