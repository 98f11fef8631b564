"""Running an optimised mechanism on data: release, privacy statements, Problem 2, free queries.

Notation (fitness-for-use paper, §3): the histogram ``x`` (d,) holds non-negative
counts; the workload ``W = L B`` (m, d) is answered as ``L (B x + N(0, Sigma))`` with
``B`` (k, d), ``L`` (m, k), ``Sigma`` (k, k). The privacy profile is
``p_i = b_i^T Sigma^{-1} b_i`` (d,) and the privacy cost ``alpha = Delta_M^2 = max_i p_i``;
(eps, delta) follow from ``Delta_M`` by the exact Gaussian mechanism (Corollary 4) and
rho-zCDP is ``alpha / 2``. All accounting reuses :mod:`ffu_cvx.model.privacy`.

- :class:`GaussianMechanism` releases noisy answers with variances and confidence intervals.
- :func:`problem2` solves Problem 2 (a target (eps, delta), the best uniform scaling ``k``
  of the targets ``c``) through Theorem 8.
- :func:`free_query` and :func:`free_queries` (§3.2.1) answer extra queries later
  without raising ``alpha``: releasing ``q . x + N(0, s)`` with noise independent of
  everything released so far adds ``q_i^2 / s`` to profile entry ``i``, so the slack
  ``alpha - p_i`` of the loose columns pays for it.

Noise: a release perturbs the whitened strategy answers ``C^{-1} B x`` (``C`` the Cholesky
factor of Sigma) through a sampler of :mod:`ffu_cvx.release.noise` -- OpenDP's exact discrete
Gaussian on a lattice by default, numpy's floating-point sampler only by explicit choice
or with a seed -- and maps them back: ``L C (C^{-1} B x + N(0, I))``. Counts at which an
answer's float spacing would swallow its noise are refused first.

Release layer, its top (above the solvers): imports numpy, scipy.linalg, ``model`` (``privacy``, ``problem``,
``result``), ``workloads.products`` (Problem 2 of a product workload), ``solvers`` and the release modules
``noise`` and ``release`` (the Release type).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy import linalg

from ..model import privacy
from ..model.problem import FitnessProblem
from ..model.result import Solution
from ..solvers import solve
from ..workloads.products import ProductProblem
from . import noise
from .release import DEFAULT_DELTA, TARGET_RTOL, Release, check_level, generator, statement_text

__all__ = [
    "Release", "GaussianMechanism", "Problem2Result", "problem2",
    "FreeQuery", "free_query", "FreeQueryPlan", "free_queries", "check_histogram",
]

#: What draws a free query's noise (its privacy statement is the workload release's: the cost is unchanged).
FREE_QUERY_NOISE = ("independent Gaussian noise within the slack of the workload mechanism's privacy profile, "
                    "released with the workload answers at the same privacy cost")
#: Default relative tolerance under which a column's slack ``alpha - p_i`` counts as zero.
SLACK_RTOL = 1e-6


# ---------------------------------------------------------------------------- helpers
def check_histogram(x, d: int, name: str = "x") -> np.ndarray:
    """Validate a histogram of counts: shape (d,), finite, non-negative, integral.

    Integral floats (``3.0``) are accepted. Returns a float64 copy; raises ``ValueError``
    naming ``name``, what is wrong and where.
    """
    arr = np.asarray(x)
    if arr.dtype.kind == "b":
        raise ValueError(f"`{name}` must hold counts, not booleans")
    if arr.dtype.kind not in "iuf":
        try:
            arr = arr.astype(float)
        except (TypeError, ValueError):
            raise ValueError(f"`{name}` must be a numeric vector of counts, got dtype {arr.dtype}") from None
    if arr.shape != (d,):
        hint = "; flatten it with np.ravel" if arr.size == d else ""
        raise ValueError(f"`{name}` must have shape ({d},) (one count per histogram cell), got {arr.shape}{hint}")
    arr = arr.astype(float)
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        what = "NaN (not a number: a missing count?)" if np.isnan(arr[bad[0]]) else "infinite"
        raise ValueError(f"`{name}` must hold finite counts, but {name}[{bad[0]}] = {arr[bad[0]]!r} is {what}")
    bad = np.flatnonzero(arr < 0)
    if bad.size:
        raise ValueError(f"`{name}` must be non-negative counts, but {name}[{bad[0]}] = {arr[bad[0]]!r}")
    bad = np.flatnonzero(arr != np.round(arr))
    if bad.size:
        raise ValueError(f"`{name}` must hold whole counts, but {name}[{bad[0]}] = {arr[bad[0]]!r} is not an integer")
    return arr


def _products(A: np.ndarray, x: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray, int]:
    """``(A x in dtype, |A| |x|, d)``: what :func:`ffu_cvx.release.noise.whiten` asks of a matrix-vector product."""
    return A.astype(dtype) @ x.astype(dtype), np.abs(A) @ np.abs(x), A.shape[1]


def _check_solution(solution) -> Solution:
    if not isinstance(solution, Solution):
        raise ValueError(f"`solution` must be a Solution from ffu_cvx.solve or Solution.from_sigma, "
                         f"got {type(solution).__name__}")
    if solution.sigma is None:
        raise ValueError(f"`solution` keeps Sigma in factors (method {solution.method!r}): release its answers "
                         "with ffu_cvx.release_product(solution, workload, counts), which samples the noise from the "
                         "factors")
    return solution


# ---------------------------------------------------------------------------- release
class GaussianMechanism(privacy.GaussianPrivacy):
    """The correlated Gaussian mechanism ``M(x) = L (B x + N(0, Sigma))`` of a Solution.

    Parameters
    ----------
    solution : Solution
        Any Solution (optimised, baseline or rescaled); its ``problem`` supplies ``B``
        (k, d) and ``L`` (m, k), its ``sigma`` (k, k) the noise covariance.

    The privacy numbers are recomputed here from ``sigma`` (through its Cholesky factor)
    rather than read from the Solution's fields, so they always describe the noise that
    is actually drawn. See the module docstring for the floating-point caveat.
    """

    def __init__(self, solution: Solution):
        solution = _check_solution(solution)
        self.solution = solution
        self.problem: FitnessProblem = solution.problem
        self.sigma = np.asarray(solution.sigma, dtype=float)
        self._chol = privacy.cholesky(self.sigma, name="solution.sigma")
        #: (d,) privacy profile of the released noise.
        self.profile = privacy.profile(self.sigma, self.problem.B, chol=self._chol)
        #: alpha = Delta_M^2 = max profile.
        self.privacy_cost = float(self.profile.max())
        LC = self.problem.L @ self._chol
        #: (m,) exact variance of each noisy answer, diag(L Sigma L^T).
        self.variances = np.einsum("ij,ij->i", LC, LC)

    def covariance(self) -> np.ndarray:
        """(m, m) covariance ``L Sigma L^T`` of the noisy answers."""
        LC = self.problem.L @ self._chol
        return LC @ LC.T

    @property
    def description(self) -> str:
        """What draws the noise, for privacy statements."""
        return f"correlated Gaussian noise, Sigma from method {self.solution.method!r}"

    def statement(self, delta: float = DEFAULT_DELTA) -> str:
        """One-paragraph privacy statement for the release, naming the neighbouring relation."""
        return statement_text(self.problem.m, self.problem.name, self.epsilon(delta), delta, self.rho,
                              self.privacy_cost, self.neighbours, self.description)

    def _basis_noise(self, gen: np.random.Generator) -> np.ndarray:
        """(k,) a draw of N(0, Sigma) on ``B x``."""
        return self._chol @ gen.standard_normal(self.problem.k)

    def sample_answer_noise(self, rng=None) -> np.ndarray:
        """(m,) a draw of the answers' noise ``L N(0, Sigma)``: covariance ``L Sigma L^T``.

        The same draw as :meth:`release` makes from the same ``rng`` state (the answers
        differ from ``W x +`` this noise only by rounding).
        """
        return self.problem.L @ self._basis_noise(generator(rng))

    def whitened(self, x: np.ndarray) -> noise.Whitened:
        """The whitened strategy answers ``C^{-1} B x`` (k,) of a checked histogram (:func:`ffu_cvx.release.noise.whiten`)."""
        return noise.whiten(lambda dtype: _products(self._whitened_strategy, x, dtype), self.delta_m)

    def from_whitened(self, values: np.ndarray) -> np.ndarray:
        """The answers ``L C values`` (m,) of perturbed whitened answers ``values`` (k,)."""
        return self.problem.L @ (self._chol @ values)

    @cached_property
    def _whitened_strategy(self) -> np.ndarray:
        """``C^{-1} B`` (k, d): its columns' squared norms are the privacy profile."""
        return linalg.solve_triangular(self._chol, self.problem.B, lower=True, check_finite=False)

    def release(self, x, rng=None, level: float = 0.95, delta: float = DEFAULT_DELTA, sampler=None) -> Release:
        """Release ``L (B x + N(0, Sigma))`` for a histogram ``x`` (d,).

        Parameters
        ----------
        x : (d,) array_like of non-negative whole counts.
        rng : None, int or numpy.random.Generator
            ``None`` for a real release (OpenDP's sampler, OS entropy); a seed or Generator
            makes the noise reproducible with numpy's sampler, which is for testing only:
            whoever knows the seed can remove the noise.
        level : float in (0, 1)
            Confidence level of the intervals.
        delta : float in (0, 1)
            The delta at which the release's privacy statement gives epsilon.
        sampler : None, ``"opendp"``, ``"numpy"`` or a sampler of :mod:`ffu_cvx.release.noise`
            (see :func:`ffu_cvx.release.noise.sampler_for`).

        Returns
        -------
        Release with answers, variances, lower, upper (each (m,)), its privacy statement and
        the sampler's account (``noise``). Counts too large for their noise are refused
        (``ValueError`` naming the answer and the count) before anything is drawn.
        """
        x = check_histogram(x, self.problem.d)
        level = check_level(level)
        draw = noise.sampler_for(sampler, rng)
        self.check_resolution(x)
        noisy, account = draw.draw(self.whitened(x), None if rng is None else generator(rng))
        return Release.build(self.from_whitened(noisy), self.variances.copy(), level, labels=self.problem.labels,
                             privacy_cost=self.privacy_cost, mechanism=self.description, name=self.problem.name,
                             statement_delta=delta, targets=self.problem.c, noise=account)

    def check_resolution(self, x: np.ndarray) -> None:
        """Refuse a histogram at which some answer's float spacing swallows its noise (see :mod:`ffu_cvx.release.noise`)."""
        W = self.problem.W

        def name(j: int) -> str:
            i = int(np.argmax(np.abs(W[j]) * x))
            return f"the largest count behind it is x[{i}] = {x[i]:.6g}"

        noise.check_resolution(W @ x, np.sqrt(self.variances), name)

    def __repr__(self) -> str:
        return (f"GaussianMechanism({self.problem.name!r}, m={self.problem.m}, d={self.problem.d}, "
                f"alpha={self.privacy_cost:.6g})")


