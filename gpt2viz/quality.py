"""How far a lower-precision model is from float32 on the same checkpoint, measured.

`compare_logits` takes the logits of the same positions from both models: the largest absolute
difference of a logit, how often the top token agrees, and the mean KL divergence of the
float32 distribution from the other (nats). `heldout` measures both models over a text the way
the bundled model's card does (non-overlapping windows of n_ctx tokens, each a fresh context):
each model's perplexity, and the agreement and KL over every predicted position.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
import torch
import torch.nn.functional as F

from .language_model import LanguageModel


ROWS_AT_ONCE_ELEMENTS = 2**21  # Agreement.add's chunk: 16 MiB a float64 array, which the allocator keeps for reuse


@dataclass
class Agreement:
    """Logits of one model against float32's, position by position."""

    positions: int = 0
    max_abs_dlogit: float = 0.0
    top1_agree: int = 0  # positions whose most likely token is float32's
    kl_sum: float = 0.0  # sum over positions of KL(float32 || other), nats

    @property
    def top1_agreement(self) -> float:
        return self.top1_agree / self.positions if self.positions else 1.0

    @property
    def mean_kl(self) -> float:
        return self.kl_sum / self.positions if self.positions else 0.0

    def add(self, logits: torch.Tensor, reference: torch.Tensor, targets: torch.Tensor | None = None) -> tuple[float, float]:
        """Adds positions: `[N, V]` logits of the model and of float32, in float64. With `targets`
        (`[N]` token ids, the next token of each position), returns both models' summed
        cross-entropy on them (nats), else zeros.

        A few rows at a time (ROWS_AT_ONCE_ELEMENTS): the float64 copies of a whole window were ~8 arrays of
        400 MB each for GPT-2's 1,024 positions, new memory the system zeroes page by page (half of
        the time went there); the rows of a chunk reuse the same memory."""
        losses = [0.0, 0.0]
        rows = max(1, ROWS_AT_ONCE_ELEMENTS // max(1, logits.size(-1)))
        for start in range(0, logits.size(0), rows):
            a, b = logits[start : start + rows].double(), reference[start : start + rows].double()
            self.positions += a.size(0)
            self.max_abs_dlogit = max(self.max_abs_dlogit, float((a - b).abs().max()))
            self.top1_agree += int((a.argmax(-1) == b.argmax(-1)).sum())
            log_p, log_q = F.log_softmax(b, dim=-1), F.log_softmax(a, dim=-1)
            self.kl_sum += float((log_p.exp() * (log_p - log_q)).sum())
            if targets is not None:
                chosen = targets[start : start + rows].unsqueeze(1)
                losses[0] -= float(log_q.gather(1, chosen).sum())
                losses[1] -= float(log_p.gather(1, chosen).sum())
        return losses[0], losses[1]

    def to_dict(self) -> dict:
        return {
            "positions": self.positions,
            "max_abs_dlogit": self.max_abs_dlogit,
            "top1_agreement": self.top1_agreement,
            "mean_kl": self.mean_kl,
        }


@torch.inference_mode()
def logits_of(lm: LanguageModel, ids: list[int]) -> torch.Tensor:
    """Every position's logits `[T, V]`, in float32 on the CPU."""
    logits, _ = lm.model(torch.tensor([ids], device=lm.model.device))
    return logits[0].float().cpu()


def compare_logits(lm: LanguageModel, reference: LanguageModel, ids: list[int]) -> Agreement:
    """`lm` against `reference` (float32, the same checkpoint) over the positions of `ids`."""
    agreement = Agreement()
    agreement.add(logits_of(lm, ids), logits_of(reference, ids))
    return agreement


@dataclass
class Heldout:
    """Both models over a held-out text: perplexities, and the agreement of every prediction."""

    predictions: int
    loss: float  # mean next-token cross-entropy of the model, nats
    reference_loss: float
    agreement: Agreement

    @property
    def perplexity(self) -> float:
        return math.exp(self.loss)

    @property
    def reference_perplexity(self) -> float:
        return math.exp(self.reference_loss)

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(perplexity=self.perplexity, reference_perplexity=self.reference_perplexity, agreement=self.agreement.to_dict())
        return out


def heldout(lm: LanguageModel, reference: LanguageModel, ids: list[int]) -> Heldout:
    """Perplexity of `lm` and of `reference` on `ids`, cut into non-overlapping windows of n_ctx
    tokens (each a fresh context; every token but a window's last predicts the next), and their
    agreement on every prediction."""
    n = lm.config.n_ctx
    windows = [w for w in (ids[i : i + n] for i in range(0, len(ids), n)) if len(w) >= 2]
    totals = [0.0, 0.0]
    agreement = Agreement()
    count = 0
    for window in windows:
        ours, theirs = logits_of(lm, window)[:-1], logits_of(reference, window)[:-1]
        # The cross-entropy of each prediction, from the log-probabilities the agreement took.
        for n, loss in enumerate(agreement.add(ours, theirs, torch.tensor(window[1:]))):
            totals[n] += loss
        count += len(window) - 1
    count = max(count, 1)
    return Heldout(count, totals[0] / count, totals[1] / count, agreement)
