"""The ≺R refinement (Theorem 5) on workloads whose Problem 1 optimum is not unique."""

import time
import warnings

import numpy as np
import pytest
from scipy import linalg

import ffu_cvx as ffu
from ffu_cvx import workloads
from ffu_cvx.model import privacy
from ffu_cvx.solvers.sdp.refine import RETRY_CLARABEL_OPTIONS, tight_columns
from ffu_cvx.model.result import USER_STOPPED, SolverError
from ffu_cvx.solvers.sdp.driver import refine, refine_from, solve_level, solve_sdp

S51 = np.array([[1.0, 0.5], [0.5, 1.0]])  # §5.1 optimum for targets 1


def block_problem():
    """Two copies of §5.1's workload, targets 1 and 2, answered as W x + noise (B = W).

    Alpha = 4/3 is set by the first block alone; the second block may take any noise
    meeting its targets with profile <= 4/3, so Problem 1 has many optima.
    """
    W1 = np.array([[1.0, 1.0], [1.0, 0.0]])
    W = linalg.block_diag(W1, W1)
    return ffu.FitnessProblem(W, [1.0, 1.0, 2.0, 2.0], basis=W)


def test_block_problem_has_many_optima():
    problem = block_problem()
    refined = linalg.block_diag(S51, 2 * S51)
    other = linalg.block_diag(S51, 1.5 * S51)
    sols = [ffu.Solution.from_sigma(problem, s, method="closed_form") for s in (refined, other)]
    for s in sols:  # both feasible, both certified optimal
        assert s.max_ratio <= 1 + 1e-12
        assert s.privacy_cost == pytest.approx(4 / 3, rel=1e-12)
        assert s.gap < 1e-9
    assert not np.allclose(refined, other)
    assert privacy.compare_refined(sols[0].profile, sols[1].profile) == -1


@pytest.mark.parametrize("solver", ["CLARABEL", "SCS"])
def test_refinement_picks_the_refined_minimum(solver):
    problem = block_problem()
    plain = solve_sdp(problem, solver=solver, refine=False)
    sol = solve_sdp(problem, solver=solver)
    assert plain.privacy_cost == pytest.approx(4 / 3, rel=1e-7)
    # The unrefined interior-point answer sits inside the optimal face, above the minimum.
    assert privacy.compare_refined(sol.profile, plain.profile, rtol=1e-6) == -1
    np.testing.assert_allclose(privacy.sorted_profile(sol.profile), [4 / 3, 4 / 3, 2 / 3, 2 / 3], rtol=1e-6)
    levels = sol.info["refine_levels"]
    assert [lev["columns"] for lev in levels] == [[0, 1], [2, 3]]
    assert [lev["value"] for lev in levels] == pytest.approx([4 / 3, 2 / 3], rel=1e-6)
    np.testing.assert_allclose(sol.sigma, linalg.block_diag(S51, 2 * S51), rtol=1e-5, atol=1e-6)


def test_clarabel_and_scs_agree_on_refined_covariance():
    problem = block_problem()
    cov = [problem.L @ solve_sdp(problem, solver=s).sigma @ problem.L.T for s in ("CLARABEL", "SCS")]
    np.testing.assert_allclose(cov[0], cov[1], rtol=1e-5, atol=1e-6)


def test_levels_on_random_ranges_are_minimal():
    # One column alone blocks alpha; the other seven form a second level.
    problem = ffu.FitnessProblem.from_workload(workloads.random_ranges(8, targets="random", seed=3))
    plain = solve_sdp(problem, refine=False)
    sol = refine(problem, plain)
    assert sol.info["solver"] == "CLARABEL" and sol.info["sdp_value"] == pytest.approx(plain.privacy_cost, rel=1e-12)
    levels = sol.info["refine_levels"]
    assert [lev["columns"] for lev in levels] == [[0], [1, 2, 3, 4, 5, 6, 7]]
    assert levels[0]["value"] == pytest.approx(plain.privacy_cost, rel=1e-7)
    assert levels[1]["value"] < levels[0]["value"] * 0.9
    assert sol.privacy_cost == pytest.approx(plain.privacy_cost, rel=1e-7) and sol.gap < 1e-6
    assert privacy.compare_refined(sol.profile, plain.profile, rtol=1e-6) == -1
    for lev in levels:
        np.testing.assert_allclose(sol.profile[lev["columns"]], lev["value"], rtol=1e-6)
    # Minimality, checked column by column: with every other column held at its level,
    # no level-2 column can go below the level value.
    caps = np.empty(problem.d)
    for lev in levels:
        caps[lev["columns"]] = lev["value"] * (1 + 1e-8)
    for j in (1, 5):
        free = np.zeros(problem.d, dtype=bool)
        free[j] = True
        alone = solve_level(problem, free=free, caps=caps, solver="CLARABEL")
        assert alone.value == pytest.approx(levels[1]["value"], rel=1e-5)
    # The same answer without a seed.
    np.testing.assert_allclose(refine(problem).sigma, sol.sigma, rtol=1e-4, atol=1e-4)


