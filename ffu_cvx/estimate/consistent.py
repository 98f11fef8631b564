"""Consistent, non-negative, integer tables from a release, with intervals that hold at the truth.

Estimate layer, its top: imports numpy, ``model`` (``fingerprint``, ``memory``, ``validation``),
``workloads.products``, ``release`` (``product_release`` (the noise source of a solution), ``release``) and the
estimate modules ``gls`` (the whitened operators), ``nonneg`` (the bound-constrained fit) and ``topdown`` (nested
count tables).

:func:`estimate` turns the released answers ``a`` of a product workload into published tables in
three steps, each checked after the fact:

1. **unbiased and consistent values** ``a_hat = W x_tilde``: the generalised least squares (GLS)
   estimate under the mechanism's own noise covariance ``C = W Sigma W^T``,
   ``x_tilde = argmin_x (a - W x)^T C^+ (a - W x)`` (:mod:`ffu_cvx.estimate.gls`, solved by
   :mod:`ffu_cvx.estimate.nonneg` without bounds; nothing d x d or m x d is formed). It is the best
   linear unbiased estimate of every query, so no query's variance exceeds its raw
   answer's. The optimal mechanisms' answers are already consistent (they are linear images
   of one set of basis measurements): then ``a_hat = a`` and, when one table of the workload
   determines all the others, no fit is made;
2. **non-negative integer tables** (``method="topdown"``, the default for tables of counts):
   :mod:`ffu_cvx.estimate.topdown` fixes the coarse tables first and fits each finer one to its own
   ``a_hat`` subject to the integer sums already published above it, then rounds it under
   control (every sum it nests in kept exactly). Aggregates keep the accuracy of their
   unbiased values (rounding adds at most 1/12 to a variance), and non-negativity improves
   the sparse tables without pushing their zeros into the totals. ``method="gls"`` (any
   product workload) instead fits one non-negative histogram to every answer at once,
   ``argmin_{x >= 0} (a - W x)^T C^+ (a - W x)``, and rounds it systematically in cell order:
   accurate on dense data, but on sparse data its totals carry the zeros' upward bias;
3. **intervals at the truth**: the exact Gaussian interval of each published value's unbiased
   estimate, ``a_hat_j +- z sqrt(v_j)`` with ``v_j`` the raw answer's variance (the GLS
   variance itself when ``a_hat = a``, an upper bound on it otherwise), floored at 0 (a
   count is never negative), widened to integers and to contain the published value. Each
   covers the true value with at least the stated probability, whatever the cell's size:
   the published values are biased near 0 but the intervals are not centred on them.

Post-processing costs no privacy. The result is bound to its release: :func:`estimate` refuses a
release of another workload or mechanism, and :meth:`Consistent.to_release`, :meth:`Consistent.csv_bytes`
and :meth:`Consistent.to_csv` refuse any release but their own. Past :data:`MAX_CELLS` cells a histogram
is not held and :func:`estimate` refuses, naming the size and what to do instead.
"""

from __future__ import annotations

import csv
import io
import logging
import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..model import fingerprint, validation
from ..model.memory import human_bytes
from ..release.product_release import noise_source
from ..release.release import Release, check_level, half_width
from ..workloads.products import ProductWorkload
from . import gls, nonneg, topdown

__all__ = ["Consistent", "estimate", "systematic_round", "METHODS", "MAX_CELLS", "GTOL",
           "CONSISTENT_RTOL", "CONSISTENT_OBJECTIVE", "PROGRESS_SECONDS", "COLUMNS"]

_log = logging.getLogger(__name__)

#: Methods :func:`estimate` accepts ("auto": "topdown" for tables of counts, else "gls").
METHODS = ("auto", "topdown", "gls")
#: Largest domain (cells) whose histogram :func:`estimate` holds.
MAX_CELLS = 10 ** 7
#: Projected-gradient tolerance of the fits, relative to the privacy cost ``alpha`` (the largest
#: diagonal of ``W^T C^+ W = B^T Sigma^{-1} B``: the curvature of the objective along one cell).
GTOL = 1e-4
#: Relative agreement asked of the release's privacy cost and the solution's (the same mechanism).
COST_RTOL = 1e-9
#: Answers within this many standard deviations of consistent ones are taken as consistent (float error).
CONSISTENT_RTOL = 1e-6
#: GLS objective (half the squared whitened residual, in units of the noise's variance) under which the
#: answers are taken as consistent: no answer is then further than ``sqrt(2e-6) = 0.0014`` of its standard
#: deviation from its GLS value, where answers of redundant measurements are about 1 away.
CONSISTENT_OBJECTIVE = 1e-6
#: An estimate running longer than this (seconds) logs its progress and the time left.
PROGRESS_SECONDS = 10.0
#: Columns of :meth:`Consistent.csv_bytes`.
COLUMNS = ("query", "label", "answer", "lower", "upper", "unbiased", "published", "published_lower",
           "published_upper")


