"""The Kronecker solver: single products against the dense solvers, unions against the dense
optimum, the structured Solution's numbers against their dense definitions, and solve()'s routing."""

import math
import warnings

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx.solvers.kron import KronSolution, solve_kron
from ffu_cvx.solvers.sdp.driver import solve_sdp
from ffu_cvx.model.status import USER_STOPPED


def product_problem(domain, groups, **kw):
    return ffu.FitnessProblem.from_workload(ffu.workloads.product(ffu.Domain(domain, **kw), groups))


def dense_terms(sol):
    """Per term: the dense basis (k_t, d) in domain cell order, Sigma_t, and per group R_{g,t} (m_g, k_t)."""
    sizes = sol.problem.domain.sizes
    out = []
    for t in sol.terms:
        B, S = np.ones((1, 1)), np.ones((1, 1))
        for f in t.factors:
            B, S = np.kron(B, f.cell_basis()), np.kron(S, f.sigma)
        order = [i for f in t.factors for i in f.attrs]
        cells = np.arange(math.prod(sizes)).reshape(sizes).transpose(order).ravel()
        Bd = np.zeros_like(B)
        Bd[:, cells] = B
        R = {}
        for g, Rs in t.recon.items():
            M = np.ones((1, 1))
            for r in Rs:
                M = np.kron(M, r)
            rows = [sol.problem.groups[g].blocks[i].matrix.shape[0] for i in range(len(sizes))]
            idx = np.arange(math.prod(rows)).reshape(rows).transpose(order).ravel()
            Rd = np.zeros_like(M)
            Rd[idx] = M
            R[g] = Rd
        out.append((Bd, S, R))
    return out


def check_against_dense(sol, rtol: float = 1e-9):
    """Reconstruction W_g = sum_t R B, profile, variances and the privacy cost from the dense terms (to
    ``rtol``: a covariance of condition ``kappa`` gives them to about ``kappa`` eps either way)."""
    problem = sol.problem
    parts = dense_terms(sol)
    p = sum(np.einsum("ij,ij->j", B, np.linalg.solve(S, B)) for B, S, _ in parts)
    np.testing.assert_allclose(sol.profile, p, rtol=rtol)
    assert sol.privacy_cost == pytest.approx(p.max(), rel=rtol)
    var = []
    for g, grp in enumerate(problem.groups):
        Wg = sum(R[g] @ B for B, _, R in parts if g in R)
        np.testing.assert_allclose(Wg, grp.dense(), atol=1e-10)
        var.append(sum(np.einsum("ij,ij->i", R[g] @ S, R[g]) for _, S, R in parts if g in R))
    np.testing.assert_allclose(sol.variances, np.concatenate(var), rtol=rtol)
    assert sol.max_ratio == pytest.approx(np.max(sol.variances / problem.workload.c), rel=rtol)
    return parts


SINGLE = [
    ({"a": 6, "b": 4}, {"a": "prefix", "b": "ranges"}, 2.0),
    ({"a": 5, "b": 3, "c": 2}, {"a": "ranges", "b": "identity"}, 1.0),
    ({"a": 8, "b": 4}, {"a": {"bands": 3}, "b": "prefix"}, 0.5),
    ({"a": 6, "b": 5}, {"a": {"ranges": [(0, 2), (1, 4), (3, 5)]}, "b": "total"}, 3.0),
    ({"a": 4, "b": 4, "c": 3}, {"a": [[1, 2, 0, 1], [0, 1, 1, 0]], "b": "identity", "c": "prefix"}, 1.5),
]


