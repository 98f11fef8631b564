"""``Solution``: the one result type every method returns, and the solver statuses.

A Solution checks itself when it is built: the profile and the variances are
recomputed from ``sigma`` through its Cholesky factor (never an explicit inverse), and
a dual certificate gives a lower bound on the optimal privacy cost and the gap.
"""

from __future__ import annotations

import math

import numpy as np

from . import privacy
from .problem import FitnessProblem

__all__ = [
    "OPTIMAL", "OPTIMAL_INACCURATE", "MAX_ITER", "BASELINE", "USER_STOPPED",
    "SUCCESS_STATUSES", "STATUSES", "SolverError", "Solution", "max_variance_ratio",
]

#: Solved to the requested tolerance.
OPTIMAL = "optimal"
#: The solver stopped short of its tolerance but the result is usable (a warning is issued).
OPTIMAL_INACCURATE = "optimal_inaccurate"
#: The iteration limit was reached; the result is feasible but not certified to tolerance.
MAX_ITER = "max_iter"
#: A fixed strategy (GM, HM, CA, ...) rather than an optimiser of Problem 1.
BASELINE = "baseline"
#: A callback raised ``StopIteration``.
USER_STOPPED = "user_stopped"

SUCCESS_STATUSES = (OPTIMAL, OPTIMAL_INACCURATE, BASELINE)
STATUSES = (OPTIMAL, OPTIMAL_INACCURATE, MAX_ITER, BASELINE, USER_STOPPED)


class SolverError(RuntimeError):
    """A solver failed; ``status``, ``nit`` and ``residual`` say where and how."""

    def __init__(self, message: str, *, status: str = "solver_error", nit: int | None = None,
                 residual: float | None = None, **info):
        super().__init__(message)
        self.status = status
        self.nit = nit
        self.residual = residual
        self.info = info


class Solution(privacy.GaussianPrivacy, dict):
    """Result of ``solve``: a dict with attribute access, in the spirit of ``OptimizeResult``.

    Fields
    ------
    sigma : (k, k) noise covariance on ``problem.B``.
    privacy_cost : float, ``alpha = Delta_M^2 = max(profile)``.
    profile : (d,) ``b_i^T Sigma^{-1} b_i``.  variances : (m,) ``diag(L Sigma L^T)``.
    max_ratio : float, ``max_j variances_j / c_j`` (1 for a solved Problem 1).
    lower_bound, gap : certified lower bound on the optimal alpha and the relative gap of
        the normalised cost ``privacy_cost * max_ratio``.
    lam (d,), mu (m,) : the dual multipliers of the certificate.
    status, success, message, method, nit, n_hvp, time, history, problem, info.
    """

    _ORDER = ("method", "status", "success", "message", "privacy_cost", "lower_bound", "gap",
              "max_ratio", "nit", "n_hvp", "time")

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        self[name] = value

    def __repr__(self) -> str:
        keys = [k for k in self._ORDER if k in self] + [
            k for k in ("sigma", "profile", "variances") if k in self]
        width = max(map(len, keys)) + 1
        lines = []
        for k in keys:
            v = self[k]
            if isinstance(v, np.ndarray):
                v = f"array(shape={v.shape})"
            lines.append(f"{k.rjust(width)}: {v}")
        return "\n".join(lines)

    def __dir__(self):
        return list(self.keys())

    @classmethod
    def from_sigma(
        cls,
        problem: FitnessProblem,
        sigma: np.ndarray,
        *,
        method: str,
        status: str = OPTIMAL,
        message: str = "",
        lam: np.ndarray | None = None,
        mu: np.ndarray | None = None,
        certify: bool = True,
        **info,
    ) -> "Solution":
        """Build and check a Solution for ``sigma`` (k, k) on ``problem``'s basis.

        Recomputes the profile and variances via Cholesky; with ``certify=True`` (the
        default) attaches a dual lower bound and gap (:mod:`ffu_cvx.certificate`).
        Raises ``SolverError`` if ``sigma`` is not symmetric positive definite.
        """
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}; expected one of {STATUSES}")
        sigma = np.asarray(sigma, dtype=float)
        k = problem.k
        if sigma.shape != (k, k):
            raise SolverError(f"{method}: sigma has shape {sigma.shape}, expected ({k}, {k})", status="solver_error")
        asym = np.max(np.abs(sigma - sigma.T)) / max(np.max(np.abs(sigma)), 1e-300)
        if not asym <= 1e-8:
            raise SolverError(f"{method}: sigma is not symmetric (relative asymmetry {asym:.1e})", status="solver_error")
        sigma = 0.5 * (sigma + sigma.T)
        try:
            chol = privacy.cholesky(sigma)
        except ValueError as exc:
            raise SolverError(f"{method}: returned covariance is not positive definite: {exc}",
                              status="solver_error") from None
        p = privacy.profile(sigma, problem.B, chol=chol)
        var = np.einsum("ij,ij->i", problem.L @ sigma, problem.L)  # BLAS product: fast at k = 1024
        sol = cls()
        sol["method"] = method
        sol["status"] = status
        sol["success"] = status in SUCCESS_STATUSES
        sol["message"] = message
        sol["problem"] = problem
        sol["sigma"] = sigma
        sol["profile"] = p
        sol["variances"] = var
        sol["privacy_cost"] = float(p.max())
        sol["max_ratio"] = float(np.max(var / problem.c))
        sol["lower_bound"] = math.nan
        sol["gap"] = math.nan
        sol["lam"] = lam
        sol["mu"] = mu
        for key in ("nit", "n_hvp", "time", "history"):
            sol[key] = info.pop(key, None)
        sol["info"] = info
        if certify:
            from .certificate import certify as _certify
            cert = _certify(problem, sigma, lam, mu, profile=p, variances=var)
            sol["lower_bound"], sol["gap"] = cert.lower_bound, cert.gap
            sol["lam"], sol["mu"] = cert.lam, cert.mu
        return sol

    def scaled(self, privacy_cost: float) -> "Solution":
        """The same mechanism rescaled to ``privacy_cost`` (Theorem 8: Problem 2).

        ``sigma * alpha / privacy_cost`` has privacy cost exactly ``privacy_cost``; every
        variance is multiplied by ``alpha / privacy_cost``.
        """
        target = float(privacy_cost)
        if not math.isfinite(target) or target <= 0:
            raise ValueError(f"`privacy_cost` must be a finite positive number, got {privacy_cost!r}")
        s = self["privacy_cost"] / target
        out = Solution(self)
        out["sigma"] = self["sigma"] * s
        out["profile"] = self["profile"] / s
        out["variances"] = self["variances"] * s
        out["privacy_cost"] = target
        out["max_ratio"] = self["max_ratio"] * s
        return out


def max_variance_ratio(solution: Solution, privacy_cost: float | None = None) -> float:
    """Largest achieved / target variance when ``solution``'s mechanism runs at ``privacy_cost``.

    Scaling ``sigma`` to privacy cost ``a`` multiplies every variance by
    ``solution.privacy_cost / a``; ``None`` uses the solution's own cost.
    """
    if privacy_cost is None:
        return float(solution["max_ratio"])
    privacy_cost = float(privacy_cost)
    if not math.isfinite(privacy_cost) or privacy_cost <= 0:
        raise ValueError(f"`privacy_cost` must be a finite positive number, got {privacy_cost!r}")
    return float(solution["max_ratio"] * solution["privacy_cost"] / privacy_cost)
