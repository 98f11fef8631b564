"""SM-II's ≺R polish: the ≺R-minimal optimum (Theorem 5) by matrix-free barrier levels.

Solver layer (SM-II): imports numpy, ``model`` (``privacy``, ``problem``, ``status``,
``validation``), :mod:`ffu_cvx.solvers.smii.model` and :mod:`ffu_cvx.solvers.smii.newton` only.

When Problem 1 has many optima the soft max does not pick the ≺R-minimal one
(Theorem 5), because at the ``t`` a small gap needs the weights of the columns that
are not tight underflow. After a certified solve, :func:`refine_smii` runs
lexicographic levels as in :mod:`ffu_cvx.solvers.sdp.refine`, each a log-barrier path on the same
whitened Newton-CG step solver and Cholesky line search as the main loop
(:mod:`ffu_cvx.solvers.smii.newton`): minimise the largest free profile entry (its epigraph
barrier ``phi_t``) with the fixed columns capped at their level value times
``1 + 1e-7`` and every target kept; the barrier multipliers tend to the strictly
complementary ones, so those of the free columns say which are tight in every optimum.
:func:`polish` applies it to SM-II's certified ``Sigma`` and keeps the result only when
the certified gap still holds.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from ...model import validation
from ...model.privacy import privacy_cost, variances
from ...model.problem import FitnessProblem
from ...model.status import MAX_ITER, SolverError
from .model import factor, inner, variance_ratios
from .newton import line_search, newton_direction

__all__ = ["REFINE_AUTO_MAX_K", "REFINE_BUDGET", "REFINE_MIN_HVP", "refine_smii"]

#: ``refine="auto"`` polishes up to this basis size ``k``: there a level's Newton steps
#: may run CG to ``k (k + 1) / 2`` iterations (exact directions; the barrier Hessian is
#: too ill-conditioned for truncated ones) and the polish costs at most a few seconds.
REFINE_AUTO_MAX_K = 32
#: A level's barrier path ends when its duality-gap bound ``n / t`` falls below this.
LEVEL_GAP = 1e-9
#: A barrier sub-problem ends when the Newton decrement ``-<E, grad>`` is below this over ``t``.
LEVEL_DECREMENT = 1e-3
#: A level's barrier path starts at ``t = LEVEL_T0 (d + m)`` (duality-gap bound ``1 / LEVEL_T0``).
LEVEL_T0 = 10.0
#: CG stops when its residual is below this fraction of the gradient (inexact Newton).
LEVEL_CG_RTOL = 1e-4
#: Default cap on CG iterations per Newton step of a level (``k (k + 1) / 2`` below it).
LEVEL_MAXCG = 600
#: Newton steps per barrier sub-problem before moving on.
LEVEL_MAX_NEWTON = 30
#: A level whose value is within this relative distance of the previous one is merged into it.
LEVEL_MERGE = 1e-6
#: Default relative slack of the fixed columns' caps (``1 + SLACK`` times their level
#: value); :func:`polish` uses at most a tenth of ``tol``. ``slack`` must stay below ``MAX_SLACK``.
SLACK = 1e-7
MAX_SLACK = 1e-2
#: :func:`polish` may spend at most this many Hessian products per product of the main
#: solve (``refine_budget``): the main solve already certified the cost, so the polish,
#: which only picks among optima, should cost at most a bounded multiple of it (unbounded,
#: it can take hundreds of times the main solve's products).
REFINE_BUDGET = 20.0
#: The polish's budget is never below this many products, so that a main solve that
#: needed few products (small or easy problems) still leaves a few levels' worth of
#: exact Newton-CG steps (``k (k + 1) / 2 = 528`` products each at ``k = 32``).
REFINE_MIN_HVP = 20_000


def epigraph_max(x: np.ndarray, t: float):
    """``phi_t(x) = min_s s - (1/t) sum_i log(s - x_i)`` (the barrier-smoothed max of ``x`` (n,)).

    Returns ``(phi, lam, D)``: ``lam = dphi/dx`` (n,) (positive, summing to 1, the
    barrier multipliers) and ``D = lam^2 t`` (n,), the Hessian being
    ``diag(D) - D D^T / sum(D)``. The optimal ``s`` solves ``sum_i 1 / (s - x_i) = t``,
    found by Newton from the left, which increases monotonically to the root.
    """
    top = float(x.max())
    s = top + 1.0 / t
    for _ in range(200):
        r = 1.0 / (s - x)
        f = float(r.sum()) - t
        step = f / float((r * r).sum())
        s += step
        if step <= 1e-15 * max(1.0, abs(s - top)) + 4e-16 * abs(s):
            break
    r = 1.0 / (s - x)
    lam = r / r.sum()
    phi = s - float(np.log(s - x).sum()) / t
    return phi, lam, lam * lam * t


class LevelPoint:
    """One iterate of a refinement level: ``sigma`` (k, k), its Cholesky factor, ``Y``, ``g``, ``h``.

    The level objective is
    ``Phi = phi_t(g_F / scale) - (1/t) [sum_{i fixed} log(1 - g_i / cap_i) + sum_j log(1 - h_j)]``;
    ``pg`` (d,), ``ph`` (m,) are its partial derivatives in ``g`` and ``h``, ``Dg``, ``Dh``
    the diagonal of its second derivatives and ``lam`` the free columns' multipliers.
    """

    __slots__ = ("sigma", "R", "Y", "g", "h", "F", "pg", "ph", "Dg", "Dh", "lam", "free")

    @classmethod
    def at(cls, B, L, c, sigma, free, caps, scale, t):
        """The point at ``sigma``, or ``None`` outside the level's open feasible set."""
        fac = factor(sigma, B)
        if fac is None:
            return None
        R, Y, g = fac
        h = variance_ratios(L, sigma, c)
        fixed = ~free
        sg, sh = 1.0 - g[fixed] / caps[fixed], 1.0 - h
        if not (np.all(sg > 0) and np.all(sh > 0)):
            return None
        self = cls()
        self.sigma, self.R, self.Y, self.g, self.h, self.free = sigma, R, Y, g, h, free
        phi, self.lam, D = epigraph_max(g[free] / scale, t)
        self.F = phi - float(np.log(sg).sum() + np.log(sh).sum()) / t
        self.pg, self.Dg = np.empty_like(g), np.empty_like(g)
        self.pg[free], self.Dg[free] = self.lam / scale, D / scale ** 2
        self.pg[fixed] = 1.0 / (t * caps[fixed] * sg)
        self.Dg[fixed] = self.pg[fixed] ** 2 * t
        self.ph = 1.0 / (t * sh)
        self.Dh = self.ph ** 2 * t
        return self


