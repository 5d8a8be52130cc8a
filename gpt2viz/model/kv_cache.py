"""The KV cache: every layer's keys and values of the positions seen so far.

Only K and V are kept. A new token's query attends to the keys and values of all earlier
positions, and those never change once computed; its own query is used once and thrown away.

The buffers are written in place. How much they hold is decided by what the run needs, never by
the context length alone (a 1-token prompt on a model of 4,096 positions and 64 blocks would
otherwise reserve gigabytes): a caller that knows how far it will go reserves that once
(`reserve`; generation reserves the prompt plus the new tokens, so a decode step allocates
nothing), and a cache made without a size starts at GROWTH_CHUNK positions and, when a pass
goes past them, grows to twice its size in whole chunks (copying what it holds), up to
`capacity`, the most positions it may hold (the context, n_ctx, unless given).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from ..errors import InputError
from ..i18n import N_


class CacheSizes(Protocol):
    """What a cache needs to know of its model (GPT2Config and LlamaConfig both say it)."""

    @property
    def n_layer(self) -> int: ...

    @property
    def n_ctx(self) -> int: ...

    @property
    def n_kv_head(self) -> int: ...

    @property
    def head_dim(self) -> int: ...

    def kv_bytes_per_position(self, itemsize: int, batch_size: int = 1) -> int: ...


GROWTH_CHUNK = 64  # positions a cache made without a size starts with; it grows by whole chunks


@dataclass(frozen=True)
class LayerCacheInfo:
    """What one layer's cache holds, as plain numbers."""

    layer: int
    k_shape: tuple[int, ...]
    v_shape: tuple[int, ...]
    k_bytes: int
    v_bytes: int


@dataclass(frozen=True)
class CacheState:
    """What a cache holds after a pass, as plain numbers: what the `kv_cache` hook carries (never
    the buffers, which a subscriber could write into)."""

    length: int
    capacity: int
    bytes_per_position: int
    used_bytes: int
    allocated_bytes: int
    layers: tuple[LayerCacheInfo, ...]


class KVCache:
    """Per-layer K and V buffers of shape `[B, n_kv_head, allocated, head_dim]` and a used length
    (n_kv_head: the key/value heads, GPT-2's n_head; fewer in a model with grouped queries).

    `capacity` is the most positions the cache holds (default: the context, n_ctx); `reserve`
    the positions allocated now: by default all of a given capacity, else GROWTH_CHUNK, growing
    as passes need more (see the module's docstring)."""

    def __init__(
        self,
        config: CacheSizes,
        batch_size: int = 1,
        capacity: int | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
        reserve: int | None = None,
    ) -> None:
        self.config = config
        self.capacity = capacity or config.n_ctx
        if reserve is None:
            reserve = self.capacity if capacity else GROWTH_CHUNK
        reserve = max(1, min(reserve, self.capacity))
        shape = (batch_size, config.n_kv_head, reserve, config.head_dim)
        # Uninitialised on purpose: only the first `length` positions are ever read, and zeroing
        # 72 MiB (GPT-2 small at 1,024 positions) would cost more than a decode step.
        self.keys = [torch.empty(shape, dtype=dtype, device=device) for _ in range(config.n_layer)]
        self.values = [torch.empty(shape, dtype=dtype, device=device) for _ in range(config.n_layer)]
        self.length = 0  # positions filled so far, the same in every layer

    @property
    def allocated(self) -> int:
        """Positions the buffers have room for now (at most `capacity`)."""
        return self.keys[0].size(2) if self.keys else 0

    @property
    def batch_size(self) -> int:
        """The rows (sequences) the cache holds."""
        return self.keys[0].size(0) if self.keys else 0

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Writes the new positions' k, v `[B, nh, T, hd]` after the cached ones and returns views
        of everything cached in this layer, `[B, nh, length + T, hd]`. `advance` commits them."""
        start, end = self.length, self.length + k.size(2)
        if end > self.capacity:  # GPT2.forward checks first; this guards direct use
            raise InputError("cache", N_("{setting} is full: {n} positions do not fit in {capacity}"), n=end, capacity=self.capacity)
        if end > self.keys[layer].size(2):
            self._grow(layer, end)
        self.keys[layer][:, :, start:end] = k
        self.values[layer][:, :, start:end] = v
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def _grow(self, layer: int, needed: int) -> None:
        """Gives `layer`'s buffers room for `needed` positions: twice their size or `needed`,
        whichever is more, rounded up to whole chunks and at most `capacity`; what is cached
        is copied over."""
        size = max(needed, 2 * self.keys[layer].size(2))
        size = min(self.capacity, -(-size // GROWTH_CHUNK) * GROWTH_CHUNK)
        for buffers in (self.keys, self.values):
            old = buffers[layer]
            with torch.inference_mode(False):  # an ordinary tensor, as __init__ makes them
                grown = old.new_empty((old.size(0), old.size(1), size, old.size(3)))
            grown[:, :, : self.length] = old[:, :, : self.length]
            buffers[layer] = grown

    def advance(self, n_new: int) -> None:
        """Marks `n_new` more positions as filled, once every layer has appended them."""
        self.length += n_new

    def reset(self) -> None:
        """Forgets every cached position (the buffers stay allocated, grown or not)."""
        self.length = 0

    @property
    def itemsize(self) -> int:
        """Bytes of one cached number (4 in float32, 2 in 16-bit formats)."""
        return self.keys[0].element_size()

    @property
    def bytes_per_position(self) -> int:
        """Bytes one more position adds: K and V, in every layer, for every head."""
        return self.config.kv_bytes_per_position(self.itemsize, self.keys[0].size(0))

    @property
    def used_bytes(self) -> int:
        """Bytes of the filled positions, K and V, all layers."""
        return sum(info.k_bytes + info.v_bytes for info in map(self.layer_info, range(len(self.keys))))

    @property
    def allocated_bytes(self) -> int:
        """Bytes the K and V buffers take, used or not."""
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)

    def state(self) -> CacheState:
        """The cache's lengths and bytes now."""
        return CacheState(
            self.length,
            self.capacity,
            self.bytes_per_position,
            self.used_bytes,
            self.allocated_bytes,
            tuple(map(self.layer_info, range(len(self.keys)))),
        )

    def layer_info(self, layer: int) -> LayerCacheInfo:
        """Shapes and bytes of the used part of one layer's K and V, read off the tensors."""
        k = self.keys[layer][:, :, : self.length]
        v = self.values[layer][:, :, : self.length]
        return LayerCacheInfo(
            layer=layer,
            k_shape=tuple(k.shape),
            v_shape=tuple(v.shape),
            k_bytes=k.numel() * k.element_size(),
            v_bytes=v.numel() * v.element_size(),
        )
