"""Classic mechanisms as Solutions on a problem's own basis: GM, HM and CA.

Each baseline is a *strategy* ``A`` (p, d): it releases ``A x + z`` with unit noise
``z ~ N(0, I_p)`` and answers the workload by least squares, ``W A^+ (A x + z)``.
Notation (fitness-for-use paper, Definition 1): ``W = L B`` with ``B`` (k, d) of full
row rank, ``Sigma`` (k, k) the covariance of the noise on ``B x``.

The estimate is unbiased when the rows of ``B`` lie in the row space of ``A``; then
``B A^+ A = B`` and the noise on ``B x`` has covariance

    Sigma = B A^+ A^{+T} B^T = B (A^T A)^+ B^T,

so ``L Sigma L^T = W (A^T A)^+ W^T`` is exactly the strategy's workload covariance.
The privacy cost of the strategy with unit noise is its largest squared column norm
``max_i ||a_i||^2``. The Solution recomputes the profile ``b_i^T Sigma^{-1} b_i`` from
``Sigma``; the two agree when ``A`` has full column rank, and the profile is smaller
(the released ``B x + N(0, Sigma)`` is a post-processing of ``A x + z``) when ``A``
carries information outside the row space of ``W``: the Solution reports the tight one.

- **GM** (Gaussian mechanism): ``A = W``; then ``Sigma = (L^T L)^{-1}``.
- **HM** (hierarchical mechanism, Hay et al. 2010; Qardaji, Yang and Li 2013): a
  ``b``-ary tree of interval counts over the flattened domain, every level included.
- **CA** (Yuan, Yang, Zhang and Hao, KDD 2016): the strategy minimising the total
  variance ``tr(W X^{-1} W^T)`` subject to ``diag(X) <= 1``, ``X = A^T A``. On the basis
  ``B`` the same problem reads (``X`` is now the (k, k) precision of the noise on ``B x``)

      minimise tr(Q X^{-1})  subject to  b_i^T X b_i <= 1,   Q = L^T L,

  which is the matrix-mechanism problem restricted to the row space of ``W`` (any
  strategy gives a feasible ``X = Sigma^{-1}`` of no larger cost, and any feasible ``X``
  is the strategy ``X^{1/2} B``). Its Lagrange dual, with ``R^T R = Q`` and ``a_i = R b_i``,
  is ``max_{nu in simplex} N(nu)^2`` with ``N(nu) = tr((A diag(nu) A^T)^{1/2})``.

Solver layer: imports numpy, scipy, ``model`` (``problem``, ``result``, ``status``,
``validation``, ``privacy``) and ``sdp.cvx`` (CA's exact conic program).
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy import linalg

from ..model import privacy, validation
from ..model.problem import FitnessProblem
from ..model.result import Solution
from ..model.status import BASELINE, MAX_ITER, SOLVER_ERROR, USER_STOPPED, IntermediateResult, SolverError
from .sdp import cvx

__all__ = [
    "strategy_solution", "strategy_cost", "gm", "hm", "ca", "hierarchical_branching",
    "hierarchical_strategy", "ca_dual_value",
]


def strategy_cost(A: np.ndarray) -> float:
    """Privacy cost of strategy ``A`` (p, d) with unit noise: ``max_i ||a_i||^2``."""
    A = np.asarray(A, dtype=float)
    return float(np.max(np.einsum("ij,ij->j", A, A)))


def _sigma_from_strategy(B: np.ndarray, A: np.ndarray) -> np.ndarray:
    """``B (A^T A)^+ B^T`` (k, k) for ``B`` (k, d) in the row space of ``A`` (p, d)."""
    G = A.T @ A
    try:
        R = linalg.cholesky(G, lower=True, check_finite=False)
        Y = linalg.solve_triangular(R, B.T, lower=True, check_finite=False)
    except linalg.LinAlgError:
        # A is column-rank deficient: (A^T A)^+ = V diag(1/w) V^T on its row space.
        w, V = linalg.eigh(G, check_finite=False)
        keep = w > w.max() * G.shape[0] * np.finfo(float).eps
        Vr = V[:, keep]
        outside = np.linalg.norm(B - (B @ Vr) @ Vr.T) / np.linalg.norm(B)
        if outside > 1e-8:
            raise ValueError(
                f"strategy `A` cannot answer the workload: the basis has a component "
                f"{outside:.1e} (relative) outside the row space of A; add rows to A that span W"
            ) from None
        Y = (Vr.T @ B.T) / np.sqrt(w[keep])[:, None]
    S = Y.T @ Y
    return 0.5 * (S + S.T)


def strategy_solution(problem: FitnessProblem, A, *, method: str = "strategy", certify: bool = False,
                      **info) -> Solution:
    """The Solution of strategy ``A`` (p, d) with unit noise, on ``problem``'s basis.

    ``Sigma = B (A^T A)^+ B^T`` (k, k); ``info`` is stored in ``solution.info`` together
    with the strategy's own cost ``strategy_cost`` (max squared column norm).
    ``certify=True`` attaches Problem 1's dual lower bound (costs O(d^3) per ascent step).
    Raises ``ValueError`` when ``A`` does not span the workload's row space.
    """
    A = validation.finite_array(A, "A", ndim=2)
    if A.shape[1] != problem.d:
        raise ValueError(f"strategy `A` must have shape (p, {problem.d}), got {A.shape}")
    t0 = time.perf_counter()
    sigma = _sigma_from_strategy(problem.B, A)
    return Solution.from_sigma(problem, sigma, method=method, status=BASELINE, certify=certify,
                               time=time.perf_counter() - t0, strategy_cost=strategy_cost(A),
                               strategy_rows=A.shape[0], **info)


def gm(problem: FitnessProblem, *, certify: bool = False) -> Solution:
    """Gaussian mechanism: independent noise on each workload answer (strategy ``A = W``).

    With least-squares answers ``Sigma = B (W^T W)^+ B^T = (L^T L)^{-1}`` (k, k): ``L`` has
    full column rank ``k``, so this is computed from a QR factor of ``L``.
    """
    t0 = time.perf_counter()
    R = linalg.qr(problem.L, mode="r", check_finite=False)[0][: problem.k]
    Rinv_t = linalg.solve_triangular(R, np.eye(problem.k), trans="T", check_finite=False)
    sigma = Rinv_t.T @ Rinv_t  # R^{-1} R^{-T} = (R^T R)^{-1} = (L^T L)^{-1}
    return Solution.from_sigma(problem, 0.5 * (sigma + sigma.T), method="gm", status=BASELINE, certify=certify,
                               time=time.perf_counter() - t0, strategy_cost=strategy_cost(problem.W))


def hierarchical_branching(n: int) -> int:
    """Branching factor of Qardaji, Yang and Li (2013) for a domain of ``n`` cells.

    With ``h = ceil(log_b n)`` (the smallest ``h`` with ``b**h >= n``, in integers),
    returns the ``b`` in ``[2, n]`` minimising ``(b - 1) h^3 - 2 (b + 1) h^2 / 3``
    (ties go to the smallest ``b``): 16 for n = 232, 252, 256 and 32 for n = 1024.
    """
    n = validation.positive_int(n, "n", minimum=2)
    best, best_b = math.inf, 2
    for b in range(2, int(n) + 1):
        h, reach = 0, 1
        while reach < n:
            reach *= b
            h += 1
        # 3 * ((b - 1) h^3 - 2 (b + 1) h^2 / 3), kept in integers so ties are exact.
        score = 3 * (b - 1) * h**3 - 2 * (b + 1) * h**2
        if score < best:
            best, best_b = score, b
    return best_b


def hierarchical_strategy(n: int, branching: int) -> np.ndarray:
    """The tree strategy (p, n): every node of a ``branching``-ary tree of intervals.

    Level 0 holds the ``n`` cells; each next level groups ``branching`` consecutive nodes
    of the level below (the last group may be smaller) until one root is left. Every
    cell is in exactly one node per level, so the unit-noise privacy cost is the number
    of levels ``ceil(log_b n) + 1``.
    """
    branching = validation.positive_int(branching, "branching", minimum=2)
    n = validation.positive_int(n, "n")
    level = np.eye(n)
    rows = [level]
    while level.shape[0] > 1:
        groups = range(0, level.shape[0], branching)
        level = np.vstack([level[g:g + branching].sum(axis=0) for g in groups])
        rows.append(level)
    return np.vstack(rows[::-1])


def hm(problem: FitnessProblem, *, branching: int | None = None, certify: bool = False) -> Solution:
    """Hierarchical mechanism on the flattened domain, answers by least squares.

    ``branching`` defaults to :func:`hierarchical_branching` of ``d``; it is returned in
    ``solution.info["branching"]`` with the tree's number of levels.
    """
    if problem.d == 1:  # a single cell: the tree is its leaf
        return strategy_solution(problem, np.ones((1, 1)), method="hm", certify=certify, branching=1, levels=1)
    b = hierarchical_branching(problem.d) if branching is None else branching
    T = hierarchical_strategy(problem.d, b)
    return strategy_solution(problem, T, method="hm", certify=certify, branching=int(b),
                             levels=int(round(strategy_cost(T))))


# --------------------------------------------------------------------------- CA

def _ca_factor(problem: FitnessProblem) -> tuple[np.ndarray, np.ndarray]:
    """``(R, A)``: ``R`` (k, k) upper with ``R^T R = L^T L`` and ``A = R B`` (k, d)."""
    R = linalg.qr(problem.L, mode="r", check_finite=False)[0][: problem.k]
    return R, R @ problem.B


def _ca_eval(A: np.ndarray, nu: np.ndarray):
    """At dual point ``nu`` (d,): ``N(nu)``, ``s_i = a_i^T M^{-1/2} a_i`` and ``(w, V)`` of ``M``."""
    M = (A * nu) @ A.T
    w, V = linalg.eigh(0.5 * (M + M.T), check_finite=False)
    if w[0] <= w[-1] * 1e-14:
        raise SolverError("ca: the dual matrix A diag(nu) A^T became singular", status=SOLVER_ERROR)
    Y = (V.T @ A) * (w ** -0.25)[:, None]
    return float(np.sum(np.sqrt(w))), np.einsum("ij,ij->j", Y, Y), w, V


def ca_dual_value(problem: FitnessProblem, nu) -> float:
    """Lower bound ``N(nu)^2`` on CA's optimal total variance, for weights ``nu`` (d,) >= 0.

    ``N(nu) = ||W diag(sqrt(nu / sum nu))||_*`` (nuclear norm), the Lagrange dual of
    ``min tr(Q X^{-1}) s.t. b_i^T X b_i <= 1`` at multipliers proportional to ``nu``.
    """
    nu = validation.finite_array(nu, "nu", shape=(problem.d,))
    if np.any(nu < 0) or nu.sum() <= 0:
        raise ValueError(f"`nu` must be a non-negative ({problem.d},) vector, not all zero")
    sv = linalg.svdvals(problem.W * np.sqrt(nu / nu.sum()), check_finite=False)
    return float(np.sum(sv)) ** 2


def _ca_sigma(R: np.ndarray, w: np.ndarray, V: np.ndarray, scale: float) -> np.ndarray:
    """``Sigma = scale * R^{-1} M^{1/2} R^{-T}`` from the eigenpairs ``(w, V)`` of ``M``."""
    Z = linalg.solve_triangular(R, V * w ** 0.25, check_finite=False)
    S = scale * (Z @ Z.T)
    return 0.5 * (S + S.T)


def _ca_intermediate(problem: FitnessProblem, sigma: np.ndarray, *, nit: int, gap: float, total_variance: float,
                     lower_bound: float) -> IntermediateResult:
    """What CA passes to ``callback``: its best point ``sigma`` (privacy cost 1) seen as Problem 1's iterate.

    ``sigma`` and ``privacy_cost`` are that point rescaled to meet every target;
    ``lower_bound`` and ``gap`` certify CA's own objective, the total variance
    (``total_variance``, ``total_variance_lower_bound``), not the privacy cost.
    """
    ratio = float(np.max(privacy.variances(problem.L, sigma) / problem.c))
    return IntermediateResult(method="ca", nit=nit, privacy_cost=ratio, lower_bound=lower_bound, gap=gap,
                              sigma=sigma / ratio, total_variance=total_variance,
                              total_variance_lower_bound=lower_bound)


def _ca_dual_ascent(problem, tol, max_iter, callback):
    """Multiplicative ascent on the dual weights; returns Sigma, its certificate and whether the callback stopped it.

    Every ``nu`` gives a feasible primal point (``Sigma(nu)`` rescaled so that its
    largest profile entry is 1, total variance ``max(s) N``) and a dual bound ``N^2``;
    the gap ``max(s) / N - 1`` certifies the best pair. The update
    ``nu_i <- nu_i s_i^2 / sum_j nu_j s_j^2`` is the classic multiplicative algorithm for
    optimal designs: its fixed points are exactly the KKT points (``s_i`` equal on the
    support of ``nu`` and no larger elsewhere).
    """
    R, A = _ca_factor(problem)
    nu = np.full(problem.d, 1.0 / problem.d)
    best_primal, best_dual, best = math.inf, -math.inf, None
    history = []
    for it in range(1, max_iter + 1):
        N, s, w, V = _ca_eval(A, nu)
        smax = float(s.max())
        if smax * N < best_primal:
            best_primal, best = smax * N, (w, V, smax)
        best_dual = max(best_dual, N * N)
        gap = best_primal / best_dual - 1.0
        history.append(gap)
        if callback is not None:
            try:
                callback(_ca_intermediate(problem, _ca_sigma(R, *best), nit=it, gap=gap, total_variance=best_primal,
                                          lower_bound=best_dual))
            except StopIteration:
                return _ca_sigma(R, *best), best_primal, best_dual, it, history, True
        if gap <= tol:
            break
        nu = nu * (s / smax) ** 2
        nu /= nu.sum()
    else:
        raise SolverError(f"ca: dual ascent did not reach gap {tol:g} in {max_iter} iterations "
                          f"(gap {gap:.2e}); raise `max_iter` or `tol`", status=MAX_ITER,
                          nit=max_iter, residual=gap)
    return _ca_sigma(R, *best), best_primal, best_dual, it, history, False


def _ca_cvxpy(problem, tol):
    """CA by the exact conic program (:func:`ffu_cvx.solvers.sdp.cvx.ca_program`)."""
    R, _ = _ca_factor(problem)
    B = problem.B
    Xv, nu, nit = cvx.ca_program(R, B, tol)
    # Scale onto the constraint set: Clarabel's feasibility is to tolerance only.
    Xv = Xv / float(np.max(np.einsum("ij,ij->j", B, Xv @ B)))
    try:
        C = linalg.cho_factor(Xv, lower=True, check_finite=False)
    except linalg.LinAlgError:
        raise SolverError("ca: CVXPY returned a singular precision matrix; try solver='dual'") from None
    sigma = linalg.cho_solve(C, np.eye(problem.k), check_finite=False)
    dual = ca_dual_value(problem, nu) if nu.sum() > 0 else math.nan
    return 0.5 * (sigma + sigma.T), float(np.sum((R.T @ R) * sigma)), dual, nit


def ca(problem: FitnessProblem, *, solver: str = "auto", tol: float = 1e-9, max_iter: int = 20_000,
       callback=None, certify: bool = False) -> Solution:
    """Optimal matrix mechanism for total squared error (CA), on ``problem``'s basis.

    Parameters
    ----------
    solver : {"auto", "dual", "cvxpy"}
        ``"dual"``: certified multiplicative ascent on the Lagrange dual (O(k^3 + d k^2)
        per iteration, scales to d = 1024); ``"cvxpy"``: the exact conic program with
        Clarabel (small ``k`` only); ``"auto"`` is ``"dual"``.
    tol : float
        Relative duality gap of the total variance at which ``"dual"`` stops, in (0, 1).
    max_iter : int
        Iteration limit of ``"dual"``; reaching it raises ``SolverError`` (status ``"max_iter"``).
    callback : callable, optional
        ``callback(intermediate_result)`` after each dual iteration (``"dual"`` only: the
        conic program has no iterations of ours), with an
        :class:`ffu_cvx.model.status.IntermediateResult`: ``method="ca"``, ``nit``, ``gap`` and
        ``lower_bound`` of the total variance (also ``total_variance_lower_bound``),
        ``total_variance`` of the best point so far, and that point as Problem 1's
        iterate (``sigma`` rescaled to meet every target, its ``privacy_cost``).
        Raising ``StopIteration`` returns that best point with status ``"user_stopped"``.

    Returns
    -------
    Solution
        ``sigma`` (k, k) at privacy cost 1 (every profile entry <= 1), status
        ``"baseline"`` (``"user_stopped"`` after a callback's ``StopIteration``), ``info``
        with the total variance ``total_variance``, the dual bound
        ``total_variance_lower_bound`` and ``solver``.
    """
    name = validation.choice(str(solver).lower(), "solver", ("auto", "dual", "cvxpy"))
    tol = validation.fraction(tol, "tol")
    max_iter = validation.positive_int(max_iter, "max_iter")
    t0 = time.perf_counter()
    history, status, message = None, BASELINE, ""
    if name == "cvxpy":
        sigma, primal, dual, nit = _ca_cvxpy(problem, tol)
    else:
        name = "dual"
        sigma, primal, dual, nit, history, stopped = _ca_dual_ascent(problem, tol, max_iter, callback)
        if stopped:
            status, message = USER_STOPPED, f"stopped by the callback at iteration {nit} (gap {history[-1]:.2e})"
    return Solution.from_sigma(problem, sigma, method="ca", status=status, message=message, certify=certify, nit=nit,
                               time=time.perf_counter() - t0, history=history, solver=name,
                               total_variance=primal, total_variance_lower_bound=dual)
