"""Privacy accounting: profile, ≺R order, and the exact Gaussian mechanism.

The exact (eps, delta) curve is checked against an independent computation: numerical
integration of the privacy loss distribution. For the Gaussian mechanism with privacy
cost Delta (sensitivity over noise scale), the outputs on two neighbours are N(Delta, 1)
and N(0, 1), the privacy loss is L(y) = log N(y; Delta, 1) - log N(y; 0, 1) and

    delta(eps) = E_{Y ~ N(Delta, 1)} [ (1 - exp(eps - L(Y)))_+ ].

Nothing in the integral uses the normal CDF, so it is independent of the closed form.
"""

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from ffu_cvx.model import privacy


def privacy_loss(y, delta_m):
    """L(y) = Delta y - Delta^2 / 2, the log density ratio of N(Delta, 1) to N(0, 1)."""
    return delta_m * y - 0.5 * delta_m * delta_m


def integral_log_delta(eps, delta_m):
    """log delta(eps) by quadrature of the privacy loss distribution.

    The integrand vanishes below y0, where L(y0) = eps. Writing y = y0 + t and taking the
    density of N(Delta, 1) at y0 out of the integral keeps the integrand of order one
    however small delta is, so the result is accurate in log space far below 1e-300.
    Since L is linear, eps - L(y0 + t) = -Delta t.
    """
    y0 = (eps + 0.5 * delta_m * delta_m) / delta_m
    z0 = y0 - delta_m  # the point y0 in standard units of N(Delta, 1)

    def integrand(t):
        return math.exp(-z0 * t - 0.5 * t * t) * -math.expm1(-delta_m * t)

    value, abserr = integrate.quad(integrand, 0.0, math.inf, epsabs=0.0, epsrel=1e-13, limit=200)
    assert abserr < 1e-10 * value
    return -0.5 * z0 * z0 - 0.5 * math.log(2 * math.pi) + math.log(value)


def naive_delta(eps, delta_m):
    """Textbook float evaluation of Corollary 4 with Phi(x) = (1 + erf(x / sqrt 2)) / 2."""
    phi = lambda x: 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))  # noqa: E731
    return phi(delta_m / 2 - eps / delta_m) - math.exp(eps) * phi(-delta_m / 2 - eps / delta_m)


def test_privacy_loss_is_the_log_density_ratio():
    for delta_m in (0.1, 1.0, 4.0):
        y = np.linspace(-5, 5, 11)
        ratio = stats.norm.logpdf(y, loc=delta_m) - stats.norm.logpdf(y)
        assert np.allclose(privacy_loss(y, delta_m), ratio, rtol=0, atol=1e-12)


def test_integral_matches_expectation_by_monte_carlo():
    # The integral helper itself, against a plain Monte Carlo expectation where delta is large.
    rng = np.random.default_rng(0)
    eps, delta_m = 0.5, 1.5
    y = rng.normal(delta_m, 1.0, size=400_000)
    mc = np.mean(np.maximum(0.0, 1.0 - np.exp(eps - privacy_loss(y, delta_m))))
    assert math.exp(integral_log_delta(eps, delta_m)) == pytest.approx(mc, rel=0.01)


@pytest.mark.parametrize("eps", [0.0, 0.1, 1.0, 5.0, 10.0, 20.0])
@pytest.mark.parametrize("delta_m", [0.05, 0.3, 1.0, 3.0, 8.0])
def test_delta_matches_integral(eps, delta_m):
    log_ref = integral_log_delta(eps, delta_m)
    log_ours = privacy.gaussian_log_delta(eps, delta_m)
    # agreement of delta itself to 1e-9 relative, including values far below 1e-300
    assert abs(log_ours - log_ref) < 1e-9
    if log_ref > -700:
        assert privacy.gaussian_delta(eps, delta_m) == pytest.approx(math.exp(log_ref), rel=1e-9)


@pytest.mark.parametrize("eps", [1.0, 5.0, 10.0, 20.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-12])
def test_calibrated_delta_matches_integral(eps, delta):
    delta_m = privacy.gaussian_max_delta_m(eps, delta)
    assert math.exp(integral_log_delta(eps, delta_m)) == pytest.approx(delta, rel=1e-9)
    assert privacy.gaussian_delta(eps, delta_m) == pytest.approx(delta, rel=1e-12)


