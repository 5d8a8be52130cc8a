"""GPT-2: embed the tokens, run them through the blocks, read the next-token scores off the end."""

from __future__ import annotations

import torch
from torch import nn

from ..errors import InputError, TokenIdError
from ..hooks import Hooks, all_hook_names
from ..i18n import N_
from .config import GPT2Config
from .kv_cache import KVCache
from .layers import Block, Embedding, LayerNorm, TiedLMHead, causal_mask, run_pass


class GPT2(nn.Module):
    """The network. `forward(input_ids, cache)` returns `(logits, cache)`."""

    def __init__(self, config: GPT2Config, hooks: Hooks | None = None) -> None:
        super().__init__()
        self.config = config
        self.hooks = hooks or Hooks()
        self.hooks.bind(all_hook_names(config.n_layer), n_layer=config.n_layer, n_head=config.n_head, d_mlp=config.d_mlp)
        self.wte = Embedding(config.vocab_size, config.n_embd)  # token vectors
        self.wpe = Embedding(config.n_ctx, config.n_embd)  # position vectors
        self.h = nn.ModuleList(Block(config, i, self.hooks) for i in range(config.n_layer))
        self.ln_f = LayerNorm(config.n_embd, config.layer_norm_epsilon, self.hooks, "ln_final")
        # No separate LM head weight: it is wte's (weight tying), used transposed.
        self.lm_head = TiedLMHead(self.wte)
        self.precision = "float32"  # the number format's name (kernels/formats.py switches it)

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of activations, logits and the KV cache: the position table's, which every
        number format keeps in the format it computes in (int8 computes in float32)."""
        return self.wpe.weight.dtype

    @property
    def device(self) -> torch.device:
        """Where the weights live (cpu, cuda, mps)."""
        return self.wpe.weight.device

    def new_cache(self, batch_size: int = 1, capacity: int | None = None, reserve: int | None = None) -> KVCache:
        """An empty KV cache for this model, on its device and in its dtype: `capacity` positions
        at most (default: the context), `reserve` of them allocated now (default: all of a given
        capacity, else a first chunk that grows as needed; see kv_cache.py)."""
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

        By default the pass runs in inference mode: nothing is recorded for gradients. `grad=True`
        runs it with autograd, the token and position embeddings made leaves that require a
        gradient (the weights stay constants): every activation after them, as the hooks see it,
        has a `grad_fn`, so `torch.autograd.grad(metric, activation)` works (attribution
        patching, saliency). Such a pass takes no cache, and float32 weights only. `inference=False`
        runs a pass without gradients under no_grad: its tensors are ordinary ones (layers.run_pass)."""
        return run_pass(lambda with_grad: self._forward(input_ids, cache, last_only, attention_mask, with_grad),
                        grad, cache, self.precision, inference)

    def _forward(
        self, input_ids: torch.Tensor, cache: KVCache | None, last_only: bool, attention_mask: torch.Tensor | None,
        grad: bool,
    ) -> tuple[torch.Tensor, KVCache | None]:
        """The pass `forward` describes.

        With a cache, the ids continue the cached sequence: their positions start at
        `cache.length`, and their keys and values are added to it.

        `attention_mask` `[B, cache.length + T]` (True or 1 for a real token, False or 0 for
        padding; all positions so far, as in transformers) lets rows of different lengths share
        a batch: no position attends to a padding key, and each row's positions count its real
        tokens only, so a padded row computes what it would alone at every real position. Pad on
        the left to continue through a cache or with `last_only`; a whole pass may be padded on
        either side.
        """
        hooks = self.hooks
        check_input(input_ids, cache, self.config)
        B, T = input_ids.shape
        past = cache.length if cache is not None else 0

        # Embedding is a table lookup (row `id` of wte), not a matrix product.
        tok = self.wte.lookup(input_ids)  # (B, T, C)
        if attention_mask is None:
            pos = self.wpe.weight[past : past + T]  # (T, C): positions continue after the cache
            keys_seen = None
        else:
            real = padding_mask(attention_mask, B, past + T, ends_real=cache is not None or last_only)
            # A row's position i is its count of real tokens before i (padding stays at 0).
            positions = (real.long().cumsum(1) - 1).clamp_min(0)[:, past:]  # (B, T)
            pos = self.wpe.lookup(positions)  # (B, T, C)
            keys_seen = attention_with_padding(real, T)  # (B, 1, T, L)
        if grad:  # where gradients start: copies, so that no weight is a leaf of the graph
            tok, pos = tok.clone().requires_grad_(), pos.expand(B, T, -1).clone().requires_grad_()
        if hooks.active:
            hooks.begin_pass(past, None if attention_mask is None else real[:, past:])
            tok = hooks.fire("hook_embed", tok)  # rows picked out of wte: a copy, not the table
            # Without a mask, `pos` is a slice of wpe itself: subscribers get a copy of it.
            pos = hooks.fire("hook_pos_embed", pos.expand(B, T, -1).clone() if attention_mask is None else pos)
        x = tok + pos  # the residual stream, (B, T, C) from here to the end

        for block in self.h:
            x = block(x, cache, keys_seen)
        if cache is not None:
            cache.advance(T)
            if hooks.active:
                hooks.fire("kv_cache", cache.state())  # numbers, not the buffers

        if last_only:
            x = x[:, -1:]  # only the last position predicts the next token
        x = self.ln_f(x)
        logits = self.lm_head(x)  # x @ wte^T: (B, T, vocab)
        if hooks.active:
            logits = hooks.fire("unembed.hook_out", logits)
        return logits, cache

    @torch.inference_mode()
    def logits_from_residual(self, resid: torch.Tensor) -> torch.Tensor:
        """The logits the end of the network makes of residual-stream vectors `[..., C]`: ln_f, then
        the LM head. Applied to the stream after block l, this is the logit lens: what the model
        would predict if block l were its last. Fires no hooks."""
        return self.lm_head(self.ln_f.normalize(resid))  # (..., vocab)


