"""Context-aware PML bounds (ffu_cvx.pml): spec pml.md §8 tests and §7 reference values."""

import itertools
import math
import time
import warnings

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from ffu_cvx import pml


# --------------------------------------------------------------------------- oracles

def enumerate_sign(W, b, alpha):
    """Theorem 2 by brute force over all 2^m sign patterns (test oracle)."""
    W = np.asarray(W, dtype=float)
    m, k = W.shape
    S = np.array(list(itertools.product([-1.0, 1.0], repeat=m)))
    c = S @ W
    g = c - c.min(axis=1, keepdims=True)
    F = alpha * np.exp(-g / b).sum(axis=1) + (1 - k * alpha) * np.exp(-g.max(axis=1) / b)
    return float(np.max(-np.log(F)))


def grid_leakage(W, b, alpha, y):
    """PML at outputs y (n, m) with the other records fixed at x' = 0 and the worst prior (Lemma A)."""
    W = np.asarray(W, dtype=float)
    k = W.shape[1]
    logf = -np.abs(y[:, :, None] - W[None, :, :]).sum(axis=1) / b  # (n, k)
    f = np.exp(logf - logf.max(axis=1, keepdims=True))
    return np.log(f.max(axis=1) / (alpha * f.sum(axis=1) + (1 - k * alpha) * f.min(axis=1)))


def hist_closed_form(b, alpha):
    return -math.log(alpha + (1 - alpha) * math.exp(-2 / b))


WORKLOADS = [("histogram", 4), ("histogram", 8), ("prefix", 8), ("range", 4), ("range", 8),
             ("haar", 4), ("haar", 8), ("haar", 16), ("difference", 3), ("difference", 4), ("difference", 8)]


# --------------------------------------------------------------------------- §7 reference values

REFERENCE = [  # workload, k, alpha, (sign, safe, corollary) at b = 1
    ("histogram", 4, 0.01, (1.938067,) * 3), ("histogram", 8, 0.05, (1.722783,) * 3),
    ("histogram", 8, 0.1, (1.505971,) * 3),
    ("prefix", 8, 0.01, (4.095141, 4.095141, 4.518739)), ("prefix", 8, 0.05, (2.530497, 2.530497, 2.978555)),
    ("prefix", 8, 0.1, (1.843093, 1.843093, 2.294412)),
    ("range", 4, 0.01, (4.373080, 4.373080, 4.385716)), ("range", 4, 0.05, (2.934700, 2.934700, 2.949711)),
    ("range", 4, 0.1, (2.265149, 2.265149, 2.280522)),
    ("haar", 4, 0.01, (3.490918, 3.530076, 3.570830)), ("haar", 4, 0.05, (2.537019, 2.613866, 2.697112)),
    ("haar", 4, 0.1, (1.966913, 2.054273, 2.150001)),
    ("haar", 8, 0.01, (4.079568, 4.261632, 4.385716)), ("haar", 8, 0.05, (2.594827, 2.803769, 2.949711)),
    ("haar", 8, 0.1, (1.918419, 2.131292, 2.280522)),
    ("difference", 4, 0.01, (3.443807, 3.548703, 3.570830)),
    ("difference", 4, 0.05, (2.448170, 2.651476, 2.697112)),
    ("difference", 4, 0.1, (1.874946, 2.097374, 2.150001)),
    ("difference", 8, 0.01, (3.307062, 3.548703, 3.570830)),
    ("difference", 8, 0.05, (2.208589, 2.651476, 2.697112)),
    ("difference", 8, 0.1, (1.673537, 2.097374, 2.150001)),
]


@pytest.mark.parametrize("name, k, alpha, expected", REFERENCE)
def test_reference_leakage_at_b1(name, k, alpha, expected):
    W = pml.pml_workload(name, k)
    got = [pml.leakage(W, 1.0, alpha, bound) for bound in pml.BOUNDS]
    np.testing.assert_allclose(got, expected, rtol=0, atol=5e-7)


FIG1 = {  # k = 8, b = Delta_1, alpha in (0.01, 0.05, 0.1, 0.125): (sign, safe)
    "histogram": [(0.9830, 0.9830), (0.9176, 0.9176), (0.8414, 0.8414), (0.8054, 0.8054)],
    "range": [(0.9661, 0.9661), (0.8408, 0.8408), (0.7036, 0.7036), (0.6414, 0.6414)],
    "haar": [(0.9441, 0.9660), (0.7474, 0.8406), (0.5459, 0.7031), (0.4585, 0.6408)],
    "difference": [(0.9444, 0.9774), (0.7487, 0.8918), (0.5480, 0.7941), (0.4745, 0.7486)],
}


