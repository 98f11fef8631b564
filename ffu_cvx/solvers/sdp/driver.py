"""Exact reference solver for Problem 1: the SDP of :mod:`ffu_cvx.solvers.sdp.cvx`, refined and post-checked.

Solver layer, top of the exact solver: imports numpy, ``model`` (``certificate``, ``problem``,
``result``, ``status``, ``validation``), ``solvers.options``, ``cvx`` (the model and the one level solve),
``refine`` (the ≺R driver, handed :func:`solve_level`) and ``solvers.smii``
(the warm start). Its settings are one frozen value, :class:`SDPOptions` (or its fields by
keyword). The path of ``ffu.solve(problem, method="sdp")`` is :func:`solve_sdp`:
Problem 1 solved once (:func:`first_level`: SCS warm-started from SM-II by
:func:`ffu_cvx.solvers.sdp.cvx.solve_warm`, or :func:`ffu_cvx.solvers.sdp.cvx.solve_level`, with
``solver="auto"``'s fallbacks judged by the certified gap), the refinement levels
(:func:`ffu_cvx.solvers.sdp.refine.refine_first`, unless ``refine=False``), then :func:`finish`:
``Sigma`` rescaled to meet every target, certified by the first level's multipliers,
the status decided by the certificate, and the ``Solution`` built once.

Time and progress: ``max_time`` (seconds, default None: no limit) bounds the whole solve.
The time left reaches each conic solve as the solver's own limit, no new solve (a
fallback, a refinement level) starts once it is spent, and a refinement stopped by it
returns status ``"max_iter"`` with the last level's ``Sigma``, an optimum of Problem 1
certified by the first SDP's multipliers, only not the ≺R-minimal one. Every solve and
level is logged (``logging`` loggers ``"ffu_cvx.solvers.sdp.driver"``, ``"ffu_cvx.solvers.sdp.refine"``,
``"ffu_cvx.solvers.sdp.cvx"``; INFO), and ``callback`` gets every level.

Two tolerances, two names: ``tol`` is the certified relative gap the result must
reach (as for every method of :func:`ffu_cvx.solve`); ``solver_tol`` is CVXPY's
stopping tolerance (gap and feasibility, default
:data:`ffu_cvx.solvers.sdp.cvx.DEFAULT_SOLVER_TOL`, 1e-9).

The model's names (``FORMULATIONS``, ``SOLVERS``, ``STATUS_MAP``, ``LevelResult``,
``lmi_order``, ``pick_solver``, ``solve_level``, ``normalise_sigma``) live in
:mod:`ffu_cvx.solvers.sdp.cvx` and are re-exported here for the old import paths.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import warnings

from ...model import certificate, validation
from .cvx import (AUTO_CLARABEL_MAX_ORDER, DEFAULT_SOLVER_TOL, FAIL_GAP, FORMULATIONS, SOLVERS, STATUS_MAP,
                  WARM_HIGH_SCALE, LevelResult, certified_gap, lmi_order, normalise_sigma, pick_solver, reject_if_far,
                  solve_level, solve_warm, solver_kwargs, time_limit_options)
from ...model.problem import FitnessProblem
from ...model.result import Solution
from ...model.status import MAX_ITER, OPTIMAL, OPTIMAL_INACCURATE, SOLVER_ERROR, STOPPED, USER_STOPPED, SolverError
from ..options import build
from ..smii import solve_smii
from .refine import REFINE_CLARABEL_MAX_ORDER, Clock, check_options, notify, refine_first, solver_multipliers

__all__ = ["FORMULATIONS", "SOLVERS", "STATUS_MAP", "DEFAULT_SOLVER_TOL", "AUTO_CLARABEL_MAX_ORDER", "FAIL_GAP",
           "WARM_STARTS", "WARM_SMII_TOL_FACTOR", "WARM_WIDE_ORDER", "FALLBACK_ITERS_FACTOR",
           "LevelResult", "lmi_order", "pick_solver", "solve_level", "normalise_sigma", "SDPOptions", "solve_sdp", "first_level",
           "refine", "refine_from", "finish"]

log = logging.getLogger(__name__)


def _first_info(first: LevelResult, formulation: str) -> dict:
    """The ``info`` entries of Problem 1's level solve."""
    return {"solver": first.solver, "formulation": formulation, "compile_time": first.compile_time,
            "solve_time": first.solve_time, "sdp_value": first.value, "solver_status": first.raw_status}


