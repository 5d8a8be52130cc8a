"""LLaMA (SmolLM2 and its family): GPT-2's road, with the four changes modern models made.

1. **RMSNorm** instead of LayerNorm: divide each position by its root mean square, no mean taken
   away, no bias: `x / sqrt(mean(x^2) + eps) * weight`.
2. **Rotary positions** instead of a position table: nothing is added to the token vectors; each
   query and key is rotated, pair of numbers by pair, by angles that grow with its position, so
   a score depends on how far apart the two positions are.
3. **Grouped-query attention**: fewer key/value heads than query heads (SmolLM2-135M: 9 query
   heads share 3); each key/value head serves `group` query heads, and the KV cache keeps only
   the key/value heads (a third of the bytes there).
4. **SwiGLU MLP**: two projections of the input, one through SiLU (the gate), multiplied
   element-wise, then the down projection: `down(silu(gate(x)) * up(x))`.

Parameter names equal the checkpoint's (`model.layers.3.self_attn.q_proj.weight`), so loading is
an identity map. Linear weights are stored `[out, in]` (torch's nn.Linear layout): `y = x @ W^T`.
Hook names are TransformerLens's for its LLaMA models (`attn.hook_rot_q`, `mlp.hook_pre_linear`).
Shape comments: B = batch, T = new positions, L = cached + new positions, C = hidden size,
nh = query heads, nkv = key/value heads, hd = head_dim, F = the MLP's width.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError, WeightsError
from ..hooks import Hooks, llama_hook_names
from ..i18n import _
from ..input_files import MAX_CONFIG_BYTES, FileRefused, parse_json, read_regular, shown
from .config import ParamCounts, check_size
from .gpt2 import attention_with_padding, check_input, padding_mask
from .kv_cache import KVCache
from .layers import (
    Embedding,
    Layer,
    PreNormBlock,
    TiedLMHead,
    _param,
    causal_mask,
    run_pass,
)
from .weights import FLOAT_DTYPES, find_weight_files, read_headers, read_tensors

# The largest sizes loaded (a config.json past them is refused before anything is built): LLaMA 3's
# 70B shapes fit, and the context may be long (the KV cache grows with use, not with n_ctx).
LIMITS = {"n_layer": 128, "n_head": 128, "n_kv_head": 128, "n_embd": 16384, "d_mlp": 65536, "n_ctx": 131072,
          "vocab_size": 262_144}


def _id_in_vocabulary(value: Any, vocab_size: Any) -> int | None:
    """`value` where it is a token id of a vocabulary of `vocab_size` tokens, else None."""
    if isinstance(value, bool) or not isinstance(value, int) or not isinstance(vocab_size, int):
        return None
    return value if 0 <= value < vocab_size else None


@dataclass(frozen=True)
class LlamaConfig:
    """The sizes of a LLaMA-family model (Hugging Face's `LlamaConfig` keys, read by `from_dict`)."""

    architecture: ClassVar[str] = "llama"  # what a trace calls the family (model.architecture)

    n_layer: int = 30
    n_head: int = 9  # query heads
    n_kv_head: int = 3  # key/value heads, each shared by n_head / n_kv_head query heads
    n_embd: int = 576
    d_mlp: int = 1536
    n_ctx: int = 8192
    vocab_size: int = 49152
    rms_norm_eps: float = 1e-5
    rope_theta: float = 100000.0
    tie_word_embeddings: bool = True
    eos_token_id: int = 0
    # The id a text starts with (`prepend_bos`) and the id rows are padded with, as the files name
    # them (SmolLM2-Instruct: <|im_start|>, 1, and <|im_end|>, 2); None where they name none.
    bos_token_id: int | None = None
    pad_token_id: int | None = None

    def __post_init__(self) -> None:
        for key in ("n_layer", "n_head", "n_kv_head", "n_embd", "d_mlp", "n_ctx", "vocab_size"):
            check_size(key, getattr(self, key), LIMITS[key])
        if self.n_embd % self.n_head != 0:
            raise ConfigError(_("n_embd ({n_embd}) is not divisible by n_head ({n_head})").format(
                n_embd=self.n_embd, n_head=self.n_head))
        if self.n_head % self.n_kv_head != 0:
            raise ConfigError(_("{key} ({value}) does not divide {other} ({total})").format(
                key="num_key_value_heads", value=self.n_kv_head, other="num_attention_heads", total=self.n_head))
        if self.head_dim % 2:
            raise ConfigError(_("a head of {n} numbers cannot be rotated in pairs").format(n=self.head_dim))
        for key in ("rms_norm_eps", "rope_theta"):
            value = getattr(self, key)
            limit = 1 if key == "rms_norm_eps" else 1e9
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < limit) or math.isnan(value):
                raise ConfigError(_("{key} must be a positive number below {limit}, got {value}").format(
                    key=key, limit=limit, value=shown(value)))
        for key in ("bos_token_id", "pad_token_id"):  # fed to the model as ids: inside the vocabulary
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or not 0 <= value < self.vocab_size):
                raise ConfigError(_("{key} must be a token id, an integer from 0 to {max}, got {value}").format(
                    key=key, max=self.vocab_size - 1, value=shown(value)))

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def norm_eps(self) -> float:
        """The epsilon of every norm (RMSNorm here)."""
        return self.rms_norm_eps

    @property
    def group(self) -> int:
        """Query heads per key/value head."""
        return self.n_head // self.n_kv_head

    @property
    def param_counts(self) -> ParamCounts:
        """Parameter counts by part (GPT-2's names for them: see ParamCounts)."""
        C, F_, V, kv = self.n_embd, self.d_mlp, self.vocab_size, self.n_kv_head * self.head_dim
        return ParamCounts(
            wte=V * C, wpe=0, layer_norm=C, c_attn=C * C + 2 * C * kv, attn_proj=C * C, c_fc=2 * C * F_,
            mlp_proj=F_ * C, n_layer=self.n_layer, lm_head=0 if self.tie_word_embeddings else V * C,
        )

    @property
    def n_params(self) -> int:
        """Parameters in the network, counting a tied LM head once."""
        return self.param_counts.total

    @property
    def step_multiply_adds(self) -> int:
        """Multiply-adds of one new position through every weight product: in each block q_proj
        and o_proj (C x C each), k_proj and v_proj (C x the key/value heads' width each), the MLP's
        gate, up and down (C x d_mlp each), then the LM head (C x vocab). Attention over the cached
        positions comes on top."""
        C, kv = self.n_embd, self.n_kv_head * self.head_dim
        return self.n_layer * (2 * C * C + 2 * C * kv + 3 * C * self.d_mlp) + C * self.vocab_size

    def kv_bytes_per_position(self, itemsize: int, batch_size: int = 1) -> int:
        """Bytes the KV cache grows by per position: K and V of every key/value head, every layer."""
        return 2 * self.n_layer * batch_size * self.n_kv_head * self.head_dim * itemsize

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_saved(cls, saved: dict[str, Any]) -> LlamaConfig:
        return cls(**{f.name: saved[f.name] for f in fields(cls) if f.name in saved})

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> LlamaConfig:
        """Reads Hugging Face's LLaMA config keys, refusing what this core does not implement."""
        if not isinstance(raw, dict):
            raise ConfigError(_("expected a JSON object"))
        if raw.get("model_type") != "llama":
            raise ConfigError(_("model_type {value} is not LLaMA").format(value=shown(raw.get("model_type"))))
        for key, allowed in (("hidden_act", ("silu",)), ("attention_bias", (False,)), ("mlp_bias", (False,)),
                             ("pretraining_tp", (1,))):
            if key in raw and raw[key] not in allowed:
                raise ConfigError(_("{key}={value} is not supported by gpt2viz").format(key=key, value=shown(raw[key])))
        # The rotation's base: `rope_theta`, or inside `rope_parameters` (transformers 5 writes it
        # there, and `rope_scaling` as the same object). Only plain rotary positions are implemented.
        theta = raw.get("rope_theta", 10000.0)
        for key in ("rope_parameters", "rope_scaling"):
            rope = raw.get(key)
            if rope is None:
                continue
            if not isinstance(rope, dict) or rope.get("rope_type", rope.get("type", "default")) != "default" or (
                    set(rope) - {"rope_type", "type", "rope_theta"}):
                raise ConfigError(_("{key}={value} is not supported by gpt2viz").format(key=key, value=shown(rope)))
            theta = rope.get("rope_theta", theta)
        n_head = raw.get("num_attention_heads", 32)
        hidden = raw.get("hidden_size", 4096)
        head_dim = raw.get("head_dim")
        if head_dim is not None and isinstance(n_head, int) and isinstance(hidden, int) and head_dim * n_head != hidden:
            raise ConfigError(_("{key}={value} is not supported by gpt2viz").format(key="head_dim", value=shown(head_dim)))
        eos = raw.get("eos_token_id", 0)
        if isinstance(eos, list) and eos:
            eos = eos[0]
        return cls(
            n_layer=raw.get("num_hidden_layers", 32),
            n_head=n_head,
            n_kv_head=raw.get("num_key_value_heads") or n_head,
            n_embd=hidden,
            d_mlp=raw.get("intermediate_size", 11008),
            n_ctx=raw.get("max_position_embeddings", 2048),
            vocab_size=raw.get("vocab_size", 32000),
            rms_norm_eps=raw.get("rms_norm_eps", 1e-6),
            rope_theta=theta,
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
            eos_token_id=eos if isinstance(eos, int) else 0,
            # Only TransformerLens-style prepend_bos and padding use these: an id outside the
            # vocabulary (older converted configs write pad_token_id -1) counts as none named.
            bos_token_id=_id_in_vocabulary(raw.get("bos_token_id"), raw.get("vocab_size", 32000)),
            pad_token_id=_id_in_vocabulary(raw.get("pad_token_id"), raw.get("vocab_size", 32000)),
        )

    @classmethod
    def from_file(cls, path: str | Path) -> LlamaConfig:
        path = Path(path)
        try:
            raw: Any = parse_json(read_regular(path, MAX_CONFIG_BYTES))
        except FileRefused as err:
            raise ConfigError(err.problem, where=str(path)) from None
        return cls.from_dict(raw)