def test_prefix_optimum_is_one_level():
    sol = solve_sdp(ffu.FitnessProblem.from_workload(workloads.prefix(8)))
    levels = sol.info["refine_levels"]
    assert len(levels) == 1 and levels[0]["columns"] == list(range(8))
    np.testing.assert_allclose(sol.profile, sol.privacy_cost, rtol=1e-6)


def test_missed_tight_columns_are_merged_into_their_level(monkeypatch):
    # When the test for tight columns keeps only the largest multiplier per solve, the
    # later solves return the same value and their columns join the first level.
    import ffu_cvx.solvers.sdp.refine as refine_module

    def largest_only(lam, profile, value, free, **kwargs):
        out = np.zeros_like(free)
        out[int(np.argmax(np.where(free, lam, -np.inf)))] = True
        return out

    problem = ffu.FitnessProblem.from_workload(workloads.prefix(6))
    monkeypatch.setattr(refine_module, "tight_columns", largest_only)
    strict = refine(problem)
    assert strict.info["refine_levels"] == [{"value": pytest.approx(2.052404, abs=1e-6), "columns": list(range(6))}]
    monkeypatch.undo()
    assert strict.nit > solve_sdp(problem).nit  # it did take extra solves
    np.testing.assert_allclose(strict.sigma, solve_sdp(problem).sigma, rtol=1e-4, atol=1e-4)


def test_callback_sees_levels_and_can_stop():
    problem = block_problem()
    seen = []
    sol = solve_sdp(problem, callback=lambda st: seen.append((st["level"], st["columns"])))
    assert seen == [(1, [0, 1]), (2, [2, 3])] and sol.status == "optimal"

    def stop(state):
        raise StopIteration

    stopped = solve_sdp(problem, callback=stop)
    assert stopped.status == USER_STOPPED and stopped.info["refine_levels"][0]["columns"] == [0, 1]
    assert stopped.privacy_cost == pytest.approx(4 / 3, rel=1e-7)


def test_refine_rejects_bad_options():
    problem = block_problem()
    with pytest.raises(ValueError, match="formulation"):
        refine(problem, formulation="dual")
    with pytest.raises(ValueError, match="slack"):
        refine(problem, slack=0.5)
    with pytest.raises(ValueError, match="threshold"):
        refine(problem, threshold=0.0)


def random_problem(kind, d, seed):
    return ffu.FitnessProblem.from_workload(getattr(workloads, kind)(d, targets="random", seed=seed))


def assert_levels_partition(sol, d):
    levels = sol.info["refine_levels"]
    values = [lev["value"] for lev in levels]
    assert all(a > b for a, b in zip(values, values[1:]))  # strictly decreasing
    assert sorted(c for lev in levels for c in lev["columns"]) == list(range(d))
    for lev in levels:
        np.testing.assert_allclose(sol.profile[lev["columns"]], lev["value"], rtol=1e-4)


