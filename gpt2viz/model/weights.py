"""Reading GPT-2 weights from safetensors files, checked against the config before use.

Each tensor is read into memory of its own, never used from a mapping of the file (which another
program may rewrite: `read_tensors`); one stored in the compute dtype is used as read, not copied.
Pickle-based files (`pytorch_model.bin`) are never opened, because unpickling runs code.

Nothing is read or built from what config.json claims before the files agree with it: first
each file's header (a regular file, a header of at most MAX_SAFETENSORS_HEADER_BYTES), then
every tensor's name, dtype and shape against the config, and only then the tensors' bytes. So
the memory a checkpoint takes is what its files hold, whatever its config.json says.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from ..errors import WeightsError, notice
from ..i18n import _, count
from ..input_files import (
    MAX_INDEX_BYTES, MAX_SAFETENSORS_HEADER_BYTES, FileRefused, checked_size, open_regular, read_json, shown,
)
from .config import LIMITS, GPT2Config
from .files import (
    BUFFER, LM_HEAD, PARAMETER, STORED, TIED, FileRecord, TensorRecord, WeightsRecord, in_file_mappings, tensor_bytes,
)

FLOAT_DTYPES = {
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "F64": torch.float64,
}

# Buffers some checkpoints carry (the causal mask, a masking constant): not parameters.
_IGNORED_SUFFIXES = (".attn.bias", ".attn.masked_bias")
# The most tensors a GPT-2 within config.LIMITS stores: 12 a block and 2 mask buffers, wte, wpe,
# ln_f's two and a tied lm_head.
MAX_TENSORS = 14 * LIMITS["n_layer"] + 5
_BLOCK = re.compile(r"h\.(\d+)\.")


def expected_shapes(config: GPT2Config) -> dict[str, tuple[int, ...]]:
    """Every parameter GPT-2 needs, by its bare checkpoint name, with its shape."""
    C, F, V = config.n_embd, config.d_mlp, config.vocab_size
    shapes: dict[str, tuple[int, ...]] = {"wte.weight": (V, C), "wpe.weight": (config.n_ctx, C)}
    for i in range(config.n_layer):
        p = f"h.{i}."
        shapes.update(
            {
                p + "ln_1.weight": (C,),
                p + "ln_1.bias": (C,),
                p + "attn.c_attn.weight": (C, 3 * C),
                p + "attn.c_attn.bias": (3 * C,),
                p + "attn.c_proj.weight": (C, C),
                p + "attn.c_proj.bias": (C,),
                p + "ln_2.weight": (C,),
                p + "ln_2.bias": (C,),
                p + "mlp.c_fc.weight": (C, F),
                p + "mlp.c_fc.bias": (F,),
                p + "mlp.c_proj.weight": (F, C),
                p + "mlp.c_proj.bias": (C,),
            }
        )
    shapes["ln_f.weight"] = (C,)
    shapes["ln_f.bias"] = (C,)
    return shapes


@dataclass
class LoadedWeights:
    """The checked tensors by bare name, and anything the user should be told about them."""

    tensors: dict[str, torch.Tensor]
    stored_dtype: str
    file_bytes: int
    notices: list[dict] = field(default_factory=list)  # gpt2viz.errors.notice
    record: WeightsRecord | None = None  # every tensor the files store, as the loader saw it
    # The parameters as safetensors handed them over, before any conversion: kept until the model
    # holds its weights, to tell which it uses in place (LanguageModel counts them, then drops these).
    as_read: list[torch.Tensor] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


def find_weight_files(directory: Path) -> list[Path]:
    """The safetensors file(s) of a checkpoint directory, following a shard index if present."""
    single = directory / "model.safetensors"
    if _present(single):  # whatever it is: a directory or a pipe by that name is said to be one
        _check_file(single)
        return [single]
    index = directory / "model.safetensors.index.json"
    if _present(index):
        files = [directory / name for name in shard_names(index)]
        missing = [str(f) for f in files if not _present(f)]
        if missing:
            raise WeightsError(_("{path}: shard {shard} is missing").format(path=index, shard=missing[0]))
        for f in files:
            _check_file(f)
        return files
    if _present(directory / "pytorch_model.bin"):
        raise WeightsError(
            _(
                "{path}: only pytorch_model.bin found; gpt2viz reads safetensors only and never unpickles "
                ".bin files (convert with transformers: {code})"
            ).format(path=directory, code="model.save_pretrained(dir, safe_serialization=True)")
        )
    raise WeightsError(_("{path}: no model.safetensors").format(path=directory))


def shard_names(index: Path) -> list[str]:
    """The shard files a `model.safetensors.index.json` names: a regular file of at most
    MAX_INDEX_BYTES whose `weight_map` maps tensor names to file names in its own directory."""
    try:
        doc = read_json(index, MAX_INDEX_BYTES)
    except FileRefused as err:
        raise WeightsError(_("{path}: {problem}").format(path=index, problem=err.problem)) from None
    weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise WeightsError(
            _("{path}: not a valid shard index (no weight_map object naming the files)").format(path=index)
        )
    if len(weight_map) > MAX_TENSORS:
        raise WeightsError(
            _("{path}: lists {n} tensors; a GPT-2 that gpt2viz loads has at most {max}").format(
                path=index, n=count(len(weight_map)), max=count(MAX_TENSORS)
            )
        )
    names = set()
    for value in weight_map.values():
        if not _is_file_name(value):
            raise WeightsError(
                _("{path}: weight_map names {value}, not the name of a file beside the index").format(
                    path=index, value=shown(value)
                )
            )
        names.add(value)
    return sorted(names)


def _is_file_name(value: object) -> bool:
    """Whether `value` names a file in the index's own directory (no path, no parent)."""
    if not isinstance(value, str) or value in ("", ".", "..") or "/" in value or "\\" in value or "\0" in value:
        return False
    try:
        return len(value.encode("utf-8")) <= 255
    except UnicodeEncodeError:  # a lone surrogate
        return False


