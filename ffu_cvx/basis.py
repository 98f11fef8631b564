"""Decompositions ``W = L B`` of a workload (Definition 1 of the fitness-for-use paper).

``B`` (k, d) has linearly independent rows and ``k = rank(W)``; ``L`` (m, k) is the
representation matrix. The mechanism is the same whatever decomposition is used
(Theorems 2 and 6), so the basis is a computational choice:

- ``"identity"``: ``B = I`` (needs full column rank, ``L = W``);
- ``"upper"``: ``B = U``, the upper-triangular ones matrix (needs full column rank,
  ``L = W U^{-1}``, computed by differencing columns);
- ``"rows"``: ``B`` = a set of linearly independent rows of ``W`` chosen by QR with
  column pivoting on ``W^T`` (works for any rank);
- ``"auto"``: identity when ``W`` has full column rank, else rows. With ``B = I`` on a
  rank-deficient workload Problem 1 has no attained optimum (the noise on the
  null-space directions of ``W`` can shrink the profile without bound), so the row
  basis is the right default.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

__all__ = ["BASES", "upper_triangular", "numerical_rank", "row_basis", "decompose"]

BASES = ("auto", "identity", "upper", "rows")

#: Relative tolerance on ``||W - L B|| / ||W||`` every decomposition is checked against.
RECONSTRUCTION_RTOL = 1e-10


def upper_triangular(d: int) -> np.ndarray:
    """The (d, d) upper-triangular ones matrix ``U[i, j] = 1`` for ``i <= j``."""
    return np.triu(np.ones((d, d)))


def numerical_rank(W: np.ndarray) -> int:
    """Rank of ``W`` from its singular values with the numpy default tolerance."""
    return int(np.linalg.matrix_rank(W))


def row_basis(W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row basis of ``W`` (m, d): returns ``(B, L)`` with ``B`` (k, d) rows of ``W``.

    Rows are picked by QR with column pivoting on ``W^T``; ``L`` (m, k) solves
    ``L B = W`` in the least-squares sense and the reconstruction is checked.
    """
    W = np.asarray(W, dtype=float)
    k = numerical_rank(W)
    if k == 0:
        raise ValueError("`W` has rank 0: every query is identically zero")
    _, _, piv = linalg.qr(W.T, mode="economic", pivoting=True)
    rows = np.sort(piv[:k])
    B = W[rows]
    L = linalg.lstsq(B.T, W.T, check_finite=False)[0].T
    return B, L


def _check_reconstruction(W: np.ndarray, L: np.ndarray, B: np.ndarray, basis: str) -> None:
    err = np.linalg.norm(W - L @ B) / max(np.linalg.norm(W), 1e-300)
    if not err <= RECONSTRUCTION_RTOL:
        why = (
            "the rows of the `basis` matrix do not span the row space of W; pass a B whose "
            "rows span it, or basis='rows'"
            if basis == "custom"
            else "W is numerically ill-conditioned, try basis='rows'"
        )
        raise ValueError(
            f"basis={basis!r} does not reproduce W: ||W - L B|| / ||W|| = {err:.2e} > "
            f"{RECONSTRUCTION_RTOL:g}; {why}"
        )


def decompose(W: np.ndarray, basis: str | np.ndarray = "auto") -> tuple[np.ndarray, np.ndarray, str]:
    """Return ``(B, L, name)`` with ``W = L B`` for the requested ``basis``.

    ``basis`` is one of :data:`BASES` or a user matrix ``B`` (k, d) with linearly
    independent rows spanning the row space of ``W``.
    """
    W = np.asarray(W, dtype=float)
    m, d = W.shape
    if isinstance(basis, str):
        name = basis.lower()
        if name not in BASES:
            raise ValueError(f"`basis` must be one of {BASES} or a (k, d) matrix, got {basis!r}")
        full_rank = numerical_rank(W) == d
        if name == "auto":
            name = "identity" if full_rank else "rows"
        if name in ("identity", "upper") and not full_rank:
            raise ValueError(
                f"basis={name!r} needs W of full column rank, but rank(W) = {numerical_rank(W)} < d = {d}; "
                "Problem 1 then has no attained optimum. Use basis='rows' or 'auto'"
            )
        if name == "identity":
            B, L = np.eye(d), W.copy()
        elif name == "upper":
            B = upper_triangular(d)
            # U^{-1} is the first-difference operator, so W U^{-1} differences columns.
            L = W - np.concatenate([np.zeros((m, 1)), W[:, :-1]], axis=1)
        else:
            B, L = row_basis(W)
    else:
        B = np.asarray(basis, dtype=float)
        name = "custom"
        if B.ndim != 2 or B.shape[1] != d:
            raise ValueError(f"`basis` matrix must have shape (k, {d}), got {B.shape}")
        if not np.all(np.isfinite(B)):
            raise ValueError("`basis` matrix contains NaN or inf")
        k = numerical_rank(B)
        if k != B.shape[0]:
            raise ValueError(f"`basis` rows must be linearly independent: rank {k} < {B.shape[0]} rows")
        if k != numerical_rank(W):
            raise ValueError(f"`basis` has rank {k} but W has rank {numerical_rank(W)}; they must be equal")
        L = linalg.lstsq(B.T, W.T, check_finite=False)[0].T
    _check_reconstruction(W, L, B, name)
    return B, L, name
