"""Decompositions ``W = L B`` of a workload (Definition 1 of the fitness-for-use paper).

``B`` (k, d) has linearly independent rows and ``k = rank(W)``; ``L`` (m, k) is the
representation matrix. The mechanism is the same whatever decomposition is used
(Theorems 2 and 6), so the basis is a computational choice:

- ``"identity"``: ``B = I`` (needs full column rank, ``L = W``);
- ``"upper"``: ``B = U``, the upper-triangular ones matrix (needs full column rank,
  ``L = W U^{-1}``, computed by differencing columns);
- ``"rows"``: ``B`` = a set of linearly independent rows of ``W`` chosen by QR with
  column pivoting on ``W^T`` (works for any rank), ``L`` from the same QR (a
  least-squares solve where that misses); for an integer ``W`` whose ``L`` is integer,
  ``L`` is exact (rounded when that reproduces ``W`` exactly), so it is as sparse as it is;
- ``"auto"``: identity when ``W`` has full column rank, else rows. With ``B = I`` on a
  rank-deficient workload Problem 1 has no attained optimum (the noise on the
  null-space directions of ``W`` can shrink the profile without bound), so the row
  basis is the right default.

Scale: ``W = L B`` does not depend on the scale of ``W``'s rows, and neither may the
decisions taken on the way (the rank, the rows picked, the least-squares ``L``): they
are all made on the row-normalised matrix ``D W`` (``D`` = one over each row's norm),
so a query of norm 1e-9 next to one of norm 1e9 is kept, never dropped and released
as an exact zero. Every decomposition is checked row by row: each query must be
reproduced to :data:`RECONSTRUCTION_RTOL` of its own norm.

Model layer: imports numpy and scipy only.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg, sparse

__all__ = ["BASES", "BADLY_SCALED", "upper_triangular", "row_normalised", "numerical_rank", "is_identity", "row_basis", "decompose"]

BASES = ("auto", "identity", "upper", "rows")

#: Relative tolerance on ``||w_j - l_j B|| / ||w_j||`` every row ``j`` of a decomposition is
#: checked against.
RECONSTRUCTION_RTOL = 1e-10
#: A spread (largest / smallest) of the queries' scales above this makes a problem badly
#: scaled: variances and profile entries then span more than 1e12, and the solvers'
#: relative tolerances (1e-9 and up) can no longer resolve the small ones.
BADLY_SCALED = 1e6
#: A least-squares ``L`` whose entries are all within this of integers is snapped to them
#: when the integers reproduce ``W`` exactly (:func:`_snapped`).
SNAP_TOL = 1e-9
#: The exactness check multiplies a snapped ``L`` with at most this fraction of non-zeros
#: as a sparse matrix (O(nnz d)), a denser one by BLAS.
SNAP_SPARSE = 0.1


def upper_triangular(d: int) -> np.ndarray:
    """The (d, d) upper-triangular ones matrix ``U[i, j] = 1`` for ``i <= j``."""
    return np.triu(np.ones((d, d)))


def row_normalised(W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(D W, n)``: ``W`` (m, d) with every non-zero row divided by its norm ``n_j`` (m,).

    Zero rows stay zero (their ``n_j`` is reported as 0).
    """
    W = np.asarray(W, dtype=float)
    # Scale by the largest entry first, so that squaring cannot overflow (entries near 1e308).
    top = np.max(np.abs(W), axis=1)
    safe = np.where(top > 0, top, 1.0)
    n = top * np.linalg.norm(W / safe[:, None], axis=1)
    return W / np.where(n > 0, n, 1.0)[:, None], n


def numerical_rank(W: np.ndarray) -> int:
    """Rank of ``W``: numpy's default tolerance on the singular values of the row-normalised ``W``.

    Scaling a row does not change the rank, and here it does not change the decision either.
    """
    return int(np.linalg.matrix_rank(row_normalised(W)[0]))


def is_identity(W: np.ndarray) -> bool:
    """Whether ``W`` is exactly the square identity (O(d^2), no copy): an identity block of a
    large attribute then skips the SVD of its rank test (27 s at d = 4,100)."""
    # The diagonal first (d reads, which settles most other square matrices), then the non-zeros.
    return W.ndim == 2 and W.shape[0] == W.shape[1] and bool(np.all(np.diagonal(W) == 1.0)) and int(
        np.count_nonzero(W)) == W.shape[0]


def _solve_L(B: np.ndarray, W: np.ndarray) -> np.ndarray:
    """The ``L`` (m, k) with ``L B = W`` in the least-squares sense, computed on normalised rows.

    With ``B = diag(n) Bn`` (``Bn`` unit rows) and ``W = diag(w) Wn``, ``L = diag(w) Ln diag(1/n)``
    where ``Ln Bn = Wn``: no singular value of ``B`` is cut because of its rows' scales.
    """
    Bn, n = row_normalised(B)
    Wn, w = row_normalised(W)
    Ln = linalg.lstsq(Bn.T, Wn.T, check_finite=False)[0].T
    return _snapped(w[:, None] * Ln / np.where(n > 0, n, 1.0)[None, :], B, W)