@pytest.mark.parametrize("domain, blocks, target", SINGLE)
def test_single_product_equals_dense_sdp(domain, blocks, target):
    problem = product_problem(domain, [(blocks, target)])
    assert problem.d <= 64
    sol = ffu.solve(problem, method="kron")
    dense = solve_sdp(problem.dense(), tol=1e-6)
    cost = sol.privacy_cost * sol.max_ratio
    assert cost == pytest.approx(dense.privacy_cost * dense.max_ratio, rel=1e-4)
    assert sol.lower_bound <= dense.privacy_cost * (1 + 1e-6)
    assert sol.info["structure"] == "product" and sol.status == "optimal" and sol.gap <= 1e-4
    # the product of per-attribute optima (each by the dense SDP) over the target
    factors = [solve_sdp(ffu.FitnessProblem(b.matrix, 1.0), tol=1e-8).privacy_cost
               for b in problem.groups[0].blocks]
    assert sol.privacy_cost == pytest.approx(math.prod(factors) / target, rel=1e-6)
    check_against_dense(sol)


@pytest.mark.slow
def test_single_product_equals_dense_smii_larger():
    problem = product_problem({"a": 32, "b": 8, "c": 2}, [({"a": "prefix", "b": "ranges", "c": "identity"}, 4.0)])
    sol = ffu.solve(problem, method="kron")
    dense = ffu.solve(problem.dense(), method="smii", tol=1e-6)
    assert sol.privacy_cost * sol.max_ratio == pytest.approx(dense.privacy_cost * dense.max_ratio, rel=1e-4)
    assert sol.lower_bound <= dense.privacy_cost


def test_product_bound_is_product_of_factor_bounds():
    problem = product_problem({"a": 6, "b": 4}, [({"a": "prefix", "b": "ranges"}, 2.0)])
    sol = solve_kron(problem, factor_method="sdp")
    bounds = [f["lower_bound"] for f in sol.info["factors"]]
    assert sol.lower_bound == pytest.approx(math.prod(bounds) / 2.0, rel=1e-12)


ISSUE = {
    "(12,2)": ({"a": 12, "b": 2}, [({"a": "prefix", "b": "total"}, 1.0), ({"a": "identity", "b": "identity"}, 4.0)],
               2.70015, (2.842, 2.884)),
    "(8,3)": ({"a": 8, "b": 3}, [({"a": "prefix", "b": "identity"}, 2.0), ({"a": "identity", "b": "total"}, 0.5),
                                 ({"a": "total", "b": "identity"}, 1.0)], 2.93424, (None, 4.14)),
}


@pytest.mark.parametrize("case", sorted(ISSUE))
def test_unions_of_the_issue_reach_the_dense_optimum(case):
    domain, groups, optimum, (kron_simple, independent) = ISSUE[case]
    problem = product_problem(domain, groups)
    sol = ffu.solve(problem, method="kron")
    assert sol.info["structure"] == "symmetric" and sol.status == "optimal"
    assert sol.privacy_cost * sol.max_ratio == pytest.approx(optimum, rel=1e-4)
    dense = ffu.solve(problem.dense(), method="smii", tol=1e-8)
    assert sol.lower_bound <= dense.privacy_cost * (1 + 1e-9)
    assert sol.privacy_cost * sol.max_ratio <= dense.privacy_cost * (1 + 1e-4)
    check_against_dense(sol)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ind = solve_kron(problem, structure="independent")
        kr = solve_kron(problem, structure="kronecker")
    assert ind.privacy_cost * ind.max_ratio == pytest.approx(independent, rel=1e-3)
    if kron_simple is not None:
        assert kr.privacy_cost * kr.max_ratio == pytest.approx(kron_simple, rel=1e-3)
    # never worse than the better simple structure; the simple ones' bounds are valid too
    assert sol.privacy_cost <= min(ind.privacy_cost * ind.max_ratio, kr.privacy_cost * kr.max_ratio)
    assert ind.lower_bound <= dense.privacy_cost and ind.gap > 0.01
    check_against_dense(ind)
    check_against_dense(kr)


def test_marginal_union_auto_uses_fourier_and_matches_dense():
    problem = product_problem({"a": 3, "b": 4, "c": 2, "d": 1},
                              [({"a": "identity", "b": "identity"}, 2.0), ({"c": "identity"}, 0.5),
                               ({"b": "identity", "c": "identity"}, 1.0), ({}, 0.3)])
    sol = ffu.solve(problem, method="auto")
    assert sol.info["structure"] == "fourier" and "marginals" in sol.info["auto"]
    dense = ffu.solve(problem.dense(), method="smii", tol=1e-8)
    assert sol.privacy_cost * sol.max_ratio == pytest.approx(dense.privacy_cost, rel=1e-6)
    kron = ffu.solve(problem, method="kron", tol=1e-8)
    assert kron.privacy_cost * kron.max_ratio == pytest.approx(dense.privacy_cost, rel=1e-6)
    check_against_dense(sol)


