"""The CVXPY adapter: every conic model of the package and the one place CVXPY is imported.

Solver layer, bottom of ``sdp``: imports numpy, scipy, ``model`` (``status``, ``validation``, ``problem``,
``privacy``, ``certificate``) and ``scsmodels`` (SCS's data of the warm
model, arrays only); CVXPY (and SCS, for :func:`solve_warm`)
is imported inside the functions that build a model, so importing the package stays cheap. Nothing in the
model imports this module.

One status map (:data:`STATUS_MAP`) and one solve (:func:`solve_model`) serve every
model: CVXPY's ``optimal`` and ``optimal_inaccurate`` map to ours, anything else is a
``SolverError`` naming the solver, its own status and a remedy; an interrupt (Ctrl-C)
during a solve raises ``KeyboardInterrupt``, whatever the solver makes of it. CVXPY has no
hook inside a conic solve, so a solve that runs longer than :data:`HEARTBEAT_S` says so on the
``logging`` logger ``"ffu_cvx.solvers.sdp.cvx"`` (INFO) at that interval, and a time budget reaches the
solver as its own time limit (:func:`time_limit_options`).

Problem 1's SDP (notation of the fitness-for-use paper: ``B`` (k, d) basis with
columns ``b_i``, ``L`` (m, k) with ``W = L B``, targets ``c`` (m,), noise covariance
``Sigma`` (k, k), privacy cost ``alpha``)

    minimise alpha  s.t.  b_i^T Sigma^{-1} b_i <= alpha (i < d),  diag(L Sigma L^T) <= c

has four exact formulations (Schur complements, no relaxation). They differ in the
order of their one linear matrix inequality (LMI), which is what an interior-point
solver pays for (Clarabel factors a dense block of size ``n(n+1)/2`` for order ``n``):

``"pair"`` (default)
    ``X = Sigma^{-1}`` relaxed to ``[[Sigma, I], [I, X]] >= 0``; privacy ``diag(B^T X B) <= alpha``
    and variances ``diag(L Sigma L^T) <= c`` are then linear. LMI order ``2k``, whatever ``m`` and ``d``.
``"schur"``
    The textbook model ``[[Sigma, B], [B^T, D]] >= 0``, ``diag(D) <= alpha``: order ``k + d``.
``"inverse"``
    ``X = Sigma^{-1}`` as the variable, variances ``[[X, L^T], [L, Y]] >= 0``, ``diag(Y) <= c``: order ``k + m``.
``"dual"``
    The Lagrange dual ``max tr(Z)`` s.t. ``[[B diag(lam) B^T, Z], [Z^T, L^T diag(mu) L]] >= 0``,
    ``sum(lam) = 1``, ``mu . c = 1``; ``alpha* = tr(Z)^2`` and ``Sigma`` is read off the
    LMI's multiplier. Order ``2k``. Problem 1 only (no refinement levels).

:func:`solve_warm` solves the ``"inverse"`` model of Problem 1 with SCS called directly
(data built here), started from a near-optimal point (SM-II's ``Sigma`` and
multipliers), which skips the iterations a cold start spends reaching moderate accuracy.

:func:`solve_level` solves one such model, optionally with some columns capped (the
levels of :mod:`ffu_cvx.solvers.sdp.refine`), and returns a :class:`LevelResult` with the
multipliers ``lam`` (d,) of the privacy and ``mu`` (m,) of the variance constraints.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from scipy import linalg

from ...model import certificate, privacy, validation
from ...model.problem import FitnessProblem
from ...model.status import OPTIMAL, OPTIMAL_INACCURATE, SOLVER_ERROR, SolverError
from .scsmodels import inverse_data, inverse_point, inverse_sigma

__all__ = [
    "STATUS_MAP", "PANIC", "FORMULATIONS", "SOLVERS", "DEFAULT_SOLVER_TOL", "AUTO_CLARABEL_MAX_ORDER", "FAIL_GAP",
    "solve_model", "raw_status", "reciprocal_program", "ca_program", "LevelResult", "lmi_order", "pick_solver",
    "solver_kwargs", "time_limit_options", "HEARTBEAT_S", "solve_level", "normalise_sigma", "reject_if_far",
    "WARM_MAX_ITERS", "WARM_CHUNK_ITERS", "WARM_WALK_FACTOR", "WARM_HIGH_SCALE", "WARM_STALL_FACTOR", "WARM_GAP_FACTOR", "WARM_EPS_FACTOR", "WARM_MIN_EPS",
    "WARM_SCS_OPTIONS", "solve_warm", "certified_gap"]

#: CVXPY status -> ours. Anything unmapped (infeasible, unbounded, user limit, solver
#: error, ...) is a failure.
STATUS_MAP = {"optimal": OPTIMAL, "optimal_inaccurate": OPTIMAL_INACCURATE}

#: A solver's own status containing this word means it caught SIGINT itself: SCS
#: installs its own handler during a solve and returns status "interrupted" (which
#: CVXPY reports as a solver failure), so Python never sees the Ctrl-C.
INTERRUPT_WORD = "interrupt"

#: Class name of the exception a Rust solver's panic raises (pyo3's, a BaseException):
#: Clarabel panicked ("Eigval error") on a refinement level of gaussian_product(16, 0).
PANIC = "PanicException"

FORMULATIONS = ("pair", "schur", "inverse", "dual")
SOLVERS = ("auto", "CLARABEL", "SCS")

#: Default stopping tolerance per solver (gap and feasibility, relative): tight, because
#: the certificate (not the solver) decides the status, and the refinement levels read
#: tight columns off the multipliers.
DEFAULT_SOLVER_TOL = {"CLARABEL": 1e-9, "SCS": 1e-9}

#: "auto" uses Clarabel up to this LMI order and SCS above it. Clarabel's cost per
#: iteration grows like order^6 (a dense factorisation of the LMI block); SCS only
#: needs an eigendecomposition of the order-n block per iteration. Measured with
#: ``python -m experiments.bench_sdp --solvers CLARABEL SCS --sizes 16 32``: at prefix
#: d = 32 (order 64) SCS took 0.7-0.9 s and Clarabel 3.6-5.9 s, both certified to a gap
#: below 1e-8.
AUTO_CLARABEL_MAX_ORDER = 48

#: An inaccurate solve of Problem 1 whose certified relative gap exceeds this is a failure.
FAIL_GAP = 1e-3

#: Each solver's own wall-clock limit (seconds) in its options.
TIME_LIMIT_KEYS = {"CLARABEL": "time_limit", "SCS": "time_limit_secs"}

#: A conic solve still running after this many seconds is logged (INFO) at this interval.
HEARTBEAT_S = 30.0

log = logging.getLogger(__name__)


@contextmanager
def _heartbeat(what: str, solver: str):
    """Log (INFO) every :data:`HEARTBEAT_S` s that ``what`` is still being solved by ``solver``."""
    if not log.isEnabledFor(logging.INFO):
        yield
        return
    done, t0 = threading.Event(), time.perf_counter()

    def beat():
        while not done.wait(HEARTBEAT_S):
            log.info("%s: %s still solving after %.0f s", what, solver, time.perf_counter() - t0)

    thread = threading.Thread(target=beat, name="ffu_cvx heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def raw_status(prob) -> str:
    """The solver's own status string of a solved CVXPY problem (SCS: ``info["status"]``), else CVXPY's."""
    extra = getattr(prob.solver_stats, "extra_stats", None)
    if isinstance(extra, dict) and isinstance(extra.get("info"), dict) and "status" in extra["info"]:
        return str(extra["info"]["status"])
    return str(prob.status)


def _interrupted(raw) -> bool:
    """Whether a solver's raw output says it stopped on SIGINT."""
    info = raw.get("info") if isinstance(raw, dict) else None
    return INTERRUPT_WORD in str(info.get("status", "") if isinstance(info, dict) else getattr(raw, "status", "")).lower()


