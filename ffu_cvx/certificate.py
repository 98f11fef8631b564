"""Dual lower bound on the optimal privacy cost of Problem 1, and the optimality gap.

For multipliers ``lam`` (d,) in the simplex over the columns of ``B`` and ``mu`` (m,)
>= 0 over the queries, weak duality gives (DESIGN.md § duality)

    alpha* >= tr((P^{1/2} Q P^{1/2})^{1/2})^2 / (mu . c),
    P = B diag(lam) B^T (k, k),  Q = L^T diag(mu) L (k, k),

with equality at the optimum. The trace term equals the nuclear norm of
``diag(sqrt(mu)) W diag(sqrt(lam))`` (its singular values are the square roots of the
eigenvalues of ``P^{1/2} Q P^{1/2}``), so the bound does not depend on the basis.

At an optimal ``Sigma`` the multipliers satisfy ``Sigma Q Sigma = P``; for any ``Sigma``
we start from multipliers concentrated on its nearly tight columns and queries and
improve them by multiplicative dual ascent, keeping the best bound seen (every
``(lam, mu)`` gives a valid bound, so the search never invalidates it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg

from .problem import FitnessProblem

__all__ = ["Certificate", "lower_bound", "certify"]


@dataclass(frozen=True)
class Certificate:
    """A certified lower bound on the optimal privacy cost of a problem.

    lower_bound : float, the bound on alpha*; lam (d,), mu (m,): the multipliers that
    give it; gap : float, ``(alpha - lower_bound) / lower_bound`` for the certified
    ``alpha`` (the normalised cost of the solution).
    """

    lower_bound: float
    lam: np.ndarray
    mu: np.ndarray
    gap: float


def _fidelity(P: np.ndarray, Q: np.ndarray) -> float:
    """``tr((P^{1/2} Q P^{1/2})^{1/2})`` for symmetric PSD (k, k) ``P`` and ``Q``."""
    wp, Vp = linalg.eigh(P, check_finite=False)
    wp = np.clip(wp, 0.0, None)
    Ph = (Vp * np.sqrt(wp)) @ Vp.T
    ev = linalg.eigvalsh(Ph @ Q @ Ph, check_finite=False)
    return float(np.sum(np.sqrt(np.clip(ev, 0.0, None))))


def lower_bound(problem: FitnessProblem, lam: np.ndarray, mu: np.ndarray) -> float:
    """Dual lower bound on Problem 1's optimal alpha for multipliers ``lam`` (d,), ``mu`` (m,).

    ``lam`` is normalised to the simplex; ``mu`` must be >= 0 and not all zero.
    """
    lam = np.asarray(lam, dtype=float)
    mu = np.asarray(mu, dtype=float)
    if lam.shape != (problem.d,) or mu.shape != (problem.m,):
        raise ValueError(f"`lam` must have shape ({problem.d},) and `mu` ({problem.m},), got {lam.shape}, {mu.shape}")
    if np.any(lam < 0) or np.any(mu < 0) or lam.sum() <= 0 or mu.sum() <= 0:
        raise ValueError("`lam` and `mu` must be non-negative and not all zero")
    lam = lam / lam.sum()
    P = (problem.B * lam) @ problem.B.T
    Q = (problem.L.T * mu) @ problem.L
    return _fidelity(P, Q) ** 2 / float(mu @ problem.c)


def _soft_weights(ratio: np.ndarray, sharpness: float) -> np.ndarray:
    z = sharpness * (ratio - ratio.max())
    w = np.exp(z)
    return w / w.sum()


def certify(
    problem: FitnessProblem,
    sigma: np.ndarray,
    lam: np.ndarray | None = None,
    mu: np.ndarray | None = None,
    *,
    iters: int = 30,
) -> Certificate:
    """Certify ``sigma`` (k, k): a lower bound on alpha* and the relative gap of ``sigma``.

    The gap compares the bound with ``sigma``'s normalised cost ``alpha * r``, where
    ``r = max_j var_j / c_j``: ``sigma / r`` meets every target and costs ``alpha r``.
    Multipliers ``lam`` (d,) and ``mu`` (m,) from a solver are used as the starting
    point when given.
    """
    from .privacy import cholesky, profile

    chol = cholesky(sigma)
    p = profile(sigma, problem.B, chol=chol)
    ratios = np.einsum("ij,jk,ik->i", problem.L, sigma, problem.L) / problem.c
    alpha_norm = float(p.max() * ratios.max())

    candidates = []
    if lam is not None and mu is not None:
        candidates.append((np.asarray(lam, float), np.asarray(mu, float)))
    for sharp in (1e2, 1e3, 1e4):
        candidates.append((_soft_weights(p / p.max(), sharp), _soft_weights(ratios / ratios.max(), sharp) / problem.c))

    best = (-np.inf, None, None)
    for lam0, mu0 in candidates:
        lam_k, mu_k = np.clip(lam0, 0, None), np.clip(mu0, 0, None)
        if lam_k.sum() <= 0 or mu_k.sum() <= 0:
            continue
        for it in range(iters + 1):
            lb = lower_bound(problem, lam_k, mu_k)
            if lb > best[0]:
                best = (lb, lam_k / lam_k.sum(), mu_k / float(mu_k @ problem.c))
            if it == iters:
                break
            # Multiplicative ascent: at the Lagrangian minimiser Sigma(lam, mu) the
            # partial derivatives of the bound are proportional to the profile and to
            # the variance ratios, so weights of loose columns / queries shrink.
            lam_n = lam_k / lam_k.sum()
            Pm = (problem.B * lam_n) @ problem.B.T
            Qm = (problem.L.T * mu_k) @ problem.L
            try:
                S = _geometric_sigma(Pm, Qm)
                ck = cholesky(S)
            except (ValueError, linalg.LinAlgError):
                break
            pk = profile(S, problem.B, chol=ck)
            hk = np.einsum("ij,jk,ik->i", problem.L, S, problem.L) / problem.c
            lam_k = lam_n * (pk / pk.max())
            mu_k = mu_k * (hk / hk.max())
    lb = float(best[0])
    gap = (alpha_norm - lb) / lb
    return Certificate(lower_bound=lb, lam=best[1], mu=best[2], gap=float(gap))


def _geometric_sigma(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """The Sigma with ``Sigma Q Sigma = P``: ``P^{1/2} (P^{1/2} Q P^{1/2})^{-1/2} P^{1/2}``."""
    wp, Vp = linalg.eigh(P, check_finite=False)
    if wp.min() <= 1e-14 * wp.max():
        raise ValueError("P is singular")
    Ph = (Vp * np.sqrt(wp)) @ Vp.T
    wm, Vm = linalg.eigh(Ph @ Q @ Ph, check_finite=False)
    if wm.min() <= 1e-14 * wm.max():
        raise ValueError("Q is singular")
    Mi = (Vm / np.sqrt(wm)) @ Vm.T
    S = Ph @ Mi @ Ph
    return 0.5 * (S + S.T)