def _present(path: Path) -> bool:
    """Whether anything is at `path` (a dangling link counts: reading it says what is wrong)."""
    try:
        path.lstat()
    except OSError:
        return False
    return True


def _check_file(path: Path) -> None:
    """Refuses a weights file that is not a regular file (a directory, a pipe, a device)."""
    try:
        checked_size(path, sys.maxsize)
    except FileRefused as err:
        raise WeightsError(_("{path}: {problem}").format(path=path, problem=err.problem)) from None


def _bare_name(name: str) -> str:
    return name[len("transformer.") :] if name.startswith("transformer.") else name


@dataclass(frozen=True)
class StoredTensor:
    """A tensor as a safetensors header describes it: where, its dtype and its shape."""

    file: Path
    name: str  # as stored, with a `transformer.` prefix if the file has one
    dtype: str
    shape: tuple[int, ...]
    at: tuple[int, int] = (0, 0)  # where its bytes lie in the file: [start, end)


def _read_header(path: Path) -> tuple[int, int, bytes]:
    """The file's size, its header's (8 bytes and the JSON) and the JSON's bytes, once its first 8
    bytes (the header's length) promise a header of at most MAX_SAFETENSORS_HEADER_BYTES that ends
    inside the file. safetensors itself allows 100 MB."""
    try:
        fd = open_regular(path, sys.maxsize)
    except FileRefused as err:
        raise WeightsError(_("{path}: {problem}").format(path=path, problem=err.problem)) from None
    with os.fdopen(fd, "rb") as f:
        try:
            size = os.fstat(fd).st_size
            head = f.read(8)
        except OSError as err:
            raise WeightsError(_("{path}: cannot read weights ({error})").format(path=path, error=err.strerror)) from None
        if len(head) < 8:
            raise WeightsError(_("{path}: not a valid safetensors file (shorter than its 8-byte header length)").format(path=path))
        n = int.from_bytes(head, "little")
        if n > MAX_SAFETENSORS_HEADER_BYTES:
            raise WeightsError(
                _("{path}: a header of {n} bytes, more than gpt2viz reads ({limit} bytes)").format(
                    path=path, n=count(n), limit=count(MAX_SAFETENSORS_HEADER_BYTES)
                )
            )
        if 8 + n > size:
            raise WeightsError(_("{path}: not a valid safetensors file (its header runs past the end of the file)").format(path=path))
        try:
            header = f.read(n)
        except OSError as err:
            raise WeightsError(_("{path}: cannot read weights ({error})").format(path=path, error=err.strerror)) from None
    return size, 8 + n, header


def is_buffer(tensor: StoredTensor) -> bool:
    """Whether a stored tensor is a mask buffer, not a parameter: never read, whatever its dtype."""
    return _bare_name(tensor.name).endswith(_IGNORED_SUFFIXES)