@dataclass(frozen=True)
class Consistent:
    """Consistent tables estimated from one release (see the module docstring).

    published : (m,) the non-negative integer tables ``W x_int``; integer_histogram : (d,)
    int64 ``x_int``; unbiased : (m,) ``a_hat``, the consistent unbiased (GLS) values;
    lower, upper : (m,) the intervals of the published values at ``level``; method :
    "topdown" or "gls"; steps : the post-processing steps for the privacy statement; info :
    the fit's numbers (seconds, iterations, violations); release_digest :
    :attr:`ffu_cvx.release.release.Release.answers_digest` of the release it was estimated from, and
    workload_fingerprint the workload's (:meth:`to_release` and :meth:`csv_bytes` take that release only).
    """

    published: np.ndarray
    integer_histogram: np.ndarray
    unbiased: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    level: float
    method: str
    steps: tuple
    info: dict = field(default_factory=dict)
    release_digest: str = ""
    workload_fingerprint: str = ""

    @property
    def made_from(self) -> tuple:
        """``(answers digest, workload fingerprint)`` of the release it was estimated from."""
        return self.release_digest, self.workload_fingerprint

    def to_release(self, release: Release) -> Release:
        """``release`` with :attr:`published` as its ``postprocessed`` column, the intervals as its
        ``postprocessed_lower`` / ``postprocessed_upper`` columns and :attr:`steps` in its statement.

        The answers, their exact intervals and the privacy cost are the release's own; any other
        release is refused (:meth:`ffu_cvx.release.release.Release.derived`).
        """
        how = (f"{self.level:.0%} exact Gaussian intervals of the unbiased (GLS) estimate of each published value, "
               "floored at 0, widened to integers and to contain the published value: each covers the true value "
               f"with probability at least {self.level:.0%}")
        return _release(release).derived(self.published, self.steps, made_from=self.made_from,
                               interval=(self.lower, self.upper, how))

    def csv_bytes(self, release: Release) -> bytes:
        """One row per query: the raw answer and its exact interval, the unbiased consistent value, the
        published integer and its interval (columns :data:`COLUMNS`)."""
        _release(release).check_derived(self.made_from)
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(COLUMNS)
        labels = release.labels if len(release.labels) == release.m else ("",) * release.m
        for j, label in zip(range(release.m), labels):
            row = (j, label, release.answers[j], release.lower[j], release.upper[j], self.unbiased[j],
                   int(self.published[j]), int(self.lower[j]), int(self.upper[j]))
            w.writerow([repr(float(v)) if isinstance(v, (float, np.floating)) else v for v in row])
        return buf.getvalue().encode()

    def to_csv(self, path, release: Release, overwrite: bool = False):
        """Write :meth:`csv_bytes` to ``path`` atomically, beside its own release only and never onto a
        release's statement or answers, ``overwrite`` or not (:meth:`ffu_cvx.release.release.Release.write_derived`)."""
        return _release(release).write_derived(path, self.csv_bytes(release), "consistent tables", self.made_from, overwrite)

def _release(release) -> Release:
    if not isinstance(release, Release):
        raise ValueError(f"`release` must be a Release (ffu.release_product), got {type(release).__name__}")
    return release


def systematic_round(x: np.ndarray) -> np.ndarray:
    """Cumulative rounding of a non-negative ``x`` (d,) to int64 in its own order.

    ``out[i] = round(S_i) - round(S_{i-1})`` with ``S`` the running sum: every run of
    consecutive cells sums to within 1 of its unrounded sum (within 1/2 for a prefix),
    each cell is within 1 of ``x[i]``, and no cell is negative.
    """
    S = np.floor(np.cumsum(np.asarray(x, dtype=float)) + 0.5)
    return np.diff(S, prepend=0.0).astype(np.int64)


