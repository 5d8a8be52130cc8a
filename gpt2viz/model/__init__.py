"""The GPT-2 core: config, weights, tokenizer, layers, KV cache. Imports neither textual nor rich."""

from .config import GPT2Config
from .gpt2 import GPT2
from .kv_cache import KVCache
from .load import LanguageModel, load_model
from .tokenizer import Tokenizer

__all__ = ["GPT2", "GPT2Config", "KVCache", "LanguageModel", "Tokenizer", "load_model"]
