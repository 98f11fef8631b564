"""Dual lower bound on the optimal privacy cost of Problem 1, and the optimality gap.

Model layer: imports numpy, scipy.linalg, ``privacy`` and ``problem``.

For multipliers ``lam`` (d,) in the simplex over the columns of ``B`` (k, d) and
``mu`` (m,) >= 0 over the queries, weak duality gives (docs/guide/concepts.rst, "The certificate")

    alpha* >= F(P, Q)^2 / (mu . c),   F(P, Q) = tr((P^{1/2} Q P^{1/2})^{1/2}),
    P = B diag(lam) B^T (k, k),  Q = L^T diag(mu) L (k, k),

with equality at the optimum (Slater holds). ``F`` is the sum of the square roots of
the eigenvalues of ``P Q``, i.e. the nuclear norm of ``diag(sqrt(mu)) W diag(sqrt(lam))``;
it is computed from factors of ``P`` and ``Q`` reduced by thin QRs to order at most
``k`` (never an (m, d) SVD), works when ``P`` or ``Q`` is singular, and does not
depend on the basis.

``F(P, Q) = min_Sigma (tr(P Sigma^{-1}) + tr(Q Sigma)) / 2`` is attained at the
``Sigma(lam, mu)`` with ``Sigma Q Sigma = P``; the partial derivatives of ``F`` are half
the profile ``b_i^T Sigma^{-1} b_i`` and half the variances ``l_j^T Sigma l_j`` of that
``Sigma``, and ``sum_i lam_i p_i = sum_j mu_j v_j = F``. :func:`certify` uses this for a
multiplicative dual ascent ``lam_i <- lam_i p_i / F``, ``mu_j <- mu_j (v_j / c_j) / F``
(normalisations preserved), started from the best of the given multipliers and soft
indicators of the nearly tight columns and queries of the ``Sigma`` being certified.
Every ``(lam, mu)`` gives a valid bound, so the best one seen is kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import linalg

from . import privacy
from .problem import FitnessProblem

__all__ = ["Certificate", "HostAlgebra", "lower_bound", "certify", "ascend", "ascent_step", "dual_sigma",
           "nuclear_norm"]


@dataclass(frozen=True)
class Certificate:
    """A certified lower bound on the optimal privacy cost of a problem.

    lower_bound : float, the bound on alpha*; lam (d,), mu (m,): the multipliers that
    give it (``lam`` sums to 1, ``mu . c = 1``); gap : float,
    ``(alpha - lower_bound) / lower_bound`` for the certified ``alpha`` (the normalised
    cost of the solution).
    """

    lower_bound: float
    lam: np.ndarray
    mu: np.ndarray
    gap: float


def _check_multipliers(problem: FitnessProblem, lam, mu) -> tuple[np.ndarray, np.ndarray]:
    lam = np.asarray(lam, dtype=float)
    mu = np.asarray(mu, dtype=float)
    if lam.shape != (problem.d,) or mu.shape != (problem.m,):
        raise ValueError(f"`lam` must have shape ({problem.d},) and `mu` ({problem.m},), got {lam.shape}, {mu.shape}")
    if not (np.all(np.isfinite(lam)) and np.all(np.isfinite(mu))):
        raise ValueError("`lam` and `mu` must be finite")
    if np.any(lam < 0) or np.any(mu < 0) or lam.sum() <= 0 or mu.sum() <= 0:
        raise ValueError("`lam` and `mu` must be non-negative and not all zero")
    return lam / lam.sum(), mu / float(mu @ problem.c)


def _weighted_factors(B, L, lam: np.ndarray, mu: np.ndarray):
    """``(s, t, G, H)``: the supports ``s`` of ``lam`` and ``t`` of ``mu``, ``G = B_s diag(sqrt(lam_s))``
    (k, |s|) and ``H = L_t^T diag(sqrt(mu_t))`` (k, |t|), so that ``P = G G^T``, ``Q = H H^T``."""
    sl, sm = np.flatnonzero(lam > 0), np.flatnonzero(mu > 0)
    return sl, sm, B[:, sl] * np.sqrt(lam[sl]), L[sm].T * np.sqrt(mu[sm])


class HostAlgebra:
    """Where :func:`lower_bound` and :func:`dual_sigma` do their dense algebra: ``B`` (k, d)
    and ``L`` (m, k) held there, and the kernels they call on them.

    This class: numpy and scipy in float64 on the host, the default. SM-II's accelerator
    backends pass an object with the same attributes whose arrays and kernels live on
    their device (:class:`ffu_cvx.solvers.smii.backend.Placed`): multipliers go in and bounds come
    out as host numbers either way, and ``eigvalsh`` / ``svdvals`` return host arrays.
    """

    def __init__(self, B=None, L=None):
        self.B, self.L = B, L

    @staticmethod
    def asarray(x):
        return np.asarray(x, dtype=float)

    def factors(self, lam: np.ndarray, mu: np.ndarray):
        """``(G, H)`` of :func:`_weighted_factors` for host multipliers."""
        return _weighted_factors(self.B, self.L, lam, mu)[2:]

    @staticmethod
    def qr_r(A):
        """The triangular factor of ``A`` (a, b), a >= b."""
        return linalg.qr(A, mode="r", check_finite=False)[0]

    @staticmethod
    def cholesky_upper(A):
        """The upper Cholesky factor of ``A``, or None when it is not positive definite."""
        try:
            return linalg.cholesky(A, lower=False, check_finite=False)
        except linalg.LinAlgError:
            return None

    @staticmethod
    def eigh(M):
        return linalg.eigh(M, check_finite=False, driver="evd")

    @staticmethod
    def eigvalsh(A) -> np.ndarray:
        return linalg.eigvalsh(A, check_finite=False, driver="evd")

    @staticmethod
    def svdvals(X) -> np.ndarray:
        return linalg.svdvals(X, check_finite=False)

    @staticmethod
    def inner(X, Y) -> float:
        return float(np.vdot(X, Y))


def _on(problem: FitnessProblem, on):
    """``on``, or the problem's own arrays on the host."""
    return HostAlgebra(problem.B, problem.L) if on is None else on