def solve_model(prob, what: str, *, solver: str, remedy: str, verbose: bool = False,
                **solver_options) -> tuple[str, int | None]:
    """Solve the CVXPY problem ``prob`` with ``solver``; return ``(status, iterations)``.

    ``what`` names the model in messages; ``remedy`` is appended to a failure. The solve is
    CVXPY's own three steps (compile, solve via data, unpack), so a solver that caught
    SIGINT raises ``KeyboardInterrupt`` here. A time limit in ``solver_options`` (:func:`time_limit_options`)
    is cut by the seconds the compile took, so that compile and solve together keep it. Raises ``SolverError`` on a solver failure
    (a panic too) or an unmapped status (its ``status`` is the solver's own string).
    """
    import cvxpy as cp

    t0 = time.perf_counter()
    try:
        data, chain, inverse = prob.get_problem_data(solver, verbose=verbose, solver_opts=solver_options)
        key = TIME_LIMIT_KEYS.get(str(solver).upper())
        if key in solver_options:
            solver_options = {**solver_options, key: max(solver_options[key] - (time.perf_counter() - t0), 1e-3)}
        with _heartbeat(what, solver):
            raw = chain.solve_via_data(prob, data, False, verbose, solver_options)
        if _interrupted(raw):
            raise KeyboardInterrupt(f"{what}: {solver} was interrupted")
        prob.unpack_results(raw, chain, inverse)
    except BaseException as exc:  # a Rust panic in Clarabel is a BaseException, like Ctrl-C
        if not (isinstance(exc, cp.error.SolverError) or type(exc).__name__ == PANIC):
            raise
        raise SolverError(f"{what}: {solver} failed ({type(exc).__name__}: {exc}); {remedy}",
                          status=SOLVER_ERROR) from None
    stats = prob.solver_stats
    nit = int(stats.num_iters) if stats is not None and stats.num_iters is not None else None
    status = STATUS_MAP.get(prob.status)
    if status is None:
        raise SolverError(f"{what}: {solver} returned status {prob.status!r}; {remedy}",
                          status=raw_status(prob), nit=nit)
    return status, nit