# ---------------------------------------------------------------------------- Problem 2
@dataclass(frozen=True)
class Problem2Result:
    """Problem 2: the best uniform scaling ``k`` of the targets at a privacy target.

    k : every variance is at most ``k c_j`` (equality for the binding queries);
    k_lower_bound : certified lower bound on the optimal k (from the Problem 1 dual
    bound; ``nan`` when the solution carries none); solution : the rescaled Solution
    (``sigma`` (k, k) attains the target) on the original targets ``c``, so its
    ``max_ratio`` is ``k`` and its ``lower_bound`` and ``gap`` are those of the
    normalised cost ``privacy_cost * k`` (Problem 1 at ``c``); scaled_targets_solution :
    the same mechanism as the Solution of Problem 1 at the scaled targets ``k c``
    (``max_ratio`` 1), whose ``lower_bound`` bounds its own ``privacy_cost`` (about the
    target's, not Problem 1's; None for a structured Solution, whose ``solution`` is
    released against the workload's own targets); epsilon, delta : the target; delta_m :
    the largest Delta_M meeting it; privacy_cost : ``delta_m ** 2``; sampler : the release's
    sampler the target is met for (None: the ideal Gaussian); :attr:`met` and :attr:`summary`
    say whether the targets are met at the target, or by what factor not.
    """

    k: float
    k_lower_bound: float
    solution: Solution
    epsilon: float
    delta: float
    delta_m: float
    privacy_cost: float
    scaled_targets_solution: Solution | None = None
    sampler: str | None = "opendp"

    @property
    def met(self) -> bool:
        """Whether every target is met at (epsilon, delta): ``k <= 1`` (within :data:`TARGET_RTOL`)."""
        return self.k <= 1 + TARGET_RTOL

    @property
    def summary(self) -> str:
        """One sentence: whether (epsilon, delta) meets the targets, and by what factor they are missed."""
        budget = f"At ({self.epsilon:g}, {self.delta:g})-DP"
        if self.met:
            return f"{budget} every variance target is met (every variance <= {self.k:.4g} x its target)."
        return (f"{budget} the targets cannot all be met: the best mechanism misses them by up to a factor "
                f"k = {self.k:.4g} in variance ({math.sqrt(self.k):.4g} in standard deviation); a larger epsilon or "
                "looser targets are needed.")


