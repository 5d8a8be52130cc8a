"""Which kernel each product of a loaded float32 model uses: measured on this CPU, remembered.

For each distinct weight shape (GPT-2 small has five: c_attn, the attention's c_proj, c_fc, the
MLP's c_proj and the LM head) the plain product and the two-core split (kernels/split.py) are
timed on that weight, interleaved, and the fastest of several calls of each kept (the minimum is
what the kernel costs; slower calls met other work). The split is chosen where it takes under
MARGIN of the plain product's time, and, for a block product, only where it gives the plain
product's digits exactly (checked on the weight, for 1 and BLOCK_MAX_ROWS rows): a cached decode
step then computes what a full pass does on every machine where it did before, and where the
BLAS adds in another order for a split (seen on a Xeon with AMX), the block stays plain. If the
split wins at one row, it is timed again at its largest row count to decide how far it goes.

The choices are kept in `$XDG_CACHE_HOME/gpt2viz/kernels.json` (default `~/.cache/gpt2viz`),
under the CPU kind's key (kernels/cpu.py) and the thread count, so the next load measures
nothing. A measurement taken while other processes kept the CPUs busy (gpt2viz/cpu_share.py) is
kept marked `busy`, and measured again by the first load that finds the machine quiet (its load
average under half its CPUs): so a machine that is always busy, such as a test suite's, measures
once, and a quiet one ends with quiet numbers. `GPT2VIZ_KERNELS=plain` uses the plain products everywhere and `=split` the
split wherever its digits allow, without measuring (for benchmarks and tests).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from ..cpu_share import BUSY_SHARE, cpu_ticks, others_share
from ..model.layers import Conv1D, TiedLMHead, plain_block_product, plain_head_product
from .cpu import this_cpu
from .split import (
    BLOCK_MAX_ROWS,
    HEAD_MAX_ROWS,
    SplitBlockProduct,
    SplitHeadProduct,
    block_splittable,
    conv1d_halves,
)

MARGIN = 0.9  # a split must take under 90 % of the plain product's time: a smaller gain is noise
ROUNDS = 7  # timed calls of each kernel, interleaved, at least
BUDGET_S = 0.03  # and more, up to 40, while one shape's timing has taken less than this
MODE_ENV = "GPT2VIZ_KERNELS"
CACHE_FILE = "kernels.json"
CACHE_VERSION = 1

PLAIN = "plain"
SPLIT = "two-core split"


@dataclass(frozen=True)
class Choice:
    """The kernel of the products with one weight shape, and why."""

    product: str  # "block" (x @ W + b) or "head" (x @ wte^T)
    n_in: int
    n_out: int
    kernel: str  # PLAIN or SPLIT
    max_rows: int  # the split runs for products of at most this many rows (0: never)
    reason: str  # "faster", "slower", "other digits", "odd width", "one thread", "set by GPT2VIZ_KERNELS"
    plain_us: float | None = None  # the fastest call measured, one row
    split_us: float | None = None
    busy: bool = False  # measured while other processes kept the CPUs busy
    layers: tuple[str, ...] = ()  # the model's layers with this shape: "attn.c_attn", "lm_head"

    def to_dict(self) -> dict:
        """As a trace and the cache record it (docs/trace.md, `model.kernels`)."""
        return {**asdict(self), "layers": list(self.layers)}

    @classmethod
    def from_dict(cls, fields: dict) -> "Choice":
        return cls(**{**fields, "layers": tuple(fields.get("layers", ()))})


REASONS = ("faster", "slower", "other digits", "odd width", "one thread", "set by " + MODE_ENV)


def cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpt2viz" / CACHE_FILE


def mode() -> str:
    value = os.environ.get(MODE_ENV, "").strip().lower()
    return value if value in (PLAIN, "split") else "measure"


def choose_kernels(model) -> list[Choice]:
    """Gives each product of a float32 CPU `model` its kernel (`Conv1D.product`,
    `TiedLMHead.product`) and returns the choices, one per weight shape. Other formats and
    devices keep their own layers (model/precision.py) and get no choice."""
    if model.precision != "float32" or model.device.type != "cpu":
        return []
    threads = torch.get_num_threads()
    key = this_cpu().key(threads)
    remembered = _read_cache().get(key, {})
    made: dict[str, Choice] = {}
    layers: dict[str, list[str]] = {}
    before = cpu_ticks()
    for path, layer in model.named_modules():
        if isinstance(layer, Conv1D):
            product, n_in, n_out = "block", *layer.weight.shape
        elif isinstance(layer, TiedLMHead):
            product, (n_out, n_in) = "head", layer.wte.weight.shape
        else:
            continue
        name = f"{product} {n_in}x{n_out}"
        role = "lm_head" if product == "head" else path.split(".", 2)[-1]  # "h.3.attn.c_attn" -> "attn.c_attn"
        if role not in layers.setdefault(name, []):
            layers[name].append(role)
        if name not in made:
            known = remembered.get(name)
            if known is not None and mode() == "measure" and not (known.busy and _quiet_now()):
                made[name] = known
            else:
                made[name] = _decide(layer, product, threads)
        choice = made[name]
        if product == "block":
            layer.product = SplitBlockProduct(choice.max_rows) if choice.kernel == SPLIT else plain_block_product
        else:
            layer.product = SplitHeadProduct(choice.max_rows) if choice.kernel == SPLIT else plain_head_product
    measured = {name: c for name, c in made.items() if c is not remembered.get(name)}
    if measured and mode() == "measure":
        share = others_share(before, cpu_ticks())
        busy = share is None or share > BUSY_SHARE
        measured = {name: replace(c, busy=busy) for name, c in measured.items()}
        made.update(measured)
        _write_cache(key, {**remembered, **measured})
    return [replace(c, layers=tuple(layers[name])) for name, c in made.items()]


def _quiet_now() -> bool:
    """Whether the machine looks quiet enough to measure again: its load average over the last
    minute under half its CPUs (False where the system does not say)."""
    try:
        return os.getloadavg()[0] < 0.5 * (os.cpu_count() or 1)
    except (AttributeError, OSError):
        return False


def _decide(layer, product: str, threads: int) -> Choice:
    weight = layer.weight if product == "block" else layer.wte.weight
    n_in, n_out = (weight.shape if product == "block" else weight.shape[::-1])
    plain = Choice(product, n_in, n_out, PLAIN, 0, "")
    if threads < 2:
        return replace(plain, reason="one thread")
    if product == "block" and not block_splittable(n_out):
        return replace(plain, reason="odd width")
    if product == "block" and not _same_digits(layer.weight, layer.bias):
        return replace(plain, reason="other digits")
    max_rows = BLOCK_MAX_ROWS if product == "block" else HEAD_MAX_ROWS
    if mode() == PLAIN:
        return replace(plain, reason="set by " + MODE_ENV)
    if mode() == "split":
        return Choice(product, n_in, n_out, SPLIT, max_rows, "set by " + MODE_ENV)
    plain_us, split_us = _time_both(layer, product, 1)
    if split_us >= MARGIN * plain_us:
        return Choice(product, n_in, n_out, PLAIN, 0, "slower", plain_us, split_us)
    many_plain, many_split = _time_both(layer, product, max_rows)
    reach = max_rows if many_split < MARGIN * many_plain else 1
    return Choice(product, n_in, n_out, SPLIT, reach, "faster", plain_us, split_us)


def _same_digits(weight: torch.Tensor, bias: torch.Tensor) -> bool:
    """Whether the split gives the plain product's digits, bit for bit, on this weight."""
    generator = torch.Generator().manual_seed(0)
    rows = torch.randn(BLOCK_MAX_ROWS, weight.size(0), generator=generator)
    return all(
        torch.equal(conv1d_halves(rows[:n], weight, bias), torch.addmm(bias, rows[:n], weight))
        for n in (1, BLOCK_MAX_ROWS)
    )