@pytest.mark.parametrize("name", FIG1)
def test_reference_figure1_points(name):
    W = pml.pml_workload(name, 8)
    b = pml.l1_sensitivity(W)
    for alpha, (sign, safe), cor in zip((0.01, 0.05, 0.1, 0.125), FIG1[name], (0.9830, 0.9176, 0.8414, 0.8054)):
        assert pml.leakage(W, b, alpha, "sign") == pytest.approx(sign, abs=5e-5)
        assert pml.leakage(W, b, alpha, "safe") == pytest.approx(safe, abs=5e-5)
        assert pml.leakage(W, b, alpha, "corollary") == pytest.approx(cor, abs=5e-5)


@pytest.mark.parametrize("name, k, eps, alpha, expected", [
    ("difference", 8, 1.0, 0.01, (3.772992, 3.908611, 3.931170)),
    ("difference", 8, 1.0, 0.05, (2.906270, 3.544449, 3.653669)),
    ("difference", 8, 1.0, 0.1, (1.980632, 3.092923, 3.300717)),
    ("difference", 8, 0.5, 0.05, (6.142944, 7.270867, 7.480275)),
    ("difference", 8, 2.0, 0.05, (1.189577, 1.601791, 1.659838)),
    ("haar", 8, 1.0, 0.05, (4.346257, 4.977521, 5.480504)),
    ("histogram", 8, 1.0, 0.01, (1.965585,) * 3),
    ("histogram", 8, 1.0, 0.1, (1.650359,) * 3),
])
def test_reference_min_noise_scale(name, k, eps, alpha, expected):
    W = pml.pml_workload(name, k)
    got = [pml.min_noise_scale(W, eps, alpha, bound) for bound in pml.BOUNDS]
    np.testing.assert_allclose(got, expected, rtol=0, atol=5e-7)
    assert max(got) < pml.l1_sensitivity(W) / eps


@pytest.mark.parametrize("name, k, delta", [
    ("histogram", 5, 2), ("prefix", 8, 7), ("range", 4, 6), ("range", 8, 20), ("range", 16, 72),
    ("haar", 4, 4), ("haar", 8, 6), ("haar", 16, 8), ("difference", 2, 2), ("difference", 3, 3),
    ("difference", 9, 4),
])
def test_l1_sensitivity_substitution(name, k, delta):
    W = pml.pml_workload(name, k)
    assert pml.l1_sensitivity(W) == delta
    assert cdist(W.T, W.T, "cityblock").max() == delta  # structured shortcuts agree with the definition
    assert pml.dp_leakage(W, 2.0) == delta / 2


# --------------------------------------------------------------------------- §8 properties

@pytest.mark.parametrize("k", [2, 3, 8])
@pytest.mark.parametrize("b", [0.2, 1.0, 7.5])
@pytest.mark.parametrize("alpha_frac", [1e-3, 0.3, 1.0])
def test_histogram_all_bounds_equal_closed_form(k, b, alpha_frac):
    alpha = alpha_frac / k
    V = 3.0 * np.eye(k)[::-1] * np.where(np.arange(k) % 2, -1.0, 1.0)[:, None]  # scaled, permuted, signed
    for bound in pml.BOUNDS:
        assert pml.leakage(np.eye(k), b, alpha, bound) == pytest.approx(hist_closed_form(b, alpha), rel=1e-13)
        assert pml.leakage(V, 3 * b, alpha, bound) == pytest.approx(hist_closed_form(b, alpha), rel=1e-13)
        for structure in ("two_valued", "general"):  # the generic algorithms agree with the closed form
            assert pml.leakage(np.eye(k), b, alpha, bound, structure=structure) == pytest.approx(
                hist_closed_form(b, alpha), rel=1e-13)