def _scaled_gradient_start(op, z: np.ndarray, nonnegative: bool) -> np.ndarray:
    """``s * max(F^T z, 0)`` with the best scale ``s``: a cheap feasible start."""
    g = op.adjoint(z)
    v = np.maximum(g, 0.0) if nonnegative else g
    Fv = op.forward(v)
    denom = float(Fv @ Fv)
    return v * (float(Fv @ z) / denom) if denom > 0 else np.zeros(op.d)


class _Progress:
    """Reports ``(done, seconds_left, what)`` to a callback, and to the log once past :data:`PROGRESS_SECONDS`."""

    def __init__(self, callback):
        self.callback, self.start, self.logged = callback, time.perf_counter(), 0.0

    def __call__(self, done: float, seconds_left: float, what: str) -> None:
        if self.callback is not None:
            self.callback(done, seconds_left, what)
        elapsed = time.perf_counter() - self.start
        if elapsed >= PROGRESS_SECONDS and elapsed - self.logged >= PROGRESS_SECONDS:
            self.logged = elapsed
            _log.info("consistent tables: %.0f%% done (%s), about %.0f s left", 100 * done, what, seconds_left)


def _check(release, solution, workload, max_cells: int):
    """The noise source of ``solution`` for ``workload``, after checking the release is its and the size."""
    if not isinstance(workload, ProductWorkload):
        raise ValueError(f"`workload` must be a ProductWorkload (ffu.workloads.product), got {type(workload).__name__}")
    _release(release)
    if workload.d > max_cells:
        raise ValueError(
            f"the domain has {workload.d:,} cells, more than max_cells = {max_cells:,}: one histogram would take "
            f"{human_bytes(8 * workload.d)} and the fit about {2 * nonneg.MEMORY + 10} times that. Publish the raw "
            "answers (release.postprocess), coarsen the domain (fewer attribute values), or pass a larger max_cells if "
            "the memory is there")
    if release.fingerprint != fingerprint.of(workload):
        raise ValueError("the release does not answer this workload (its fingerprint "
                         f"{str(release.fingerprint)[:20]}... is not the workload's {fingerprint.of(workload)[:20]}...): "
                         "estimate the tables of the workload the release was made for")
    source = noise_source(getattr(solution, "solution", solution), workload)
    if release.m != workload.m:
        raise ValueError(f"the release has {release.m} answers, the workload {workload.m} queries: it is not a "
                         "release of this workload")
    cost = float(source["privacy_cost"] if isinstance(source, dict) else source.privacy_cost)
    if not math.isclose(release.privacy_cost, cost, rel_tol=COST_RTOL):
        raise ValueError(f"the release's privacy cost {release.privacy_cost!r} is not the solution's {cost!r}: "
                         "give the solution whose noise the release drew")
    return source, cost


def _fit(op, answers: np.ndarray, nonnegative: bool, gtol: float, solver: str):
    """The (non-negative) GLS histogram of ``answers`` and the fit's numbers."""
    z = op.whiten(answers)
    x, info = nonneg.fit(op, z, _scaled_gradient_start(op, z, nonnegative), nonnegative=nonnegative, gtol=gtol,
                         solver=solver)
    if not info["converged"]:
        raise RuntimeError(f"the GLS fit did not converge ({info['message']} after {info['nit']} iterations, "
                           f"projected gradient {info['projected_gradient']:.3g}): the tables are not published")
    return x, info


def _nested_agree(lat, answers: np.ndarray, offsets, tol: float) -> bool:
    """Every table of ``answers`` sums to the tables nested in it, and equal tables agree."""
    published = [answers[offsets[g]:offsets[g + 1]] for g in range(lat.published)]
    table = [lat.from_published(g, published) for g in range(len(lat.shapes))]
    for g in lat.order():
        for h in lat.parents[g]:
            idx = lat.parent_index(g, h)
            on = idx >= 0
            if np.abs(np.bincount(idx[on], table[g][on], table[h].shape[0]) - table[h]).max() > tol:
                return False
    return all(np.abs(table[g] - table[lat.same[g]]).max() <= tol for g in range(lat.published))


