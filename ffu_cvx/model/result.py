"""``Solution``: the one result type every method returns (statuses live in :mod:`ffu_cvx.model.status`).

Model layer: imports the standard library, numpy, ``privacy``, ``problem``, ``status``, ``validation``,
``fingerprint`` and ``certificate`` (for the certificate attached at construction).

A Solution checks itself when it is built: the profile and the variances are
recomputed from ``sigma`` through its Cholesky factor (never an explicit inverse), and
a dual certificate gives a lower bound on the optimal privacy cost and the gap. It is
complete when built and immutable afterwards (a frozen dataclass whose ``info`` is a
read-only mapping): a changed mechanism is a new Solution.
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Mapping
from typing import Any

import numpy as np

from . import certificate, privacy, validation, fingerprint as _fingerprint
from .problem import FitnessProblem
from .status import (BASELINE, MAX_ITER, OPTIMAL, OPTIMAL_INACCURATE, STATUSES, SUCCESS,
                     SUCCESS_STATUSES, USER_STOPPED, SolverError)

__all__ = [
    "OPTIMAL", "OPTIMAL_INACCURATE", "MAX_ITER", "BASELINE", "USER_STOPPED",
    "SUCCESS_STATUSES", "STATUSES", "SolverError", "Solution", "max_variance_ratio",
]


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Solution(privacy.GaussianPrivacy):
    """Result of ``solve``: an immutable value with one typed field per quantity every solver gives.

    Attributes
    ----------
    method, status, message : str; success : bool (``status`` in ``SUCCESS``).
    problem : the problem solved (a :class:`FitnessProblem`, or a product problem for ``kron``).
    sigma : (k, k) noise covariance on ``problem.B`` (None when a subclass keeps it in factors).
    profile : (d,) ``b_i^T Sigma^{-1} b_i``.  variances : (m,) ``diag(L Sigma L^T)``.
    privacy_cost : float, ``alpha = Delta_M^2 = max(profile)``.
    max_ratio : float, ``max_j variances_j / c_j`` (1 for a solved Problem 1).
    lower_bound, gap : certified lower bound on the optimal alpha and the relative gap of
        the normalised cost ``privacy_cost * max_ratio``.
    lam (d,), mu (m,) : the dual multipliers of the certificate (or None).
    nit, n_hvp : iteration and Hessian-vector-product counts; time : seconds; history : per
        iteration records (each None where a solver does not report it).
    info : read-only mapping of solver-specific extras (``refine_levels``, ``auto``, ...).
    fingerprint : (property) :func:`ffu_cvx.model.fingerprint.of` its problem: a release checks
        that it is asked of the workload and targets this Solution was solved for.

    ``sol["name"]`` and ``sol.get("name", default)`` are read-only lookups of a field or,
    failing that, of an ``info`` entry; nothing can be assigned.
    """

    method: str
    status: str
    success: bool
    message: str
    problem: Any
    sigma: np.ndarray | None
    profile: np.ndarray | None
    variances: np.ndarray | None
    privacy_cost: float
    max_ratio: float
    lower_bound: float
    gap: float
    lam: np.ndarray | None = None
    mu: np.ndarray | None = None
    nit: int | None = None
    n_hvp: int | None = None
    time: float | None = None
    history: list | None = None
    info: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    _ORDER = ("method", "status", "success", "message", "privacy_cost", "lower_bound", "gap",
              "max_ratio", "nit", "n_hvp", "time", "sigma", "profile", "variances")

    def __post_init__(self):
        object.__setattr__(self, "info", types.MappingProxyType(dict(self.info)))

    def __getstate__(self) -> dict:
        return dict(self.__dict__, info=dict(self.info))

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, info=types.MappingProxyType(dict(state["info"])))

    def __getitem__(self, name: str):
        """The field ``name``, else ``info[name]`` (KeyError if neither)."""
        if isinstance(name, str) and name in self.__dataclass_fields__:
            return getattr(self, name)
        return self.info[name]

    def get(self, name: str, default=None):
        """``self[name]``, or ``default`` where there is no such field or ``info`` entry."""
        try:
            return self[name]
        except KeyError:
            return default

    def with_info(self, **info) -> "Solution":
        """A new Solution equal to this one with ``info`` updated by ``info``."""
        return dataclasses.replace(self, info={**self.info, **info})

    def __repr__(self) -> str:
        width = max(map(len, self._ORDER)) + 1
        lines = []
        for k in self._ORDER:
            v = getattr(self, k)
            if isinstance(v, np.ndarray):
                v = f"array(shape={v.shape})"
            lines.append(f"{k.rjust(width)}: {v}")
        return "\n".join(lines)

    @property
    def fingerprint(self) -> str:
        """``"sha256:..."`` of the problem solved (workload, targets, basis or domain)."""
        return _fingerprint.of(self.problem)

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
        lower_bound: float | None = None,
        **info,
    ) -> "Solution":
        """Build and check a Solution for ``sigma`` (k, k) on ``problem``'s basis.

        Recomputes the profile and variances via Cholesky. The certificate: with
        ``lower_bound`` given (a bound the solver certified, with its ``lam``, ``mu``)
        the gap is computed from it; otherwise ``certify=True`` (the default) attaches a
        dual lower bound and gap (:func:`ffu_cvx.model.certificate.certify`), and
        ``certify=False`` leaves both NaN. ``nit``, ``n_hvp``, ``time`` and ``history``
        are fields; every other keyword goes to ``info``.
        Raises ``SolverError`` if ``sigma`` is not symmetric positive definite.
        """
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}; expected one of {STATUSES}")
        sigma = np.asarray(sigma, dtype=float)
        k = problem.k
        if sigma.shape != (k, k):
            raise SolverError(f"{method}: sigma has shape {sigma.shape}, expected ({k}, {k})")
        asym = np.max(np.abs(sigma - sigma.T)) / max(np.max(np.abs(sigma)), 1e-300)
        if not asym <= 1e-8:
            raise SolverError(f"{method}: sigma is not symmetric (relative asymmetry {asym:.1e})")
        sigma = 0.5 * (sigma + sigma.T)
        try:
            chol = privacy.cholesky(sigma)
        except ValueError as exc:
            raise SolverError(f"{method}: returned covariance is not positive definite: {exc}") from None
        p = privacy.profile(sigma, problem.B, chol=chol)
        var = privacy.variances(problem.L, sigma)
        alpha, max_ratio = float(p.max()), float(np.max(var / problem.c))
        if lower_bound is not None:
            lb = float(lower_bound)
            gap = alpha * max_ratio / lb - 1.0 if lb > 0 else math.inf
        elif certify:
            cert = certificate.certify(problem, sigma, lam, mu, profile=p, variances=var)
            lb, gap, lam, mu = cert.lower_bound, cert.gap, cert.lam, cert.mu
        else:
            lb = gap = math.nan
        counts = {key: info.pop(key, None) for key in ("nit", "n_hvp", "time", "history")}
        return cls(method=method, status=status, success=status in SUCCESS, message=message, problem=problem,
                   sigma=sigma, profile=p, variances=var, privacy_cost=alpha, max_ratio=max_ratio,
                   lower_bound=lb, gap=gap, lam=lam, mu=mu, info=info, **counts)

    def scaled(self, privacy_cost: float) -> "Solution":
        """The same mechanism rescaled to ``privacy_cost`` (Theorem 8: Problem 2).

        ``sigma * alpha / privacy_cost`` has privacy cost exactly ``privacy_cost``; every
        variance is multiplied by ``alpha / privacy_cost``. The problem (targets ``c``) is
        unchanged, so are ``lower_bound`` and the gap of the normalised cost.
        """
        target = validation.positive(privacy_cost, "privacy_cost")
        s = self.privacy_cost / target
        return dataclasses.replace(self, sigma=self.sigma * s, profile=self.profile / s, variances=self.variances * s,
                                   privacy_cost=target, max_ratio=self.max_ratio * s)


def max_variance_ratio(solution: Solution, privacy_cost: float | None = None) -> float:
    """Largest achieved / target variance when ``solution``'s mechanism runs at ``privacy_cost``.

    Scaling ``sigma`` to privacy cost ``a`` multiplies every variance by
    ``solution.privacy_cost / a``; ``None`` uses the solution's own cost.
    """
    if privacy_cost is None:
        return float(solution.max_ratio)
    privacy_cost = validation.positive(privacy_cost, "privacy_cost")
    return float(solution.max_ratio * solution.privacy_cost / privacy_cost)