@pytest.mark.parametrize("name, k", WORKLOADS)
def test_ordering_and_limits(name, k):
    W = pml.pml_workload(name, k)
    delta = pml.l1_sensitivity(W)
    for b in (0.3, 1.0, 4.0):
        for alpha in (1e-4, 0.02, 1 / k):
            sign, safe, cor = (pml.leakage(W, b, alpha, bd) for bd in pml.BOUNDS)
            assert sign <= safe * (1 + 1e-13) and safe <= cor * (1 + 1e-13)
            assert cor < delta / b
            assert cor <= -math.log(alpha) * (1 + 1e-12)  # strict in exact arithmetic
    for bound in pml.BOUNDS:
        for dp in (0.5, 1.0, 3.0):  # alpha -> 0 recovers DP (the gap is O(k alpha e^{Delta/b}))
            assert pml.leakage(W, delta / dp, 1e-12, bound) == pytest.approx(dp, rel=1e-9)
        # b -> 0 tends to log(1/alpha)
        assert pml.leakage(W, delta / 200, 0.01, bound) == pytest.approx(math.log(100), rel=1e-12)


def test_convergence_to_dp_is_monotone_in_alpha():
    W = pml.differences(8)
    for bound in pml.BOUNDS:
        vals = [pml.leakage(W, 1.0, a, bound) for a in (0.1, 0.01, 1e-3, 1e-5, 1e-8)]
        assert np.all(np.diff(vals) > 0)
        assert 4.0 - vals[-1] < 1e-6


@pytest.mark.parametrize("name, k", [("histogram", 6), ("prefix", 8), ("range", 5)])
def test_sign_equals_safe_for_zero_one_workloads(name, k):
    W = pml.pml_workload(name, k)
    assert pml.sign_bound(W, 1.0, 0.05).structure == ("histogram" if name == "histogram" else "two_valued")
    for b, alpha in [(0.5, 0.01), (1.0, 0.05), (3.0, 1 / k)]:
        sign = pml.leakage(W, b, alpha, "sign")
        assert sign == pytest.approx(pml.leakage(W, b, alpha, "safe"), rel=1e-14)
        assert sign == pytest.approx(enumerate_sign(W, b, alpha), rel=1e-12)


def test_sign_equals_safe_for_random_two_valued_rows():
    rng = np.random.default_rng(3)
    for _ in range(20):
        lo, hi = rng.normal(size=(2, 6, 1))
        W = np.where(rng.random((6, 5)) < 0.5, lo, lo + np.abs(hi) + 0.1)
        s, f = pml.leakage(W, 0.7, 0.1, "sign"), pml.leakage(W, 0.7, 0.1, "safe")
        assert s == pytest.approx(f, rel=1e-13)
        assert s == pytest.approx(enumerate_sign(W, 0.7, 0.1), rel=1e-12)


@pytest.mark.parametrize("name, k", [("haar", 4), ("haar", 8), ("difference", 4), ("difference", 8)])
def test_sign_strictly_below_safe_with_three_valued_rows(name, k):
    W = pml.pml_workload(name, k)
    assert pml.leakage(W, 1.0, 0.05, "sign") < pml.leakage(W, 1.0, 0.05, "safe") - 1e-3


@pytest.mark.parametrize("name, k", WORKLOADS)
def test_strictly_decreasing_in_b(name, k):
    W = pml.pml_workload(name, k)
    bs = pml.l1_sensitivity(W) * np.geomspace(0.1, 30, 25)  # leakage from near log(1/alpha) to ~0.03
    for bound in pml.BOUNDS:
        vals = np.array([pml.leakage(W, b, 0.05 / k * 2, bound) for b in bs])
        assert np.all(np.diff(vals) < 0)


def test_far_orthant_and_grid_oracle_m2_k3():
    """Spec §8.5: the sup over an output grid is the safe bound (attained at y = w_p, which
    the grid contains); far out in each orthant the leakage is exactly the sign bound."""
    rng = np.random.default_rng(2026)
    strict = 0
    for trial in range(60):
        W = rng.normal(size=(2, 3)) * rng.choice([0.5, 2.0])
        b, alpha = rng.uniform(0.2, 3.0), rng.uniform(1e-3, 1 / 3)
        axes = [np.union1d(np.linspace(W[l].min() - 3, W[l].max() + 3, 61), W[l]) for l in range(2)]
        y = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 2)
        grid = grid_leakage(W, b, alpha, y)
        safe = pml.leakage(W, b, alpha, "safe")
        assert grid.max() == pytest.approx(safe, abs=1e-9)
        far = 10 * (np.abs(W).max() + 1)
        corners = np.array(list(itertools.product([-far, far], repeat=2)))
        sign = pml.leakage(W, b, alpha, "sign", structure="general")
        assert grid_leakage(W, b, alpha, corners).max() == pytest.approx(sign, abs=1e-9)
        assert sign == pytest.approx(enumerate_sign(W, b, alpha), abs=1e-12)
        strict += sign < safe - 1e-6
    assert strict > 0  # real-valued rows with three values separate the two bounds