def reciprocal_program(weights: np.ndarray, A: np.ndarray, *, solver: str = "CLARABEL",
                       **solver_options) -> tuple[np.ndarray, np.ndarray, str]:
    """``min sum_g weights_g / t_g`` s.t. ``A t <= 1``, ``t > 0`` (Fourier's max program).

    ``weights`` (G,) > 0, ``A`` (K, G) >= 0. Returns ``(t (G,), nu (K,), status)`` with
    ``nu`` >= 0 the constraint multipliers.
    """
    import cvxpy as cp

    t = cp.Variable(weights.size, pos=True)
    cons = [A @ t <= 1.0]
    prob = cp.Problem(cp.Minimize(cp.sum(cp.multiply(weights, cp.inv_pos(t)))), cons)
    status, _ = solve_model(prob, "fourier max program", solver=solver, remedy="try solver='SCS'",
                            **solver_options)
    if t.value is None:
        raise SolverError(f"fourier max program: {solver} reported {prob.status!r} but returned no point; "
                          "try solver='SCS'")
    tv = np.maximum(np.asarray(t.value, dtype=float), 1e-300)
    return tv, np.clip(np.asarray(cons[0].dual_value, dtype=float).ravel(), 0.0, None), status


def ca_program(R: np.ndarray, B: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray, int | None]:
    """CA as one conic program: ``min matrix_frac(R^T, X)`` s.t. ``diag(B^T X B) <= 1``, ``X >= 0``.

    ``R`` (q, k), ``B`` (k, d); Clarabel at gap and feasibility ``tol``. Returns
    ``(X (k, k) symmetric, nu (d,) >= 0, iterations)``.
    """
    import cvxpy as cp

    k = B.shape[0]
    X = cp.Variable((k, k), PSD=True)
    cons = [cp.sum(cp.multiply(B, X @ B), axis=0) <= 1]
    prob = cp.Problem(cp.Minimize(cp.matrix_frac(R.T, X)), cons)
    _, nit = solve_model(prob, "ca", solver="CLARABEL", remedy="try solver='dual'",
                         tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol)
    if X.value is None:
        raise SolverError(f"ca: CLARABEL reported {prob.status!r} but returned no point; try solver='dual'")
    Xv = 0.5 * (X.value + X.value.T)
    return Xv, np.clip(np.asarray(cons[0].dual_value, dtype=float).ravel(), 0.0, None), nit


