"""Release, privacy statements, Problem 2 and free extra queries (ffu_cvx.release.mechanism)."""

import math

import numpy as np
import pytest
from scipy import linalg, stats

import ffu_cvx as ffu
from ffu_cvx.release import mechanism as mech_mod
from ffu_cvx.model import privacy

N_RELEASES = 20_000
#: Family-wise false-alarm probability of each statistical check (fixed seeds make it deterministic).
P_FALSE = 1e-6

W51 = np.array([[1.0, 1.0], [1.0, 0.0]])  # §5.1; optimum Sigma = gamma [[1, .5], [.5, 1]], alpha = 4 / (3 gamma)


def _closed_form(gamma=1.0):
    prob = ffu.FitnessProblem(W51, [gamma, gamma], basis=W51)
    return ffu.Solution.from_sigma(prob, gamma * np.array([[1.0, 0.5], [0.5, 1.0]]), method="closed_form")


def _paper_m1():
    # §3.2.1: B1 = [[1, 1, 0], [0, 1, 1]] with Sigma = I has profile [1, 2, 1].
    B1 = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    prob = ffu.FitnessProblem(B1, [1.0, 1.0], basis=B1)
    return ffu.Solution.from_sigma(prob, np.eye(2), method="paper")


def _releases(mech, x, seed):
    rng = np.random.default_rng(seed)
    return np.array([mech.release(x, rng=rng).answers for _ in range(N_RELEASES)])


def _random_spd(k, seed):
    A = np.random.default_rng(seed).standard_normal((k, k))
    return A @ A.T + 0.5 * np.eye(k)


# ---------------------------------------------------------------------------- release statistics
def test_release_mean_and_covariance_match_exactly_when_m_equals_k():
    problem = ffu.FitnessProblem.from_workload(ffu.workloads.prefix(8), basis="upper")
    sol = ffu.solve(problem, method="sdp")
    mech = ffu.GaussianMechanism(sol)
    x = np.array([5, 0, 12, 3, 7, 1, 0, 9])
    Y = _releases(mech, x, seed=20240601)
    C = problem.L @ sol.sigma @ problem.L.T
    np.testing.assert_allclose(mech.covariance(), C, rtol=1e-12, atol=1e-12)
    chol = linalg.cholesky(C, lower=True)
    Z = linalg.solve_triangular(chol, (Y - problem.W @ x).T, lower=True).T  # N(0, I) if correct
    n, m = Z.shape
    # Mean: n |mean(Z)|^2 ~ chi2(m).
    mean_stat = n * float(np.sum(Z.mean(axis=0) ** 2))
    assert mean_stat < stats.chi2.ppf(1 - P_FALSE, m)
    # Covariance (known mean): likelihood-ratio statistic n (tr S - log det S - m) ~ chi2(m(m+1)/2).
    df = m * (m + 1) // 2
    limit = stats.chi2.ppf(1 - P_FALSE, df)

    def lrt(Zw):
        S = Zw.T @ Zw / n
        return n * (np.trace(S) - np.linalg.slogdet(S)[1] - m)

    assert lrt(Z) < limit
    # The test has power: ignoring the correlations of L Sigma L^T is rejected outright.
    Zd = (Y - problem.W @ x) / np.sqrt(np.diag(C))
    assert lrt(Zd) > 10 * limit
    # Intervals: each query's 95% interval covers W x at the binomial rate.
    rel = mech.release(x, rng=1)
    half = rel.upper - rel.answers
    cover = np.mean(np.abs(Y - problem.W @ x) <= half, axis=0)
    z = stats.norm.ppf(1 - P_FALSE / (2 * m))
    assert np.all(np.abs(cover - 0.95) <= z * math.sqrt(0.95 * 0.05 / n))