def read_headers(files: list[Path]) -> tuple[list[StoredTensor], list[tuple[int, int]]]:
    """Every tensor the files store (mask buffers included: `is_buffer`), from their headers
    alone, and each file's size and header size. No tensor's bytes are read."""
    stored: list[StoredTensor] = []
    sizes = []
    for path in files:
        size, header_bytes, header = _read_header(path)
        sizes.append((size, header_bytes))
        try:
            with safe_open(str(path), framework="pt", device="cpu") as f:  # checks the header whole
                names = f.keys()
                if len(names) > MAX_TENSORS:
                    raise WeightsError(
                        _("{path}: holds {n} tensors; a GPT-2 that gpt2viz loads has at most {max}").format(
                            path=path, n=count(len(names)), max=count(MAX_TENSORS)
                        )
                    )
                offsets = _data_offsets(header, header_bytes)
                for name in names:
                    info = f.get_slice(name)  # the header's entry (dtype, shape): no bytes read
                    stored.append(StoredTensor(path, name, info.get_dtype(), tuple(info.get_shape()), offsets[name]))
        except SafetensorError as err:
            raise WeightsError(_("{path}: not a valid safetensors file ({error})").format(path=path, error=err)) from None
        except (OSError, ValueError, RuntimeError) as err:
            raise WeightsError(_("{path}: cannot read weights ({error})").format(path=path, error=err)) from None
    return stored, sizes


def check_against_config(stored: list[StoredTensor], config: GPT2Config) -> tuple[dict[str, StoredTensor], StoredTensor | None]:
    """The stored parameters by bare name, and the stored lm_head if any, once every one has a
    floating-point dtype and the shape config.json implies, and none is missing, extra or stored
    twice. WeightsError names the first that does not."""
    blocks = {int(m.group(1)) for t in stored if (m := _BLOCK.match(_bare_name(t.name)))}
    if blocks and config.n_layer > max(blocks) + 1:  # (a block too many is an unexpected tensor, named below)
        raise WeightsError(
            _("{file}: config.json says n_layer {n_layer}, but the weights hold {blocks} blocks").format(
                file=stored[0].file.name, n_layer=count(config.n_layer), blocks=count(max(blocks) + 1)
            )
        )
    expected = expected_shapes(config)  # at most 12 x LIMITS["n_layer"] + 4 entries
    by_name: dict[str, StoredTensor] = {}
    lm_head = None
    for t in stored:
        bare = _bare_name(t.name)
        if t.dtype not in FLOAT_DTYPES:
            raise WeightsError(
                _("{file}: tensor {name} has dtype {dtype}; expected floating point").format(
                    file=t.file.name, name=t.name, dtype=t.dtype
                )
            )
        if bare == "lm_head.weight":
            lm_head = t
            continue
        if bare not in expected:
            raise WeightsError(_("{file}: unexpected tensor {name} (not part of GPT-2)").format(file=t.file.name, name=t.name))
        if bare in by_name:
            raise WeightsError(_("{file}: tensor {name} is stored twice").format(file=t.file.name, name=bare))
        by_name[bare] = t
    first = stored[0].file.name if stored else "model.safetensors"
    for name, shape in expected.items():
        if name not in by_name:
            raise WeightsError(_("{file}: tensor {name} is missing").format(file=first, name=name))
        got = by_name[name].shape
        if got != shape:
            raise WeightsError(
                _("{file}: tensor {name} has shape {shape} but config.json implies {expected}").format(
                    file=by_name[name].file.name, name=name, shape=list(got), expected=list(shape)
                )
            )
    if lm_head is not None and lm_head.shape != expected["wte.weight"]:
        raise _untied(lm_head)
    return by_name, lm_head


def _untied(lm_head: StoredTensor) -> WeightsError:
    return WeightsError(
        _("{file}: {name} differs from wte.weight; gpt2viz supports only the tied LM head").format(
            file=lm_head.file.name, name=lm_head.name
        )
    )


def _data_offsets(header: bytes, header_bytes: int) -> dict[str, tuple[int, int]]:
    """Where each tensor's bytes lie in the file, from its JSON header (safe_open has checked that
    the ranges lie in the file, one after another, and match each dtype and shape)."""
    return {
        name: (header_bytes + entry["data_offsets"][0], header_bytes + entry["data_offsets"][1])
        for name, entry in json.loads(header).items() if name != "__metadata__"
    }


