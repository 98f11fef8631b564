"""Weighted Fourier factorizations: spec § 6 worked examples, brute-force SDP oracle, the
toolkit's SDP, exact covariances against an explicit strategy matrix, Monte Carlo release."""

import itertools
import math
import time
import tracemalloc

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx.solvers import fourier as F
from ffu_cvx.solvers.fourier import dense_workload


def _near(value, given, digits):
    """``value`` agrees with the spec's number printed with ``digits`` decimals."""
    return abs(value - given) <= 0.51 * 10.0 ** -digits


def _all_k(d, ks):
    return [A for k in ks for A in itertools.combinations(range(d), k)]


EX4 = ((2, 3, 4), {(0, 1): 1.0, (1, 2): 2.0, (0,): 0.5})


def _ex5():
    fams = [F.ProductFamily((0,), [[1, 1, 0, 0, 0]], 1.0),
            F.ProductFamily((0, 1), [[1, 1, 1, 0, 0], [1, 0, 0, 0]], 2.0),
            F.ProductFamily((1,), [[1, -1, 0, 0]], 0.5)]
    return F.CirculantWorkload((5, 4), fams)


# ----------------------------------------------------------------------------- spec § 6
@pytest.mark.parametrize("d, given", [(1, 1.0), (2, 1.457107), (3, 1.866025), (4, 2.25)])
def test_ex1_binary_one_way(d, given):
    targets = {(i,): 1.0 for i in range(d)}
    mech = F.min_privacy_cost((2,) * d, targets)
    assert _near(mech.privacy_cost, given, 6)
    assert mech.privacy_cost == pytest.approx((1 + math.sqrt(d)) ** 2 / 4, rel=1e-7)
    # max-var* = avg-var*: the sum-optimal loss per cell equals the max optimum
    s = F.sum_optimal(F.MarginalWorkload.from_weights((2,) * d, targets))
    assert s.loss / (2 * d) == pytest.approx((1 + math.sqrt(d)) ** 2 / 4, rel=1e-12)


def test_ex1_sum_optimal_taus():
    s = F.sum_optimal(F.MarginalWorkload.from_weights((2, 2), {(0,): 1, (1,): 1}))
    assert _near(s.taus[()], 2.414214, 6) and _near(s.taus[(0,)], 1.707107, 6) and _near(s.taus[(1,)], 1.707107, 6)
    assert s.privacy_cost == pytest.approx(1.0, rel=1e-12)
    s4 = F.sum_optimal(F.MarginalWorkload.from_weights((2,) * 4, {(i,): 1 for i in range(4)}))
    assert all(t == pytest.approx(3.0, rel=1e-12) for t in s4.taus.values())


def test_ex2_binary_two_way():
    mech = F.min_privacy_cost((2, 2, 2), {A: 1.0 for A in _all_k(3, [2])})
    assert _near(mech.privacy_cost, 1.678023, 6)


def test_ex3_ternary_one_and_two_way():
    wl = F.MarginalWorkload.from_weights((3, 3, 3), {A: 1.0 for A in _all_k(3, [1, 2])})
    assert _near(F.sum_optimal(wl).loss, 92.67598, 5)
    assert _near(F.max_optimal(wl).privacy_cost, 2.952316, 6)


def test_ex4_weighted_mixed_domains():
    wl = F.MarginalWorkload.from_weights(*EX4)
    s = F.sum_optimal(wl)
    assert _near(s.loss, 49.768673, 6)
    expected = {(): 9.236759, (0,): 5.464541, (1,): 4.073028, (2,): 4.320099, (0, 1): 2.880066, (1, 2): 1.440033}
    assert set(s.taus) == set(expected)
    for S, tau in expected.items():
        assert _near(s.taus[S], tau, 6), S
    for v, given in zip(s.variances, (2.199022, 1.313878, 5.041460)):
        assert _near(v, given, 6)
    assert F.privacy_cost(wl, s.taus) == pytest.approx(1.0, rel=1e-12)
    np.testing.assert_allclose(F.cell_variances(wl, s.taus), s.variances, rtol=1e-12)
    m = F.max_optimal(wl, privacy_cost=1.0)
    assert _near(m.loss, 2.513475, 6)
    np.testing.assert_allclose(m.variances * np.array(wl.weights), m.loss, rtol=1e-6)  # all tight
    np.testing.assert_allclose(m.lam, [0.1849, 0.6902, 0.1249], atol=6e-5)


