"""Unions of product groups, exactly: the symmetry reduction and the block problem.

Solver layer (``ffu_cvx.kron``): imports numpy, scipy.linalg, ``basis``, ``products`` and the
package's ``terms``.

**Symmetric attributes.** An attribute on which every group's block is the identity or
the total is *symmetric*: permuting its values maps the workload to itself, targets
included. Problem 1 is convex in ``X = B^T Sigma^{-1} B`` (profile linear, variances
``w^T X^+ w`` matrix-fractional), so averaging an optimum over those permutations gives
an optimum that commutes with them. Per symmetric attribute ``R^n = span(1) (+) 1^perp``
(ResidualPlanner's residual bases), and a commuting ``X`` is block diagonal:
``X = sum_S Pi_S (x) Y_S`` over the sets ``S`` of symmetric attributes taken on
``1^perp`` (the others on ``span(1)``), with ``Y_S`` a general matrix over the joint space
of the other (*structured*) attributes, of ``D = prod n_j`` cells. In these coordinates

    profile(x) = sum_S kappa_S (B_S^T Sigma_S^{-1} B_S)_{xx},
    var_{g,a} = sum_S beta_{g,S} (L_{g,S} Sigma_S L_{g,S}^T)_{aa},

with ``kappa_S = prod_{i in S} (1 - 1/n_i) prod_{i not in S} 1/n_i`` and ``beta_{g,S}``
the product over symmetric attributes of ``||Pi a_i||^2`` (identity row: ``1/n`` or
``1 - 1/n``; total row: ``n`` or 0). This *block problem* has the optimum of the whole
problem, and so does its dual: for ``lam`` over the ``D`` cells and ``mu`` over the
reduced queries, ``alpha* >= (sum_S F(P_S, Q_S))^2 / (mu . c)`` with
``P_S = kappa_S B_S diag(lam) B_S^T`` and ``Q_S = sum_g beta_{g,S} L_{g,S}^T diag(mu_g) L_{g,S}``
(the Lagrangian separates over the blocks). Marginals have ``D = 1`` (scalar blocks: the
Fourier optimum), a single product group has one structured joint space (its Kronecker
optimum is one of the ``Sigma_S``). Only the blocks some group reaches are formed
(:func:`reached_parts`: the subsets of each group's identity attributes), so the
reduction is polynomial in the number of attributes for low-order marginals.

**Solver.** The multiplicative dual ascent of :mod:`ffu_cvx.certificate`, block by block:
at ``(lam, mu)`` each ``Sigma_S`` solves ``Sigma Q_S Sigma = P_S`` (attaining ``F``), the
profile ``p`` and variances ``v`` of those ``Sigma_S`` give the next
``lam <- lam p / F``, ``mu <- mu (v / c) / F``; every iterate is a primal point (scaled to
meet the targets) and a dual bound, so the gap is certified at every step.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass

import numpy as np
from scipy import linalg

from .. import basis as _basis
from ..status import MAX_ITER, OPTIMAL, USER_STOPPED, IntermediateResult
from .terms import Factor, Term

__all__ = ["SYMMETRIC_KINDS", "DENSE_D_MAX", "ReducedBlock", "Reduction", "split_attributes", "reached_parts", "reduce",
           "AscentResult", "ascent"]

#: Block kinds that keep an attribute symmetric (invariant under permuting its values).
SYMMETRIC_KINDS = ("identity", "total")
#: Largest joint space of the structured attributes solved with dense blocks.
DENSE_D_MAX = 512
#: Weight of the uniform multipliers mixed in when a block's P or Q turns singular.
_MIX = 1e-12


@dataclass(frozen=True, eq=False)
class ReducedBlock:
    """Block ``S`` (``part``: symmetric attributes on ``1^perp``): ``kappa``, basis ``B`` (k, D),
    and per group ``g`` using it ``L[g]`` (m_g, k) and ``beta[g]``."""

    part: tuple
    kappa: float
    B: np.ndarray
    L: dict
    beta: dict


def _residual_bases(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(u^T (1, n), U^T (n - 1, n))``: orthonormal rows spanning ``span(1)`` and ``1^perp``."""
    u = np.full((1, n), 1.0 / math.sqrt(n))
    return u, linalg.null_space(u).T


