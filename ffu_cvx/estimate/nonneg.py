"""Bound-constrained least squares ``min_{x >= 0} 1/2 ||z - F x||^2`` on an implicit operator.

Estimate layer: imports numpy and scipy (linalg, optimize). ``F`` is any object with ``forward(x)``,
``adjoint(r)`` and ``d`` (:mod:`ffu_cvx.estimate.gls`). Two solvers of the same problem:

- ``"lbfgsb"``: scipy's L-BFGS-B (generalised Cauchy point, subspace minimisation); robust,
  but its work per iteration grows faster than ``d`` (about 3 s an iteration at 10^7
  variables, and 17 ``d`` floats of workspace at memory 6);
- ``"projected"``: a projected L-BFGS (two-metric projection): the quasi-Newton direction
  (compact form of the inverse-Hessian approximation: a matrix-vector product over the
  stored steps and one over the gradient changes) on the free variables (those off the bound or pushed away from it), a
  projected backtracking (Armijo) line search, and the curvature pairs of the projected
  steps; ``O(m d)`` per iteration, for large domains.

``"auto"`` takes the projected solver, whose work per iteration stays ``O(m d)``. Both stop at a
projected gradient under ``gtol`` or a relative decrease of the objective under ``ftol``;
``info`` reports the projected gradient reached either way.
"""

from __future__ import annotations

import time

import numpy as np
from scipy import linalg, optimize
from scipy.linalg import blas

__all__ = ["fit", "SOLVERS", "MEMORY", "MAX_ITER", "FTOL"]

#: Solvers :func:`fit` accepts.
SOLVERS = ("auto", "lbfgsb", "projected")
#: Curvature pairs kept by either solver.
MEMORY = 6
#: Most iterations.
MAX_ITER = 20_000
#: Relative decrease of the objective per iteration under which a fit stops.
FTOL = 1e-13
#: Armijo constant and backtracking factor of the projected line search.
ARMIJO, BACKTRACK = 1e-4, 0.5


def _free(x, g, nonnegative) -> np.ndarray:
    """The free variables: off the bound, or pushed away from it by the gradient (all without bounds)."""
    return (x > 0) | (g < 0) if nonnegative else np.ones(x.shape, dtype=bool)


def _projected_gradient_norm(x, g, nonnegative) -> float:
    """Largest entry of the gradient on the free variables."""
    return float(np.abs(g[_free(x, g, nonnegative)]).max(initial=0.0))


def _objective(op, z):
    def fun(x):
        r = op.forward(x) - z
        return 0.5 * float(r @ r), op.adjoint(r)
    return fun


def _lbfgsb(fun, x0, nonnegative, gtol, ftol):
    bounds = optimize.Bounds(0.0, np.inf) if nonnegative else None
    res = optimize.minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                            options={"maxiter": MAX_ITER, "maxcor": MEMORY, "ftol": ftol, "gtol": gtol})
    return res.x, res.jac, int(res.nit), float(res.fun), bool(res.success), str(res.message)


class _Pairs:
    """The last ``size`` curvature pairs ``(s, y)`` of L-BFGS in compact form (Byrd, Nocedal and Schnabel 1994).

    The pairs are rows of two ``(size + 1, d)`` arrays (one spare row takes the next pair,
    so a rejected pair overwrites nothing; inner products run over all rows, without
    copies), with their inner products ``s_i . y_j`` and ``y_i . y_j``; ``H q`` then takes
    a matrix-vector product per array and in-place BLAS updates, where the two-loop
    recursion takes ``4 size`` vector passes and as many temporaries.
    """

    def __init__(self, d: int, size: int):
        self.S, self.Y = np.zeros((size + 1, d)), np.zeros((size + 1, d))
        self.SY, self.YY = np.zeros((size + 1, size + 1)), np.zeros((size + 1, size + 1))
        self.order, self.size = [], size

    def __bool__(self) -> bool:
        return bool(self.order)

    def add(self, x_new, x, g_new, g) -> bool:
        """Keep the pair ``(x_new - x, g_new - g)`` if its curvature ``s . y`` is safely positive (written
        into a row no kept pair uses, then the oldest one's row is freed if all are in use)."""
        k = min(set(range(self.size + 1)) - set(self.order))
        s, y = np.subtract(x_new, x, out=self.S[k]), np.subtract(g_new, g, out=self.Y[k])
        sy, ss, yy = float(s @ y), float(s @ s), float(y @ y)
        if sy <= 1e-12 * np.sqrt(ss * yy):
            return False
        if len(self.order) == self.size:
            self.order.pop(0)
        self.SY[:, k] = self.S @ y
        self.SY[k, :] = self.Y @ s
        self.YY[:, k] = self.YY[k, :] = self.Y @ y
        self.order.append(k)
        return True

    def apply(self, q: np.ndarray) -> np.ndarray:
        """``H q``: ``gamma q + S top - gamma Y w`` with ``w = R^{-1} S^T q`` and
        ``top = R^{-T} ((D + gamma Y^T Y) w - gamma Y^T q)`` (``R`` the upper triangle of ``S^T Y``)."""
        o = self.order
        SY = self.SY[np.ix_(o, o)]
        gamma = SY[-1, -1] / self.YY[o[-1], o[-1]]
        R = np.triu(SY)
        w = linalg.solve_triangular(R, (self.S @ q)[o])
        inner = np.diag(np.diag(SY)) + gamma * self.YY[np.ix_(o, o)]
        top = linalg.solve_triangular(R, inner @ w - gamma * (self.Y @ q)[o], trans="T")
        out = np.multiply(q, gamma)
        for k, a, b in zip(o, top, -gamma * w):
            blas.daxpy(self.S[k], out, a=a)
            blas.daxpy(self.Y[k], out, a=b)
        return out