#: :func:`nuclear_norm` with a ``slack`` takes the Gram matrix's eigenvalues from this order on.
GRAM_MIN_ORDER = 1000


def _fidelity(problem: FitnessProblem, lam: np.ndarray, mu: np.ndarray, slack: float = 0.0, on=None,
              gram_min_order: int = GRAM_MIN_ORDER) -> float:
    """``F(P, Q)`` for ``lam`` (d,), ``mu`` (m,) >= 0: the nuclear norm of ``H^T G``
    (:func:`nuclear_norm`, at most ``slack`` (relative) below it; factors of :func:`_weighted_factors`,
    computed where ``on`` says, :class:`HostAlgebra`).

    A thin QR of whichever factor is longer than k reduces it to k columns, so the
    singular values come from a matrix of order at most k. With a ``slack`` only the
    shorter factor is reduced, and only when longer than ``REDUCE_RATIO k``: the Gram
    matrix's order is then at most that, and one product replaces the longer factor's QR.
    """
    on = _on(problem, on)
    G, H = on.factors(lam, mu)
    k = problem.k
    # The length from which a factor is reduced, per factor: (G, H).
    if slack > 0:
        short = k * REDUCE_RATIO
        limits = (short, math.inf) if G.shape[1] <= H.shape[1] else (math.inf, short)
    else:
        limits = (k, k)
    Gt, Ht = (on.qr_r(F.T)[:k] if F.shape[1] > limit else F.T for F, limit in zip((G, H), limits))
    return nuclear_norm(Ht @ Gt.T, slack, on, gram_min_order)


#: With a slack, :func:`_fidelity` reduces the shorter factor by a QR only from this
#: multiple of k: a skipped QR saves more time than it costs in the bound (the Gram margin
#: grows with the longer side).
REDUCE_RATIO = 1.25