def test_naive_formula_fails_where_log_space_holds():
    # eps = 20, delta = 1e-12: the two terms of Corollary 4 are about 1e-12 each, and
    # 1 + erf(x) has absolute error ~1e-16, so the naive difference loses everything.
    eps = 20.0
    delta_m = privacy.gaussian_max_delta_m(eps, 1e-12)
    ref = math.exp(integral_log_delta(eps, delta_m))
    assert ref == pytest.approx(1e-12, rel=1e-9)
    naive = naive_delta(eps, delta_m)
    assert abs(naive - ref) > 0.5 * ref  # measured: 2.9 x ref off
    assert abs(privacy.gaussian_delta(eps, delta_m) - ref) < 1e-6 * ref
    # At delta = 1e-20 both terms round to the same float and the naive formula gives 0.
    delta_m = privacy.gaussian_max_delta_m(eps, 1e-20)
    assert naive_delta(eps, delta_m) == 0.0
    assert privacy.gaussian_delta(eps, delta_m) == pytest.approx(1e-20, rel=1e-9)


def test_underflowing_delta_stays_exact_in_log_space():
    # delta ~ exp(-795): any float evaluation of Phi underflows to 0 here.
    eps, delta_m = 20.0, 0.5
    log_ref = integral_log_delta(eps, delta_m)
    assert log_ref < -700
    assert privacy.gaussian_log_delta(eps, delta_m) == pytest.approx(log_ref, rel=1e-12)
    assert privacy.gaussian_delta(eps, delta_m) == 0.0


def test_high_precision_closed_form():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 60
    for eps, delta_m in [(1e-3, 5e-4), (0.01, 0.0017), (1.0, 0.2367), (20.0, 2.4749), (50.0, 2.24), (200.0, 14.2)]:
        e, dm = mpmath.mpf(eps), mpmath.mpf(delta_m)
        ref = mpmath.ncdf(dm / 2 - e / dm) - mpmath.exp(e) * mpmath.ncdf(-dm / 2 - e / dm)
        got = privacy.gaussian_log_delta(eps, delta_m)
        assert abs(got - float(mpmath.log(ref))) < 1e-8, (eps, delta_m)


def test_spec_calibration_value():
    # shared/specs/fourier.md §1: (1, 1e-6)-DP allows Delta_M = 0.2367, P = 0.05603.
    delta_m = privacy.gaussian_max_delta_m(1.0, 1e-6)
    assert delta_m == pytest.approx(0.2367, abs=5e-5)
    assert delta_m**2 == pytest.approx(0.05603, abs=5e-6)
    assert delta_m == pytest.approx(0.23670438066, rel=1e-9)  # pinned from our own root find


def test_epsilon_examples():
    assert privacy.gaussian_epsilon(1e-6, 0.23670438066343577) == pytest.approx(1.0, rel=1e-10)
    # (0, delta)-DP already: delta(0) = 2 Phi(Delta/2) - 1 = 0.0399 for Delta = 0.1.
    assert privacy.gaussian_delta(0.0, 0.1) == pytest.approx(2 * stats.norm.cdf(0.05) - 1, rel=1e-12)
    assert privacy.gaussian_epsilon(0.05, 0.1) == 0.0


@settings(max_examples=60, deadline=None)
@given(eps=st.floats(0.01, 20.0), delta_m=st.floats(0.05, 10.0))
def test_round_trips(eps, delta_m):
    delta = privacy.gaussian_delta(eps, delta_m)
    assume(1e-300 < delta < 0.5)
    assert privacy.gaussian_epsilon(delta, delta_m) == pytest.approx(eps, rel=1e-8, abs=1e-10)
    assert privacy.gaussian_max_delta_m(eps, delta) == pytest.approx(delta_m, rel=1e-8)


