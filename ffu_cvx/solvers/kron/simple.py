"""The Kronecker structures built from per-attribute Problem 1 solves.

Solver layer (``ffu_cvx.solvers.kron``): imports the standard library, numpy and the package's ``factors`` and
``terms``.

- :func:`product_term`: one product group, exactly. With ``Sigma = Sigma_1 (x) ... (x) Sigma_a``
  the profile is ``p_1 (x) ... (x) p_a`` and the variances ``v_1 (x) ... (x) v_a``, so the
  privacy cost is the product of the per-factor costs; multipliers in product form
  ``lam = (x) lam_i``, ``mu = (x) mu_i`` make the dual bound the product of the per-factor
  bounds (``F`` of a Kronecker pair is the product of the ``F_i``), so the product of the
  per-attribute optima is the optimum.
- :func:`kronecker_bcd`: one Kronecker Sigma for a union of groups, by block-coordinate
  descent: with the other factors fixed, the cost is ``max p_i`` times a constant and group
  ``g``'s constraint is ``max v_{g,i} <= c_g / prod_{j != i} max v_{g,j}``: an exact weighted
  per-attribute Problem 1 over the attribute's stacked blocks.
- :func:`independent`: one exact product term per group; the profiles add.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .terms import Factor, Term

__all__ = ["product_term", "kronecker_bcd", "independent", "BCD_SWEEPS", "BCD_RTOL"]

#: Most sweeps over the attributes of the block-coordinate descent.
BCD_SWEEPS = 12
#: The descent stops when a sweep lowers the cost by less than this (relative).
BCD_RTOL = 1e-6


def product_term(group, g: int, solver, scale: float | None = None):
    """``(term, factor solutions)`` of group ``g`` alone: per-factor optima at target 1, the
    first factor scaled by the group's target (or ``scale``)."""
    sols = [solver.solve([b], [1.0]) for b in group.blocks]
    s = group.target if scale is None else scale
    factors = [Factor.build((i,), sol.problem.B, sol.sigma * (s if i == 0 else 1.0)) for i, sol in enumerate(sols)]
    return Term(tuple(factors), {g: tuple(sol.problem.L for sol in sols)}), sols


def product_bound(sols, target: float) -> float:
    """The certified bound of a product term: the product of the factor bounds over the target."""
    return math.prod(s.lower_bound for s in sols) / target


def _stacked_term(groups, sols) -> Term:
    factors, recon = [], {g: [] for g in range(len(groups))}
    for i, sol in enumerate(sols):
        factors.append(Factor.build((i,), sol.problem.B, sol.sigma))
        splits = np.cumsum([grp.blocks[i].matrix.shape[0] for grp in groups])[:-1]
        for g, L in enumerate(np.split(sol.problem.L, splits)):
            recon[g].append(L)
    return Term(tuple(factors), {g: tuple(r) for g, r in recon.items()})


def kronecker_bcd(groups, solver, sweeps: int = BCD_SWEEPS, deadline: float | None = None):
    """``(term, cost, sweeps done)``: the best single Kronecker Sigma found by block-coordinate descent.

    ``deadline`` (a ``time.perf_counter()`` value) is checked after every per-attribute solve:
    past it the descent stops with the factors it has (any set of them is a mechanism; the
    caller prices it), or returns ``(None, inf, 0)`` before it has one per attribute.
    """
    a = len(groups[0].blocks)
    targets = np.array([g.target for g in groups])
    late = (lambda: False) if deadline is None else (lambda: time.perf_counter() >= deadline)
    sols = []
    for i in range(a):
        if late():
            return None, math.inf, 0
        sols.append(solver.solve([g.blocks[i] for g in groups], [1.0] * len(groups)))

    def group_max(i, sol):
        splits = np.cumsum([grp.blocks[i].matrix.shape[0] for grp in groups])[:-1]
        return np.array([v.max() for v in np.split(sol.variances, splits)])

    cost, done = math.inf, 0
    for done in range(1, sweeps + 1):
        prev = cost
        for i in range(a):
            if late():
                return _stacked_term(groups, sols), cost, done
            others = np.prod([group_max(j, sols[j]) for j in range(a) if j != i], axis=0) if a > 1 else 1.0
            sols[i] = solver.solve([g.blocks[i] for g in groups], targets / others)
        ratio = float(np.max(np.prod([group_max(j, sols[j]) for j in range(a)], axis=0) / targets))
        cost = math.prod(s.privacy_cost for s in sols) * ratio
        if prev - cost <= BCD_RTOL * cost:
            break
    return _stacked_term(groups, sols), cost, done


def independent(groups, solver):
    """``(terms, per-group bounds)``: each group's exact product mechanism, composed."""
    terms, bounds = [], []
    for g, grp in enumerate(groups):
        term, sols = product_term(grp, g, solver)
        terms.append(term)
        bounds.append(product_bound(sols, grp.target))
    return tuple(terms), bounds