def nuclear_norm(X: np.ndarray, slack: float = 0.0, on=HostAlgebra, gram_min_order: int = GRAM_MIN_ORDER) -> float:
    """A lower bound on the sum of the singular values of ``X`` (a, b), never above it by rounding.

    ``slack = 0`` (or order below ``gram_min_order``, default ``GRAM_MIN_ORDER``): the sum of ``svdvals``, which keeps
    the small singular values accurate. ``slack > 0``: from the eigenvalues ``l_i`` of the
    Gram matrix ``X^T X`` (or ``X X^T``, order ``n = min(a, b)``, inner dimension ``r``):
    each ``l_i`` is within ``delta = 2 u (r ||X||_F^2 + 10 n max l)`` of an exact
    eigenvalue (the product's rounding bound and a backward-stable eigensolver's, each
    doubled; ``u`` the unit roundoff, Weyl's inequality), so ``sum sqrt(max(l_i - delta,
    0))`` is a lower bound. It is returned when it is within ``slack`` (relative) of the
    upper estimate ``sum sqrt(l_i + delta)``, else the ``svdvals`` sum is; the Gram route is
    several times faster at large order. ``on``: where ``X`` lives (:class:`HostAlgebra`).
    """
    n, r = min(X.shape), max(X.shape)
    if slack > 0 and n >= gram_min_order:
        gram = X.T @ X if X.shape[0] >= X.shape[1] else X @ X.T
        ev = on.eigvalsh(gram)
        u = np.finfo(float).eps / 2
        delta = 2.0 * u * (r * on.inner(X, X) + 10.0 * n * max(float(ev[-1]), 0.0))
        low = float(np.sum(np.sqrt(np.maximum(ev - delta, 0.0))))
        if float(np.sum(np.sqrt(np.maximum(ev + delta, 0.0)))) - low <= slack * low:
            return low
    return float(np.sum(on.svdvals(X)))


def lower_bound(problem: FitnessProblem, lam: np.ndarray, mu: np.ndarray, slack: float = 0.0, on=None,
                gram_min_order: int = GRAM_MIN_ORDER) -> float:
    """Dual lower bound on Problem 1's optimal alpha for multipliers ``lam`` (d,), ``mu`` (m,).

    ``lam`` is normalised to the simplex; ``mu`` must be >= 0 and not all zero (its
    scale does not matter). Cost: thin QRs of the (d, k) and (m, k) factors and the
    singular values of a matrix of order at most k. ``slack > 0`` allows a bound up to
    about twice that (relative) below the exact one, from a Gram matrix's eigenvalues
    where that is rigorous and close enough (:func:`nuclear_norm`: faster at large order);
    it is still a valid bound. ``on``: where the algebra runs (:class:`HostAlgebra`,
    the default; SM-II's accelerator backends pass their device's); ``gram_min_order``: the order
    from which :func:`nuclear_norm` may take the Gram route.
    """
    lam, mu = _check_multipliers(problem, lam, mu)
    return _fidelity(problem, lam, mu, slack, on, gram_min_order) ** 2


#: ``Q`` counts as numerically singular where ``R Q R^T``'s least eigenvalue is at most this fraction
#: of its largest.
SINGULAR_Q = 1e-13


def _pair_factors(problem: FitnessProblem, lam: np.ndarray, mu: np.ndarray, on=None, floor: bool = False):
    """``(R, w, V)`` with ``P = R^T R`` (upper Cholesky) and ``R Q R^T = V diag(w) V^T``,
    or None when ``P`` or ``Q`` is numerically singular (computed where ``on`` says); ``floor``:
    ``w`` raised to ``SINGULAR_Q`` of its largest instead of None for ``Q``."""
    on = _on(problem, on)
    B, L = on.B, on.L
    R = on.cholesky_upper((B * on.asarray(lam)) @ B.T)
    if R is None:
        return None
    w, V = on.eigh(R @ ((L.T * on.asarray(mu)) @ L) @ R.T)
    least = SINGULAR_Q * float(w[-1])
    if not least > 0 or not (floor or float(w[0]) >= least):
        return None
    if floor:  # max(w, least) on any array type (checked before: its rounding may fall an ulp short)
        w = (w + least + abs(w - least)) / 2
    return R, w, V


def _thin(A: np.ndarray):
    """``(Q, R)`` with ``A = Q R`` (thin QR) for a tall ``A``, else ``(None, A)``."""
    if A.shape[0] <= A.shape[1]:
        return None, A
    return linalg.qr(A, mode="economic", check_finite=False)


