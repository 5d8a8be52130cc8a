"""gpt2viz: see, step by step and with real numbers, how GPT-2 picks its next token."""

import warnings
from typing import TYPE_CHECKING, Any

# `import torch` warns "Failed to initialize NumPy" when numpy is not installed. gpt2viz never
# hands torch a numpy array, so it does not depend on numpy (measured: +0.15-0.2 s on every
# start, +10 MB of memory, 73 MB on disk) and silences that one warning before torch loads.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)

__version__ = "0.1.0"

# The API is loaded when first used (PEP 562): `import gpt2viz` alone does not import torch, so
# the command can start before the libraries load (gpt2viz.startup). `gpt2viz.load_model` and
# `from gpt2viz import GPT2` work as ever.
_API = {
    "Gpt2VizError": "errors", "InputError": "errors", "ModelSourceError": "errors", "SettingError": "errors",
    "GenerationResult": "generate", "SamplingSettings": "generate", "BatchResult": "batch",
    "Hooks": "hooks", "HookEditError": "hooks",
    "LanguageModel": "language_model", "load_model": "language_model",
    "GPT2": "model", "GPT2Config": "model", "KVCache": "model", "Tokenizer": "model",
}


if TYPE_CHECKING:  # what type checkers see: the real names, not `__getattr__`'s Any
    from .batch import BatchResult
    from .errors import Gpt2VizError, InputError, ModelSourceError, SettingError
    from .generate import GenerationResult, SamplingSettings
    from .hooks import HookEditError, Hooks
    from .language_model import LanguageModel, load_model
    from .model import GPT2, GPT2Config, KVCache, Tokenizer


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'gpt2viz' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])

# `gpt2viz.generate` is the module: the function there works on a bare GPT2; with a loaded model
# use `lm.generate(...)`.
__all__ = [
    "BatchResult",
    "GPT2",
    "GPT2Config",
    "GenerationResult",
    "Gpt2VizError",
    "HookEditError",
    "Hooks",
    "InputError",
    "KVCache",
    "LanguageModel",
    "ModelSourceError",
    "SamplingSettings",
    "SettingError",
    "Tokenizer",
    "load_model",
]