class LevelWhitened:
    """Gradient and Hessian of a level's ``Phi`` in whitened coordinates ``E = R^{-1} D R^{-T}``.

    As in :class:`ffu_cvx.solvers.smii.model.Whitened`, with the soft-max weights replaced by ``pg``, ``ph`` and the
    soft-max Hessians by ``diag(Dg) - Df Df^T / sum(Df)`` (free columns ``F``, ``Df``
    their part of ``Dg``) and ``diag(Dh)``:

        H[E] = E M + M E - Y diag(Hg a) Y^T + V^T diag(Dh e / c) V,  M = Y diag(pg) Y^T.

    ``RQ = R`` maps a whitened direction back (``D = R E R^T``); nothing changes after
    construction.
    """

    def __init__(self, p: LevelPoint, L, c):
        self.p, self.c = p, c
        self.V = L @ p.R
        self.M = (p.Y * p.pg) @ p.Y.T
        self.grad = self.cg_grad = (self.V.T * (p.ph / c)) @ self.V - self.M
        self.Df = np.where(p.free, p.Dg, 0.0)
        self.RQ = p.R

    def hvp(self, E: np.ndarray) -> np.ndarray:
        """``H[E]`` (k, k), four matrix products."""
        p = self.p
        X = E @ p.Y
        a = -np.einsum("ij,ij->j", p.Y, X)
        Ha = p.Dg * a - self.Df * (self.Df @ a) / self.Df.sum()
        out = (X * p.pg - p.Y * (0.5 * Ha)) @ p.Y.T
        out += out.T
        e = variances(self.V, E) / self.c
        out += (self.V.T * (p.Dh * e / self.c)) @ self.V
        return out