@settings(max_examples=60, deadline=None)
@given(eps=st.floats(0.0, 20.0), delta_m=st.floats(0.05, 10.0), step=st.floats(1e-3, 1.0))
def test_monotone(eps, delta_m, step):
    base = privacy.gaussian_log_delta(eps, delta_m)
    assert privacy.gaussian_log_delta(eps + step, delta_m) < base  # more eps, less delta
    assert privacy.gaussian_log_delta(eps, delta_m * (1 + step)) > base  # more cost, more delta


def test_zcdp_rho():
    for delta_m in (0.2367, 1.0, 3.5):
        assert privacy.zcdp_rho(delta_m) == pytest.approx(delta_m**2 / 2, rel=1e-15)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: privacy.gaussian_delta(-1.0, 1.0), "`epsilon`"),
        (lambda: privacy.gaussian_delta(1.0, 0.0), "`delta_m`"),
        (lambda: privacy.gaussian_delta(float("nan"), 1.0), "`epsilon`"),
        (lambda: privacy.gaussian_epsilon(1.5, 1.0), "`delta`"),
        (lambda: privacy.gaussian_epsilon(0.0, 1.0), "`delta`"),
        (lambda: privacy.gaussian_max_delta_m(0.0, 1e-6), "`epsilon`"),
        (lambda: privacy.gaussian_max_delta_m(1.0, 1.0), "`delta`"),
        (lambda: privacy.zcdp_rho(-2.0), "`delta_m`"),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---------------------------------------------------------------- profile and ≺R


def test_profile_and_cost_against_explicit_solve():
    rng = np.random.default_rng(4)
    A = rng.normal(size=(5, 5))
    sigma = A @ A.T + 0.5 * np.eye(5)
    B = rng.normal(size=(5, 7))
    p = privacy.profile(sigma, B)
    want = np.array([b @ np.linalg.solve(sigma, b) for b in B.T])
    assert np.allclose(p, want, rtol=1e-12)
    assert privacy.privacy_cost(sigma, B) == pytest.approx(want.max(), rel=1e-12)
    # Scaling the noise by s divides the profile by s.
    assert np.allclose(privacy.profile(3.0 * sigma, B), want / 3.0, rtol=1e-12)
    assert np.allclose(privacy.profile(sigma, B, chol=privacy.cholesky(sigma)), want, rtol=1e-12)


def test_cholesky_rejects_indefinite_sigma():
    with pytest.raises(ValueError, match="`sigma` is not positive definite"):
        privacy.cholesky(np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="`sigma` must be a square"):
        privacy.cholesky(np.ones((2, 3)))


def test_sorted_profile_is_decreasing():
    assert np.array_equal(privacy.sorted_profile([1.0, 3.0, 2.0]), [3.0, 2.0, 1.0])


@pytest.mark.parametrize(
    "p1, p2, want",
    [
        ([3, 1, 2], [2, 3, 1], 0),  # same multiset of entries: equally private
        ([3, 1, 1], [3, 2, 0], -1),  # tie on the max, smaller second-largest entry wins
        ([3, 2, 0], [3, 1, 1], 1),
        ([2.9, 2.9, 2.9], [3.0, 0.0, 0.0], -1),  # a smaller max wins whatever the rest
        ([5.0, 0.1], [3.0, 3.0], 1),  # larger max loses even with a smaller sum
        ([1.0, 1.0 + 1e-12], [1.0, 1.0], 0),  # within rtol
        ([2.0, 1.0, 0.5], [2.0, 1.0, 0.4], 1),  # decided only at the last entry
    ],
)
def test_compare_refined_hand_cases(p1, p2, want):
    assert privacy.compare_refined(np.array(p1, float), np.array(p2, float)) == want


def test_compare_refined_rejects_different_lengths():
    with pytest.raises(ValueError, match="different lengths"):
        privacy.compare_refined([1.0, 2.0], [1.0, 2.0, 3.0])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0.0, 10.0), min_size=1, max_size=8), st.randoms(use_true_random=False))
def test_compare_refined_is_antisymmetric_and_permutation_invariant(p, r):
    q = list(p)
    r.shuffle(q)
    assert privacy.compare_refined(p, q) == 0
    bumped = list(p)
    bumped[0] += 1.0
    assert privacy.compare_refined(p, bumped) == -1
    assert privacy.compare_refined(bumped, p) == 1
