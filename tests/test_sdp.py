"""The exact SDP reference: paper values, closed forms, formulations, solvers, failures."""

import itertools
import math
import warnings

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx import workloads
from ffu_cvx.model import privacy
from ffu_cvx.model.result import OPTIMAL, USER_STOPPED, SolverError
from ffu_cvx.solvers.sdp.driver import FORMULATIONS, STATUS_MAP, lmi_order, solve_level, solve_sdp

# Table 2 of the paper (IP row, two decimals) and our six-decimal values.
TABLE2 = {2: (1.33, 1.333333), 4: (1.76, 1.758601), 8: (2.28, 2.281561), 16: (2.91, 2.905253)}


def prefix_problem(d, basis="auto"):
    return ffu.FitnessProblem.from_workload(workloads.prefix(d), basis=basis)


@pytest.mark.parametrize("d", sorted(TABLE2))
def test_table2_ip_row(d):
    sol = ffu.solve(prefix_problem(d), method="sdp")
    paper, pinned = TABLE2[d]
    assert round(sol.privacy_cost, 2) == paper
    assert sol.privacy_cost == pytest.approx(pinned, abs=1e-6)
    assert sol.status == OPTIMAL and sol.success
    assert sol.max_ratio == pytest.approx(1.0, rel=1e-12)
    assert 0 <= sol.gap < 1e-6
    assert sol.lower_bound == pytest.approx(pinned, abs=1e-6)


def test_prefix32_certified():
    sol = solve_sdp(prefix_problem(32))
    assert sol.privacy_cost == pytest.approx(3.630723, abs=1e-6)
    assert 0 <= sol.gap < 1e-6


@pytest.mark.slow
def test_table2_d64():
    sol = solve_sdp(prefix_problem(64))
    assert round(sol.privacy_cost, 2) == 4.46
    assert sol.privacy_cost == pytest.approx(4.457869, abs=1e-6)
    assert 0 <= sol.gap < 1e-6


@pytest.mark.parametrize("gamma", [0.5, 1.0, 3.0])
def test_section51_closed_form(gamma):
    # Theorem 2: W = [[1, 1], [1, 0]] released as W x + N(0, Sigma).
    W = np.array([[1.0, 1.0], [1.0, 0.0]])
    sol = solve_sdp(ffu.FitnessProblem(W, [gamma, gamma], basis=W))
    np.testing.assert_allclose(sol.sigma, gamma * np.array([[1, 0.5], [0.5, 1]]), rtol=1e-6, atol=1e-7 * gamma)
    assert sol.privacy_cost == pytest.approx(4 / (3 * gamma), rel=1e-7)


def test_theorem6_identity_and_upper_bases_agree():
    sols = {b: solve_sdp(prefix_problem(8, basis=b)) for b in ("identity", "upper")}
    a, b = sols["identity"], sols["upper"]
    assert a.problem.basis == "identity" and b.problem.basis == "upper"
    assert a.privacy_cost == pytest.approx(b.privacy_cost, rel=1e-7)
    np.testing.assert_allclose(a.profile, b.profile, rtol=1e-6)
    cov = [s.problem.L @ s.sigma @ s.problem.L.T for s in (a, b)]
    # alpha is flat to first order along some directions of Sigma at the optimum, so
    # Sigma itself is only accurate to about the square root of the solver tolerance.
    np.testing.assert_allclose(cov[0], cov[1], rtol=1e-4, atol=1e-5)


def test_formulations_and_solvers_agree():
    # This workload's optimum is not unique (one column blocks alpha), so the refined
    # Sigma is compared across formulations; SCS is compared on the unrefined optimum.
    problem = ffu.FitnessProblem.from_workload(workloads.random_ranges(8, targets="random", seed=3))
    ref = solve_sdp(problem, solver="CLARABEL", formulation="pair")
    assert [len(lev["columns"]) for lev in ref.info["refine_levels"]] == [1, 7]
    cov_ref = problem.L @ ref.sigma @ problem.L.T
    for form in FORMULATIONS:
        sol = solve_sdp(problem, solver="CLARABEL", formulation=form)
        assert sol.info["solver"] == "CLARABEL" and sol.info["formulation"] == form
        assert sol.privacy_cost == pytest.approx(ref.privacy_cost, rel=1e-7), form
        assert sol.gap < 1e-6
        np.testing.assert_allclose(problem.L @ sol.sigma @ problem.L.T, cov_ref, rtol=1e-4, atol=1e-5 * cov_ref.max())
        fast = solve_sdp(problem, solver="SCS", formulation=form, refine=False)
        assert fast.privacy_cost == pytest.approx(ref.privacy_cost, rel=1e-6), form
        assert fast.gap < 1e-6


