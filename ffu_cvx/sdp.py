"""Exact reference solver for Problem 1: a semidefinite program in CVXPY.

Notation (fitness-for-use paper, Problem 1): ``B`` (k, d) basis with columns ``b_i``,
``L`` (m, k) representation (``W = L B``), ``c`` (m,) variance targets, ``Sigma``
(k, k) noise covariance, ``alpha`` the privacy cost. Problem 1 is

    minimise alpha  s.t.  b_i^T Sigma^{-1} b_i <= alpha (i < d),  diag(L Sigma L^T) <= c.

Every formulation below is exact (a Schur-complement reformulation, no relaxation);
they differ in the order of the one linear matrix inequality (LMI), which is what an
interior-point solver pays for (Clarabel factors a dense block of size ``n(n+1)/2``
for an LMI of order ``n``):

``"pair"`` (default)
    ``X = Sigma^{-1}`` relaxed to ``[[Sigma, I], [I, X]] >= 0`` (``X >= Sigma^{-1}``);
    privacy ``diag(B^T X B) <= alpha`` and variances ``diag(L Sigma L^T) <= c`` are
    then linear. LMI order ``2k``, whatever ``m`` and ``d``.
``"schur"``
    The textbook model ``[[Sigma, B], [B^T, D]] >= 0``, ``diag(D) <= alpha``: order ``k + d``.
``"inverse"``
    ``X = Sigma^{-1}`` as the variable: privacy is linear, the variances are
    ``[[X, L^T], [L, Y]] >= 0``, ``diag(Y) <= c``: order ``k + m``.
``"dual"``
    The Lagrange dual ``max tr(Z)`` s.t. ``[[B diag(lam) B^T, Z], [Z^T, L^T diag(mu) L]] >= 0``,
    ``sum(lam) = 1``, ``mu . c = 1``; ``alpha* = tr(Z)^2`` and ``Sigma`` is read off the
    LMI's multiplier. Order ``2k``. Not used for the refinement levels (they use "pair").

The multipliers ``lam`` (d,) of the privacy constraints and ``mu`` (m,) of the variance
constraints are returned with the solution, so its certificate
(:mod:`ffu_cvx.certificate`) is tight. Every result is post-checked: ``Sigma`` is
rescaled so that its largest variance ratio is exactly 1 and the privacy cost is
recomputed from ``Sigma`` via Cholesky (:meth:`ffu_cvx.result.Solution.from_sigma`).

Only this module imports CVXPY, and only inside functions.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import linalg

from . import certificate
from .problem import FitnessProblem
from .result import OPTIMAL, OPTIMAL_INACCURATE, USER_STOPPED, Solution, SolverError

__all__ = ["FORMULATIONS", "SOLVERS", "STATUS_MAP", "LevelResult", "lmi_order", "pick_solver", "solve_level", "solve_sdp"]

FORMULATIONS = ("pair", "schur", "inverse", "dual")
SOLVERS = ("auto", "CLARABEL", "SCS")

#: CVXPY status -> our status. Any other status (infeasible, unbounded, user limit,
#: solver error, ...) is a failure and raises ``SolverError``.
STATUS_MAP = {"optimal": OPTIMAL, "optimal_inaccurate": OPTIMAL_INACCURATE}

#: An inaccurate solve whose certified relative gap exceeds this is a failure.
FAIL_GAP = 1e-3

#: Default stopping tolerance per solver (gap and feasibility, relative).
DEFAULT_TOL = {"CLARABEL": 1e-9, "SCS": 1e-9}

#: "auto" uses Clarabel up to this LMI order and SCS above it. Clarabel's cost per
#: iteration grows like order^6 (a dense factorisation of the LMI block); SCS only
#: needs an eigendecomposition of the order-n block per iteration. Measured with
#: ``python -m experiments.bench_sdp --solvers CLARABEL SCS --sizes 16 32``: at prefix
#: d = 32 (order 64) SCS took 0.7-0.9 s and Clarabel 3.6-5.9 s, both certified to a gap
#: below 1e-8.
AUTO_CLARABEL_MAX_ORDER = 48


@dataclass(frozen=True)
class LevelResult:
    """One SDP solve: minimise ``value`` = the largest free profile entry.

    sigma (k, k) as returned by the solver (not rescaled); lam (d,) and mu (m,) the
    multipliers of the privacy and variance constraints; status a CVXPY status mapped
    by :data:`STATUS_MAP`; nit the solver's iterations; compile_time and solve_time in s.
    """

    value: float
    sigma: np.ndarray
    lam: np.ndarray
    mu: np.ndarray
    status: str
    solver: str
    nit: int
    compile_time: float
    solve_time: float
    raw_status: str = ""


def lmi_order(problem: FitnessProblem, formulation: str) -> int:
    """Order of the one LMI of ``formulation`` for ``problem`` (what interior-point solvers pay for)."""
    k, d, m = problem.k, problem.d, problem.m
    return {"pair": 2 * k, "schur": k + d, "inverse": k + m, "dual": 2 * k}[formulation]


def pick_solver(problem: FitnessProblem, solver: str, formulation: str) -> str:
    """The solver "auto" resolves to (or ``solver`` upper-cased, validated)."""
    name = str(solver).upper()
    if name not in {n.upper() for n in SOLVERS}:
        raise ValueError(f"`solver` must be one of {SOLVERS}, got {solver!r}")
    if name == "AUTO":
        return "CLARABEL" if lmi_order(problem, formulation) <= AUTO_CLARABEL_MAX_ORDER else "SCS"
    return name


def _solver_kwargs(solver: str, tol: float, solver_options: dict | None) -> dict:
    if solver == "CLARABEL":
        opts = {"tol_gap_abs": tol, "tol_gap_rel": tol, "tol_feas": tol, "tol_ktratio": min(1e-6, tol * 1e3),
                "max_iter": 200}
    else:
        opts = {"eps_abs": tol, "eps_rel": tol, "max_iters": 200_000}
    opts.update(solver_options or {})
    return opts


def _privacy_expr(cp, B: np.ndarray, X):
    """``diag(B^T X B)`` (d,) as one vectorised expression."""
    if B.shape[0] == B.shape[1] and np.array_equal(B, np.eye(B.shape[0])):
        return cp.diag(X)
    return cp.sum(cp.multiply(B, X @ B), axis=0)


def _variance_expr(cp, L: np.ndarray, S):
    """``diag(L S L^T)`` (m,) without forming the (m, m) product."""
    return cp.sum(cp.multiply(L @ S, L), axis=1)


def _build_primal(cp, B: np.ndarray, L: np.ndarray, formulation: str, free: np.ndarray, caps: np.ndarray):
    """Minimise beta s.t. profile_i <= beta on free columns, <= caps_i on the others, and
    ``diag(L Sigma L^T) <= 1`` (``L`` has its rows divided by the square roots of the targets)."""
    (k, d), m = B.shape, L.shape[0]
    c = np.ones(m)
    beta = cp.Variable(name="beta")
    bound = beta * free.astype(float) + np.where(free, 0.0, caps)
    if formulation == "pair":
        S = cp.Variable((k, k), symmetric=True, name="Sigma")
        X = cp.Variable((k, k), symmetric=True, name="X")
        eye = np.eye(k)
        cons = [cp.bmat([[S, eye], [eye, X]]) >> 0,
                _privacy_expr(cp, B, X) <= bound, _variance_expr(cp, L, S) <= c]
        sigma = lambda: S.value  # noqa: E731
    elif formulation == "schur":
        S = cp.Variable((k, k), symmetric=True, name="Sigma")
        D = cp.Variable((d, d), symmetric=True, name="D")
        cons = [cp.bmat([[S, B], [B.T, D]]) >> 0, cp.diag(D) <= bound, _variance_expr(cp, L, S) <= c]
        sigma = lambda: S.value  # noqa: E731
    else:  # inverse
        X = cp.Variable((k, k), symmetric=True, name="X")
        Y = cp.Variable((m, m), symmetric=True, name="Y")
        cons = [cp.bmat([[X, L.T], [L, Y]]) >> 0, _privacy_expr(cp, B, X) <= bound, cp.diag(Y) <= c]

        def sigma():
            # The covariance itself is the output here, so X is inverted (via Cholesky).
            Xv = 0.5 * (X.value + X.value.T)
            return linalg.cho_solve(linalg.cho_factor(Xv, lower=True), np.eye(k), check_finite=False)
    return cp.Problem(cp.Minimize(beta), cons), sigma, cons[1], cons[2]


def _build_dual(cp, B: np.ndarray, L: np.ndarray):
    (k, d), m = B.shape, L.shape[0]
    lam = cp.Variable(d, nonneg=True, name="lam")
    mu = cp.Variable(m, nonneg=True, name="mu")
    Z = cp.Variable((k, k), name="Z")
    P = B @ cp.diag(lam) @ B.T
    Q = L.T @ cp.diag(mu) @ L
    lmi = cp.bmat([[P, Z], [Z.T, Q]]) >> 0
    prob = cp.Problem(cp.Maximize(cp.trace(Z)), [lmi, cp.sum(lam) == 1, cp.sum(mu) == 1])

    def sigma():
        # The LMI multiplier is G = [[G11, G12], [G12^T, G22]] with G22 proportional to
        # the optimal Sigma (stationarity in mu: l_j^T G22 l_j equal to c_j times a constant).
        G = lmi.dual_value
        return np.array(G[k:, k:], dtype=float)

    return prob, sigma, lam, mu, (lambda v: v * v)


def solve_level(
    problem: FitnessProblem,
    *,
    free: np.ndarray | None = None,
    caps: np.ndarray | None = None,
    formulation: str = "pair",
    solver: str = "auto",
    tol: float | None = None,
    solver_options: dict | None = None,
    verbose: bool = False,
) -> LevelResult:
    """Solve one SDP: minimise the largest profile entry over the ``free`` columns.

    ``free`` (d,) bool (default all) and ``caps`` (d,) fixed upper bounds on the profile
    of the other columns (the refinement levels of :mod:`ffu_cvx.refine`); with the
    defaults this is Problem 1. Raises ``SolverError`` when the solver fails.
    """
    import cvxpy as cp

    if formulation not in FORMULATIONS:
        raise ValueError(f"`formulation` must be one of {FORMULATIONS}, got {formulation!r}")
    d = problem.d
    free = np.ones(d, dtype=bool) if free is None else np.asarray(free, dtype=bool)
    caps = np.zeros(d) if caps is None else np.asarray(caps, dtype=float)
    if free.shape != (d,) or caps.shape != (d,):
        raise ValueError(f"`free` and `caps` must have shape ({d},), got {free.shape} and {caps.shape}")
    if not free.any():
        raise ValueError("`free` selects no column: nothing to minimise")
    if formulation == "dual" and not free.all():
        raise ValueError("formulation='dual' solves Problem 1 only; use 'pair' for refinement levels")
    name = pick_solver(problem, solver, formulation)
    tol = DEFAULT_TOL[name] if tol is None else float(tol)
    if not (math.isfinite(tol) and 0 < tol < 1):
        raise ValueError(f"`tol` must be in (0, 1), got {tol!r}")
    kwargs = _solver_kwargs(name, tol, solver_options)

    # Problem 1 is homogeneous: dividing the targets by f gives Sigma / f and profile * f.
    # Each variance row is divided by sqrt(c_j f), and f is set so that the scaled alpha
    # is about 3, from the dual bound at uniform multipliers (a close underestimate).
    # SCS is sensitive to this: on prefix(32) a scaled alpha of 0.3 took 145550
    # iterations where 3.6 took 2175; Clarabel is indifferent.
    from .certificate import lower_bound

    f = lower_bound(problem, np.ones(d), 1.0 / problem.c) / 3.0
    L_scaled = problem.L / np.sqrt(problem.c * f)[:, None]
    t0 = time.perf_counter()
    if formulation == "dual":
        prob, get_sigma, lam_var, mu_var, to_value = _build_dual(cp, problem.B, L_scaled)
    else:
        prob, get_sigma, pcon, vcon = _build_primal(cp, problem.B, L_scaled, formulation, free, caps / f)
        to_value = float
    t1 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            # We warn ourselves, with the certified gap, after the post-check.
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            prob.solve(solver=name, verbose=verbose, **kwargs)
    except cp.error.SolverError as exc:
        raise SolverError(f"SDP solver {name} failed on {problem!r} ({formulation}): {exc}. "
                          "Try the other solver (`solver='CLARABEL'` or `'SCS'`) or a looser `tol`", status="solver_error") from None
    t2 = time.perf_counter()
    stats = prob.solver_stats
    nit = int(stats.num_iters) if stats is not None and stats.num_iters is not None else None
    status = STATUS_MAP.get(prob.status)
    raw = _raw_status(stats, prob.status)
    if status is None:
        raise SolverError(
            f"SDP solver {name} returned status {prob.status!r} on {problem!r} ({formulation}); "
            "Problem 1 is always feasible, so this is a numerical failure: try the other solver, "
            "a looser `tol` or more iterations in `solver_options`",
            status=raw, nit=nit)
    if formulation == "dual":
        lam, mu = lam_var.value, mu_var.value
    else:
        # CVXPY reports the multiplier of ``expr <= b`` as a non-negative vector.
        lam, mu = pcon.dual_value, vcon.dual_value
    lam = np.clip(np.asarray(lam, dtype=float).ravel(), 0.0, None)
    mu = np.clip(np.asarray(mu, dtype=float).ravel(), 0.0, None)
    sigma = get_sigma()
    if sigma is None or not np.all(np.isfinite(sigma)):
        raise SolverError(f"SDP solver {name} reported {prob.status!r} but returned no finite Sigma",
                          status="solver_error", nit=nit)
    compile_time = getattr(prob, "compilation_time", None)
    if compile_time is None:
        compile_time = 0.0
    solve_time = float(stats.solve_time) if stats is not None and stats.solve_time is not None else (t2 - t1)
    sigma = 0.5 * (sigma + sigma.T) / f
    out = LevelResult(value=float(to_value(prob.value)) * f, sigma=sigma, lam=lam, mu=mu / problem.c,
                      status=status, solver=name, nit=nit, compile_time=float(compile_time) + (t1 - t0),
                      solve_time=solve_time, raw_status=raw)
    if status == OPTIMAL_INACCURATE and free.all():
        _reject_if_far(problem, out)
    return out


def _reject_if_far(problem: FitnessProblem, level: LevelResult) -> None:
    """Raise ``SolverError`` when an inaccurate Problem 1 solve is certified worse than FAIL_GAP."""
    from . import certificate, privacy

    try:
        sigma, _ = normalise_sigma(problem, level.sigma)
        alpha = privacy.privacy_cost(sigma, problem.B)
        lb = certificate.lower_bound(problem, level.lam, level.mu)
        gap = (alpha - lb) / lb
    except (ValueError, SolverError):
        gap = math.inf
    if not gap <= FAIL_GAP:
        raise SolverError(
            f"SDP solver {level.solver} stopped with status {level.raw_status!r} and its result is certified "
            f"only to a relative gap of {gap:.2e} > {FAIL_GAP:g}; raise the iteration limit in "
            "`solver_options`, loosen `tol`, or try the other solver",
            status=level.raw_status, nit=level.nit, residual=float(gap))


def _raw_status(stats, fallback: str) -> str:
    """The solver's own status string (SCS: ``info["status"]``), else CVXPY's."""
    extra = getattr(stats, "extra_stats", None)
    if isinstance(extra, dict) and isinstance(extra.get("info"), dict) and "status" in extra["info"]:
        return str(extra["info"]["status"])
    return str(fallback)


def normalise_sigma(problem: FitnessProblem, sigma: np.ndarray) -> tuple[np.ndarray, float]:
    """Rescale ``sigma`` (k, k) so its largest variance ratio ``max_j var_j / c_j`` is 1.

    Returns ``(sigma / r, r)``. Scaling is exact for Problem 1: the privacy cost is
    multiplied by ``r``, so a solver's small infeasibility or slack is absorbed here.
    """
    var = np.einsum("ij,ij->i", problem.L @ sigma, problem.L)
    r = float(np.max(var / problem.c))
    if not (math.isfinite(r) and r > 0):
        raise SolverError(f"solver returned a Sigma with non-positive variances (max ratio {r!r})",
                          status="solver_error")
    return sigma / r, r


def solve_sdp(
    problem: FitnessProblem,
    *,
    callback=None,
    solver: str = "auto",
    refine: bool = True,
    formulation: str = "pair",
    verbose: bool = False,
    solver_options: dict | None = None,
    tol: float | None = None,
    gap_tol: float = 1e-6,
) -> Solution:
    """Solve Problem 1 exactly as a semidefinite program (the reference solver).

    Parameters
    ----------
    problem : FitnessProblem
        ``W`` (m, d), ``c`` (m,), basis ``B`` (k, d), ``L`` (m, k).
    callback : callable, optional
        ``callback(state)`` after every level (see :func:`ffu_cvx.refine.refine`);
        raising ``StopIteration`` returns the current Sigma with status ``"user_stopped"``.
    solver : {"auto", "CLARABEL", "SCS"}
        "auto" picks Clarabel (interior point) for LMIs of order <= 48 and SCS (ADMM,
        an eigendecomposition per iteration) above, where Clarabel's dense
        factorisations become the bottleneck.
    refine : bool
        Return the unique ≺R-minimal optimum (Theorem 5) via :mod:`ffu_cvx.refine`;
        with ``solver="auto"`` its extra levels run on Clarabel up to LMI order
        :data:`ffu_cvx.refine.REFINE_CLARABEL_MAX_ORDER` (their feasible sets are too
        thin for SCS).
    formulation : {"pair", "schur", "inverse", "dual"}
        See the module docstring; all are exact.
    tol : float, optional
        Solver tolerance (gap and feasibility); default 1e-9.
    gap_tol : float
        The certificate decides the status: a relative gap above ``gap_tol`` makes the
        result ``"optimal_inaccurate"`` (with a warning), one below it ``"optimal"`` even
        when the solver stopped at its reduced tolerance. An inaccurate solve certified
        worse than :data:`FAIL_GAP` raises ``SolverError``.

    Returns
    -------
    Solution
        ``sigma`` (k, k) with ``max_ratio == 1``, certified by the SDP multipliers
        ``lam`` (d,) and ``mu`` (m,); ``info`` holds the solver, formulation, timings
        and, with ``refine=True``, ``refine_levels``.
    """
    if not isinstance(problem, FitnessProblem):
        raise ValueError(f"`problem` must be a FitnessProblem, got {type(problem).__name__}")
    if formulation not in FORMULATIONS:
        raise ValueError(f"`formulation` must be one of {FORMULATIONS}, got {formulation!r}")
    if not (math.isfinite(gap_tol) and gap_tol > 0):
        raise ValueError(f"`gap_tol` must be a positive number, got {gap_tol!r}")
    t0 = time.perf_counter()
    opts = dict(solver=solver, tol=tol, solver_options=solver_options, verbose=verbose)
    first = solve_level(problem, formulation=formulation, **opts)
    info = {"solver": first.solver, "formulation": formulation, "compile_time": first.compile_time,
            "solve_time": first.solve_time, "sdp_value": first.value}
    info["solver_status"] = first.raw_status
    if refine:
        from .refine import refine_from

        return refine_from(problem, first, t0=t0, callback=callback, gap_tol=gap_tol, info=info,
                           formulation="pair" if formulation == "dual" else formulation, **opts)
    status = first.status
    if callback is not None:
        try:
            callback({"level": 1, "value": first.value, "columns": [], "sigma": first.sigma})
        except StopIteration:
            status = USER_STOPPED
    return finish(problem, first.sigma, first.lam, first.mu, status=status, nit=first.nit, t0=t0,
                  gap_tol=gap_tol, **info)


def finish(problem: FitnessProblem, sigma: np.ndarray, lam: np.ndarray, mu: np.ndarray, *, status: str,
           nit: int | None, t0: float, gap_tol: float, **info) -> Solution:
    """Post-check a solver's ``sigma`` (k, k) and build the ``Solution``.

    Rescales ``sigma`` to meet every target exactly, certifies it with the multipliers
    ``lam`` (d,), ``mu`` (m,) and downgrades the status (with a warning) when the
    solver was inaccurate or the certified gap exceeds ``gap_tol``.
    """
    sigma, ratio = normalise_sigma(problem, sigma)
    info["rescaled_by"] = ratio
    lam_arg = lam if lam is not None and lam.sum() > 0 and mu is not None and mu.sum() > 0 else None
    cert = certificate.certify(problem, sigma, lam_arg, mu if lam_arg is not None else None)
    gap, message = cert.gap, ""
    if status == OPTIMAL_INACCURATE and not gap <= FAIL_GAP:
        raise SolverError(
            f"SDP solver {info.get('solver')} stopped with status {info.get('solver_status', status)!r} "
            f"and its Sigma is certified only to a relative gap of {gap:.2e} > {FAIL_GAP:g}; "
            "raise the iteration limit in `solver_options`, loosen `tol`, or try the other solver",
            status=str(info.get("solver_status", status)), nit=nit, residual=float(gap))
    if status == OPTIMAL_INACCURATE and gap <= gap_tol:
        # The certificate, not the solver's stopping test, decides: a solver that stops at
        # its reduced tolerance with a Sigma certified to gap_tol has solved Problem 1.
        status = OPTIMAL
        message = (f"solver {info.get('solver')} reported {info.get('solver_status', 'inaccurate')!r}, "
                   f"but the certified gap {gap:.1e} <= gap_tol={gap_tol:g}")
    elif status == OPTIMAL and not gap <= gap_tol:
        status = OPTIMAL_INACCURATE
        message = f"certified gap {gap:.2e} exceeds gap_tol={gap_tol:g}"
    if status == OPTIMAL_INACCURATE:
        message = message or f"solver {info.get('solver')} stopped short of its tolerance"
        warnings.warn(f"solve_sdp: result is inaccurate ({message}); certified gap {gap:.2e}",
                      RuntimeWarning, stacklevel=3)
    elif not message:
        message = f"solved by {info.get('solver')} ({info.get('formulation')}); certified gap {gap:.1e}"
    return Solution.from_sigma(problem, sigma, method="sdp", status=status, message=message, lam=cert.lam,
                               mu=cert.mu, lower_bound=cert.lower_bound, time=time.perf_counter() - t0, nit=nit,
                               **info)
