"""Small helpers shared by the core tests: reference computations and checkpoint rewriting."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

# A multi-token prompt (12 tokens) used by the parity tests. (Imported from here, not from conftest:
# tests/tui has a conftest of its own, and which one `import conftest` finds depends on the order
# pytest collected the files in.)
PROMPT = "The meaning of life is, as everyone knows, not 42."


def state_home(path: Path) -> Path:
    """`path` made a state directory ($XDG_STATE_HOME) where the lesson menu has been answered, so
    the app starts on the step-through as for a returning learner (the menu's own tests start
    without it)."""
    (path / "gpt2viz").mkdir(parents=True, exist_ok=True)
    (path / "gpt2viz" / "lessons.json").write_text('{"menu": {"at_start": false}}', encoding="utf-8")
    return path


@torch.no_grad()
def hf_logits(hf_model, ids: list[int] | list[list[int]]) -> torch.Tensor:
    """transformers' logits `[B, T, vocab]` for a batch (or a single list) of ids."""
    batch = ids if ids and isinstance(ids[0], list) else [ids]
    return hf_model(torch.tensor(batch, dtype=torch.long)).logits


@torch.no_grad()
def hf_greedy(hf_model, ids: list[int], n: int) -> list[int]:
    """A greedy loop over transformers (argmax of the last position), using transformers' own
    KV cache so the reference stays cheap on the GPT-2 small shape."""
    new = []
    cache = None
    step_ids = list(ids)
    for _ in range(n):
        out = hf_model(torch.tensor([step_ids], dtype=torch.long), cache=cache, use_cache=True)
        cache = out.cache
        token = int(torch.argmax(out.logits[0, -1]))
        new.append(token)
        step_ids = [token]
    return new


def read_tensors(directory: Path) -> dict[str, torch.Tensor]:
    return load_file(str(Path(directory) / "model.safetensors"))


def clone_checkpoint(src: Path, dst: Path, tensors: dict[str, torch.Tensor] | None = None,
                     config: dict | None = None) -> Path:
    """A checkpoint directory `dst` like `src`, with other tensors and/or config if given.

    Unchanged files are symlinked, so cloning a large checkpoint costs nothing.
    """
    import json

    dst.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        if (dst / name).exists() or (dst / name).is_symlink():
            (dst / name).unlink()
    if config is None:
        os.symlink(src / "config.json", dst / "config.json")
    else:
        (dst / "config.json").write_text(json.dumps(config), encoding="utf-8")
    if tensors is None:
        os.symlink(src / "model.safetensors", dst / "model.safetensors")
    else:
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(dst / "model.safetensors"))
    shutil.copy(src / "tokenizer.json", dst / "tokenizer.json")
    return dst


def bare_tensors(tensors: dict[str, torch.Tensor], n_layer: int, n_pos: int,
                 mask_dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    """The openai-community/gpt2 naming: no `transformer.` prefix, no lm_head.weight, and the
    causal-mask buffers `h.N.attn.bias` [1, 1, n_pos, n_pos] and `h.N.attn.masked_bias` added."""
    out = {}
    for name, t in tensors.items():
        if name == "lm_head.weight":
            continue
        out[name.removeprefix("transformer.")] = t
    mask = torch.tril(torch.ones(n_pos, n_pos)).view(1, 1, n_pos, n_pos).to(mask_dtype)
    for i in range(n_layer):
        out[f"h.{i}.attn.bias"] = mask.clone()
        out[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    return out


def assert_same_logits(a: torch.Tensor, b: torch.Tensor) -> None:
    """The same weights read from two files give the same logits, up to the last bit or two: the
    BLAS may take another SIMD path for a tensor at another offset in the file. A tensor read
    wrongly (a mask buffer taken for a weight, a shard missed) changes them by far more."""
    assert a.shape == b.shape
    torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def random_checkpoint(directory: Path, n_layer: int, n_head: int, n_embd: int, n_positions: int) -> Path:
    """A GPT-2 of random float16 weights and the bundled tokenizer: a few MB, whatever its heads."""
    generator = torch.Generator().manual_seed(0)

    def weights(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=generator) * 0.02).half()

    ones, zeros = torch.ones(n_embd).half(), torch.zeros(n_embd).half()
    bundled = Path(__file__).resolve().parent.parent / "assets" / "tiny"
    config = json.loads((bundled / "config.json").read_text(encoding="utf-8"))
    tensors = {
        "transformer.wte.weight": weights(config["vocab_size"], n_embd), "transformer.wpe.weight": weights(n_positions, n_embd),
        "transformer.ln_f.weight": ones, "transformer.ln_f.bias": zeros,
    }
    for i in range(n_layer):
        block = f"transformer.h.{i}."
        tensors.update({
            block + "ln_1.weight": ones, block + "ln_1.bias": zeros, block + "ln_2.weight": ones, block + "ln_2.bias": zeros,
            block + "attn.c_attn.weight": weights(n_embd, 3 * n_embd), block + "attn.c_attn.bias": weights(3 * n_embd),
            block + "attn.c_proj.weight": weights(n_embd, n_embd), block + "attn.c_proj.bias": weights(n_embd),
            block + "mlp.c_fc.weight": weights(n_embd, 4 * n_embd), block + "mlp.c_fc.bias": weights(4 * n_embd),
            block + "mlp.c_proj.weight": weights(4 * n_embd, n_embd), block + "mlp.c_proj.bias": weights(n_embd),
        })
    directory.mkdir()
    save_file({k: v.clone() for k, v in tensors.items()}, str(directory / "model.safetensors"))
    config.update(n_layer=n_layer, n_head=n_head, n_embd=n_embd, n_positions=n_positions)
    (directory / "config.json").write_text(json.dumps(config), encoding="utf-8")
    os.symlink(bundled / "tokenizer.json", directory / "tokenizer.json")
    return directory


def words(n: int) -> str:
    """A prompt of exactly `n` tokens ("the", then " the" n - 1 times)."""
    return "the" + " the" * (n - 1)
