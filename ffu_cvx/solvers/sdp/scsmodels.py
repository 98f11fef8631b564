"""SCS's data of Problem 1's ``"inverse"`` model, built directly (no CVXPY), and its warm point.

Solver layer, bottom of ``sdp``: imports numpy, scipy and ``model.privacy`` only; it builds
arrays and never calls a solver. :mod:`ffu_cvx.solvers.sdp.cvx` (the one adapter, which calls SCS
in :func:`ffu_cvx.solvers.sdp.cvx.solve_warm`) imports it; nothing else does.

SCS's standard form is ``min c^T x`` s.t. ``A x + s = b``, ``s`` in a cone ``K``; its
dual ``max -b^T y`` s.t. ``A^T y + c = 0``, ``y`` in ``K*``. A symmetric matrix enters
``K`` as :func:`svec` (lower triangle, column-major, off-diagonal times sqrt(2), which
keeps the trace inner product). The model has unit targets (the caller scales ``L``:
:func:`ffu_cvx.solvers.sdp.cvx.solve_warm`): ``x = (beta, svec(X), svec(Y))`` with ``X = Sigma^{-1}``,
rows ``b_i^T X b_i <= beta`` (d) and ``Y_jj <= 1`` (m) in the non-negative cone, then the
LMI ``[[X, L^T], [L, Y]] >= 0`` (order k + m).

(The ``"pair"`` model, LMI ``[[Sigma, I], [I, X]]`` of order 2k, was tried as a warm
start too: on random ranges d = 128 it walked away to a certified gap of 1.6e-4 in 500
SCS iterations, at scale 0.1 and 1, where this model reaches 6e-7 at scale 1.)
"""

from __future__ import annotations

import math
import numpy as np
from scipy import linalg, sparse

from ...model import privacy

__all__ = ["svec_index", "svec_pos", "svec", "unsvec", "inverse_data", "inverse_point", "inverse_sigma"]


