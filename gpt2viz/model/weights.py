"""Reading GPT-2 weights from safetensors files, checked against the config before use.

The file is memory-mapped: a tensor stored in the compute dtype is used in place, not copied.
Pickle-based files (`pytorch_model.bin`) are never opened, because unpickling runs code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from ..errors import WeightsError, notice
from ..i18n import _
from .config import GPT2Config

FLOAT_DTYPES = {
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "F64": torch.float64,
}

# Buffers some checkpoints carry (the causal mask, a masking constant): not parameters.
_IGNORED_SUFFIXES = (".attn.bias", ".attn.masked_bias")


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


def find_weight_files(directory: Path) -> list[Path]:
    """The safetensors file(s) of a checkpoint directory, following a shard index if present."""
    single = directory / "model.safetensors"
    if single.is_file():
        return [single]
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            names = sorted(set(weight_map.values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise WeightsError(_("{path}: not a valid shard index ({error})").format(path=index, error=err)) from None
        files = [directory / n for n in names]
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            raise WeightsError(_("{path}: shard {shard} is missing").format(path=index, shard=missing[0]))
        return files
    if (directory / "pytorch_model.bin").exists():
        raise WeightsError(
            _(
                "{path}: only pytorch_model.bin found; gpt2viz reads safetensors only and never unpickles "
                ".bin files (convert with transformers: {code})"
            ).format(path=directory, code="model.save_pretrained(dir, safe_serialization=True)")
        )
    raise WeightsError(_("{path}: no model.safetensors").format(path=directory))


def _bare_name(name: str) -> str:
    return name[len("transformer.") :] if name.startswith("transformer.") else name


def _read_raw(files: list[Path]) -> tuple[dict[str, torch.Tensor], set[str], int]:
    tensors: dict[str, torch.Tensor] = {}
    stored: set[str] = set()
    total = 0
    for path in files:
        total += path.stat().st_size
        try:
            with safe_open(str(path), framework="pt", device="cpu") as f:
                for name in f.keys():
                    if _bare_name(name).endswith(_IGNORED_SUFFIXES):
                        continue  # mask buffers, not parameters: never read, whatever their dtype
                    info = f.get_slice(name)
                    dtype = info.get_dtype()
                    if dtype not in FLOAT_DTYPES:
                        raise WeightsError(
                            _("{file}: tensor {name} has dtype {dtype}; expected floating point").format(
                                file=path.name, name=name, dtype=dtype
                            )
                        )
                    stored.add(dtype)
                    tensors[name] = f.get_tensor(name)
        except SafetensorError as err:
            raise WeightsError(_("{path}: not a valid safetensors file ({error})").format(path=path, error=err)) from None
        except (OSError, ValueError, RuntimeError) as err:
            raise WeightsError(_("{path}: cannot read weights ({error})").format(path=path, error=err)) from None
    return tensors, stored, total


def load_weights(
    directory: Path, config: GPT2Config, dtype: torch.dtype = torch.float32, device: str = "cpu"
) -> LoadedWeights:
    """Reads, checks and converts the weights of the checkpoint in `directory`."""
    files = find_weight_files(directory)
    raw, stored, file_bytes = _read_raw(files)
    expected = expected_shapes(config)

    tensors: dict[str, torch.Tensor] = {}
    lm_head = None
    for name, tensor in raw.items():
        bare = _bare_name(name)
        if bare.endswith(_IGNORED_SUFFIXES):
            continue
        if bare == "lm_head.weight":
            lm_head = (name, tensor)
            continue
        if bare not in expected:
            raise WeightsError(
                _("{file}: unexpected tensor {name} (not part of GPT-2)").format(file=files[0].name, name=name)
            )
        if bare in tensors:
            raise WeightsError(_("{file}: tensor {name} is stored twice").format(file=files[0].name, name=bare))
        tensors[bare] = tensor

    for name, shape in expected.items():
        if name not in tensors:
            raise WeightsError(_("{file}: tensor {name} is missing").format(file=files[0].name, name=name))
        got = tuple(tensors[name].shape)
        if got != shape:
            raise WeightsError(
                _("{file}: tensor {name} has shape {shape} but config.json implies {expected}").format(
                    file=files[0].name, name=name, shape=list(got), expected=list(shape)
                )
            )

    if lm_head is not None:
        name, head = lm_head
        if tuple(head.shape) != expected["wte.weight"] or not torch.equal(head, tensors["wte.weight"]):
            raise WeightsError(
                _("{file}: {name} differs from wte.weight; gpt2viz supports only the tied LM head").format(
                    file=files[0].name, name=name
                )
            )

    converted = {name: t.to(device=device, dtype=dtype) for name, t in tensors.items()}
    notices = []
    for name, tensor in converted.items():
        # A sum is one pass with no temporary; only if it is not finite look element by element.
        if not torch.isfinite(tensor.sum()) and not torch.isfinite(tensor).all():
            notices.append(notice("non_finite_weights", tensor=name))
    stored_name = "+".join(sorted(stored)) if stored else "none"
    return LoadedWeights(converted, stored_name, file_bytes, notices)
