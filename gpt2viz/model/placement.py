"""Where the model runs: a checked device name in, a torch device out. (Number formats: precision.py.)"""

from __future__ import annotations

import torch

from ..errors import SettingError
from ..i18n import N_


def parse_device(name: str | torch.device) -> torch.device:
    """A torch device that exists on this machine."""
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise SettingError(
            "device", N_("{setting} {value!r} is not a device (try cpu, cuda, cuda:1 or mps)"), value=name
        ) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SettingError("device", N_("{setting} {value}: CUDA is not available on this machine"), value=name)
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise SettingError(
            "device", N_("{setting} {value}: no such CUDA device here (the last is cuda:{last})"),
            value=name, last=torch.cuda.device_count() - 1,
        )
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise SettingError("device", N_("{setting} {value}: MPS is not available on this machine"), value=name)
    if device.type not in ("cpu", "cuda", "mps"):
        raise SettingError("device", N_("{setting} {value!r} is not supported (choose cpu, cuda or mps)"), value=name)
    return device