def test_release_covariance_when_workload_is_rank_deficient():
    # m = 3 queries of rank 2: L Sigma L^T is singular, so compare entrywise.
    W = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [1.0, 2.0, 1.0]])
    problem = ffu.FitnessProblem(W, [3.0, 3.0, 9.0])
    sol = ffu.Solution.from_sigma(problem, _random_spd(problem.k, 3), method="test")
    mech = ffu.GaussianMechanism(sol)
    x = np.array([10.0, 4.0, 0.0])
    Y = _releases(mech, x, seed=7)
    C = problem.L @ sol.sigma @ problem.L.T
    assert np.linalg.matrix_rank(C) == 2
    n = Y.shape[0]
    mean = Y.mean(axis=0)
    S = np.cov(Y, rowvar=False)
    iu = np.triu_indices(3)
    z = stats.norm.ppf(1 - P_FALSE / (2 * (len(iu[0]) + 3)))
    # Var of a sample covariance entry of Gaussians: (C_jl^2 + C_jj C_ll) / n.
    se = np.sqrt((C ** 2 + np.outer(np.diag(C), np.diag(C))) / n)
    assert np.all(np.abs(S - C)[iu] <= z * se[iu])
    assert np.all(np.abs(mean - W @ x) <= z * np.sqrt(np.diag(C) / n))
    # The third answer is the sum of the first two, noise included: the release is consistent.
    np.testing.assert_allclose(Y[:, 2], Y[:, 0] + Y[:, 1], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(mech.variances, np.diag(C), rtol=1e-12)


def test_release_randomness_is_explicit():
    mech = ffu.GaussianMechanism(_closed_form())
    x = [3, 4]
    a = mech.release(x, rng=123).answers
    np.testing.assert_array_equal(a, mech.release(x, rng=123).answers)
    np.testing.assert_array_equal(a, mech.release(x, rng=np.random.default_rng(123)).answers)
    # The default draws from OS entropy: two releases differ.
    assert not np.array_equal(mech.release(x).answers, mech.release(x).answers)
    with pytest.raises(ValueError, match="`rng`"):
        mech.release(x, rng="seed")


def test_release_interval_and_level():
    mech = ffu.GaussianMechanism(_closed_form(2.0))
    rel = mech.release([1, 2], rng=0, level=0.9)
    np.testing.assert_allclose(rel.variances, [2.0, 2.0], rtol=1e-12)
    np.testing.assert_allclose(rel.upper - rel.answers, stats.norm.ppf(0.95) * np.sqrt(2.0), rtol=1e-12)
    np.testing.assert_allclose(rel.answers - rel.lower, rel.upper - rel.answers, rtol=1e-12)
    for level in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="`level`"):
            mech.release([1, 2], rng=0, level=level)


@pytest.mark.parametrize(
    "x, match",
    [
        ([1, 2, 3], r"shape \(2,\)"),
        ([[1, 2]], "flatten"),
        ([1, np.nan], "NaN"),
        ([1, -1], "non-negative"),
        ([1, 2.5], "whole counts"),
        ([True, False], "booleans"),
        (["a", "b"], "numeric"),
    ],
)
def test_release_validates_the_histogram(x, match):
    mech = ffu.GaussianMechanism(_closed_form())
    with pytest.raises(ValueError, match=match) as info:
        mech.release(x, rng=0)
    assert "`x`" in str(info.value)


def test_release_accepts_integral_floats():
    mech = ffu.GaussianMechanism(_closed_form())
    a = mech.release(np.array([3.0, 4.0]), rng=5).answers
    np.testing.assert_array_equal(a, mech.release(np.array([3, 4], dtype=np.int64), rng=5).answers)


def test_mechanism_rejects_non_solution():
    with pytest.raises(ValueError, match="`solution`"):
        ffu.GaussianMechanism({"sigma": np.eye(2)})


# ---------------------------------------------------------------------------- privacy statements
def test_privacy_statements_use_the_exact_gaussian_mechanism():
    sol = _closed_form(1.0)
    mech = ffu.GaussianMechanism(sol)
    assert mech.privacy_cost == pytest.approx(4 / 3, rel=1e-12)
    assert mech.rho == pytest.approx(2 / 3, rel=1e-12)
    eps = mech.epsilon(1e-6)
    assert eps == pytest.approx(sol.epsilon(1e-6), rel=1e-12)
    assert privacy.gaussian_delta(eps, math.sqrt(4 / 3)) == pytest.approx(1e-6, rel=1e-9)
    assert mech.delta(eps) == pytest.approx(1e-6, rel=1e-9)
    text = mech.statement(1e-6)
    assert f"{eps:.6g}" in text and "zCDP" in text


# ---------------------------------------------------------------------------- Problem 2
@pytest.mark.parametrize("epsilon, delta", [(1.0, 1e-6), (0.1, 1e-9), (4.0, 1e-3)])
def test_problem2_meets_the_target_exactly(epsilon, delta):
    gamma = 1.0
    res = mech_mod.problem2(_closed_form(gamma), epsilon, delta, sampler=None)  # the ideal Gaussian: exact
    sol = res.solution
    alpha = privacy.privacy_cost(sol.sigma, sol.problem.B)  # recomputed from Sigma, not read back
    assert privacy.gaussian_delta(epsilon, math.sqrt(alpha)) == pytest.approx(delta, rel=1e-9)
    variances = np.einsum("ij,jk,ik->i", sol.problem.L, sol.sigma, sol.problem.L)
    assert np.all(variances <= res.k * sol.problem.c * (1 + 1e-12))
    # Theorem 8 on the §5.1 optimum: k = alpha_1 / alpha_target with alpha_1 = 4 / (3 gamma).
    dm = privacy.gaussian_max_delta_m(epsilon, delta)
    assert res.k == pytest.approx(4 / (3 * gamma) / dm ** 2, rel=1e-12)
    assert res.k_lower_bound == pytest.approx(res.k, rel=1e-8)
    assert res.k_lower_bound <= res.k * (1 + 1e-12)


