"""Where the model runs: a checked device name in, a torch device out. (Number formats: precision.py.)"""

from __future__ import annotations

import torch

from ..errors import SettingError
from ..i18n import _, ngettext


def parse_device(name: str | torch.device) -> torch.device:
    """A torch device that exists on this machine."""
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise SettingError(
            "device", _("{name!r} is not a device (try cpu, cuda, cuda:1 or mps)").format(name=name)
        ) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SettingError("device", _("{name}: CUDA is not available on this machine").format(name=name))
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        n = torch.cuda.device_count()
        has = ngettext("{name}: this machine has {n} CUDA device", "{name}: this machine has {n} CUDA devices", n)
        raise SettingError("device", has.format(name=name, n=n))
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise SettingError("device", _("{name}: MPS is not available on this machine").format(name=name))
    if device.type not in ("cpu", "cuda", "mps"):
        raise SettingError("device", _("{name!r} is not supported (choose cpu, cuda or mps)").format(name=name))
    return device
