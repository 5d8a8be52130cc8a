"""Which kernel each product of a loaded float32 model uses: measured on this CPU, remembered.

For each distinct weight shape (GPT-2 small has five: c_attn, the attention's c_proj, c_fc, the
MLP's c_proj and the LM head) the plain product and the two-core split (kernels/split.py) are timed
on the model's weights of that shape, each round a call with every one of them as a decode step
makes (so each is read from memory, not the caches), interleaved, and the fastest of several rounds
of each kept (the minimum is what the kernel costs; slower rounds met other work). The split is
chosen where it takes under MARGIN of the plain product's time, and, for a block product, only
where it gives the plain product's digits exactly (checked on the weight, for 1 to BLOCK_MAX_ROWS
rows): a cached decode step then computes what a full pass does on every machine where it did
before, and where the BLAS adds in another order for a split (seen on a Xeon with AMX), the block
stays plain. Where the plain product itself gives a row other digits alone than among a prefill's
rows (an AMD EPYC's BLAS: every GPT-2 block shape), a cached step and a full pass differ in their
last digits whichever kernel multiplies: the split is chosen on speed alone, and so are the block's
partial sums (its weight's rows in two halves, kernels/split.py), which add in another order by
design and stream memory faster. If a split wins at one row, it is timed again at its largest row
count to decide how far it goes. The LM head of a table that holds float16 numbers only (a
checkpoint stored in float16, such as the bundled model) has one more candidate, timed the same
way: fbgemm's product by a float16 copy of the table (kernels/fbgemm_float16.py, `held_head`): the
same terms, added in another order, and half the bytes to read. Such a head is remembered under a
name of its own, so that a float32 table of the same shape never takes its choice.

The choices are kept in `$XDG_CACHE_HOME/gpt2viz/kernels.json` (kernels/cache.py),
under the CPU kind's key (kernels/cpu.py) and the thread count, so the next load measures
nothing. A measurement taken while other processes kept the CPUs busy (gpt2viz/cpu_share.py) is
kept marked `busy`, and measured again by the first load that finds the machine quiet (its load
average under a quarter of its CPUs): so a machine that is always busy, such as a test suite's, measures
once, and a quiet one ends with quiet numbers. `GPT2VIZ_KERNELS=plain` uses the plain products
everywhere and `=split` the split wherever its digits allow, without measuring (for benchmarks
and tests).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace

import torch

from ..cpu_share import BUSY_SHARE, cpu_ticks, others_share
from ..model.layers import Conv1D, TiedLMHead, plain_block_product, plain_head_product
from .batch import give_batch_products
from .cache import read_choices, write_choices
from .cpu import this_cpu
from .fbgemm_float16 import HeldHeadProduct, held_head, holds_float16
from .split import (
    BLOCK_MAX_ROWS,
    HEAD_MAX_ROWS,
    PartialSumsBlockProduct,
    SplitBlockProduct,
    SplitHeadProduct,
    block_splittable,
    conv1d_halves,
    conv1d_partial_sums,
    partial_sums_possible,
    unembed_halves,
)
from .timing import fastest_calls

MARGIN = 0.9  # a split must take under 90 % of the plain product's time: a smaller gain is noise
ROUNDS = 3  # timed rounds of each kernel, interleaved, at least (a round reads every weight of a shape)
BUDGET_S = 0.03  # and more, up to 40, while one shape's timing has taken less than this
MODE_ENV = "GPT2VIZ_KERNELS"
SECTION = "cpus"  # the cache file's section of these choices (kernels/cache.py)

PLAIN = "plain"
SPLIT = "two-core split"  # by columns: each output the plain product's dot product
PARTIAL_SUMS = "two-core partial sums"  # by rows: a block product's two partial sums, added
FLOAT16_HELD = "fbgemm float16"  # the LM head by a float16 copy of a table of float16 numbers
HELD_NAME = " (float16 values)"  # after a head shape's name where its table may be held so


@dataclass(frozen=True)
class Choice:
    """The kernel of the products with one weight shape, and why."""

    product: str  # "block" (x @ W + b) or "head" (x @ wte^T)
    n_in: int
    n_out: int
    kernel: str  # PLAIN, SPLIT or PARTIAL_SUMS
    max_rows: int  # the split runs for products of at most this many rows (0: never)
    reason: str  # "faster", "slower", "other digits", "odd width", "one thread", "set by GPT2VIZ_KERNELS"
    plain_us: float | None = None  # the fastest call measured, one row
    split_us: float | None = None
    partial_us: float | None = None  # the partial sums', where the plain product keeps no digits for them
    held_us: float | None = None  # the float16 copy's, where the LM head's table holds float16 numbers only
    busy: bool = False  # measured while other processes kept the CPUs busy
    layers: tuple[str, ...] = ()  # the model's layers with this shape: "attn.c_attn", "lm_head"

    def to_dict(self) -> dict:
        """As a trace and the cache record it (docs/trace.md, `model.kernels`); `held_us` only where
        the float16 copy was timed (an older gpt2viz reading the same cache would refuse the field)."""
        fields = {**asdict(self), "layers": list(self.layers)}
        if fields["held_us"] is None:
            del fields["held_us"]
        return fields

    @classmethod
    def from_dict(cls, fields: dict) -> Choice:
        """A choice read back from the cache; a ValueError for one that this version could not
        have written (a damaged or edited file): it is then measured again."""
        choice = cls(**{**fields, "layers": tuple(fields.get("layers", ()))})
        timed = (choice.plain_us, choice.split_us, choice.partial_us, choice.held_us)
        if not (
            choice.product in ("block", "head")
            and all(type(n) is int and n > 0 for n in (choice.n_in, choice.n_out))
            and choice.kernel in KERNELS
            and choice.reason in REASONS
            and type(choice.max_rows) is int
            and agrees(choice.product, choice.kernel, choice.reason, choice.max_rows)
            and all(t is None or (type(t) in (int, float) and 0 < t < 1e9) for t in timed)
            and type(choice.busy) is bool
        ):
            raise ValueError("not a kernel choice this version writes")
        return choice


KERNELS = (PLAIN, SPLIT, PARTIAL_SUMS, FLOAT16_HELD)
REASONS = ("faster", "slower", "other digits", "odd width", "one thread", "set by " + MODE_ENV)
SPLIT_REASONS = ("faster", "set by " + MODE_ENV)  # the reasons a split is chosen for


def agrees(product: str, kernel: str, reason: str, max_rows: int) -> bool:
    """Whether a kernel agrees with its reason and reach: a split exactly for a reason one is
    chosen for (the partial sums: a block product's, timed faster; the float16 copy: the head's,
    timed faster), reaching 1 row to its product's most (BLOCK_MAX_ROWS, HEAD_MAX_ROWS); plain, 0.
    (The cache's reader and the trace's checks both hold a choice to this.)"""
    if (kernel != PLAIN) != (reason in SPLIT_REASONS):
        return False
    if kernel == PARTIAL_SUMS and (product != "block" or reason != "faster"):
        return False
    if kernel == FLOAT16_HELD and (product != "head" or reason != "faster"):
        return False
    reach = BLOCK_MAX_ROWS if product == "block" else HEAD_MAX_ROWS
    return 0 < max_rows <= reach if kernel != PLAIN else max_rows == 0


def mode() -> str:
    value = os.environ.get(MODE_ENV, "").strip().lower()
    return value if value in (PLAIN, "split") else "measure"


def choose_kernels(model) -> list[Choice]:
    """Gives each product of a float32 CPU `model` its kernel (`Conv1D.product`,
    `TiedLMHead.product`) and returns the choices, one per weight shape; batched decode steps get
    packed weights (`batch_product`, kernels/batch.py) unless GPT2VIZ_KERNELS=plain. Other formats
    and devices: kernels/formats.py."""
    if model.precision != "float32" or model.device.type != "cpu":
        return []
    if mode() != PLAIN:
        give_batch_products(model)
    threads = torch.get_num_threads()
    if threads == 1 and (os.cpu_count() or 1) > 1:
        # Loaded while the machine was busy (gpt2viz/threads.py): choose for the two threads a
        # quiet moment gives, which the products check at each call.
        threads = 2
    key = this_cpu().key(threads)
    how = mode()
    cache = _read_cache()
    remembered = cache.get(key, {})
    made: dict[str, Choice] = {}
    layers: dict[str, list[str]] = {}
    shapes: dict[str, tuple[str, int, int, list]] = {}  # product, n_in, n_out, the layers in the pass's order
    float16_table = False  # whether the LM head's table holds float16 numbers only (fbgemm_float16)
    for path, layer in model.named_modules():
        if isinstance(layer, Conv1D):
            product, n_in, n_out = "block", *layer.weight.shape
        elif isinstance(layer, TiedLMHead):
            product, (n_out, n_in) = "head", layer.wte.weight.shape
            float16_table = how == "measure" and threads > 1 and holds_float16(layer.wte.weight)
        else:
            continue
        # A head whose table may be held in float16 is decided apart from one of the shape that may not.
        name = f"{product} {n_in}x{n_out}" + (HELD_NAME if product == "head" and float16_table else "")
        role = "lm_head" if product == "head" else path.split(".", 2)[-1]  # "h.3.attn.c_attn" -> "attn.c_attn"
        if role not in layers.setdefault(name, []):
            layers[name].append(role)
        shapes.setdefault(name, (product, n_in, n_out, []))[3].append(layer)
    before = cpu_ticks()
    for name, (product, n_in, n_out, of_shape) in shapes.items():
        first = of_shape[0]
        known = remembered.get(name)
        usable = known is not None and how == "measure" and not (known.busy and quiet_now())
        if usable and known.kernel != PLAIN and product == "block":
            # Checked again on this weight: another weight of the shape, or a BLAS steered
            # otherwise, may add in another order (a few small products per shape).
            usable = known.kernel in _at_threads(threads, _block_splits, first.weight, first.bias)
        if usable and known.kernel == FLOAT16_HELD:  # only a head of float16 numbers has it (an edited file may say otherwise)
            usable = product == "head" and float16_table
        # The copy is made where it is timed or was chosen, not on every load.
        held = held_head(first.wte.weight) if product == "head" and float16_table and (
            not usable or known.kernel == FLOAT16_HELD) else None
        made[name] = choice = known if usable else _at_threads(
            threads, _decide, of_shape, product, n_in, n_out, threads, how, held
        )
        for layer in of_shape:
            if product == "block":
                layer.product = _block_product(choice, threads)
            elif choice.kernel == FLOAT16_HELD and held is not None:
                layer.product = HeldHeadProduct(held, layer.wte.weight, choice.max_rows)
            else:
                layer.product = SplitHeadProduct(choice.max_rows, threads) if choice.kernel == SPLIT else plain_head_product
    measured = {name: c for name, c in made.items() if c is not remembered.get(name)}
    if measured and how == "measure":
        share = others_share(before, cpu_ticks())
        busy = share is not None and share > BUSY_SHARE  # unknown (no /proc/stat): taken as it is
        measured = {name: replace(c, busy=busy) for name, c in measured.items()}
        made.update(measured)
        _write_cache({**cache, key: {**remembered, **measured}})
    return [replace(c, layers=tuple(layers[name])) for name, c in made.items()]


def _block_product(choice: Choice, threads: int):
    """The product a block layer multiplies by, as `choice` says."""
    if choice.kernel == SPLIT:
        return SplitBlockProduct(choice.max_rows, threads)
    if choice.kernel == PARTIAL_SUMS:
        return PartialSumsBlockProduct(choice.max_rows, threads)
    return plain_block_product


def _at_threads(threads: int, work, *args):
    """`work(*args)` with torch's thread count set to `threads`, then set back."""
    before = torch.get_num_threads()
    if before == threads:
        return work(*args)
    torch.set_num_threads(threads)
    try:
        return work(*args)
    finally:
        torch.set_num_threads(before)