def test_ex5_product_families():
    pw = _ex5()
    assert _near(F.sum_optimal(pw).loss, 128.2318, 4)
    assert _near(F.max_optimal(pw).privacy_cost, 4.704939, 6)


@pytest.mark.parametrize("d, k, n, given", [(3, 1, 3, 2.214245), (5, 2, 3, 4.925276)])
def test_ex6_uniform_closed_form(d, k, n, given):
    closed = sum(math.comb(d, j) * (n - 1) ** j * math.sqrt(math.comb(d - j, k - j)) for j in range(k + 1)) ** 2 \
        / (math.comb(d, k) * n ** (2 * k))
    assert _near(closed, given, 6)
    wl = F.MarginalWorkload.from_targets((n,) * d, {A: 1.0 for A in _all_k(d, [k])})
    assert F.max_optimal(wl).privacy_cost == pytest.approx(closed, rel=1e-7)
    assert F.sum_optimal(wl).loss / (math.comb(d, k) * n ** k) == pytest.approx(closed, rel=1e-12)


def test_threshold_table_and_shift():
    for m, given in [(4, 2.0274), (8, 2.7011), (16, 3.4741), (32, 4.3450), (64, 5.3134)]:
        closed = F.embedding_max_variance(m)
        assert _near(closed, given, 4)
        pw = F.CirculantWorkload((2 * m,), [F.ProductFamily((0,), [F.threshold_vector(m)], 1.0)])
        assert F.max_optimal(pw).privacy_cost == pytest.approx(closed, rel=1e-7)
    assert F.embedding_max_variance(8) == pytest.approx(2.7011186586, rel=1e-9)
    m = 6
    h = F.threshold_vector(m)
    x = np.arange(m)
    for t in range(m):
        s = F.threshold_shift(t, m)
        np.testing.assert_array_equal(h[(x - s) % (2 * m)], (x <= t).astype(float))


# ----------------------------------------------------------------------------- duality, accounting
def test_dual_form_certifies_and_bounds():
    wl = F.MarginalWorkload.from_weights(*EX4)
    m = F.max_optimal(wl)
    assert F.dual_bound(wl, m.lam) == pytest.approx(m.privacy_cost, rel=1e-7)
    assert 0 <= m.gap < 1e-7
    rng = np.random.default_rng(0)
    for _ in range(20):
        assert F.dual_bound(wl, rng.dirichlet(np.ones(3))) <= m.privacy_cost * (1 + 1e-9)
    # the max-optimal mechanism is the sum-optimal one for the worst-case weights lam_A w_A / N_A
    sizes = np.array([math.prod(wl.domain[i] for i in A) for A in wl.sets])
    worst = F.MarginalWorkload(wl.domain, wl.sets, tuple(m.lam * np.array(wl.weights) / sizes))
    s = F.sum_optimal(worst, privacy_cost=m.privacy_cost)
    # (lam comes from the solver's duals, accurate to ~1e-5; tau moves to first order in lam)
    np.testing.assert_allclose(list(s.taus.values()), list(m.taus.values()), rtol=5e-4)
    pw = _ex5()
    mp = F.max_optimal(pw)
    assert F.dual_bound(pw, mp.lam) == pytest.approx(mp.privacy_cost, rel=1e-7)


def test_privacy_accounting_and_scaling():
    wl = F.MarginalWorkload.from_targets(*EX4)
    m = F.max_optimal(wl)
    assert m.max_ratio == pytest.approx(1.0, rel=1e-12)
    assert m.epsilon(1e-6) == pytest.approx(ffu.model.privacy.gaussian_epsilon(1e-6, math.sqrt(m.privacy_cost)), rel=1e-12)
    assert m.rho == pytest.approx(m.privacy_cost / 2, rel=1e-12)
    # spec § 1: (1, 1e-6)-DP allows privacy cost 0.05603
    P = ffu.model.privacy.gaussian_max_delta_m(1.0, 1e-6) ** 2
    assert _near(P, 0.05603, 5)
    mp = F.max_optimal(wl, privacy_cost=P)
    assert mp.epsilon(1e-6) == pytest.approx(1.0, rel=1e-9)
    np.testing.assert_allclose(mp.variances, m.variances * m.privacy_cost / P, rtol=1e-12)
    assert F.privacy_cost(wl, mp.taus) == pytest.approx(P, rel=1e-12)
    assert sum(mp.component_costs.values()) == pytest.approx(P, rel=1e-12)
    pm = F.max_optimal(_ex5())
    assert sum(pm.component_costs.values()) == pytest.approx(pm.privacy_cost, rel=1e-12)


