"""Random-weight GPT-2 checkpoints written by `transformers`, cached so they are written once.

Each checkpoint is `GPT2LMHeadModel(GPT2Config(...)).save_pretrained(dir)` (safetensors, float32)
plus the repository's tokenizer.json, under ~/.cache/gpt2viz-bench/<shape>/ (override with the
GPT2VIZ_BENCH_CACHE environment variable). Timing does not depend on the weights' values.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOKENIZER_JSON = REPO / "assets" / "tokenizer" / "tokenizer.json"
CACHE_ROOT = Path(os.environ.get("GPT2VIZ_BENCH_CACHE", Path.home() / ".cache" / "gpt2viz-bench"))

# name -> (n_layer, n_head, n_embd, n_positions); vocab 50257 for all.
SHAPES = {
    "gpt2-small": (12, 12, 768, 1024),
    "gpt2-medium": (24, 16, 1024, 1024),
    # GPT-2 small's depth and heads at a tiny width: its step time is almost all Python and
    # dispatch overhead, which is what the profile uses it for.
    "gpt2-small-narrow": (12, 12, 96, 1024),
}
VOCAB = 50257
SEED = 0


def checkpoint_dir(shape: str) -> Path:
    return CACHE_ROOT / shape


def _is_complete(directory: Path, shape: str) -> bool:
    try:
        raw = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    n_layer, n_head, n_embd, n_pos = SHAPES[shape]
    return (
        (raw.get("n_layer"), raw.get("n_head"), raw.get("n_embd"), raw.get("n_positions"))
        == (n_layer, n_head, n_embd, n_pos)
        and (directory / "model.safetensors").is_file()
        and (directory / "tokenizer.json").is_file()
    )


def ensure_checkpoint(shape: str, log=print) -> Path:
    """The directory of `shape`'s checkpoint, writing it first if it is not cached yet."""
    directory = checkpoint_dir(shape)
    if _is_complete(directory, shape):
        return directory
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    n_layer, n_head, n_embd, n_pos = SHAPES[shape]
    log(f"writing random-weight {shape} checkpoint to {directory} (once) ...")
    torch.manual_seed(SEED)
    config = GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=n_embd, n_positions=n_pos, vocab_size=VOCAB)
    model = GPT2LMHeadModel(config).eval()
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp, safe_serialization=True)
    shutil.copy(TOKENIZER_JSON, tmp / "tokenizer.json")
    del model
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)
    return directory


def weights_bytes(directory: Path) -> int:
    """Size of the checkpoint's weight file(s) on disk."""
    return sum(p.stat().st_size for p in directory.glob("*.safetensors"))


if __name__ == "__main__":
    for name in ("gpt2-small", "gpt2-medium"):
        d = ensure_checkpoint(name)
        print(name, d, weights_bytes(d))
