"""What a checkpoint's files hold, as the loader saw them: config.json's settings, every tensor of
the safetensors file(s) (name, dtype, shape, bytes) and how they were read, and the tokenizer's
vocabulary, merges and special tokens.

Plain facts, gathered while loading (config.py, weights.py, tokenizer.py, and language_model.py,
which puts them together), for a person to read (the app's Model files stage) and for a trace to
keep (`model_files`, docs/trace.md). Nothing here opens a checkpoint file of its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# Bytes of one number of each dtype safetensors writes (its names).
DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8, "C64": 8,
}

# config.json's keys that say something about the network, in the order the stage lists them
# (GPT-2's own names; Hugging Face writes n_positions, old files n_ctx). The file's other keys are
# only counted and named.
CONFIG_KEYS = (
    "model_type", "n_layer", "n_head", "n_embd", "n_positions", "n_ctx", "vocab_size", "n_inner",
    "layer_norm_epsilon", "activation_function", "attn_pdrop", "embd_pdrop", "resid_pdrop",
    "tie_word_embeddings", "bos_token_id", "eos_token_id",
)
MAX_NAMES = 100  # names kept of a list that a file decides the length of (other keys, special tokens)
MAX_NAME = 100  # characters kept of such a name or of a text value

# What a stored tensor is to the loader.
PARAMETER = "parameter"  # a weight the model uses
BUFFER = "buffer"  # a causal mask or masking constant some checkpoints carry: never read
LM_HEAD = "lm_head"  # a stored copy of wte: checked equal to it, then not kept (the head is tied)
ROLES = (PARAMETER, BUFFER, LM_HEAD)
# Whether the file stores an LM head of its own.
TIED, STORED = "tied", "stored"


@dataclass(frozen=True)
class FileRecord:
    """One file as it was read: its name in the checkpoint directory and its size."""

    name: str
    bytes: int
    header_bytes: int | None = None  # a safetensors file: 8 + its JSON header's length

    def to_dict(self) -> dict:
        out: dict = {"name": self.name, "bytes": self.bytes}
        if self.header_bytes is not None:
            out["header_bytes"] = self.header_bytes
        return out


@dataclass(frozen=True)
class TensorRecord:
    """A tensor as the safetensors header describes it, and what the loader did with it."""

    name: str  # as stored, with a `transformer.` prefix if the file has one
    file: int  # index into WeightsRecord.files
    dtype: str  # safetensors' name: F32, F16, BF16, ...
    shape: tuple[int, ...]
    bytes: int | None  # its data in the file (None for a dtype not in DTYPE_BYTES)
    role: str  # one of ROLES

    def to_dict(self) -> dict:
        return {"name": self.name, "file": self.file, "dtype": self.dtype, "shape": list(self.shape),
                "bytes": self.bytes, "role": self.role}


@dataclass(frozen=True)
class WeightsRecord:
    """The safetensors file(s): every tensor they store, and how the model came to hold them."""

    files: tuple[FileRecord, ...]
    tensors: tuple[TensorRecord, ...]  # in the files' order, buffers and a stored LM head included
    lm_head: str  # TIED: no LM head in the file; STORED: a copy of wte, checked equal, not kept
    mapped: bool | None = None  # whether the tensors safetensors handed over lie in a memory mapping of their file (None: unknown here)
    in_place: int | None = None  # parameters the model uses as read, not copied (None: not counted yet)

    def with_use(self, mapped: bool | None, in_place: int) -> "WeightsRecord":
        """The record once the model holds its weights: how they were read and how many are used in place."""
        return WeightsRecord(self.files, self.tensors, self.lm_head, mapped, in_place)

    def to_dict(self) -> dict:
        return {
            "files": [f.to_dict() for f in self.files],
            "tensors": [t.to_dict() for t in self.tensors],
            "lm_head": self.lm_head,
            "mapped": self.mapped,
            "in_place": self.in_place,
        }


@dataclass(frozen=True)
class ConfigRecord:
    """config.json: the settings it gives for the network, under its own names, and its other keys."""

    file: FileRecord
    values: dict  # key of CONFIG_KEYS -> the file's value (JSON scalars only; text cut to MAX_NAME)
    other_keys: tuple[str, ...]  # the file's other keys, sorted, at most MAX_NAMES
    other_count: int  # how many other keys it has

    def to_dict(self) -> dict:
        return {"file": self.file.to_dict(), "values": dict(self.values), "other_keys": list(self.other_keys),
                "other_count": self.other_count}


@dataclass(frozen=True)
class TokenizerRecord:
    """The tokenizer as loaded: its file(s), its kind, its vocabulary, merges and special tokens."""

    files: tuple[FileRecord, ...]
    model: str  # the tokenizers library's model: BPE, WordLevel, ...
    vocab_size: int  # ids, the added tokens included
    merges: int | None  # BPE merge rules (None: not a BPE model)
    added: int  # tokens added to the model's vocabulary (such as <|endoftext|>)
    special_tokens: tuple[tuple[int, str], ...]  # (id, text) of the special ones, at most MAX_NAMES

    def to_dict(self) -> dict:
        return {
            "files": [f.to_dict() for f in self.files],
            "model": self.model,
            "vocab_size": self.vocab_size,
            "merges": self.merges,
            "added": self.added,
            "special_tokens": [{"id": i, "text": text} for i, text in self.special_tokens],
        }


@dataclass(frozen=True)
class ModelFiles:
    """Everything a checkpoint's files told the loader (a trace's `model_files`)."""

    config: ConfigRecord
    weights: WeightsRecord
    tokenizer: TokenizerRecord

    def to_dict(self) -> dict:
        return {"config": self.config.to_dict(), "weights": self.weights.to_dict(), "tokenizer": self.tokenizer.to_dict()}


def tensor_bytes(dtype: str, shape: Iterable[int]) -> int | None:
    """Bytes a tensor of `dtype` (safetensors' name) and `shape` takes in the file."""
    size = DTYPE_BYTES.get(dtype)
    if size is None:
        return None
    for dim in shape:
        size *= dim
    return size


def _clipped(text: str) -> str:
    return text if len(text) <= MAX_NAME else text[: MAX_NAME - 1] + "…"


def config_record(path: Path, size: int, raw: dict) -> ConfigRecord:
    """What config.json (`raw`, `size` bytes) gives: the CONFIG_KEYS it sets with a plain value, and
    how many other keys it has, with their names."""
    values = {}
    for key in CONFIG_KEYS:
        value = raw.get(key, ...)
        if isinstance(value, str):
            values[key] = _clipped(value)
        elif value is None or isinstance(value, (bool, int, float)):
            values[key] = value
    others = sorted(key for key in raw if key not in values)
    return ConfigRecord(FileRecord(path.name, size), values, tuple(_clipped(k) for k in others[:MAX_NAMES]), len(others))


def tokenizer_record(tokenizer, files: Iterable[FileRecord] = ()) -> TokenizerRecord:
    """What a loaded `tokenizers.Tokenizer` holds: its model's kind, vocabulary and merges, and its
    special tokens; `files`, what it was read from."""
    import json

    model = type(tokenizer.model).__name__
    merges = None
    try:  # the model as the library saves it: {"type": "BPE", "vocab": ..., "merges": [...]}
        saved = json.loads(tokenizer.model.__getstate__())
        if isinstance(saved, dict) and isinstance(saved.get("merges"), list):
            merges = len(saved["merges"])
    except Exception:  # a model the library does not save this way: its merges are not known
        merges = None
    added = tokenizer.get_added_tokens_decoder()
    special = [(i, _clipped(t.content)) for i, t in sorted(added.items()) if t.special]
    return TokenizerRecord(
        tuple(files),
        model,
        tokenizer.get_vocab_size(with_added_tokens=True),
        merges,
        len(added),
        tuple(special[:MAX_NAMES]),
    )


def in_file_mappings(files: list[Path], addresses: list[int]) -> bool | None:
    """Whether every one of `addresses` lies in a memory mapping of one of `files`, as the system
    lists this process's mappings (Linux: /proc/self/maps); None where it does not list them."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    names = {os.path.realpath(path) for path in files}
    ranges = []
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5] in names:
            start, _dash, end = fields[0].partition("-")
            ranges.append((int(start, 16), int(end, 16)))
    return all(any(start <= a < end for start, end in ranges) for a in addresses)