def quiet_now() -> bool:
    """Whether the machine looks quiet enough to measure again: its load average over the last
    minute under a quarter of its CPUs (False where the system does not say)."""
    try:
        return os.getloadavg()[0] < 0.25 * (os.cpu_count() or 1)
    except (AttributeError, OSError):
        return False


def _decide(layers: list, product: str, n_in: int, n_out: int, threads: int, how: str, held=None) -> Choice:
    """The kernel for one weight shape, whose `layers` are the model's: the splits its digits allow
    (a block product's column split where it keeps the plain product's digits or the plain product
    keeps none; its partial sums only where the plain product keeps none; the head's column split,
    and its float16 copy `held` where its table allows one), then plain or the fastest of them,
    timed on those layers' weights."""
    plain = Choice(product, n_in, n_out, PLAIN, 0, "")
    if threads < 2:
        return replace(plain, reason="one thread")
    splits = [SPLIT]
    if product == "block":
        splits = _block_splits(layers[0].weight, layers[0].bias)  # the digits checked on the first weight
        if not splits:
            return replace(plain, reason="odd width" if not block_splittable(n_out) else "other digits")
    max_rows = BLOCK_MAX_ROWS if product == "block" else HEAD_MAX_ROWS
    if how == PLAIN:
        return replace(plain, reason="set by " + MODE_ENV)
    if how == "split":
        if splits[0] == SPLIT:
            return Choice(product, n_in, n_out, SPLIT, max_rows, "set by " + MODE_ENV)
        return replace(plain, reason="odd width")  # the partial sums are chosen by timing alone
    timed = {kernel: _time_both(layers, product, 1, kernel) for kernel in splits}
    if held is not None:
        timed[FLOAT16_HELD] = _time_both(layers, product, 1, FLOAT16_HELD, held)
    plain_us = min(plain_us for plain_us, _ in timed.values())
    best = min(timed, key=lambda kernel: timed[kernel][1])  # the column split where they tie
    fields = {"plain_us": plain_us, "split_us": timed.get(SPLIT, (0, None))[1],
              "partial_us": timed.get(PARTIAL_SUMS, (0, None))[1], "held_us": timed.get(FLOAT16_HELD, (0, None))[1]}
    if timed[best][1] >= MARGIN * plain_us:
        return Choice(product, n_in, n_out, PLAIN, 0, "slower", **fields)
    many_plain, many_split = _time_both(layers, product, max_rows, best, *([held] if best == FLOAT16_HELD else []))
    reach = max_rows if many_split < MARGIN * many_plain else 1
    return Choice(product, n_in, n_out, best, reach, "faster", **fields)