def read_tensors(wanted: list[StoredTensor]) -> list[torch.Tensor]:
    """The bytes of the checked tensors, read from the files into memory of their own.

    Read, not mapped: safetensors' `get_tensor` hands over tensors in a memory mapping of the file,
    and a model that used a float32 file's mapped pages in place died with SIGBUS (no message, the
    terminal left in the app's modes) when a training loop rewrote the checkpoint under it. Copying
    out of the mapping instead held the mapped pages and the copies at once (gpt2-small: a peak of
    1.24 GB against 0.77 GB). Reading each tensor into a buffer torch allocated costs neither: one
    pass over the file, resident memory as the model's own. (safetensors stores little-endian
    numbers, as every machine torch runs on here is.)"""
    out: list[torch.Tensor] = []
    files: dict[Path, object] = {}
    try:
        for t in wanted:
            f = files.get(t.file) or files.setdefault(t.file, open(t.file, "rb"))
            tensor = torch.empty(t.shape, dtype=FLOAT_DTYPES[t.dtype])
            start, end = t.at
            if end > start:
                f.seek(start)
                if f.readinto((ctypes.c_char * (end - start)).from_address(tensor.data_ptr())) != end - start:
                    raise WeightsError(_("{path}: the file got shorter while it was read").format(path=t.file))
            out.append(tensor)
    except OSError as err:
        raise WeightsError(_("{path}: cannot read weights ({error})").format(path=t.file, error=err.strerror or err)) from None
    finally:
        for f in files.values():
            f.close()
    return out


def load_weights(
    directory: Path, config: GPT2Config, dtype: torch.dtype = torch.float32, device: str = "cpu"
) -> LoadedWeights:
    """Reads, checks and converts the weights of the checkpoint in `directory`: the headers are
    checked against `config` before any tensor's bytes are read."""
    files = find_weight_files(directory)
    every, sizes = read_headers(files)
    stored = [t for t in every if not is_buffer(t)]
    by_name, lm_head_info = check_against_config(stored, config)
    names = list(by_name)
    wanted = [by_name[n] for n in names] + ([lm_head_info] if lm_head_info is not None else [])
    loaded = read_tensors(wanted)
    tensors = dict(zip(names, loaded))
    stored_dtypes = {t.dtype for t in wanted}

    if lm_head_info is not None:
        head = loaded[-1]
        if not torch.equal(head, tensors["wte.weight"]):
            raise _untied(lm_head_info)

    converted = {name: t.to(device=device, dtype=dtype) for name, t in tensors.items()}
    notices = []
    for name, tensor in converted.items():
        # A sum is one pass with no temporary; only if it is not finite look element by element.
        if not torch.isfinite(tensor.sum()) and not torch.isfinite(tensor).all():
            notices.append(notice("non_finite_weights", tensor=name))
    stored_name = "+".join(sorted(stored_dtypes)) if stored_dtypes else "none"
    record = _record(files, sizes, every, lm_head_info)
    file_bytes = sum(size for size, _header in sizes)
    return LoadedWeights(converted, stored_name, file_bytes, notices, record, list(tensors.values()), files)


def record_use(weights: LoadedWeights, model: torch.nn.Module) -> WeightsRecord:
    """`weights.record` once `model` holds its weights: whether safetensors handed the tensors over
    from a memory mapping of their file, and how many of them the model uses in place (the others
    were copied: converted to another number format, or moved to another device). Lets go of the
    tensors as read."""
    read = [t for t in weights.as_read if t.numel()]
    mapped = in_file_mappings(weights.files, [t.data_ptr() for t in read])
    held = {t.data_ptr() for t in itertools.chain(model.parameters(), model.buffers()) if t.numel()}
    in_place = sum(1 for t in read if t.data_ptr() in held)
    weights.as_read.clear()
    return weights.record.with_use(mapped, in_place)


def _record(files: list[Path], sizes: list[tuple[int, int]], every: list[StoredTensor], lm_head: StoredTensor | None) -> WeightsRecord:
    """The files and every tensor they store, each with its role, as the loader saw them."""
    index = {path: i for i, path in enumerate(files)}
    tensors = tuple(
        TensorRecord(
            t.name, index[t.file], t.dtype, t.shape, tensor_bytes(t.dtype, t.shape),
            BUFFER if is_buffer(t) else LM_HEAD if _bare_name(t.name) == "lm_head.weight" else PARAMETER,
        )
        for t in every
    )
    records = tuple(FileRecord(path.name, size, header) for path, (size, header) in zip(files, sizes))
    return WeightsRecord(records, tensors, TIED if lm_head is None else STORED)
