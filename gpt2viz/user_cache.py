"""gpt2viz's cache directory: $XDG_CACHE_HOME/gpt2viz, or ~/.cache/gpt2viz where it is unset or
not absolute (the XDG rule: a relative one is ignored). The kernels' choices and the package
index's model live there. A leaf module: the core may import it."""

from __future__ import annotations

import os
from pathlib import Path


def cache_home() -> Path:
    """$XDG_CACHE_HOME/gpt2viz (RuntimeError where neither it nor a home directory is known)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = str(Path.home() / ".cache")
    return Path(base) / "gpt2viz"