def _snapped(L: np.ndarray, B: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``round(L)`` for an integer ``W`` when it is within ``SNAP_TOL`` of ``L`` and reproduces
    ``W`` exactly (``round(L) B == W``, exact in floating point for integer ``B``), else ``L``.

    A computed ``L`` of a 0/1 workload on a basis of its own rows carries rounding
    (1e-13) in entries that are exactly 0 or 1: snapped, it is exact and as sparse as it
    really is (random ranges d = 2048: 1.0% non-zero, against 99.96% before). A real-valued
    ``W`` keeps its computed ``L``: products of non-integers are not exact, so equality
    would prove nothing.
    """
    if not (np.array_equal(W, np.round(W)) and np.array_equal(B, np.round(B))):
        return L
    Lr = np.round(L)
    if not np.max(np.abs(L - Lr), initial=0.0) <= SNAP_TOL:
        return L
    sparse_enough = np.count_nonzero(Lr) <= SNAP_SPARSE * Lr.size
    product = sparse.csr_array(Lr) @ B if sparse_enough else Lr @ B
    return Lr if np.array_equal(product, W) else L


def row_basis(W: np.ndarray, rank: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Row basis of ``W`` (m, d): returns ``(B, L)`` with ``B`` (k, d) rows of ``W``.

    Rows are picked by QR with column pivoting on the row-normalised ``W^T`` (so a row's
    scale never decides whether it is picked); ``L`` (m, k) comes from that same QR
    (:func:`_interpolative_L`), or, when that misses a row by more than
    ``RECONSTRUCTION_RTOL``, from a least-squares solve. ``rank``: ``W``'s numerical
    rank when already known (:func:`numerical_rank`, an SVD).
    """
    W = np.asarray(W, dtype=float)
    k = numerical_rank(W) if rank is None else int(rank)
    if k == 0:
        raise ValueError("`W` has rank 0: every query is identically zero")
    Wn, norms = row_normalised(W)
    R, piv = linalg.qr(Wn.T, mode="r", pivoting=True, check_finite=False)
    rows = np.sort(piv[:k])
    B = W[rows]
    L = _snapped(_interpolative_L(R, piv, k, norms), B, W)
    if not _row_errors(W, L, B).max(initial=0.0) <= RECONSTRUCTION_RTOL:
        L = _solve_L(B, W)
    return B, L


def _interpolative_L(R: np.ndarray, piv: np.ndarray, k: int, norms: np.ndarray) -> np.ndarray:
    """``L`` (m, k) on the basis of rows ``sort(piv[:k])`` from the pivoted QR ``Wn^T P = Q R``.

    The pivoted columns are ``Q [R11 R12]`` up to ``R22`` (below the rank's tolerance), so
    the other rows of ``Wn`` are the basis rows combined by ``X = R11^{-1} R12``; ``L`` is
    that scaled back by the row norms ``norms`` (m,). One triangular solve, O(k^2 m),
    where a least-squares solve took 15.1 of the 24.5 s of random ranges d = 2,048's
    decomposition (two BLAS threads).
    """
    X = linalg.solve_triangular(R[:k, :k], R[:k, k:], check_finite=False)
    pos = np.argsort(np.argsort(piv[:k]))  # column of basis row piv[i] in sorted order
    Ln = np.zeros((piv.size, k))
    Ln[piv[:k], pos] = 1.0
    Ln[np.ix_(piv[k:], pos)] = X.T
    return norms[:, None] * Ln / norms[np.sort(piv[:k])][None, :]


def _row_errors(W: np.ndarray, L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``||w_j - l_j B|| / ||w_j||`` (m,) (0 for a zero row reproduced by zero); a sparse
    ``L`` (at most ``SNAP_SPARSE`` non-zero) is multiplied as CSR."""
    w = row_normalised(W)[1]
    sparse_enough = np.count_nonzero(L) <= SNAP_SPARSE * L.size
    LB = sparse.csr_array(L) @ B if sparse_enough else L @ B
    return row_normalised(W - LB)[1] / np.where(w > 0, w, 1.0)


def _check_reconstruction(W: np.ndarray, L: np.ndarray, B: np.ndarray, basis: str) -> None:
    """Every row ``w_j`` must be reproduced to ``RECONSTRUCTION_RTOL`` of its own norm."""
    err_rows = _row_errors(W, L, B)
    w = row_normalised(W)[1]
    j = int(np.argmax(err_rows))
    err = float(err_rows[j])
    if not err <= RECONSTRUCTION_RTOL:
        if basis == "custom":
            why = ("the rows of the `basis` matrix do not span the row space of W; pass a B whose "
                   "rows span it, or basis='rows'")
        else:
            spread = float(w.max() / w[w > 0].min())
            why = (f"W is badly scaled (its row norms span {spread:.1e}); rescale the rows of W "
                   "(and c by the squares of the factors)" if spread > BADLY_SCALED
                   else "W is numerically ill-conditioned, try basis='rows'")
        raise ValueError(
            f"basis={basis!r} does not reproduce row {j} of W: ||w_j - l_j B|| / ||w_j|| = {err:.2e} > "
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
        if name in ("auto", "identity") and is_identity(W):
            return np.eye(d), W.copy(), "identity"  # its own exact decomposition: no rank to compute
        rank = numerical_rank(W)
        full_rank = rank == d
        if name == "auto":
            name = "identity" if full_rank else "rows"
        if name in ("identity", "upper") and not full_rank:
            raise ValueError(
                f"basis={name!r} needs W of full column rank, but rank(W) = {rank} < d = {d}; "
                "Problem 1 then has no attained optimum. Use basis='rows' or 'auto'"
            )
        if name == "identity":
            B, L = np.eye(d), W.copy()
        elif name == "upper":
            B = upper_triangular(d)
            # U^{-1} is the first-difference operator, so W U^{-1} differences columns.
            L = W - np.concatenate([np.zeros((m, 1)), W[:, :-1]], axis=1)
        else:
            B, L = row_basis(W, rank=rank)
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
        L = _solve_L(B, W)
    _check_reconstruction(W, L, B, name)
    return B, L, name
