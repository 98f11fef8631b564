"""``solve_kron``: Problem 1 for a product workload, Sigma in factors.

Solver layer, top of ``ffu_cvx.solvers.kron``: imports numpy, ``solvers.options``, ``model`` (``problem``,
``status``, ``validation``), ``workloads.products``, ``smii`` and the package's ``coupled``, ``factors``,
``hierarchy``, ``quotient``, ``reduce``, ``simple``, ``solution`` and ``terms``. Its settings are one frozen value, :class:`KronOptions` (or its fields by keyword).
The structure is chosen from the workload:

- one product group: the exact product of per-attribute optima (``"product"``);
- a union whose reduction by exchangeable values (:mod:`ffu_cvx.solvers.kron.exchange`,
  :mod:`ffu_cvx.solvers.kron.reduce`) has blocks of at most :data:`ffu_cvx.solvers.kron.reduce.DENSE_D_MAX`
  class tuples (:data:`ONE_BLOCK_D_MAX` when it has a single block): solved exactly with
  a certified gap (``"symmetric"``; one block is a dense Problem 1 for SM-II, several go to
  the block dual ascent, with ``max_time`` and progress logs); when it ends above ``tol``
  the simple structures below are computed too and the cheaper mechanism returned, with
  the better bound, so the result is never above them;
- an attribute read through class sums only (:mod:`ffu_cvx.solvers.kron.quotient`) is first replaced by
  its classes when that quotient reduces exactly, and the solution lifted back;
- a union still too large whose groups, split by their block on one attribute, each reduce
  (the national, state and county tables of a geography hierarchy): the parts solved apart and
  composed (``"levels"``), bounded by the best part and by the whole problem's dual ascent on
  blocks coupled across the split attribute's classes (:mod:`ffu_cvx.solvers.kron.coupled`: a
  rigorous bound; its primal points are priced approximately, and the best mixture of them is formed
  and released where, priced exactly, it costs less than the levels composed) or, where
  that does not apply, for a nested partition hierarchy, by uniform sub-hierarchies
  (:mod:`ffu_cvx.solvers.kron.hierarchy`); then compared with the simple structures below;
- otherwise the better of the two simple structures (one Kronecker Sigma by
  block-coordinate descent, ``"kronecker"``; independent per-group products,
  ``"independent"``), certified against the best single-group optimum (a valid bound:
  dropping groups can only lower the optimum), the honest gap in the Solution.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings

import numpy as np

from ...model import validation
from ...model.problem import FitnessProblem
from ...model.status import OPTIMAL, OPTIMAL_INACCURATE, USER_STOPPED
from ...workloads.products import ProductProblem, ProductWorkload
from ..options import build
from ..smii import solve_smii
from .factors import FACTOR_METHODS, FactorSolver
from .coupled import CoupledBlock
from .reduce import (ANDERSON_MEMORY, DENSE_D_MAX, group_grids, ascent, classes_of, coupled_reduction,
                     mixed_covariances, mixture, reached_patterns, reduce)
from .simple import independent, kronecker_bcd, product_bound, product_term
from .hierarchy import UNIFORM_TOL, best_sub_hierarchy, frontier, nested_parts, uniform_hierarchy
from .quotient import class_sum_attributes, lift, quotient
from .solution import KronSolution
from .terms import Term

__all__ = ["STRUCTURES", "ONE_BLOCK_D_MAX", "GUARD_KRONECKER_N_MAX", "COUPLED_BYTES_MAX", "KronOptions", "solve_kron",
           "structure_of"]

#: A union whose reduction has a single block is a dense Problem 1 over its class tuples;
#: SM-II takes it up to this many.
ONE_BLOCK_D_MAX = 4096

#: A symmetric solve that ends above ``tol`` is compared with the best simple structure; the
#: Kronecker descent (a dense per-attribute problem over every block of the attribute) is
#: part of it only when every attribute has at most this many values, else the independent
#: per-group products alone (closed forms for identities and totals).
GUARD_KRONECKER_N_MAX = 1024

#: Most memory one coupled block's step may hold (:attr:`ffu_cvx.solvers.kron.coupled.CoupledBlock.step_bytes`):
#: 98 MB on the census hierarchy (51 states, 200 class tuples); counties coupled across 3,143 classes
#: of a finer level could need tens of GB, and are bounded by the sub-hierarchies instead.
COUPLED_BYTES_MAX = 2 << 30

#: Tightest gap the whole problem's coupled ascent is run to: its step is approximate (about 1e-5),
#: so its primal points, which end the ascent at ``tol``, cannot certify below that.
JOINT_TOL = 1e-5

#: Last steps of the whole problem's coupled ascent kept for the mixture of its primal points
#: (:func:`ffu_cvx.solvers.kron.reduce.mixture`: a linear program with one column per step; 99 steps on
#: the census hierarchy, of which it mixes 12, from its first steps to its last), and the most memory
#: the kept steps and the program's matrix may take (fewer steps where a step has more entries: 34,302
#: on the census hierarchy, 0.82 MB a step for all of them).
MIXTURE_STEPS, MIXTURE_BYTES = 256, 1 << 28

#: Most memory the coupled blocks' formed covariances may take at once (:func:`_formable`): 0.9 GB on the
#: census hierarchy (orders 4,845 and 4,641, and smaller).
FORMED_BYTES_MAX = 2 << 30
#: Forming one mixed step's covariances costs about this many steps of the ascent (3.3 on the census
#: hierarchy: 122 s for 12 steps, against 3.1 s a step).
FORM_STEP_COST = 3.5

#: Structures ``solve_kron(structure=...)`` accepts ("auto" picks as the module docstring says).
STRUCTURES = ("auto", "product", "symmetric", "levels", "kronecker", "independent")


def _block_sizes(problem: ProductProblem, classes) -> list:
    """The size of every block of the reduction (class tuples of its free attributes on their averages)."""
    grids = group_grids(problem.groups, classes)
    return [math.prod(c.r for c, k in zip(classes, p) if c.r >= 2 and k == -1) for p in reached_patterns(grids, classes)]


def structure_of(problem: ProductProblem, classes=None) -> tuple[str, str]:
    """``(structure, why)`` that ``structure="auto"`` picks for ``problem`` (``classes``: the
    exchangeable classes when already known)."""
    groups = problem.groups
    if len(groups) == 1:
        return "product", "one product group: the product of per-attribute optima is exact"
    classes = classes_of(problem.workload) if classes is None else classes
    sizes = _block_sizes(problem, classes)
    D = max(sizes)
    names = problem.domain.names
    where = ", ".join(f"{names[i]} {c.r}" for i, c in enumerate(classes) if c.r >= 2) or "none"
    if D <= (ONE_BLOCK_D_MAX if len(sizes) == 1 else DENSE_D_MAX):
        return "symmetric", (f"union of {len(groups)} groups; exchangeable classes per attribute ({where}) give "
                             f"{len(sizes)} block(s), the largest of {D} class tuples: exact reduction")
    return "best simple", (f"union of {len(groups)} groups; exchangeable classes per attribute ({where}) leave a block "
                           f"of {D} > {DENSE_D_MAX} class tuples: best of one Kronecker Sigma and independent group "
                           "mechanisms")


def _factor_info(sols) -> list:
    return [dict(kind=s.problem.name, k=s.problem.k, privacy_cost=s.privacy_cost, lower_bound=s.lower_bound,
                 method=s.method, gap=s.gap) for s in sols]


def _product(problem, solver, t0, why):
    grp = problem.groups[0]
    term, sols = product_term(grp, 0, solver)
    return KronSolution.from_terms(problem, [term], lower_bound=product_bound(sols, grp.target),
                                   nit=len(sols), time=time.perf_counter() - t0, structure="product", why=why,
                                   factors=_factor_info(sols))


def _one_block(red, tol, max_time):
    """The reduction with a single block is a dense Problem 1 over its coordinates: query
    ``sqrt(beta) l`` at the group's target, cell ``t`` with basis column ``sqrt(kappa_t) b_t``."""
    blk = red.blocks[0]
    rows, c = [], []
    for g, L in blk.L.items():
        shape = np.broadcast_shapes(blk.lshape[g], np.shape(blk.beta[g]))
        lrows = np.broadcast_to(np.arange(L.shape[0]).reshape(blk.lshape[g]), shape).reshape(-1)
        beta = np.broadcast_to(blk.beta[g], shape).reshape(-1)
        keep = beta > 0
        rows.append(L[lrows[keep]] * np.sqrt(beta[keep])[:, None])
        c.append(np.full(int(keep.sum()), red.targets[g]))
    Bk = blk.B * np.sqrt(blk.kappa)
    L = np.vstack(rows)
    sol = solve_smii(FitnessProblem(L @ Bk, np.concatenate(c), basis=Bk), tol=tol,
                     **({} if max_time is None else {"max_time": max_time}))
    return (sol.sigma,), sol.lower_bound, sol.nit, sol.status, sol.history