def svec_index(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(i, j)`` of SCS's vectorised order-``n`` symmetric matrix: lower triangle, column-major."""
    j, i = np.triu_indices(n)
    return i, j


def svec_pos(i, j, n: int):
    """Position of entry ``(i, j)``, ``i >= j``, in SCS's vectorisation of order ``n``."""
    return j * n - j * (j - 1) // 2 + (i - j)


def svec(M: np.ndarray) -> np.ndarray:
    """SCS's vector of a symmetric matrix: lower triangle column-major, off-diagonal times sqrt(2)."""
    i, j = svec_index(M.shape[0])
    return M[i, j] * np.where(i == j, 1.0, math.sqrt(2.0))


def unsvec(v: np.ndarray, n: int) -> np.ndarray:
    """Inverse of :func:`svec`."""
    i, j = svec_index(n)
    M = np.zeros((n, n))
    M[i, j] = v / np.where(i == j, 1.0, math.sqrt(2.0))
    return M + np.tril(M, -1).T


def _quadratic_rows(V: np.ndarray):
    """Sparse ``(n, k(k+1)/2)``: row ``j`` holds the coefficients of ``svec(M)`` in ``v_j^T M v_j``
    for the columns ``v_j`` of ``V`` (k, n) (sparse where ``V`` is: one entry per row for ``I``)."""
    ik, jk = svec_index(V.shape[0])
    Vs = sparse.csc_matrix(V)
    return sparse.csr_matrix(Vs[ik, :].multiply(Vs[jk, :]).multiply(
        np.where(ik == jk, 1.0, math.sqrt(2.0))[:, None])).T


def inverse_data(B: np.ndarray, L: np.ndarray) -> tuple[dict, dict]:
    """SCS's ``(data, cone)`` of the model with unit targets, ``B`` (k, d), ``L`` (m, k).

    Sparse where the basis is (the identity basis gives one entry per privacy row).
    """
    (k, d), m = B.shape, L.shape[0]
    n, nX, nY = k + m, k * (k + 1) // 2, m * (m + 1) // 2
    nx = 1 + nX + nY
    priv = sparse.hstack([sparse.csr_matrix(-np.ones((d, 1))), _quadratic_rows(B), sparse.csr_matrix((d, nY))])
    var = sparse.csr_matrix((np.ones(m), (np.arange(m), 1 + nX + svec_pos(np.arange(m), np.arange(m), m))),
                            shape=(m, nx))
    i, j = svec_index(n)
    in_x, in_y = i < k, j >= k
    rows = np.concatenate([np.flatnonzero(in_x), np.flatnonzero(in_y)])
    cols = np.concatenate([1 + svec_pos(i[in_x], j[in_x], k), 1 + nX + svec_pos(i[in_y] - k, j[in_y] - k, m)])
    psd = sparse.csr_matrix((-np.ones(rows.size), (rows, cols)), shape=(i.size, nx))
    const = np.zeros((n, n))
    const[k:, :k] = L
    c = np.zeros(nx)
    c[0] = 1.0
    A = sparse.vstack([priv, var, psd]).tocsc()
    b = np.concatenate([np.zeros(d), np.ones(m), svec(const + const.T)])
    return {"A": A, "b": b, "c": c}, {"l": d + m, "s": [n]}


def _start(B: np.ndarray, L: np.ndarray, sigma: np.ndarray, lam: np.ndarray, mu: np.ndarray):
    """The ingredients of the warm point (:func:`inverse_point`): ``sigma`` rescaled to meet the unit targets, ``X = sigma^{-1}``,
    the profile ``p`` (d,), ``lam`` on the simplex, ``mu`` at its best multiple for ``lam``, ``P = B diag(lam) B^T``.

    The dual function is concave in ``mu``'s scale ``t``: ``2 sqrt(t) F - t sum(mu)`` with
    ``F = F(P, Q)`` (:mod:`ffu_cvx.model.certificate`) peaks at ``t = (F / sum(mu))^2``.
    """
    sigma = sigma / float(np.max(privacy.variances(L, sigma)))
    X = linalg.cho_solve(linalg.cho_factor(sigma, lower=True), np.eye(sigma.shape[0]), check_finite=False)
    X = 0.5 * (X + X.T)
    p = np.einsum("ij,ij->j", B, X @ B)
    lam = np.clip(lam, 0.0, None) / np.sum(np.clip(lam, 0.0, None))
    mu = np.clip(mu, 0.0, None)
    P = (B * lam) @ B.T
    w, V = linalg.eigh(P)
    Ph = (V * np.sqrt(np.clip(w, 0.0, None))) @ V.T
    fidelity = float(np.sum(np.sqrt(np.clip(linalg.eigvalsh(Ph @ ((L.T * mu) @ L) @ Ph), 0.0, None))))
    return sigma, X, p, lam, mu * (fidelity / mu.sum()) ** 2, P


def inverse_point(B: np.ndarray, L: np.ndarray, sigma: np.ndarray, lam: np.ndarray, mu: np.ndarray):
    """SCS's ``(x, y, s)`` for :func:`inverse_data`'s model at ``sigma`` (k, k) and multipliers
    ``lam`` (d,), ``mu`` (m,) (:func:`_start` normalises all three).

    The LMI's multiplier is ``[[B diag(lam) B^T, -Sigma L^T M], [-M L Sigma, M]]`` with
    ``M = diag(mu)``: complementary to ``[[Sigma^{-1}, L^T], [L, L Sigma L^T]]`` at the optimum.
    """
    sigma, X, p, lam, mu, P = _start(B, L, sigma, lam, mu)
    Y = L @ sigma @ L.T
    G = np.block([[P, -(sigma @ L.T) * mu], [-(mu[:, None] * (L @ sigma)), np.diag(mu)]])
    Z = np.block([[X, L.T], [L, Y]])
    x = np.concatenate([[p.max()], svec(X), svec(Y)])
    return x, np.concatenate([lam, mu, svec(G)]), np.concatenate([p.max() - p, 1.0 - np.diag(Y), svec(Z)])


def inverse_sigma(x: np.ndarray, k: int) -> np.ndarray:
    """``Sigma`` (k, k) of an ``"inverse"`` solution ``x``: ``X``'s inverse (raises ``LinAlgError`` if singular)."""
    X = unsvec(x[1:1 + k * (k + 1) // 2], k)
    return linalg.cho_solve(linalg.cho_factor(X, lower=True), np.eye(k), check_finite=False)
