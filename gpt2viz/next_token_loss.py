"""How well a pass's logits predicted the text's own next tokens: the cross-entropy (nats).

Position t's logits score token t + 1, so a text of T tokens makes T - 1 predictions; with an
attention mask, a prediction counts only where both tokens are real (not padding). This is
TransformerLens's `lm_cross_entropy_loss`, what `run_with_hooks(..., return_type="loss")` returns.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .errors import InputError
from .i18n import N_

TOO_SHORT = N_("{setting} needs two tokens or more for a loss: each token is scored by the one before")


def next_token_loss(
    logits: torch.Tensor, ids: torch.Tensor, attention_mask: torch.Tensor | None = None, per_token: bool = False
) -> torch.Tensor:
    """The mean cross-entropy of each position's logits `[B, T, V]` against the next of `ids`
    `[B, T]`, a scalar; `per_token=True`: each prediction's, `[B, T - 1]` (0 where the mask
    leaves it out, whatever the logits there: a padded position's may be anything)."""
    if ids.dim() != 2 or logits.dim() != 3 or logits.shape[:2] != ids.shape:
        raise InputError("ids", N_("{setting} must be [batch, positions] ids of the logits' [batch, positions, vocabulary], got {value}"),
                         value=f"{list(ids.shape)} and {list(logits.shape)}")
    if ids.size(-1) < 2:
        raise InputError("ids", TOO_SHORT)
    log_probs = F.log_softmax(logits[:, :-1].float(), dim=-1)
    losses = -log_probs.gather(-1, ids[:, 1:, None])[..., 0]
    if attention_mask is None:
        return losses if per_token else losses.mean()
    counted = attention_mask[:, :-1].bool() & attention_mask[:, 1:].bool()
    losses = losses.masked_fill(~counted, 0.0)
    return losses if per_token else losses.sum() / counted.sum()