WARM_STARTS = ("auto", "smii", None)


def _check_warm_start(warm_start) -> None:
    if not (warm_start in WARM_STARTS or isinstance(warm_start, Solution)):
        raise ValueError(f"`warm_start` must be one of {WARM_STARTS} or a Solution, got {warm_start!r}")


@dataclasses.dataclass(frozen=True)
class SDPOptions:
    """The settings of one exact SDP solve (:func:`solve_sdp`); every field is checked when the value is
    built (a ``ValueError`` names it).

    Attributes
    ----------
    tol : float, default 1e-6
        Certified relative gap. The certificate decides the status: a gap above ``tol``
        makes the result ``"optimal_inaccurate"`` (with a warning), one below it
        ``"optimal"`` even when the solver stopped at its reduced tolerance. An
        inaccurate solve certified worse than :data:`ffu_cvx.solvers.sdp.cvx.FAIL_GAP` raises ``SolverError``.
    solver_tol : float or None, default None
        The solver's own stopping tolerance (gap and feasibility, in (0, 1)); None:
        :data:`ffu_cvx.solvers.sdp.cvx.DEFAULT_SOLVER_TOL` (1e-9).
    solver : {"auto", "CLARABEL", "SCS"}, default "auto"
        "auto" picks Clarabel (interior point) for LMIs of order <= 48 and SCS (ADMM,
        an eigendecomposition per iteration) above, where Clarabel's dense
        factorisations become the bottleneck. If that solve fails or is certified
        worse than ``tol``, "auto" falls back (:func:`first_level`): SCS -> Clarabel
        (LMI order <= :data:`ffu_cvx.solvers.sdp.refine.REFINE_CLARABEL_MAX_ORDER`) -> SCS cold
        with :data:`FALLBACK_ITERS_FACTOR` times the iterations; Clarabel -> SCS. The
        certified gap judges every attempt; ``info["fallbacks"]`` lists the ones that failed.
    refine : bool, default True
        Return the unique ≺R-minimal optimum (Theorem 5) via :mod:`ffu_cvx.solvers.sdp.refine`;
        with ``solver="auto"`` its extra levels run on Clarabel up to LMI order
        :data:`ffu_cvx.solvers.sdp.refine.REFINE_CLARABEL_MAX_ORDER` (their feasible sets are too
        thin for SCS).
    formulation : {"pair", "schur", "inverse", "dual"}, default "pair"
        See :mod:`ffu_cvx.solvers.sdp.cvx`; all are exact.
    verbose : bool, default False
        The conic solver's own output.
    solver_options : dict or None, default None
        Override the defaults of :func:`ffu_cvx.solvers.sdp.cvx.solver_kwargs`.
    warm_start : {"auto", "smii", None} or Solution, default "auto"
        Start SCS near the optimum (:func:`ffu_cvx.solvers.sdp.cvx.solve_warm`, the ``"inverse"``
        model called directly; SCS's ``scale`` is 1 from the start when ``m > k`` and
        ``k + m`` > :data:`WARM_WIDE_ORDER`, as on random ranges from d = 128):
        ``"smii"`` solves SM-II first (certified to
        ``tol`` x :data:`WARM_SMII_TOL_FACTOR`, no polish), a Solution with multipliers
        (any method) is used as given. ``"auto"`` is ``"smii"`` where
        ``solver="auto"`` resolves to SCS and ``formulation`` is ``"pair"`` or
        ``"inverse"``, else None (CVXPY's model, cold). The certificate is the SDP's own.
    max_time : float or None, default None
        Wall-clock limit in seconds for the whole solve (None or inf: none). The time
        left is each conic solve's own limit (Clarabel's ``time_limit``, SCS's
        ``time_limit_secs``) and no fallback or refinement level starts after it. Spent
        during the refinement, the result is the last level's ``Sigma`` with status
        ``"max_iter"``, ``info["refine_complete"]`` False, ``info["refine_stopped"]``
        ``"max_time"`` and ``info["refine_free"]`` the columns no level fixed: still an
        optimum of Problem 1 certified by the first SDP (``gap`` <= ``tol`` when that
        solve reached it), only not the unique ≺R-minimal one. Spent before Problem 1 is
        solved to a usable point: ``SolverError`` with status ``"max_iter"``.
    slack : float, default 1e-8
        Relative relaxation of the refinement's fixed levels, in [0, 1e-2).
    threshold : float, default 1e-3
        Relative multiplier size that marks a column tight in the refinement, in (0, 1).
    """

    tol: float = 1e-6
    solver_tol: float | None = None
    solver: str = "auto"
    refine: bool = True
    formulation: str = "pair"
    verbose: bool = False
    solver_options: dict | None = None
    warm_start: object = "auto"
    max_time: float | None = None
    slack: float = 1e-8
    threshold: float = 1e-3

    def __post_init__(self):
        if str(self.solver).upper() not in {n.upper() for n in SOLVERS}:
            raise ValueError(f"`solver` must be one of {SOLVERS}, got {self.solver!r}")
        if self.solver_options is not None and not isinstance(self.solver_options, dict):
            raise ValueError(f"`solver_options` must be a dict or None, got {type(self.solver_options).__name__}")
        _check_warm_start(self.warm_start)
        slack, threshold = check_options(self.slack, self.threshold)
        checked = dict(tol=validation.positive(self.tol, "tol"), slack=slack, threshold=threshold,
                       solver_tol=None if self.solver_tol is None else validation.fraction(self.solver_tol,
                                                                                           "solver_tol"),
                       refine=validation.flag(self.refine, "refine"),
                       formulation=validation.choice(self.formulation, "formulation", FORMULATIONS),
                       verbose=validation.flag(self.verbose, "verbose"),
                       max_time=validation.positive(self.max_time, "max_time", allow_none=True, allow_inf=True))
        for name, value in checked.items():
            object.__setattr__(self, name, value)


