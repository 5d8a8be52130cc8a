"""The pieces of a GPT-2 block, in the order the forward pass uses them.

Parameter names equal the checkpoint's (`c_attn`, `c_proj`, `c_fc`, `ln_1`, ...), so loading is
an identity map. Linear weights are stored `[in, out]` (GPT-2's Conv1D layout): `y = x @ W + b`.
Shape comments use B = batch, T = new positions, L = cached + new positions, C = n_embd,
nh = heads, hd = head_dim.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InputError
from ..hooks import Hooks
from ..i18n import N_
from .config import GPT2Config
from .kv_cache import KVCache


def plain_block_product(rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """`rows @ weight + bias`, `(R, in) -> (R, out)`, by the BLAS's own kernel."""
    return torch.addmm(bias, rows, weight)


def plain_head_product(rows: torch.Tensor, wte: torch.Tensor) -> torch.Tensor:
    """`rows @ wte^T`, `(R, C) -> (R, V)`, by the BLAS's own kernel."""
    return F.linear(rows, wte)


def is_decode_batch(x: torch.Tensor) -> bool:
    """Whether `x` (B, T, C) is one new position of several sequences: a batched decode step,
    which may have a kernel of its own (`batch_product`, set by gpt2viz.kernels). A pass with
    gradients multiplies plainly."""
    return x.dim() == 3 and x.size(1) == 1 and x.size(0) > 1 and not torch.is_grad_enabled()


