"""What if? Switching parts of the model off (ablation), through editing hooks.

An `Ablation` names a part of the network and how it is switched off:

- one attention head (`L3H5`): its output `z` is set to zero, or to its mean over the prompt's
  positions (`L3H5:mean`); the head then adds nothing (or only its average) to the residual
  stream, as if its rows of `c_proj` were zero;
- all heads of a block (`L3.heads`), a block's MLP (`L3.mlp`), or a whole block (`L3`: both of
  its updates to the residual stream);
- chosen MLP neurons at the last position (`L3.n12,40`): their GELU outputs.

`applied(hooks, ablations)` subscribes the editing hooks for a `with` block; every forward pass
inside (a prefill, each decode step) runs with the parts switched off. The specs are the command
line's syntax (`--ablate L3H5`) and what a trace records.

**The mean of a mean ablation** is the prompt's: the part's output averaged over the real
positions of the first pass inside the block (padding left out, each row of a batch its own
mean), kept and used again at every later pass on a batch of that size: each decode step through
the cache, and each full pass of a generation without it, so cached and naive generation choose
the same tokens. One prompt (or one batch of prompts) per block: a new prompt, a new block.
"""

from __future__ import annotations

import re
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Iterator

import torch

from .errors import UsageError
from .hooks import HookFn, Hooks, hook_name
from .i18n import _

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the model sits beside these modules
    from .language_model import LanguageModel

__all__ = ["Ablation", "AblationError", "Means", "PredictionChange", "applied", "parse_ablations", "prediction_changes"]

KINDS = ("head", "heads", "mlp", "block", "neurons")
HOW = ("zero", "mean")
# Numbers of at most 9 digits: far beyond any model's blocks, heads or neurons (what `check` says),
# and never more digits than int() converts (a 5,000-digit block number raised ValueError).
_SPEC = re.compile(
    r"^L(?P<layer>\d{1,9})(?:H(?P<head>\d{1,9})|\.(?P<part>heads|mlp)|\.n(?P<neurons>\d{1,9}(?:,\d{1,9})*))?"
    r"(?::(?P<how>zero|mean))?$"
)


class AblationError(UsageError, ValueError):
    """An ablation that does not fit the model, or a spec that does not parse (a bad value: also a
    ValueError)."""


@dataclass(frozen=True)
class Ablation:
    """One part of the network switched off."""

    kind: str  # one of KINDS
    layer: int
    head: int | None = None  # for kind "head"
    neurons: tuple[int, ...] = ()  # for kind "neurons" (at the last position)
    how: str = "zero"  # "zero", or "mean" over the prompt's positions (the module's docstring)

    @classmethod
    def parse(cls, spec: str) -> "Ablation":
        """`L3H5`, `L3H5:mean`, `L3.heads`, `L3.mlp`, `L3`, `L3.n12,40` (any of them `:zero` or `:mean`)."""
        match = _SPEC.match(spec.strip())
        if match is None:
            raise AblationError(
                _("{spec!r} is not an ablation: write L3H5 (a head), L3.heads, L3.mlp, L3 (a block) or "
                  "L3.n12,40 (neurons), optionally followed by :mean").format(spec=spec)
            )
        layer, how = int(match["layer"]), match["how"] or "zero"
        if match["head"] is not None:
            return cls("head", layer, head=int(match["head"]), how=how)
        if match["neurons"] is not None:
            return cls("neurons", layer, neurons=tuple(int(n) for n in match["neurons"].split(",")), how=how)
        return cls(match["part"] or "block", layer, how=how)

    @property
    def spec(self) -> str:
        """The ablation written as `parse` reads it."""
        part = {
            "head": f"H{self.head}",
            "heads": ".heads",
            "mlp": ".mlp",
            "block": "",
            "neurons": ".n" + ",".join(map(str, self.neurons)),
        }[self.kind]
        return f"L{self.layer}{part}" + (":mean" if self.how == "mean" else "")

    def check(self, n_layer: int, n_head: int, d_mlp: int) -> None:
        """Raises AblationError when this names a part the model does not have."""
        if self.kind not in KINDS or self.how not in HOW:
            raise AblationError(_("{spec}: unknown kind of ablation").format(spec=self.spec))
        if not 0 <= self.layer < n_layer:
            raise AblationError(_("{spec}: the model has blocks 0 to {last}").format(spec=self.spec, last=n_layer - 1))
        if self.kind == "head" and not 0 <= (self.head or 0) < n_head:
            raise AblationError(_("{spec}: the model has heads 0 to {last}").format(spec=self.spec, last=n_head - 1))
        if self.kind == "neurons" and (not self.neurons or not all(0 <= n < d_mlp for n in self.neurons)):
            raise AblationError(_("{spec}: the MLP has neurons 0 to {last}").format(spec=self.spec, last=d_mlp - 1))

    def edits(self, means: "Means") -> list[tuple[str, HookFn]]:
        """(hook name, editing function) pairs that switch this part off (a mean ablation's means
        kept in `means`, one `applied` block's)."""
        if self.kind in ("head", "heads"):
            heads = slice(self.head, self.head + 1) if self.kind == "head" else slice(None)

            def edit_z(name: str, z: torch.Tensor) -> torch.Tensor:  # z: (B, nh, T, hd)
                out = z.clone()
                out[:, heads] = self._off(means, name, z[:, heads], positions_dim=2)
                return out

            return [(hook_name("attn.hook_z", self.layer), edit_z)]

        def edit_all(name: str, update: torch.Tensor) -> torch.Tensor:  # (B, T, C)
            return self._off(means, name, update, positions_dim=1)

        if self.kind == "mlp":
            return [(hook_name("hook_mlp_out", self.layer), edit_all)]
        if self.kind == "block":
            return [(hook_name(name, self.layer), edit_all) for name in ("hook_attn_out", "hook_mlp_out")]

        def edit_neurons(name: str, post: torch.Tensor) -> torch.Tensor:  # (B, T, 4C)
            index = torch.tensor(self.neurons, device=post.device)
            out = post.clone()
            replacement = self._off(means, name, post[:, :, index], positions_dim=1)
            out[:, -1, index] = replacement[:, -1]  # the last position only: where the prediction is made
            return out

        return [(hook_name("mlp.hook_post", self.layer), edit_neurons)]

    # The edits return new tensors and never write into the value they are handed.
    def _off(self, means: "Means", name: str, part: torch.Tensor, positions_dim: int) -> torch.Tensor:
        if self.how == "mean":
            return means.of(self.spec, name, part, positions_dim).expand_as(part)
        return torch.zeros_like(part)


