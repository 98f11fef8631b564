"""Unions of marginals as structured mechanisms: the Fourier optimum (exact) re-expressed in the
symmetry reduction's blocks, so that ``method="auto"`` returns a :class:`KronSolution`.

Solver layer: imports numpy, ``fourier``, ``workloads.products`` and the ``kron`` modules below it.
"""

from __future__ import annotations

import math

import numpy as np

from ...workloads.products import ProductProblem
from ..fourier import min_privacy_cost
from .driver import solve_kron
from .reduce import reduce
from .solution import KronSolution

__all__ = ["FOURIER_RTOL", "is_marginal_union", "solve_marginal_union"]

#: Agreement asked of the Fourier optimum re-expressed as a structured mechanism.
FOURIER_RTOL = 1e-8


def is_marginal_union(problem: ProductProblem) -> bool:
    """Every block of every group is an identity or a total (a union of marginals)."""
    return all(b.kind in ("identity", "total") for g in problem.groups for b in g.blocks)


def solve_marginal_union(problem: ProductProblem, *, tol: float | None = None) -> KronSolution:
    """The Fourier optimum of a marginal union, as the symmetric-block structured mechanism.

    Component ``S`` of the Fourier mechanism costs ``p_S / tau_S``; block ``S`` of the
    symmetry reduction (:mod:`ffu_cvx.solvers.kron.reduce`) releases the same residual with cost
    ``kappa_S b_S^2 / sigma_S``, so ``sigma_S = kappa_S b_S^2 / cost_S``. Falls back to the
    block ascent (noted in ``info``) if the two disagree.
    """
    sizes = problem.domain.sizes
    keep = [i for i, n in enumerate(sizes) if n >= 2]
    index = {i: j for j, i in enumerate(keep)}
    targets = {}
    for g in problem.groups:
        A = tuple(index[i] for i, b in enumerate(g.blocks) if b.kind == "identity" and sizes[i] >= 2)
        targets[A] = min(targets.get(A, math.inf), g.target)
    mech = min_privacy_cost(tuple(sizes[i] for i in keep), targets)
    costs = mech.component_costs
    red = reduce(problem.workload)
    sigmas = [np.array([[float(blk.kappa[0]) * float(blk.B[0, 0]) ** 2 / costs[tuple(index[i] for i in blk.part)]]])
              for blk in red.blocks]
    sol = KronSolution.from_terms(problem, red.terms(sigmas), method="kron", lower_bound=mech.lower_bound,
                                  time=mech.time, structure="fourier", fourier_cost=mech.privacy_cost)
    same = abs(sol.privacy_cost * sol.max_ratio / (mech.privacy_cost * mech.max_ratio) - 1.0) <= FOURIER_RTOL
    if same and sol.gap <= (1e-4 if tol is None else tol):
        return sol
    fallback = solve_kron(problem, structure="symmetric", **({} if tol is None else {"tol": tol}))
    return fallback.with_info(fourier="the Fourier mechanism did not re-express exactly; solved by the block ascent")
