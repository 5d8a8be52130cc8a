"""The GPT-2 core: config, weights, tokenizer, layers, KV cache. Imports neither textual nor rich,
nor anything above it (generation, traces, the app)."""

from .config import GPT2Config
from .gpt2 import GPT2
from .kv_cache import KVCache
from .tokenizer import Tokenizer

__all__ = ["GPT2", "GPT2Config", "KVCache", "Tokenizer"]