def test_grid_oracle_m3_and_safe_bound_holds_for_mixtures():
    """m = 3: the grid sup (breakpoints included) is the safe bound; and with one other
    record of any class distribution q (Lemma B) no output exceeds it."""
    rng = np.random.default_rng(7)
    for trial in range(15):
        k = int(rng.integers(2, 5))
        W = rng.integers(-2, 3, size=(3, k)) + rng.normal(scale=0.3, size=(3, k))
        b, alpha = rng.uniform(0.3, 2.0), rng.uniform(1e-3, 1 / k)
        axes = [np.union1d(np.linspace(W[l].min() - 2, W[l].max() + 2, 13), W[l]) for l in range(3)]
        y = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
        safe = pml.leakage(W, b, alpha, "safe")
        assert grid_leakage(W, b, alpha, y).max() == pytest.approx(safe, abs=1e-9)
        q = rng.dirichlet(np.ones(k))
        yy = (W[:, :, None] + W[:, None, :]).reshape(3, -1).T  # noise-free answers with two records
        yy = np.vstack([yy, rng.normal(scale=3, size=(500, 3))])
        logf = -np.abs(yy[:, :, None, None] - W[None, :, :, None] - W[None, :, None, :]).sum(axis=1) / b
        f = (np.exp(logf) * q[None, :, None]).sum(axis=1)  # (n, k): f_j(y) averaged over the other record
        exact = np.log(f.max(axis=1) / (alpha * f.sum(axis=1) + (1 - k * alpha) * f.min(axis=1)))
        assert exact.max() <= safe + 1e-12


def test_sign_bound_is_optimistic_for_two_records():
    """Spec §2 caveat: differences(4), b = 1, alpha = 0.05, one other record that is itself
    alpha-bounded (1 - 3 alpha on class 1). The exact PML at y = w_1 + w_1 is 2.64714:
    above the sign bound 2.44817 and below the safe bound 2.65148."""
    W, b, alpha, k = pml.differences(4), 1.0, 0.05, 4
    q = np.full(k, alpha)
    q[1] = 1 - 3 * alpha
    y = W[:, 1] + W[:, 1]
    f = np.array([sum(q[c] * np.exp(-np.abs(y - W[:, c] - W[:, j]).sum() / b) for c in range(k))
                  for j in range(k)])
    exact = math.log(f.max() / (alpha * f.sum() + (1 - k * alpha) * f.min()))
    assert exact == pytest.approx(2.647144, abs=1e-6)
    assert pml.leakage(W, b, alpha, "sign") < exact < pml.leakage(W, b, alpha, "safe")


# --------------------------------------------------------------------------- fast algorithms vs enumeration

@pytest.mark.parametrize("k", range(2, 12))
def test_chain_dp_matches_enumeration(k):
    W = pml.differences(k)
    for b, alpha in [(0.3, 1e-3), (1.0, 0.05 * 2 / k), (2.5, 1 / k)]:
        want = enumerate_sign(W, b, alpha)
        fast = pml.sign_bound(W, b, alpha)
        assert fast.structure == ("two_valued" if k == 2 else "difference")
        assert fast.value == pytest.approx(want, abs=1e-13)
        assert pml.leakage(W, b, alpha, "sign", structure="difference") == pytest.approx(want, abs=1e-13)
        assert pml.leakage(W, b, alpha, "sign", structure="general") == pytest.approx(want, abs=1e-13)


@pytest.mark.parametrize("k", [2, 4, 8, 16])
def test_tree_dp_matches_enumeration(k):
    W = pml.haar(k)
    for b, alpha in [(0.3, 1e-3), (1.0, 0.01), (2.5, 1 / k)]:
        want = enumerate_sign(W, b, alpha)
        assert pml.leakage(W, b, alpha, "sign", structure="haar") == pytest.approx(want, abs=1e-13)
        assert pml.leakage(W, b, alpha, "sign", structure="general") == pytest.approx(want, abs=1e-13)
        assert pml.leakage(W, b, alpha, "sign") == pytest.approx(want, abs=1e-13)