def _block_splits(weight: torch.Tensor, bias: torch.Tensor) -> list[str]:
    """The splits that leave a block product the digits a decode step has: the column split where it
    gives the plain product's digits (and its halves are whole SIMD vectors), both splits where the
    plain product has none to keep (a row's digits alone differ from those among a prefill's rows)."""
    n_in, n_out = weight.shape
    keeps = _plain_rows_hold(weight, bias)
    allowed = ((SPLIT, block_splittable(n_out) and (not keeps or _same_digits(weight, bias))),
               (PARTIAL_SUMS, not keeps and partial_sums_possible(n_in)))
    return [kernel for kernel, ok in allowed if ok]


def _same_digits(weight: torch.Tensor, bias: torch.Tensor) -> bool:
    """Whether the split gives the plain product's digits, bit for bit, on this weight."""
    generator = torch.Generator().manual_seed(0)
    rows = torch.randn(BLOCK_MAX_ROWS, weight.size(0), generator=generator)
    return all(
        torch.equal(conv1d_halves(rows[:n], weight, bias), plain_block_product(rows[:n], weight, bias))
        for n in range(1, BLOCK_MAX_ROWS + 1)
    )


PREFILL_ROWS = 64  # the rows of the prefill-sized product a decode step's rows are checked against


def _plain_rows_hold(weight: torch.Tensor, bias: torch.Tensor) -> bool:
    """Whether the plain product gives 1 to BLOCK_MAX_ROWS rows the digits they get among
    PREFILL_ROWS rows in one product: then a cached decode step computes a full pass's numbers."""
    generator = torch.Generator().manual_seed(1)
    rows = torch.randn(PREFILL_ROWS, weight.size(0), generator=generator)
    whole = plain_block_product(rows, weight, bias)
    return all(
        torch.equal(plain_block_product(rows[:n], weight, bias), whole[:n]) for n in range(1, BLOCK_MAX_ROWS + 1)
    )