def solve_sdp(problem: FitnessProblem, *, callback=None, options: SDPOptions | None = None, **keywords) -> Solution:
    """Solve Problem 1 exactly as a semidefinite program (the reference solver).

    Parameters
    ----------
    problem : FitnessProblem
        ``W`` (m, d), ``c`` (m,), basis ``B`` (k, d), ``L`` (m, k).
    callback : callable, optional
        ``callback(intermediate_result)`` after every level with an
        :class:`ffu_cvx.model.status.IntermediateResult` (``method="sdp"``, ``nit`` and
        ``level`` the level number, ``privacy_cost``, ``lower_bound``, ``gap``, ``sigma``,
        ``value``, ``columns``: see :func:`ffu_cvx.solvers.sdp.refine.level_result`); raising
        ``StopIteration`` returns the current Sigma with status ``"user_stopped"``.
    options : SDPOptions, optional
        The settings (:class:`SDPOptions`, which documents each one).
    **keywords
        Fields of :class:`SDPOptions` by name, replacing those of ``options``; an unknown
        name is a ``TypeError``.

    Returns
    -------
    Solution
        ``sigma`` (k, k) with ``max_ratio == 1``, certified by the SDP multipliers
        ``lam`` (d,) and ``mu`` (m,); ``info`` holds the solver, formulation, timings
        and, with ``refine=True``, ``refine_levels`` and ``refine_complete``.
    """
    if not isinstance(problem, FitnessProblem):
        raise ValueError(f"`problem` must be a FitnessProblem, got {type(problem).__name__}")
    o = build(SDPOptions, options, keywords, "solve_sdp")
    clock = Clock(max_time=o.max_time)
    opts = dict(solver=o.solver, solver_tol=o.solver_tol, solver_options=o.solver_options, verbose=o.verbose)
    first, info = first_level(problem, formulation=o.formulation, warm_start=o.warm_start, tol=o.tol, clock=clock,
                              **opts)
    if o.refine:
        return refine_from(problem, first, t0=clock.t0, callback=callback, tol=o.tol, info=info, clock=clock,
                           formulation="pair" if o.formulation == "dual" else o.formulation, slack=o.slack,
                           threshold=o.threshold, **opts)
    stopped = notify(callback, problem, first, number=1, columns=[], first=first, clock=clock)
    return finish(problem, first.sigma, first.lam, first.mu, status=USER_STOPPED if stopped else first.status,
                  nit=first.nit, t0=clock.t0, tol=o.tol, stopped="a callback raised StopIteration" if stopped else "",
                  out_of_time=clock.spent(), **info)