def test_problem2_from_a_problem_solves_it_first():
    problem = ffu.FitnessProblem.from_workload(ffu.workloads.prefix(8))
    res = mech_mod.problem2(problem, 1.0, 1e-6, method="sdp", sampler=None)
    alpha1 = ffu.solve(problem, method="sdp").privacy_cost
    assert res.k == pytest.approx(alpha1 / res.privacy_cost, rel=1e-7)
    assert res.k_lower_bound == pytest.approx(res.k, rel=1e-6)
    assert res.privacy_cost == pytest.approx(privacy.gaussian_max_delta_m(1.0, 1e-6) ** 2, rel=1e-12)
    with pytest.raises(ValueError, match="`delta`"):
        mech_mod.problem2(problem, 1.0, 1.5)


# ---------------------------------------------------------------------------- free queries
def _augmented_cost(sol, Q, S):
    """Privacy cost of releasing the workload and Q x + N(0, S), the noises independent."""
    B = np.vstack([sol.problem.B, np.atleast_2d(Q)])
    return float(np.max(privacy.profile(linalg.block_diag(sol.sigma, np.atleast_2d(S)), B)))


def test_free_query_paper_example():
    sol = _paper_m1()
    fq = mech_mod.free_query(sol, [1.0, 0.0, 1.0])  # the third row of B2 in §3.2.1
    assert fq.finite and fq.variance == pytest.approx(1.0, rel=1e-12)
    assert _augmented_cost(sol, [1, 0, 1], fq.variance) == pytest.approx(2.0, rel=1e-12)
    assert fq.derived_variance == math.inf  # not computable from the two released answers
    # A workload query is derivable at its own variance.
    assert mech_mod.free_query(sol, [1.0, 1.0, 0.0]).derived_variance == pytest.approx(1.0, rel=1e-12)
    # The middle cell is tight: any query touching it costs privacy.
    tight = mech_mod.free_query(sol, [0.0, 2.0, 1.0])
    assert not tight.finite and tight.variance == math.inf and tight.tight == (1,)
    with pytest.raises(ValueError, match="tight"):
        tight.release([1, 2, 3], rng=0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_free_query_variance_is_exact(seed):
    rng = np.random.default_rng(seed)
    problem = ffu.FitnessProblem.from_workload(ffu.workloads.prefix(6), basis="upper")
    sol = ffu.Solution.from_sigma(problem, _random_spd(6, seed + 10), method="test", certify=False)
    q = rng.normal(size=6)
    q[np.argmax(sol.profile)] = 0.0  # the tight column must be avoided for a finite answer
    fq = mech_mod.free_query(sol, q, rtol=0.0)
    alpha = sol.privacy_cost
    assert fq.finite
    assert _augmented_cost(sol, q, fq.variance) == pytest.approx(alpha, rel=1e-9)
    assert _augmented_cost(sol, q, fq.variance * (1 - 1e-6)) > alpha * (1 + 1e-9)
    assert _augmented_cost(sol, q, fq.variance * 1.5) == pytest.approx(alpha, rel=1e-12)  # more noise: free too


def test_refined_optimum_leaves_slack_for_free_queries():
    # Targets (1, 10, 4) on B = I: alpha* = 1, and the ≺R-minimal optimum is diag(1, 10, 4)
    # with profile (1, .1, .25), so queries avoiding cell 0 are free.
    sol = ffu.solve(ffu.FitnessProblem(np.eye(3), [1.0, 10.0, 4.0]), method="sdp")
    np.testing.assert_allclose(sol.profile, [1.0, 0.1, 0.25], rtol=1e-6)
    fq = mech_mod.free_query(sol, [0.0, 1.0, 1.0])
    assert fq.variance == pytest.approx(max(1 / 0.9, 1 / 0.75), rel=1e-6) and fq.binding == 2
    assert _augmented_cost(sol, [0.0, 1.0, 1.0], fq.variance) == pytest.approx(sol.privacy_cost, rel=1e-9)
    assert not mech_mod.free_query(sol, [1.0, 1.0, 0.0]).finite


def test_free_query_release():
    sol = _paper_m1()
    fq = mech_mod.free_query(sol, [2.0, 0.0, 1.0])
    assert fq.variance == pytest.approx(4.0, rel=1e-12)  # max(2^2 / 1, 1^2 / 1)
    x = np.array([3, 1, 4])
    rng = np.random.default_rng(11)
    draws = np.array([fq.release(x, rng=rng).answers[0] for _ in range(N_RELEASES)])
    z = stats.norm.ppf(1 - P_FALSE / 4)
    assert abs(draws.mean() - 10.0) <= z * math.sqrt(4.0 / N_RELEASES)
    assert abs(draws.var(ddof=1) - 4.0) <= z * 4.0 * math.sqrt(2.0 / (N_RELEASES - 1))
    with pytest.raises(ValueError, match="one query"):
        mech_mod.free_query(sol, np.ones((2, 3)))


def _slack_mechanism():
    # B = I_3, Sigma = diag(1, 2, 2): profile (1, .5, .5), alpha = 1, slack (0, .5, .5).
    problem = ffu.FitnessProblem(np.eye(3), [1.0, 2.0, 2.0])
    return ffu.Solution.from_sigma(problem, np.diag([1.0, 2.0, 2.0]), method="test")


def test_free_queries_correlated_beats_independent_by_the_closed_form():
    sol = _slack_mechanism()
    Q = np.array([[0.0, 1.0, 1.0], [0.0, 1.0, 0.0]])  # the §5.1 workload on the two loose cells
    plan = mech_mod.free_queries(sol, Q, method="sdp")
    # Independent: 1/s1 + 1/s2 <= .5 and 1/s1 <= .5 -> s = 4. Correlated: Problem 1 of §5.1
    # with slack .5: alpha = (4/3) / .5 = 8/3 at Sigma = (8/3)[[1, .5], [.5, 1]]. Ratio 1.5.
    np.testing.assert_allclose(plan.independent_variances, [4.0, 4.0], rtol=1e-12)
    assert plan.correlated_ratio == pytest.approx(8 / 3, rel=1e-6)
    np.testing.assert_allclose(plan.covariance, 8 / 3 * np.array([[1, 0.5], [0.5, 1]]), rtol=1e-5)
    assert plan.improvement == pytest.approx(1.5, rel=1e-6)
    # Both plans keep the privacy cost at alpha = 1.
    assert _augmented_cost(sol, Q, plan.covariance) <= 1 + 1e-9
    assert _augmented_cost(sol, Q, np.diag(plan.independent_variances)) == pytest.approx(1.0, rel=1e-12)
    rel = plan.release([1, 2, 3], rng=0)
    np.testing.assert_allclose(rel.variances, np.diag(plan.covariance), rtol=1e-12)
    rel_ind = plan.release([1, 2, 3], rng=0, correlated=False)
    np.testing.assert_allclose(rel_ind.variances, [4.0, 4.0], rtol=1e-12)


def test_free_queries_batch_of_one_is_free_query():
    sol = _slack_mechanism()
    q = np.array([0.0, 3.0, -1.0])
    plan = mech_mod.free_queries(sol, q[None, :], correlated=False)
    assert plan.independent_variances[0] == pytest.approx(mech_mod.free_query(sol, q).variance, rel=1e-12)
    assert plan.independent_variances[0] == pytest.approx(18.0, rel=1e-12)  # max(3^2, 1^2) / .5
    # Relative targets weight the allocation: var_j / t_j is equal across queries.
    plan2 = mech_mod.free_queries(sol, [[0, 1, 0], [0, 0, 1]], targets=[1.0, 4.0], correlated=False)
    np.testing.assert_allclose(plan2.independent_variances / [1.0, 4.0], plan2.independent_ratio, rtol=1e-12)
    assert _augmented_cost(sol, [[0, 1, 0], [0, 0, 1]], np.diag(plan2.independent_variances)) == pytest.approx(1.0)


def test_free_queries_touching_a_tight_column_are_not_free():
    plan = mech_mod.free_queries(_slack_mechanism(), [[1.0, 1.0, 0.0]], correlated=False)
    assert not plan.finite and plan.tight == (0,)
    assert np.all(np.isinf(plan.independent_variances))
    with pytest.raises(ValueError, match="tight"):
        plan.release([1, 1, 1], rng=0)
    with pytest.raises(ValueError, match="`Q`"):
        mech_mod.free_queries(_slack_mechanism(), [[0.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match="`targets`"):
        mech_mod.free_queries(_slack_mechanism(), [[0.0, 1.0, 0.0]], targets=[-1.0])