def _symmetric(problem, tol, callback, max_iter, t0, why, max_time, classes=None, anderson=ANDERSON_MEMORY):
    red = reduce(problem.workload, classes)
    left = None if max_time is None else max(max_time - (time.perf_counter() - t0), 1e-3)
    if len(red.blocks) == 1:
        sigmas, lb, nit, status, history = _one_block(red, tol, left)
        message = ""
    else:
        res = ascent(red, tol=tol, max_iter=max_iter, callback=callback, max_time=left, anderson=anderson)
        sigmas, lb, nit, status, history, message = (res.sigmas, res.lower_bound, res.nit, res.status, res.history,
                                                     res.message)
    names = problem.domain.names
    info = dict(time=time.perf_counter() - t0, history=history, structure="symmetric", why=why,
                classes={names[i]: red.classes[i].r for i in range(len(names))},
                free=[names[i] for i in red.free], blocks=len(red.blocks), D=red.D)
    sol = KronSolution.from_terms(problem, red.terms(sigmas), status=status, message=message, lower_bound=lb,
                                  nit=nit, **info)
    if status == OPTIMAL and sol.gap > tol:
        return KronSolution.from_terms(problem, sol.terms, status=OPTIMAL_INACCURATE, lower_bound=lb, nit=nit,
                                       time=sol.time, history=history, **sol.info)
    return sol