def _svd_by_gram(X: np.ndarray):
    """``(U, S, V)``, ``X ~ U diag(S) V^T``: the singular triplets of ``X`` (a, b) whose value is over
    ``GRAM_SVD_CUT`` of the largest, from the eigendecomposition of the smaller Gram matrix (over
    twice as fast as ``svd``).
    The Gram matrix's rounding moves each ``S_i^2`` by about ``eps S_max^2``: enough for an ascent
    step's multipliers, not for a bound."""
    if X.shape[0] < X.shape[1]:
        A, S, C = _svd_by_gram(X.T)  # X^T = A S C^T
        return C, S, A
    w, V = linalg.eigh(X.T @ X, check_finite=False, driver="evd")
    keep = w > GRAM_SVD_CUT ** 2 * max(float(w[-1]), 0.0)
    S, V = np.sqrt(w[keep]), V[:, keep]
    return (X @ V) / S, S, V


#: :func:`_svd_by_gram` keeps the singular values over this fraction of the largest: the Gram matrix's
#: rounding moves ``S_i`` by about ``eps S_max^2 / S_i``, 1e-10 of the largest at the cut.
GRAM_SVD_CUT = 1e-6


def _ascent_step(problem: FitnessProblem, lam: np.ndarray, mu: np.ndarray, gram: bool = False):
    """One multiplicative step from ``lam`` (d,) (simplex), ``mu`` (m,) (``mu . c = 1``); ``gram``:
    the singular triplets by :func:`_svd_by_gram` (its ``F`` then is no bound).

    Returns ``(F, lam_new, mu_new)`` where ``F`` is the fidelity at the input (None when
    it is 0). With ``X = H^T G = U diag(S) V^T`` (:func:`_weighted_factors`) the step is
    ``lam_i <- (V S V^T)_ii / F`` and ``mu_j <- (U S U^T)_jj / (c_j F)``, i.e. ``lam_i p_i / F``
    and ``mu_j v_j / (c_j F)``, read off the singular vectors: no factor of ``P`` or ``Q`` is
    inverted, so the step works where multipliers spread over decades leave them numerically
    singular (where a step through their Cholesky factors stalls). The longer factors are first
    reduced by thin QRs (``G^T = Q_g R_g``).
    """
    sl, sm, G, H = _weighted_factors(problem.B, problem.L, lam, mu)
    Qg, Rg = _thin(G.T)
    Qh, Rh = _thin(H.T)
    if gram:
        U, S, V = _svd_by_gram(Rh @ Rg.T)
    else:
        U, S, Vt = linalg.svd(Rh @ Rg.T, full_matrices=False, check_finite=False)
        V = Vt.T
    F = float(S.sum())
    if not F > 0:
        return None
    V = V if Qg is None else Qg @ V  # (|s|, r)
    U = U if Qh is None else Qh @ U  # (|t|, r)
    lam_new, mu_new = np.zeros_like(lam), np.zeros_like(mu)
    lam_new[sl] = np.square(V) @ S / F
    mu_new[sm] = np.square(U) @ S / (F * problem.c[sm])
    return F, lam_new, mu_new


def dual_sigma(problem: FitnessProblem, lam: np.ndarray, mu: np.ndarray, on=None,
               floor: bool = False) -> np.ndarray | None:
    """The ``Sigma`` (k, k) with ``Sigma Q Sigma = P`` that attains ``F(P, Q)`` for ``lam`` (d,), ``mu`` (m,).

    With ``P = R^T R`` and ``R Q R^T = V diag(w) V^T``: ``Sigma = R^T V diag(w^{-1/2}) V^T R``.
    It is the optimal covariance when ``(lam, mu)`` are optimal multipliers; ``None``
    when ``P`` or ``Q`` is numerically singular (``w``'s least at most ``SINGULAR_Q`` of its
    largest), or, with ``floor``, only ``P``: ``w`` is then raised to ``SINGULAR_Q`` of its largest
    (a start, not the optimum's ``Sigma``: ``w`` can span more decades than float64 resolves, the
    prefix sums' ``Q`` alone about ``d^4``). ``on``: where it is
    computed and returned (:class:`HostAlgebra`, the default).
    """
    factors = _pair_factors(problem, *_check_multipliers(problem, lam, mu), on, floor)
    if factors is None:
        return None
    R, w, V = factors
    RV = R.T @ V
    sigma = (RV / w ** 0.5) @ RV.T
    return 0.5 * (sigma + sigma.T)