def _time_both(layer, product: str, n_rows: int) -> tuple[float, float]:
    """The fastest of several interleaved calls of the plain and the split product, in µs."""
    if product == "block":
        rows = torch.randn(n_rows, layer.weight.size(0))
        plain = lambda: torch.addmm(layer.bias, rows, layer.weight)
        split = SplitBlockProduct(n_rows)
        fast = lambda: split(rows, layer.weight, layer.bias)
    else:
        wte = layer.wte.weight
        rows = torch.randn(n_rows, wte.size(1))
        plain = lambda: torch.nn.functional.linear(rows, wte)
        split = SplitHeadProduct(n_rows)
        fast = lambda: split(rows, wte)
    best = [float("inf"), float("inf")]
    plain(), fast()  # the first calls pay for allocations and caches
    spent, rounds = 0.0, 0
    while rounds < ROUNDS or (spent < BUDGET_S and rounds < 40):
        for i, kernel in enumerate((plain, fast)):
            start = time.perf_counter()
            kernel()
            took = time.perf_counter() - start
            best[i] = min(best[i], took)
            spent += took
        rounds += 1
    return round(best[0] * 1e6, 1), round(best[1] * 1e6, 1)


def _read_cache() -> dict[str, dict[str, Choice]]:
    """The remembered choices by CPU key; nothing where the file is missing, unreadable or not
    what this version wrote (it is then measured again and rewritten)."""
    try:
        data = json.loads(cache_path().read_text(encoding="utf-8"))
        if data.get("version") != CACHE_VERSION:
            return {}
        return {key: {name: Choice.from_dict(fields) for name, fields in entries.items()} for key, entries in data["cpus"].items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def _write_cache(key: str, entries: dict[str, Choice]) -> None:
    """Keeps `entries` under `key`, written whole through a temporary file beside the cache (a
    reader never sees half a file); a cache that cannot be written is left as it is."""
    path = cache_path()
    try:
        cpus = {k: {name: c.to_dict() for name, c in v.items()} for k, v in _read_cache().items()}
        cpus[key] = {name: c.to_dict() for name, c in entries.items()}
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            temporary.write_text(json.dumps({"version": CACHE_VERSION, "cpus": cpus}, indent=1), encoding="utf-8")
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
    except OSError:
        pass
