"""The GPT-2 step with no hook sites: the reference for what gpt2viz's hooks cost.

Same parameters (the loaded model's tensors, not copies), same kernels in the same order as
`gpt2viz.model` (F.layer_norm, each product's kernel as gpt2viz.kernels chose it,
F.scaled_dot_product_attention, F.gelu(approximate="tanh")) and the same `KVCache`, but written as one plain
function over a flat list of tensors: no `if hooks.active` checks and no nn.Module dispatch.
It should give bit-identical logits; `check_same_logits` verifies that.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gpt2viz.model.gpt2 import GPT2
from gpt2viz.model.kv_cache import KVCache


def conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, product) -> torch.Tensor:
    """`x @ weight + bias` by the model's kernel for that weight (`Conv1D.product`)."""
    out = product(x.reshape(-1, x.size(-1)), weight, bias)
    return out.view(*x.shape[:-1], out.size(-1))


class HookFreeGPT2:
    """`forward(input_ids, cache, last_only)` over `model`'s parameters, with no hook sites."""

    def __init__(self, model: GPT2, copy_weights: bool = False) -> None:
        """`copy_weights=True` clones every tensor into fresh (anonymous) memory instead of
        using the model's own, which gpt2viz memory-maps from the safetensors file."""
        own = (lambda t: t.detach().clone()) if copy_weights else (lambda t: t)
        cfg = model.config
        self.config = cfg
        self.n_head, self.head_dim, self.n_embd = cfg.n_head, cfg.head_dim, cfg.n_embd
        self.eps = cfg.layer_norm_epsilon
        self.wte = own(model.wte.weight)
        self.wpe = own(model.wpe.weight)
        self.ln_f = (own(model.ln_f.weight), own(model.ln_f.bias))
        self.blocks = [
            tuple(
                own(t)
                for t in (
                    b.ln_1.weight, b.ln_1.bias,
                    b.attn.c_attn.weight, b.attn.c_attn.bias,
                    b.attn.c_proj.weight, b.attn.c_proj.bias,
                    b.ln_2.weight, b.ln_2.bias,
                    b.mlp.c_fc.weight, b.mlp.c_fc.bias,
                    b.mlp.c_proj.weight, b.mlp.c_proj.bias,
                )
            )
            for b in model.h
        ]
        self.products = [(b.attn.c_attn.product, b.attn.c_proj.product, b.mlp.c_fc.product, b.mlp.c_proj.product) for b in model.h]
        self.head_product = model.lm_head.product
        self._model = model

    def new_cache(self) -> KVCache:
        return self._model.new_cache()

    @torch.inference_mode()
    def forward(self, input_ids: torch.Tensor, cache: KVCache | None = None, last_only: bool = False) -> torch.Tensor:
        B, T = input_ids.shape
        C, nh, hd, eps = self.n_embd, self.n_head, self.head_dim, self.eps
        past = cache.length if cache is not None else 0
        x = self.wte[input_ids] + self.wpe[past : past + T]
        shape = (C,)
        for layer, (l1w, l1b, aw, ab, pw, pb, l2w, l2b, fw, fb, mw, mb) in enumerate(self.blocks):
            qkv_product, proj_product, fc_product, mlp_proj_product = self.products[layer]
            h = F.layer_norm(x, shape, l1w, l1b, eps)
            qkv = conv1d(h, aw, ab, qkv_product)
            q, k, v = qkv.split(C, dim=2)
            q = q.view(B, T, nh, hd).transpose(1, 2)
            k = k.view(B, T, nh, hd).transpose(1, 2)
            v = v.view(B, T, nh, hd).transpose(1, 2)
            if cache is not None:
                k, v = cache.append(layer, k, v)
            if T == 1:
                z = F.scaled_dot_product_attention(q, k, v)
            elif past == 0:
                z = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                allowed = torch.ones(T, k.size(2), dtype=torch.bool).tril(diagonal=past)
                z = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
            z = z.transpose(1, 2).reshape(B, T, C)
            x = x + conv1d(z, pw, pb, proj_product)
            h = F.layer_norm(x, shape, l2w, l2b, eps)
            h = F.gelu(conv1d(h, fw, fb, fc_product), approximate="tanh")
            x = x + conv1d(h, mw, mb, mlp_proj_product)
        if cache is not None:
            cache.advance(T)
        if last_only:
            x = x[:, -1:]
        x = F.layer_norm(x, shape, self.ln_f[0], self.ln_f[1], eps)
        logits = self.head_product(x.reshape(-1, C), self.wte)
        return logits.view(B, x.size(1), -1)

    __call__ = forward


def check_same_logits(model: GPT2, free: HookFreeGPT2, ids: torch.Tensor) -> dict:
    """Runs both on `ids` (prefill, then two cached decode steps) and compares the logits."""
    out = {}
    c1, c2 = model.new_cache(), free.new_cache()
    a, _ = model(ids, c1, last_only=True)
    b = free(ids, c2, last_only=True)
    diffs = [float((a - b).abs().max())]
    equal = [bool(torch.equal(a, b))]
    nxt = ids[:, -1:]
    for _ in range(2):
        a, _ = model(nxt, c1, last_only=True)
        b = free(nxt, c2, last_only=True)
        diffs.append(float((a - b).abs().max()))
        equal.append(bool(torch.equal(a, b)))
        nxt = a[:, -1].argmax(-1, keepdim=True)
    out["max_abs_diff"] = max(diffs)
    out["bit_identical"] = all(equal)
    return out