def problem2(problem_or_solution, epsilon: float, delta: float, method: str = "auto", sampler: str | None = "opendp",
             **options) -> Problem2Result:
    """Solve Problem 2: meet (epsilon, delta) exactly with the smallest uniform scaling of c.

    Parameters
    ----------
    problem_or_solution : FitnessProblem, ProductProblem or Solution
        A problem is first solved with ``ffu_cvx.solve(problem, method, **options)``; a
        Solution of Problem 1 (dense, or structured with Sigma in factors) is used as it is.
    epsilon, delta : the privacy target (epsilon > 0, 0 < delta < 1).
    sampler : the sampler the release will use (``"opendp"``, the default's; ``"numpy"``; or None
        for the ideal continuous Gaussian): the target holds for that release's own statement
        (:func:`ffu_cvx.release.noise.release_max_delta_m`).

    Theorem 8: the largest admissible cost is ``alpha* = Delta*^2`` with ``Delta*`` the largest
    sensitivity meeting the target (for the ideal Gaussian ``gaussian_max_delta_m(eps, delta)``);
    scaling ``Sigma`` by ``alpha / alpha*`` meets the target with equality, and
    ``k = max_j variance_j / c_j`` of the scaled mechanism is optimal whenever the
    Problem 1 solution is.
    """
    delta_m = noise.release_max_delta_m(epsilon, delta, sampler)  # validates the target before any solve
    problem = problem_or_solution
    if isinstance(problem, ProductProblem):
        problem = problem.for_method(method)
    if isinstance(problem, (FitnessProblem, ProductProblem)):
        sol = solve(problem, method=method, **options)
    elif isinstance(problem, Solution) and problem.sigma is None:
        sol = problem  # a structured Solution (Sigma in factors): scaled in its factors
    else:
        sol = _check_solution(problem_or_solution)
    target = delta_m * delta_m
    scaled = sol.scaled(target)
    if not isinstance(scaled.problem, FitnessProblem):  # structured: the release uses ``solution``
        return Problem2Result(k=float(scaled.max_ratio), k_lower_bound=_k_bound(scaled, target), solution=scaled,
                              epsilon=float(epsilon), delta=float(delta), delta_m=float(delta_m),
                              privacy_cost=float(target), sampler=sampler)
    lb = _k_bound(scaled, target) * target
    k = float(scaled.max_ratio)
    return Problem2Result(k=k, k_lower_bound=lb / target, solution=scaled, epsilon=float(epsilon),
                          delta=float(delta), delta_m=float(delta_m), privacy_cost=float(target),
                          scaled_targets_solution=_at_scaled_targets(scaled, k, lb), sampler=sampler)


