"""Per-attribute Problem 1: the factor solves of the Kronecker solver, with a cache.

Solver layer (``ffu_cvx.solvers.kron``): imports numpy, ``model`` (``problem``, ``result``,
``validation``), ``sdp`` and ``smii``. A factor problem is ``FitnessProblem(A_i, c, basis="auto")`` for a
block ``A_i`` (r_i, n_i) (or several blocks stacked, with a target per block); the
basis handles rank-deficient blocks (total, bands). The identity and the total at a
common target have closed forms (every variance ``c``, ``alpha = 1 / c``, certified by the
uniform multipliers); everything else goes to the dense SDP or SM-II.
"""

from __future__ import annotations

import numpy as np

from ...model import validation
from ...model.problem import FitnessProblem
from ...model.result import Solution
from ..sdp.driver import solve_sdp
from ..smii import solve_smii

__all__ = ["FACTOR_METHODS", "SDP_MAX_K", "FactorSolver"]

#: How a factor problem may be solved: "auto" (closed form, else SDP up to SDP_MAX_K, else SM-II).
FACTOR_METHODS = ("auto", "sdp", "smii")
#: Largest factor rank "auto" gives to the dense SDP (CVXPY); SM-II above it.
SDP_MAX_K = 8


def _closed_form(problem: FitnessProblem, blocks) -> Solution | None:
    """The identity or the total at one target ``c``: every variance ``c``, alpha = 1/c."""
    if len(blocks) != 1 or blocks[0].kind not in ("identity", "total") or np.ptp(problem.c) != 0:
        return None
    c = float(problem.c[0])
    if problem.basis == "identity" and blocks[0].kind == "identity":
        sigma = c * np.eye(problem.d)  # L = W = I
    else:
        # L is square and invertible (the one row of the total), so diag(L Sigma L^T) = c exactly
        sigma = c * np.linalg.inv(problem.L.T @ problem.L)
    n = problem.d
    lam = np.full(n, 1.0 / n)
    mu = np.full(problem.m, 1.0 / (problem.m * c))
    return Solution.from_sigma(problem, sigma, method="closed form", lam=lam, mu=mu, lower_bound=1.0 / c,
                               nit=0, time=0.0)


class FactorSolver:
    """Solves and caches per-attribute problems: ``solve(blocks, targets) -> Solution``.

    ``method`` in :data:`FACTOR_METHODS`; ``tol`` is each factor's certified gap. The cache
    key is the blocks' matrices and the targets, so a block shared by several groups is
    solved once.
    """

    def __init__(self, method: str = "auto", tol: float = 1e-7):
        self.method = validation.choice(method, "factor_method", FACTOR_METHODS)
        self.tol = validation.positive(tol, "tol")
        self._cache = {}
        self.n_solves = 0

    def problem(self, blocks, targets) -> FitnessProblem:
        W = np.vstack([b.matrix for b in blocks])
        c = np.concatenate([np.full(b.matrix.shape[0], float(t)) for b, t in zip(blocks, targets)])
        return FitnessProblem(W, c, basis="auto", name=" + ".join(b.kind for b in blocks))

    def solve(self, blocks, targets) -> Solution:
        key = tuple((b.matrix.shape, b.matrix.tobytes()) for b in blocks) + tuple(float(t) for t in targets)
        if key in self._cache:
            return self._cache[key]
        problem = self.problem(blocks, targets)
        sol = _closed_form(problem, blocks) if self.method == "auto" else None
        if sol is None:
            self.n_solves += 1
            method = self.method
            if method == "auto":
                method = "sdp" if problem.k <= SDP_MAX_K else "smii"
            if method == "sdp":
                sol = solve_sdp(problem, tol=self.tol)
            else:
                sol = solve_smii(problem, tol=self.tol)
        self._cache[key] = sol
        return sol