def ascend(problem: FitnessProblem, steps: int, omega: float = 2.0, mix: float = 1e-2):
    """``(lam, mu)``, the best of ``steps`` over-relaxed ascent steps from uniform multipliers.

    Uniform means ``lam_i = 1 / d`` and ``mu_j c_j`` equal (every ratio weighs alike). Each step
    moves ``log lam`` and ``log mu`` ``omega`` times as far as the multiplicative step
    (:func:`_ascent_step`; ``omega = 1`` is that step), renormalises and mixes back ``mix`` of the
    uniform multipliers (``mix > 0`` keeps every weight positive, hence the ratio defined, and
    ``P``, ``Q`` non-singular where the multipliers spread over decades). Any multipliers give a
    valid bound, so over-relaxing only changes how fast it rises (``omega = 2`` needs about half
    the steps of ``omega = 1`` for a bound). Returns the multipliers at which ``F`` was largest
    (``lam`` sums to 1, ``mu . c = 1``).
    """
    c = problem.c
    uniform = (np.full(problem.d, 1.0 / problem.d), 1.0 / (problem.m * c))
    lam, mu = uniform
    best = (-math.inf, lam, mu)
    for _ in range(steps):
        step = ascent_step(problem, lam, mu, omega, gram=True)
        if step is None:
            break
        F, lam_n, mu_n = step
        if F > best[0]:
            best = (F, lam, mu)
        lam = (1 - mix) * lam_n + mix * uniform[0]
        mu = (1 - mix) * mu_n + mix * uniform[1]
    return best[1], best[2]


def ascent_step(problem: FitnessProblem, lam: np.ndarray, mu: np.ndarray, omega: float = 2.0, gram: bool = False):
    """``(F, lam', mu')``: ``F`` at ``lam`` (d,; on the simplex) and ``mu`` (m,; ``mu . c = 1``), and
    the multipliers one multiplicative step over-relaxed by ``omega`` moves them to (normalised
    alike; a zero weight stays zero); None when ``F`` is 0. ``gram``: the singular triplets by
    :func:`_svd_by_gram` (faster; its ``F`` is no bound, and near the optimum its step can lower
    the bound where the SVD's step raises it)."""
    step = _ascent_step(problem, lam, mu, gram=gram)
    if step is None:
        return None
    F, lam_n, mu_n = step
    lam_n = lam * np.divide(lam_n, lam, out=np.zeros_like(lam), where=lam > 0) ** omega
    mu_n = mu * np.divide(mu_n, mu, out=np.zeros_like(mu), where=mu > 0) ** omega
    return F, lam_n / lam_n.sum(), mu_n / float(mu_n @ problem.c)


#: Weight of the uniform multipliers mixed into the start of the dual ascent.
_MIX = 1e-3


def _soft_weights(x: np.ndarray, sharpness: float) -> np.ndarray:
    w = np.exp(sharpness * (x - x.max()))
    return w / w.sum()


def _default_iters(k: int) -> int:
    # An ascent step costs a few (k, k) factorisations; keep the whole search to about
    # a second at k = 1024 on a laptop while small problems get many steps.
    if k <= 64:
        return 60
    if k <= 256:
        return 20
    return 2


