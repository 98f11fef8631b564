"""Lexicographic refinement: the unique ≺R-minimal optimum of Problem 1 (Theorem 5).

Problem 1 can have many optimal ``Sigma`` (k, k): only the columns ``b_i`` of ``B``
(k, d) that block a lower privacy cost are pinned at ``alpha``; the others may take
any profile value up to ``alpha``. Among the optima the paper asks for the one whose
decreasingly sorted privacy profile ``p_i = b_i^T Sigma^{-1} b_i`` is lexicographically
smallest (the refined order ≺R, Definition 7), and Theorem 5 shows it is unique.

It is found level by level, as in max-min fair allocation:

1. solve Problem 1, value ``alpha_1``; the columns whose privacy multiplier ``lam_i``
   is positive are tight in *every* optimum (complementary slackness), so their
   profile is fixed at ``alpha_1``;
2. minimise the largest profile entry over the remaining (free) columns, with the
   fixed ones capped at their level values and every variance target kept;
3. repeat until no column is free, or until a level's multipliers show that its
   optimum is a single point (:func:`single_optimum`): then every later level is
   read off that point's profile (:func:`read_levels`) instead of solved. The
   feasible set of a later level would be that point widened by ``slack``, which
   interior-point solvers fail on (the dense Gaussian ``W = C A`` at d = 64: after
   its first level, every retry of level 6 failed).

The multipliers of the free columns sum to 1 at every level, so each level fixes at
least one column and the loop ends after at most ``d`` solves. A multiplier can be
small and still positive (a column tight in every optimum that barely blocks the
level): the interior-point solve is maximally complementary, so such a column is
told apart from a free one by comparing its multiplier with its profile gap
(:func:`tight_columns`). A column still missed is caught one level later (the next
level then has the same value and is merged into the previous one). Fixed levels are
relaxed by a relative ``slack`` so that the solver's tolerance never makes a later
level infeasible; a level the solver fails on is retried with the other formulations
and a larger slack, and if all retries fail the levels found so far are returned
with a warning (their ``Sigma`` is still an optimum of Problem 1).

Progress and time: ``callback`` gets an :class:`ffu_cvx.model.status.IntermediateResult`
after every level (its number, the columns fixed so far, the elapsed time), every level
and every failed solve is logged (``logging`` logger ``"ffu_cvx.solvers.sdp.refine"``, INFO), and a
:class:`Clock` with ``max_time`` is checked before every solve and hands the time left to
the solver as its own limit. A refinement stopped by ``max_time`` (or by a callback
raising ``StopIteration``) returns the ``Sigma`` of its last level, an optimum of
Problem 1 still certified by the first level's multipliers, only not the ≺R-minimal one.

Solver layer, above :mod:`ffu_cvx.solvers.sdp.cvx`: imports numpy, scipy, ``model`` (``certificate``, ``privacy``,
``validation``, ``problem``, ``status``) and ``cvx``; the standard library's ``logging`` and ``time``. The level solver is an argument
(``solve_level=cvx.solve_level``), so this driver knows nothing of CVXPY and nothing
above it; :mod:`ffu_cvx.solvers.sdp.driver` builds the ``Solution`` (:func:`ffu_cvx.solvers.sdp.driver.refine`).
"""


from __future__ import annotations

import dataclasses
import logging
import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy import linalg

from ...model import certificate, privacy, validation
from ...model.problem import FitnessProblem
from ...model.status import MAX_ITER, OPTIMAL_INACCURATE, USER_STOPPED, IntermediateResult, SolverError
from . import cvx