def test_explicit_strategy_matrix_matches_formulas():
    # Independent construction: release (⊗ U_i^T) m_S + N(0, tau_S I) with orthonormal U_i
    # spanning 1^perp, reconstruct by generalised least squares, compare covariance and cost.
    dom, weights = EX4
    wl = F.MarginalWorkload.from_weights(dom, weights)
    mech = F.sum_optimal(wl)
    W, _, _ = dense_workload(wl)
    full = np.indices(dom).reshape(len(dom), -1)
    rows, noise = [], []
    for S, tau in mech.taus.items():
        ES = np.ones((1, full.shape[1]))
        for i in S:
            U = np.linalg.qr(np.eye(dom[i]) - 1.0 / dom[i])[0][:, : dom[i] - 1]
            ES = np.vstack([r * U[full[i], a] for r in ES for a in range(dom[i] - 1)])
        rows.append(ES)
        noise += [tau] * ES.shape[0]
    A = np.vstack(rows)
    Dinv = 1.0 / np.array(noise)
    cost = np.max(np.einsum("ij,i,ij->j", A, Dinv, A))
    assert cost == pytest.approx(mech.privacy_cost, rel=1e-10)
    cov = W @ np.linalg.pinv(A.T @ (A * Dinv[:, None])) @ W.T
    sizes = np.cumsum([0] + [math.prod(dom[i] for i in S) for S in wl.sets])
    for i in range(3):
        for j in range(3):
            block = cov[sizes[i]:sizes[i + 1], sizes[j]:sizes[j + 1]]
            np.testing.assert_allclose(F.cell_covariance(wl, mech.taus, i, j), block, atol=1e-10)


# ----------------------------------------------------------------------------- brute-force oracle
def _oracle_max(W, c):
    """Spec § 8: min t s.t. [[t c_q, q^T], [q, X]] >= 0 for every query q, diag(X) <= 1."""
    import cvxpy as cp
    N = W.shape[1]
    X = cp.Variable((N, N), PSD=True)
    t = cp.Variable()
    cons = [cp.diag(X) <= 1]
    for q, cq in zip(W, c):
        cons.append(cp.bmat([[cp.reshape(t * cq, (1, 1), order="C"), q[None, :]], [q[:, None], X]]) >> 0)
    cp.Problem(cp.Minimize(t), cons).solve(solver="CLARABEL")
    return float(t.value)


def _oracle_sum(W, weights):
    """Spec § 8: min tr Z s.t. [[Z, M^T], [M, X]] >= 0, M = W^T diag(w)^{1/2}, diag(X) <= 1."""
    import cvxpy as cp
    m, N = W.shape
    M = W.T * np.sqrt(weights)[None, :]
    X = cp.Variable((N, N), PSD=True)
    Z = cp.Variable((m, m), symmetric=True)
    cons = [cp.diag(X) <= 1, cp.bmat([[Z, M.T], [M, X]]) >> 0]
    cp.Problem(cp.Minimize(cp.trace(Z)), cons).solve(solver="CLARABEL")
    return float(np.trace(Z.value))


@pytest.mark.parametrize("name", [pytest.param("ex4", marks=pytest.mark.slow), "binary3_2way",
                                  pytest.param("ex5_product", marks=pytest.mark.slow)])
def test_brute_force_oracle_max(name):
    if name == "ex4":
        wl = F.MarginalWorkload.from_weights(*EX4)
    elif name == "binary3_2way":
        wl = F.MarginalWorkload.from_targets((2, 2, 2), {(0, 1): 1.0, (1, 2): 3.0, (0, 2): 2.0, (1,): 0.5})
    else:
        wl = _ex5()
    W, c, _ = dense_workload(wl)
    assert F.max_optimal(wl).privacy_cost == pytest.approx(_oracle_max(W, c), rel=1e-6)


