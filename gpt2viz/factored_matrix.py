"""A matrix kept as the product of two thinner ones, as TransformerLens's `FactoredMatrix`.

A head's OV circuit `W_V[l, h] @ W_O[l, h]` is a 768 x 768 matrix of rank at most 64 (GPT-2
small); kept as its two factors `A` (768 x 64) and `B` (64 x 768), its singular values, its
eigenvalues and its norm come from 64 x 64 problems, and products with it stay factored.
`lm.QK` and `lm.OV` give one for every layer and head (`[layers, heads, d_model, d_model]`).

This follows TL's class for what circuit analysis uses (the names, the shapes, which side a
product keeps factored, `svd()` returning `(U, S, V)` with `M == U @ S.diag() @ V.mT`), so TL
code runs on it; tests/test_transformer_lens.py compares the two. Not given: TL's indexing with
`None` (a new axis) and its duck-typed factors.
"""

from __future__ import annotations

import operator
from functools import cached_property

import torch

__all__ = ["FactoredMatrix"]


def _for_linalg(x: torch.Tensor) -> torch.Tensor:
    """16-bit numbers in float32: torch's SVD and eigenvalue solvers have no 16-bit kernels."""
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


def _kept(item):
    """A row or column index given as one number (an int, a 0-d tensor, a NumPy integer) as a slice
    of one, so that its dimension stays; anything else as it is."""
    if isinstance(item, bool) or isinstance(item, slice) or item is Ellipsis:
        return item
    if isinstance(item, torch.Tensor) and item.dim() != 0:
        return item
    try:
        i = operator.index(item)
    except TypeError:
        return item
    return slice(i, i + 1 if i != -1 else None)


