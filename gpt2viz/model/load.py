"""`load_model`: a checkpoint name in, a ready model with its tokenizer out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from ..errors import UsageError
from .config import GPT2Config
from .gpt2 import GPT2
from .sources import ResolvedSource, resolve
from .tokenizer import Tokenizer
from .weights import load_weights

DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
}


def parse_dtype(name: str | torch.dtype) -> torch.dtype:
    """The torch dtype for a name such as 'float32' or 'bf16'."""
    if isinstance(name, torch.dtype):
        if name in DTYPES.values():
            return name
        raise UsageError(f"--dtype {name} is not supported (choose float32, float16 or bfloat16)")
    dtype = DTYPES.get(str(name).lower())
    if dtype is None:
        raise UsageError(f"--dtype {name!r} is not supported (choose float32, float16 or bfloat16)")
    return dtype


def parse_device(name: str | torch.device) -> torch.device:
    """A torch device that exists on this machine."""
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise UsageError(f"--device {name!r} is not a device (try cpu, cuda, cuda:1 or mps)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {name}: CUDA is not available on this machine")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise UsageError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise UsageError(f"--device {name}: MPS is not available on this machine")
    if device.type not in ("cpu", "cuda", "mps"):
        raise UsageError(f"--device {name!r} is not supported (choose cpu, cuda or mps)")
    return device


@dataclass
class LanguageModel:
    """A loaded GPT-2: the network, its tokenizer, and where it came from."""

    model: GPT2
    tokenizer: Tokenizer
    source: ResolvedSource
    stored_dtype: str
    file_bytes: int
    notices: list[str] = field(default_factory=list)

    @property
    def config(self) -> GPT2Config:
        return self.model.config

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def eos_id(self) -> int:
        """The id of <|endoftext|>: the tokenizer's, else the config's."""
        return self.tokenizer.eos_id if self.tokenizer.eos_id is not None else self.config.eos_token_id

    @property
    def hooks(self):
        """The model's hook points (`lm.hooks.subscribe(pattern, fn)`)."""
        return self.model.hooks

    @property
    def n_params(self) -> int:
        """Parameters counted from the loaded tensors (the tied LM head once)."""
        return sum(p.numel() for p in self.model.parameters())

    def encode_prompt(self, prompt: str | list[int]) -> list[int]:
        if isinstance(prompt, str):
            return self.tokenizer.encode(prompt)
        return [int(i) for i in prompt]

    def generate(
        self,
        prompt: str | list[int],
        max_new_tokens: int,
        use_cache: bool = True,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        on_step: Callable | None = None,
        should_stop: Callable[[], bool] | None = None,
    ):
        """Continues `prompt` (text or ids); see `gpt2viz.generate.generate`."""
        from ..generate import SamplingSettings, generate

        return generate(
            self.model,
            self.encode_prompt(prompt),
            max_new_tokens,
            use_cache=use_cache,
            settings=SamplingSettings(temperature, top_k, top_p, seed),
            eos_id=self.eos_id,
            on_step=on_step,
            should_stop=should_stop,
        )


def load_model(
    source: str | None = None,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "float32",
) -> LanguageModel:
    """Loads `source`: 'tiny' (bundled), a checkpoint directory, or a hub id such as 'gpt2'.

    With no source: real GPT-2 when it is cached or the hub answers, else the bundled model.
    """
    torch_dtype = parse_dtype(dtype)
    torch_device = parse_device(device)
    resolved = resolve(source)
    config = GPT2Config.from_file(resolved.path / "config.json")
    tokenizer = Tokenizer.from_dir(resolved.path)
    weights = load_weights(resolved.path, config, torch_dtype, str(torch_device))
    model = GPT2(config)
    state = {name: torch.nn.Parameter(t, requires_grad=False) for name, t in weights.tensors.items()}
    model.load_state_dict(state, strict=True, assign=True)
    model.eval()
    notices = ([resolved.notice] if resolved.notice else []) + weights.notices
    return LanguageModel(model, tokenizer, resolved, weights.stored_dtype, weights.file_bytes, notices)