class Means:
    """The means of one `applied` block's mean ablations: each part's mean over the real positions
    of the first pass on a batch of its size (the prompt's), per row, kept for the later passes of
    the same text. A new text (`generate`, `run_with_cache`, `run_with_hooks`: Hooks.new_sequence)
    takes its own: two prompts in one block never share a mean."""

    def __init__(self, hooks: Hooks) -> None:
        self.hooks = hooks  # whose passes say which positions are real
        self._kept: dict[tuple[str, str, int, int], torch.Tensor] = {}

    def of(self, spec: str, name: str, part: torch.Tensor, positions_dim: int) -> torch.Tensor:
        """`part`'s kept mean for ablation `spec` at hook `name` (positions dimension of size 1),
        taken from `part` on the first pass that asks for it."""
        key = (spec, name, part.shape[0], self.hooks.sequence)
        found = self._kept.get(key)
        if found is not None:
            return found
        info = self.hooks.current_pass
        one = self._kept.get((spec, name, 1, self.hooks.sequence))
        if info.past and one is not None:  # B continuations of one prompt (generate_batch): its mean, B times
            return one.expand(part.shape[0], *one.shape[1:])
        if info.past:
            raise AblationError(_("{spec}: a mean ablation takes its mean from the prompt's pass, and this pass "
                                  "continues a cache filled without it").format(spec=spec))
        if info.real is None:
            mean = part.mean(dim=positions_dim, keepdim=True)
        else:  # a padded batch: each row's real positions only
            shape = [1] * part.dim()
            shape[0], shape[positions_dim] = part.shape[0], part.shape[positions_dim]
            real = info.real.reshape(shape).to(part.dtype)
            mean = (part * real).sum(dim=positions_dim, keepdim=True) / real.sum(dim=positions_dim, keepdim=True).clamp_min(1)
        self._kept[key] = mean
        return mean


def parse_ablations(specs: list[str] | tuple[str, ...]) -> list[Ablation]:
    """Ablations from their specs (AblationError for one that does not parse)."""
    return [Ablation.parse(spec) for spec in specs]


@contextmanager
def applied(hooks: Hooks, ablations: list[Ablation] | tuple[Ablation, ...]) -> Iterator[None]:
    """Runs the `with` block with `ablations` in effect on the model of `hooks` (AblationError,
    before anything runs, for a part the model does not have)."""
    if hooks.sizes:
        for ablation in ablations:
            ablation.check(hooks.sizes["n_layer"], hooks.sizes["n_head"], hooks.sizes["d_mlp"])
    means = Means(hooks)
    with ExitStack() as stack:
        for ablation in ablations:
            for name, edit in ablation.edits(means):
                stack.enter_context(hooks.subscribe(name, edit))
        yield


@dataclass(frozen=True)
class PredictionChange:
    """One candidate next token, before and after the ablations."""

    token_id: int
    before: float  # probability without the ablations
    after: float  # with them
    rank: int | None = None  # its place in the edited run's top k (1 first); None: in the model's own only


@torch.inference_mode()
def prediction_changes(lm: LanguageModel, ids: list[int], ablations: list[Ablation], k: int = 5) -> list[PredictionChange]:
    """The next-token probabilities at the last position without and with `ablations`, for the
    top `k` tokens of either run (the edited run's first), so nothing that rose or fell is missed."""
    batch = torch.tensor([ids], device=lm.model.device)
    before = torch.softmax(lm.model(batch, last_only=True)[0][0, -1].double(), dim=-1)
    with applied(lm.hooks, ablations):
        after = torch.softmax(lm.model(batch, last_only=True)[0][0, -1].double(), dim=-1)
    top_after = torch.topk(after, k).indices.tolist()
    tokens = list(dict.fromkeys(top_after + torch.topk(before, k).indices.tolist()))
    return [PredictionChange(t, float(before[t]), float(after[t]), i + 1 if i < len(top_after) else None)
            for i, t in enumerate(tokens)]