#: SM-II's certified gap for a warm start, relative to ``tol``: tol / 4 leaves SCS a
#: short way to go (prefix d = 128: 1,425 iterations to a gap of 8e-9).
WARM_SMII_TOL_FACTOR = 0.25

#: "auto"'s last fallback runs SCS cold with this many times its default iterations.
FALLBACK_ITERS_FACTOR = 5



#: A warm start runs SCS at ``scale`` :data:`ffu_cvx.solvers.sdp.cvx.WARM_HIGH_SCALE` from its first
#: iteration when there are more queries than basis rows (``m > k``) and the LMI order
#: ``k + m`` exceeds this; below it :func:`ffu_cvx.solvers.sdp.cvx.solve_warm`'s own rule (a first
#: chunk at SCS's default 0.1, then 1 if the primal residual is the smaller) is faster.
#: Measured from SM-II's point, that rule against scale 1 throughout (SCS iterations to
#: the aim): random ranges d = 64 (order 191) 1,000 / 1,500, the authors' discrete (192)
#: 400 / 500, marginal (97) 350 / 500. Above: random ranges d = 128 (382; the rule kept
#: 0.1) certified gap 3.4e-6 after 1,000 and 7.1e-7 after 4,000 iterations, against the
#: aim (9.5e-8) after 1,500; d = 256 (757) 1.2e-4 after 250 (walked away) against 8.6e-7
#: after 1,000. (Where ``m = k``, prefix d = 128, 0.1 is better: 1,000 / 2,500.)
WARM_WIDE_ORDER = 256


def _warm_options(problem: FitnessProblem, solver_options: dict | None) -> dict | None:
    """SCS's options of a warm start: ``scale`` :data:`ffu_cvx.solvers.sdp.cvx.WARM_HIGH_SCALE` from the first
    iteration on a wide problem (:data:`WARM_WIDE_ORDER`), unless ``solver_options`` give one."""
    if problem.m <= problem.k or problem.k + problem.m <= WARM_WIDE_ORDER:
        return solver_options
    return {"scale": WARM_HIGH_SCALE, **(solver_options or {})}


def _warm_point(problem: FitnessProblem, warm_start, tol: float, clock: Clock):
    """``(sigma, lam, mu, label)`` of a warm start, or None when SM-II fails (the caller solves cold);
    SM-II runs at most the time ``clock`` has left."""
    if isinstance(warm_start, Solution):
        if warm_start.lam is None or warm_start.mu is None or warm_start.problem is not problem:
            raise ValueError("`warm_start` must be a Solution of this problem with multipliers (lam, mu), got one "
                             f"of method {warm_start.get('method')!r}; pass warm_start='smii' instead")
        return warm_start.sigma, warm_start.lam, warm_start.mu, f"solution ({warm_start.get('method')})"
    try:
        start = solve_smii(problem, tol=tol * WARM_SMII_TOL_FACTOR, refine=False, max_time=clock.limit())
    except SolverError:
        return None
    if start.lam is None or start.mu is None:
        return None
    return start.sigma, start.lam, start.mu, "smii"