def test_forced_sign_reduction_matches_enumeration_random_integer():
    rng = np.random.default_rng(11)
    for _ in range(60):
        m, k = rng.integers(2, 8), rng.integers(2, 6)
        W = rng.integers(-3, 4, size=(m, k)).astype(float)
        if np.all(W.max(axis=1) == W.min(axis=1)):
            continue
        b, alpha = rng.uniform(0.2, 3), rng.uniform(1e-3, 1 / k)
        res = pml.sign_bound(W, b, alpha, structure="general")
        assert res.value == pytest.approx(enumerate_sign(W, b, alpha), abs=1e-12)
        assert res.n_patterns == pml.sign_pattern_count(W) <= k * 2**m


def test_structure_recognised_up_to_scale_order_and_signs():
    rng = np.random.default_rng(5)
    for name, k in [("difference", 7), ("haar", 8)]:
        W = pml.pml_workload(name, k)
        V = 2.5 * W[rng.permutation(W.shape[0])] * rng.choice([-1.0, 1.0], size=(W.shape[0], 1))
        res = pml.sign_bound(V, 2.5, 0.05)
        assert res.structure == name and res.n_patterns == 0
        assert res.value == pytest.approx(pml.leakage(W, 1.0, 0.05, "sign"), abs=1e-13)
        assert res.value == pytest.approx(enumerate_sign(V, 2.5, 0.05), abs=1e-12)
        assert pml.l1_sensitivity(V) == pytest.approx(2.5 * pml.l1_sensitivity(W))
    # a column permutation breaks the chain: not recognised, still computed exactly
    P = pml.differences(6)[:, [0, 2, 1, 3, 4, 5]]
    assert pml.sign_bound(P, 1.0, 0.05).structure == "general"
    assert pml.leakage(P, 1.0, 0.05, "sign") == pytest.approx(enumerate_sign(P, 1.0, 0.05), abs=1e-12)


def test_constant_rows_change_nothing():
    W = pml.differences(5)
    V = np.vstack([W, np.full((1, 5), 3.0)])
    for bound in pml.BOUNDS:
        assert pml.leakage(V, 1.3, 0.1, bound) == pytest.approx(pml.leakage(W, 1.3, 0.1, bound), abs=1e-14)
    assert pml.leakage(np.ones((2, 4)), 1.0, 0.1) == 0.0


@pytest.mark.parametrize("name", ["haar", "difference"])
def test_sign_bound_k1024_is_fast(name):
    W = pml.pml_workload(name, 1024)
    t0 = time.perf_counter()
    res = pml.sign_bound(W, 1.0, 1e-4)
    elapsed = time.perf_counter() - t0
    assert res.structure == name
    assert elapsed < 5.0, f"{name} k=1024 took {elapsed:.2f}s"
    assert res.value < pml.leakage(W, 1.0, 1e-4, "safe") < pml.dp_leakage(W, 1.0)


def test_general_algorithm_counts_and_refuses():
    assert pml.sign_pattern_count(pml.haar(16)) == 16 * 2**11  # r_p = (k - 1) - log2 k for every p
    # differences: rows not touching p hold W_lp = 0 inside [-1, 1], so they are free
    assert pml.sign_pattern_count(pml.differences(6)) == 2 * 2**4 + 4 * 2**3
    assert pml.sign_pattern_count(pml.prefix(6)) == 6  # two-valued rows are always forced
    res = pml.sign_bound(pml.haar(16), 1.0, 0.05, structure="general")
    assert res.n_patterns == 32768
    t0 = time.perf_counter()
    with pytest.raises(pml.TooManyPatternsError, match=r"2147483648 sign patterns.*`max_patterns`"):
        pml.leakage(pml.haar(32), 1.0, 0.01, "sign", structure="general")
    assert time.perf_counter() - t0 < 2.0
    with pytest.raises(ValueError, match="32768 sign patterns"):
        pml.sign_bound(pml.haar(16), 1.0, 0.05, structure="general", max_patterns=1000)
    assert pml.sign_bound(pml.haar(32), 1.0, 0.01).structure == "haar"  # auto avoids the enumeration


# --------------------------------------------------------------------------- minimum noise scale

@pytest.mark.parametrize("name, k", [("histogram", 8), ("prefix", 6), ("range", 6), ("haar", 8),
                                     ("difference", 8)])