def test_brute_force_oracle_sum_product():
    pw = _ex5()
    W, c, _ = dense_workload(pw)
    assert F.sum_optimal(pw).loss == pytest.approx(_oracle_sum(W, 1.0 / c), rel=1e-6)


# ----------------------------------------------------------------------------- toolkit Solution / SDP
def test_neighbours_stated_add_remove_on_mechanisms_and_releases():
    marg = F.min_privacy_cost((2, 3), {(0, 1): 1.0})
    for mech in (marg, F.sum_optimal(F.MarginalWorkload.from_targets(*EX4)), F.max_optimal(_ex5()),
                 marg.scaled(0.25)):
        assert mech.neighbours == ffu.model.privacy.ADD_REMOVE
    rel = marg.release(np.array([[0, 1], [1, 2]]), rng=0)
    assert rel.neighbours == ffu.model.privacy.ADD_REMOVE and rel.privacy_cost == marg.privacy_cost


@pytest.mark.parametrize("targets", [{(0,): 1.0, (1,): 1.0}, {(0,): 1.0, (1,): 3.0}])
def test_privacy_cost_is_the_add_remove_cost_not_substitution(targets):
    """On the dense equivalent, ``privacy_cost`` is ``max_x ||B e_x||^2_{Sigma^-1}`` (add/remove);
    moving a record between the cells of (2, 2) costs ``sum_S (4 / eta_S)`` over the 1-way
    components instead (the total count does not change), a different number."""
    mech = F.min_privacy_cost((2, 2), targets)
    sol = mech.to_solution()
    Y = np.linalg.solve(np.linalg.cholesky(sol.sigma), sol.problem.B)  # columns: whitened b_x
    add_remove = float(np.max(np.sum(Y ** 2, axis=0)))
    substitute = max(float(np.sum((Y[:, i] - Y[:, j]) ** 2)) for i in range(4) for j in range(4))
    costs = mech.component_costs  # d_S / eta_S with d_S = 1 on binary attributes
    assert add_remove == pytest.approx(mech.privacy_cost, rel=1e-9)
    assert substitute == pytest.approx(4 * (costs[(0,)] + costs[(1,)]), rel=1e-9)
    assert substitute > 1.5 * mech.privacy_cost


def test_to_solution_is_certified_and_reproduces_covariance():
    for wl in (F.MarginalWorkload.from_targets(*EX4), _ex5()):
        mech = F.max_optimal(wl)
        sol = mech.to_solution()
        assert sol.privacy_cost == pytest.approx(mech.privacy_cost, rel=1e-9)
        assert np.ptp(sol.profile) < 1e-9 * sol.privacy_cost  # every record costs the same
        assert sol.max_ratio == pytest.approx(1.0, rel=1e-9)
        assert 0 <= sol.gap < 1e-6 and sol.lower_bound == pytest.approx(mech.privacy_cost, rel=1e-6)
        sizes = [math.prod(wl.domain[i] for i in A) for A in wl.sets]
        np.testing.assert_allclose(sol.variances, np.repeat(mech.variances, sizes), rtol=1e-9)
        cov = sol.problem.L @ sol.sigma @ sol.problem.L.T
        np.testing.assert_allclose(cov[: sizes[0], sizes[0]:sizes[0] + sizes[1]], mech.covariance(0, 1), atol=1e-9)
        assert ffu.max_variance_ratio(sol, 2 * sol.privacy_cost) == pytest.approx(0.5, rel=1e-9)


def test_toolkit_gaussian_mechanism_on_the_dense_equivalent():
    mech = F.max_optimal(_ex5())
    gm = ffu.GaussianMechanism(mech.to_solution(certify=False))
    assert gm.privacy_cost == pytest.approx(mech.privacy_cost, rel=1e-9)
    np.testing.assert_allclose(gm.covariance()[5:25, 25:], mech.covariance(1, 2), atol=1e-9)
    W, _, _ = dense_workload(mech.workload)
    x = np.arange(20.0)
    assert gm.release(x, rng=0).answers.shape == (W.shape[0],)


def _sdp_alpha(wl):
    sdp = pytest.importorskip("ffu_cvx.solvers.sdp.driver")
    W, c, labels = dense_workload(wl)
    sol = ffu.solve(ffu.FitnessProblem(W, c, basis="rows", labels=labels), method="sdp")
    assert sdp is not None
    return sol.privacy_cost