def _direction(op, x, g, pairs: _Pairs, nonnegative):
    """Descent direction on the free variables (zero on the active bound) and the projected gradient."""
    free = _free(x, g, nonnegative)
    pg = np.where(free, g, 0.0)
    if pairs:
        p = pairs.apply(pg)
        p *= -1.0
        np.copyto(p, 0.0, where=~free)
        if float(p @ pg) < 0:
            return p, pg
    Fg = op.forward(pg)
    step = float(pg @ pg) / max(float(Fg @ Fg), 1e-300)
    return -step * pg, pg


def _line_search(fun, x, f, g, p, clip):
    """Projected backtracking from the full step: ``(x_new, f_new, g_new)`` meeting Armijo's condition,
    or None when the step falls under ``1e-12`` first."""
    t, gx = 1.0, float(g @ x)
    while t >= 1e-12:
        x_new = np.multiply(p, t)
        x_new += x
        x_new = clip(x_new)
        f_new, g_new = fun(x_new)
        if f_new <= f + ARMIJO * (float(g @ x_new) - gx):
            return x_new, f_new, g_new
        t *= BACKTRACK
    return None


def _projected(op, fun, x0, nonnegative, gtol, ftol):
    clip = (lambda v: np.maximum(v, 0.0, out=v)) if nonnegative else (lambda v: v)
    x = clip(np.array(x0, dtype=float))
    f, g = fun(x)
    pairs = _Pairs(x.shape[0], MEMORY)
    message, nit = "maximum iterations reached", 0
    for nit in range(1, MAX_ITER + 1):
        p, pg = _direction(op, x, g, pairs, nonnegative)
        if np.abs(pg).max(initial=0.0) <= gtol:
            message = "projected gradient below gtol"
            break
        step = _line_search(fun, x, f, g, p, clip)
        if step is None and pairs:
            pairs.order.clear()  # a stale curvature model: restart from the scaled gradient
            continue
        if step is None:
            message = "line search failed along the scaled projected gradient"
            break
        x_new, f_new, g_new = step
        pairs.add(x_new, x, g_new, g)
        decrease = f - f_new
        x, f, g = x_new, f_new, g_new
        if decrease <= ftol * max(abs(f), 1.0):
            message = "relative decrease of the objective below ftol"
            break
    return x, g, nit, f, message != "maximum iterations reached", message


def fit(op, z: np.ndarray, x0: np.ndarray, *, nonnegative: bool = True, gtol: float, ftol: float = FTOL,
        solver: str = "auto") -> tuple[np.ndarray, dict]:
    """``(x, info)``: ``argmin 1/2 ||z - F x||^2`` (``x >= 0`` if ``nonnegative``) from ``x0``.

    ``info``: ``solver``, ``nit``, ``objective``, ``projected_gradient`` (the largest
    entry of the gradient on the free variables at ``x``, to compare with ``gtol``),
    ``seconds``, ``converged``, ``message``.
    """
    if solver not in SOLVERS:
        raise ValueError(f"`solver` must be one of {SOLVERS}, got {solver!r}")
    if solver == "auto":
        solver = "projected"
    fun = _objective(op, z)
    t0 = time.perf_counter()
    if solver == "lbfgsb":
        x, g, nit, f, ok, message = _lbfgsb(fun, x0, nonnegative, gtol, ftol)
    else:
        x, g, nit, f, ok, message = _projected(op, fun, x0, nonnegative, gtol, ftol)
    x = np.maximum(x, 0.0) if nonnegative else x
    return x, {"solver": solver, "nit": nit, "objective": f,
               "projected_gradient": _projected_gradient_norm(x, g, nonnegative),
               "seconds": time.perf_counter() - t0, "converged": ok, "message": message}