def _attempts(problem: FitnessProblem, *, formulation, solver, warm_start, tol, solver_tol, solver_options,
              verbose, clock: Clock) -> list:
    """``(label, formulation, solve())`` in the order :func:`first_level` tries them, each
    solve limited to the time ``clock`` has left when it starts."""
    _check_warm_start(warm_start)
    name = pick_solver(problem, solver, formulation)
    auto = str(solver).lower() == "auto"
    if warm_start == "auto":
        warm_start = "smii" if auto and name == "SCS" and formulation in ("pair", "inverse") else None
    elif warm_start is not None and name != "SCS":
        raise ValueError(f"`warm_start` needs SCS; got solver={solver!r}: pass solver='SCS' or 'auto'")
    opts = dict(solver_tol=solver_tol, verbose=verbose)

    def cold(solver_name, options=solver_options):
        return lambda: solve_level(problem, formulation=formulation, solver=solver_name,
                                   solver_options=time_limit_options(solver_name, clock.left(), options), **opts)

    def warm():
        point = _warm_point(problem, warm_start, tol, clock)
        if point is None:
            raise SolverError("warm start: SM-II gave no multipliers", status=SOLVER_ERROR)
        sigma, lam, mu, label = point
        return solve_warm(problem, sigma, lam, mu, tol=tol, solver_options=_warm_options(problem, solver_options),
                          verbose=verbose, time_limit=clock.limit()), label

    first = [("SCS warm", "inverse", warm)] if warm_start is not None else [(name, formulation, cold(name))]
    if not auto:
        return first
    if name == "CLARABEL":
        return first + [("SCS", formulation, cold("SCS"))]
    more = dict(max_iters=FALLBACK_ITERS_FACTOR * solver_kwargs("SCS", 1.0, None)["max_iters"],
                **(solver_options or {}))
    rest = [("CLARABEL", formulation, cold("CLARABEL"))] if lmi_order(problem, formulation) <= \
        REFINE_CLARABEL_MAX_ORDER else []
    return first + rest + [(f"SCS x{FALLBACK_ITERS_FACTOR} iterations", formulation, cold("SCS", more))]


def first_level(problem: FitnessProblem, *, formulation: str, solver: str, warm_start, tol: float,
                solver_tol: float | None, solver_options: dict | None, verbose: bool,
                clock: Clock | None = None) -> tuple[LevelResult, dict]:
    """Solve Problem 1 once, falling back as ``solver="auto"`` says (see :func:`solve_sdp`).

    Each attempt is judged by its certified gap: the first at most ``tol`` is returned;
    if none is, the best one (the post-check then marks it inaccurate). Returns
    ``(level, info)``; raises the last ``SolverError`` (naming every attempt) when all fail,
    with status ``"max_iter"`` when ``clock``'s ``max_time`` ran out first (no attempt
    starts after it; the first always does).
    """
    clock = Clock() if clock is None else clock
    failed, best = [], None
    for label, form, run in _attempts(problem, formulation=formulation, solver=solver, warm_start=warm_start,
                                      tol=tol, solver_tol=solver_tol, solver_options=solver_options,
                                      verbose=verbose, clock=clock):
        if failed and clock.spent():
            failed.append(f"{label}: not tried, max_time = {clock.max_time:g} s spent")
            break
        t = time.perf_counter()
        log.info("SDP on %r: Problem 1 by %s (%s), %.1f s so far", problem, label, form, clock.elapsed())
        try:
            level = run()
        except SolverError as exc:
            failed.append(f"{label}: {exc.status} ({time.perf_counter() - t:.1f} s)")
            log.info("SDP on %r: %s", problem, failed[-1])
            last = exc
            continue
        level, start = level if isinstance(level, tuple) else (level, None)
        info = dict(_first_info(level, form), warm_start=start, fallbacks=list(failed))
        if start is not None:
            info["warm_time"] = time.perf_counter() - t - level.compile_time - level.solve_time
        gap = certified_gap(problem, level)
        if gap <= tol:
            return level, info
        failed.append(f"{label}: certified gap {gap:.2e} > tol ({time.perf_counter() - t:.1f} s)")
        if best is None or gap < best[2]:
            best = (level, info, gap)
    if best is not None:
        return best[0], dict(best[1], fallbacks=failed)
    if clock.spent():
        raise SolverError(f"SDP on {problem!r}: max_time = {clock.max_time:g} s ran out before Problem 1 was solved "
                          f"({'; '.join(failed)}); {last}", status=MAX_ITER, nit=getattr(last, "nit", None))
    if len(failed) == 1:
        raise last
    raise SolverError(f"SDP on {problem!r}: every solver failed ({'; '.join(failed)}); {last}", status=last.status,
                      nit=getattr(last, "nit", None))