def test_tiny_multiplier_column_is_fixed_at_its_level():
    # random_ranges(8, random targets, seed 0): column 0 is tight in every optimum but its
    # multiplier is only 6.5e-4 of the largest; left free, the next level's feasible set
    # is so thin that Clarabel failed on it. The complementarity test fixes it at once.
    problem = random_problem("random_ranges", 8, 0)
    first = solve_level(problem, solver="CLARABEL")
    lam = first.lam / first.lam.sum()
    gap = 1 - privacy.profile(first.sigma, problem.B) / first.value
    assert lam[0] / lam.max() < 1e-3 and lam[0] > 10 * gap[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        sol = solve_sdp(problem)
    assert sol.status == "optimal" and "refine_failed" not in sol.info
    assert sol.info["refine_levels"] == [{"value": pytest.approx(first.value, rel=1e-9), "columns": list(range(8))}]
    assert_levels_partition(sol, 8)
    # Tight in every optimum indeed: with the others capped at alpha, column 0 stays at alpha
    # up to the slope lam_T / lam_0 of the dual bound times the slack.
    free = np.zeros(8, dtype=bool)
    free[0] = True
    alone = solve_level(problem, free=free, caps=np.full(8, first.value * (1 + 1e-6)), formulation="inverse",
                        solver="CLARABEL")
    assert first.value * (1 - 1.1e-6 * (1 - lam[0]) / lam[0]) <= alone.value <= first.value


def test_tight_columns_uses_multiplier_against_gap():
    free = np.ones(4, dtype=bool)
    lam = np.array([0.5, 0.5, 2e-4, 1e-8])
    profile = np.array([1.0, 1.0, 1.0 - 1e-6, 1.0 - 1e-6])
    got = tight_columns(lam, profile, 1.0, free, threshold=1e-3, tol=1e-9, profile_rtol=1e-4)
    assert got.tolist() == [True, True, True, False]
    # A multiplier below its gap (on the central path: below sqrt(lam * gap)) marks a free column.
    lam[2], profile[2] = 1e-6, 1.0 - 5e-5
    assert tight_columns(lam, profile, 1.0, free, threshold=1e-3, tol=1e-9, profile_rtol=1e-4).tolist()[2] is False
    # A column far from the level is never fixed, whatever its multiplier.
    profile[1] = 0.9
    assert tight_columns(lam, profile, 1.0, free, threshold=1e-3, tol=1e-9, profile_rtol=1e-4).tolist()[1] is False


def test_failed_level_is_retried_then_reported(monkeypatch):
    problem = block_problem()
    calls = []

    def failing(*args, **kwargs):
        calls.append((kwargs["formulation"], kwargs["caps"].max(), kwargs["solver_options"]))
        raise SolverError("synthetic failure", status="NumericalError")

    first = solve_level(problem, solver="CLARABEL")
    monkeypatch.setattr(ffu.solvers.sdp.driver, "solve_level", failing)
    with pytest.warns(RuntimeWarning, match=r"level 2 .*NumericalError.*Remedy"):
        sol = _refine_seeded(problem, first)
    # At slack 1e-8, 1e-7, 1e-6: the three formulations, then the regularised Clarabel.
    assert [f for f, _, _ in calls] == ["pair", "schur", "inverse", "pair"] * 3
    np.testing.assert_allclose([cap / first.value - 1 for _, cap, _ in calls[::4]], [1e-8, 1e-7, 1e-6], rtol=1e-6)
    assert [opts for _, _, opts in calls] == [None, None, None, RETRY_CLARABEL_OPTIONS] * 3
    assert sol.status == "optimal" and sol.privacy_cost == pytest.approx(4 / 3, rel=1e-7)
    assert sol.info["refine_levels"] == [{"value": pytest.approx(4 / 3, rel=1e-7), "columns": [0, 1]}]
    assert sol.info["refine_free"] == [2, 3] and "level 2" in sol.info["refine_failed"]
    assert sol.info["refine_retries"] == 12


def _refine_seeded(problem, first):
    return refine_from(problem, first, t0=time.perf_counter(), info={"solver": first.solver}, solver="CLARABEL")


def test_first_level_failure_still_raises(monkeypatch):
    def failing(*args, **kwargs):
        raise SolverError("synthetic failure", status="NumericalError")

    monkeypatch.setattr(ffu.solvers.sdp.driver, "solve_level", failing)
    with pytest.raises(SolverError, match="synthetic"):
        solve_sdp(block_problem())


@pytest.mark.parametrize("kind", ["random_ranges", "random_pm1"])
@pytest.mark.parametrize("d", [8, 12])
def test_random_workloads_refine_without_error(kind, d):
    compared = 0
    for seed in range(5):
        problem = random_problem(kind, d, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            plain = solve_sdp(problem, refine=False)
            sol = solve_sdp(problem)
        assert sol.status == "optimal" and "refine_failed" not in sol.info, (kind, d, seed)
        assert sol.privacy_cost == pytest.approx(plain.privacy_cost, rel=1e-6)
        # rtol 1e-4 (the refinement's profile_rtol): in the unrefined interior solution a
        # tight column with multiplier lam sits about 1e-10 / lam below alpha.
        assert privacy.compare_refined(sol.profile, plain.profile, rtol=1e-4) <= 0
        assert_levels_partition(sol, d)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                polish = ffu.solve(problem, method="smii", refine=True, tol=1e-6)
            except SolverError:
                continue
        partition = [lev["columns"] for lev in sol.info["refine_levels"]]
        if "refine_failed" in polish.info or [lev["columns"] for lev in polish.info["refine_levels"]] != partition:
            # SM-II caps its fixed levels 1e-7 above their values; a column tight in every
            # optimum with a tiny multiplier then drops by 1e-7 / lam (see the next test).
            continue
        cov, cov_smii = (problem.L @ s.sigma @ problem.L.T for s in (sol, polish))
        assert np.linalg.norm(cov - cov_smii) <= 1e-3 * np.linalg.norm(cov), (kind, d, seed)
        compared += 1
    assert compared >= 2


def test_columns_with_tiny_multipliers_are_tight_in_every_optimum():
    # random_ranges(12, seed 3): columns 6-11 have multipliers 3e-5 to 1.3e-4 of the total
    # and are fixed at alpha. Held alone with every other column capped at alpha (1 + s),
    # column 8's minimum drops in proportion to s: it is alpha in the exact optimum.
    problem = random_problem("random_ranges", 12, 3)
    sol = solve_sdp(problem)
    assert sol.info["refine_levels"][0]["columns"] == [0, 1, 2, 3, 6, 7, 8, 9, 10, 11]
    assert sol.info["refine_levels"][1]["columns"] == [4, 5]
    first = solve_level(problem, solver="CLARABEL")
    free = np.arange(12) == 8
    drops = [1 - solve_level(problem, free=free, caps=np.full(12, first.value * (1 + s)), formulation="inverse",
                             solver="CLARABEL").value / first.value for s in (1e-8, 1e-6)]
    assert 1e-5 < drops[0] < 1e-3 and drops[1] / drops[0] == pytest.approx(100, rel=0.05)


def test_levels_call_back_with_intermediate_results():
    problem = block_problem()
    seen = []
    sol = solve_sdp(problem, callback=seen.append)
    assert [(r.nit, r.level, r.columns) for r in seen] == [(1, 1, [0, 1]), (2, 2, [2, 3])]
    assert [r.value for r in seen] == pytest.approx([4 / 3, 2 / 3], rel=1e-6)
    for r in seen:  # every level's Sigma is an optimum of Problem 1, certified by the first level
        assert r.method == "sdp" and r.privacy_cost == pytest.approx(4 / 3, rel=1e-7)
        assert r.lower_bound == pytest.approx(4 / 3, rel=1e-7) and abs(r.gap) < 1e-6
    np.testing.assert_allclose(seen[-1].sigma, sol.sigma, rtol=1e-9, atol=1e-12)

    def stop_second(result):
        if result.level == 2:
            raise StopIteration

    stopped = solve_sdp(problem, callback=stop_second)
    assert stopped.status == USER_STOPPED and len(stopped.info["refine_levels"]) == 2


def test_refinement_driver_takes_the_level_solver():
    from ffu_cvx.solvers.sdp import cvx
    from ffu_cvx.solvers.sdp.refine import refine_levels

    problem = block_problem()
    first = cvx.solve_level(problem, solver="CLARABEL")
    calls = []

    def counting(problem, **kwargs):
        calls.append(sorted(np.flatnonzero(kwargs["free"]).tolist()))
        return cvx.solve_level(problem, **kwargs)

    out = refine_levels(problem, first, solve_level=counting, solver="CLARABEL")
    # One extra level, over the columns the first left free, solved by the injected solver;
    # Clarabel's first attempt may end a little outside the caps (on one machine its Sigma cost
    # 3e-6 above the first level) and be retried, every attempt over the same columns.
    assert calls and all(c == [2, 3] for c in calls) and len(calls) == 1 + out.retries
    assert [lev["columns"] for lev in out.levels] == [[0, 1], [2, 3]] and not out.failed
    np.testing.assert_allclose(out.sigma, linalg.block_diag(S51, 2 * S51), rtol=1e-5, atol=1e-6)