def test_min_noise_scale_is_smallest_and_ordered(name, k):
    W = pml.pml_workload(name, k)
    delta = pml.l1_sensitivity(W)
    for eps, alpha in [(0.5, 0.01), (1.0, 0.05), (1.5, 1 / k)]:
        bs = [pml.min_noise_scale(W, eps, alpha, bound) for bound in pml.BOUNDS]
        assert bs[0] <= bs[1] + 1e-12 and bs[1] <= bs[2] + 1e-12 and bs[2] < delta / eps
        for bound, b in zip(pml.BOUNDS, bs):
            assert pml.leakage(W, b, alpha, bound) <= eps
            assert pml.leakage(W, b * (1 - 1e-9), alpha, bound) > eps


def test_corollary_closed_form():
    W = pml.differences(8)
    for eps, alpha in [(0.3, 0.01), (1.0, 0.1), (2.2, 0.1)]:
        b = pml.min_noise_scale(W, eps, alpha, "corollary")
        assert b == pytest.approx(4 / math.log((1 - alpha) / (math.exp(-eps) - alpha)), rel=1e-12)  # rounded up
        assert pml.leakage(W, b, alpha, "corollary") == pytest.approx(eps, rel=1e-12)


def test_no_noise_needed_returns_zero_with_warning():
    W = pml.differences(8)
    for bound in pml.BOUNDS:
        with pytest.warns(pml.NoNoiseNeededWarning, match="log\\(1/alpha\\)"):
            assert pml.min_noise_scale(W, math.log(1 / 0.1), 0.1, bound) == 0.0
    with pytest.warns(pml.NoNoiseNeededWarning, match="do not depend"):
        assert pml.min_noise_scale(np.ones((3, 4)), 1.0, 0.1) == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pml.min_noise_scale(W, math.log(1 / 0.1) * 0.999, 0.1, "sign") > 0


def test_min_noise_scale_k1024_difference():
    W = pml.differences(1024)
    b = pml.min_noise_scale(W, 1.0, 1e-4, "sign")
    assert b < 4.0
    assert pml.leakage(W, b, 1e-4, "sign") <= 1.0 < pml.leakage(W, b * (1 - 1e-9), 1e-4, "sign")


# --------------------------------------------------------------------------- neighbouring relations

SENSITIVITIES = [  # workload, k, (substitution, add/remove): the builders' closed forms
    ("histogram", 8, (2, 1)), ("prefix", 8, (7, 8)), ("range", 8, (20, 20)), ("range", 5, (9, 9)),
    ("haar", 8, (6, 4)), ("haar", 16, (8, 5)), ("difference", 8, (4, 2)), ("difference", 3, (3, 2)),
    ("difference", 2, (2, 1)),
]


@pytest.mark.parametrize("name, k, expected", SENSITIVITIES)
def test_l1_sensitivity_under_each_relation(name, k, expected):
    W = pml.pml_workload(name, k)
    sub = pml.l1_sensitivity(W, neighbours=pml.SUBSTITUTE)
    add = pml.l1_sensitivity(W, neighbours=pml.ADD_REMOVE)
    assert (sub, add) == expected
    assert pml.l1_sensitivity(W) == sub  # the default is the spec's (substitution)
    assert add == np.abs(W).sum(axis=0).max()  # the definition: one record's column
    assert pml.dp_leakage(W, 4.0, neighbours=pml.ADD_REMOVE) == add / 4
    assert pml.dp_leakage(W, 4.0) == sub / 4


def test_add_remove_counts_constant_rows_substitution_does_not():
    W = np.vstack([np.ones(6), 3 * np.eye(6)])  # the total count beside a scaled histogram
    assert pml.l1_sensitivity(W) == 6.0  # moving a record leaves the total unchanged
    assert pml.l1_sensitivity(W, neighbours=pml.ADD_REMOVE) == 4.0  # adding one moves it by 1
    assert pml.sign_bound(W, 1.0, 0.1).structure == "histogram"