def _k_bound(scaled, target: float) -> float:
    """The certified lower bound on k: the Problem 1 bound over the target cost (nan without one)."""
    lb = scaled.lower_bound
    return math.nan if lb is None else float(lb) / target


def _at_scaled_targets(scaled: Solution, k: float, lb: float) -> Solution:
    """``scaled`` as the Solution of Problem 1 at targets ``k c``: same sigma, bound and mu over k.

    Multiplying every target by ``k`` divides the optimal privacy cost and the dual bound
    by ``k`` (and ``mu``, normalised by ``mu . c = 1``, by ``k``); the gap is unchanged.
    """
    mu = scaled.mu
    keep = {key: getattr(scaled, key) for key in ("nit", "n_hvp", "time", "history")}
    return Solution.from_sigma(
        scaled.problem.with_targets(k * scaled.problem.c), scaled.sigma, method=scaled.method,
        status=scaled.status, message=scaled.message, lam=scaled.lam,
        mu=None if mu is None else mu / k, lower_bound=None if math.isnan(lb) else lb / k,
        certify=False, **keep, **scaled.info)


# ---------------------------------------------------------------------------- free queries
def _slack(mech: GaussianMechanism, rtol: float) -> np.ndarray:
    """(d,) slack ``alpha - p_i``, with entries within ``rtol * alpha`` of zero set to 0."""
    rtol = float(rtol)
    if not rtol >= 0:
        raise ValueError(f"`rtol` must be >= 0, got {rtol!r}")
    slack = mech.privacy_cost - mech.profile
    slack[slack <= rtol * mech.privacy_cost] = 0.0
    return slack


