"""Which parts wrote the answer: direct logit attribution.

The residual stream at the last position is a sum of what every part wrote into it: the token
and position embeddings, each attention head, each block's attention bias, each MLP. The final
LayerNorm is affine once its scale is frozen at this pass's value (the standard simplification,
exact for this pass), and the LM head is linear, so the logit of a token splits into one term per
part:

    logit[t] = Σ_parts ((part - mean(part)) / scale * γ) · wte[t]  +  β · wte[t]

A LLaMA-family model has no position table, no biases and an RMSNorm, which subtracts no mean and
adds no β: its terms are the token embedding's, each head's (through o_proj) and each MLP's,

    logit[t] = Σ_parts (part / scale * w) · head[t]

where head[t] is the LM head's row for t (the token table's, where they are tied).

Each term is the part's *direct* effect: what it adds to the logit through the residual stream
alone, not through the later layers that read it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .activation_cache import attention_out_product, head_results, through_final_norm
from .hooks import hook_name

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the model sits beside these modules
    from .language_model import LanguageModel
    from .model.gpt2 import GPT2

__all__ = ["Attribution", "direct_logit_attribution", "lm_head_row"]


@dataclass(frozen=True)
class Attribution:
    """One token's logit at the last position, split into the parts that wrote it."""

    token_id: int
    logit: float  # the logit the model computed
    embed: float  # the token embedding's term
    pos_embed: float  # the position embedding's term
    heads: list[list[float]]  # [block][head]
    attn_bias: list[float]  # [block]: c_proj's bias, written whatever the heads do
    mlp: list[float]  # [block]
    ln_bias: float  # the final LayerNorm's β, read by the LM head
    architecture: str = "gpt2"  # llama: no position table, no biases, no β (those terms are 0)

    @property
    def total(self) -> float:
        """The sum of every term: equals `logit` up to rounding."""
        return (
            self.embed + self.pos_embed + sum(map(sum, self.heads)) + sum(self.attn_bias) + sum(self.mlp) + self.ln_bias
        )


@torch.inference_mode()
def direct_logit_attribution(lm: LanguageModel, ids: list[int], token_id: int | None = None) -> Attribution:
    """Splits the logit of `token_id` (default: the model's top token) at the last position of
    the pass over `ids` into the direct terms of every part of the network."""
    model, config = lm.model, lm.config
    ids = lm.encode_prompt(ids)  # integers in the vocabulary, or an InputError
    if token_id is not None:
        token_id = lm.check_token_id(token_id, "token_id")
    llama = config.architecture == "llama"
    names = ["hook_embed", "ln_final.hook_scale"] + ([] if llama else ["hook_pos_embed"])
    for layer in range(config.n_layer):
        names += [hook_name("attn.hook_z", layer), hook_name("hook_mlp_out", layer)]
    seen: dict[str, torch.Tensor] = {}

    def keep(name: str, value: torch.Tensor) -> None:
        seen[name] = value[0, ..., -1, :] if name.endswith("hook_z") else value[0, -1]

    with lm.hooks.subscribe(names, keep):
        logits, _cache = model(torch.tensor([ids], device=model.device))
    last = logits[0, -1].float()
    token_id = int(torch.argmax(last)) if token_id is None else int(token_id)

    embed = seen["hook_embed"]
    parts = [embed, torch.zeros_like(embed) if llama else seen["hook_pos_embed"]]  # LLaMA: no position table
    attn_bias, per_head = [], []
    for layer in range(config.n_layer):
        z = seen[hook_name("attn.hook_z", layer)]  # (nh, hd) at the last position
        # Each head alone through c_proj, less the bias (gpt2viz.activation_cache.head_results).
        per_head.append(head_results(model, layer, z[None, :, None, :])[:, 0, 0])  # (nh, C)
        zero = torch.zeros(1, config.n_embd, dtype=z.dtype, device=z.device)
        attn_bias.append(attention_out_product(model, layer)(zero)[0])  # LLaMA's o_proj has none: 0
    parts += [*per_head, torch.stack(attn_bias), torch.stack([seen[hook_name("hook_mlp_out", l)] for l in range(config.n_layer)])]
    stacked = torch.cat([p.reshape(-1, config.n_embd) for p in parts]).float()  # (parts, C)

    scale = seen["ln_final.hook_scale"].float()  # of this pass, frozen: sqrt(var + eps), LLaMA's sqrt(mean(x²) + eps)
    direction = lm_head_row(model, token_id)  # (C,)
    normalised = through_final_norm(model, stacked) / scale
    ln_bias = 0.0 if llama else float(model.ln_f.bias.float() @ direction)  # an RMSNorm has no β
    terms = (normalised @ direction).tolist()

    n_layer, n_head = config.n_layer, config.n_head
    heads = [terms[2 + l * n_head : 2 + (l + 1) * n_head] for l in range(n_layer)]
    rest = terms[2 + n_layer * n_head :]
    return Attribution(
        token_id=token_id,
        logit=float(last[token_id]),
        embed=terms[0],
        pos_embed=terms[1],
        heads=heads,
        attn_bias=rest[:n_layer],
        mlp=rest[n_layer:],
        ln_bias=ln_bias,
        architecture=config.architecture,
    )


def lm_head_row(model: GPT2, token_id: int) -> torch.Tensor:
    """The direction in the residual stream that token `token_id`'s logit reads, in float32: its
    row of wte, which the LM head shares (weight tying), as every number format stores it (a
    LLaMA-family model: its LM head's own row where it is not tied)."""
    index = torch.tensor([token_id], device=model.device)
    if model.config.architecture == "llama":
        if model.config.tie_word_embeddings:
            return model.model.embed_tokens.lookup(index)[0].float()
        return model.lm_head.weight[token_id].float()
    return model.wte.lookup(index)[0].float()