__all__ = ["REFINE_CLARABEL_MAX_ORDER", "RETRY_CLARABEL_OPTIONS", "RETRY_MAX_SLACK", "RefineResult", "Refinement",
           "SINGLE_MARGIN", "Clock", "single_optimum", "solver_multipliers", "read_levels", "check_options",
           "refine_levels", "refine_first", "tight_columns", "level_bound", "level_result", "notify"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Clock:
    """The wall-clock budget of one solve: started at ``t0`` (``time.perf_counter()``),
    ``max_time`` seconds long (None: no limit)."""

    t0: float = field(default_factory=time.perf_counter)
    max_time: float | None = None

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def left(self) -> float:
        """Seconds left (``inf`` without a limit, <= 0 once spent)."""
        return math.inf if self.max_time is None else self.max_time - self.elapsed()

    def spent(self) -> bool:
        return self.left() <= 0.0

    def limit(self) -> float | None:
        """A solver's time limit: the seconds left, at least 1 ms (None without a limit)."""
        return None if self.max_time is None or math.isinf(self.max_time) else max(self.left(), 1e-3)


@dataclass
class RefineResult:
    """Outcome of the refinement levels.

    sigma (k, k): the ≺R-minimal optimum (solver output, not rescaled); levels: list of
    ``{"value": float, "columns": list[int]}`` in decreasing value; nit, compile_time,
    solve_time: totals over the extra solves; stopped: a callback raised
    ``StopIteration``; inaccurate: how many extra solves ended "optimal_inaccurate";
    slack: the relative slack of the caps in the end (raised by retries); retries: how
    many level solves failed and were retried; failed: why the refinement stopped early
    ("" if it did not); free: the columns no level fixed (empty unless ``failed``);
    single: the number of the level whose ``Sigma`` was the only point of its optimal set
    (:func:`single_optimum`), the later levels read off it (0: none); timed_out: the
    clock's ``max_time`` ran out before the next solve (``free`` then lists the columns left).

    Capping the fixed columns at their level leaves the later SDPs a very thin
    interior, so interior-point solvers often end them at their reduced tolerance;
    their values and free-column multipliers are still accurate, and the final
    ``Sigma`` is certified for Problem 1 by the first level's multipliers.
    """

    sigma: np.ndarray
    levels: list = field(default_factory=list)
    nit: int = 0
    compile_time: float = 0.0
    solve_time: float = 0.0
    stopped: bool = False
    inaccurate: int = 0
    slack: float = 0.0
    retries: int = 0
    failed: str = ""
    free: list = field(default_factory=list)
    single: int = 0
    timed_out: bool = False


def level_bound(problem: FitnessProblem, level) -> float:
    """Problem 1's dual lower bound from a solved level's multipliers (NaN when they vanish)."""
    if level.lam.sum() > 0 and level.mu.sum() > 0:
        return certificate.lower_bound(problem, level.lam, level.mu)
    return math.nan


def level_result(problem: FitnessProblem, level, *, number: int, columns, lower_bound: float, n_fixed: int = 0,
                 elapsed: float = math.nan) -> IntermediateResult:
    """What the SDP passes to ``callback`` after level ``number`` (a :class:`ffu_cvx.solvers.sdp.cvx.LevelResult`).

    ``sigma`` is the level's Sigma rescaled to meet every target, ``privacy_cost`` its
    cost, ``gap`` that cost against ``lower_bound`` (Problem 1's certified bound);
    ``level``, ``value`` (the level's optimal value), ``columns`` (those it fixed),
    ``n_fixed`` and ``n_free`` (columns fixed by the levels so far and still free) and
    ``elapsed`` (seconds since the solve began).
    """
    sigma, _ = cvx.normalise_sigma(problem, level.sigma)
    cost = privacy.privacy_cost(sigma, problem.B)
    return IntermediateResult(method="sdp", nit=number, privacy_cost=cost, lower_bound=lower_bound,
                              gap=cost / lower_bound - 1.0, sigma=sigma, level=number, value=float(level.value),
                              columns=list(columns), n_fixed=int(n_fixed), n_free=problem.d - int(n_fixed),
                              elapsed=float(elapsed))


def notify(callback, problem: FitnessProblem, level, *, number: int, columns, first, n_fixed: int = 0,
           clock: Clock | None = None) -> bool:
    """Log level ``number`` and call ``callback`` (if any) with :func:`level_result`, certified
    by Problem 1's level ``first``; ``n_fixed`` columns are fixed so far, ``clock`` times the solve.

    Returns True when the callback raised ``StopIteration``.
    """
    elapsed = clock.elapsed() if clock is not None else math.nan
    log.info("SDP level %d: value %.10g, %d column(s) fixed here, %d of %d fixed in all, %.1f s", number,
             level.value, len(columns), n_fixed, problem.d, elapsed)
    if callback is None:
        return False
    try:
        callback(level_result(problem, level, number=number, columns=columns, lower_bound=level_bound(problem, first),
                              n_fixed=n_fixed, elapsed=elapsed))
    except StopIteration:
        log.info("SDP level %d: the callback raised StopIteration", number)
        return True
    return False


def check_options(slack, threshold) -> tuple[float, float]:
    """Validated ``(slack, threshold)``: ``slack`` in [0, 1e-2), ``threshold`` in (0, 1)."""
    slack = validation.nonnegative(slack, "slack")
    if not slack < 1e-2:
        raise ValueError(f"`slack` must be in [0, 1e-2) (a relative relaxation of the fixed levels), got {slack!r}")
    return slack, validation.fraction(threshold, "threshold")


def refine_levels(
    problem: FitnessProblem,
    first,
    *,
    solve_level=cvx.solve_level,
    callback=None,
    formulation: str = "pair",
    solver: str = "auto",
    solver_tol: float | None = None,
    solver_options: dict | None = None,
    verbose: bool = False,
    slack: float = 1e-8,
    threshold: float = 1e-3,
    profile_rtol: float = 1e-4,
    cost_rtol: float = 1e-6,
    clock: Clock | None = None,
) -> RefineResult:
    """Run the refinement from a solved Problem 1 ``first`` (:class:`ffu_cvx.solvers.sdp.cvx.LevelResult`).

    ``solve_level(problem, free=, caps=, formulation=, solver=, solver_tol=,
    solver_options=, verbose=)`` solves one level (default :func:`ffu_cvx.solvers.sdp.cvx.solve_level`).
    A free column is fixed at a level when its profile is within ``profile_rtol`` of
    the level value and its multiplier marks it tight (:func:`tight_columns`). A level
    whose value is within ``100 * slack`` of the previous one is merged into it. A
    level the solver fails on, or whose normalised ``Sigma`` costs more than the first
    level by a relative ``max(cost_rtol, 2 slack)``, is retried (:func:`_retry_plan`); if every retry
    fails, the levels found so far are returned with ``failed`` set and a
    ``RuntimeWarning``. ``callback`` gets :func:`level_result` after every level.
    ``clock`` (default: no limit) times the levels; once its ``max_time`` is spent no
    further solve starts and the levels found so far are returned with ``timed_out`` set.
    """
    slack, threshold = check_options(slack, threshold)
    clock = Clock() if clock is None else clock
    d = problem.d
    free = np.ones(d, dtype=bool)
    fixed_at = np.zeros(d)  # level value of each fixed column; caps are fixed_at * (1 + slack)
    out = RefineResult(sigma=first.sigma, slack=slack)
    level = first
    while True:
        p = privacy.profile(level.sigma, problem.B)
        level_tol = cvx.DEFAULT_SOLVER_TOL.get(level.solver, 1e-8) if solver_tol is None else float(solver_tol)
        new = free & tight_columns(level.lam, p, level.value, free, threshold=threshold, tol=level_tol,
                                   profile_rtol=profile_rtol)
        if not new.any():
            # The multipliers and the profile disagree (an inaccurate solve): fix the
            # column the multipliers point at, which always makes progress.
            new[int(np.argmax(np.where(free, level.lam, -np.inf)))] = True
        cols = np.flatnonzero(new)
        if out.levels and level.value >= out.levels[-1]["value"] * (1.0 - 100.0 * out.slack - 10.0 * level_tol):
            out.levels[-1]["columns"] = sorted(out.levels[-1]["columns"] + cols.tolist())
        else:
            out.levels.append({"value": float(level.value), "columns": cols.tolist()})
        fixed_at[cols] = out.levels[-1]["value"]
        free &= ~new
        out.sigma = level.sigma
        if notify(callback, problem, level, number=len(out.levels), columns=cols.tolist(), first=first,
                  n_fixed=int(np.count_nonzero(~free)), clock=clock):
            out.stopped = True
            return out
        if not free.any():
            return out
        if single_optimum(problem.B, level.lam, ~free, noise=max(level_tol, _noise(level.lam, free))):
            out.single = len(out.levels)
            read_levels(problem, out, level, p, free, rtol=100.0 * out.slack + 10.0 * level_tol,
                        callback=callback, first=first, clock=clock)
            return out
        level = _solve_with_retries(problem, out, free, fixed_at, solve_level=solve_level, formulation=formulation,
                                    solver=solver, solver_tol=solver_tol, solver_options=solver_options,
                                    verbose=verbose, cost_rtol=cost_rtol, clock=clock)
        if level is None:
            out.free = np.flatnonzero(free).tolist()
            if not out.timed_out:
                warnings.warn(f"refine: {out.failed}", RuntimeWarning, stacklevel=4)
            return out


def tight_columns(lam: np.ndarray, profile: np.ndarray, value: float, free: np.ndarray, *, threshold: float,
                  tol: float, profile_rtol: float) -> np.ndarray:
    """Free columns (d,) bool that are tight in every optimum of a level, from one solve.

    ``lam`` (d,) are the level's privacy multipliers and ``profile`` (d,) its profile.
    Interior-point solvers end near the central path, where every free column has
    ``lam_i * gap_i`` about the same ``mu``, at most the solver's tolerance ``tol``
    (``lam`` normalised to sum 1 over the free columns, ``gap_i = 1 - profile_i / value``), and they converge to a
    maximally complementary pair: a column tight in every optimum keeps a multiplier of
    its own size while its gap shrinks like ``mu / lam_i``; any other column keeps its
    gap while its multiplier shrinks. So a column is tight when its multiplier exceeds
    both its gap and ``sqrt(mu)`` (the crossing point; ``mu`` the largest product
    ``lam_i * gap_i``, at least ``10 tol``), or, as a scale-free check, when
    it is at least ``threshold`` times the largest free multiplier. Either way its
    profile must be within ``profile_rtol`` of ``value``.
    """
    lam_free = np.where(free, np.clip(lam, 0.0, None), 0.0)
    total = lam_free.sum()
    if not total > 0:
        return np.zeros_like(free)
    lam_n = lam_free / total
    gap = 1.0 - profile / value
    near = gap <= profile_rtol
    # The solve's complementarity level mu: its square root is where the multipliers of
    # tight columns and the gaps of the others cross.
    mu = float(np.max(np.where(free, lam_n * np.maximum(gap, 0.0), 0.0)))
    central = (lam_n >= np.maximum(gap, 0.0)) & (lam_n >= max(math.sqrt(mu), 10.0 * tol))
    return free & near & ((lam_n >= threshold * lam_n.max()) | central)


#: :func:`single_optimum` asks the smallest eigenvalue of ``P`` to exceed the largest
#: change the multipliers' errors could make to it by this factor. Measured: on the
#: dense Gaussian C A workload (d = 64, seed 0) Clarabel's 47 tight columns give
#: ``lambda_min(P) = 3.5e-3`` against ``noise * sum ||b_i||^2 = 4.7e-5`` (ratio 74); on
#: random ranges with fewer tight columns than ``k`` it is 0 (a singular ``P``).
SINGLE_MARGIN = 10.0


def single_optimum(B: np.ndarray, lam: np.ndarray, fixed: np.ndarray, *, noise: float) -> bool:
    """Whether a solved level's optimal set is a single point, from its multipliers.

    ``B`` (k, d), ``lam`` (d,) the level's privacy multipliers, ``fixed`` (d,) bool the
    columns fixed so far (the others' multipliers are noise of relative size ``noise``).
    Every optimum ``Sigma`` of the level minimises its Lagrangian
    ``tr(P Sigma^{-1}) + tr(Q Sigma)`` with ``P = B diag(lam) B^T`` and ``Q`` from the
    variance multipliers (a saddle point); when ``P`` is positive definite that is
    strictly convex in ``Sigma``, so the optimum is unique and so is every later level:
    its profile gives them all. ``P`` counts here as positive definite when its smallest
    eigenvalue exceeds :data:`SINGLE_MARGIN` times ``noise * sum_i ||b_i||^2`` over the
    fixed columns (what multiplier errors of that relative size can change it by),
    ``lam`` normalised to sum 1 over them.
    """
    w = np.where(fixed, np.clip(lam, 0.0, None), 0.0)
    if not (w.sum() > 0 and np.count_nonzero(w) >= B.shape[0]):
        return False
    w = w / w.sum()
    cols = np.flatnonzero(w)
    smallest = float(linalg.eigvalsh((B[:, cols] * w[cols]) @ B[:, cols].T, subset_by_index=[0, 0])[0])
    return smallest > SINGLE_MARGIN * noise * float(np.sum(B[:, cols] ** 2))


def _noise(lam: np.ndarray, free: np.ndarray) -> float:
    """The largest multiplier of a still-free column, relative to the fixed columns' sum (0 if none)."""
    lam = np.clip(lam, 0.0, None)
    total = lam[~free].sum()
    return float(lam[free].max() / total) if total > 0 and free.any() else 0.0


def read_levels(problem: FitnessProblem, out: RefineResult, level, profile: np.ndarray, free: np.ndarray, *,
                rtol: float, callback, first, clock: Clock | None = None) -> None:
    """Add the levels of the ``free`` columns, read off ``profile`` (d,) of ``level``'s ``Sigma``.

    For a level whose optimum is unique (:func:`single_optimum`): the free columns in
    decreasing profile, grouped while within a relative ``rtol`` of their group's top
    (its value); a group within ``rtol`` of the previous level joins it. ``callback``
    sees each level as if solved; ``out.stopped`` is set when it stops.
    """
    order = [int(i) for i in np.flatnonzero(free)[np.argsort(-profile[free], kind="stable")]]
    n_fixed = problem.d - len(order)
    while order:
        top = float(profile[order[0]])
        group = [i for i in order if profile[i] >= top * (1.0 - rtol)]
        order = order[len(group):]
        if top >= out.levels[-1]["value"] * (1.0 - rtol):
            out.levels[-1]["columns"] = sorted(out.levels[-1]["columns"] + group)
        else:
            out.levels.append({"value": top, "columns": sorted(group)})
        shown = dataclasses.replace(level, value=out.levels[-1]["value"])
        n_fixed += len(group)
        if notify(callback, problem, shown, number=len(out.levels), columns=sorted(group), first=first,
                  n_fixed=n_fixed, clock=clock):
            out.stopped = True
            return


def _all_tight(problem: FitnessProblem, level, threshold: float) -> bool:
    """Whether every column of ``level`` is at its value with a multiplier >= ``threshold`` x the largest."""
    lam = np.clip(level.lam, 0.0, None)
    p = privacy.profile(level.sigma, problem.B)
    return bool(lam.max() > 0 and np.all(lam >= threshold * lam.max())
                and np.all(p >= level.value * (1.0 - 1e-4)))


#: Largest relative slack the retries of a failed refinement level go up to.
RETRY_MAX_SLACK = 1e-6

#: Clarabel options of the retries: ten times its default static regularisation, which
#: lets it through the thin feasible sets of late levels (random_ranges(32) seed 0: the
#: level after 30 fixed columns fails with the defaults at every slack up to 1e-6 and
#: every formulation, and solves with these).
RETRY_CLARABEL_OPTIONS = {"static_regularization_constant": 1e-7, "max_iter": 400}


def _retry_plan(out: RefineResult, formulation: str, solver: str, solver_options: dict | None) -> list:
    """``(slack, formulation, solver_options)`` attempts for one level, in order: the
    requested formulation, the other primal ones, then (Clarabel) the requested one with
    stronger regularisation, at the slack raised tenfold up to :data:`RETRY_MAX_SLACK`."""
    slacks = [out.slack]
    while slacks[-1] * 10 <= RETRY_MAX_SLACK * (1 + 1e-9):
        slacks.append(slacks[-1] * 10 if slacks[-1] > 0 else 1e-8)
    variants = [solver_options]
    if str(solver).upper() == "CLARABEL":
        variants.append(dict(RETRY_CLARABEL_OPTIONS, **(solver_options or {})))
    others = [f for f in ("pair", "schur", "inverse") if f != formulation]
    return [(s, f, opts) for s in slacks
            for f, opts in [(formulation, solver_options)] + [(f, solver_options) for f in others]
            + [(formulation, v) for v in variants[1:]]]


def _solve_with_retries(problem, out: RefineResult, free, fixed_at, *, solve_level, formulation, solver, solver_tol,
                        solver_options, verbose, cost_rtol, clock: Clock):
    """Solve the next level, retrying a ``SolverError`` as :func:`_retry_plan` says, each
    attempt limited to the time ``clock`` has left. Returns ``None`` when every attempt
    fails (setting ``out.failed``) or the clock is spent first (setting ``out.timed_out``)."""
    errors, number = [], len(out.levels) + 1
    for s, form, opts in _retry_plan(out, formulation, solver, solver_options):
        label = f"{form}/slack {s:g}" + ("/regularised" if opts is not solver_options else "")
        if clock.spent():
            out.timed_out = True
            out.retries += len(errors)
            log.info("SDP level %d: max_time = %g s spent after %.1f s; the refinement stops with %d of %d columns "
                     "fixed", number, clock.max_time, clock.elapsed(), np.count_nonzero(~free), problem.d)
            return None
        t = time.perf_counter()
        limited = opts if clock.max_time is None else \
            cvx.time_limit_options(cvx.pick_solver(problem, solver, form), clock.left(), opts)
        try:
            level = solve_level(problem, free=free, caps=fixed_at * (1.0 + s), formulation=form, solver=solver,
                                solver_tol=solver_tol, solver_options=limited, verbose=verbose)
        except SolverError as exc:
            errors.append(f"{label}: {exc.status}")
            log.info("SDP level %d: %s failed (%s) in %.1f s", number, label, exc.status, time.perf_counter() - t)
            continue
        cost = privacy.privacy_cost(cvx.normalise_sigma(problem, level.sigma)[0], problem.B)
        if not (level.value <= out.levels[-1]["value"] * (1.0 + 1e-4)
                and cost <= out.levels[0]["value"] * (1.0 + max(cost_rtol, 2.0 * s))):
            # A level cannot cost more than the one before (its optimum is feasible
            # here), nor its Sigma more than Problem 1's optimum: the solver ended
            # outside the caps.
            errors.append(f"{label}: {level.raw_status} with value {level.value:.6g} and cost {cost:.10g} "
                          f"above the levels found")
            log.info("SDP level %d: %s rejected (%s) in %.1f s", number, label, errors[-1], time.perf_counter() - t)
            continue
        out.slack = s
        out.retries += len(errors)
        out.nit += level.nit or 0
        out.compile_time += level.compile_time
        out.solve_time += level.solve_time
        out.inaccurate += level.status == OPTIMAL_INACCURATE
        return level
    out.retries += len(errors)
    out.failed = (f"level {len(out.levels) + 1} (columns {np.flatnonzero(free).tolist()}) failed in every retry "
                  f"({'; '.join(errors)}); returning the {len(out.levels)} level(s) found so far, whose Sigma is "
                  "an optimum of Problem 1 but not its unique ≺R-minimal one. Remedy: pass a larger `slack`, "
                  "a looser `solver_tol`, or the other `solver`")
    return None


#: With ``solver="auto"`` the levels after the first use Clarabel up to this LMI order:
#: their feasible sets are thin (the fixed columns sit within ``slack`` of their caps),
#: which interior-point methods handle and first-order SCS does not (it stalls at its
#: iteration limit or reports infeasibility).
REFINE_CLARABEL_MAX_ORDER = 160


@dataclass(frozen=True)
class Refinement:
    """What :func:`refine_first` hands to the post-check.

    sigma (k, k): the Sigma to return (refined, or the unrefined optimum when the
    refinement was rejected); first: Problem 1's level (its multipliers certify
    ``sigma``); status: ``first.status``, ``"user_stopped"`` (a callback) or
    ``"max_iter"`` (``max_time`` ran out); nit: solver iterations over all levels; info:
    ``refine_*`` entries added to the caller's info; message: why the refinement
    stopped short ("" when it did not).
    """

    sigma: np.ndarray
    first: object
    status: str
    nit: int
    info: dict
    message: str = ""


def solver_multipliers(lam, mu) -> tuple:
    """``(lam, mu)`` for :func:`ffu_cvx.model.certificate.certify`: a solver's multipliers, or
    ``(None, None)`` (certify's own candidates) when either is missing or all zero."""
    usable = lam is not None and mu is not None and lam.sum() > 0 and mu.sum() > 0
    return (lam, mu) if usable else (None, None)


def _certified(problem: FitnessProblem, sigma: np.ndarray, first, tol: float) -> bool:
    """Whether ``sigma`` (rescaled to meet every target) is within ``tol`` of the bound that
    ``first``'s multipliers certify (what the Solution will report)."""
    scaled = cvx.normalise_sigma(problem, sigma)[0]
    return certificate.certify(problem, scaled, *solver_multipliers(first.lam, first.mu)).gap <= tol


def refine_first(
    problem: FitnessProblem,
    first,
    *,
    info: dict,
    solve_level=cvx.solve_level,
    callback=None,
    formulation: str = "pair",
    solver: str = "auto",
    solver_tol: float | None = None,
    solver_options: dict | None = None,
    verbose: bool = False,
    slack: float = 1e-8,
    threshold: float = 1e-3,
    tol: float = 1e-6,
    clock: Clock | None = None,
) -> Refinement:
    """Refine a solved Problem 1 ``first`` (:class:`ffu_cvx.solvers.sdp.cvx.LevelResult`) with ``solve_level``.

    Never raises once ``first`` is solved. ``solver="auto"`` runs the levels on Clarabel
    up to LMI order :data:`REFINE_CLARABEL_MAX_ORDER`; then a ``first`` from another
    solver is re-solved by Clarabel unless its multipliers already fix every column.
    If a level fails in every retry, the ``Sigma`` of the last solved level is returned
    (an optimum of Problem 1) with a ``RuntimeWarning``, ``info["refine_failed"]`` and
    ``info["refine_free"]`` (the columns left unfixed). Safety net: if the refined
    ``Sigma`` costs more than ``first``'s by a relative ``max(tol, 2 slack)``, or costs more
    and is no longer certified to ``tol`` (the slack of retried levels adds up), the
    unrefined optimum is returned with a warning and ``info["refine_failed"]``.

    ``clock`` (default: no limit) is checked before every solve: once its ``max_time`` is
    spent, the Sigma of the last level is returned with status ``"max_iter"`` (a callback
    raising ``StopIteration``: ``"user_stopped"``). Either way ``info["refine_complete"]``
    says whether every column was fixed, and a stopped refinement adds
    ``info["refine_stopped"]`` (``"max_time"`` or ``"callback"``) and ``info["refine_free"]``.
    """
    clock = Clock() if clock is None else clock
    if str(solver).lower() == "auto":
        solver = "CLARABEL" if cvx.lmi_order(problem, formulation) <= REFINE_CLARABEL_MAX_ORDER else "SCS"
    if solver.upper() == "CLARABEL" and first.solver != "CLARABEL" and not _all_tight(problem, first, threshold) \
            and not clock.spent():
        # The levels read tight columns off maximally complementary multipliers, which an
        # interior-point solve gives and a first-order one (SCS) does not: re-solve
        # Problem 1 with Clarabel, keeping the first solve if that fails. Not needed when
        # the first solve's multipliers already mark every column tight: by complementary
        # slackness a column with a positive multiplier is tight in every optimum, so
        # there is a single level (prefix: the re-solve cost 90 s at d = 64).
        log.info("SDP on %r: Problem 1 again by CLARABEL for the levels' multipliers, %.1f s so far", problem,
                 clock.elapsed())
        try:
            first = solve_level(problem, formulation=formulation, solver="CLARABEL", solver_tol=solver_tol,
                                solver_options=cvx.time_limit_options("CLARABEL", clock.left(), solver_options),
                                verbose=verbose)
            info = dict(info, refine_resolved=True, compile_time=info.get("compile_time", 0.0) + first.compile_time,
                        solve_time=info.get("solve_time", 0.0) + first.solve_time)
        except SolverError:
            pass
    ref = refine_levels(problem, first, solve_level=solve_level, callback=callback, formulation=formulation,
                        solver=solver, solver_tol=solver_tol, solver_options=solver_options, verbose=verbose,
                        slack=slack, threshold=threshold, cost_rtol=tol, clock=clock)
    info = dict(info, refine_levels=ref.levels, refine_inaccurate=ref.inaccurate, refine_solver=solver,
                refine_retries=ref.retries, refine_slack=ref.slack, refine_single=ref.single,
                compile_time=info.get("compile_time", 0.0) + ref.compile_time,
                solve_time=info.get("solve_time", 0.0) + ref.solve_time, **_stop_info(problem, ref))
    if ref.failed:
        info["refine_failed"] = ref.failed
        info["refine_free"] = ref.free
    sigma = ref.sigma
    cost_first = privacy.privacy_cost(cvx.normalise_sigma(problem, first.sigma)[0], problem.B)
    cost_ref = privacy.privacy_cost(cvx.normalise_sigma(problem, sigma)[0], problem.B)
    if not cost_ref <= cost_first * (1 + max(tol, 2.0 * ref.slack)) or (
            cost_ref > cost_first and not _certified(problem, sigma, first, tol)):
        info["refine_failed"] = (f"refined Sigma costs {cost_ref:.10g} > {cost_first:.10g} of the first level, "
                                 f"more than the certified tol={tol:g} allows "
                                 f"({ref.inaccurate} inaccurate level solves by {solver})")
        warnings.warn(f"refine: {info['refine_failed']}; returning the unrefined optimum. "
                      "Try solver='CLARABEL' for the refinement", RuntimeWarning, stacklevel=4)
        sigma = first.sigma
        info["refine_complete"] = False
    status = USER_STOPPED if ref.stopped else MAX_ITER if ref.timed_out else first.status
    return Refinement(sigma=sigma, first=first, status=status, nit=(first.nit or 0) + ref.nit, info=info,
                      message=_stop_message(problem, ref, clock))


def _stop_info(problem: FitnessProblem, ref: RefineResult) -> dict:
    """``refine_complete`` and, for a refinement stopped short, ``refine_stopped`` and ``refine_free``."""
    free = sorted(set(range(problem.d)).difference(*(lev["columns"] for lev in ref.levels)))
    out = {"refine_complete": not free and not ref.failed}
    if ref.stopped or ref.timed_out:
        out.update(refine_stopped="callback" if ref.stopped else "max_time", refine_free=free)
    return out


def _stop_message(problem: FitnessProblem, ref: RefineResult, clock: Clock) -> str:
    """Why a refinement stopped short, for the Solution's message ("" when it did not)."""
    if not (ref.stopped or ref.timed_out):
        return ""
    fixed = sum(len(lev["columns"]) for lev in ref.levels)
    why = "a callback raised StopIteration" if ref.stopped else f"max_time = {clock.max_time:g} s ran out"
    what = "the unique ≺R-minimal optimum of Problem 1" if fixed == problem.d else \
        "an optimum of Problem 1, certified by the first level, but not its unique ≺R-minimal one"
    return (f"{why} after {len(ref.levels)} refinement level(s), {fixed} of {problem.d} columns fixed "
            f"({clock.elapsed():.1f} s): Sigma is {what}")