def _simple(problem, solver, which, tol, t0, why, max_time=None):
    """The simple structures ``which`` asks for; the Kronecker descent stops at ``max_time`` (from
    ``t0``) with its last factors, and is left out when it has none by then."""
    groups = problem.groups
    terms_ind, bounds = independent(groups, solver)
    lb = max(bounds)
    candidates = {}
    if which in ("best simple", "independent"):
        candidates["independent"] = terms_ind
    if which in ("best simple", "kronecker"):
        term, _, _ = kronecker_bcd(groups, solver, deadline=None if max_time is None else t0 + max_time)
        if term is not None:
            candidates["kronecker"] = (term,)
    if not candidates:
        candidates["independent"] = terms_ind
    sols = {k: KronSolution.from_terms(problem, t, lower_bound=lb, structure=k) for k, t in candidates.items()}
    name = min(sols, key=lambda k: sols[k].privacy_cost * sols[k].max_ratio)
    costs = {k: s.privacy_cost * s.max_ratio for k, s in sols.items()}
    gap = sols[name].gap
    status = OPTIMAL if gap <= tol else OPTIMAL_INACCURATE
    message = "" if status == OPTIMAL else (
        f"structure {name!r}: certified gap {gap:.3g} against the best single-group bound; the true optimum may "
        "be anywhere in between")
    if status != OPTIMAL:
        warnings.warn(f"solve_kron: {message}", RuntimeWarning, stacklevel=3)
    return KronSolution.from_terms(problem, sols[name].terms, status=status, message=message, lower_bound=lb,
                                   nit=solver.n_solves, time=time.perf_counter() - t0, structure=name, why=why,
                                   costs=costs, bound="best single group")