def _solve_level(problem, sigma, free, caps, *, t0, mu, maxcg, sigma_ls, beta, radius, max_hvp):
    """Barrier path for one level from the strictly feasible ``sigma`` (k, k).

    Minimises the largest ``g_i`` over the free columns (boolean (d,)) subject to
    ``g_i < caps_i`` on the fixed ones and ``h_j < 1``. Returns
    ``(point, value, n_newton, n_hvp)`` at the end of the path, where ``value`` is the
    level's largest free profile entry. Raises a ``SolverError`` (status ``MAX_ITER``,
    ``info["n_hvp"]`` the products spent) once its Newton directions have used
    ``max_hvp`` Hessian products or more.
    """
    B, L, c = problem.B, problem.L, problem.c
    n_con = problem.d + problem.m
    p = LevelPoint.at(B, L, c, sigma, free, caps, 1.0, t0)
    if p is None:
        raise SolverError("refinement level: the starting Sigma is not strictly feasible; pass SM-II's "
                          "rescaled optimum (every variance ratio at most 1)")
    scale, t = float(p.g[free].max()), t0
    p = LevelPoint.at(B, L, c, sigma, free, caps, scale, t)
    nit = n_hvp = 0
    while True:
        for _ in range(LEVEL_MAX_NEWTON):
            op = LevelWhitened(p, L, c)
            _, D, delta, n_cg = newton_direction(op, maxcg, LEVEL_CG_RTOL ** 2 * inner(op.grad, op.grad), radius)
            n_hvp += n_cg
            if n_hvp >= max_hvp:
                raise SolverError(f"Hessian-product budget spent ({n_hvp} products in this level)", status=MAX_ITER,
                                  nit=nit, n_hvp=n_hvp)
            # Newton decrement: well inside the barrier's own n/t error (or not a descent direction).
            if not delta < 0 or -delta < LEVEL_DECREMENT / t:
                break

            def at(step):  # the trial point, evaluated at once by the line search
                return LevelPoint.at(B, L, c, p.sigma + step * D, free, caps, scale, t)

            _, q = line_search(at, p.F, delta, sigma_ls, beta)
            if q is None:
                break
            p = q
            nit += 1
        if n_con / t <= LEVEL_GAP:
            return p, float(p.g[free].max()), nit, n_hvp
        t *= mu
        p = LevelPoint.at(B, L, c, p.sigma, free, caps, scale, t)