class FactoredMatrix:
    """The matrix `A @ B`, kept as `A` `[..., ldim, mdim]` and `B` `[..., mdim, rdim]`; leading
    dimensions (layers, heads) broadcast as a matmul's do."""

    def __init__(self, A: torch.Tensor, B: torch.Tensor):
        if A.shape[-1] != B.shape[-2]:
            raise ValueError(f"the factors must match on the inner dimension: A is {tuple(A.shape)}, B is {tuple(B.shape)}")
        self.ldim, self.mdim, self.rdim = A.shape[-2], A.shape[-1], B.shape[-1]
        leading = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
        self.shape = torch.Size((*leading, self.ldim, self.rdim))
        self.A = A.broadcast_to((*leading, self.ldim, self.mdim))
        self.B = B.broadcast_to((*leading, self.mdim, self.rdim))
        self.has_leading_dims = len(leading) > 0

    def __repr__(self) -> str:
        return f"FactoredMatrix: Shape({self.shape}), Hidden Dim({self.mdim})"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def pair(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.A, self.B

    # -- products: the result stays factored through the thinner side ----------------------------
    def __matmul__(self, other):
        if isinstance(other, FactoredMatrix):
            return (self @ other.A) @ other.B
        if other.ndim < 2:  # a vector: the product is a vector
            return (self.A @ (self.B @ other.unsqueeze(-1))).squeeze(-1)
        if other.shape[-2] != self.rdim:
            raise ValueError(f"a right factor must have {self.rdim} rows, not {other.shape[-2]}")
        if self.rdim > self.mdim:
            return FactoredMatrix(self.A, self.B @ other)
        return FactoredMatrix(self.AB, other)

    def __rmatmul__(self, other):
        if isinstance(other, FactoredMatrix):
            return other.A @ (other.B @ self)
        if other.shape[-1] != self.ldim:
            raise ValueError(f"a left factor must have {self.ldim} columns, not {other.shape[-1]}")
        if other.ndim < 2:
            return ((other.unsqueeze(-2) @ self.A) @ self.B).squeeze(-2)
        if self.ldim > self.mdim:
            return FactoredMatrix(other @ self.A, self.B)
        return FactoredMatrix(other, self.AB)

    def __mul__(self, scalar) -> FactoredMatrix:
        if isinstance(scalar, torch.Tensor) and scalar.numel() != 1:
            raise ValueError(f"* takes a scalar, not a tensor of shape {tuple(scalar.shape)}: use @ for a product")
        return FactoredMatrix(self.A * scalar, self.B)

    __rmul__ = __mul__

    @property
    def AB(self) -> torch.Tensor:
        """The whole matrix (`[..., ldim, rdim]`: large)."""
        return self.A @ self.B

    @property
    def BA(self) -> torch.Tensor:
        """The factors the other way round (`[..., mdim, mdim]`), for a square matrix."""
        if self.ldim != self.rdim:
            raise ValueError(f"B @ A needs a square matrix, not {self.ldim} x {self.rdim}")
        return self.B @ self.A

    @property
    def T(self) -> FactoredMatrix:
        return FactoredMatrix(self.B.mT, self.A.mT)

    # -- what the factors give cheaply ----------------------------------------------------------
    @cached_property
    def _svd(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # A = Ua Sa Va^T, B = Ub Sb Vb^T; the SVD of the small middle (Sa Va^T Ub Sb) finishes it.
        Ua, Sa, Vha = torch.linalg.svd(_for_linalg(self.A), full_matrices=False)
        Ub, Sb, Vhb = torch.linalg.svd(_for_linalg(self.B), full_matrices=False)
        middle = Sa[..., :, None] * Vha @ Ub * Sb[..., None, :]
        Um, Sm, Vhm = torch.linalg.svd(middle, full_matrices=False)
        return Ua @ Um, Sm, Vhb.mT @ Vhm.mT

    def svd(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`(U, S, V)` with `U @ S.diag() @ V.mT == A @ B`: `U` `[..., ldim, mdim]`, `S`
        `[..., mdim]` (largest first), `V` `[..., rdim, mdim]`."""
        return self._svd

    @property
    def U(self) -> torch.Tensor:
        return self._svd[0]

    @property
    def S(self) -> torch.Tensor:
        return self._svd[1]

    @property
    def V(self) -> torch.Tensor:
        return self._svd[2]

    @property
    def Vh(self) -> torch.Tensor:
        """TL's old name for `V` (it is V, not its transpose)."""
        return self._svd[2]

    @property
    def eigenvalues(self) -> torch.Tensor:
        """The eigenvalues of `A @ B` that can be non-zero: those of `B @ A` (if `B A v = k v`,
        then `A B (A v) = k (A v)`), complex."""
        return torch.linalg.eigvals(_for_linalg(self.BA))

    def norm(self) -> torch.Tensor:
        """The Frobenius norm, from the singular values."""
        return self.S.pow(2).sum(-1).sqrt()

    def make_even(self) -> FactoredMatrix:
        """The same matrix as `(U √S, √S Vᵀ)`: each factor holds half of every singular value."""
        root = self.S.sqrt()
        return FactoredMatrix(self.U * root[..., None, :], root[..., :, None] * self.V.mT)

    def collapse_l(self) -> torch.Tensor:
        """`S Vᵀ` `[..., mdim, rdim]`: the matrix without its left orthogonal factor."""
        return self.S[..., :, None] * self.V.mT

    def collapse_r(self) -> torch.Tensor:
        """`U S` `[..., ldim, mdim]`: the matrix without its right orthogonal factor."""
        return self.U * self.S[..., None, :]

    def get_corner(self, k: int = 3) -> torch.Tensor:
        """The first `k` of every dimension of the whole matrix, made from `k` rows and columns."""
        corner = self.A[..., :k, :] @ self.B[..., :, :k]
        return corner[tuple(slice(None, k) for _ in range(corner.ndim))]

    def unsqueeze(self, dim: int) -> FactoredMatrix:
        return FactoredMatrix(self.A.unsqueeze(dim), self.B.unsqueeze(dim))

    # -- indexing: leading dimensions, then rows, then columns, without making the product -------
    def __getitem__(self, index) -> FactoredMatrix:
        index = index if isinstance(index, tuple) else (index,)
        if any(item is None for item in index):
            raise IndexError("a FactoredMatrix takes no new axis (None) in an index: unsqueeze it")
        if index.count(Ellipsis) > 1:
            raise IndexError("an index can only have a single ellipsis")
        if Ellipsis in index:
            at = index.index(Ellipsis)
            index = index[:at] + (slice(None),) * (self.ndim - len(index) + 1) + index[at + 1:]
        leading = self.ndim - 2
        if len(index) > self.ndim:
            raise IndexError(f"{len(index)} indices for a FactoredMatrix of {self.ndim} dimensions {tuple(self.shape)}")
        # A row or column given as one number keeps its dimension (of size 1), so the result is
        # still a matrix, as TL's.
        kept = tuple(_kept(i) if n >= leading else i for n, i in enumerate(index))
        head = kept[:leading]
        A, B = self.A[head], self.B[head]
        if len(kept) > leading:
            A = A[(..., kept[leading], slice(None))]
        if len(kept) > leading + 1:
            B = B[(..., slice(None), kept[leading + 1])]
        return FactoredMatrix(A, B)
