"""Where the model runs: a checked device name in, a torch device out. (Number formats: precision.py.)"""

from __future__ import annotations

import torch

from ..errors import SettingError

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
