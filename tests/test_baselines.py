"""Baselines GM, HM, CA: Sigma derivation, branching factors, CA exact vs scalable."""

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx.solvers import baselines as bl
from ffu_cvx import workloads as wl


def _workload_cov(W, A):
    """The strategy's workload covariance W A^+ A^{+T} W^T computed from scratch."""
    P = np.linalg.pinv(A)
    return W @ P @ P.T @ W.T


@pytest.mark.parametrize("basis", ["identity", "upper", "rows"])
def test_strategy_sigma_reproduces_workload_covariance_and_cost(basis):
    rng = np.random.default_rng(3)
    W = rng.normal(size=(9, 6))
    A = rng.normal(size=(8, 6))  # full column rank strategy
    prob = ffu.FitnessProblem(W, np.ones(9), basis=basis)
    sol = bl.strategy_solution(prob, A)
    np.testing.assert_allclose(prob.L @ sol.sigma @ prob.L.T, _workload_cov(W, A), rtol=1e-9, atol=1e-12)
    # Full column rank: the profile recomputed from Sigma is the strategy's column norms.
    np.testing.assert_allclose(sol.profile, np.sum(A * A, axis=0), rtol=1e-9)
    assert sol.privacy_cost == pytest.approx(bl.strategy_cost(A), rel=1e-10)
    assert sol.status == ffu.model.result.BASELINE


def test_rank_deficient_strategy_and_workload():
    prob = ffu.FitnessProblem.from_workload(wl.marginals_a(3))  # rank 4 on 8 cells: row basis
    assert prob.k == 4
    A = np.vstack([wl.marginal_queries((2, 2, 2), (i,)) for i in range(3)])  # rank 4, not full column rank
    sol = bl.strategy_solution(prob, A)
    np.testing.assert_allclose(prob.L @ sol.sigma @ prob.L.T, _workload_cov(prob.W, A), rtol=1e-9, atol=1e-12)
    # Releasing B x + N(0, Sigma) is a post-processing of A x + z: never less private.
    assert sol.privacy_cost <= bl.strategy_cost(A) * (1 + 1e-12)
    with pytest.raises(ValueError, match="row space"):
        bl.strategy_solution(prob, A[:2])


def test_gm_is_the_workload_strategy():
    prob = ffu.FitnessProblem.from_workload(wl.random_pm1(12, "random", seed=4))
    g = bl.gm(prob)
    np.testing.assert_allclose(g.sigma, bl.strategy_solution(prob, prob.W).sigma, rtol=1e-9, atol=1e-12)
    assert g.privacy_cost == pytest.approx(2 * 12, rel=1e-10)  # every column has 2d entries +-1
    # Least squares from a full-rank W: the variance of query j is its leverage h_jj.
    H = prob.W @ np.linalg.solve(prob.W.T @ prob.W, prob.W.T)
    np.testing.assert_allclose(g.variances, np.diag(H), rtol=1e-9)


@pytest.mark.parametrize("n, b", [(232, 16), (252, 16), (256, 16), (1024, 32), (2, 2), (8, 8)])
def test_qardaji_branching_factor(n, b):
    assert bl.hierarchical_branching(n) == b


def test_hierarchical_tree_structure():
    T = bl.hierarchical_strategy(10, 3)  # levels: 10 cells, 4 nodes, 2 nodes, root
    assert T.shape == (10 + 4 + 2 + 1, 10)
    np.testing.assert_array_equal(T.sum(axis=0), np.full(10, 4.0))  # one node per level
    np.testing.assert_array_equal(T[0], np.ones(10))
    prob = ffu.FitnessProblem.from_workload(wl.prefix(256))
    h = bl.hm(prob)
    assert h.info["branching"] == 16 and h.info["levels"] == 3
    assert h.privacy_cost == pytest.approx(3.0, rel=1e-10)
    one = bl.hm(ffu.FitnessProblem(np.array([[2.0]]), [1.0]))
    assert one.info["levels"] == 1 and one.variances[0] == pytest.approx(4.0)
    with pytest.raises(ValueError, match="branching"):
        bl.hierarchical_strategy(10, 1)
    with pytest.raises(ValueError, match="`n`"):
        bl.hierarchical_branching(1)


CA_BANK = {
    "prefix12": lambda: ffu.FitnessProblem.from_workload(wl.prefix(12)),
    "prefix12_upper": lambda: ffu.FitnessProblem.from_workload(wl.prefix(12), basis="upper"),
    "ranges16_rows": lambda: ffu.FitnessProblem.from_workload(wl.random_ranges(16, "random", seed=1)),
    "pm1_16": lambda: ffu.FitnessProblem.from_workload(wl.random_pm1(16, "random", seed=1)),
    "marginals_a4": lambda: ffu.FitnessProblem.from_workload(wl.marginals_a(4)),
    "marginals_b4": lambda: ffu.FitnessProblem.from_workload(wl.marginals_b(4)),
}