def test_lmi_orders_and_auto_solver():
    problem = ffu.FitnessProblem.from_workload(workloads.random_ranges(10, seed=1))
    k, d, m = problem.k, problem.d, problem.m
    assert [lmi_order(problem, f) for f in ("pair", "schur", "inverse", "dual")] == [2 * k, k + d, k + m, 2 * k]
    assert solve_sdp(prefix_problem(4), refine=False).info["solver"] == "CLARABEL"
    assert ffu.solvers.sdp.driver.pick_solver(prefix_problem(64), "auto", "pair") == "SCS"


def test_multipliers_are_normalised_duals():
    problem = prefix_problem(8)
    lev = solve_level(problem, solver="CLARABEL")
    assert lev.lam.sum() == pytest.approx(1.0, rel=1e-6)
    assert lev.mu.min() >= 0 and lev.mu.sum() > 0
    assert ffu.model.certificate.lower_bound(problem, lev.lam, lev.mu) == pytest.approx(lev.value, rel=1e-7)


def test_rank_deficient_marginals_use_row_basis():
    # 1-way marginals on 3 binary attributes, built by hand: spec fourier.md § 6 ex. 1.
    cells = list(itertools.product((0, 1), repeat=3))
    W = np.array([[1.0 if x[a] == v else 0.0 for x in cells] for a in range(3) for v in (0, 1)])
    problem = ffu.FitnessProblem(W, np.ones(6))
    assert problem.basis == "rows" and problem.k == 4 and np.linalg.matrix_rank(W) == 4
    sol = solve_sdp(problem)
    assert sol.privacy_cost == pytest.approx((1 + math.sqrt(3)) ** 2 / 4, rel=1e-7)  # 1.866025
    assert sol.gap < 1e-6
    with pytest.raises(ValueError, match="rank"):
        ffu.FitnessProblem(W, np.ones(6), basis="identity")


def test_two_way_marginals_match_spec():
    # fourier.md § 6 ex. 2: binary, 3 attributes, all 2-way marginals: 1.678023.
    cells = list(itertools.product((0, 1), repeat=3))
    rows = [[1.0 if (x[a], x[b]) == v else 0.0 for x in cells]
            for a, b in itertools.combinations(range(3), 2) for v in itertools.product((0, 1), repeat=2)]
    sol = solve_sdp(ffu.FitnessProblem(np.array(rows), 1.0))
    assert sol.privacy_cost == pytest.approx(1.678023, abs=1e-6)


def test_problem2_is_rescaled_problem1():
    # Theorem 8: the rescaled Problem 1 optimum solves Problem 2, and no mechanism at that
    # privacy cost can do better than the certified bound.
    problem = prefix_problem(8)
    sol = solve_sdp(problem)
    target = 0.5
    s2 = sol.scaled(target)
    assert privacy.privacy_cost(s2.sigma, problem.B) == pytest.approx(target, rel=1e-12)
    k = s2.max_ratio
    assert k == pytest.approx(sol.privacy_cost / target, rel=1e-12)
    assert k >= sol.lower_bound / target * (1 - 1e-12)
    assert k <= sol.lower_bound / target * (1 + 1e-6)
    # Solving Problem 1 with the targets k c lands exactly on the target privacy cost.
    again = solve_sdp(problem.with_targets(k * problem.c))
    assert again.privacy_cost == pytest.approx(target, rel=1e-6)
    np.testing.assert_allclose(again.sigma, s2.sigma, rtol=1e-4, atol=1e-4 * np.abs(s2.sigma).max())