# --------------------------------------------------------------------------- Problem 1's SDP

@dataclass(frozen=True)
class LevelResult:
    """One SDP solve: minimise ``value`` = the largest free profile entry. sigma (k, k) as
    the solver returned it (not rescaled); lam (d,) and mu (m,) the multipliers of the privacy
    and variance constraints; status ours (:data:`STATUS_MAP`); solver the solver used; nit
    its iterations; compile_time and solve_time in s; raw_status the solver's own status."""

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


def solver_kwargs(solver: str, solver_tol: float, solver_options: dict | None) -> dict:
    """CVXPY keyword arguments for ``solver`` at tolerance ``solver_tol``, ``solver_options`` on top."""
    if solver == "CLARABEL":
        opts = {"tol_gap_abs": solver_tol, "tol_gap_rel": solver_tol, "tol_feas": solver_tol,
                "tol_ktratio": min(1e-6, solver_tol * 1e3), "max_iter": 200}
    else:
        opts = {"eps_abs": solver_tol, "eps_rel": solver_tol, "max_iters": 200_000}
    opts.update(solver_options or {})
    return opts


def time_limit_options(solver: str, seconds: float | None, solver_options: dict | None = None) -> dict | None:
    """``solver_options`` with ``solver``'s own wall-clock limit set to ``seconds`` (Clarabel's
    ``time_limit``, SCS's ``time_limit_secs``; at least 1 ms), unless they set one already or
    ``seconds`` is None or infinite. A solve stopped there is an inaccurate result (SCS) or
    a ``SolverError`` (Clarabel's status ``"user_limit"``)."""
    key = TIME_LIMIT_KEYS.get(str(solver).upper())
    if key is None or seconds is None or not math.isfinite(seconds) or key in (solver_options or {}):
        return solver_options
    return {**(solver_options or {}), key: max(float(seconds), 1e-3)}


