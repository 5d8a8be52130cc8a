"""Parity, checked on the user's own checkpoint: gpt2viz's GPT-2 against transformers'.

The same safetensors run through `transformers.GPT2LMHeadModel` (only when transformers is
installed: gpt2viz never needs it to run), both in float32 on the CPU: the largest logit
difference over every position, how many positions agree on their top token, and whether 20
greedy tokens come out the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .errors import ArchitectureError, Gpt2VizError
from .i18n import _
from .model.config import GPT2Config

BOUND = 1e-4  # the largest |Δlogit| that counts as the same model
GREEDY_TOKENS = 20


class VerifyUnavailable(Gpt2VizError):
    """transformers is not installed, so there is nothing to compare with."""


@dataclass(frozen=True)
class Verification:
    transformers_version: str
    positions: int
    max_abs_diff: float  # over every position and every vocabulary entry
    top1_agree: int  # positions whose top token is the same
    ours: list[int]  # greedy continuation ids
    theirs: list[int]

    @property
    def ok(self) -> bool:
        return self.max_abs_diff <= BOUND and self.ours == self.theirs


def reference_model(path):
    """transformers' GPT-2 on the checkpoint at `path`, float32, CPU, eval mode."""
    try:
        import transformers
        from transformers import GPT2LMHeadModel
    except ImportError:
        raise VerifyUnavailable(
            _("checking against transformers needs it installed: pip install transformers")
        ) from None
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()  # its "Loading weights" bar, on stderr
    return transformers.__version__, GPT2LMHeadModel.from_pretrained(str(path), dtype=torch.float32).eval()


def not_verifiable(model: str) -> ArchitectureError:
    """The comparison is GPT-2's so far: a LLaMA-family model is refused in one sentence."""
    return ArchitectureError(_("{model} is a LLaMA-family model: the comparison with transformers covers "
                               "GPT-2 models so far").format(model=model))


@torch.inference_mode()
def verify(lm, ids: list[int], n_tokens: int = GREEDY_TOKENS) -> Verification:
    """Compares `lm`'s checkpoint, in float32, with transformers' model of it over `ids` (GPT-2's)."""
    if not isinstance(lm.config, GPT2Config):
        raise not_verifiable(lm.name)
    version, hf = reference_model(lm.source.path)
    ours_lm = lm.float32_twin()
    ours_logits, _cache = ours_lm.model(torch.tensor([ids]).to(ours_lm.model.device))
    theirs_logits = hf(torch.tensor([ids])).logits
    ours_logits = ours_logits.cpu()
    diff = float((ours_logits - theirs_logits).abs().max())
    top1 = int((ours_logits.argmax(-1) == theirs_logits.argmax(-1)).sum())
    n = min(n_tokens, ours_lm.config.n_ctx - len(ids))
    ours = ours_lm.generate(ids, n).token_ids if n > 0 else []
    theirs = []
    if n > 0:
        out = hf.generate(torch.tensor([ids]), max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
        theirs = out[0, len(ids):].tolist()
    return Verification(version, len(ids), diff, top1, ours, theirs)
