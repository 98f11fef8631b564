"""The value of a PML bound: ``-log F`` under the worst admissible prior (spec § 2, Lemma A).

PML layer: imports numpy only (the release layer checks a Laplace statement
with :func:`corollary`, inside :meth:`ffu_cvx.release.release.LaplaceAccount.check`). ``F(g) = alpha sum_j exp(-g_j/b) + (1 - k alpha)
exp(-max_j g_j/b)`` for gaps ``g`` (k,) >= 0; :func:`corollary` is Corollary 1's closed
form, :func:`from_distances` the safe bound (and the sign bound of two-valued rows).
Each is evaluated so that small and large leakages both keep full relative accuracy.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["neg_log", "neg_log_f", "corollary", "from_distances"]


def neg_log(f, f_minus_1):
    """``-log F`` given F and ``F - 1`` (each computed without cancellation): ``log1p`` keeps
    full relative accuracy when the leakage is small (large b), ``log`` when F is small."""
    with np.errstate(invalid="ignore", divide="ignore"):  # inf entries mark infeasible DP states
        return np.where(f_minus_1 > -0.5, -np.log1p(f_minus_1), -np.log(f))


def neg_log_f(sum_expm1, max_gap, b: float, alpha: float, k: int):
    """``-log F`` from ``E = sum_j expm1(-g_j/b)`` and ``max_j g_j``.

    ``F - 1 = alpha E + (1 - k alpha) expm1(-max g/b)`` because ``k alpha + (1 - k alpha)
    = 1``, and ``F = alpha (k + E) + (1 - k alpha) e^{-max g/b}``.
    """
    rest = max(1.0 - k * alpha, 0.0)
    max_gap = np.asarray(max_gap, dtype=float)
    return neg_log(alpha * (k + sum_expm1) + rest * np.exp(-max_gap / b),
                    alpha * sum_expm1 + rest * np.expm1(-max_gap / b))


def corollary(delta: float, b: float, alpha: float) -> float:
    """``-log(alpha + (1 - alpha) e^{-Delta_1/b})``."""
    return float(neg_log(alpha + (1 - alpha) * math.exp(-delta / b), (1 - alpha) * math.expm1(-delta / b)))


def from_distances(D: np.ndarray, b: float, alpha: float) -> float:
    """``max_p -log F(D_{.p})``: the safe bound, and the sign bound for two-valued rows."""
    k = D.shape[0]
    vals = neg_log_f(np.expm1(-D / b).sum(axis=0), D.max(axis=0), b, alpha, k)
    return float(np.max(vals))