@pytest.mark.parametrize("case", ["ex4", "ex5_product", "A3", "B3"])
def test_equals_toolkit_sdp_small(case):
    wl = {"ex4": lambda: F.MarginalWorkload.from_targets(*EX4), "ex5_product": _ex5,
          "A3": lambda: F.MarginalWorkload.from_targets((2,) * 3, {(i,): i + 1.0 for i in range(3)}),
          "B3": lambda: F.MarginalWorkload.from_targets((2,) * 3, {(0, j): float(j) for j in (1, 2)})}[case]()
    assert F.max_optimal(wl).privacy_cost == pytest.approx(_sdp_alpha(wl), rel=1e-6)


@pytest.mark.parametrize("seed", [0, 1])
def test_equals_toolkit_sdp_random_instances(seed):
    # seeded random weighted marginals on (2, 3, 2) and random real product families on Z3 x Z4
    rng = np.random.default_rng(seed)
    sets = [A for A in _all_k(3, [1, 2]) if rng.random() < 0.6] or [(0, 1)]
    wl = F.MarginalWorkload.from_targets((2, 3, 2), {A: float(rng.uniform(0.5, 3.0)) for A in sets})
    assert F.max_optimal(wl).privacy_cost == pytest.approx(_sdp_alpha(wl), rel=1e-6)
    fams = [F.ProductFamily((0, 1), [rng.normal(size=3), rng.normal(size=4)], rng.uniform(0.5, 2)),
            F.ProductFamily((1,), [rng.normal(size=4)], rng.uniform(0.5, 2))]
    pw = F.CirculantWorkload((3, 4), fams)
    assert F.max_optimal(pw).privacy_cost == pytest.approx(_sdp_alpha(pw), rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("kind, n", [("A", 5), ("A", 6), ("B", 5), ("B", 6)])
def test_equals_toolkit_sdp_paper_workloads(kind, n):
    mech = F.marginal_workload_optimum(n, kind)
    assert mech.privacy_cost == pytest.approx(_sdp_alpha(mech.workload), rel=1e-6)


@pytest.mark.slow
def test_equals_toolkit_sdp_product_threshold_mixed():
    wl = F.extended_marginals((4, 3), numeric=[0], targets={(0,): 1.0, (0, 1): 2.0, (1,): 1.5})  # N = 24
    assert F.max_optimal(wl).privacy_cost == pytest.approx(_sdp_alpha(wl), rel=1e-6)


def test_paper_workloads_match_builders_when_present():
    workloads = pytest.importorskip("ffu_cvx.workloads")
    if not hasattr(workloads, "marginals_a"):
        pytest.skip("ffu.workloads.marginals_a not on main yet")
    for kind, builder in (("A", workloads.marginals_a), ("B", workloads.marginals_b)):
        wl = builder(4)
        mine = F.marginal_workload_optimum(4, kind).workload
        W, c, _ = dense_workload(mine)
        # same multiset of (query, target) pairs, whatever the row order
        key = lambda M, t: sorted(map(tuple, np.column_stack([M, t]).round(12)))
        assert key(np.asarray(wl.W), np.asarray(wl.c)) == key(W, c)


# ----------------------------------------------------------------------------- release
def test_monte_carlo_variances_marginals():
    wl = F.MarginalWorkload.from_targets(*EX4)
    mech = F.max_optimal(wl)
    rng = np.random.default_rng(20240601)
    hist = rng.integers(0, 20, size=EX4[0]).astype(float)
    truth = [hist.sum(axis=tuple(i for i in range(3) if i not in A)) for A in wl.sets]
    reps = 6000
    draws = [np.empty((reps,) + t.shape) for t in truth]
    for r in range(reps):
        out = mech.release(histogram=hist, rng=rng)
        for k, a in enumerate(out.tables):
            draws[k][r] = a
    for k, (d, t) in enumerate(zip(draws, truth)):
        sd = math.sqrt(mech.variances[k] / reps)
        assert np.max(np.abs(d.mean(axis=0) - t)) < 5 * sd  # unbiased
        np.testing.assert_allclose(d.var(axis=0), mech.variances[k], rtol=5 * math.sqrt(2 / reps))
    # covariance between the cells of (0, 1) and (1, 2), exact formula vs sample
    x = draws[0].reshape(reps, -1) - draws[0].reshape(reps, -1).mean(0)
    y = draws[1].reshape(reps, -1) - draws[1].reshape(reps, -1).mean(0)
    emp = x.T @ y / reps
    exact = mech.covariance(0, 1)
    scale = math.sqrt(mech.variances[0] * mech.variances[1])
    assert np.max(np.abs(emp - exact)) < 5 * scale * math.sqrt(2 / reps)


def test_monte_carlo_product_answers():
    pw = _ex5()
    mech = F.max_optimal(pw)
    rng = np.random.default_rng(7)
    recs = np.column_stack([rng.integers(0, 5, 300), rng.integers(0, 4, 300)])
    W, _, _ = dense_workload(pw)
    hist = np.zeros(20)
    np.add.at(hist, recs[:, 0] * 4 + recs[:, 1], 1)
    truth = W @ hist
    reps = 5000
    draws = np.array([mech.release(recs, rng=rng).answers for _ in range(reps)])
    var = np.repeat(mech.variances, [5, 20, 4])
    assert np.max(np.abs(draws.mean(0) - truth) / np.sqrt(var / reps)) < 5
    np.testing.assert_allclose(draws.var(0), var, rtol=5 * math.sqrt(2 / reps))


def test_release_consistent_and_records_equal_histogram():
    wl = F.MarginalWorkload.from_targets((3, 2, 4), {(0, 1): 1.0, (0,): 2.0, (1, 2): 1.0, (): 5.0})
    mech = F.max_optimal(wl)
    rng = np.random.default_rng(1)
    recs = np.column_stack([rng.integers(0, n, 500) for n in (3, 2, 4)])
    hist = np.zeros((3, 2, 4))
    np.add.at(hist, tuple(recs.T), 1)
    a = mech.release(recs, rng=11, chunk=64)
    b = mech.release(histogram=hist, rng=11)
    for A in wl.sets:
        np.testing.assert_allclose(a.marginals[A], b.marginals[A], atol=1e-9)
    M = a.marginals
    np.testing.assert_allclose(M[(0, 1)].sum(axis=1), M[(0,)], atol=1e-9)
    np.testing.assert_allclose(M[(0, 1)].sum(), M[()], atol=1e-9)
    np.testing.assert_allclose(M[(1, 2)].sum(axis=1), M[(0, 1)].sum(axis=0), atol=1e-9)


def test_extended_marginals_answer_thresholds():
    wl = F.extended_marginals((5, 3), numeric=[0], targets={(0, 1): 1.0})
    mech = F.max_optimal(wl).scaled(1e14)  # noise sd 1e-7: answers must equal the true counts
    rng = np.random.default_rng(2)
    recs = np.column_stack([rng.integers(0, 5, 200), rng.integers(0, 3, 200)])
    ans = mech.release(recs, rng=0).tables[0]
    for t in range(5):
        for v in range(3):
            true = np.sum((recs[:, 0] <= t) & (recs[:, 1] == v))
            assert ans[F.threshold_shift(t, 5), v] == pytest.approx(true, abs=1e-4)


def test_thirty_attributes_release_never_builds_domain():
    d = 30
    mech = F.min_privacy_cost((2,) * d, {A: 1.0 for A in _all_k(d, [1, 2])})
    rng = np.random.default_rng(5)
    recs = (rng.random((20000, d)) < 0.4).astype(np.int8)
    out = mech.release(recs, rng=6)
    assert set(out.marginals) == set(mech.workload.sets)
    np.testing.assert_allclose(out.marginals[(3, 7)].sum(axis=0), out.marginals[(7,)], atol=1e-8)
    assert abs(out.marginals[(3,)][1] - recs[:, 3].sum()) < 8 * math.sqrt(mech.variances[3])


@pytest.mark.slow
def test_release_memory_one_million_records():
    d = 30
    mech = F.min_privacy_cost((2,) * d, {A: 1.0 for A in _all_k(d, [1, 2])})
    recs = (np.random.default_rng(0).random((10 ** 6, d)) < 0.3).astype(np.int8)
    tracemalloc.start()
    try:
        out = mech.release(recs, rng=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 256 * 2 ** 20  # the full domain would need 8 GiB
    assert abs(out.marginals[(0,)][1] - recs[:, 0].sum()) < 8 * math.sqrt(mech.variances[0])


def test_twenty_binary_attributes_within_five_seconds():
    F.min_privacy_cost((2, 2), {(0,): 1.0})  # warm the CVXPY import
    t0 = time.perf_counter()
    mech = F.min_privacy_cost((2,) * 20, {A: 1.0 for A in _all_k(20, [1, 2])})
    elapsed = time.perf_counter() - t0
    assert elapsed < 5.0
    assert len(mech.components) == 1 + 20 + 190
    assert mech.gap < 1e-6


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("domain, targets, match", [
    ((2, 2), {(0,): 0.0}, r"`targets\[\(0,\)\]`"),
    ((2, 2), {(0,): -1.0}, "> 0"),
    ((2, 2), {(0, 2): 1.0}, "out of range"),
    ((2, 2), {(1, 1): 1.0}, "more than once"),
    ((2, 1), {(0,): 1.0}, r"`domain`.*>= 2"),
    ((), {(0,): 1.0}, "`domain` is empty"),
    ((2, 2), {}, "`targets` is empty"),
    ((2, 2), {(0, 1): 1.0, (1, 0): 2.0}, "twice"),
    ((2, 2), {("a",): 1.0}, "not an attribute index"),
])
def test_bad_input_names_argument(domain, targets, match):
    with pytest.raises(ValueError, match=match):
        F.min_privacy_cost(domain, targets)


def test_bad_release_and_family_input():
    mech = F.min_privacy_cost((2, 3), {(0, 1): 1.0})
    with pytest.raises(ValueError, match="`records` column 1"):
        mech.release(np.array([[0, 3]]), rng=0)
    with pytest.raises(ValueError, match="integer"):
        mech.release(np.array([[0.0, 1.0]]), rng=0)
    with pytest.raises(ValueError, match="exactly one"):
        mech.release(rng=0)
    with pytest.raises(ValueError, match="`histogram`"):
        mech.release(histogram=np.ones(5), rng=0)
    with pytest.raises(ValueError, match="length 3"):
        F.CirculantWorkload((4,), [F.ProductFamily((0,), [[1, 0, 0]])])
    with pytest.raises(ValueError, match="`weight`"):
        F.ProductFamily((0,), [[1, 0]], weight=0)
    with pytest.raises(ValueError, match="max_cells"):
        F.min_privacy_cost((2,) * 13, {(0,): 1.0}).to_solution()
    with pytest.raises(ValueError, match="product"):
        F.max_optimal(_ex5()).taus


# ----------------------------------------------------------------------------- experiments
def test_experiment_fourier_thresholds_quick():
    from experiments import fourier_thresholds
    rows = fourier_thresholds.main(["--quick", "--no-cache", "--quiet"])
    assert [r["m"] for r in rows] == [4, 8]
    for r in rows:
        assert _near(r["embedding"], r["spec_embedding"], 4) and _near(r["closed_form"], r["spec_embedding"], 4)
        if r["prefix_optimum"] is not None:  # the SDP module is installed
            assert _near(r["prefix_optimum"], r["spec_optimum"], 4)
            assert r["ratio"] > 1


def test_experiment_fourier_scale_quick():
    from experiments import fourier_scale
    rows = fourier_scale.main(["--quick", "--no-cache", "--quiet"])
    by = {(r["workload"], r["n_attrs"]): r for r in rows}
    a10 = by[("A (1-way, target i)", 10)]
    assert a10["alpha"] == pytest.approx(F.marginal_workload_optimum(10, "A").privacy_cost, rel=1e-9)
    b20 = by[("binary, all 1+2-way", 20)]
    assert b20["components"] == 211 and b20["gap"] < 1e-6 and b20["log2_cells"] == 20


def test_experiment_fourier_check_quick():
    from experiments import fourier_check
    rows = fourier_check.main(["--quick", "--no-cache", "--quiet"])
    assert len(rows) == 2
    for r in rows:
        if r["spec"] is not None:
            assert _near(r["fourier"], r["spec"], 6)
        if r["sdp_status"] != "not available":
            assert r["sdp_rel"] < 1e-6
        if r["smii_status"] != "not available":
            assert r["smii_rel"] < 1e-3
