"""Bound-constrained least squares ``min_{x >= 0} 1/2 ||z - F x||^2`` on an implicit operator.

Core layer: imports numpy and scipy.optimize. ``F`` is any object with ``forward(x)``,
``adjoint(r)`` and ``d`` (:mod:`ffu_cvx.gls`). Two solvers of the same problem:

- ``"lbfgsb"``: scipy's L-BFGS-B (generalised Cauchy point, subspace minimisation); robust,
  but its work per iteration grows faster than ``d`` (about 3 s an iteration at 10^7
  variables, and 17 ``d`` floats of workspace at memory 6);
- ``"projected"``: a projected L-BFGS (two-metric projection): the quasi-Newton direction
  of the two-loop recursion on the free variables (those off the bound or pushed away from
  it), a projected backtracking (Armijo) line search, and the curvature pairs of the
  projected steps; ``O(m d)`` per iteration, for large domains.

``"auto"`` takes L-BFGS-B up to :data:`LBFGSB_MAX` variables. Both stop at a projected
gradient under ``gtol`` or a relative decrease of the objective under ``ftol``.
"""

from __future__ import annotations

import time
from collections import deque

import numpy as np
from scipy import optimize

__all__ = ["fit", "SOLVERS", "LBFGSB_MAX", "MEMORY", "MAX_ITER", "FTOL"]

#: Solvers :func:`fit` accepts.
SOLVERS = ("auto", "lbfgsb", "projected")
#: Largest problem ``"auto"`` gives to scipy's L-BFGS-B.
LBFGSB_MAX = 1 << 20
#: Curvature pairs kept by either solver.
MEMORY = 6
#: Most iterations.
MAX_ITER = 20_000
#: Relative decrease of the objective per iteration under which a fit stops.
FTOL = 1e-13
#: Armijo constant and backtracking factor of the projected line search.
ARMIJO, BACKTRACK = 1e-4, 0.5


def _objective(op, z):
    def fun(x):
        r = op.forward(x) - z
        return 0.5 * float(r @ r), op.adjoint(r)
    return fun


def _lbfgsb(fun, x0, nonnegative, gtol, ftol):
    bounds = optimize.Bounds(0.0, np.inf) if nonnegative else None
    res = optimize.minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                            options={"maxiter": MAX_ITER, "maxcor": MEMORY, "ftol": ftol, "gtol": gtol})
    return res.x, int(res.nit), float(res.fun), bool(res.success), str(res.message)


def _two_loop(q: np.ndarray, pairs) -> np.ndarray:
    """``H q`` of the L-BFGS inverse-Hessian approximation of ``pairs`` ``(s, y, 1 / s.y)``."""
    q = q.copy()
    alphas = []
    for s, y, rho in reversed(pairs):
        a = rho * float(s @ q)
        q -= a * y
        alphas.append(a)
    s, y, _ = pairs[-1]
    q *= float(s @ y) / float(y @ y)
    for (s, y, rho), a in zip(pairs, reversed(alphas)):
        q += (a - rho * float(y @ q)) * s
    return q


def _direction(op, x, g, pairs, nonnegative):
    """Descent direction on the free variables (zero on the active bound) and the projected gradient."""
    free = (x > 0) | (g < 0) if nonnegative else np.ones(x.shape, dtype=bool)
    pg = np.where(free, g, 0.0)
    if pairs:
        p = -_two_loop(pg, pairs)
        p[~free] = 0.0
        if float(p @ pg) < 0:
            return p, pg
    Fg = op.forward(pg)
    step = float(pg @ pg) / max(float(Fg @ Fg), 1e-300)
    return -step * pg, pg


def _projected(op, fun, x0, nonnegative, gtol, ftol):
    clip = (lambda v: np.maximum(v, 0.0)) if nonnegative else (lambda v: v)
    x = clip(x0)
    f, g = fun(x)
    pairs = deque(maxlen=MEMORY)
    message, nit = "maximum iterations reached", 0
    for nit in range(1, MAX_ITER + 1):
        p, pg = _direction(op, x, g, pairs, nonnegative)
        if np.abs(pg).max(initial=0.0) <= gtol:
            message = "projected gradient below gtol"
            break
        t = 1.0
        while True:
            x_new = clip(x + t * p)
            f_new, g_new = fun(x_new)
            if f_new <= f + ARMIJO * float(g @ (x_new - x)) or t < 1e-12:
                break
            t *= BACKTRACK
        s, y = x_new - x, g_new - g
        sy = float(s @ y)
        if sy > 1e-12 * np.sqrt(float(s @ s) * float(y @ y)):
            pairs.append((s, y, 1.0 / sy))
        decrease = f - f_new
        x, f, g = x_new, f_new, g_new
        if decrease <= ftol * max(abs(f), 1.0):
            message = "relative decrease of the objective below ftol"
            break
    return x, nit, f, message != "maximum iterations reached", message


def fit(op, z: np.ndarray, x0: np.ndarray, *, nonnegative: bool = True, gtol: float, ftol: float = FTOL,
        solver: str = "auto") -> tuple[np.ndarray, dict]:
    """``(x, info)``: ``argmin 1/2 ||z - F x||^2`` (``x >= 0`` if ``nonnegative``) from ``x0``.

    ``info``: ``solver``, ``nit``, ``objective``, ``seconds``, ``converged``, ``message``.
    """
    if solver not in SOLVERS:
        raise ValueError(f"`solver` must be one of {SOLVERS}, got {solver!r}")
    if solver == "auto":
        solver = "lbfgsb" if op.d <= LBFGSB_MAX else "projected"
    fun = _objective(op, z)
    t0 = time.perf_counter()
    if solver == "lbfgsb":
        x, nit, f, ok, message = _lbfgsb(fun, x0, nonnegative, gtol, ftol)
    else:
        x, nit, f, ok, message = _projected(op, fun, x0, nonnegative, gtol, ftol)
    x = np.maximum(x, 0.0) if nonnegative else x
    return x, {"solver": solver, "nit": nit, "objective": f, "seconds": time.perf_counter() - t0, "converged": ok,
               "message": message}