def _as_mechanism(solution_or_mechanism) -> GaussianMechanism:
    if isinstance(solution_or_mechanism, GaussianMechanism):
        return solution_or_mechanism
    return GaussianMechanism(solution_or_mechanism)


def _check_queries(Q, d: int, name: str) -> np.ndarray:
    try:
        Q = np.array(Q, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}` must be numeric: {exc}") from None
    if Q.ndim != 2 or Q.shape[1] != d or Q.shape[0] == 0:
        raise ValueError(f"`{name}` must have shape (r, {d}) (one query per row over the d cells), got {Q.shape}")
    if not np.all(np.isfinite(Q)):
        raise ValueError(f"`{name}` contains NaN or inf")
    zero = np.flatnonzero(~Q.any(axis=1))
    if zero.size:
        raise ValueError(f"`{name}` has all-zero queries (rows {zero[:5].tolist()}): they need no noise, drop them")
    return Q


def _independent_release(Q: np.ndarray, factor: np.ndarray, x, rng, level: float, cost: float, sampler, **fields):
    """The Release of ``Q x + factor N(0, I)`` through a sampler (``fields``: its labels and names).

    The whitened answers are ``A x`` with ``factor A = Q``; the account states the combined
    mechanism's sensitivity ``sqrt(cost)`` (the workload release with these answers) plus this draw's
    lattice rounding and float error.
    """
    x = check_histogram(x, Q.shape[1])
    level = check_level(level)
    draw = noise.sampler_for(sampler, rng)
    A = linalg.lstsq(factor, Q, check_finite=False)[0]
    if not np.allclose(factor @ A, Q, rtol=0.0, atol=1e-9 * np.abs(Q).max()):
        raise ValueError("the free queries are not in the span of their noise factor; plan them again")
    variances = np.einsum("ij,ij->i", factor, factor)
    noise.check_resolution(Q @ x, np.sqrt(variances), lambda j: f"free query {j}")
    white = noise.whiten(lambda dtype: _products(A, x, dtype), math.sqrt(cost))
    noisy, account = draw.draw(white, None if rng is None else generator(rng))
    return Release.build(factor @ noisy, variances, level, privacy_cost=cost, mechanism=FREE_QUERY_NOISE,
                         noise=account, **fields)


@dataclass(frozen=True)
class FreeQuery:
    """An extra query ``q`` answerable with independent noise at no privacy cost.

    q : (d,) the query; variance : smallest variance ``s`` of independent noise that
    keeps the privacy cost at ``privacy_cost`` (``inf`` when ``q`` touches a tight column);
    finite : whether it can be answered for free at all; binding : index of the column
    that sets ``variance`` (-1 if none); tight : (t,) indices of tight columns touched by
    ``q`` (why it is not free); derived_variance : variance of the best unbiased estimate
    of ``q . x`` from the workload answers themselves (post-processing, ``inf`` if ``q`` is
    not in the row space of ``W``); privacy_cost : alpha of the mechanism.
    """

    q: np.ndarray
    variance: float
    finite: bool
    binding: int
    tight: tuple
    derived_variance: float
    privacy_cost: float

    def release(self, x, rng=None, level: float = 0.95, sampler=None) -> Release:
        """Release ``q . x + N(0, variance)`` for a histogram ``x`` (d,): a Release with m = 1.

        The noise is independent of the workload release; ``rng`` and ``sampler`` as in
        :meth:`GaussianMechanism.release`.
        """
        if not self.finite:
            raise ValueError(f"this query is not free: it touches tight columns {list(self.tight[:10])} "
                             "where the profile already equals the privacy cost")
        factor = np.array([[math.sqrt(self.variance)]])
        return _independent_release(self.q[None, :], factor, x, rng, level, self.privacy_cost, sampler,
                                    labels=("free query",), name="free query")


def free_query(solution, q, rtol: float = SLACK_RTOL) -> FreeQuery:
    """Smallest variance at which ``q`` (d,) can be answered for free (§3.2.1).

    Releasing ``q . x + N(0, s)`` with independent noise raises profile entry ``i`` by
    ``q_i^2 / s``, so the cost stays ``alpha`` iff ``s >= max_i q_i^2 / (alpha - p_i)``
    over the cells with ``q_i != 0``. Columns whose slack is at most ``rtol * alpha`` are
    tight: if ``q`` touches one, the variance is ``inf``. A solver flattens the tight part
    of the profile only to its accuracy (the exact SDP to about 1e-8 relative), so slacks
    below ``rtol = 1e-6`` are treated as solver noise, not room for a free query; pass
    ``rtol=0`` for the exact value of this Sigma (a huge variance where the slack is tiny).

    ``solution`` is a Solution or a :class:`GaussianMechanism`.
    """
    mech = _as_mechanism(solution)
    if np.ndim(q) != 1:
        raise ValueError(f"`q` must be one query of shape ({mech.problem.d},), got shape {np.shape(q)}; "
                         "use free_queries for a batch")
    q = _check_queries([q], mech.problem.d, "q")[0]
    slack = _slack(mech, rtol)
    touched = np.flatnonzero(q)
    tight = touched[slack[touched] == 0.0]
    if tight.size:
        variance, binding = math.inf, -1
    else:
        need = q[touched] ** 2 / slack[touched]
        j = int(np.argmax(need))
        variance, binding = float(need[j]), int(touched[j])
    return FreeQuery(q=q, variance=variance, finite=bool(math.isfinite(variance)), binding=binding,
                     tight=tuple(int(i) for i in tight), derived_variance=_derived_variance(mech, q),
                     privacy_cost=mech.privacy_cost)


def _derived_variance(mech: GaussianMechanism, q: np.ndarray) -> float:
    """Variance of ``q . x`` estimated from ``B x + N(0, Sigma)``, or inf outside the row space."""
    B = mech.problem.B
    # q = B^T l has a solution iff q lies in the row space of B; then l^T (noisy B x) is unbiased.
    l = linalg.lstsq(B.T, q, check_finite=False)[0]
    if np.linalg.norm(B.T @ l - q) > 1e-9 * max(np.linalg.norm(q), 1e-300):
        return math.inf
    v = mech._chol.T @ l
    return float(v @ v)


@dataclass(frozen=True)
class FreeQueryPlan:
    """How to answer a batch of extra queries ``Q`` (r, d) without raising the privacy cost.

    Both plans draw noise independent of the workload release; they differ in the noise
    among the r extra answers.

    targets : (r,) relative variance targets (the plans minimise ``max_j var_j / targets_j``).
    independent_variances : (r,) variances of the best plan with independent noise per query.
    independent_ratio : its ``max_j var_j / targets_j``.
    covariance : (r, r) noise covariance of the correlated plan (``None`` if not computed).
    correlated_variances : (r,) its variances; correlated_ratio : its max ratio.
    improvement : ``independent_ratio / correlated_ratio`` (>= 1 up to solver tolerance).
    finite : False when some query touches a tight column (then every variance is inf).
    tight : indices of the tight columns touched.
    privacy_cost : alpha of the mechanism (unchanged by either plan).
    solution : the auxiliary Problem 1 Solution behind the correlated plan (or None).
    factor : (r, k') matrix with ``covariance = factor factor^T`` used to draw the
    correlated noise (``k'`` = rank of ``Q``; None if not computed).
    """

    Q: np.ndarray
    targets: np.ndarray
    independent_variances: np.ndarray
    independent_ratio: float
    covariance: np.ndarray | None
    correlated_variances: np.ndarray | None
    correlated_ratio: float
    improvement: float
    finite: bool
    tight: tuple
    privacy_cost: float
    solution: Solution | None
    factor: np.ndarray | None

    def release(self, x, rng=None, level: float = 0.95, correlated: bool = True, sampler=None) -> Release:
        """Answer the batch for a histogram ``x`` (d,) with the correlated (default) or independent plan
        (``rng`` and ``sampler`` as in :meth:`GaussianMechanism.release`)."""
        if not self.finite:
            raise ValueError(f"these queries are not free: they touch tight columns {list(self.tight[:10])}")
        if correlated:
            if self.factor is None:
                raise ValueError("the correlated plan was not computed; call free_queries(..., correlated=True) "
                                 "or release with correlated=False")
            factor = self.factor
        else:
            factor = np.diag(np.sqrt(self.independent_variances))
        return _independent_release(self.Q, factor, x, rng, level, self.privacy_cost, sampler,
                                    labels=("free query",) * self.Q.shape[0], name="free queries")


def free_queries(solution, Q, targets=None, *, correlated: bool = True, method: str = "sdp",
                 rtol: float = SLACK_RTOL, **options) -> FreeQueryPlan:
    """Plan answers to extra queries ``Q`` (r, d) that keep the privacy cost at alpha.

    With noise covariance ``S`` (r, r) on ``Q x``, independent of the workload release,
    the profile grows by ``diag(Q^T S^{-1} Q)``; a plan must keep that within the slack
    ``alpha - p``. Both plans minimise the largest ``var_j / targets_j``
    (``targets`` (r,) > 0, default all ones):

    - independent noise has the closed form ``var_j = t_j max_i (sum_j Q_ji^2 / t_j) / slack_i``
      (the LP ``max tau`` s.t. ``sum_j Q_ji^2 u_j <= slack_i``, ``u_j t_j >= tau`` is solved by
      equal ``u_j t_j``);
    - correlated noise is itself Problem 1 for the workload ``Q diag(slack)^{-1/2}``
      (columns touched by ``Q`` only) with targets ``t``: its optimum ``alpha_Q`` scaled to
      privacy cost 1 has every profile increase within the slack and ``var_j <= alpha_Q t_j``.
      It is solved by ``ffu_cvx.solve(..., method, **options)``; pass ``correlated=False`` to skip it.

    ``solution`` is a Solution or a :class:`GaussianMechanism`. See :func:`free_query` for ``rtol``.
    """
    mech = _as_mechanism(solution)
    d = mech.problem.d
    Q = _check_queries(Q, d, "Q")
    r = Q.shape[0]
    if targets is None:
        t = np.ones(r)
    else:
        t = np.array(targets, dtype=float).reshape(-1) if np.ndim(targets) else np.full(r, float(targets))
        if t.shape != (r,) or not np.all(np.isfinite(t)) or np.any(t <= 0):
            raise ValueError(f"`targets` must be {r} finite positive relative variances, got {targets!r}")
    slack = _slack(mech, rtol)
    active = np.flatnonzero(Q.any(axis=0))
    tight = active[slack[active] == 0.0]
    if tight.size:
        inf = np.full(r, math.inf)
        return FreeQueryPlan(Q=Q, targets=t, independent_variances=inf, independent_ratio=math.inf,
                             covariance=None, correlated_variances=None, correlated_ratio=math.inf,
                             improvement=math.nan, finite=False, tight=tuple(int(i) for i in tight),
                             privacy_cost=mech.privacy_cost, solution=None, factor=None)
    Qa = Q[:, active] / np.sqrt(slack[active])
    tau = float(np.max(np.sum(Qa ** 2 / t[:, None], axis=0)))
    indep = tau * t
    cov = cvar = sol = factor = None
    cratio, improvement = math.nan, math.nan
    if correlated:
        aux = FitnessProblem(Qa, t, basis="auto", name="free queries")
        sol = solve(aux, method=method, **options).scaled(1.0)
        factor = aux.L @ privacy.cholesky(sol.sigma)
        cov = factor @ factor.T
        cvar = np.einsum("ij,ij->i", factor, factor)
        cratio = float(np.max(cvar / t))
        improvement = tau / cratio
    return FreeQueryPlan(Q=Q, targets=t, independent_variances=indep, independent_ratio=tau,
                         covariance=cov, correlated_variances=cvar, correlated_ratio=cratio,
                         improvement=improvement, finite=True, tight=(), privacy_cost=mech.privacy_cost,
                         solution=sol, factor=factor)