class Linear(Layer):
    """A linear layer without bias in nn.Linear's layout `[out, in]`: `y = x @ weight^T`."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.weight = _param(n_out, n_in)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)


class RMSNorm(Layer):
    """Per position: `x / sqrt(mean(x^2) + eps) * weight`, worked out in float32 (as LLaMA's
    reference code does) and returned in the input's dtype."""

    def __init__(self, n_embd: int, eps: float, hooks: Hooks, prefix: str) -> None:
        super().__init__()
        self.weight = _param(n_embd)
        self.eps = eps
        self.hooks = hooks
        self.hook_scale = f"{prefix}.hook_scale"
        self.hook_normalized = f"{prefix}.hook_normalized"

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """The norm's output, with no hook fired (the logit lens reads residuals through it)."""
        x32 = x.float()
        return self.weight * (x32 / torch.sqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        scale = torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)  # the root mean square: (B, T, 1)
        hooks = self.hooks
        if hooks.active:
            scale = hooks.fire(self.hook_scale, scale)
        normalized = x / scale
        if hooks.active:
            normalized = hooks.fire(self.hook_normalized, normalized)
        return self.weight * normalized.to(dtype)


def rotary_angles(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotation angles, `(T, hd)` for positions `(T,)`: pair j of a head (numbers
    j and j + hd/2) turns by position x theta^(-2j/hd), fast for the first pairs, slow for the last."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))  # (hd/2,)
    angles = positions.float()[:, None] * inv_freq[None, :]  # (T, hd/2)
    angles = torch.cat((angles, angles), dim=-1)  # (T, hd): each angle for both numbers of its pair
    return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotates each pair (x_j, x_{j+hd/2}) of `x` `(B, h, T, hd)` by its angle."""
    half = x.size(-1) // 2
    turned = torch.cat((-x[..., half:], x[..., :half]), dim=-1)  # (-x2, x1): the pair a quarter turn on
    return x * cos + turned * sin


class Attention(Layer):
    """Causal self-attention with rotary positions and grouped key/value heads."""

    def __init__(self, config: LlamaConfig, layer: int, hooks: Hooks) -> None:
        super().__init__()
        self.n_head, self.n_kv_head, self.head_dim = config.n_head, config.n_kv_head, config.head_dim
        self.group = config.group
        self.theta = config.rope_theta
        self.layer = layer
        kv = config.n_kv_head * config.head_dim
        self.q_proj = Linear(config.n_embd, config.n_embd)
        self.k_proj = Linear(config.n_embd, kv)
        self.v_proj = Linear(config.n_embd, kv)
        self.o_proj = Linear(config.n_embd, config.n_embd)
        self.hooks = hooks
        p = f"blocks.{layer}.attn."
        self.hook_q, self.hook_k, self.hook_v = p + "hook_q", p + "hook_k", p + "hook_v"
        self.hook_rot_q, self.hook_rot_k = p + "hook_rot_q", p + "hook_rot_k"
        self.hook_scores, self.hook_pattern, self.hook_z = p + "hook_attn_scores", p + "hook_pattern", p + "hook_z"

    def forward(self, x: torch.Tensor, cache: KVCache | None, cos: torch.Tensor, sin: torch.Tensor,
                keys_seen: torch.Tensor | None = None) -> torch.Tensor:
        """`cos`, `sin`: the rotation of each new position, `(T, hd)`, or `(B, 1, T, hd)` where rows
        are padded (each row counts its own positions); `keys_seen` `[B, 1, T, L]`: which keys each
        query sees in a padded batch (else the causal triangle)."""
        B, T, C = x.shape
        hooks = self.hooks
        q = self.q_proj(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)  # (B, nh, T, hd)
        k = self.k_proj(x).view(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)  # (B, nkv, T, hd)
        v = self.v_proj(x).view(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)  # (B, nkv, T, hd)
        if hooks.active:
            q, k, v = hooks.fire(self.hook_q, q), hooks.fire(self.hook_k, k), hooks.fire(self.hook_v, v)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)  # positions enter here, and only here
        if hooks.active:
            q, k = hooks.fire(self.hook_rot_q, q), hooks.fire(self.hook_rot_k, k)

        past = 0
        if cache is not None:
            past = cache.length
            k, v = cache.append(self.layer, k, v)  # the rotated keys are kept: (B, nkv, L, hd)

        if hooks.active and (hooks.wants(self.hook_scores) or hooks.wants(self.hook_pattern)):
            z = self._explicit_attention(q, k, v, keys_seen)
        else:
            z = self._fused_attention(q, k, v, past, keys_seen)
        if hooks.active:
            z = hooks.fire(self.hook_z, z)
        z = z.transpose(1, 2).reshape(B, T, C)  # heads side by side again: (B, T, C)
        return self.o_proj(z)

    def _explicit_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                            keys_seen: torch.Tensor | None = None) -> torch.Tensor:
        """Scores, mask and softmax written out, each key/value head repeated for its group."""
        k, v = k.repeat_interleave(self.group, dim=1), v.repeat_interleave(self.group, dim=1)  # (B, nh, L, hd)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))  # (B, nh, T, L)
        seen = causal_mask(q.size(2), k.size(2), q.device) if keys_seen is None else keys_seen
        scores.masked_fill_(~seen, float("-inf"))
        scores = self.hooks.fire(self.hook_scores, scores)
        pattern = torch.softmax(scores.float(), dim=-1).to(q.dtype)
        pattern = self.hooks.fire(self.hook_pattern, pattern)
        return pattern @ v  # (B, nh, T, hd)

    def _fused_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, past: int,
                         keys_seen: torch.Tensor | None = None) -> torch.Tensor:
        """The same maths in one kernel (which shares each key/value head across its group)."""
        if keys_seen is not None:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=keys_seen, enable_gqa=True)
        if q.size(2) == 1:
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        if past == 0:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        mask = causal_mask(q.size(2), k.size(2), q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


class SwiGLU(Layer):
    """`down(silu(gate(x)) * up(x))`: the gate decides, number by number, how much of `up` passes."""

    def __init__(self, config: LlamaConfig, layer: int, hooks: Hooks) -> None:
        super().__init__()
        self.gate_proj = Linear(config.n_embd, config.d_mlp)
        self.up_proj = Linear(config.n_embd, config.d_mlp)
        self.down_proj = Linear(config.d_mlp, config.n_embd)
        self.hooks = hooks
        p = f"blocks.{layer}.mlp."
        self.hook_pre, self.hook_pre_linear, self.hook_post = p + "hook_pre", p + "hook_pre_linear", p + "hook_post"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hooks = self.hooks
        gate = self.gate_proj(x)  # (B, T, F)
        up = self.up_proj(x)  # (B, T, F)
        if hooks.active:
            gate, up = hooks.fire(self.hook_pre, gate), hooks.fire(self.hook_pre_linear, up)
        h = F.silu(gate) * up  # (B, T, F)
        if hooks.active:
            h = hooks.fire(self.hook_post, h)
        return self.down_proj(h)  # (B, T, C)


class DecoderLayer(PreNormBlock):
    """LLaMA's block: GPT-2's road (layers.PreNormBlock) with RMSNorms, rotary grouped attention
    and the SwiGLU MLP."""

    def __init__(self, config: LlamaConfig, layer: int, hooks: Hooks) -> None:
        super().__init__()
        p = f"blocks.{layer}."
        self.input_layernorm = RMSNorm(config.n_embd, config.rms_norm_eps, hooks, p + "ln1")
        self.self_attn = Attention(config, layer, hooks)
        self.post_attention_layernorm = RMSNorm(config.n_embd, config.rms_norm_eps, hooks, p + "ln2")
        self.mlp = SwiGLU(config, layer, hooks)
        self.name_parts(layer, hooks, self.input_layernorm, self.self_attn, self.post_attention_layernorm, self.mlp)


class LlamaBody(nn.Module):
    """The checkpoint's `model.`: the token table, the blocks and the final norm."""

    def __init__(self, config: LlamaConfig, hooks: Hooks) -> None:
        super().__init__()
        self.embed_tokens = Embedding(config.vocab_size, config.n_embd)
        self.layers = nn.ModuleList(DecoderLayer(config, i, hooks) for i in range(config.n_layer))
        self.norm = RMSNorm(config.n_embd, config.rms_norm_eps, hooks, "ln_final")


class Llama(nn.Module):
    """The network. `forward(input_ids, cache)` returns `(logits, cache)`, as GPT2's does."""

    def __init__(self, config: LlamaConfig, hooks: Hooks | None = None) -> None:
        super().__init__()
        self.config = config
        self.hooks = hooks or Hooks()
        self.precision = "float32"  # the number format's name: this family loads in float32 only so far
        self.hooks.bind(llama_hook_names(config.n_layer), n_layer=config.n_layer, n_head=config.n_head, d_mlp=config.d_mlp)
        self.model = LlamaBody(config, self.hooks)
        # The LM head: the token table itself (tied), or a weight of its own [vocab, C].
        self.lm_head: nn.Module = (TiedLMHead(self.model.embed_tokens) if config.tie_word_embeddings
                                   else Linear(config.n_embd, config.vocab_size))

    @property
    def dtype(self) -> torch.dtype:
        return self.model.norm.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.model.norm.weight.device

    def new_cache(self, batch_size: int = 1, capacity: int | None = None, reserve: int | None = None) -> KVCache:
        """An empty KV cache: the key/value heads only (n_kv_head of them), not one per query head."""
        return KVCache(self.config, batch_size, capacity, self.dtype, self.device, reserve)

    def forward(
        self,
        input_ids: torch.Tensor,
        cache: KVCache | None = None,
        *,
        last_only: bool = False,
        attention_mask: torch.Tensor | None = None,
        grad: bool = False,
        inference: bool = True,
    ) -> tuple[torch.Tensor, KVCache | None]:
        """Logits `[B, T, vocab]` for the new ids `[B, T]` (`[B, 1, vocab]` with `last_only`).

        As GPT2.forward (`inference` too): inference mode unless `grad=True` (autograd from the token embeddings,
        no cache). `attention_mask` `[B, cache.length + T]` (True or 1 for a real token) lets rows of
        different lengths share a batch, as in GPT2.forward: no position attends to a padding
        key, and each row's positions, which choose the rotation, count its real tokens only."""
        check_input(input_ids, cache, self.config)  # GPT-2's checks: the same arguments, the same errors
        real = None
        if attention_mask is not None:
            past = cache.length if cache is not None else 0
            real = padding_mask(attention_mask, input_ids.size(0), past + input_ids.size(1), ends_real=cache is not None or last_only)
            if bool(real.all()):
                real = None  # nothing padded: the plain causal pass
        return run_pass(lambda with_grad: self._forward(input_ids, cache, last_only, with_grad, real), grad, cache,
                        self.precision, inference)

    def _forward(self, input_ids: torch.Tensor, cache: KVCache | None, last_only: bool, grad: bool,
                 real: torch.Tensor | None = None) -> tuple[torch.Tensor, KVCache | None]:
        T = input_ids.size(1)
        past = cache.length if cache is not None else 0
        hooks = self.hooks
        if hooks.active:
            hooks.begin_pass(past, None if real is None else real[:, past:])
        x = self.model.embed_tokens.lookup(input_ids)  # (B, T, C): no position table here
        if grad:  # where gradients start: a copy, so that no weight is a leaf of the graph
            x = x.clone().requires_grad_()
        if hooks.active:
            x = hooks.fire("hook_embed", x)
        keys_seen = None
        if real is None:
            positions = torch.arange(past, past + T, device=x.device)  # (T,): the same for every row
            cos, sin = rotary_angles(positions, self.config.head_dim, self.config.rope_theta)  # (T, hd)
        else:
            # A row's position i is its count of real tokens before i (padding stays at 0).
            positions = (real.long().cumsum(1) - 1).clamp_min(0)[:, past:]  # (B, T)
            cos, sin = rotary_angles(positions.flatten(), self.config.head_dim, self.config.rope_theta)
            cos, sin = (t.view(*positions.shape, -1).unsqueeze(1) for t in (cos, sin))  # (B, 1, T, hd)
            keys_seen = attention_with_padding(real, T)  # (B, 1, T, L)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)  # shared by every block and head
        for layer in self.model.layers:
            x = layer(x, cache, cos, sin, keys_seen)
        if cache is not None:
            cache.advance(T)
            if hooks.active:
                hooks.fire("kv_cache", cache.state())
        if last_only:
            x = x[:, -1:]
        logits = self.lm_head(self.model.norm(x))  # (B, T, vocab)
        if hooks.active:
            logits = hooks.fire("unembed.hook_out", logits)
        return logits, cache

    @torch.inference_mode()
    def logits_from_residual(self, resid: torch.Tensor) -> torch.Tensor:
        """The logits the end of the network makes of residual-stream vectors `[..., C]`: the final
        RMSNorm, then the LM head (the logit lens, as GPT2's). Fires no hooks."""
        return self.lm_head(self.model.norm.normalize(resid))  # (..., vocab)


def expected_shapes(config: LlamaConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter by its checkpoint name, with its shape."""
    C, F_, V, kv = config.n_embd, config.d_mlp, config.vocab_size, config.n_kv_head * config.head_dim
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (V, C), "model.norm.weight": (C,)}
    for i in range(config.n_layer):
        p = f"model.layers.{i}."
        shapes.update({
            p + "input_layernorm.weight": (C,), p + "post_attention_layernorm.weight": (C,),
            p + "self_attn.q_proj.weight": (C, C), p + "self_attn.k_proj.weight": (kv, C),
            p + "self_attn.v_proj.weight": (kv, C), p + "self_attn.o_proj.weight": (C, C),
            p + "mlp.gate_proj.weight": (F_, C), p + "mlp.up_proj.weight": (F_, C), p + "mlp.down_proj.weight": (C, F_),
        })
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (V, C)
    return shapes


def check_shapes(where: str | Path, config: LlamaConfig, found: dict[str, tuple[tuple[int, ...], str]]) -> list[str]:
    """The checkpoint names to read, once every tensor `found` (name: shape and stored type, from a
    file's header: no bytes read yet) is one the config implies, with its shape, and none is
    missing. A tied head stored anyway (a copy of the token table) is not read."""
    wanted = expected_shapes(config)
    for name, shape in wanted.items():
        if name not in found:
            raise WeightsError(_("{path}: no tensor {name}").format(path=where, name=name))
        stored, kind = found[name]
        if stored != shape:
            raise WeightsError(_("{path}: {name} is {dtype} {shape}, the config implies {expected}").format(
                path=where, name=name, dtype=kind, shape=list(stored), expected=list(shape)))
    extra = sorted(set(found) - set(wanted) - ({"lm_head.weight"} if config.tie_word_embeddings else set()))
    if extra:
        raise WeightsError(_("{path}: a tensor the config does not imply: {name}").format(path=where, name=extra[0]))
    return list(wanted)


def build(config: LlamaConfig, tensors: dict[str, torch.Tensor], dtype: torch.dtype) -> Llama:
    """The network holding `tensors` (checked by check_shapes) in `dtype`."""
    model = Llama(config)
    model.load_state_dict({n: t.to(dtype) for n, t in tensors.items()}, strict=False, assign=True)
    return model.eval()


def load_llama(directory: str | Path, dtype: torch.dtype = torch.float32) -> Llama:
    """The LLaMA-family checkpoint in `directory` (config.json, safetensors), its tensors checked
    against the config's shapes before any of their bytes are read."""
    directory = Path(directory)
    config = LlamaConfig.from_file(directory / "config.json")
    stored = {t.name: t for t in read_headers(find_weight_files(directory))[0]}
    for t in stored.values():
        if t.dtype not in FLOAT_DTYPES:
            raise WeightsError(_("{path}: {name} is stored as {dtype}, not floating point").format(
                path=directory, name=t.name, dtype=t.dtype))
    names = check_shapes(directory, config, {n: (t.shape, t.dtype) for n, t in stored.items()})
    return build(config, dict(zip(names, read_tensors([stored[n] for n in names]))), dtype)


def load_llama_gguf(path: str | Path, dtype: torch.dtype = torch.float32) -> tuple[Llama, Any]:
    """The LLaMA-family model in the GGUF file at `path`, its weights dequantized (model/gguf.py),
    checked against the config's shapes before any of their bytes are read, and its tokenizer (a
    `tokenizers.Tokenizer`)."""
    from . import gguf

    file = gguf.read_header(path)
    config = LlamaConfig.from_dict(gguf.llama_config_dict(file))
    found = {name: (t.shape, t.type) for t in file.tensors.values() if (name := gguf.checkpoint_name(t.name))}
    check_shapes(path, config, found)
    return build(config, gguf.read_tensors(file, config.n_head, config.n_kv_head), dtype), gguf.tokenizer_from_gguf(file.metadata)