def _time_both(layers: list, product: str, n_rows: int, kernel: str = SPLIT, held=None) -> tuple[float, float]:
    """The plain product and the split `kernel` (or the head's float16 copy `held`), in µs a call:
    the fastest of several interleaved rounds, each a call with every one of `layers`' weights in
    the order of the pass, so that each weight is read from memory as in a decode step
    (kernels/timing.py)."""
    if product == "block":
        rows = torch.randn(n_rows, layers[0].weight.size(0))
        split = conv1d_partial_sums if kernel == PARTIAL_SUMS else conv1d_halves
        plain = lambda: [plain_block_product(rows, layer.weight, layer.bias) for layer in layers]
        fast = lambda: [split(rows, layer.weight, layer.bias) for layer in layers]
    else:
        wte = layers[0].wte.weight
        rows = torch.randn(n_rows, wte.size(1))
        plain = lambda: plain_head_product(rows, wte)
        fast = (lambda: held(rows)) if kernel == FLOAT16_HELD else (lambda: unembed_halves(rows, wte))
    calls = len(layers) if product == "block" else 1
    timed = fastest_calls({PLAIN: plain, kernel: fast}, ROUNDS, BUDGET_S)
    return round(timed[PLAIN] / calls, 1), round(timed[kernel] / calls, 1)


def _read_cache() -> dict[str, dict[str, Choice]]:
    return read_choices(SECTION, Choice.from_dict)


def _write_cache(cache: dict[str, dict[str, Choice]]) -> None:
    write_choices(SECTION, cache)