def test_status_map_and_solver_failure():
    assert STATUS_MAP == {"optimal": "optimal", "optimal_inaccurate": "optimal_inaccurate"}
    with pytest.raises(SolverError) as err:
        solve_sdp(prefix_problem(8), solver="SCS", solver_options={"max_iters": 1})
    assert "max_iters" in err.value.status
    with pytest.raises(SolverError) as err:
        solve_sdp(prefix_problem(8), solver="CLARABEL", solver_options={"max_iter": 1})
    assert err.value.status == "user_limit"


def test_inaccurate_solve_warns():
    # SCS meets its loose tolerance, but the certificate exposes the gap.
    with pytest.warns(RuntimeWarning, match="inaccurate"):
        sol = solve_sdp(prefix_problem(8), solver="SCS", solver_tol=1e-5, refine=False)
    assert sol.status == "optimal_inaccurate" and sol.success
    assert 1e-6 < sol.gap < 1e-3 and "gap" in sol.message


def test_bad_options_raise_value_error():
    problem = prefix_problem(4)
    with pytest.raises(ValueError, match="formulation"):
        solve_sdp(problem, formulation="naive")
    with pytest.raises(ValueError, match="solver"):
        solve_sdp(problem, solver="MOSEK")
    with pytest.raises(ValueError, match="tol"):
        solve_sdp(problem, solver_tol=0.0)
    with pytest.raises(ValueError, match="problem"):
        solve_sdp(np.eye(3))
    with pytest.raises(ValueError, match="method"):
        ffu.solve(problem, method="interior")
    with pytest.raises(TypeError, match="foo"):
        solve_sdp(problem, solver="CLARABEL", solver_options={"foo": 1})
    with pytest.raises(TypeError, match="bogus"):
        ffu.solve(problem, method="sdp", bogus=1)


def test_callback_stop():
    seen = []

    def cb(state):
        seen.append(state["value"])
        raise StopIteration

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sol = solve_sdp(prefix_problem(4), callback=cb)
    assert sol.status == USER_STOPPED and not sol.success
    assert seen == [pytest.approx(1.758601, abs=1e-6)]
    assert sol.privacy_cost == pytest.approx(1.758601, abs=1e-6)


def test_bench_quick(tmp_path, monkeypatch):
    from experiments import bench_sdp, paths

    monkeypatch.setenv(paths.ENV, str(tmp_path))
    rows = bench_sdp.main(["--quick", "--no-cache", "--quiet"])
    assert {(r["d"], r["formulation"]) for r in rows} == {(d, f) for d in (8, 16) for f in FORMULATIONS}
    for r in rows:
        assert r["alpha"] == pytest.approx(TABLE2[r["d"]][1], abs=1e-6)
        assert r["gap"] < 1e-6 and r["solve_s"] > 0 and r["order"] == 2 * r["d"]
    assert (tmp_path / "results" / "bench_sdp.csv").exists()


@pytest.mark.parametrize("solver", ["CLARABEL", "SCS"])
def test_badly_scaled_problems_are_solved(solver):
    # Problem 1 is homogeneous: scaling targets by s scales alpha by 1/s, and scaling W
    # by w scales alpha by w^2; the solver sees a normalised problem either way.
    W = workloads.prefix(8).W
    c = np.linspace(1, 2, 8)
    ref = solve_sdp(ffu.FitnessProblem(W, c), solver="CLARABEL").privacy_cost
    for w, s in ((1.0, 1e-6), (1.0, 1e6), (1e3, 1.0), (1e-3, 1e2)):
        sol = solve_sdp(ffu.FitnessProblem(w * W, s * c), solver=solver)
        assert sol.privacy_cost * s / w**2 == pytest.approx(ref, rel=1e-6)
        assert sol.gap < 1e-6 and sol.status == OPTIMAL


def test_callback_gets_intermediate_results():
    from ffu_cvx.model.status import IntermediateResult

    problem = prefix_problem(8)
    seen = []
    sol = solve_sdp(problem, refine=False, callback=seen.append)
    assert len(seen) == 1 and isinstance(seen[0], IntermediateResult)
    r = seen[0]
    assert r.method == "sdp" and r.nit == r["level"] == 1 and r.columns == []
    assert r.value == pytest.approx(2.281561, abs=1e-6)
    assert r.privacy_cost == pytest.approx(sol.privacy_cost, rel=1e-9)
    assert r.lower_bound == pytest.approx(2.281561, abs=1e-6) and 0 <= r.gap < 1e-6
    np.testing.assert_allclose(r.sigma, sol.sigma, rtol=1e-12)
    assert not r.sigma.flags.writeable
    assert np.max(privacy.variances(problem.L, r.sigma) / problem.c) == pytest.approx(1.0, rel=1e-12)