def _no_worse_than_simple(problem, sol, solver, tol, t0, max_time=None):
    """``sol`` (a symmetric solve that ended above ``tol``), or the best simple structure with
    ``sol``'s status and the better of the two bounds when that one costs less: the result
    is never above the simple structures (the independent one alone when an attribute has
    more than :data:`GUARD_KRONECKER_N_MAX` values)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # its gap is reported through sol
        which = "best simple" if max(problem.domain.sizes) <= GUARD_KRONECKER_N_MAX else "independent"
        simple = _simple(problem, solver, which, tol, t0, sol.info["why"], max_time)
    if simple.privacy_cost * simple.max_ratio >= sol.privacy_cost * sol.max_ratio:
        return sol
    costs = {**simple.info["costs"], sol.info["structure"]: sol.privacy_cost * sol.max_ratio}
    info = {k: v for k, v in sol.info.items() if k not in ("structure", "costs")}
    return KronSolution.from_terms(problem, simple.terms, status=sol.status,
                                   message=f"{sol.message}; the simple structure {simple.info['structure']!r} "
                                           "costs less than the best iterate",
                                   lower_bound=max(sol.lower_bound, simple.lower_bound), nit=sol.nit,
                                   time=time.perf_counter() - t0, history=sol.history,
                                   structure=simple.info["structure"], costs=costs, **info)


def _exact(part: ProductProblem, classes=None) -> bool:
    return structure_of(part, classes)[0] in ("product", "symmetric")


def quotient_of(problem: ProductProblem, classes) -> tuple | None:
    """``(quotient problem, attributes)`` when some attributes are read through class sums only
    (:mod:`ffu_cvx.solvers.kron.quotient`) and the quotient reduces exactly; else None."""
    attrs = class_sum_attributes(group_grids(problem.groups, classes), classes)
    if not attrs:
        return None
    q = quotient(problem, classes, attrs)
    return (q, attrs) if _exact(q) else None


def _part(problem: ProductProblem, part: list) -> ProductProblem:
    return ProductProblem(ProductWorkload(problem.domain, [problem.groups[g] for g in part],
                                          name=f"{problem.name} ({len(part)} of its groups)"))


def levels_of(problem: ProductProblem, classes) -> tuple | None:
    """``(attribute, parts)``: the group indices of a union split by their block on one attribute
    (most classes first), every part reducing exactly (directly or on its classes,
    :func:`quotient_of`); None when no attribute splits it so.

    Geography hierarchies are the case in point: the national, state and county tables
    (blocks total, state ranges and identity on the county attribute) each reduce, while
    in one union the states' class averages form one block too large to solve dense.
    """
    groups = problem.groups
    for i in sorted(range(len(classes)), key=lambda i: -classes[i].r):
        if classes[i].r < 2:
            break
        parts = {}
        for g, grp in enumerate(groups):
            b = grp.blocks[i].matrix
            parts.setdefault((b.shape, b.tobytes()), []).append(g)
        parts = list(parts.values())
        if len(parts) >= 2 and all(_reduces(_part(problem, part)) for part in parts):
            return i, parts
    return None


def _reduces(part: ProductProblem) -> bool:
    """Whether ``part`` reduces exactly, directly or on its classes (its classes found once)."""
    classes = classes_of(part.workload) if len(part.groups) > 1 else None
    return _exact(part, classes) or (classes is not None and quotient_of(part, classes) is not None)


def _quotiented(problem, found, classes, opts, t0, why, callback) -> KronSolution | None:
    """The solve of :func:`quotient_of`'s problem, lifted to ``problem`` (None when its factors do
    not lift: a quotient attribute joint with others)."""
    qprob, attrs = found
    left = None if opts.max_time is None else max(opts.max_time - (time.perf_counter() - t0), 1e-3)
    sub = solve_kron(qprob, callback=callback, options=dataclasses.replace(opts, structure="auto", max_time=left))
    terms = lift(sub.terms, classes, attrs)
    if terms is None:
        return None
    names = problem.domain.names
    info = {k: v for k, v in sub.info.items() if k not in ("why", "time")}
    return KronSolution.from_terms(problem, terms, status=sub.status, message=sub.message,
                                   lower_bound=sub.lower_bound, nit=sub.nit, history=sub.history,
                                   time=time.perf_counter() - t0, why=f"{why}; {sub.info.get('why', '')}",
                                   quotient={names[i]: classes[i].r for i in attrs}, **info)


def _hierarchy(problem, i: int, opts, t0) -> dict | None:
    """When attribute ``i`` carries a hierarchy (:func:`ffu_cvx.solvers.kron.hierarchy.nested_parts`):
    the best certified bound of the uniform sub-hierarchies searched
    (``lower_bound``, and ``sub_bounds`` as ``[parts, members, bound]``) and the padded
    hierarchy's privacy cost (``optimum_at_most``: a mechanism that meets every target at that
    cost exists), within what is left of ``max_time``; None otherwise."""
    parts = nested_parts(problem, i)
    if parts is None:
        return None

    def solved(S, m):
        left = None if opts.max_time is None else opts.max_time - (time.perf_counter() - t0)
        if left is not None and left <= 0:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)   # a sub-hierarchy's own gap is not reported
            return solve_kron(uniform_hierarchy(problem, i, S, m),
                              options=dataclasses.replace(opts, structure="auto", max_time=left,
                                                          tol=max(opts.tol, UNIFORM_TOL)))

    bounds = best_sub_hierarchy(lambda S, m: getattr(solved(S, m), "lower_bound", None), frontier(parts))
    sizes = np.bincount(parts)
    padded = solved(sizes.size, int(sizes.max()))
    if not bounds or padded is None:
        return None
    return dict(lower_bound=max(bounds.values()), sub_bounds=[[S, m, b] for (S, m), b in sorted(bounds.items())],
                optimum_at_most=padded.privacy_cost * padded.max_ratio)


def _joint(problem, classes, opts, t0) -> tuple:
    """``(info, terms)``: the whole problem's dual ascent on its :func:`ffu_cvx.solvers.kron.reduce.coupled_reduction`
    within ``opts.joint_time`` seconds and what is left of ``max_time``, and the best mixture of its primal
    points formed (:func:`ffu_cvx.solvers.kron.reduce.mixture`, :func:`ffu_cvx.solvers.kron.reduce.mixed_covariances`).

    ``info``: ``lower_bound`` (rigorous), ``estimate`` (the mixture's privacy cost as its program
    prices it, from the approximate step), ``gap`` between them, ``steps``, ``mixed`` (the steps the
    mixture uses), ``status``, ``time``, ``form_time`` (``form_error`` where forming failed);
    ``terms``: the mixture as one mechanism, for :func:`_levels` to price exactly and release where it
    is cheaper, or None where forming it would pass :data:`FORMED_BYTES_MAX` or, at
    :data:`FORM_STEP_COST` ascent steps a mixed step, what is left of ``max_time``. ``(None, None)`` when the union has
    no coupled reduction with blocks of at most :data:`DENSE_D_MAX` per class and steps within
    :data:`COUPLED_BYTES_MAX`, or no time is left."""
    left = _left(opts, t0)
    seconds = min((x for x in (opts.joint_time, left) if x is not None), default=None)
    if seconds is not None and seconds <= 0:
        return None, None
    t1 = time.perf_counter()
    red = coupled_reduction(problem.workload, classes)
    if red is None or max(b.B.shape[1] if isinstance(b, CoupledBlock) else b.D for b in red.blocks) > DENSE_D_MAX:
        return None, None
    if max(b.step_bytes for b in red.blocks if isinstance(b, CoupledBlock)) > COUPLED_BYTES_MAX:
        return None, None
    left = None if seconds is None else max(seconds - (time.perf_counter() - t1), 1e-3)
    # no smoothed primal points (they refine the estimate, not the bound): a third more steps in the time
    entries = red.T + sum(math.prod(grid.shape) for grid in red.grids)      # a step's profile, variances, multipliers
    keep = max(1, min(MIXTURE_STEPS, MIXTURE_BYTES // (24 * entries)))
    res = ascent(red, tol=max(opts.tol, JOINT_TOL), max_iter=opts.max_iter, max_time=left, anderson=opts.anderson,
                 rescale_every=opts.max_iter + 1, keep_steps=keep)
    cost, weights = mixture(red, res.steps)
    estimate = min(cost, res.cost)
    mixed = int(np.count_nonzero(weights)) if cost < res.cost else 1
    info = dict(lower_bound=res.lower_bound, estimate=estimate, gap=estimate / res.lower_bound - 1.0, steps=res.nit,
                mixed=mixed, status=res.status, time=time.perf_counter() - t1,
                blocks=sum(isinstance(b, CoupledBlock) for b in red.blocks), largest=red.D, form_time=None)
    if cost == math.inf or not _formable(red, mixed * FORM_STEP_COST * info["time"] / res.nit, opts, t0):
        return info, None
    t2 = time.perf_counter()
    try:
        terms = red.formed().terms(mixed_covariances(red, res.steps, weights))
    except (ValueError, np.linalg.LinAlgError) as exc:     # a precision not positive definite in floating point
        info["form_error"] = str(exc)
        return info, None
    info["form_time"] = time.perf_counter() - t2
    return info, terms


def _formable(red, seconds: float, opts, t0) -> bool:
    """Whether the mixture's covariances may be formed: at most :data:`FORMED_BYTES_MAX` for the coupled
    blocks' (dense, ``r k0`` coordinates each: their sum and three of the largest at once) and, about
    ``seconds``, within what is left of ``max_time``."""
    sizes = [8 * (b.r * b.B.shape[0]) ** 2 for b in red.blocks if isinstance(b, CoupledBlock)]
    left = _left(opts, t0)
    return sum(sizes) + 3 * max(sizes) <= FORMED_BYTES_MAX and (left is None or left >= seconds)


def _left(opts, t0) -> float | None:
    """Seconds left of ``max_time`` (None: no limit)."""
    return None if opts.max_time is None else opts.max_time - (time.perf_counter() - t0)


def _solved_part(problem, part, opts, t0, callback, seconds=None) -> KronSolution:
    """``solve_kron`` of the groups ``part`` of ``problem``, within ``seconds`` and what is left of ``max_time``."""
    left = _left(opts, t0)
    limits = [x for x in (seconds, None if left is None else max(left, 1e-3)) if x is not None]
    return solve_kron(_part(problem, part), callback=callback,
                      options=dataclasses.replace(opts, structure="auto", max_time=min(limits, default=None)))


def _cheapest_runs(cost: dict, n: int) -> list:
    """The split of levels ``0 .. n-1`` into runs of adjacent levels (``cost[a, b]``: levels ``a .. b-1``
    solved together) of least total cost, as ``[(a, b), ...]``."""
    best = [(0.0, [])] + [(math.inf, [])] * n
    for b in range(1, n + 1):
        for a in range(b):
            if (a, b) in cost and best[a][0] + cost[a, b] < best[b][0]:
                best[b] = (best[a][0] + cost[a, b], best[a][1] + [(a, b)])
    return best[n][1]


def _run_groups(parts: list, a: int, b: int) -> list:
    """The groups of levels ``a .. b-1``."""
    return [g for part in parts[a:b] for g in part]


def _level_solves(problem, attribute, parts, opts, t0, callback) -> dict:
    """``{(a, b): solution}`` for every level alone and every run of adjacent levels (coarse to fine:
    ``parts`` sorted by their block's rows) that reads ``attribute`` through class sums only, its
    quotient reducing exactly (a nation and its states read the counties through state sums: one
    symmetric attribute of states). Runs that read the finest level's values one by one are left apart: states and
    counties together split state by state, exact but thousands of blocks, slower than apart
    and no cheaper on the census tables."""
    n, subs = len(parts), {}
    for k, part in enumerate(parts):
        left = _left(opts, t0)
        subs[k, k + 1] = _solved_part(problem, part, opts, t0, callback,
                                      None if left is None else max(left / (n - k), 1e-3))
    for length in range(2, n + 1):
        for a in range(n - length + 1):
            groups = _run_groups(parts, a, a + length)
            run, left = _part(problem, groups), _left(opts, t0)
            found = None if left is not None and left <= 0 else quotient_of(run, classes_of(run.workload))
            if found is not None and attribute in found[1]:
                subs[a, a + length] = _solved_part(problem, groups, opts, t0, callback)
    return subs


def _run_terms(run: list, sub: KronSolution) -> list:
    """The terms of ``sub`` (solved for the groups ``run``) on the whole problem's groups, scaled to meet
    their targets."""
    return [Term(t.factors, {run[g]: r for g, r in t.recon.items()}).scaled(1.0 / sub.max_ratio) for t in sub.terms]


def _levels(problem, split, classes, opts, t0, why, callback) -> KronSolution:
    """The parts of :func:`levels_of` (levels, coarse to fine) solved apart and in runs of adjacent
    levels that reduce exactly (:func:`_level_solves`; a nation and its states read the counties
    through state sums), the cheapest split into runs released together: each run's terms
    scaled to meet its own targets, the profiles added (sequential composition: the privacy
    cost is at most the sum of the runs'). The bound is the largest of any run's (each run's
    queries are a subset of the whole's) and the whole problem's (:func:`_joint`; where it does
    not apply, the sub-hierarchies' of :func:`_hierarchy`). Where the whole problem's mixture of
    primal points is formed and, priced exactly by its terms, costs less than the runs' costs added,
    it is released instead (``info["joint"]["released"]``; every part's ``released`` is then False)."""
    attribute = split[0]
    parts = sorted(split[1], key=lambda part: problem.groups[part[0]].blocks[attribute].matrix.shape[0])
    subs = _level_solves(problem, attribute, parts, opts, t0, callback)
    runs = _cheapest_runs({key: sub.privacy_cost * sub.max_ratio for key, sub in subs.items()}, len(parts))
    terms = [term for a, b in runs for term in _run_terms(_run_groups(parts, a, b), subs[a, b])]
    lb = max(sub.lower_bound for sub in subs.values())
    joint, mixed = _joint(problem, classes, opts, t0)
    hierarchy = _hierarchy(problem, attribute, opts, t0) if joint is None else None
    for found in (joint, hierarchy):
        if found is not None:
            lb = max(lb, found["lower_bound"])
    joint_released = False
    if mixed is not None:
        priced = KronSolution.from_terms(problem, mixed)
        joint["privacy_cost"] = priced.privacy_cost * priced.max_ratio
        if joint["privacy_cost"] < sum(subs[run].privacy_cost * subs[run].max_ratio for run in runs):
            terms, joint_released = [t.scaled(1.0 / priced.max_ratio) for t in mixed], True
    summary = [dict(groups=[problem.groups[g].name for g in _run_groups(parts, a, b)], levels=[a, b],
                    privacy_cost=sub.privacy_cost * sub.max_ratio, lower_bound=sub.lower_bound, gap=sub.gap,
                    status=sub.status, structure=sub.info.get("structure"), time=sub.time,
                    released=(a, b) in runs and not joint_released)
               for (a, b), sub in subs.items()]
    if joint is not None:
        joint["released"] = joint_released
    info = dict(hierarchy=hierarchy, joint=joint, parts=summary)
    sol = KronSolution.from_terms(problem, terms, lower_bound=lb, nit=sum(sub.nit or 0 for sub in subs.values()),
                                  time=time.perf_counter() - t0, structure="levels", why=why,
                                  split_on=problem.domain.names[attribute], **info)
    if sol.gap <= opts.tol:
        return sol
    padded = None if hierarchy is None else hierarchy["optimum_at_most"]
    also = " and the whole problem's" if joint is not None else " and the sub-hierarchies'" if hierarchy else ""
    how = (f"the whole problem's mixture of {joint['mixed']} primal points of its ascent on blocks coupled across "
           f"{problem.domain.names[attribute]!r} is released" if joint_released else
           f"the groups of each block on {problem.domain.names[attribute]!r} are solved apart or in runs of "
           f"adjacent levels and composed")
    message = (f"{how}: certified gap {sol.gap:.3g} against the best of the runs' bounds{also}; the true optimum "
               f"may be anywhere in between"
               + ("" if padded is None or padded >= sol.privacy_cost else
                  f" (at most {padded:.6g}, the padded hierarchy's cost)"))
    warnings.warn(f"solve_kron: {message}", RuntimeWarning, stacklevel=3)
    return dataclasses.replace(sol, status=OPTIMAL_INACCURATE, message=message)


@dataclasses.dataclass(frozen=True)
class KronOptions:
    """The settings of one Kronecker solve (:func:`solve_kron`); every field is checked when the value is
    built (a ``ValueError`` names it).

    Attributes
    ----------
    tol : float, default 1e-4
        Certified relative gap to reach (each factor solve gets a share of it).
    factor_method : {"auto", "sdp", "smii"}, default "auto"
        Solver of the per-attribute problems ("auto": closed forms for identity and
        total, the SDP up to rank 8, SM-II above).
    structure : {"auto", "product", "symmetric", "levels", "kronecker", "independent"}, default "auto"
        See :mod:`ffu_cvx.solvers.kron.driver`; "auto" records its choice in ``info["why"]``
        ("levels" only where "auto" would fall back to the simple structures).
    max_iter : int, default 20000
        Most dual-ascent steps of the symmetric structure.
    max_time : float or None, default None
        Seconds the solve may take (None: no limit): the symmetric structure's ascent, the
        levels' parts and the Kronecker descent read it (the per-group products do not); when
        they run out the result is the best certified iterate with status ``"max_iter"``. Progress is
        logged (``logging.getLogger("ffu_cvx.solvers.kron.reduce")``, INFO) every few seconds.
    anderson : int, default 5
        Memory of the Anderson acceleration of the symmetric structure's ascent once its
        certified gap is under ``kron.reduce.ANDERSON_FROM`` (0: the plain ascent; see
        docs/design/kron.rst for the comparison over 22 workloads).
    joint_time : float or None, default 300
        Seconds the levels structure may spend bounding the whole problem's optimum by its
        dual ascent on blocks coupled across the split attribute's classes (the national rows
        over states of counties; ``info["joint"]``); None: only ``max_time`` limits it, 0: not
        run (the uniform sub-hierarchies bound it instead).
    """

    tol: float = 1e-4
    factor_method: str = "auto"
    structure: str = "auto"
    max_iter: int = 20_000
    max_time: float | None = None
    anderson: int = ANDERSON_MEMORY
    joint_time: float | None = 300.0

    def __post_init__(self):
        checked = dict(tol=validation.positive(self.tol, "tol"),
                       factor_method=validation.choice(self.factor_method, "factor_method", FACTOR_METHODS),
                       structure=validation.choice(self.structure, "structure", STRUCTURES),
                       max_iter=validation.positive_int(self.max_iter, "max_iter"),
                       max_time=validation.positive(self.max_time, "max_time", allow_none=True),
                       anderson=validation.positive_int(self.anderson, "anderson", minimum=0),
                       joint_time=None if self.joint_time is None else validation.nonnegative(self.joint_time,
                                                                                                 "joint_time"))
        for name, value in checked.items():
            object.__setattr__(self, name, value)


def solve_kron(problem: ProductProblem, *, callback=None, options: KronOptions | None = None,
               **keywords) -> KronSolution:
    """Solve Problem 1 for a :class:`ffu_cvx.workloads.products.ProductProblem` with Sigma in factors.

    Parameters
    ----------
    problem : ProductProblem
        From ``FitnessProblem.from_workload(ffu.workloads.product(...))``.
    callback : callable, optional
        Called with an :class:`ffu_cvx.model.status.IntermediateResult` per dual-ascent step
        (``sigma`` is None: the iterate is structured); ``StopIteration`` stops it.
    options : KronOptions, optional
        The settings (:class:`KronOptions`, which documents each one).
    **keywords
        Fields of :class:`KronOptions` by name, replacing those of ``options``; an unknown
        name is a ``TypeError``.

    Returns
    -------
    KronSolution: ``privacy_cost``, ``variances`` (m,), ``lower_bound``, ``gap``, ``status``,
    ``terms`` and ``sample_answer_noise(rng)``; ``info["structure"]``, ``info["factors"]``.
    """
    if not isinstance(problem, ProductProblem):
        raise ValueError(f"`problem` must be a ProductProblem (FitnessProblem.from_workload of a product workload), "
                         f"got {type(problem).__name__}; for a dense FitnessProblem use method='sdp' or 'smii'")
    opts = build(KronOptions, options, keywords, "solve_kron")
    tol, structure, max_iter, max_time = opts.tol, opts.structure, opts.max_iter, opts.max_time
    t0 = time.perf_counter()
    a = len(problem.domain.sizes)
    solver = FactorSolver(opts.factor_method, tol=min(1e-6, tol / (4 * a)))
    classes = classes_of(problem.workload) if len(problem.groups) > 1 else None
    auto, why = structure_of(problem, classes)
    if structure == "auto" and classes is not None:
        found = quotient_of(problem, classes)
        sol = None if found is None else _quotiented(problem, found, classes, opts, t0,
                                                     f"{why}; read through class sums only", callback)
        if sol is not None:
            return sol
    split = None
    if classes is not None and (structure == "levels" or (structure == "auto" and auto == "best simple")):
        split = levels_of(problem, classes)
        if split is not None:
            auto, why = "levels", (f"{why}; the groups of each of the {len(split[1])} blocks on "
                                   f"{problem.domain.names[split[0]]!r} reduce exactly: solved apart and composed")
    if structure == "auto":
        structure = auto
    elif structure == "levels" and split is None:
        raise ValueError("`structure`='levels' needs a union whose groups, split by their block on one attribute, "
                         f"each reduce exactly; this one does not ({why}); use 'auto'")
    else:
        why = f"structure={structure!r} requested"
    if structure == "levels":
        sol = _levels(problem, split, classes, opts, t0, why, callback)
        return sol if sol.status == OPTIMAL else _no_worse_than_simple(problem, sol, solver, tol, t0, max_time)
    if structure == "product":
        if len(problem.groups) != 1:
            raise ValueError(f"`structure`='product' needs one product group, the workload has {len(problem.groups)}; "
                             "use 'auto'")
        return _product(problem, solver, t0, why)
    if structure == "symmetric":
        sol = _symmetric(problem, tol, callback, max_iter, t0, why, max_time, classes, opts.anderson)
        if sol.status == USER_STOPPED:
            warnings.warn("solve_kron: stopped by the callback", RuntimeWarning, stacklevel=2)
        elif sol.status != OPTIMAL:
            sol = _no_worse_than_simple(problem, sol, solver, tol, t0, max_time)
        return sol
    return _simple(problem, solver, structure, tol, t0, why, max_time)
