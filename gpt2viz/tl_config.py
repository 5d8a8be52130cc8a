"""The model's settings under TransformerLens's names: `lm.cfg.n_layers`, `lm.cfg.d_model`, ...

TL code reads a model's shape from `model.cfg` (a `HookedTransformerConfig`); gpt2viz's own
`lm.config` keeps the names of the checkpoint's config.json (`n_layer`, `n_embd`, `n_head`).
`TLConfig` gives TL's names for the same numbers, made afresh from `lm.config` at each access
(read-only), and TL's words for what kind of model it is: `normalization_type` is "LNPre" for
GPT-2 and "RMSPre" for a LLaMA-family model, as TL's own after `fold_ln`, since `lm.W_*` hold the
norms' gains folded in (gpt2viz.tl_weights) and the cache's `hook_normalized` comes before them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["TLConfig", "tl_config"]

@dataclass(frozen=True)
class TLConfig:
    """A model's settings as TransformerLens's `HookedTransformerConfig` names them (the fields TL
    code reads most; gpt2viz's own are `lm.config`)."""

    model_name: str
    original_architecture: str  # "GPT2LMHeadModel" or "LlamaForCausalLM"
    n_layers: int
    d_model: int
    n_heads: int
    d_head: int
    d_mlp: int
    d_vocab: int
    d_vocab_out: int
    n_ctx: int
    n_key_value_heads: int | None  # a LLaMA-family model's key/value heads; None for GPT-2, as TL's
    act_fn: str  # "gelu_new" (GPT-2's tanh GELU) or "silu"
    normalization_type: str  # "LNPre" or "RMSPre": the norms' gains are folded into the weights
    positional_embedding_type: str  # "standard" (a learned table) or "rotary"
    gated_mlp: bool
    eps: float
    rotary_base: float | None
    final_rms: bool
    attn_only: bool
    parallel_attn_mlp: bool
    default_prepend_bos: bool  # True: run_with_cache and to_tokens start a text with bos_id
    tokenizer_prepends_bos: bool  # False: the tokenizer itself adds nothing
    device: str
    dtype: torch.dtype  # of the activations (an int8 model computes in float32), as TL code makes its tensors


def tl_config(lm: Any) -> TLConfig:
    """`lm`'s settings as TLConfig (a LanguageModel of either family)."""
    config = lm.config
    llama = config.architecture == "llama"
    return TLConfig(
        model_name=lm.name,
        original_architecture="LlamaForCausalLM" if llama else "GPT2LMHeadModel",
        n_layers=config.n_layer,
        d_model=config.n_embd,
        n_heads=config.n_head,
        d_head=config.head_dim,
        d_mlp=config.d_mlp,
        d_vocab=config.vocab_size,
        d_vocab_out=config.vocab_size,
        n_ctx=config.n_ctx,
        n_key_value_heads=config.n_kv_head if llama else None,
        act_fn="silu" if llama else str(config.activation_function),
        normalization_type="RMSPre" if llama else "LNPre",
        positional_embedding_type="rotary" if llama else "standard",
        gated_mlp=llama,
        eps=config.norm_eps,
        rotary_base=float(config.rope_theta) if llama else None,
        final_rms=llama,
        attn_only=False,
        parallel_attn_mlp=False,
        default_prepend_bos=True,
        tokenizer_prepends_bos=False,
        device=str(lm.model.device),
        dtype=lm.model.dtype,
    )