def normalise_sigma(problem: FitnessProblem, sigma: np.ndarray) -> tuple[np.ndarray, float]:
    """Rescale ``sigma`` (k, k) so its largest variance ratio ``max_j var_j / c_j`` is 1.

    Returns ``(sigma / r, r)``. Scaling is exact for Problem 1: the privacy cost is
    multiplied by ``r``, so a solver's small infeasibility or slack is absorbed here.
    """
    r = float(np.max(privacy.variances(problem.L, sigma) / problem.c))
    if not (math.isfinite(r) and r > 0):
        raise SolverError(f"solver returned a Sigma with non-positive variances (max ratio {r!r})",
                          status=SOLVER_ERROR)
    return sigma / r, r


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
    ``diag(L Sigma L^T) <= 1`` (``L`` has its rows divided by the square roots of the targets).
    Returns ``(problem, sigma(), multipliers(), value(v))``."""
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
    # CVXPY reports the multiplier of ``expr <= b`` as a non-negative vector.
    return cp.Problem(cp.Minimize(beta), cons), sigma, (lambda: (cons[1].dual_value, cons[2].dual_value)), float


def _build_dual(cp, B: np.ndarray, L: np.ndarray):
    """The dual model; returns ``(problem, sigma(), multipliers(), value(v) = v^2)``."""
    (k, d), m = B.shape, L.shape[0]
    lam = cp.Variable(d, nonneg=True, name="lam")
    mu = cp.Variable(m, nonneg=True, name="mu")
    Z = cp.Variable((k, k), name="Z")
    P = B @ cp.diag(lam) @ B.T
    Q = L.T @ cp.diag(mu) @ L
    lmi = cp.bmat([[P, Z], [Z.T, Q]]) >> 0
    prob = cp.Problem(cp.Maximize(cp.trace(Z)), [lmi, cp.sum(lam) == 1, cp.sum(mu) == 1])

    # The LMI multiplier is G = [[G11, G12], [G12^T, G22]] with G22 proportional to the
    # optimal Sigma (stationarity in mu: l_j^T G22 l_j equal to c_j times a constant).
    sigma = lambda: np.array(lmi.dual_value[k:, k:], dtype=float)  # noqa: E731
    return prob, sigma, (lambda: (lam.value, mu.value)), (lambda v: v * v)


def _level_columns(problem: FitnessProblem, free, caps, formulation: str) -> tuple[np.ndarray, np.ndarray]:
    """Validated ``(free (d,) bool, caps (d,))`` of a level."""
    if formulation not in FORMULATIONS:
        raise ValueError(f"`formulation` must be one of {FORMULATIONS}, got {formulation!r}")
    d, free = problem.d, np.ones(problem.d, dtype=bool) if free is None else np.asarray(free, dtype=bool)
    caps = np.zeros(d) if caps is None else np.asarray(caps, dtype=float)
    if free.shape != (d,) or caps.shape != (d,):
        raise ValueError(f"`free` and `caps` must have shape ({d},), got {free.shape} and {caps.shape}")
    if not free.any():
        raise ValueError("`free` selects no column: nothing to minimise")
    if formulation == "dual" and not free.all():
        raise ValueError("formulation='dual' solves Problem 1 only; use 'pair' for refinement levels")
    return free, caps


def _scaled(problem: FitnessProblem) -> tuple[float, np.ndarray]:
    """``(f, L_scaled)``: the model sees unit targets and ``L_scaled = L / sqrt(c f)`` (m, k)."""
    # Problem 1 is homogeneous: dividing the targets by f gives Sigma / f and profile * f.
    # Each variance row is divided by sqrt(c_j f), and f is set so that the scaled alpha
    # is about 3, from the dual bound at uniform multipliers (a close underestimate).
    # SCS is sensitive to this: on prefix(32) a scaled alpha of 0.3 took 145550
    # iterations where 3.6 took 2175; Clarabel is indifferent.
    f = certificate.lower_bound(problem, np.ones(problem.d), 1.0 / problem.c) / 3.0
    return f, problem.L / np.sqrt(problem.c * f)[:, None]


def solve_level(
    problem: FitnessProblem,
    *,
    free: np.ndarray | None = None,
    caps: np.ndarray | None = None,
    formulation: str = "pair",
    solver: str = "auto",
    solver_tol: float | None = None,
    solver_options: dict | None = None,
    verbose: bool = False,
) -> LevelResult:
    """Solve one SDP: minimise the largest profile entry over the ``free`` columns.

    ``free`` (d,) bool (default all) and ``caps`` (d,) fixed upper bounds on the profile
    of the other columns (the refinement levels of :mod:`ffu_cvx.solvers.sdp.refine`); with the
    defaults this is Problem 1. ``solver_tol`` is the solver's own stopping tolerance
    (default :data:`DEFAULT_SOLVER_TOL`), ``solver_options`` go to it unchanged. Raises
    ``SolverError`` when the solver fails, and when an inaccurate Problem 1 solve is
    certified worse than :data:`FAIL_GAP`.
    """
    import cvxpy as cp

    free, caps = _level_columns(problem, free, caps, formulation)
    name = pick_solver(problem, solver, formulation)
    solver_tol = DEFAULT_SOLVER_TOL[name] if solver_tol is None else validation.fraction(solver_tol, "solver_tol")
    kwargs = solver_kwargs(name, solver_tol, solver_options)

    f, L_scaled = _scaled(problem)
    t0 = time.perf_counter()
    if formulation == "dual":
        prob, get_sigma, get_multipliers, to_value = _build_dual(cp, problem.B, L_scaled)
    else:
        prob, get_sigma, get_multipliers, to_value = _build_primal(cp, problem.B, L_scaled, formulation, free,
                                                                   caps / f)
    t1 = time.perf_counter()
    with warnings.catch_warnings():
        # We warn ourselves, with the certified gap, after the post-check.
        warnings.filterwarnings("ignore", message="Solution may be inaccurate")
        status, nit = solve_model(
            prob, f"SDP ({formulation}) on {problem!r}", solver=name, verbose=verbose,
            remedy="Problem 1 is always feasible, so this is a numerical failure: try the other solver "
                   "(`solver='CLARABEL'` or `'SCS'`), a looser `solver_tol` or more iterations in `solver_options`",
            **kwargs)
    t2 = time.perf_counter()
    lam, mu = (np.clip(np.asarray(v, dtype=float).ravel(), 0.0, None) for v in get_multipliers())
    try:
        sigma = get_sigma()
    except linalg.LinAlgError as exc:  # an X that is not positive definite: a numerical failure, retried
        raise SolverError(f"SDP solver {name} returned an X that is not positive definite ({exc}); the problem is "
                          "numerically ill-conditioned", status=SOLVER_ERROR, nit=nit) from None
    if sigma is None or not np.all(np.isfinite(sigma)):
        raise SolverError(f"SDP solver {name} reported {prob.status!r} but returned no finite Sigma",
                          status=SOLVER_ERROR, nit=nit)
    stats = prob.solver_stats
    solve_time = float(stats.solve_time) if stats is not None and stats.solve_time is not None else (t2 - t1)
    out = LevelResult(value=float(to_value(prob.value)) * f, sigma=0.5 * (sigma + sigma.T) / f, lam=lam,
                      mu=mu / problem.c, status=status, solver=name, nit=nit,
                      compile_time=float(prob.compilation_time or 0.0) + (t1 - t0), solve_time=solve_time,
                      raw_status=raw_status(prob))
    if status == OPTIMAL_INACCURATE and free.all():
        reject_if_far(certified_gap(problem, out), solver=name, raw=out.raw_status, nit=nit)
    return out


def certified_gap(problem: FitnessProblem, level: LevelResult) -> float:
    """Relative gap of ``level``'s rescaled Sigma against its multipliers' bound (``inf`` if not computable)."""
    try:
        alpha = privacy.privacy_cost(normalise_sigma(problem, level.sigma)[0], problem.B)
        lb = certificate.lower_bound(problem, level.lam, level.mu)
    except (ValueError, SolverError):
        return math.inf
    return (alpha - lb) / lb


def reject_if_far(gap: float, *, solver: str, raw: str, nit: int | None) -> None:
    """Raise ``SolverError`` when an inaccurate solve is certified only to a relative ``gap`` > :data:`FAIL_GAP`."""
    if not gap <= FAIL_GAP:
        raise SolverError(
            f"SDP solver {solver} stopped with status {raw!r} and its Sigma is certified only to a relative "
            f"gap of {gap:.2e} > {FAIL_GAP:g}; raise the iteration limit in `solver_options`, loosen "
            "`solver_tol`, or try the other solver", status=raw, nit=nit, residual=float(gap))


# --------------------------------------------------------------------------- warm-started SCS

#: SCS iteration limit per tolerance of :func:`solve_warm` (prefix d = 256 needs 4,625).
WARM_MAX_ITERS = 20_000

#: :func:`solve_warm` aims at a certified gap of ``tol`` times this (alpha accurate well
#: inside ``tol``), SCS at tolerance ``tol`` x :data:`WARM_EPS_FACTOR`, down to :data:`WARM_MIN_EPS`.
WARM_GAP_FACTOR, WARM_EPS_FACTOR, WARM_MIN_EPS = 0.1, 0.01, 1e-11

#: SCS settings of a warm start. Its adaptive scale walks away from the start: from SM-II's
#: point (gap 1.9e-7) on prefix d = 128 at eps 1e-8, SCS took 8,250 iterations with it and
#: 1,425 (10 s) without; a cold solve takes 11,000-15,000 at any eps from 1e-6 to 1e-9.
WARM_SCS_OPTIONS = {"adaptive_scale": False}

#: :func:`solve_warm` checks the certified gap every this many SCS iterations, whose own
#: residual test can lag far behind it: on the authors' range workload (d = 64) the gap
#: reached its aim after 1,500 iterations (12 s) and SCS ran on to 20,000 (156 s).
WARM_CHUNK_ITERS = 500

#: :func:`solve_warm` gives up ("auto" then falls back) when the gap after a chunk is this
#: many times the start's (or the aim's): on the dense Gaussian C A workload (d = 64) it
#: went from 2.5e-7 to 8.3e-5 in 500 iterations, and was 8.5e-6 16,575 iterations later.
WARM_WALK_FACTOR = 100.0

#: SCS's ``scale`` after the first chunk when its primal residual is below its dual one
#: (else SCS's default 0.1 stays). Iterations to the aim with scale 0.1 / 1.0: d = 64 random
#: ranges (random targets; residual ratio 0.2) 13,500 / 2,000, the authors' range 1,500 /
#: 1,000; ratio above 1: prefix d = 128 (50) 1,000 / 2,500, the authors' discrete (18) 400 / 500.
WARM_HIGH_SCALE = 1.0

#: :func:`solve_warm` also stops once the certified gap is within ``tol`` and the last chunk
#: cut it by less than this factor: SCS's tail can be slow. Random ranges d = 256 (random
#: targets, scale 1): 3.4e-6, 8.6e-7, 4.3e-7, 4.0e-7 after each 500 iterations (0.15-0.25 s
#: each), so the aim of 1e-7 was thousands of iterations away; at d = 128 the gaps
#: 6.3e-7, 1.4e-7, 9.5e-8 reach the aim first.
WARM_STALL_FACTOR = 0.8

#: SCS's ``status_val`` -> ours (1 solved, 2 solved inaccurate: e.g. at ``max_iters``);
#: -5 is SIGINT, anything else a failure.
SCS_STATUS = {1: OPTIMAL, 2: OPTIMAL_INACCURATE}
SCS_SIGINT = -5


def _scs_level(problem: FitnessProblem, out: dict, f: float, **times) -> LevelResult:
    """The :class:`LevelResult` of one SCS run on :func:`ffu_cvx.solvers.sdp.scsmodels.inverse_data`'s model
    (``times``: its ``nit``, ``compile_time``, ``solve_time``); raises on a failure or SIGINT."""
    info, (x, y) = out["info"], (out["x"], out["y"])
    if info["status_val"] == SCS_SIGINT:
        raise KeyboardInterrupt(f"SDP (warm) on {problem!r}: SCS was interrupted")
    status = SCS_STATUS.get(info["status_val"])
    if status is None:
        raise SolverError(f"SDP (warm) on {problem!r}: SCS returned status {info['status']!r}; Problem 1 is always "
                          "feasible, so this is a numerical failure: try `warm_start=None` or `solver='CLARABEL'`",
                          status=str(info["status"]), nit=times["nit"])
    try:
        sigma = inverse_sigma(x, problem.k)
    except linalg.LinAlgError:
        raise SolverError(f"SDP (warm) on {problem!r}: SCS returned a singular X ({info['status']!r}); try "
                          "`warm_start=None`", status=SOLVER_ERROR, nit=times["nit"]) from None
    return LevelResult(value=float(x[0]) * f, sigma=0.5 * (sigma + sigma.T) / f, lam=np.clip(y[:problem.d], 0.0, None),
                       mu=np.clip(y[problem.d:problem.d + problem.m], 0.0, None) / problem.c, status=status,
                       solver="SCS", raw_status=str(info["status"]), **times)


def solve_warm(problem: FitnessProblem, sigma: np.ndarray, lam: np.ndarray, mu: np.ndarray, *, tol: float = 1e-6,
               max_iters: int = WARM_MAX_ITERS, solver_options: dict | None = None,
               verbose: bool = False, time_limit: float | None = None) -> LevelResult:
    """Problem 1 by SCS on the ``"inverse"`` model (:mod:`ffu_cvx.solvers.sdp.scsmodels`), started at ``sigma`` (k, k),
    ``lam`` (d,), ``mu`` (m,).

    The start is any near-optimal point with its multipliers (SM-II's Solution: its
    scale does not matter). SCS runs with :data:`WARM_SCS_OPTIONS` at tolerance
    ``tol * WARM_EPS_FACTOR`` in chunks of :data:`WARM_CHUNK_ITERS` iterations, each
    resumed from the last point, until the certified gap is at most ``tol * WARM_GAP_FACTOR``
    or above :data:`WARM_WALK_FACTOR` times the start's, or at most ``tol`` and the last chunk
    cut it by less than :data:`WARM_STALL_FACTOR`, or ``max_iters`` are spent, or ``time_limit``
    seconds (each chunk runs under SCS's limit of the time left); converged short of that
    aim, the tolerance is tightened tenfold down to :data:`WARM_MIN_EPS`. Returns a
    :class:`LevelResult` (solver ``"SCS"``, ``nit`` summed): ``"optimal"`` when the gap is at most ``tol``, else ``"optimal_inaccurate"``;
    raises ``SolverError`` on a failure or a gap above :data:`FAIL_GAP`.
    """
    import scs

    tol = validation.positive(tol, "tol")
    t0 = time.perf_counter()
    f, L_scaled = _scaled(problem)
    data, cone = inverse_data(problem.B, L_scaled)
    sigma, lam, mu = (np.asarray(v, dtype=float) for v in (sigma, lam, mu))
    x, y, s = inverse_point(problem.B, L_scaled, sigma, lam, mu * problem.c)
    aim, opts = tol * WARM_GAP_FACTOR, dict(WARM_SCS_OPTIONS, verbose=verbose, **(solver_options or {}))
    start = LevelResult(math.nan, sigma, lam, mu, OPTIMAL, "start", 0, 0.0, 0.0)
    give_up, eps = WARM_WALK_FACTOR * max(certified_gap(problem, start), aim), tol * WARM_EPS_FACTOR
    times, used, gap = {"nit": 0, "compile_time": time.perf_counter() - t0, "solve_time": 0.0}, 0, math.inf
    while True:
        chunk = dict(opts, eps_abs=eps, eps_rel=eps, max_iters=min(WARM_CHUNK_ITERS, max_iters - used))
        left = None if time_limit is None else time_limit - (time.perf_counter() - t0)
        chunk = time_limit_options("SCS", left, chunk)
        out = scs.SCS(data, cone, **chunk).solve(warm_start=True, x=x, y=y, s=s)
        info, (x, y, s) = out["info"], (out["x"], out["y"], out["s"])
        if not used and "scale" not in opts and info["res_pri"] < info["res_dual"]:
            opts["scale"] = WARM_HIGH_SCALE
        used += int(info["iter"])
        times.update(nit=times["nit"] + int(info["iter"]),
                     solve_time=times["solve_time"] + (info["setup_time"] + info["solve_time"]) / 1000.0)
        level = _scs_level(problem, out, f, **times)
        last, gap = gap, certified_gap(problem, level)
        stalled = gap <= tol and gap > WARM_STALL_FACTOR * last
        tightest = level.status == OPTIMAL and eps <= WARM_MIN_EPS
        late = time_limit is not None and time.perf_counter() - t0 >= time_limit
        if gap <= aim or gap > give_up or stalled or tightest or used >= max_iters or late:
            break
        if level.status == OPTIMAL:
            eps, used = eps / 10.0, 0
    if not gap <= tol:
        reject_if_far(gap, solver="SCS", raw=level.raw_status, nit=level.nit)
    return dataclasses.replace(level, status=OPTIMAL if gap <= tol else OPTIMAL_INACCURATE)