def certify(
    problem: FitnessProblem,
    sigma: np.ndarray,
    lam: np.ndarray | None = None,
    mu: np.ndarray | None = None,
    *,
    iters: int | None = None,
    profile: np.ndarray | None = None,
    variances: np.ndarray | None = None,
    stall: float = 0.0,
) -> Certificate:
    """Certify ``sigma`` (k, k): a lower bound on alpha* and the relative gap of ``sigma``.

    ``profile`` (d,) and ``variances`` (m,) of ``sigma`` may be passed when already
    computed (``Solution.from_sigma`` does), to skip a second factorisation.

    The gap compares the bound with ``sigma``'s normalised cost ``alpha * r``, where
    ``r = max_j var_j / c_j``: ``sigma / r`` meets every target and costs ``alpha r``.
    Candidate multipliers: ``lam`` (d,) and ``mu`` (m,) when given (a solver's duals or
    soft-max weights) or else the uniform ones, and soft indicators of the nearly tight
    columns and queries of ``sigma``. The best is improved by ``iters`` dual-ascent
    steps (default by size: 60 up to k = 64, 20 up to 256, 2 beyond), stopping early
    once the gap is below 1e-12, the bound stalls (a step gains less than 1e-10,
    relative) or a step gains less than ``stall`` times the gap still open (``alpha * r``
    less the bound; 0: never); finally the small weights of the
    best and the last multipliers are dropped (at 1e-3 and 1e-6 of the largest) and the
    bound re-evaluated. The reported bound is always evaluated by :func:`lower_bound`'s
    singular-value formula.
    """
    p = privacy.profile(sigma, problem.B) if profile is None else np.asarray(profile, dtype=float)
    if variances is None:
        variances = privacy.variances(problem.L, sigma)
    ratios = np.asarray(variances, dtype=float) / problem.c
    alpha_norm = float(p.max() * ratios.max())
    iters = _default_iters(problem.k) if iters is None else int(iters)
    if iters < 0:
        raise ValueError(f"`iters` must be >= 0, got {iters!r}")
    if not stall >= 0:
        raise ValueError(f"`stall` must be >= 0, got {stall!r}")

    candidates = []
    if lam is not None and mu is not None:
        candidates.append(_check_multipliers(problem, lam, mu))
        sharpness = (1e4,)
    else:
        candidates.append(_check_multipliers(problem, np.ones(problem.d), 1.0 / problem.c))
        sharpness = (1e2, 1e4) if problem.k <= 256 else (1e4,)
    for sharp in sharpness:
        candidates.append(_check_multipliers(problem, _soft_weights(p / p.max(), sharp),
                                             _soft_weights(ratios / ratios.max(), sharp) / problem.c))
    scored = [(_fidelity(problem, lm, mm) ** 2, lm, mm) for lm, mm in candidates]
    best = max(scored, key=lambda t: t[0])

    # The multiplicative step cannot revive a zero weight; mixing in some of the
    # uniform weights keeps P and Q non-singular and lets every column and query back
    # in (the unmixed start stays the incumbent).
    lam_k = (1 - _MIX) * best[1] + _MIX / problem.d
    mu_k = (1 - _MIX) * best[2] + _MIX / problem.c.sum()
    prev = best[0]
    ascent = (-np.inf, None, None)
    for it in range(iters):
        if alpha_norm - max(best[0], ascent[0]) <= 1e-12 * best[0]:
            break
        step = _ascent_step(problem, lam_k, mu_k)
        if step is None:
            break
        F, lam_n, mu_n = step
        if F * F > max(best[0], ascent[0]):
            ascent = (F * F, lam_k, mu_k)
        if it >= 2 and (F * F <= prev * (1 + 1e-10) or F * F - prev <= stall * (alpha_norm - F * F)):
            break
        prev = F * F
        lam_k, mu_k = lam_n, mu_n
    if ascent[1] is not None:
        # The step's F comes from eigenvalues of a Gram matrix; re-evaluate with the
        # singular-value formula so that rounding can never inflate the bound.
        val = _fidelity(problem, ascent[1], ascent[2]) ** 2
        if val > best[0]:
            best = (val, ascent[1], ascent[2])
    # The ascent drives the weights of slack columns and queries to zero only
    # geometrically; dropping the small weights outright often lands on the exact multipliers.
    for lm, mm in ((best[1], best[2]), (lam_k, mu_k)):
        for cut in (1e-3, 1e-6):
            lt = np.where(lm >= cut * lm.max(), lm, 0.0)
            mt = np.where(mm * problem.c >= cut * (mm * problem.c).max(), mm, 0.0)
            if np.count_nonzero(lt) == np.count_nonzero(lm) and np.count_nonzero(mt) == np.count_nonzero(mm):
                continue
            lt, mt = _check_multipliers(problem, lt, mt)
            val = _fidelity(problem, lt, mt) ** 2
            if val > best[0]:
                best = (val, lt, mt)
    lb = float(best[0])
    gap = (alpha_norm - lb) / lb
    return Certificate(lower_bound=lb, lam=best[1], mu=best[2], gap=float(gap))
