"""Where the model runs and in which number format: checked names in, torch objects out."""

from __future__ import annotations

import torch

from ..errors import SettingError

DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
}
DTYPE_CHOICES = "choose float32, float16 or bfloat16"


def parse_dtype(name: str | torch.dtype) -> torch.dtype:
    """The torch dtype for a name such as 'float32' or 'bf16'."""
    if isinstance(name, torch.dtype):
        if name in DTYPES.values():
            return name
        raise SettingError("dtype", f"{name} is not supported ({DTYPE_CHOICES})")
    dtype = DTYPES.get(str(name).lower())
    if dtype is None:
        raise SettingError("dtype", f"{name!r} is not supported ({DTYPE_CHOICES})")
    return dtype


def parse_device(name: str | torch.device) -> torch.device:
    """A torch device that exists on this machine."""
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise SettingError("device", f"{name!r} is not a device (try cpu, cuda, cuda:1 or mps)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SettingError("device", f"{name}: CUDA is not available on this machine")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise SettingError("device", f"{name}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise SettingError("device", f"{name}: MPS is not available on this machine")
    if device.type not in ("cpu", "cuda", "mps"):
        raise SettingError("device", f"{name!r} is not supported (choose cpu, cuda or mps)")
    return device
