"""gpt2viz: see, step by step and with real numbers, how GPT-2 picks its next token."""

import warnings

# `import torch` warns "Failed to initialize NumPy" when numpy is not installed. gpt2viz never
# hands torch a numpy array, so it does not depend on numpy (measured: +0.15-0.2 s on every
# start, +10 MB of memory, 73 MB on disk) and silences that one warning before torch loads.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)

from .errors import Gpt2VizError, InputError, ModelSourceError, SettingError
from .generate import GenerationResult, SamplingSettings
from .hooks import Hooks, HookEditError
from .language_model import LanguageModel, load_model
from .model import GPT2, GPT2Config, KVCache, Tokenizer

__version__ = "0.1.0"

# `gpt2viz.generate` is the module: the function there works on a bare GPT2; with a loaded model
# use `lm.generate(...)`.
__all__ = [
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
