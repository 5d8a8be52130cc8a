"""Number formats: how the weights are stored and what the activations are computed in.

The forward pass is the same maths in every format; only the matrix products and the storage of
their weights change. This module names the formats; gpt2viz/kernels/formats.py converts a loaded
float32 model into one, with the kernels this CPU multiplies fastest by in it:

- **float32**: the checkpoint's own layout, `[in, out]`. Exact against transformers.
- **bfloat16** and **float16**: weights in the format (held exactly by whichever kernel multiplies
  them), activations and the KV cache too; the products add in float32.
- **int8**: weights int8 with one scale per output channel (symmetric, round to nearest), the
  token table the LM head's int8 rows; each product quantizes its input one position at a time.
  Position embeddings, LayerNorm and biases stay float32, as do activations and the KV cache.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import SettingError
from ..i18n import N_


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
