"""gpt2viz: see, step by step and with real numbers, how GPT-2 picks its next token."""

from .generate import GenerationResult, SamplingSettings, generate
from .language_model import LanguageModel, load_model
from .model import GPT2, GPT2Config, KVCache, Tokenizer

__version__ = "0.1.0"

__all__ = [
    "GPT2",
    "GPT2Config",
    "GenerationResult",
    "KVCache",
    "LanguageModel",
    "SamplingSettings",
    "Tokenizer",
    "generate",
    "load_model",
]