def causal_mask(n_new: int, n_total: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Which keys each new query may see, `[T, L]` bool for T new of L positions: query i, at
    absolute position past + i (past = L - T cached positions), sees keys 0 .. past + i. The
    causal triangle, shifted right by the number of cached positions."""
    return torch.ones(n_new, n_total, dtype=torch.bool, device=device).tril(diagonal=n_total - n_new)


def _param(*shape: int) -> nn.Parameter:
    # Parameters start on the meta device (no memory); the loader assigns the real tensors.
    return nn.Parameter(torch.empty(*shape, device="meta"), requires_grad=False)


class Layer(nn.Module):
    """An nn.Module without the per-call costs that a decode step pays about 200 times.

    A call goes straight to `forward`: gpt2viz has hooks of its own, so nn.Module.__call__'s
    check for PyTorch hooks is never needed. Parameters and sub-layers are also kept as plain
    attributes, so reading `self.weight` skips nn.Module.__getattr__'s dictionary search.
    Together this is about 0.25 ms of a GPT-2-small decode step: more than all the hook sites.
    """

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls.__call__ = cls.forward

    def __setattr__(self, name: str, value) -> None:
        super().__setattr__(name, value)  # registers parameters and sub-layers as usual
        if isinstance(value, (nn.Parameter, nn.Module)):
            object.__setattr__(self, name, value)


class Embedding(nn.Module):
    """A table of vectors, one row per token id (or position), read by indexing."""

    def __init__(self, n_rows: int, n_embd: int) -> None:
        super().__init__()
        self.weight = _param(n_rows, n_embd)

    def lookup(self, ids: torch.Tensor) -> torch.Tensor:
        """The rows of `ids`: `(...) -> (..., C)`."""
        return self.weight[ids]


class TiedLMHead(Layer):
    """The LM head: the token embedding table used transposed (weight tying), no weight of its own."""

    def __init__(self, wte: Embedding) -> None:
        super().__init__()
        object.__setattr__(self, "wte", wte)  # not a sub-layer: the model owns wte
        # How x @ wte^T is multiplied: the plain product, or a faster kernel gpt2viz.kernels
        # chose for this CPU (the same dot products).
        self.product = plain_head_product
        self.batch_product = None  # for a batched decode step, when set (the same dot products)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.size(-1))  # every position at once: (B*T, C)
        product = self.batch_product if self.batch_product is not None and is_decode_batch(x) else self.product
        logits = product(rows, self.wte.weight)  # x @ wte^T: (B*T, vocab)
        return logits.view(*x.shape[:-1], logits.size(-1))


class Conv1D(Layer):
    """A linear layer with GPT-2's weight layout `[in, out]`: `y = x @ weight + bias`."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.weight = _param(n_in, n_out)
        self.bias = _param(n_out)
        # How x @ W + b is multiplied: the plain product, or a faster kernel gpt2viz.kernels chose
        # for this CPU (the same digits).
        self.product = plain_block_product
        self.batch_product = None  # for a batched decode step, when set (the same dot products)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.size(-1))  # every position at once: (B*T, in)
        product = self.batch_product if self.batch_product is not None and is_decode_batch(x) else self.product
        out = product(rows, self.weight, self.bias)  # y = x @ W + b: (B*T, out)
        return out.view(*x.shape[:-1], out.size(-1))


class LayerNorm(Layer):
    """Per position: `(x - mean) / sqrt(var + eps) * weight + bias`, with the biased variance."""

    def __init__(self, n_embd: int, eps: float, hooks: Hooks, prefix: str) -> None:
        super().__init__()
        self.weight = _param(n_embd)
        self.bias = _param(n_embd)
        self.eps = eps
        self.hooks = hooks
        self.hook_scale = f"{prefix}.hook_scale"
        self.hook_normalized = f"{prefix}.hook_normalized"

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """The LayerNorm's output, with no hook fired."""
        return F.layer_norm(x, (x.size(-1),), self.weight, self.bias, self.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hooks = self.hooks
        if not (hooks.active and (hooks.wants(self.hook_scale) or hooks.wants(self.hook_normalized))):
            return self.normalize(x)
        # Written out in two steps, as TransformerLens does: normalise, then the learned scale and
        # bias. The same kernel also hands back each position's mean and 1 / sqrt(var + eps).
        normalized, mean, rstd = torch.native_layer_norm(x, (x.size(-1),), None, None, self.eps)
        if hooks.wants(self.hook_scale):
            scale = 1 / rstd  # sqrt(var + eps): (B, T, 1)
            before = scale.clone()  # (B, T, 1): to see an edit made in place, as TL's hooks may
            edited = hooks.fire(self.hook_scale, scale)
            if edited is not scale or not torch.equal(scale, before):  # a subscriber set the scale
                normalized = (x - mean) / edited
        # hook_normalized is (x - mean) / scale, before the learned scale and bias, as in
        # TransformerLens (its TransformerBridge; some older versions fired it after them).
        normalized = hooks.fire(self.hook_normalized, normalized)
        return normalized * self.weight + self.bias


class CausalSelfAttention(Layer):
    """Every position mixes in the values of itself and earlier positions, per head."""

    def __init__(self, config: GPT2Config, layer: int, hooks: Hooks) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.head_dim = config.head_dim
        self.layer = layer
        self.c_attn = Conv1D(config.n_embd, 3 * config.n_embd)
        self.c_proj = Conv1D(config.n_embd, config.n_embd)
        self.hooks = hooks
        p = f"blocks.{layer}.attn."
        self.hook_q, self.hook_k, self.hook_v = p + "hook_q", p + "hook_k", p + "hook_v"
        self.hook_scores, self.hook_pattern, self.hook_z = (
            p + "hook_attn_scores",
            p + "hook_pattern",
            p + "hook_z",
        )

    def forward(self, x: torch.Tensor, cache: KVCache | None, keys_seen: torch.Tensor | None = None) -> torch.Tensor:
        """`keys_seen` `[B, 1, T, L]`: which keys each query sees, where rows are padded (else the
        causal triangle)."""
        B, T, C = x.shape
        hooks = self.hooks
        q, k, v = self.c_attn(x).split(C, dim=2)  # (B, T, 3C) -> 3 x (B, T, C)
        q = q.view(B, T, self.n_head, self.head_dim).transpose(1, 2)  # (B, nh, T, hd)
        k = k.view(B, T, self.n_head, self.head_dim).transpose(1, 2)  # (B, nh, T, hd)
        v = v.view(B, T, self.n_head, self.head_dim).transpose(1, 2)  # (B, nh, T, hd)
        if hooks.active:
            # Edits of k and v are what the cache keeps, as in TransformerLens.
            q = hooks.fire(self.hook_q, q)
            k = hooks.fire(self.hook_k, k)
            v = hooks.fire(self.hook_v, v)

        past = 0
        if cache is not None:
            past = cache.length
            k, v = cache.append(self.layer, k, v)  # (B, nh, L, hd), L = past + T

        if hooks.active and (hooks.wants(self.hook_scores) or hooks.wants(self.hook_pattern)):
            z = self._explicit_attention(q, k, v, keys_seen)
        else:
            z = self._fused_attention(q, k, v, past, keys_seen)
        if hooks.active:
            z = hooks.fire(self.hook_z, z)

        z = z.transpose(1, 2).reshape(B, T, C)  # heads side by side again: (B, T, C)
        return self.c_proj(z)

    def _explicit_attention(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keys_seen: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Scores, mask and softmax written out, so the pattern can be shown."""
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))  # (B, nh, T, L)
        # Query i may see keys 0 .. past + i. The scores are new, so they are masked in place.
        seen = causal_mask(q.size(2), k.size(2), q.device) if keys_seen is None else keys_seen
        scores.masked_fill_(~seen, float("-inf"))
        scores = self.hooks.fire(self.hook_scores, scores)
        pattern = torch.softmax(scores, dim=-1)  # each row sums to 1; masked entries are 0
        pattern = self.hooks.fire(self.hook_pattern, pattern)
        return pattern @ v  # (B, nh, T, hd)

    def _fused_attention(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, past: int, keys_seen: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The same maths in one kernel, never materialising the pattern."""
        if q.dtype in (torch.float16, torch.bfloat16) and q.is_cpu:
            # This CPU's 16-bit attention kernel takes 2-3x float32's time (a GPT-2-small decode
            # step at 256 positions: 4.8 ms in float16 against 1.6 ms): run it in float32, then
            # round the result back to the 16-bit format.
            return self._fused_attention(q.float(), k.float(), v.float(), past, keys_seen).to(q.dtype)
        if keys_seen is not None:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=keys_seen)
        if q.size(2) == 1:
            # A single new query sees every cached key: no mask needed.
            return F.scaled_dot_product_attention(q, k, v)
        if past == 0:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(q.size(2), k.size(2), q.device))


class MLP(Layer):
    """Widen, apply GELU, narrow: each position on its own, no mixing across positions."""

    def __init__(self, config: GPT2Config, layer: int, hooks: Hooks) -> None:
        super().__init__()
        self.c_fc = Conv1D(config.n_embd, config.d_mlp)
        self.c_proj = Conv1D(config.d_mlp, config.n_embd)
        self.hooks = hooks
        self.hook_pre = f"blocks.{layer}.mlp.hook_pre"
        self.hook_post = f"blocks.{layer}.mlp.hook_post"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.c_fc(x)  # (B, T, 4C)
        if self.hooks.active:
            h = self.hooks.fire(self.hook_pre, h)
        # GPT-2's GELU is the tanh approximation; the exact erf form gives different numbers.
        h = F.gelu(h, approximate="tanh")
        if self.hooks.active:
            h = self.hooks.fire(self.hook_post, h)
        return self.c_proj(h)  # (B, T, C)


class PreNormBlock(Layer):
    """The block of both architectures here (GPT-2's, and LLaMA's in model/llama.py): normalise,
    attend, add to the residual stream; normalise, MLP, add: `x + attn(norm_1(x))`, then
    `x + mlp(norm_2(x))`, with the residual stream's hooks around them. A subclass makes its parts
    under its checkpoint's names and hands them to `name_parts`."""

    def name_parts(self, layer: int, hooks: Hooks, norm_1: Layer, attention: Layer, norm_2: Layer, mlp: Layer) -> None:
        # Plain attributes, not sub-layers: the parts are registered under the checkpoint's names.
        for name, part in (("_norm_1", norm_1), ("_attention", attention), ("_norm_2", norm_2), ("_mlp", mlp)):
            object.__setattr__(self, name, part)
        self.hooks = hooks
        p = f"blocks.{layer}."
        self.hook_resid_pre, self.hook_attn_out, self.hook_resid_mid = (
            p + "hook_resid_pre",
            p + "hook_attn_out",
            p + "hook_resid_mid",
        )
        self.hook_mlp_out, self.hook_resid_post = p + "hook_mlp_out", p + "hook_resid_post"

    def forward(self, x: torch.Tensor, cache: KVCache | None, *where: torch.Tensor | None) -> torch.Tensor:
        """`where`: what attention needs besides the cache (GPT-2: which keys each query sees in a
        padded batch; LLaMA: the rotation's cos and sin)."""
        hooks = self.hooks
        if hooks.active:
            x = hooks.fire(self.hook_resid_pre, x)
        attn_out = self._attention(self._norm_1(x), cache, *where)
        if hooks.active:
            attn_out = hooks.fire(self.hook_attn_out, attn_out)
        x = x + attn_out
        if hooks.active:
            x = hooks.fire(self.hook_resid_mid, x)
        mlp_out = self._mlp(self._norm_2(x))
        if hooks.active:
            mlp_out = hooks.fire(self.hook_mlp_out, mlp_out)
        x = x + mlp_out
        if hooks.active:
            x = hooks.fire(self.hook_resid_post, x)
        return x


class Block(PreNormBlock):
    """GPT-2's block: LayerNorms ln_1 and ln_2, attention, and the GELU MLP."""

    def __init__(self, config: GPT2Config, layer: int, hooks: Hooks) -> None:
        super().__init__()
        p = f"blocks.{layer}."
        self.ln_1 = LayerNorm(config.n_embd, config.layer_norm_epsilon, hooks, p + "ln1")
        self.attn = CausalSelfAttention(config, layer, hooks)
        self.ln_2 = LayerNorm(config.n_embd, config.layer_norm_epsilon, hooks, p + "ln2")
        self.mlp = MLP(config, layer, hooks)
        self.name_parts(layer, hooks, self.ln_1, self.attn, self.ln_2, self.mlp)


def run_pass(run, grad: bool, cache, precision: str, inference: bool = True):
    """`run(grad)` of a model's forward: in inference mode (nothing recorded for gradients), or,
    with `grad`, with autograd, which takes no KV cache and float32 weights only. `inference=False`:
    without gradients still, but under no_grad, so that what it returns is an ordinary tensor (the
    library's TransformerLens-style passes: their users edit it in place or use it in a graph).
    GPT2 and Llama share it."""
    if not grad:
        with torch.inference_mode() if inference else torch.no_grad():
            return run(False)
    if cache is not None:
        raise InputError("grad", N_("{setting}: a pass with gradients runs without a KV cache"))
    if precision != "float32":
        raise InputError("grad", N_("{setting}: gradients need the float32 weights, and these are {dtype}"),
                         dtype=precision)
    with torch.enable_grad():
        return run(True)