def _unbiased(op_of, release: Release, lat, offsets, gtol: float, solver: str):
    """``(a_hat, x_tilde or None, info)``: the consistent unbiased values and the GLS histogram (if fitted)."""
    a = np.asarray(release.answers, dtype=float)
    tol = CONSISTENT_RTOL * float(np.max(release.std))
    if lat is not None and lat.cover is not None and _nested_agree(lat, a, offsets, tol):
        return a, None, {"unbiased": "the released answers (already consistent)"}
    op = op_of()
    x, info = _fit(op, a, False, gtol, solver)
    if info["objective"] <= CONSISTENT_OBJECTIVE:
        return a, x, {"unbiased": "the released answers (already consistent)", "gls_fit": info}
    return op.answers(x), x, {"unbiased": "the GLS estimate (the answers are not consistent)", "gls_fit": info}


def _atom_sums(x: np.ndarray, lat, shape: tuple) -> np.ndarray:
    """(n_atoms,) the histogram ``x`` (d,) summed over the values of each atom."""
    T = np.asarray(x, dtype=float).reshape(shape)
    for axis, atoms in enumerate(lat.atoms):
        onehot = np.zeros((atoms.size, int(atoms.max()) + 1))
        onehot[np.arange(atoms.size), atoms] = 1.0
        T = np.moveaxis(np.tensordot(T, onehot, axes=([axis], [0])), -1, axis)
    return T.reshape(-1)


def _spread(counts: np.ndarray, lat, shape: tuple) -> np.ndarray:
    """(d,) int64: each atom's integer count shared as evenly as integers allow among its values."""
    T = np.asarray(counts, dtype=np.int64).reshape(lat.atom_shape)
    for axis, atoms in enumerate(lat.atoms):
        size = np.bincount(atoms)
        rank = np.zeros(atoms.size, dtype=np.int64)
        for a in np.flatnonzero(size > 1):
            rank[atoms == a] = np.arange(size[a])
        C = np.take(T, atoms, axis=axis)
        k = size[atoms].reshape([-1 if i == axis else 1 for i in range(len(shape))])
        r = rank.reshape(k.shape)
        T = C // k + (r < C % k)
    return T.reshape(-1)


def _topdown(lat, op_of, workload, unbiased, x_tilde, gtol, solver, progress):
    """``(integer histogram (d,) int64, the top-down tables (m,), info)``."""
    off = workload.offsets
    shape = tuple(a.size for a in workload.domain.attributes)
    if lat.cover is None and x_tilde is None:
        x_tilde, _ = _fit(op_of(), unbiased, False, gtol, solver)
    atoms_hat = None if lat.cover is not None else _atom_sums(x_tilde, lat, shape)
    tables, atoms, info = topdown.estimate(lat, [unbiased[off[g]:off[g + 1]] for g in range(len(off) - 1)],
                                           atoms_hat, progress)
    x_int = _spread(atoms, lat, shape)
    return x_int, np.concatenate(tables), info


def _check_topdown(published: np.ndarray, tables: np.ndarray, info: dict) -> None:
    """The integer histogram's sums are the top-down tables, unless the rounding had to relax a sum
    (then the histogram's sums are published, consistent, and a warning says by how much)."""
    violation = sum(t["violation"] for t in info["tables"].values()) + info.get("atoms", {}).get("violation", 0.0)
    gap = float(np.abs(published - tables).max(initial=0.0))
    info["largest_difference"] = gap
    if gap and not violation:
        raise RuntimeError(f"the integer histogram does not reproduce the top-down tables (largest difference "
                           f"{gap:g}): nothing is published")
    if gap:
        warnings.warn(f"the tables' integer sums could not all be kept (their constraints conflict by {violation:g} "
                      f"counts in all); the published tables are the sums of one integer histogram, up to {gap:g} "
                      "from the top-down values", RuntimeWarning, stacklevel=3)


def _intervals(unbiased, release: Release, published, level):
    """The exact interval of each unbiased value (the release's own half-widths, :func:`half_width`), floored at
    0, widened to integers and to contain the published value."""
    half = half_width(release.variances, level, release.noise)
    lower = np.floor(np.maximum(unbiased - half, 0.0))
    upper = np.ceil(np.maximum(unbiased + half, 0.0))
    return np.minimum(lower, published), np.maximum(upper, published)


