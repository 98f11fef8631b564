"""Privacy profile, privacy cost, the refined order and exact Gaussian accounting.

Model layer, its bottom: imports numpy, scipy (linalg, optimize, special) and ``validation``.

Notation (fitness-for-use paper, Definition 5 and Corollary 4):

- ``B`` (k, d): basis with linearly independent rows; ``b_i`` is its i-th column.
- ``Sigma`` (k, k): covariance of the Gaussian noise added to ``B x``.
- profile ``p_i = b_i^T Sigma^{-1} b_i`` (d,); privacy cost ``alpha = Delta_M^2 = max_i p_i``.
- ``Delta`` = ``Delta_M = sqrt(alpha)``: the mechanism is (eps, delta)-DP iff
  ``delta >= Phi(Delta/2 - eps/Delta) - exp(eps) Phi(-Delta/2 - eps/Delta)``
  (Balle and Wang 2018), and rho-zCDP with ``rho = Delta^2 / 2``.

All Gaussian accounting is done in log space (``scipy.special.log_ndtr``) so that it
stays accurate for delta down to 1e-300 and eps up to several hundred.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import linalg, optimize, special

from .validation import positive

__all__ = [
    "ADD_REMOVE",
    "SUBSTITUTE",
    "NEIGHBOURS",
    "cholesky",
    "profile",
    "variances",
    "privacy_cost",
    "sorted_profile",
    "compare_refined",
    "gaussian_delta",
    "gaussian_log_delta",
    "gaussian_epsilon",
    "gaussian_max_delta_m",
    "zcdp_rho",
    "zcdp_epsilon",
    "zcdp_max_rho",
    "GaussianPrivacy",
]


#: Neighbouring datasets differ by adding or removing one record: histograms with
#: ``||x - x'||_1 = 1``. The paper's relation; every profile, privacy cost and (eps, delta)
#: of the Gaussian mechanisms here holds for it.
ADD_REMOVE = "add/remove one record"
#: Neighbouring datasets differ by changing one record's value: ``x' = x - e_i + e_j``.
#: A sensitivity under it is at most twice the add/remove one.
SUBSTITUTE = "substitute one record"
#: The relations a privacy statement may name.
NEIGHBOURS = (ADD_REMOVE, SUBSTITUTE)


def cholesky(sigma: np.ndarray, name: str = "sigma") -> np.ndarray:
    """Lower Cholesky factor of a symmetric positive definite (k, k) matrix.

    Raises ``ValueError`` naming ``name`` when ``sigma`` is not positive definite.
    """
    sigma = np.asarray(sigma, dtype=float)
    if sigma.ndim != 2 or sigma.shape[0] != sigma.shape[1]:
        raise ValueError(f"`{name}` must be a square matrix, got shape {sigma.shape}")
    if not np.all(np.isfinite(sigma)):
        raise ValueError(f"`{name}` contains NaN or inf")
    try:
        return linalg.cholesky(sigma, lower=True, check_finite=False)
    except linalg.LinAlgError as exc:
        raise ValueError(
            f"`{name}` is not positive definite (Cholesky failed: {exc}); "
            "a noise covariance must be symmetric positive definite"
        ) from None


def profile(sigma: np.ndarray, B: np.ndarray, chol: np.ndarray | None = None) -> np.ndarray:
    """Privacy profile ``p_i = b_i^T Sigma^{-1} b_i`` (d,) via a Cholesky solve.

    ``sigma`` (k, k), ``B`` (k, d); ``chol`` is an optional precomputed lower factor.
    """
    Lc = cholesky(sigma) if chol is None else chol
    Y = linalg.solve_triangular(Lc, np.asarray(B, dtype=float), lower=True, check_finite=False)
    return np.einsum("ij,ij->j", Y, Y)


def variances(L: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """``diag(L Sigma L^T)`` (m,) for ``L`` (m, k), ``sigma`` (k, k): O(m k^2), one BLAS product."""
    return np.einsum("ij,ij->i", L @ sigma, L)


def privacy_cost(sigma: np.ndarray, B: np.ndarray) -> float:
    """Privacy cost ``alpha = Delta_M^2 = max_i b_i^T Sigma^{-1} b_i``."""
    return float(np.max(profile(sigma, B)))


def sorted_profile(p: np.ndarray) -> np.ndarray:
    """Profile sorted in decreasing order (the key of the refined order, Definition 7)."""
    return np.sort(np.asarray(p, dtype=float))[::-1]


def compare_refined(p1: np.ndarray, p2: np.ndarray, rtol: float = 1e-9) -> int:
    """Compare two privacy profiles in the refined order ≺R (Definition 7).

    Returns -1 if the first mechanism is strictly more private (its decreasingly
    sorted profile is lexicographically smaller), 1 if strictly less, 0 if the
    sorted profiles agree entrywise to relative tolerance ``rtol``.
    """
    s1, s2 = sorted_profile(p1), sorted_profile(p2)
    if s1.shape != s2.shape:
        raise ValueError(f"profiles have different lengths: {s1.shape} vs {s2.shape}")
    scale = max(float(np.max(np.abs(s1))), float(np.max(np.abs(s2))), 1e-300)
    for a, b in zip(s1, s2):
        if abs(a - b) > rtol * scale:
            return -1 if a < b else 1
    return 0


_SQRT2 = math.sqrt(2.0)


def gaussian_log_delta(epsilon: float, delta_m: float) -> float:
    """Natural log of the smallest delta at which the Gaussian mechanism is (eps, delta)-DP.

    ``delta_m`` is the privacy cost Delta_M (the L2 sensitivity over the noise scale).
    Uses ``log delta = log Phi(a) + log(1 - exp(t))``, ``t = eps + log Phi(b) - log Phi(a)``,
    with ``a = Delta/2 - eps/Delta`` and ``b = -Delta/2 - eps/Delta``, which avoids the
    catastrophic cancellation of the direct formula for small delta. For ``a < 0``,
    ``t`` is evaluated as ``log erfcx(-b/sqrt2) - log erfcx(-a/sqrt2)`` (exact, since
    ``b^2 - a^2 = 2 eps``), so that no two large logarithms are subtracted when
    ``Delta`` is small next to ``eps``.
    """
    if not math.isfinite(float(epsilon)) or epsilon < 0:
        raise ValueError(f"`epsilon` must be a finite number >= 0, got {epsilon!r}")
    delta_m = positive(delta_m, "delta_m")
    a = delta_m / 2.0 - epsilon / delta_m
    b = -delta_m / 2.0 - epsilon / delta_m
    log_pa = float(special.log_ndtr(a))
    if a < 0.0:
        # Phi(x) = erfcx(-x / sqrt2) exp(-x^2 / 2) / 2; the Gaussian factors cancel eps.
        t = math.log(special.erfcx(-b / _SQRT2)) - math.log(special.erfcx(-a / _SQRT2))
    else:
        t = epsilon + float(special.log_ndtr(b)) - log_pa
    if t >= 0.0:  # only by rounding: the mechanism is never (eps, 0)-DP
        return -math.inf
    return log_pa + math.log(-math.expm1(t))


def gaussian_delta(epsilon: float, delta_m: float) -> float:
    """Smallest delta for which a Gaussian mechanism with privacy cost ``delta_m`` is (eps, delta)-DP."""
    return math.exp(gaussian_log_delta(epsilon, delta_m))


def gaussian_epsilon(delta: float, delta_m: float) -> float:
    """Smallest eps >= 0 for which the mechanism with privacy cost ``delta_m`` is (eps, delta)-DP.

    Returns 0.0 when the mechanism is already (0, delta)-DP.
    """
    delta = positive(delta, "delta")
    if delta >= 1:
        raise ValueError(f"`delta` must be in (0, 1), got {delta!r}")
    delta_m = positive(delta_m, "delta_m")
    log_target = math.log(delta)

    def f(eps: float) -> float:
        return gaussian_log_delta(eps, delta_m) - log_target

    if f(0.0) <= 0:
        return 0.0
    hi = max(1.0, delta_m * delta_m)
    while f(hi) > 0:
        hi *= 2.0
        if hi > 1e8:
            raise ValueError(f"no finite epsilon reaches delta={delta!r} at Delta_M={delta_m!r}")
    return optimize.brentq(f, 0.0, hi, xtol=1e-14, rtol=1e-14, maxiter=500)


def gaussian_max_delta_m(epsilon: float, delta: float) -> float:
    """Largest privacy cost Delta_M at which the Gaussian mechanism is (eps, delta)-DP.

    The delta of Corollary 4 increases strictly with Delta_M, so this is a root find
    in log space.
    """
    epsilon = positive(epsilon, "epsilon")
    delta = positive(delta, "delta")
    if delta >= 1:
        raise ValueError(f"`delta` must be in (0, 1), got {delta!r}")
    log_target = math.log(delta)

    def f(log_dm: float) -> float:
        return gaussian_log_delta(epsilon, math.exp(log_dm)) - log_target

    lo, hi = -1.0, 1.0
    while f(lo) > 0:
        lo -= 2.0
        if lo < -700:
            raise ValueError(f"no positive Delta_M meets epsilon={epsilon!r}, delta={delta!r}")
    while f(hi) < 0:
        hi += 2.0
        if hi > 50:
            raise ValueError(f"Delta_M is unbounded for epsilon={epsilon!r}, delta={delta!r}")
    return math.exp(optimize.brentq(f, lo, hi, xtol=1e-15, rtol=1e-15, maxiter=500))


def zcdp_rho(delta_m: float) -> float:
    """rho of rho-zCDP for a Gaussian mechanism with privacy cost Delta_M: ``Delta_M^2 / 2``."""
    delta_m = positive(delta_m, "delta_m")
    return 0.5 * delta_m * delta_m


def zcdp_epsilon(rho: float, delta: float) -> float:
    """Smallest eps of (eps, delta)-DP implied by rho-zCDP: OpenDP's conversion (``make_zCDP_to_approxDP``).

    Computed through OpenDP's map of its integer Gaussian at a sensitivity rounded up by
    at most ``2^-40`` relative, so the result is never below OpenDP's own figure; ``inf``
    where OpenDP's conversion overflows (rho in the thousands).
    """
    rho, delta = positive(rho, "rho"), positive(delta, "delta")
    if not delta < 1:
        raise ValueError(f"`delta` must be in (0, 1), got {delta!r}")
    import opendp.prelude as dp

    dp.enable_features("contrib")
    delta_m = math.sqrt(2.0 * rho)
    scale = 2.0 ** (40 - math.floor(math.log2(delta_m)))
    meas = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T=dp.i64)), dp.l2_distance(T=dp.i64), scale=scale)
    try:
        return float(dp.c.make_zCDP_to_approxDP(meas).map(int(math.ceil(delta_m * scale))).epsilon(delta))
    except dp.OpenDPException as exc:
        if "Overflow" in str(exc.variant):
            return math.inf
        raise


def zcdp_max_rho(epsilon: float, delta: float) -> float:
    """The largest rho whose :func:`zcdp_epsilon` at ``delta`` is at most ``epsilon`` (to 1e-12 relative)."""
    epsilon = positive(epsilon, "epsilon")
    lo, hi = 1e-30, 1.0
    if zcdp_epsilon(lo, delta) > epsilon:
        raise ValueError(f"no rho-zCDP release fits in ({epsilon!r}, {delta!r})-DP: epsilon is too small for delta")
    while zcdp_epsilon(hi, delta) <= epsilon:
        lo, hi = hi, 4.0 * hi
    while hi / lo - 1.0 > 1e-12:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if zcdp_epsilon(mid, delta) <= epsilon else (lo, mid)
    return lo


class GaussianPrivacy:
    """Privacy statements of a Gaussian mechanism with privacy cost ``self.privacy_cost`` (alpha).

    Mixed into every mechanism type (``Solution``, ``GaussianMechanism``,
    ``FourierMechanism``) so that each states (eps, delta) and zCDP the same way, and
    names the neighbouring relation they hold for (:attr:`neighbours`).
    """

    @property
    def neighbours(self) -> str:
        """The neighbouring relation of every privacy statement here: :data:`ADD_REMOVE`.

        The profile ``b_i^T Sigma^{-1} b_i`` is the squared sensitivity of adding or
        removing one record in cell ``i``; under :data:`SUBSTITUTE` the sensitivity of a
        change from cell ``i`` to cell ``j`` is ``||Sigma^{-1/2} (b_i - b_j)||``, up to twice
        as large.
        """
        return ADD_REMOVE

    @property
    def delta_m(self) -> float:
        """Privacy cost Delta_M = sqrt(alpha)."""
        return math.sqrt(self.privacy_cost)

    def epsilon(self, delta: float) -> float:
        """Smallest eps at which the mechanism is (eps, delta)-DP (exact Gaussian mechanism)."""
        return gaussian_epsilon(delta, self.delta_m)

    def delta(self, epsilon: float) -> float:
        """Smallest delta at which the mechanism is (eps, delta)-DP (exact Gaussian mechanism)."""
        return gaussian_delta(epsilon, self.delta_m)

    @property
    def rho(self) -> float:
        """rho of rho-zCDP: alpha / 2."""
        return zcdp_rho(self.delta_m)