def refine_smii(problem: FitnessProblem, sigma: np.ndarray, *, slack: float = SLACK, threshold: float = 1e-3,
                mu: float = 10.0, maxcg: int | None = None, sigma_ls: float = 0.01, beta: float = 0.5,
                radius: float = 1.0, max_hvp: float = math.inf):
    """Lexicographic levels from an optimal ``sigma`` (k, k) to the ≺R-minimal optimum (Theorem 5).

    Each level minimises the largest profile entry over the free columns with the
    fixed ones capped at ``(1 + slack)`` times their level value and every target
    kept, by a log-barrier path (the free columns' max smoothed by its epigraph barrier)
    solved with SM-II's whitened Newton-CG and Cholesky line search. The barrier
    multipliers ``lam`` of the free columns converge to the strictly complementary ones,
    so the columns with ``lam >= threshold * max lam`` are tight in every optimum of the
    level and are fixed; a level whose value is within ``1e-6`` of the previous one is
    merged into it (``LEVEL_MERGE``). At most ``d`` levels.

    ``sigma`` must be positive definite with every variance ratio at most 1 (SM-II's
    rescaled optimum); ``maxcg`` defaults to ``min(k (k + 1) / 2, 600)``. ``max_hvp``
    bounds the Hessian products of all levels together (the last Newton direction may
    overshoot it by at most ``maxcg``).

    Returns ``(sigma, levels, n_newton, n_hvp)``: ``sigma`` strictly meets every target
    (``max h < 1``), ``levels`` a list of ``{"value", "columns"}`` in decreasing value.

    Raises
    ------
    ValueError
        On a malformed ``problem``, ``sigma``, ``slack`` or ``threshold``.
    SolverError
        When ``sigma`` is not strictly feasible after the ``1 + slack`` shrink, a
        level's multipliers are not finite, or (status ``MAX_ITER``, ``info["n_hvp"]``
        the products spent) ``max_hvp`` products did not finish the levels.
    """
    if not isinstance(problem, FitnessProblem):
        raise ValueError(f"`problem` must be a FitnessProblem, got {type(problem).__name__}")
    k, d = problem.k, problem.d
    sigma = np.asarray(sigma, dtype=float)
    if sigma.shape != (k, k) or not np.all(np.isfinite(sigma)):
        raise ValueError(f"`sigma` must be a finite ({k}, {k}) matrix on the basis coordinates, "
                         f"got shape {sigma.shape}")
    if not validation.positive(slack, "slack") < MAX_SLACK:
        raise ValueError(f"`slack` must lie in (0, {MAX_SLACK:g}), got {slack!r}")
    validation.fraction(threshold, "threshold")
    max_hvp = validation.positive(max_hvp, "max_hvp", allow_inf=True)
    if maxcg is None:
        maxcg = min(k * (k + 1) // 2, LEVEL_MAXCG)
    zero = ~np.any(problem.B != 0, axis=0)  # g_i = 0 for every Sigma: a last level of value 0
    free = ~zero
    caps = np.full(d, np.inf)
    sigma = sigma / (1.0 + slack)  # strictly inside h < 1
    levels, n_newton, n_hvp = [], 0, 0
    while free.any():
        try:
            p, value, nn, nh = _solve_level(problem, sigma, free, caps, t0=LEVEL_T0 * (d + problem.m), mu=mu,
                                            maxcg=maxcg, sigma_ls=sigma_ls, beta=beta, radius=radius,
                                            max_hvp=max_hvp - n_hvp)
        except SolverError as err:
            if err.status != MAX_ITER:
                raise
            spent = n_hvp + err.info["n_hvp"]
            done = f"{len(levels)} level{'' if len(levels) == 1 else 's'}"
            raise SolverError(f"the polish's budget of {max_hvp:.0f} Hessian products was spent ({spent}) after {done}",
                              status=MAX_ITER, nit=n_newton + (err.nit or 0), n_hvp=spent) from None
        n_newton, n_hvp = n_newton + nn, n_hvp + nh
        if not np.all(np.isfinite(p.lam)):
            raise SolverError(f"refinement level {len(levels) + 1}: non-finite barrier multipliers; "
                              "return the unrefined optimum (refine=False)", nit=n_newton)
        lam = np.zeros(d)
        lam[free] = p.lam
        new = free & (lam >= threshold * lam.max())
        cols = np.flatnonzero(new)
        if levels and value >= levels[-1]["value"] * (1.0 - LEVEL_MERGE):
            levels[-1]["columns"] = sorted(levels[-1]["columns"] + cols.tolist())
        else:
            levels.append({"value": value, "columns": cols.tolist()})
        caps[cols] = max(levels[-1]["value"], float(p.g[cols].max())) * (1.0 + slack)
        free &= ~new
        sigma = p.sigma
    if zero.any():
        levels.append({"value": 0.0, "columns": np.flatnonzero(zero).tolist()})
    return sigma, levels, n_newton, n_hvp


def polish(problem: FitnessProblem, sigma: np.ndarray, lower_bound: float, tol: float,
           log, main_hvp: int = 0, budget: float = REFINE_BUDGET) -> tuple[np.ndarray, dict, int]:
    """Run :func:`refine_smii` on SM-II's certified ``sigma`` (k, k) (max ratio 1).

    Returns ``(sigma, info, n_hvp)``. The polished ``Sigma`` is rescaled to meet every
    target exactly; it is kept only if its privacy cost is at most
    ``lower_bound (1 + tol)`` or that of ``sigma``, so the requested gap still holds
    (the levels' relative ``slack`` is ``min(SLACK, tol / 10)``); otherwise (or if a
    level fails) ``info["refine_failed"]`` says why, a ``RuntimeWarning`` is issued and
    ``sigma`` is returned unchanged. The levels may spend
    ``max(budget * main_hvp, REFINE_MIN_HVP)`` Hessian products (``main_hvp``: those
    of the main solve); past it the polish stops the same way, with
    ``info["refine_failed"]`` naming the budget. ``n_hvp`` counts the products spent
    either way. ``log``: the run's :class:`ffu_cvx.solvers.smii.log.IterationLog`.
    """
    t0 = time.perf_counter()
    cost, allowed = privacy_cost(sigma, problem.B), lower_bound * (1.0 + tol)
    max_hvp = max(validation.positive(budget, "refine_budget") * main_hvp, REFINE_MIN_HVP)
    try:
        refined, levels, n_newton, n_hvp = refine_smii(problem, sigma, slack=min(SLACK, 0.1 * tol), max_hvp=max_hvp)
    except SolverError as err:
        refined, levels, n_newton, n_hvp = None, [], err.nit or 0, err.info.get("n_hvp", 0)
        failed = str(err)
    else:
        refined = refined / float(variance_ratios(problem.L, refined, problem.c).max())
        new_cost = privacy_cost(refined, problem.B)
        failed = None if new_cost <= max(cost, allowed) else \
            f"refined Sigma costs {new_cost:.10g} > {max(cost, allowed):.10g} allowed by the certified gap"
    info = {"refine_levels": levels, "refine_newton": n_newton, "refine_time": time.perf_counter() - t0}
    if failed is None:
        sigma = refined
    else:
        info["refine_failed"] = failed
        # stacklevel: polish <- Run.finish <- Run.run <- solve_smii <- its caller
        warnings.warn(f"SM-II refinement: {failed}; returning the unrefined optimum (certified, every target met; "
                      "method='sdp' refines exactly, one SDP per level; refine=False skips the polish)",
                      RuntimeWarning, stacklevel=5)
    log.note(f"refinement: {len(levels)} levels, {n_newton} Newton steps, {n_hvp} Hessian products, "
             f"{info['refine_time']:.2f} s" + (f"; {info['refine_failed']}" if "refine_failed" in info else ""))
    return sigma, info, n_hvp
