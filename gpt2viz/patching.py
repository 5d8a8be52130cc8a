"""Activation patching: which positions of which blocks carry the difference between two prompts.

Two prompts of the same token length that differ where it matters ("The capital of France is" /
"... Germany is") make the model predict different answers. Run the corrupted prompt again with
the residual stream entering block l at position p replaced by the clean prompt's; the share of
the clean answer's lead (logit of the clean answer minus the corrupted one's) that comes back
says how much of what decides the answer sits at (l, p).

    restored[l][p] = (diff_patched - diff_corrupted) / (diff_clean - diff_corrupted)

1 means the patch alone brings the clean answer back, 0 that it changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .errors import Gpt2VizError
from .hooks import hook_name
from .i18n import _

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the model sits beside these modules
    from .language_model import LanguageModel

__all__ = [
    "PatchingError", "PatchingResult", "attribution_patch_residual_stream", "patch_residual_stream", "patched_logits",
    "residuals",
]


class PatchingError(Gpt2VizError, ValueError):
    """Prompts that cannot be patched into each other."""


@dataclass(frozen=True)
class PatchingResult:
    clean_answer: int  # token id the clean prompt predicts
    corrupted_answer: int  # token id the corrupted prompt predicts (or the chosen rival)
    clean_diff: float  # logit[clean_answer] - logit[corrupted_answer], clean run
    corrupted_diff: float  # the same, corrupted run
    restored: list[list[float]]  # [block][position]


@torch.inference_mode()
def residuals(lm: LanguageModel, ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """The residual stream entering every block, `[n_layer, T, C]`, and the last position's logits."""
    seen: list[torch.Tensor] = []
    with lm.hooks.subscribe("blocks.*.hook_resid_pre", lambda name, x: seen.append(x[0].clone())):
        logits, _cache = lm.model(torch.tensor([ids], device=lm.model.device))
    return torch.stack(seen), logits[0, -1].float()


@torch.inference_mode()
def patched_logits(lm: LanguageModel, ids: list[int], layer: int, positions: list[int], clean: torch.Tensor) -> torch.Tensor:
    """The last position's logits of the pass over `ids` with the residual stream entering block
    `layer` at `positions` taken from `clean` (`[n_layer, T, C]`, from `residuals`)."""

    def patch(name: str, x: torch.Tensor) -> torch.Tensor:
        out = x.clone()
        out[0, positions] = clean[layer, positions]
        return out

    with lm.hooks.subscribe(hook_name("hook_resid_pre", layer), patch):
        logits, _cache = lm.model(torch.tensor([ids], device=lm.model.device))
    return logits[0, -1].float()


@dataclass(frozen=True)
class _Prepared:
    clean_ids: list[int]
    corrupted_ids: list[int]
    clean: torch.Tensor  # [n_layer, T, C], the residual stream entering each block
    answer: int
    rival: int
    clean_diff: float
    corrupted_diff: float


def _prepare(lm: LanguageModel, clean_ids: list[int], corrupted_ids: list[int], rival: int | None) -> _Prepared:
    """Both prompts' ids checked, the clean residual stream, the answer, its rival and their logit
    differences in both runs."""
    if len(clean_ids) != len(corrupted_ids):
        raise PatchingError(
            _("the two prompts must have the same number of tokens ({clean} and {corrupted})").format(
                clean=len(clean_ids), corrupted=len(corrupted_ids)
            )
        )
    clean_ids, corrupted_ids = lm.encode_prompt(clean_ids), lm.encode_prompt(corrupted_ids)  # ids in the vocabulary
    if rival is not None:
        rival = lm.check_token_id(rival, "rival")
    clean, clean_logits = residuals(lm, clean_ids)
    _unused, corrupted_logits = residuals(lm, corrupted_ids)
    answer = int(torch.argmax(clean_logits))
    rival = int(torch.argmax(corrupted_logits)) if rival is None else int(rival)
    if rival == answer:
        raise PatchingError(
            _("both prompts predict the same token, so there is no difference to restore; choose a rival token")
        )
    clean_diff = float(clean_logits[answer] - clean_logits[rival])
    corrupted_diff = float(corrupted_logits[answer] - corrupted_logits[rival])
    return _Prepared(clean_ids, corrupted_ids, clean, answer, rival, clean_diff, corrupted_diff)


def patch_residual_stream(
    lm: LanguageModel,
    clean_ids: list[int],
    corrupted_ids: list[int],
    rival: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] = lambda: False,
) -> PatchingResult | None:
    """Patches the clean residual stream into the corrupted run at every (block, position).
    `rival` is the token the clean answer is measured against (default: the corrupted prompt's
    own answer). `progress(done, total)` is called after each patched run; returns None when
    `cancelled()` turns true."""
    run = _prepare(lm, clean_ids, corrupted_ids, rival)
    n_layer, n_pos = lm.config.n_layer, len(run.clean_ids)
    restored = [[0.0] * n_pos for _layer in range(n_layer)]
    for layer in range(n_layer):
        for pos in range(n_pos):
            if cancelled():
                return None
            logits = patched_logits(lm, run.corrupted_ids, layer, [pos], run.clean)
            patched = float(logits[run.answer] - logits[run.rival])
            restored[layer][pos] = (patched - run.corrupted_diff) / (run.clean_diff - run.corrupted_diff)
            if progress is not None:
                progress(layer * n_pos + pos + 1, n_layer * n_pos)
    return PatchingResult(run.answer, run.rival, run.clean_diff, run.corrupted_diff, restored)


def attribution_patch_residual_stream(
    lm: LanguageModel, clean_ids: list[int], corrupted_ids: list[int], rival: int | None = None
) -> PatchingResult:
    """`patch_residual_stream`'s grid to first order (attribution patching, after TransformerLens's
    tutorials): instead of a patched pass per (block, position), the clean and corrupted passes
    and one backward pass of the corrupted run's logit difference. For each block l and
    position p, the patch's effect is estimated as the gradient times the change:

        restored[l][p] ~ (clean[l, p] - corrupted[l, p]) . d diff / d resid_pre[l, p]
                         / (diff_clean - diff_corrupted)

    Exact where the logit difference is linear in the residual stream; LayerNorm and softmax make
    it an estimate, best at ranking which (block, position) matter, worst for large patches."""
    run = _prepare(lm, clean_ids, corrupted_ids, rival)
    names = [hook_name("hook_resid_pre", layer) for layer in range(lm.config.n_layer)]
    logits, cache = lm.run_with_cache(run.corrupted_ids, names, grad=True)
    diff = logits[0, -1, run.answer] - logits[0, -1, run.rival]
    corrupted = [cache[name] for name in names]  # [1, T, C] each, in the graph
    grads = torch.autograd.grad(diff, corrupted)
    scale = run.clean_diff - run.corrupted_diff
    restored = [
        (((run.clean[layer] - corrupted[layer][0].detach()) * grads[layer][0]).sum(-1) / scale).tolist()
        for layer in range(lm.config.n_layer)
    ]
    return PatchingResult(run.answer, run.rival, run.clean_diff, run.corrupted_diff, restored)