@pytest.mark.parametrize("name", sorted(CA_BANK))
def test_ca_exact_and_scalable_agree(name):
    prob = CA_BANK[name]()
    fast = bl.ca(prob, solver="dual", tol=1e-10)
    exact = bl.ca(prob, solver="cvxpy", tol=1e-10)
    tv_fast, tv_exact = fast.info["total_variance"], exact.info["total_variance"]
    assert tv_fast == pytest.approx(tv_exact, rel=1e-6)
    assert tv_fast == pytest.approx(float(np.sum(fast.variances)), rel=1e-10)
    assert fast.privacy_cost == pytest.approx(1.0, rel=1e-10)
    # Certified: the dual bound is below every primal value and within tol of the best.
    lb = fast.info["total_variance_lower_bound"]
    assert lb <= tv_exact * (1 + 1e-8) and lb >= tv_fast * (1 - 1e-9)
    # The mechanism itself agrees, not only the objective.
    np.testing.assert_allclose(prob.L @ fast.sigma @ prob.L.T, prob.L @ exact.sigma @ prob.L.T,
                               rtol=1e-4, atol=1e-5 * np.max(fast.variances))


def test_ca_is_basis_independent_and_optimal_for_identity():
    a = bl.ca(ffu.FitnessProblem.from_workload(wl.prefix(16), basis="identity"))
    b = bl.ca(ffu.FitnessProblem.from_workload(wl.prefix(16), basis="upper"))
    np.testing.assert_allclose(a.variances, b.variances, rtol=1e-5)
    # W = I: the identity strategy is optimal, total variance d.
    c = bl.ca(ffu.FitnessProblem(np.eye(7), np.ones(7)))
    assert c.info["total_variance"] == pytest.approx(7.0, rel=1e-9)
    rng = np.random.default_rng(0)
    prob = CA_BANK["pm1_16"]()
    for _ in range(3):
        assert bl.ca_dual_value(prob, rng.random(prob.d)) <= bl.ca(prob).info["total_variance"] * (1 + 1e-9)


def test_ca_bad_options():
    prob = ffu.FitnessProblem.from_workload(wl.prefix(4))
    with pytest.raises(ValueError, match="`solver`"):
        bl.ca(prob, solver="newton")
    with pytest.raises(ValueError, match="`tol`"):
        bl.ca(prob, tol=0)
    with pytest.raises(ffu.SolverError, match="max_iter"):
        bl.ca(CA_BANK["prefix12"](), max_iter=2, tol=1e-12)


def test_ca_callback_gets_intermediate_results_and_can_stop():
    from ffu_cvx.model.status import BASELINE, USER_STOPPED, IntermediateResult

    prob = CA_BANK["prefix12"]()
    seen = []
    full = bl.ca(prob, solver="dual", tol=1e-8, callback=seen.append)
    assert full.status == BASELINE
    assert all(isinstance(r, IntermediateResult) and r.method == "ca" for r in seen)
    assert [r.nit for r in seen] == list(range(1, full.nit + 1))
    assert [r.gap for r in seen] == full.history
    tv = [r.total_variance for r in seen]
    lb = [r.lower_bound for r in seen]
    assert all(a >= b for a, b in zip(tv, tv[1:])) and all(a <= b for a, b in zip(lb, lb[1:]))
    assert lb[-1] == seen[-1].total_variance_lower_bound == full.info["total_variance_lower_bound"]
    # The reported point is CA's answer rescaled to meet every target.
    last = seen[-1]
    assert last.total_variance == full.info["total_variance"]
    assert last.privacy_cost == pytest.approx(full.max_ratio, rel=1e-12)
    np.testing.assert_allclose(last.sigma * last.privacy_cost, full.sigma, rtol=1e-12)

    def stop_at_3(result):
        if result.nit == 3:
            raise StopIteration

    stopped = bl.ca(prob, solver="dual", tol=1e-8, callback=stop_at_3)
    assert stopped.status == USER_STOPPED and not stopped.success and stopped.nit == 3
    assert stopped.info["total_variance"] == pytest.approx(tv[2], rel=1e-12)
    assert stopped.info["total_variance"] > full.info["total_variance"] * (1 + 1e-6)
    np.testing.assert_allclose(stopped.sigma / stopped.max_ratio, seen[2].sigma, rtol=1e-12)
    assert stopped.privacy_cost == pytest.approx(1.0, rel=1e-10)
