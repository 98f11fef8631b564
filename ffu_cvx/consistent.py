"""Consistent, non-negative, integer tables from a release, with bootstrap intervals.

Mechanisms layer: imports numpy, scipy.stats, ``gls`` (the whitened operators), ``nonneg`` (the
bound-constrained fit), ``files``, ``memory``, ``product_release`` (the noise source of a solution), ``products``,
``release`` and ``validation``.

:func:`estimate` turns the released answers ``a`` of a product workload into

1. **one histogram** ``x_hat`` (d,), the generalised least squares (GLS) estimate under the
   mechanism's own noise covariance ``C = W Sigma W^T``:
   ``x_hat = argmin_{x >= 0} (a - W x)^T C^+ (a - W x)``, solved by L-BFGS with bounds
   (:mod:`ffu_cvx.nonneg`) on the whitened form of :mod:`ffu_cvx.gls` (nothing d x d or m x d is formed for a
   structured solution). The pseudo-inverse is the GLS of the answers: their noise lives
   in the range of ``L``, where ``C^+`` inverts ``C``; when the answers determine the basis
   measurements ``y = B x + N(0, Sigma)`` it is the GLS of ``y`` under ``Sigma``, the
   best linear unbiased estimate before the bounds. The objective depends on ``x``
   through ``B x`` only, so ``W x_hat`` is unique even where ``x_hat`` is not;
2. **an integer histogram** by cumulative (systematic) rounding in row-major cell order:
   cell ``i`` gets ``round(S_i) - round(S_{i-1})`` with ``S`` the running sum of ``x_hat``,
   so every cell, and every run of consecutive cells, stays within 1 of its unrounded
   sum, no cell is negative and the total is the rounded total;
3. **the published tables** ``W x_int``: integers (the built-in blocks are 0/1), non-negative, and every table sums
   exactly to the totals it nests in, because they are all the same histogram's sums;
4. **bootstrap intervals**: a parametric bootstrap draws ``B`` new releases
   ``W x_hat + noise`` with the mechanism's own noise, re-estimates each (from ``x_hat``),
   and reports for each published value ``t`` the normal interval
   ``t +- q s`` with ``s`` the replicates' standard deviation and ``q`` the Student-t
   quantile with ``B - 1`` degrees of freedom (``s`` is estimated from ``B`` draws),
   floored at 0 and widened to integers. Non-negativity biases sums of many small cells
   upwards, and the bias at ``x_hat`` (more cells at 0 than the truth) is not the bias
   at the truth, so the intervals that read the replicates' quantiles miss on one side:
   on the agency benchmark (``results/bench_consistent.md``, 95%, ``B = 60``, 19 releases)
   the percentile interval covers 82% of the county totals, the basic one 59% of the
   age x sex x county cells, and their union over-covers (97.4%: 96.9 / 97.6 / 95.9% on
   county totals / cells / race x county). This interval covers 94.3% over 60 releases
   (93.5 / 94.3 / 94.8%), each table within 2 points of nominal.

Post-processing costs no privacy, but the estimate is no longer unbiased: the raw
answers keep their exact intervals, and :meth:`Consistent.to_release` lists the steps
in the release's statement. Past :data:`MAX_CELLS` cells a histogram is not held and
:func:`estimate` refuses, naming the size and what to do instead.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import time
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from . import fingerprint, gls, noise, nonneg, validation
from .files import atomic_write_bytes, check_output
from .memory import human_bytes
from .product_release import noise_source
from .products import ProductWorkload
from .release import SIDECAR_SUFFIX, Release, check_level, sidecar_path

__all__ = ["Consistent", "estimate", "systematic_round", "MAX_CELLS", "GTOL", "START_ITERATIONS", "COLUMNS"]

#: Largest domain (cells) whose histogram :func:`estimate` holds.
MAX_CELLS = 10 ** 7
#: Projected-gradient tolerance of the fit, relative to the privacy cost ``alpha`` (the largest
#: diagonal of ``W^T C^+ W = B^T Sigma^{-1} B``: the curvature of the objective along one cell).
GTOL = 1e-4
#: Multiplicative updates that make the fit's start (:func:`_multiplicative_start`): they cost
#: a forward and an adjoint of ``W`` each and bring the objective within a few times its
#: final value; with 40 the projected L-BFGS needs a third fewer iterations than from the
#: scaled gradient (195 to 129 on a 10^6-cell product, 141 with 20: ``results/bench_consistent.md``);
#: more gain little, as the updates converge to another (Poisson-likelihood) fit.
START_ITERATIONS = 40
#: Relative agreement asked of the release's privacy cost and the solution's (the same mechanism).
COST_RTOL = 1e-9
#: Columns of :meth:`Consistent.csv_bytes`.
COLUMNS = ("query", "label", "answer", "lower", "upper", "consistent", "published", "bootstrap_lower",
           "bootstrap_upper")


@dataclass(frozen=True)
class Consistent:
    """Consistent tables estimated from one release (see the module docstring).

    histogram : (d,) the non-negative GLS estimate ``x_hat``; integer_histogram : (d,)
    int64 its systematic rounding, or None; answers : (m,) ``W x_hat``; integer_answers :
    (m,) ``W x_int`` or None; lower, upper : (m,) the bootstrap interval of the published
    values at ``level``, or None without a bootstrap; replicates : bootstrap draws made;
    method : one sentence; steps : the post-processing steps for the privacy statement;
    info : the fit's numbers (iterations, seconds, objective, bootstrap seconds);
    release_digest : :attr:`ffu_cvx.release.Release.answers_digest` of the release it was
    estimated from (:meth:`to_release` and :meth:`csv_bytes` take that release only).
    """

    histogram: np.ndarray
    integer_histogram: np.ndarray | None
    answers: np.ndarray
    integer_answers: np.ndarray | None
    lower: np.ndarray | None
    upper: np.ndarray | None
    level: float
    replicates: int
    method: str
    steps: tuple
    info: dict = field(default_factory=dict)
    release_digest: str = ""

    @property
    def published(self) -> np.ndarray:
        """The values to publish: the integer answers if rounded, else the consistent answers."""
        return self.answers if self.integer_answers is None else self.integer_answers

    def to_release(self, release: Release) -> Release:
        """``release`` with :attr:`published` as its ``postprocessed`` column, the bootstrap interval as
        its ``postprocessed_lower`` / ``postprocessed_upper`` columns and :attr:`steps` in its statement.

        The answers, their exact intervals and the privacy cost are the release's own; any other
        release is refused.
        """
        self._check_release(release)
        interval = None
        if self.lower is not None:
            interval = (self.lower, self.upper, f"{self.level:.0%} parametric bootstrap intervals from "
                                                f"{self.replicates} re-releases, normal with the replicates' "
                                                "standard deviation")
        return dataclasses.replace(release, postprocessed=np.asarray(self.published, dtype=float),
                                   postprocessing=self.steps, postprocessed_interval=interval)

    def csv_bytes(self, release: Release) -> bytes:
        """One row per query: the raw answer and its exact interval, the consistent and published
        values and the bootstrap interval (columns :data:`COLUMNS`; bootstrap ones empty without it)."""
        self._check_release(release)
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(COLUMNS)
        labels = release.labels if len(release.labels) == release.m else ("",) * release.m
        none = [None] * release.m
        lo = none if self.lower is None else self.lower
        hi = none if self.upper is None else self.upper
        for j, label in zip(range(release.m), labels):
            row = (j, label, release.answers[j], release.lower[j], release.upper[j], self.answers[j],
                   self.published[j], lo[j], hi[j])
            w.writerow(["" if v is None else repr(float(v)) if isinstance(v, (float, np.floating)) else v
                        for v in row])
        return buf.getvalue().encode()

    def to_csv(self, path, release: Release, overwrite: bool = False):
        """Write :meth:`csv_bytes` to ``path`` atomically: never onto a release's statement
        (``*.privacy.json``) or answers (a file with a statement beside it), ``overwrite`` or not."""
        path = check_output(path, "consistent tables", release.inputs, overwrite)
        if path.name.endswith(SIDECAR_SUFFIX) or sidecar_path(path).exists():
            raise ValueError(f"consistent tables {path} would replace a release's "
                             f"{'privacy statement' if path.name.endswith(SIDECAR_SUFFIX) else 'answers'}; "
                             "choose another file (overwrite=True never replaces a release's files)")
        return atomic_write_bytes(path, self.csv_bytes(release))

    def _check_release(self, release: Release) -> None:
        """``release`` is the one this estimate was made from, or ``ValueError``."""
        if not isinstance(release, Release) or release.answers_digest != self.release_digest:
            got = release.answers_digest[:19] if isinstance(release, Release) else type(release).__name__
            raise ValueError(f"this estimate was made from the release with answers {self.release_digest[:19]}..., "
                             f"not from this one ({got}...): derived tables go only beside their own release")


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


def _multiplicative_start(op, answers: np.ndarray) -> np.ndarray:
    """:data:`START_ITERATIONS` multiplicative (EM) updates ``x <- x * W^T(a+ / W x) / W^T 1`` from a flat
    histogram, ``a+`` the answers floored at 1/2: positive, and close to every table at once."""
    coverage = op.answers_adjoint(np.ones(answers.shape[0]))
    covered = coverage > 0
    positive = np.maximum(answers, 0.5)
    x = np.where(covered, positive.sum() / max(coverage.sum(), 1e-300), 0.0)
    for _ in range(START_ITERATIONS):
        x *= np.divide(op.answers_adjoint(positive / np.maximum(op.answers(x), 1e-12)), coverage,
                       out=np.zeros(op.d), where=covered)
    return x


def _start(op, answers: np.ndarray, z: np.ndarray, nonnegative: bool) -> np.ndarray:
    """The fit's start: multiplicative updates for a non-negative fit of a non-negative workload, else
    the scaled gradient."""
    if nonnegative and op.nonnegative:
        return _multiplicative_start(op, answers)
    return _scaled_gradient_start(op, z, nonnegative)


class _Estimator:
    """One fit configuration, reused by the bootstrap: operator, bounds, rounding, tolerance."""

    def __init__(self, op, nonnegative: bool, integer: bool, gtol: float, fdec: float, solver: str):
        self.op, self.nonnegative, self.integer, self.solver = op, nonnegative, integer, solver
        self.gtol, self.fdec = gtol, fdec

    def fit(self, answers: np.ndarray, x0=None) -> tuple[np.ndarray, dict]:
        z = self.op.whiten(answers)
        x0 = _start(self.op, answers, z, self.nonnegative) if x0 is None else x0
        return nonneg.fit(self.op, z, x0, nonnegative=self.nonnegative, gtol=self.gtol, fdec=self.fdec,
                          solver=self.solver)

    def published(self, x: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
        """``(integer histogram or None, published answers)`` of an estimate."""
        if not self.integer:
            return None, self.op.answers(x)
        xi = systematic_round(x)
        return xi, self.op.answers(xi.astype(float))


def _bootstrap(est: _Estimator, source, x_hat: np.ndarray, center: np.ndarray, B: int, level: float, rng):
    """The bootstrap-t-quantile normal interval of ``center`` at ``level`` (see the module docstring)."""
    exact = est.op.answers(x_hat)
    draws = np.empty((B, center.shape[0]))
    for b in range(B):
        answers = exact + np.asarray(source.sample_answer_noise(rng), dtype=float)
        x_b, _ = est.fit(answers, x_hat)
        draws[b] = est.published(x_b)[1]
    half = stats.t.ppf(0.5 + 0.5 * level, B - 1) * draws.std(axis=0, ddof=1)
    lower, upper = center - half, center + half
    if est.nonnegative:
        lower = np.maximum(lower, 0.0)
    if est.integer:
        lower, upper = np.floor(lower), np.ceil(upper)
    return lower, upper


def _check(release, solution, workload, max_cells: int):
    """The noise source of ``solution`` for ``workload``, after checking the release is its and the size."""
    if not isinstance(workload, ProductWorkload):
        raise ValueError(f"`workload` must be a ProductWorkload (ffu.workloads.product), got {type(workload).__name__}")
    if not isinstance(release, Release):
        raise ValueError(f"`release` must be a Release (ffu.release_product), got {type(release).__name__}")
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


def _steps(d: int, nonnegative: bool, integer: bool, B: int, level: float) -> tuple:
    bound = " with every cell >= 0" if nonnegative else ""
    steps = [f"one histogram of {d} cells estimated from the released answers by generalised least squares under "
             f"the mechanism's own noise covariance{bound}; every published value is a sum of that histogram, so "
             "the tables add up; the estimate is no longer unbiased"]
    if integer:
        steps.append("the histogram rounded to integers by cumulative (systematic) rounding in cell order: each "
                     "cell and each run of consecutive cells within 1 of its unrounded sum")
    if B:
        steps.append(f"uncertainty of the published values: {level:.0%} parametric bootstrap intervals "
                     f"({B} re-releases from the estimate with the mechanism's noise, each re-estimated; the "
                     "published value plus or minus a t quantile times the replicates' standard deviation); the exact "
                     "intervals are those of the raw answers")
    return tuple(steps)


def estimate(release: Release, solution, workload: ProductWorkload, *, nonnegative: bool = True,
             integer: bool = True, bootstrap: int = 200, rng=None, level: float | None = None,
             max_cells: int = MAX_CELLS, gtol: float = GTOL, fdec: float = nonneg.FDEC,
             solver: str = "auto") -> Consistent:
    """Consistent (non-negative, integer) tables of ``workload`` from ``release``, with bootstrap intervals.

    Parameters
    ----------
    release : Release of ``workload`` (``ffu.release_product(solution, workload, counts)``).
    solution : the Solution (structured or dense) or GaussianMechanism whose noise it drew.
    workload : ProductWorkload.
    nonnegative : every cell of the histogram >= 0. integer : round it (systematically).
    bootstrap : replicates of the parametric bootstrap (0: no intervals, else at least 2).
    rng : None, a seed or a Generator for the bootstrap's noise; its stream is independent of the
        release's noise even when the release was drawn with the same seed
        (:func:`ffu_cvx.noise.independent_stream`).
    level : confidence level of the bootstrap intervals (default the release's).
    max_cells : largest domain to hold a histogram for (see :data:`MAX_CELLS`).
    gtol : projected-gradient tolerance of the fit relative to the privacy cost.
    fdec : the projected solver's stall tolerance, in units of the noise's variance
        (:data:`ffu_cvx.nonneg.FDEC`; 0 solves to ``gtol`` or ``ftol``).
    solver : see :mod:`ffu_cvx.nonneg` ("auto": the projected L-BFGS).

    Returns
    -------
    Consistent (see its docstring); ``.to_release(release)`` puts it into the release.
    """
    max_cells = validation.positive_int(max_cells, "max_cells")
    B = validation.positive_int(bootstrap, "bootstrap", minimum=0)
    if B == 1:
        raise ValueError("`bootstrap` must be 0 (no intervals) or at least 2 (a standard deviation needs two draws)")
    level = release.level if level is None else check_level(level)
    gtol = validation.positive(gtol, "gtol")
    fdec = validation.nonnegative(fdec, "fdec")
    solver = validation.choice(solver, "solver", nonneg.SOLVERS)
    source, alpha = _check(release, solution, workload, max_cells)
    est = _Estimator(gls.operator(getattr(solution, "solution", solution), workload), bool(nonnegative),
                     bool(integer), gtol * alpha, fdec, solver)
    x_hat, info = est.fit(np.asarray(release.answers, dtype=float))
    xi, published = est.published(x_hat)
    lower = upper = None
    if B:
        t0 = time.perf_counter()
        lower, upper = _bootstrap(est, source, x_hat, published, B, level, noise.independent_stream(rng, "bootstrap"))
        info["bootstrap_seconds"] = time.perf_counter() - t0
    return Consistent(histogram=x_hat, integer_histogram=xi, answers=est.op.answers(x_hat),
                      integer_answers=published if integer else None, lower=lower, upper=upper, level=level,
                      replicates=B, method="GLS under the mechanism's covariance" + (", non-negative" if nonnegative
                                                                                    else ""),
                      steps=_steps(workload.d, bool(nonnegative), bool(integer), B, level), info=info,
                      release_digest=release.answers_digest)