def _steps(method: str, d: int, unbiased_how: str, level: float) -> tuple:
    steps = [f"consistent unbiased values: {unbiased_how}, the generalised least squares estimate under the "
             "mechanism's own noise covariance"]
    if method == "topdown":
        steps.append("non-negative integer tables, top down: each table, coarsest first, set to the non-negative "
                     "values closest to its unbiased values whose sums are the integers already published for "
                     "the tables it contains, then rounded under control (each value within 1, every such sum "
                     "kept exactly); the values near 0 are no longer unbiased")
    else:
        steps.append(f"one non-negative histogram of {d} cells fitted to every answer by generalised least squares "
                     "under the mechanism's own noise covariance, rounded by cumulative (systematic) rounding in cell "
                     "order; every published value is a sum of it; the estimate is no longer unbiased")
    steps.append(f"uncertainty: {level:.0%} exact Gaussian intervals of each published value's unbiased estimate "
                 "(floored at 0, widened to integers and to contain the published value); each covers the true "
                 f"value with probability at least {level:.0%}")
    return tuple(steps)


def estimate(release: Release, solution, workload: ProductWorkload, *, method: str = "auto",
             level: float | None = None, max_cells: int = MAX_CELLS, gtol: float = GTOL,
             solver: str = "auto", progress=None) -> Consistent:
    """Consistent non-negative integer tables of ``workload`` from ``release``, with intervals.

    Parameters
    ----------
    release : Release of ``workload`` (``ffu.release_product(solution, workload, counts)``).
    solution : the Solution (structured or dense) or GaussianMechanism whose noise it drew.
    workload : ProductWorkload.
    method : "topdown" (every group a table of counts: blocks identity, total, bands or disjoint
        ranges), "gls" (any product workload) or "auto" (the first where it applies).
    level : confidence level of the intervals (default the release's).
    max_cells : largest domain to hold a histogram for (see :data:`MAX_CELLS`).
    gtol : projected-gradient tolerance of the fits relative to the privacy cost.
    solver : see :mod:`ffu_cvx.estimate.nonneg` ("auto": the projected L-BFGS).
    progress : None or ``progress(done, seconds_left, what)``, called as the tables are fixed
        (``done`` a fraction); past :data:`PROGRESS_SECONDS` the same is logged (logger
        ``ffu_cvx.estimate.consistent``, INFO).

    Returns
    -------
    Consistent (see its docstring); ``.to_release(release)`` puts it into the release.
    """
    max_cells = validation.positive_int(max_cells, "max_cells")
    method = validation.choice(method, "method", METHODS)
    gtol = validation.positive(gtol, "gtol")
    solver = validation.choice(solver, "solver", nonneg.SOLVERS)
    _, alpha = _check(release, solution, workload, max_cells)
    level = release.level if level is None else check_level(level)
    lat = None if method == "gls" else topdown.lattice(workload)
    if method == "topdown" and lat is None:
        bad = next(g.name for g in workload.groups if any(topdown.partition(b) is None for b in g.blocks))
        raise ValueError(f"method='topdown' needs tables of counts (blocks identity, total, bands or disjoint ranges); "
                         f"group {bad!r} is not one: use method='gls'")
    method = "gls" if lat is None else "topdown"
    cache = {}

    def op_of():
        if "op" not in cache:
            cache["op"] = gls.operator(getattr(solution, "solution", solution), workload)
        return cache["op"]

    t0 = time.perf_counter()
    report = _Progress(progress)
    unbiased, x_tilde, info = _unbiased(op_of, release, lat, workload.offsets, gtol * alpha, solver)
    if method == "topdown":
        x_int, tables, info["topdown"] = _topdown(lat, op_of, workload, unbiased, x_tilde, gtol * alpha, solver,
                                                  report)
        published = workload.apply(x_int.astype(float))
        _check_topdown(published, tables, info["topdown"])
    else:
        x, info["nonnegative_fit"] = _fit(op_of(), np.asarray(release.answers, dtype=float), True, gtol * alpha,
                                          solver)
        x_int = systematic_round(x)
        published = workload.apply(x_int.astype(float))
    report(1.0, 0.0, "done")
    lower, upper = _intervals(unbiased, release, published, level)
    info["seconds"] = time.perf_counter() - t0
    return Consistent(published=published, integer_histogram=x_int, unbiased=unbiased, lower=lower, upper=upper,
                      level=level, method=method, steps=_steps(method, workload.d, info["unbiased"], level),
                      info=info, release_digest=release.answers_digest,
                      workload_fingerprint=fingerprint.of(workload))