def check_input(input_ids: torch.Tensor, cache: KVCache | None, config: GPT2Config) -> None:
    """Refuses, before any work, what the pass cannot run on (InputError names the argument):
    ids that are not a `[batch, positions]` integer tensor or lie outside the vocabulary (a
    negative id would silently read a row from the end of the table), more positions than the
    context or the cache holds, a cache made for another batch size."""
    if not isinstance(input_ids, torch.Tensor):
        raise InputError("input_ids", N_("{setting} must be a tensor of token ids [batch, positions], got {type}"),
                         type=type(input_ids).__name__)
    if input_ids.dim() != 2 or input_ids.numel() == 0 or input_ids.dtype.is_floating_point or input_ids.dtype.is_complex \
            or input_ids.dtype == torch.bool:
        raise InputError("input_ids", N_("{setting} must be a non-empty integer tensor [batch, positions], got {shape} {dtype}"),
                         shape=list(input_ids.shape), dtype=str(input_ids.dtype).removeprefix("torch."))
    low, high = (int(v) for v in torch.aminmax(input_ids))
    if low < 0 or high >= config.vocab_size:
        raise TokenIdError("input_ids", N_("{setting}: id {id} is outside the vocabulary (0 to {last})"),
                         id=low if low < 0 else high, last=config.vocab_size - 1)
    B, T = input_ids.shape
    past = cache.length if cache is not None else 0
    if past + T > config.n_ctx:
        raise InputError("input_ids", N_("{setting}: {n} positions (cached and new) exceed the context length {n_ctx}"),
                         n=past + T, n_ctx=config.n_ctx)
    if cache is not None:
        if cache.batch_size != B:
            raise InputError("cache", N_("{setting} holds {rows} rows; these ids have {batch}"), rows=cache.batch_size, batch=B)
        if past + T > cache.capacity:
            raise InputError("cache", N_("{setting} is full: {n} positions do not fit in {capacity}"),
                             n=past + T, capacity=cache.capacity)


def padding_mask(attention_mask: torch.Tensor, batch: int, length: int, ends_real: bool = True) -> torch.Tensor:
    """`attention_mask` checked and as bool `[batch, length]`: True for a real token. With
    `ends_real` (a pass that continues into a cache, or keeps only the last position's logits)
    every row's last position must be real: padding on the left. A whole pass may also be padded
    on the right: the padding positions come after every real one, which never attends to them."""
    if not isinstance(attention_mask, torch.Tensor) or tuple(attention_mask.shape) != (batch, length):
        raise InputError(
            "attention_mask", N_("{setting} has shape {shape}; this call needs {wanted} (every row, every position so far)"),
            shape=list(getattr(attention_mask, "shape", [])), wanted=[batch, length],
        )
    real = attention_mask.to(torch.bool)
    if ends_real and not bool(real[:, -1].all()):
        raise InputError("attention_mask", N_("{setting}: the last position of every row must be a real token (pad on the left)"))
    return real


def attention_with_padding(real: torch.Tensor, n_new: int) -> torch.Tensor:
    """Which keys each new query sees, `[B, 1, T, L]`: the causal triangle, without padding keys.
    A padding query still sees itself, so that its softmax has one term and stays finite (no
    real position ever reads it)."""
    B, L = real.shape
    causal = causal_mask(n_new, L, real.device)  # (T, L)
    seen = causal & real[:, None, :]  # (B, T, L)
    diagonal = torch.zeros(n_new, L, dtype=torch.bool, device=real.device)
    diagonal[torch.arange(n_new), torch.arange(L - n_new, L)] = True
    return (seen | diagonal).unsqueeze(1)