def test_laplace_release_states_its_relation():
    x = np.array([5, 3, 0, 2, 7, 1, 1, 9])
    sub = pml.laplace_release(x, 1.0, 0.05, rng=7)
    add = pml.laplace_release(x, 1.0, 0.05, rng=7, neighbours=pml.ADD_REMOVE)
    assert sub.neighbours == pml.SUBSTITUTE and add.neighbours == pml.ADD_REMOVE
    b = sub.noise.scale
    assert add.noise.scale == b and np.array_equal(add.answers, sub.answers)  # calibrated to PML either way
    assert (sub.epsilon(), add.epsilon()) == (pytest.approx(2 / b), pytest.approx(1 / b))
    W = pml.differences(8)
    r = pml.laplace_release(x, 1.0, 0.05, W=W, rng=7, neighbours=pml.ADD_REMOVE)
    assert r.epsilon() == pytest.approx(2 / r.noise.scale) and r.noise.scale == pytest.approx(3.544449, abs=5e-7)
    assert pml.sign_bound(W, 1.0, 0.05).neighbours == pml.SUBSTITUTE


@pytest.mark.parametrize("call", [
    lambda: pml.l1_sensitivity(np.eye(3), neighbours="bounded"),
    lambda: pml.dp_leakage(np.eye(3), 1.0, neighbours=None),
    lambda: pml.laplace_release([1, 2, 1], 1.0, 0.1, rng=0, neighbours="add/remove"),
])
def test_bad_neighbours_names_the_argument_and_the_choices(call):
    with pytest.raises(ValueError, match=r"`neighbours` must be one of .*add/remove one record"):
        call()


# --------------------------------------------------------------------------- release

def test_laplace_release_histogram():
    x = np.array([5, 3, 0, 2, 7, 1, 1, 9])
    r1 = pml.laplace_release(x, 1.0, 0.05, rng=np.random.default_rng(7))
    r2 = pml.laplace_release(x, 1.0, 0.05, rng=7)
    np.testing.assert_array_equal(r1.answers, r2.answers)
    b = r1.noise.scale
    assert b == pytest.approx(2 / math.log(0.95 / (math.exp(-1) - 0.05)), rel=1e-10)
    assert r1.noise.leakage <= 1.0 and r1.noise.leakage == pytest.approx(1.0, abs=1e-10)
    assert r1.epsilon() == pytest.approx(2 / b) and np.all(r1.variances == 2 * b ** 2)
    assert r1.answers.shape == (8,)
    # the noise is Laplace(b): E|Z| = b, checked on a large histogram (standard error 0.7%)
    k = 20000
    big = pml.laplace_release(np.zeros(k), 1.0, 1 / (2 * k), rng=1)
    assert np.mean(np.abs(big.answers)) == pytest.approx(big.noise.scale, rel=0.03)
    assert np.median(big.answers) == pytest.approx(0.0, abs=0.05 * big.noise.scale)


def test_laplace_release_other_queries_and_no_noise():
    x = np.array([4, 0, 2, 6])
    W = pml.differences(4)
    r = pml.laplace_release(x, 1.0, 0.05, W=W, bound="sign", rng=3)
    assert r.noise.scale == pytest.approx(pml.min_noise_scale(W, 1.0, 0.05, "sign"))
    assert r.answers.shape == (3,)
    with pytest.warns(pml.NoNoiseNeededWarning):
        r0 = pml.laplace_release(x, 3.0, 0.05, rng=3)
    assert r0.noise.scale == 0.0 and np.array_equal(r0.answers, x) and r0.noise.leakage == pytest.approx(math.log(20))
    assert r0.epsilon() == math.inf and np.array_equal(r0.lower, r0.upper)
    for neighbours, eps in ((pml.SUBSTITUTE, 0.0), (pml.ADD_REMOVE, math.inf)):  # adding a record moves totals
        with pytest.warns(pml.NoNoiseNeededWarning):  # the answers ignore the records' classes: no leakage
            flat = pml.laplace_release(x, 1.0, 0.05, W=np.ones((2, 4)), rng=3, neighbours=neighbours)
        assert flat.noise.leakage == 0.0 and flat.epsilon() == eps


