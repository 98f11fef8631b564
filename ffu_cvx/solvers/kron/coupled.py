"""Blocks coupled across the classes of one attribute by a few rows over several classes, never formed.

Solver layer (``ffu_cvx.solvers.kron``): imports numpy only.

**The structure.** An attribute ``i`` that every group reads one class at a time (states and
counties of a geography: a state sum, a county) is split class by class by the reduction
(:mod:`ffu_cvx.solvers.kron.reduce`). *Coupling* groups whose rows on ``i`` are one reduced row
``u`` over several classes (the national total over counties grouped in states) join the
classes again: the block of a pattern with ``i`` on its class averages has (classes x the other
free attributes' class tuples) coordinates, 10,200 on the census person tables, too large
for a dense eigendecomposition per step. Every other group's rows sit in one class, so over
the ``r`` classes, with the pattern pinned on class ``k`` giving ``P_k`` and ``Q_k`` (the
separable groups' rows) on a basis ``B`` (k0, D') shared by the classes::

    P = blockdiag_k P_k,      Q = blockdiag_k Q_k + (u u^T) (x) N,      N = sum_g L_g^T diag(w_g) L_g

over the coupling groups. With ``P_k = R_k^T R_k`` and ``N = C C^T`` (``C``: k0 x m), the matrix
of the step is ``M = R Q R^T = A + Y Y^T``: ``A = blockdiag_k R_k Q_k R_k^T`` and ``Y`` (r k0, m)
stacks ``u_k R_k C``.

**The step** (:func:`step`) needs ``tr M^{1/2}``, the class blocks of ``M^{1/2}`` (the profile)
and of ``M^{-1/2}`` (the separable groups' variances) and ``X^T M^{-1/2} X`` on the coupling rows
``X = (u_k R_k L_g^T)_k``. From ``x^{-1/2} = (2/pi) int_0^inf ds / (x + s^2)`` on nodes equally
spaced in ``log s`` (the trapezoid rule, exponentially accurate for this integrand), each
resolvent ``(M + s^2)^{-1}`` is ``(A + s^2)^{-1} - G G^T`` by Woodbury (:func:`_woodbury`, in a
form that stays accurate where ``A`` nearly vanishes), on the eigendecompositions of the
``A_k``: ``r k0 m^2`` operations per node, never ``(r k0)^3``. ``M^{1/2}`` is ``A^{1/2}`` plus
the quadrature of ``s^2 G G^T`` (no cancellation); ``M^{-1/2}`` is the quadrature of the whole
resolvent, which stays positive where ``A`` is nearly singular and ``Y`` is not (the state
tables slack beside the national ones).

Nothing is floored. Where a class's multipliers are tiny its ``R_k`` is too, and the profile
reads ``M^{1/2}`` through ``R_k^{-1}``: raising an eigenvalue of ``A`` by ``f`` moves a profile by
about ``sqrt(f) |R_k^{-1}|^2``, 10% of the largest profile on the census hierarchy at
``f = 1e-12`` of the largest eigenvalue. The nodes reach down to :data:`FLOOR` of it. The dense
step raises the eigenvalues of ``M`` below 1e-14 of the largest, so the two steps differ on
such classes. Both are steps of the ascent; this one prices its primal points approximately
(within 1e-5 of the dense step on the census blocks small enough to form, except those
classes), so they are estimates: a primal point is released only formed (:func:`precision`) and priced
exactly by the release's terms.

**The bound** (:func:`bound`) is rigorous whatever the nodes. With
``G_k = B diag(kappa_k lam_k)^{1/2}`` the matrix ``M' = G^T Q G`` has the spectrum of
``P^{1/2} Q P^{1/2}`` (no Cholesky factor, no ridge), and for ``g(x) = sum_j c_j / (x + s_j^2)``
with positive weights and any factor ``M' = K K^T``, ``Z = g(M') K`` has spectral norm
``sqrt(max_theta theta g(theta)^2)``, so

    F(P, Q) = ||K||_* >= tr(Z^T K) / ||Z|| >= tr(M' g(M')) / sqrt(sup_{x >= 0} x g(x)^2),

the trace exact by Woodbury (two sums of nonnegative terms, ``theta / (theta + t)`` and
``t ||G||^2``) and the supremum taken on a fine grid of the scalar ``x g(x)^2``. Rounding is kept
on the safe side: the eigenvalues of the class blocks and of ``N`` are lowered by a bound on
their backward error before use, so rounding noise on a null direction cannot add its square
root. On a small hierarchy it is within 1e-7 of the dense block's nuclear norm
(tests/test_kron_coupled.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["CoupledBlock", "row_weights", "step", "precision", "bound", "FLOOR", "STEP_NODES", "BOUND_NODES"]

#: The step's nodes reach down to eigenvalues of ``M`` of this share of its largest: below it, a
#: direction counts as null (a query on it gets the variance of an eigenvalue about this small).
FLOOR = 1e-16
#: Nodes of the step's quadrature: spacing in ``log s``, then how far (in ``log s``) below the
#: smallest and above the largest eigenvalue's square roots they reach. Against the dense step on
#: a small hierarchy (tests/test_kron_coupled.py) the largest relative difference of a variance is
#: 6e-6 at (0.75, 5, 12), 2e-4 here, 1e-3 at (0.5, 12, 16): it grows as the nodes reach further
#: down, where the dense step raises eigenvalues of ``M`` under 1e-14 of the largest and this one
#: resolves them, so it measures that floor rather than an error.
STEP_NODES = (0.75, 10.0, 12.0)
#: Nodes of the rigorous bound: spacing, reach below ``sqrt(theta_max)`` (eigenvalues under
#: ``1e-20 theta_max`` add at most ``1e-10 sqrt(theta_max)`` each to ``tr M^{1/2}``) and above it
#: (the rule misses ``(2/pi) e^-20`` of ``sqrt(theta_max)`` there).
BOUND_NODES = (0.5, 23.0, 20.0)
#: Most entries of one batch of nodes' arrays in a step (:func:`_node_chunks`): 32 MB an array.
NODE_BATCH_ENTRIES = 1 << 22


@dataclass(frozen=True, eq=False)
class CoupledBlock:
    """The blocks of one pattern pinned on each class ``k`` of attribute ``attr`` (``r`` classes),
    coupled by the rows of the coupling groups.

    ``pattern`` has -1 at ``attr``; ``ks`` (r,) the attribute's class of each of the block's classes
    (in the block's order); ``B`` (k0, D') the basis the classes share; per group ``g``
    reaching it ``L[g]`` (rows, k0) and ``lshape[g]`` as in
    :class:`ffu_cvx.solvers.kron.reduce.ReducedBlock`; ``idx`` and ``kappa`` (r D',) class by class;
    ``beta[g]`` (r, ...) per class for the separable groups; ``coupling[g] = (u, beta0)`` for the
    coupling groups: their reduced row's class sums ``u`` (r,) and the weight of each reduced
    row without it.
    """

    pattern: tuple
    attr: int
    r: int
    ks: np.ndarray
    B: np.ndarray
    L: dict
    lshape: dict
    idx: np.ndarray
    kappa: np.ndarray
    beta: dict
    coupling: dict

    @property
    def D(self) -> int:
        """Coordinates of the coupled block (classes x the shared basis), as if formed."""
        return self.r * self.B.shape[1]

    @property
    def part(self) -> tuple:
        return tuple(i for i, s in enumerate(self.pattern) if s >= 0)

    @property
    def step_bytes(self) -> int:
        """Memory a step holds at once, about: six arrays of (classes, k0, k0) floats and three batches of
        :data:`NODE_BATCH_ENTRIES`."""
        return 8 * (6 * self.r * self.B.shape[0] ** 2 + 3 * NODE_BATCH_ENTRIES)


def row_weights(lshape: tuple, w: np.ndarray) -> np.ndarray:
    """Weights ``w`` on a group's grid summed over the rows sharing one row of ``L`` (``lshape``), flat; ``w``
    may be a stack of grids (leading axes, kept)."""
    lead = w.ndim - len(lshape)
    axes = tuple(lead + j for j, n in enumerate(lshape) if n == 1 and w.shape[lead + j] > 1)
    return (np.sum(w, axis=axes, keepdims=True) if axes else w).reshape(w.shape[:lead] + (-1,))


def _below(e: np.ndarray, rigorous: bool) -> np.ndarray:
    """Eigenvalues ``e`` (ascending, last axis) of symmetric matrices of order n, shifted down by ``8 n eps`` of the
    largest where ``rigorous`` (the computed ones are exact for a perturbation of at most about that
    norm: the shifted spectrum is that of a matrix below the true one) and clipped at zero."""
    if not rigorous:
        return np.maximum(e, 0.0)
    top = np.maximum(np.max(np.abs(e), axis=-1, keepdims=True, initial=0.0), np.finfo(float).tiny)
    return np.maximum(e - 8.0 * e.shape[-1] * np.finfo(float).eps * top, 0.0)


def _coupling_factors(cb: CoupledBlock, mu, rigorous: bool = False) -> list:
    """``[(u, C)]``: per distinct class vector ``u`` of the coupling groups, ``N = C C^T`` (k0, m) (where
    ``rigorous``, ``C C^T`` below the true ``N``: :func:`_below`)."""
    N = {}
    for g, (u, beta0) in cb.coupling.items():
        L = cb.L[g]
        key = u.tobytes()
        part = (L.T * row_weights(cb.lshape[g], mu[g] * beta0)) @ L
        N[key] = (u, part if key not in N else N[key][1] + part)
    out = []
    for u, Nu in N.values():
        e, V = np.linalg.eigh(Nu)
        e = _below(e, rigorous)
        keep = e > 1e-14 * max(float(e[-1]), np.finfo(float).tiny)
        out.append((u, V[:, keep] * np.sqrt(e[keep])))
    return out


def _separable_q(cb: CoupledBlock, mu) -> np.ndarray:
    """``Q_k`` (r, k0, k0) of every class: the separable groups' rows weighted by their multipliers."""
    k0 = cb.B.shape[0]
    Q = np.zeros((cb.r, k0, k0))
    for g, beta in cb.beta.items():
        L = cb.L[g]
        Q += np.matmul(L.T * row_weights(cb.lshape[g], mu[g] * beta)[:, None, :], L)
    return Q


def _nodes(lo: float, hi: float, nodes: tuple):
    """``(s, below, above)``: nodes ``s`` from ``sqrt(lo)`` to ``sqrt(hi)`` widened by ``nodes``, with
    the trapezoid weights of ``(2/pi) int ds`` for an integrand flat below the first node
    (``below``) and one falling as ``s^-2`` above the last (``above``)."""
    h, under, over = nodes
    s = np.exp(np.arange(0.5 * math.log(lo) - under, 0.5 * math.log(hi) + over, h))
    w = (2.0 / math.pi) * h * s
    below, above = w.copy(), w.copy()
    below[0] += (2.0 / math.pi) * s[0]
    above[-1] += (2.0 / math.pi) * s[-1]
    return s, below, above


def _step_nodes(theta: np.ndarray, Yt: np.ndarray):
    """:func:`_nodes` of the step: from :data:`FLOOR` of ``top`` to ``top``, at least the largest
    eigenvalue of ``M`` (``theta`` (r, k0), ``Yt`` (r, k0, m))."""
    top = float(theta.max()) + float(np.einsum("kim,kim->", Yt, Yt))
    return _nodes(FLOOR * max(top, np.finfo(float).tiny), top, STEP_NODES)


#: Largest ``||W^{-1/2} Y||^2`` for which :func:`_woodbury` works from the eigendecomposition of
#: ``Y^T W^{-1} Y`` (errors near ``eps`` times it); above it, from a QR factorisation of ``W^{-1/2} Y``.
_EIGH_MAX = 1e6


def _woodbury(theta: np.ndarray, Yt: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``G`` (J, r, k0, m) with the resolvent ``(M + t_j)^{-1} = (A + t_j)^{-1} - G_j G_j^T`` in the classes'
    eigenbases (``theta`` (r, k0), ``Yt`` (r, k0, m)), for each shift of ``t`` (J,).

    ``G G^T = W^{-1} Y (I + Y^T W^{-1} Y)^{-1} Y^T W^{-1}`` with ``W = A + t``, as
    ``W^{-1/2} U diag(sigma^2 / (1 + sigma^2))^{1/2}`` from the singular values of
    ``W^{-1/2} Y = U diag(sigma) V^T`` (by a thin QR first where they exceed ``_EIGH_MAX``): no
    inverse of ``I + Y^T W^{-1} Y``, whose condition reaches 1e20 where a class's block of ``A``
    nearly vanishes and ``Y`` does not (the slack states of the census hierarchy), and where it
    lost every digit. The shifts are one batch: one call of each product over all of them.
    """
    r, k0, m = Yt.shape
    root = np.sqrt(theta[None, :, :] + t[:, None, None])[..., None]          # (J, r, k0, 1)
    Yh = (Yt[None] / root).reshape(t.size, r * k0, m)
    e, V = np.linalg.eigh(np.matmul(Yh.transpose(0, 2, 1), Yh))
    out = np.matmul(Yh, V / np.sqrt(1.0 + np.maximum(e, 0.0))[:, None, :])   # well conditioned: no QR
    bad = e[:, -1] > _EIGH_MAX
    if bad.any():
        Q, Rq = np.linalg.qr(Yh[bad])
        Ur, sig, _ = np.linalg.svd(Rq)
        out[bad] = np.matmul(Q, Ur * (sig / np.sqrt(1.0 + sig * sig))[:, None, :])
    return out.reshape(t.size, r, k0, m) / root


def _node_chunks(n: int, Yt: np.ndarray):
    """Slices of ``n`` nodes, each a batch of at least one node and at most :data:`NODE_BATCH_ENTRIES`
    entries of ``Y`` (``Yt`` (r, k0, m)) or of the classes' blocks (r, k0, k0)."""
    r, k0, m = Yt.shape
    size = max(1, NODE_BATCH_ENTRIES // (r * k0 * max(k0, m, 1)))
    return [slice(a, min(a + size, n)) for a in range(0, n, size)]


def _class_spectra(cb: CoupledBlock, X: np.ndarray, mu, factors: list) -> tuple:
    """``(theta (r, n), V (r, n, n), Yt (r, n, m))``: the eigendecompositions ``X_k Q_k X_k^T = V_k diag(theta_k) V_k^T``
    of the classes' blocks and their coupling rows ``u_k X_k C`` in those eigenbases (``X`` (r, n, k0): the
    classes' factors of ``P_k``; ``factors`` as :func:`_coupling_factors`)."""
    theta, V = np.linalg.eigh(X @ _separable_q(cb, mu) @ X.transpose(0, 2, 1))
    Y = np.concatenate([u[:, None, None] * (X @ C) for u, C in factors], axis=2) if factors else X[:, :, :0]
    return theta, V, V.transpose(0, 2, 1) @ Y


def _upper_factors(cb: CoupledBlock, lam, cholesky) -> np.ndarray:
    """``R`` (r, k0, k0): upper factors ``P_k = R_k^T R_k`` of the classes' profiles, all at once, or by
    ``cholesky`` (with its ridge) class by class where one is not numerically positive definite."""
    P = np.matmul(cb.B * (cb.kappa * lam[cb.idx]).reshape(cb.r, 1, -1), cb.B.T)
    try:
        return np.linalg.cholesky(P).transpose(0, 2, 1)
    except np.linalg.LinAlgError:
        return np.stack([cholesky(Pk) for Pk in P])


def _spectra(cb: CoupledBlock, lam, mu, cholesky) -> tuple:
    """``(R, V, W, theta, Yt, us)``: the classes' factors ``R_k`` of ``P_k``, the eigendecompositions
    ``A_k = R_k Q_k R_k^T = V_k diag(theta_k) V_k^T`` (``theta`` clipped at zero), ``W_k = R_k^{-1} V_k``,
    ``Y`` in those eigenbases and the coupling vectors (each (r, ...), class by class)."""
    factors = _coupling_factors(cb, mu)
    Rs = _upper_factors(cb, lam, cholesky)
    theta, V, Yt = _class_spectra(cb, Rs, mu, factors)
    return Rs, V, np.linalg.solve(Rs, V), np.maximum(theta, 0.0), Yt, [u for u, _ in factors]


def _quadrature(theta: np.ndarray, Yt: np.ndarray, RV: np.ndarray, us: list):
    """The step's quadrature over the nodes: ``(inv_sqrt (r, k0), plus (r, k0, k0), minus (r, k0, k0), dF,
    {u: H})``: ``A``'s part of ``M^{-1/2}`` (diagonal in the classes' eigenbases), the class blocks of
    ``M^{1/2} - A^{1/2}`` and of ``M^{-1/2}`` less ``A``'s part, ``tr(M^{1/2} - A^{1/2})``, and per
    coupling vector ``u`` the part of ``X^T M^{-1/2} X`` across the classes (``RV``: ``R_k^T V_k``)."""
    r, k0, m = Yt.shape
    s, below, above = _step_nodes(theta, Yt)
    t = s * s
    inv_sqrt = np.einsum("j,jki->ki", below, 1.0 / (theta[None] + t[:, None, None]))
    plus, minus, dF = np.zeros((r, k0, k0)), np.zeros((r, k0, k0)), 0.0
    across = {u.tobytes(): ((u[:, None, None] * RV).transpose(1, 0, 2).reshape(k0, r * k0), np.zeros((k0, k0)))
              for u in us}
    for part in (_node_chunks(s.size, Yt) if m else ()):
        G = _woodbury(theta, Yt, t[part])                                  # (J, r, k0, m)
        blocks = np.matmul(G, G.transpose(0, 1, 3, 2))
        plus += np.tensordot(above[part] * t[part], blocks, axes=1)
        minus -= np.tensordot(below[part], blocks, axes=1)
        dF += float(np.dot(above[part] * t[part], np.einsum("jkim,jkim->j", G, G)))
        for W, H in across.values():
            J = np.matmul(W, G.reshape(-1, r * k0, m)) * np.sqrt(below[part])[:, None, None]
            J = J.transpose(1, 0, 2).reshape(k0, -1)
            H -= J @ J.T
    return inv_sqrt, plus, minus, dF, {key: H for key, (_, H) in across.items()}


def step(cb: CoupledBlock, lam, mu, cholesky):
    """``(F, None, profile part (r D',), {g: variance part on the group's grid})`` of the coupled block
    at ``(lam, mu)``, as :func:`ffu_cvx.solvers.kron.reduce` steps a dense block (no covariance is
    formed: the second entry is None). ``cholesky`` factors ``P_k`` (upper, with the reduction's ridge)."""
    Rs, V, W, theta, Yt, us = _spectra(cb, lam, mu, cholesky)
    root = np.sqrt(theta)
    RV = np.matmul(Rs.transpose(0, 2, 1), V)                                        # R_k^T V_k
    inv_sqrt, plus, minus, dF, across = _quadrature(theta, Yt, RV, us)
    Z = np.matmul(W.transpose(0, 2, 1), cb.B)                                      # V_k^T R_k^{-T} B
    quad = np.einsum("kij,kij->kj", Z, Z * root[:, :, None] + np.matmul(plus, Z))
    v = {}
    for g, beta in cb.beta.items():
        T = np.matmul(RV.transpose(0, 2, 1), cb.L[g].T)                             # V_k^T R_k L^T (r, k0, rows)
        part = np.einsum("kij,kij->kj", T, T * inv_sqrt[:, :, None] + np.matmul(minus, T))
        v[g] = np.sum(part.reshape((cb.r,) + cb.lshape[g]) * beta, axis=0)
    for g, (u, beta0) in cb.coupling.items():
        L = cb.L[g]
        T = np.matmul(RV.transpose(0, 2, 1), L.T)
        diag = np.einsum("k,kir,kir->r", u * u, T, T * inv_sqrt[:, :, None])
        v[g] = (diag + np.einsum("ri,ij,rj->r", L, across[u.tobytes()], L)).reshape(cb.lshape[g]) * beta0
    return float(root.sum()) + dF, None, cb.kappa * quad.reshape(-1), v


def precision(cb: CoupledBlock, lam, mu, cholesky) -> np.ndarray:
    """The primal point of :func:`step` at ``(lam, mu)``, formed: ``X = R^{-1} M^{1/2} R^{-T}``
    (r k0, r k0), class by class (coordinates ``(k, basis row)`` row-major), so that its profile is
    ``kappa diag((I (x) B)^T X (I (x) B))`` and the block's covariance ``X^{-1}``, as a dense block's.

    On the step's nodes ``M^{1/2}`` is ``A^{1/2}`` plus ``H H^T``, ``H`` the columns
    ``sqrt(w_j) s_j G_j`` of every node: with ``W = blockdiag_k R_k^{-1} V_k``,
    ``X = W A^{1/2} W^T + (W H)(W H)^T``, one product of order ``r k0`` over ``nodes x m`` columns
    (about 4 s on one core for the census hierarchy's largest block, order 4,845, 54 nodes x 95)."""
    _, _, W, theta, Yt, _ = _spectra(cb, lam, mu, cholesky)
    r, k0, m = Yt.shape
    if m:
        s, _, above = _step_nodes(theta, Yt)
        H = np.empty((r, k0, s.size, m))
        for part in _node_chunks(s.size, Yt):
            G = _woodbury(theta, Yt, s[part] ** 2) * (np.sqrt(above[part]) * s[part])[:, None, None, None]
            H[:, :, part] = G.transpose(1, 2, 0, 3)
        H = np.matmul(W, H.reshape(r, k0, -1)).reshape(r * k0, -1)
        X = H @ H.T
        del H
    else:
        X = np.zeros((r * k0, r * k0))
    diag = np.matmul(W * np.sqrt(theta)[:, None, :], W.transpose(0, 2, 1))           # W_k A_k^{1/2} W_k^T
    for k in range(r):
        X[k * k0:(k + 1) * k0, k * k0:(k + 1) * k0] += diag[k]
    return 0.5 * (X + X.T)


def bound(cb: CoupledBlock, lam, mu) -> float:
    """A rigorous lower bound on ``F(P, Q)`` of the coupled block at ``(lam, mu)`` (module docstring)."""
    factors = _coupling_factors(cb, mu, rigorous=True)
    m = sum(C.shape[1] for _, C in factors)
    G0 = cb.B * np.sqrt(cb.kappa * lam[cb.idx]).reshape(cb.r, 1, -1)          # (r, k0, D'): G_k
    e, _, Yt = _class_spectra(cb, G0.transpose(0, 2, 1), mu, factors)
    theta = _below(e, True)
    top = float(theta.max()) + float(np.sum(Yt * Yt))
    if top <= 0:
        return 0.0
    s, _, _ = _nodes(top, top, BOUND_NODES)
    c = (2.0 / math.pi) * BOUND_NODES[0] * s           # no tails: they would lift x g(x)^2 above 1 near the ends
    t = s * s
    trace = float(np.dot(c, np.einsum("jki->j", theta[None] / (theta[None] + t[:, None, None]))))
    for part in (_node_chunks(s.size, Yt) if m else ()):
        G = _woodbury(theta, Yt, t[part])
        trace += float(np.dot(c[part] * t[part], np.einsum("jkim,jkim->j", G, G)))
    x = np.exp(np.arange(2 * math.log(s[0]) - 40.0, 2 * math.log(s[-1]) + 40.0, 0.005))
    g = (c[None, :] / (x[:, None] + (s * s)[None, :])).sum(axis=1)
    return trace / math.sqrt(float(np.max(x * g * g)) * (1.0 + 1e-12))