def finish(problem: FitnessProblem, sigma, lam, mu, *, status: str, nit: int | None, t0: float, tol: float,
           stopped: str = "", out_of_time: bool = False, **info) -> Solution:
    """Post-check a solver's ``sigma`` (k, k) and build the ``Solution`` (once).

    Rescales ``sigma`` to meet every target exactly, certifies it with the multipliers
    ``lam`` (d,), ``mu`` (m,), then decides the status: an inaccurate solve certified
    worse than :data:`ffu_cvx.solvers.sdp.cvx.FAIL_GAP` raises ``SolverError``; one certified to
    ``tol`` is ``"optimal"``; an accurate one whose gap exceeds ``tol`` is
    ``"optimal_inaccurate"`` (with a ``RuntimeWarning``), or ``"max_iter"`` when
    ``out_of_time`` (``max_time`` was spent). A stopped status (``"user_stopped"``,
    ``"max_iter"``) is kept; ``stopped`` says why in the message.
    """
    sigma, ratio = normalise_sigma(problem, sigma)
    info["rescaled_by"] = ratio
    cert = certificate.certify(problem, sigma, *solver_multipliers(lam, mu))
    gap, message = cert.gap, ""
    solver, raw = info.get("solver"), info.get("solver_status", status)
    if status == OPTIMAL_INACCURATE:
        reject_if_far(gap, solver=solver, raw=str(raw), nit=nit)
    if status == OPTIMAL_INACCURATE and gap <= tol:
        # The certificate, not the solver's stopping test, decides: a solver that stops at
        # its reduced tolerance with a Sigma certified to tol has solved Problem 1.
        status = OPTIMAL
        message = (f"solver {solver} reported {info.get('solver_status', 'inaccurate')!r}, "
                   f"but the certified gap {gap:.1e} <= tol={tol:g}")
    elif status == OPTIMAL and not gap <= tol:
        status = OPTIMAL_INACCURATE
        message = f"certified gap {gap:.2e} exceeds tol={tol:g}"
    if status == OPTIMAL_INACCURATE and out_of_time:
        status, stopped = MAX_ITER, stopped or f"max_time ran out with the certified gap {gap:.2e} above tol={tol:g}"
    if status in STOPPED:
        message = f"{stopped or 'stopped'}; certified gap {gap:.1e}"
        if status == MAX_ITER and not gap <= tol:
            warnings.warn(f"solve_sdp: {message} > tol={tol:g}", RuntimeWarning, stacklevel=3)
    elif status == OPTIMAL_INACCURATE:
        message = message or f"solver {solver} stopped short of its tolerance"
        warnings.warn(f"solve_sdp: result is inaccurate ({message}); certified gap {gap:.2e}",
                      RuntimeWarning, stacklevel=3)
    elif not message:
        message = f"solved by {solver} ({info.get('formulation')}); certified gap {gap:.1e}"
    return Solution.from_sigma(problem, sigma, method="sdp", status=status, message=message, lam=cert.lam,
                               mu=cert.mu, lower_bound=cert.lower_bound, time=time.perf_counter() - t0, nit=nit,
                               **info)


