"""Random-weight GPT-2 checkpoints written by `transformers`, the parity reference."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
TOKENIZER_JSON = REPO / "assets" / "tokenizer" / "tokenizer.json"

# name -> (n_layer, n_head, n_embd, n_positions)
SHAPES = {
    "tiny": (2, 4, 64, 128),
    "odd-heads": (2, 25, 100, 96),
    "distilgpt2": (6, 12, 768, 1024),
    "gpt2-small": (12, 12, 768, 1024),
    # GPT-2's vocabulary and context at a tiny width: a 1,024-token pass whose bulk is the logits.
    "long-narrow": (2, 4, 64, 1024),
}


def write_checkpoint(directory: Path, shape: str, seed: int = 0, vocab_size: int = 50257):
    """Saves a random `GPT2LMHeadModel` with LayerNorms pushed away from 1/0; returns the HF model."""
    from transformers import GPT2Config, GPT2LMHeadModel

    n_layer, n_head, n_embd, n_pos = SHAPES[shape]
    torch.manual_seed(seed)
    config = GPT2Config(
        n_layer=n_layer, n_head=n_head, n_embd=n_embd, n_positions=n_pos, vocab_size=vocab_size
    )
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln_" in name or "ln_f" in name:
                # A missing weight or bias term must show in the logits.
                p.add_(torch.randn_like(p) * 0.3)
            elif name.endswith(".bias"):
                p.normal_(0, 0.02)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory, safe_serialization=True)
    shutil.copy(TOKENIZER_JSON, directory / "tokenizer.json")
    return model