def test_sample_answer_noise_has_the_exact_covariance():
    domain, groups, _, _ = ISSUE["(8,3)"]
    sol = ffu.solve(product_problem(domain, groups), method="kron")
    parts = dense_terms(sol)
    G = len(sol.problem.groups)
    cov = np.block([[sum(R[g] @ S @ R[h].T for _, S, R in parts if g in R and h in R) if
                     any(g in R and h in R for _, _, R in parts) else
                     np.zeros((sol.problem.groups[g].m, sol.problem.groups[h].m)) for h in range(G)] for g in range(G)])
    np.testing.assert_allclose(np.diag(cov), sol.variances, rtol=1e-9)
    rng = np.random.default_rng(0)
    draws = np.array([sol.sample_answer_noise(rng) for _ in range(8000)])
    assert draws.shape == (8000, sol.problem.m)
    emp = np.cov(draws.T)
    assert np.max(np.abs(emp - cov)) <= 0.08 * np.max(np.diag(cov))
    np.testing.assert_array_equal(sol.sample_answer_noise(3), sol.sample_answer_noise(3))


def test_huge_single_product_stays_factored():
    problem = product_problem({"a": 100, "b": 100, "c": 100, "d": 10, "e": 10, "f": 10},
                              [({"a": "prefix", "b": {"bands": 10}, "c": "identity", "d": "ranges"}, 5.0)])
    assert problem.d == 10 ** 9
    sol = ffu.solve(problem, method="kron")
    assert sol.profile is None and sol.sigma is None and sol.variances is not None
    assert sol.variances.shape == (problem.m,)
    assert sol.privacy_cost == pytest.approx(math.prod(f["privacy_cost"] for f in sol.info["factors"]) / 5.0)
    assert sol.max_ratio == pytest.approx(1.0, rel=1e-6)
    assert sol.gap <= 1e-4
    assert sol.epsilon(1e-6) > 0 and sol.rho == pytest.approx(sol.privacy_cost / 2)


def test_kron_solution_is_immutable_and_scales():
    sol = ffu.solve(product_problem({"a": 6, "b": 2}, [({"a": "prefix", "b": "identity"}, 2.0)]), method="kron")
    assert isinstance(sol, KronSolution) and isinstance(sol, ffu.Solution)
    with pytest.raises(TypeError):
        sol["privacy_cost"] = 1.0
    with pytest.raises(AttributeError):
        sol.terms = ()
    half = sol.scaled(sol.privacy_cost / 2)
    assert half.privacy_cost == pytest.approx(sol.privacy_cost / 2)
    np.testing.assert_allclose(half.variances, 2 * sol.variances)
    assert half.lower_bound == sol.lower_bound
    np.testing.assert_allclose(sol.group_variances(0), sol.variances)
    with pytest.raises(ValueError, match="`g`"):
        sol.group_variances(3)


def test_callback_and_stop_in_the_block_ascent():
    domain, groups, _, _ = ISSUE["(12,2)"]
    problem = product_problem(domain, groups)
    seen = []

    def stop(r):
        seen.append(r)
        if r.nit == 3:
            raise StopIteration

    with pytest.warns(RuntimeWarning, match="stopped"):
        sol = ffu.solve(problem, method="kron", callback=stop)
    assert sol.status == USER_STOPPED and [r.nit for r in seen] == [1, 2, 3]
    assert seen[-1].method == "kron" and seen[-1].lower_bound <= seen[-1].privacy_cost
    assert sol.lower_bound <= 2.70016