# --------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("call, match", [
    (lambda: pml.leakage(np.eye(4), 1.0, 0.0), "`alpha`"),
    (lambda: pml.leakage(np.eye(4), 1.0, -0.1), "`alpha`"),
    (lambda: pml.leakage(np.eye(4), 1.0, 0.26), r"`alpha`.*1/k"),
    (lambda: pml.leakage(np.eye(4), 1.0, float("nan")), "`alpha`"),
    (lambda: pml.leakage(np.eye(4), 0.0, 0.1), "`b`"),
    (lambda: pml.leakage(np.eye(4), -1.0, 0.1), "`b`"),
    (lambda: pml.leakage(np.eye(4), float("inf"), 0.1), "`b`"),
    (lambda: pml.dp_leakage(np.eye(4), 0.0), "`b`"),
    (lambda: pml.min_noise_scale(np.eye(4), 0.0, 0.1), "`epsilon`"),
    (lambda: pml.min_noise_scale(np.eye(4), -1.0, 0.1), "`epsilon`"),
    (lambda: pml.min_noise_scale(np.eye(4), 1.0, 0.3), "`alpha`"),
    (lambda: pml.leakage(np.array([[1.0, np.nan]]), 1.0, 0.1), "`W`.*NaN"),
    (lambda: pml.leakage(np.ones(3), 1.0, 0.1), "`W`.*2-D"),
    (lambda: pml.leakage(np.ones((3, 1)), 1.0, 0.1), "`W`.*k >= 2"),
    (lambda: pml.leakage(np.eye(4), 1.0, 0.1, "tight"), "`bound`"),
    (lambda: pml.leakage(np.eye(4), 1.0, 0.1, "sign", structure="tree"), "`structure`"),
    (lambda: pml.leakage(pml.differences(5), 1.0, 0.1, "sign", structure="haar"), "`structure`='haar'"),
    (lambda: pml.leakage(np.eye(4), 1.0, 0.1, "sign", max_patterns=0), "`max_patterns`"),
    (lambda: pml.haar(6), "`k`.*power of 2"),
    (lambda: pml.pml_workload("marginal", 4), "`name`"),
    (lambda: pml.laplace_release([1, 2, -1], 1.0, 0.1, rng=0), "`x`"),
    (lambda: pml.laplace_release([1, 2.5, 1], 1.0, 0.1, rng=0), "`x`"),
    (lambda: pml.laplace_release([1, 2, 1], 1.0, 0.1, rng=None), "`rng`"),
    (lambda: pml.laplace_release([1, 2, 1], 1.0, 0.1, W=np.eye(4), rng=0), "`x`"),
])
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --------------------------------------------------------------------------- experiments

@pytest.fixture
def results_tmp(tmp_path, monkeypatch):
    from experiments import paths
    monkeypatch.setenv(paths.ENV, str(tmp_path))
    return tmp_path


def test_pml_figure1_quick(results_tmp):
    from experiments import pml_figure1
    rows = pml_figure1.main(["--quick", "--no-cache", "--quiet"])
    assert {r["workload"] for r in rows} == {"histogram", "range", "haar"}
    for r in rows:
        assert r["dp"] == pytest.approx(1.0)
        assert r["sign"] <= r["safe"] + 1e-13 <= r["corollary"] + 2e-13 < 1.0 + 1e-12
        assert r["corollary"] == pytest.approx(-math.log(r["alpha"] + (1 - r["alpha"]) * math.exp(-1)))
    haar = next(r for r in rows if r["workload"] == "haar" and r["alpha"] == 0.05)
    assert (haar["sign"], haar["safe"]) == (pytest.approx(0.7474, abs=5e-5), pytest.approx(0.8406, abs=5e-5))
    for ext in ("png", "pdf"):
        assert (results_tmp / "figures" / f"pml_figure1.{ext}").stat().st_size > 1000
    assert (results_tmp / "results" / "pml_figure1.json").exists()


def test_pml_figure2_quick(results_tmp):
    from experiments import pml_figure2
    rows = pml_figure2.main(["--quick", "--quiet"])
    again = pml_figure2.main(["--quick", "--quiet", "--collect"])  # served from the cell cache
    assert again == rows
    ref = next(r for r in rows if r["alpha"] == 0.05 and r["epsilon"] == 1.0)
    np.testing.assert_allclose([ref["b_sign"], ref["b_safe"], ref["b_corollary"], ref["b_dp"]],
                               [2.906270, 3.544449, 3.653669, 4.0], atol=5e-7)
    for r in rows:
        if r["epsilon"] >= math.log(1 / r["alpha"]):
            assert r["b_sign"] == r["b_safe"] == r["b_corollary"] == 0.0
        else:
            assert 0 < r["b_sign"] <= r["b_safe"] <= r["b_corollary"] < r["b_dp"]
    assert (results_tmp / "figures" / "pml_figure2.png").exists()