class Reduction:
    """The block problem of a :class:`ffu_cvx.products.ProductWorkload` (see the module docstring).

    ``sym`` / ``ns``: symmetric and structured attribute indices; ``D``: cells of the
    structured joint space; ``blocks``: :class:`ReducedBlock`; ``targets`` (G,); ``rows``
    (G,): reduced queries per group.
    """

    def __init__(self, workload, sym, ns, blocks, Wns):
        self.workload, self.sym, self.ns, self.blocks = workload, tuple(sym), tuple(ns), tuple(blocks)
        sizes = workload.domain.sizes
        self.D = math.prod(sizes[i] for i in self.ns)
        self.targets = np.array([g.target for g in workload.groups])
        self.rows = tuple(W.shape[0] for W in Wns)
        self._res = {i: _residual_bases(sizes[i]) for i in self.sym}

    def terms(self, sigmas) -> tuple:
        """The structured mechanism of block covariances ``sigmas`` (one (k, k) per block).

        A symmetric attribute's factor and reconstruction depend only on the attribute, its
        side (``span(1)`` or ``1^perp``) and the block kind, so they are built once and shared.
        """
        groups = self.workload.groups
        factor = {(i, perp): Factor.build((i,), Bi, np.eye(Bi.shape[0]))
                  for i in self.sym for perp, Bi in enumerate(self._res[i]) if Bi.shape[0]}
        recon_of = {}
        out = []
        for blk, sigma in zip(self.blocks, sigmas):
            inside = set(blk.part)
            factors, recon = [], {g: [] for g in blk.L}
            for i in self.sym:
                perp = int(i in inside)
                factors.append(factor[i, perp])
                for g in blk.L:
                    block = groups[g].blocks[i]
                    key = (i, perp, block.kind)
                    if key not in recon_of:
                        recon_of[key] = block.matrix @ self._res[i][perp].T
                        recon_of[key].setflags(write=False)
                    recon[g].append(recon_of[key])
            factors.append(Factor.build(self.ns, blk.B, sigma))
            for g in blk.L:
                recon[g].append(blk.L[g])
            out.append(Term(tuple(factors), {g: tuple(r) for g, r in recon.items()}))
        return tuple(out)


def _beta(kind: str, n: int, perp: bool) -> float:
    if kind == "identity":
        return 1.0 - 1.0 / n if perp else 1.0 / n
    return 0.0 if perp else float(n)


def split_attributes(groups, sizes) -> tuple[tuple, tuple]:
    """``(sym, ns)``: the symmetric attributes (every group's block an identity or a total) and the others."""
    sym = tuple(i for i in range(len(sizes)) if all(g.blocks[i].kind in SYMMETRIC_KINDS for g in groups))
    return sym, tuple(i for i in range(len(sizes)) if i not in sym)


def reached_parts(groups, sizes, sym) -> dict:
    """``{S: [groups g with beta_{g,S} > 0]}`` over the blocks some group reaches, ``S`` by size then
    lexicographically.

    A total block has no ``1^perp`` part (``beta`` 0) and an attribute of one value has no
    ``1^perp`` at all, so group ``g`` reaches exactly the subsets of its identity attributes
    of two or more values: per group ``2^(its identity attributes)`` sets, never ``2^|sym|``.
    A block no group reaches has ``Q_S = 0``; it is not released (``Sigma_S^{-1} = 0``:
    no profile, no variance, ``F(P_S, 0) = 0`` in the bound).
    """
    reach = {}
    for gi, g in enumerate(groups):
        ident = [i for i in sym if sizes[i] >= 2 and g.blocks[i].kind == "identity"]
        for r in range(len(ident) + 1):
            for part in itertools.combinations(ident, r):
                reach.setdefault(part, []).append(gi)
    return {part: reach[part] for part in sorted(reach, key=lambda S: (len(S), S))}


def reduce(workload) -> Reduction:
    """The :class:`Reduction` of ``workload`` (callers check ``D`` first: blocks are dense)."""
    groups, sizes = workload.groups, workload.domain.sizes
    sym, ns = split_attributes(groups, sizes)
    Wns = []
    for g in groups:
        W = np.ones((1, 1))
        for i in ns:
            W = np.kron(W, g.blocks[i].matrix)
        Wns.append(W)
    blocks = []
    for part, used in reached_parts(groups, sizes, sym).items():
        inside = set(part)
        kappa = math.prod((1.0 - 1.0 / sizes[i]) if i in inside else 1.0 / sizes[i] for i in sym)
        beta = {gi: math.prod(_beta(groups[gi].blocks[i].kind, sizes[i], i in inside) for i in sym) for gi in used}
        B, L, _ = _basis.decompose(np.vstack([Wns[g] for g in used]), "rows")
        splits = np.cumsum([Wns[g].shape[0] for g in used])[:-1]
        blocks.append(ReducedBlock(part, kappa, B, dict(zip(used, np.split(L, splits))), beta))
    return Reduction(workload, sym, ns, blocks, Wns)