def refine_from(problem: FitnessProblem, first: LevelResult, *, t0: float, info: dict, callback=None,
                formulation: str = "pair", solver: str = "auto", solver_tol: float | None = None,
                solver_options: dict | None = None, verbose: bool = False, slack: float = 1e-8,
                threshold: float = 1e-3, tol: float = 1e-6, clock: Clock | None = None) -> Solution:
    """Refine a solved Problem 1 ``first`` (:func:`ffu_cvx.solvers.sdp.refine.refine_first` with this
    module's :func:`solve_level`) and build the Solution (:func:`finish`).

    Never raises once ``first`` is solved; ``info`` is the caller's info (solver,
    timings), extended with the ``refine_*`` entries. ``clock`` (default: started at
    ``t0``, no limit) carries ``max_time``.
    """
    clock = Clock(t0=t0) if clock is None else clock
    ref = refine_first(problem, first, info=info, solve_level=solve_level, callback=callback,
                       formulation=formulation, solver=solver, solver_tol=solver_tol, solver_options=solver_options,
                       verbose=verbose, slack=slack, threshold=threshold, tol=tol, clock=clock)
    return finish(problem, ref.sigma, ref.first.lam, ref.first.mu, status=ref.status, nit=ref.nit, t0=t0, tol=tol,
                  stopped=ref.message, out_of_time=clock.spent(), **ref.info)


def refine(
    problem: FitnessProblem,
    solution: Solution | None = None,
    *,
    formulation: str = "pair",
    solver: str = "auto",
    solver_tol: float | None = None,
    solver_options: dict | None = None,
    callback=None,
    verbose: bool = False,
    slack: float = 1e-8,
    threshold: float = 1e-3,
    tol: float = 1e-6,
    max_time: float | None = None,
) -> Solution:
    """The unique ≺R-minimal optimum of Problem 1 (Theorem 5), as a ``Solution``.

    Parameters
    ----------
    problem : FitnessProblem
        ``W`` (m, d), ``c`` (m,), ``B`` (k, d), ``L`` (m, k).
    solution : Solution, optional
        Used only if it is an unrefined exact SDP solution of ``problem``
        (``solve_sdp(problem, refine=False)``): its ``sigma`` and multipliers seed the
        first level. Otherwise Problem 1 is solved first, because the levels rely on
        exact multipliers.
    formulation, solver, solver_tol, solver_options, callback, verbose, tol, max_time
        As in :func:`solve_sdp` (``formulation`` must be a primal one; ``max_time``
        counts from this call, a seeding ``solution``'s own time not included).
        ``solver="auto"`` solves the levels after the first with Clarabel up to LMI
        order :data:`ffu_cvx.solvers.sdp.refine.REFINE_CLARABEL_MAX_ORDER`.
    slack : float
        Relative relaxation of fixed levels (default 1e-8).
    threshold : float
        Relative multiplier size that marks a column tight (default 1e-3).

    Returns
    -------
    Solution
        With ``info["refine_levels"]``: a list of ``{"value", "columns"}``, decreasing.
    """
    if formulation not in FORMULATIONS or formulation == "dual":
        raise ValueError(f"`formulation` must be 'pair', 'schur' or 'inverse' for the refinement, got {formulation!r}")
    slack, threshold = check_options(slack, threshold)
    tol = validation.positive(tol, "tol")
    clock = Clock(max_time=validation.positive(max_time, "max_time", allow_none=True, allow_inf=True))
    opts = dict(solver=solver, solver_tol=solver_tol, solver_options=solver_options, verbose=verbose)
    seeded = (isinstance(solution, Solution) and solution.method == "sdp" and solution.problem is problem
              and solution.lam is not None and "refine_levels" not in solution.info)
    if seeded:
        first = LevelResult(value=float(solution.privacy_cost), sigma=solution.sigma, lam=solution.lam,
                            mu=solution.mu, status=solution.status, solver=solution.info.get("solver", "CLARABEL"),
                            nit=solution.nit or 0, compile_time=0.0, solve_time=0.0,
                            raw_status=solution.info.get("solver_status", ""))
    else:
        first = solve_level(problem, formulation=formulation, **dict(opts, solver_options=time_limit_options(
            pick_solver(problem, solver, formulation), clock.left(), solver_options)))
    return refine_from(problem, first, t0=clock.t0, info=_first_info(first, formulation), callback=callback,
                       formulation=formulation, slack=slack, threshold=threshold, tol=tol, clock=clock, **opts)
