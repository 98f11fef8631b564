"""Convex combinations of two covariances: a free bound on their cost, the best weight, a pool of ends.

Solver layer (SM-II): imports numpy only.

Let ``S`` and ``S'`` (k, k) both meet every target, with profiles ``g``, ``g'`` (d,) and
variance ratios ``r``, ``r'`` (m,). Each ``g_i(Sigma) = b_i^T Sigma^{-1} b_i`` is convex in
``Sigma`` and each ratio is linear, so the mix ``Sigma_theta = theta S + (1 - theta) S'``
(``theta`` in [0, 1]) has normalised cost ``max g(Sigma_theta) * max r(Sigma_theta)`` at most

    U(theta) = max_i (theta g_i + (1 - theta) g'_i) * max_j (theta r_j + (1 - theta) r'_j),

which needs the four vectors only (O(d + m) per ``theta``; :func:`pair_bound`). SM-II's
multiplier phase hands out iterates that overshoot in turn on different columns and
queries; a mix of two sub-problems' ends can then cost less than either. On random
ranges d = 1,024 (tol 1e-3), ends at certified gaps 1.37e-2 and 1.48e-3 mixed to 8.8e-4,
and near gaps of 1e-3 the bound is within about 1% of the mix's exact gap. The driver keeps the last few ends
(:class:`EndPool`) and stops on a mix that certifies ``tol`` (its exact cost recomputed
from its own Cholesky factor).
"""

from __future__ import annotations

from collections import deque

import numpy as np

__all__ = ["pair_bound", "end_of", "mix", "EndPool"]

#: Values of ``theta`` per grid of :func:`pair_bound`, and its grids (each spans two steps of
#: the one before around its least value): the last step is 2^3 / 32^4 = 8e-6.
GRID, LEVELS = 33, 4


def _bound_at(theta: np.ndarray, g, r, g2, r2) -> np.ndarray:
    """``U`` (n,) at each of ``theta`` (n,)."""
    theta = theta[:, None]
    return np.max(g2 + theta * (g - g2), axis=1) * np.max(r2 + theta * (r - r2), axis=1)


def pair_bound(g: np.ndarray, r: np.ndarray, g2: np.ndarray, r2: np.ndarray) -> tuple[float, float]:
    """``(U, theta)``: the least bound ``U(theta)`` over [0, 1] on the cost of ``theta S + (1 - theta) S'``.

    ``g``, ``g2`` (d,) are the profiles and ``r``, ``r2`` (m,) the variance ratios of ``S``
    and ``S'`` (numpy, both meeting every target). ``U`` is a product of two convex
    piecewise-linear functions; its least value is searched on ``LEVELS`` nested grids of
    ``GRID`` values (O(LEVELS GRID (d + m))). ``theta = 1`` gives ``S``'s own cost, and
    the value returned is never above it.
    """
    lo, hi = 0.0, 1.0
    best = (float(np.max(g) * np.max(r)), 1.0)
    for _ in range(LEVELS):
        grid = np.linspace(lo, hi, GRID)
        values = _bound_at(grid, g, r, g2, r2)
        i = int(np.argmin(values))
        best = min(best, (float(values[i]), float(grid[i])))
        step = grid[1] - grid[0]
        lo, hi = max(grid[i] - step, 0.0), min(grid[i] + step, 1.0)
    return best


def end_of(point, kappa: float, to_numpy) -> tuple:
    """``(sigma, scale, g, r)`` of an SM-II iterate (:class:`ffu_cvx.solvers.smii.model.Point`) on
    internal targets ``kappa`` times the true ones: ``sigma / scale`` meets every true
    target, with profile ``g`` (d,) and ratios ``r`` (m,) moved to numpy by ``to_numpy``."""
    scale = point.ratio(kappa)
    return point.sigma, scale, to_numpy(point.g) * scale, to_numpy(point.h) * (kappa / scale)


def mix(S, S2, theta: float):
    """``theta S + (1 - theta) S2`` (k, k), on the arrays' backend."""
    out = S * theta
    out += (1.0 - theta) * S2
    return out


class EndPool:
    """The last ``size`` sub-problem ends ``(sigma, scale, g, r)``: ``sigma / scale`` (k, k)
    meets every target and has profile ``g`` (d,) and variance ratios ``r`` (m,).

    ``sigma`` stays on its array backend (kept, not copied); ``g`` and ``r`` are numpy.
    """

    def __init__(self, size: int):
        self.ends = deque(maxlen=max(int(size), 0))

    def __len__(self) -> int:
        return len(self.ends)

    def push(self, sigma, scale: float, g: np.ndarray, r: np.ndarray) -> None:
        self.ends.append((sigma, scale, g, r))

    def best_mix(self, g: np.ndarray, r: np.ndarray, extra=()):
        """``(U, theta, sigma', scale')``: of the kept ends and those in ``extra`` (the same
        tuples), the one whose mix with an end of profile ``g`` and ratios ``r`` has the
        least bound (:func:`pair_bound`); ``None`` when there is none."""
        found = None
        for sigma2, scale2, g2, r2 in (*self.ends, *extra):
            U, theta = pair_bound(g, r, g2, r2)
            if found is None or U < found[0]:
                found = (U, theta, sigma2, scale2)
        return found
