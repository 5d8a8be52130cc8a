"""The GPT-2 step with no hook sites: the reference for what gpt2viz's hooks cost.

Same parameters (the loaded model's tensors, not copies), same kernels in the same order as
`gpt2viz.model` (F.layer_norm, torch.addmm, F.scaled_dot_product_attention,
F.gelu(approximate="tanh"), F.linear with wte) and the same `KVCache`, but written as one plain
function over a flat list of tensors: no `if hooks.active` checks and no nn.Module dispatch.
It should give bit-identical logits; `check_same_logits` verifies that.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gpt2viz.model.gpt2 import GPT2
from gpt2viz.model.kv_cache import KVCache


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
            h = F.layer_norm(x, shape, l1w, l1b, eps)
            qkv = torch.addmm(ab, h.reshape(-1, C), aw).view(B, T, 3 * C)
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
            z = z.transpose(1, 2).reshape(-1, C)
            x = x + torch.addmm(pb, z, pw).view(B, T, C)
            h = F.layer_norm(x, shape, l2w, l2b, eps)
            h = F.gelu(torch.addmm(fb, h.reshape(-1, C), fw), approximate="tanh")
            x = x + torch.addmm(mb, h, mw).view(B, T, C)
        if cache is not None:
            cache.advance(T)
        if last_only:
            x = x[:, -1:]
        x = F.layer_norm(x, shape, self.ln_f[0], self.ln_f[1], eps)
        return F.linear(x, self.wte)

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


class PrototypeDecodeGPT2(HookFreeGPT2):
    """Hook-free step plus two prototype changes for one-token (decode) steps, to price them:

    - `split_matmuls`: MKL runs a 1-row matmul (GEMV) on one thread, so a decode step uses one of
      the cores. Viewing each Conv1D weight `[in, out]` as two column halves `[2, in, out/2]`
      (a strided view, no copy) and calling `torch.baddbmm` lets the batch run on two threads.
    - `lm_head_cv`: the LM head `F.linear(x, wte)` reads wte `[V, C]` row by row at ~16 GB/s;
      `x @ wte_t` with a contiguous `[C, V]` copy streams at ~27 GB/s, for 4 bytes x V x C more
      memory (154 MB for GPT-2 small).
    Prefill (more than `max_rows` rows) uses the plain kernels.
    """

    def __init__(self, model: GPT2, split_matmuls: bool = True, lm_head_cv: bool = False, max_rows: int = 4) -> None:
        super().__init__(model)
        self.max_rows = max_rows
        self.split_matmuls = split_matmuls
        self.wte_t = model.wte.weight.t().contiguous() if lm_head_cv else None

        def halves(w, b):
            n_in, n_out = w.shape
            if n_out % 2:
                return None
            return b.view(2, 1, n_out // 2), w.view(n_in, 2, n_out // 2).permute(1, 0, 2)

        self.split = [
            (halves(aw, ab), halves(pw, pb), halves(fw, fb), halves(mw, mb))
            for (_, _, aw, ab, pw, pb, _, _, fw, fb, mw, mb) in self.blocks
        ]

    @staticmethod
    def _mm(bias, x2d, w, split):
        if split is None:
            return torch.addmm(bias, x2d, w)
        b2, w2 = split
        m = x2d.size(0)
        y = torch.baddbmm(b2, x2d.unsqueeze(0).expand(2, m, x2d.size(1)), w2)  # (2, m, out/2)
        return y.permute(1, 0, 2).reshape(m, -1)

    @torch.inference_mode()
    def forward(self, input_ids: torch.Tensor, cache: KVCache | None = None, last_only: bool = False) -> torch.Tensor:
        B, T = input_ids.shape
        if B * T > self.max_rows or not self.split_matmuls:
            if self.wte_t is None or not (last_only or B * T <= self.max_rows):
                return HookFreeGPT2.forward(self, input_ids, cache, last_only)
        C, nh, hd, eps = self.n_embd, self.n_head, self.head_dim, self.eps
        use_split = self.split_matmuls and B * T <= self.max_rows
        mm = self._mm
        past = cache.length if cache is not None else 0
        x = self.wte[input_ids] + self.wpe[past : past + T]
        shape = (C,)
        for layer, ((l1w, l1b, aw, ab, pw, pb, l2w, l2b, fw, fb, mw, mb), sp) in enumerate(zip(self.blocks, self.split)):
            sa, sp_, sf, sm = sp if use_split else (None, None, None, None)
            h = F.layer_norm(x, shape, l1w, l1b, eps)
            qkv = mm(ab, h.reshape(-1, C), aw, sa).view(B, T, 3 * C)
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
            z = z.transpose(1, 2).reshape(-1, C)
            x = x + mm(pb, z, pw, sp_).view(B, T, C)
            h = F.layer_norm(x, shape, l2w, l2b, eps)
            h = F.gelu(mm(fb, h.reshape(-1, C), fw, sf), approximate="tanh")
            x = x + mm(mb, h, mw, sm).view(B, T, C)
        if cache is not None:
            cache.advance(T)
        if last_only:
            x = x[:, -1:]
        x = F.layer_norm(x, shape, self.ln_f[0], self.ln_f[1], eps)
        if self.wte_t is not None:
            return (x.reshape(-1, C) @ self.wte_t).view(*x.shape[:-1], -1)
        return F.linear(x, self.wte)

    __call__ = forward
