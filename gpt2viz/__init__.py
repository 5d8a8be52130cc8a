"""gpt2viz: see, step by step and with real numbers, how GPT-2 picks its next token."""

from .generate import GenerationResult, SamplingSettings, generate
from .model import GPT2, GPT2Config, KVCache, LanguageModel, Tokenizer, load_model

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