def test_callback_stop_without_refinement():
    def stop(result):
        raise StopIteration

    sol = solve_sdp(prefix_problem(4), refine=False, callback=stop)
    assert sol.status == USER_STOPPED and not sol.success
    assert sol.privacy_cost == pytest.approx(1.758601, abs=1e-6)


def gaussian_product_problem(seed, k=32, d=64):
    """The seed authors' "related" workload: W = C A, C (k, k) and A (k, d) standard Gaussian, targets 1."""
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((k, k)) @ rng.standard_normal((k, d))
    return ffu.FitnessProblem(W, np.ones(k))


def test_auto_warm_starts_scs_from_smii():
    problem = prefix_problem(32)
    sol = solve_sdp(problem, refine=False)
    assert sol.info["solver"] == "SCS" and sol.info["warm_start"] == "smii" and sol.info["formulation"] == "inverse"
    assert sol.info["fallbacks"] == [] and sol.status == OPTIMAL
    assert sol.privacy_cost == pytest.approx(3.630723, abs=1e-6) and sol.gap < 1e-7
    cold = solve_sdp(problem, refine=False, warm_start=None)
    assert cold.info["warm_start"] is None and cold.info["formulation"] == "pair"
    assert cold.privacy_cost == pytest.approx(sol.privacy_cost, rel=1e-6)
    # A given Solution (any method with multipliers) is used as the start.
    start = ffu.solve(problem, method="smii", tol=1e-3)
    again = solve_sdp(problem, refine=False, solver="SCS", warm_start=start)
    assert again.info["warm_start"] == "solution (smii)" and again.gap < 1e-6
    assert again.privacy_cost == pytest.approx(3.630723, abs=1e-6)


def test_bad_warm_start_raises_value_error():
    problem = prefix_problem(4)
    with pytest.raises(ValueError, match="warm_start"):
        solve_sdp(problem, warm_start="yes")
    with pytest.raises(ValueError, match="needs SCS"):
        solve_sdp(problem, solver="CLARABEL", warm_start="smii")
    with pytest.raises(ValueError, match="multipliers"):
        solve_sdp(problem, solver="SCS", warm_start=ffu.solve(prefix_problem(4), method="smii"))


def test_auto_falls_back_when_scs_fails(monkeypatch):
    from ffu_cvx.solvers.sdp import driver as sdp

    def stalls(problem, *args, **kwargs):
        raise SolverError("SCS stalled", status="solved (inaccurate - reached max_iters)", nit=20_000)

    monkeypatch.setattr(sdp, "solve_warm", stalls)
    sol = solve_sdp(prefix_problem(32), refine=False)
    assert sol.info["solver"] == "CLARABEL" and sol.status == OPTIMAL
    assert sol.info["fallbacks"][0].startswith("SCS warm: solved (inaccurate - reached max_iters)")
    assert sol.privacy_cost == pytest.approx(3.630723, abs=1e-6)
    # Explicit solvers never fall back.
    with pytest.raises(SolverError, match="stalled"):
        solve_sdp(prefix_problem(32), refine=False, solver="SCS", warm_start="smii")


@pytest.mark.slow
def test_dense_gaussian_workload_is_exact_with_auto():
    # SCS stalls on this workload from any start (certified gap 3e-6 after 70,000
    # iterations from SM-II's point, 3.6% cold); "auto" falls back to Clarabel.
    problem = gaussian_product_problem(0)
    assert (problem.k, problem.d, problem.basis) == (32, 64, "rows")
    sol = solve_sdp(problem, refine=False)
    assert sol.status == OPTIMAL and sol.gap < 1e-6
    assert sol.info["solver"] == "CLARABEL" and sol.info["fallbacks"][0].startswith("SCS warm")
    assert sol.privacy_cost == pytest.approx(791.70094, rel=1e-6)
    smii = ffu.solve(problem, method="smii", tol=1e-4)
    assert smii.privacy_cost == pytest.approx(sol.privacy_cost, rel=1e-4)