# ----------------------------------------------------------------------------- the dual ascent
def _block_step(blk: ReducedBlock, lam, mu):
    """``(F_S, Sigma_S, profile part (D,), {g: variance part})`` at ``(lam, mu)``, or None if singular."""
    P = blk.kappa * (blk.B * lam) @ blk.B.T
    Q = sum(blk.beta[g] * (L.T * mu[g]) @ L for g, L in blk.L.items())
    try:
        R = linalg.cholesky(P, lower=False, check_finite=False)
    except linalg.LinAlgError:
        return None
    w, V = linalg.eigh(R @ Q @ R.T, check_finite=False)
    if not w[0] > 1e-14 * w[-1]:
        return None
    sw = np.sqrt(w)
    RV = R.T @ V
    sigma = (RV / sw) @ RV.T
    G = V.T @ linalg.solve_triangular(R, blk.B, trans="T", check_finite=False)
    p = blk.kappa * np.einsum("ij,ij->j", G, G * sw[:, None])
    v = {}
    for g, L in blk.L.items():
        H = V.T @ (R @ L.T)
        v[g] = blk.beta[g] * np.einsum("ij,ij->j", H, H / sw[:, None])
    return float(sw.sum()), 0.5 * (sigma + sigma.T), p, v


def _nuclear(A: np.ndarray) -> float:
    return float(np.sum(linalg.svdvals(A, check_finite=False)))


def certified_bound(red: Reduction, lam, mu) -> float:
    """``(sum_S F(P_S, Q_S))^2 / (mu . c)`` by singular values (rounding cannot inflate it)."""
    F = 0.0
    for blk in red.blocks:
        G = blk.B * np.sqrt(blk.kappa * lam)
        H = np.hstack([L.T * np.sqrt(blk.beta[g] * mu[g]) for g, L in blk.L.items()])
        F += _nuclear(H.T @ G)
    mc = sum(float(mu[g].sum()) * c for g, c in enumerate(red.targets))
    return F * F / mc


@dataclass(frozen=True)
class AscentResult:
    """Best primal ``sigmas`` (normalised cost ``cost``), best bound ``lower_bound``, ``nit``, ``status``."""

    sigmas: tuple
    cost: float
    lower_bound: float
    nit: int
    status: str
    history: tuple


def _group_sums(steps, groups: int) -> list:
    """Per group, its variance parts summed over the blocks (in block order) that answer it."""
    v = [0] * groups
    for step in steps:
        for g, part in step[3].items():
            v[g] = v[g] + part
    return v


def _start(red: Reduction):
    lam = np.full(red.D, 1.0 / red.D)
    total = sum(m * c for m, c in zip(red.rows, red.targets))
    return lam, [np.full(m, 1.0 / total) for m in red.rows]


def _mix(lam, mu, red):
    lam = (1 - _MIX) * lam + _MIX / red.D
    return lam, [(1 - _MIX) * m + _MIX * m.sum() / m.size for m in mu]


def ascent(red: Reduction, *, tol: float, max_iter: int, callback=None, patience: int = 500) -> AscentResult:
    """The block dual ascent from uniform multipliers until the certified gap is below ``tol``.

    Stops after ``max_iter`` steps (status ``max_iter``), after ``patience`` steps without a
    better gap (status ``optimal`` if the gap is below ``tol`` else ``max_iter``), or when
    ``callback`` raises ``StopIteration`` (``user_stopped``).
    """
    lam, mu = _start(red)
    best_cost, best_sigmas, best_lb, best_dual = math.inf, None, 0.0, (lam, mu)
    status, history, last_gain, it = MAX_ITER, [], 0, 0
    t0 = time.perf_counter()
    for it in range(1, max_iter + 1):
        steps = [_block_step(b, lam, mu) for b in red.blocks]
        if any(s is None for s in steps):
            lam, mu = _mix(lam, mu, red)
            steps = [_block_step(b, lam, mu) for b in red.blocks]
            if any(s is None for s in steps):
                break
        F = sum(s[0] for s in steps)
        p = sum(s[2] for s in steps)
        v = _group_sums(steps, len(red.rows))
        ratio = max(float(np.max(vg)) / c for vg, c in zip(v, red.targets))
        cost, lb = float(p.max()) * ratio, F * F
        improved = False
        if cost < best_cost:
            best_cost, best_sigmas, improved = cost, tuple(s[1] * (1.0 / ratio) for s in steps), True
        if lb > best_lb:
            best_lb, best_dual, improved = lb, (lam, mu), True
        last_gain = it if improved else last_gain
        gap = best_cost / best_lb - 1.0
        history.append((it, best_cost, best_lb, gap, time.perf_counter() - t0))
        if callback is not None:
            try:
                callback(IntermediateResult(method="kron", nit=it, privacy_cost=best_cost, lower_bound=best_lb,
                                            gap=gap, sigma=None, structure="symmetric blocks"))
            except StopIteration:
                status = USER_STOPPED
                break
        if gap <= tol:
            status = OPTIMAL
            break
        if it - last_gain >= patience:
            break
        lam = lam * p / F
        mu = [m * (vg / c) / F for m, vg, c in zip(mu, v, red.targets)]
    lb = certified_bound(red, *best_dual)
    return AscentResult(best_sigmas, best_cost, lb, it, status, tuple(history))
