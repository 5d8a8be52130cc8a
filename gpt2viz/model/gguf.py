"""GGUF files (llama.cpp's format): a LLaMA-family model, its tokenizer and its quantized weights in
one file, read here with the standard library and torch (no NumPy).

A GGUF file is a header (magic `GGUF`, version, the counts), key/value metadata (sizes, the
tokenizer's tokens and merges), one record per tensor (name, dimensions innermost first, type,
offset), then the tensors' bytes, aligned. Quantized types store blocks of 32 numbers:

- **Q4_1**: a float16 scale `d` and minimum `m`, then 16 bytes of 4-bit codes (the low nibbles
  are numbers 0-15 of the block, the high ones 16-31): `x = d * q + m`, q in 0..15. 20 bytes for
  32 numbers: 5 bits a number.
- **Q8_0**: a float16 scale `d`, then 32 signed bytes: `x = d * q`. 34 bytes for 32: 8.5 bits.

Everything is dequantized once, at load, into float32 (`read_gguf`). llama.cpp stores the query
and key projections with the rows of each head reordered for its own rotary code (pairs
interleaved); they are put back in the order LLaMA's checkpoints (and model/llama.py) use.

Every size read from the file is bounded before anything is allocated from it (a hostile file
cannot make gpt2viz reserve memory its bytes do not hold).
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
from dataclasses import dataclass
from io import BufferedReader
from pathlib import Path
from typing import Any, BinaryIO

import torch

from ..errors import WeightsError
from ..i18n import _, count
from ..input_files import FileRefused, open_regular

MAGIC = b"GGUF"
MAX_METADATA = 4096  # key/value pairs
MAX_STRING = 1 << 20  # bytes of one string
MAX_ARRAY = 1 << 22  # items of one array (a vocabulary of 4 million tokens)
MAX_TENSORS = 4096
MAX_DIMS = 4
QK = 32  # numbers in a quantized block

# ggml's tensor types read here: name, bytes per block, numbers per block.
TYPES = {0: ("F32", 4, 1), 1: ("F16", 2, 1), 3: ("Q4_1", 20, QK), 8: ("Q8_0", 34, QK), 30: ("BF16", 2, 1)}

# GGUF's metadata value types: struct format (None: a string or an array).
_VALUE = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 8: None, 9: None,
          10: "<Q", 11: "<q", 12: "<d"}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # torch's order (outermost first): the file's dimensions reversed
    type: str  # "Q4_1", "F32", ...
    offset: int  # from the start of the data section
    nbytes: int


@dataclass
class GGUFFile:
    path: Path
    metadata: dict[str, Any]
    tensors: dict[str, TensorInfo]
    data_start: int
    size: int


class _Reader:
    def __init__(self, f: BinaryIO, path: Path) -> None:
        self.f, self.path = f, path

    def take(self, n: int) -> bytes:
        data = self.f.read(n)
        if len(data) != n:
            raise WeightsError(_("{path}: not a valid GGUF file (it ends inside its header)").format(path=self.path))
        return data

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        n = self.unpack("<Q")
        if n > MAX_STRING:
            raise WeightsError(_("{path}: a string of {n} bytes in its header").format(path=self.path, n=count(n)))
        return self.take(n).decode("utf-8", errors="replace")

    def value(self, kind: int, depth: int = 0) -> Any:
        if kind == 8:
            return self.string()
        if kind == 9:
            item, n = self.unpack("<I"), self.unpack("<Q")
            if depth or n > MAX_ARRAY or item not in _VALUE:
                raise WeightsError(_("{path}: an array in its header that gpt2viz does not read").format(path=self.path))
            return [self.value(item, depth + 1) for _i in range(n)]
        fmt = _VALUE.get(kind)
        if fmt is None:
            raise WeightsError(_("{path}: a header value of unknown type {kind}").format(path=self.path, kind=kind))
        return self.unpack(fmt)


def read_header(path: str | Path) -> GGUFFile:
    """The metadata and the tensor records of the GGUF file at `path` (no tensor's bytes read)."""
    path = Path(path)
    try:
        fd = open_regular(path, sys.maxsize)
    except FileRefused as err:
        raise WeightsError(_("{path}: {problem}").format(path=path, problem=err.problem)) from None
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(fd).st_size
        r = _Reader(f, path)
        if r.take(4) != MAGIC:
            raise WeightsError(_("{path}: not a GGUF file").format(path=path))
        version, n_tensors, n_kv = r.unpack("<I"), r.unpack("<Q"), r.unpack("<Q")
        if version not in (2, 3) or n_tensors > MAX_TENSORS or n_kv > MAX_METADATA:
            raise WeightsError(_("{path}: a GGUF file gpt2viz does not read (version {version}, {n} tensors)").format(
                path=path, version=version, n=count(n_tensors)))
        metadata = {}
        for _i in range(n_kv):
            key = r.string()
            metadata[key] = r.value(r.unpack("<I"))
        tensors = {}
        for _i in range(n_tensors):
            name = r.string()
            n_dims = r.unpack("<I")
            if n_dims > MAX_DIMS:
                raise WeightsError(_("{path}: {name} has {n} dimensions").format(path=path, name=name, n=n_dims))
            dims = [r.unpack("<Q") for _d in range(n_dims)]
            kind, offset = r.unpack("<I"), r.unpack("<Q")
            if kind not in TYPES:
                raise WeightsError(_("{path}: {name} is stored in ggml type {kind}, which gpt2viz does not read").format(
                    path=path, name=name, kind=kind))
            type_name, block_bytes, per_block = TYPES[kind]
            numbers = 1
            for d in dims:
                numbers *= d
            if numbers // per_block * block_bytes > size or (dims and dims[0] % per_block):
                raise WeightsError(_("{path}: {name} claims {n} numbers").format(path=path, name=name, n=count(numbers)))
            shape = tuple(reversed(dims))
            tensors[name] = TensorInfo(name, shape, type_name, offset, numbers // per_block * block_bytes)
        alignment = metadata.get("general.alignment", 32)
        if not isinstance(alignment, int) or not 1 <= alignment <= 1 << 16:
            raise WeightsError(_("{path}: an alignment of {n}").format(path=path, n=alignment))
        data_start = -(-f.tell() // alignment) * alignment
    for t in tensors.values():
        if data_start + t.offset + t.nbytes > size:
            raise WeightsError(_("{path}: {name} runs past the end of the file").format(path=path, name=t.name))
    return GGUFFile(path, metadata, tensors, data_start, size)


def _raw(f: BufferedReader, at: int, nbytes: int) -> torch.Tensor:
    """`nbytes` bytes of the file from `at`, read into a uint8 tensor of its own."""
    out = torch.empty(nbytes, dtype=torch.uint8)
    f.seek(at)
    if nbytes and f.readinto((ctypes.c_char * nbytes).from_address(out.data_ptr())) != nbytes:
        raise WeightsError(_("{path}: the file got shorter while it was read").format(path=f.name))
    return out


def dequantize(raw: torch.Tensor, type_name: str, shape: tuple[int, ...]) -> torch.Tensor:
    """The float32 numbers that `raw` (the tensor's bytes) stores in ggml type `type_name`."""
    if type_name == "F32":
        return raw.view(torch.float32).reshape(shape).clone()
    if type_name in ("F16", "BF16"):
        return raw.view(torch.float16 if type_name == "F16" else torch.bfloat16).float().reshape(shape)
    if type_name == "Q8_0":
        blocks = raw.view(-1, 34)
        d = blocks[:, :2].contiguous().view(torch.float16).float()  # (n, 1): each block's scale
        q = blocks[:, 2:].contiguous().view(torch.int8).float()  # (n, 32)
        return (d * q).reshape(shape)
    if type_name == "Q4_1":
        blocks = raw.view(-1, 20)
        d = blocks[:, 0:2].contiguous().view(torch.float16).float()  # (n, 1): the scale
        m = blocks[:, 2:4].contiguous().view(torch.float16).float()  # (n, 1): the minimum
        codes = blocks[:, 4:]  # (n, 16): two 4-bit codes a byte
        q = torch.cat((codes & 0x0F, codes >> 4), dim=1).float()  # (n, 32): low nibbles first
        return (d * q + m).reshape(shape)
    raise WeightsError(_("ggml type {kind} is not read by gpt2viz").format(kind=type_name))


def unpermute_rotary(weight: torch.Tensor, n_head: int) -> torch.Tensor:
    """llama.cpp's query/key projection `[n_head * hd, C]` back in LLaMA's row order: within each
    head, llama.cpp puts the two numbers of a rotated pair side by side (rows 0, hd/2, 1, hd/2 + 1,
    ...); LLaMA keeps the first halves first (rows 0, 1, ..., then hd/2, ...)."""
    rows, C = weight.shape
    hd = rows // n_head
    return weight.reshape(n_head, hd // 2, 2, C).transpose(1, 2).reshape(rows, C)


# GGUF tensor names -> the LLaMA checkpoint's (model/llama.py); blocks: blk.N. -> model.layers.N.
_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_BLOCK_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}


def checkpoint_name(name: str) -> str | None:
    """The LLaMA checkpoint's name of GGUF tensor `name` (None for one the model does not use)."""
    if name in _NAMES:
        return _NAMES[name]
    parts = name.split(".", 2)
    if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in _BLOCK_NAMES:
        return f"model.layers.{int(parts[1])}.{_BLOCK_NAMES[parts[2]]}"
    return None


def llama_config_dict(gguf: GGUFFile) -> dict[str, Any]:
    """The GGUF metadata as Hugging Face's LLaMA config keys (LlamaConfig.from_dict reads them)."""
    metadata = gguf.metadata
    arch = metadata.get("general.architecture")
    if arch != "llama":
        raise WeightsError(_("a GGUF file of architecture {arch}; gpt2viz reads llama").format(arch=arch))
    g = metadata.get
    tokens = g("tokenizer.ggml.tokens") or []
    return {
        "model_type": "llama",
        "num_hidden_layers": g("llama.block_count"),
        "hidden_size": g("llama.embedding_length"),
        "intermediate_size": g("llama.feed_forward_length"),
        "num_attention_heads": g("llama.attention.head_count"),
        "num_key_value_heads": g("llama.attention.head_count_kv", g("llama.attention.head_count")),
        "max_position_embeddings": g("llama.context_length"),
        "rms_norm_eps": g("llama.attention.layer_norm_rms_epsilon", 1e-5),
        "rope_theta": g("llama.rope.freq_base", 10000.0),
        "vocab_size": g("llama.vocab_size", len(tokens)),
        "tie_word_embeddings": "output.weight" not in gguf.tensors,  # no head of its own: the token table's
        "eos_token_id": g("tokenizer.ggml.eos_token_id", 0),
        "bos_token_id": g("tokenizer.ggml.bos_token_id"),
        "pad_token_id": g("tokenizer.ggml.padding_token_id"),
    }


def read_tensors(gguf: GGUFFile, n_head: int, n_kv_head: int) -> dict[str, torch.Tensor]:
    """Every tensor the model uses, dequantized to float32, by its LLaMA checkpoint name."""
    out = {}
    with open(gguf.path, "rb") as f:
        for t in gguf.tensors.values():
            name = checkpoint_name(t.name)
            if name is None:
                continue
            tensor = dequantize(_raw(f, gguf.data_start + t.offset, t.nbytes), t.type, t.shape)
            if name.endswith("q_proj.weight"):
                tensor = unpermute_rotary(tensor, n_head)
            elif name.endswith("k_proj.weight"):
                tensor = unpermute_rotary(tensor, n_kv_head)
            out[name] = tensor
    return out


def tokenizer_from_gguf(metadata: dict[str, Any]):
    """The byte-level BPE tokenizer the file stores (tokens, merges, special tokens), as a
    `tokenizers.Tokenizer`: digits split one by one, then GPT-2's byte-level pre-tokenizer (SmolLM2's)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    if metadata.get("tokenizer.ggml.model") != "gpt2":
        raise WeightsError(_("a GGUF tokenizer of kind {kind}; gpt2viz reads byte-level BPE (gpt2)").format(
            kind=metadata.get("tokenizer.ggml.model")))
    tokens = metadata["tokenizer.ggml.tokens"]
    merges = [tuple(m.split(" ", 1)) for m in metadata.get("tokenizer.ggml.merges", [])]
    tokenizer = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    kinds = metadata.get("tokenizer.ggml.token_type") or []
    special = [AddedToken(tokens[i], special=True, normalized=False) for i, kind in enumerate(kinds) if kind == 3]
    tokenizer.add_special_tokens(special)
    return tokenizer
