"""What one run of gpt2viz was asked to do: the options the command line parses and the app reads.

Both `cli.py` and the TUI import this module; neither imports the other's internals.
"""

from __future__ import annotations

from dataclasses import dataclass

from .generate import SamplingSettings

DEFAULT_PROMPT = "The meaning of life is"
DEFAULT_TOPK = 10  # top tokens kept per position, and candidates per generation step


@dataclass
class RunOptions:
    """Everything the user asked for, checked."""

    prompt: str = DEFAULT_PROMPT
    prompt_file: str | None = None  # where the prompt was read from (--prompt-file), if anywhere
    model: str | None = None
    json_path: str | None = None
    replay: str | None = None
    generate: int | None = None  # new tokens; None: the front end's default (0 for --json, 40 in the TUI)
    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None
    use_cache: bool = True
    device: str = "cpu"
    dtype: str = "float32"
    topk_logits: int = DEFAULT_TOPK
    sequences: int = 1  # continuations decoded together (--json only)
    batch_prompts: tuple[str, ...] = ()  # more prompts decoded together with the prompt (--json only)
    cost_lab: bool = False  # also run the cost lab's experiments (--json only)
    verify: bool = False  # compare with transformers and exit (--verify)
    ablations: tuple = ()  # gpt2viz.interventions.Ablation: parts switched off (--json only)
    lesson: str | None = None  # a guided lesson to open (gpt2viz/lessons: "000"), TUI only

    def sampling(self) -> SamplingSettings:
        """How next tokens are chosen (checked: raises SettingError for a bad value)."""
        return SamplingSettings(self.temperature, self.top_k, self.top_p, self.seed)