def test_solve_routes_product_problems():
    domain, groups, optimum, _ = ISSUE["(12,2)"]
    problem = product_problem(domain, groups)
    sm = ffu.solve(problem, method="smii")
    assert sm.privacy_cost == pytest.approx(optimum, rel=1e-4) and sm.sigma.shape == (24, 24)
    auto = ffu.solve(problem, method="auto")
    assert "symmetric" in auto.info["auto"] and isinstance(auto, KronSolution)
    dense_auto = ffu.solve(problem.dense(), method="auto")
    assert "SDP" in dense_auto.info["auto"] and dense_auto.method == "sdp"
    big = product_problem({"a": 200, "b": 200}, [({"a": "prefix"}, 1.0)])
    with pytest.raises(ValueError, match="method='kron'"):
        ffu.solve(big, method="smii")
    with pytest.raises(ValueError, match="product workload"):
        ffu.solve(problem.dense(), method="kron")


def test_bad_input():
    problem = product_problem({"a": 4}, [({"a": "prefix"}, 1.0)])
    with pytest.raises(ValueError, match="ProductProblem"):
        solve_kron(problem.dense())
    with pytest.raises(ValueError, match="structure"):
        solve_kron(problem, structure="diagonal")
    with pytest.raises(ValueError, match="factor_method"):
        solve_kron(problem, factor_method="lbfgs")
    with pytest.raises(ValueError, match="one product group"):
        solve_kron(product_problem({"a": 4}, [({"a": "prefix"}, 1.0), ({}, 1.0)]), structure="product")
    with pytest.raises(TypeError):
        ffu.solve(problem, method="kron", bogus=1)


def test_large_structured_union_falls_back_to_the_better_simple_structure(monkeypatch):
    import ffu_cvx.solvers.kron.driver as driver
    monkeypatch.setattr(driver, "DENSE_D_MAX", 4)
    domain, groups, optimum, (kron_simple, _) = ISSUE["(12,2)"]
    with pytest.warns(RuntimeWarning, match="certified gap"):
        sol = ffu.solve(product_problem(domain, groups), method="kron")
    assert sol.info["structure"] == "kronecker" and sol.status == "optimal_inaccurate"
    assert sol.privacy_cost * sol.max_ratio == pytest.approx(kron_simple, rel=1e-3)
    assert sol.lower_bound <= optimum and sol.gap == pytest.approx(sol.privacy_cost * sol.max_ratio / sol.lower_bound - 1)
    # the geography-style split by b's blocks is tried too and costs more here
    assert set(sol.info["costs"]) == {"kronecker", "independent", "levels"}
    assert min(sol.info["costs"].values()) == pytest.approx(sol.privacy_cost * sol.max_ratio)


def test_the_kronecker_descent_stops_at_max_time():
    import time
    from ffu_cvx.solvers.kron.factors import FactorSolver
    from ffu_cvx.solvers.kron.simple import kronecker_bcd
    domain, groups, _, _ = ISSUE["(12,2)"]
    problem = product_problem(domain, groups)
    solver = FactorSolver("auto", tol=1e-6)
    assert kronecker_bcd(problem.groups, solver, deadline=time.perf_counter() - 1.0)[0] is None
    term, cost, done = kronecker_bcd(problem.groups, solver)
    assert term is not None and done >= 1 and math.isfinite(cost)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sol = solve_kron(problem, structure="kronecker", max_time=1e-9)
    assert sol.info["structure"] == "independent"     # no Kronecker factors by then: the products alone


def test_gaussian_mechanism_points_a_factored_solution_to_release_product():
    dom = ffu.Domain({"a": 6, "b": 3})
    wl = ffu.workloads.product(dom, [({"a": "prefix", "b": "identity"}, 1.0)])
    sol = ffu.solve(ffu.FitnessProblem.from_workload(wl), method="kron")
    assert sol.sigma is None
    with pytest.raises(ValueError, match="release_product"):
        ffu.GaussianMechanism(sol)
    counts = dom.counts(np.array([[0, 1], [5, 2], [5, 2]]))
    rel = ffu.release_product(sol, wl, counts, rng=np.random.default_rng(0))
    assert len(rel.answers) == wl.m and np.allclose(rel.variances, sol.variances)
