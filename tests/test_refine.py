"""The ≺R refinement (Theorem 5) on workloads whose Problem 1 optimum is not unique."""

import numpy as np
import pytest
from scipy import linalg

import ffu_cvx as ffu
from ffu_cvx import privacy, workloads
from ffu_cvx.refine import refine
from ffu_cvx.result import USER_STOPPED
from ffu_cvx.sdp import solve_level, solve_sdp

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


def test_missed_tight_columns_are_merged_into_their_level():
    # A threshold near 1 fixes only the largest multiplier per solve; the later solves
    # then return the same value and their columns join the first level.
    problem = ffu.FitnessProblem.from_workload(workloads.prefix(6))
    strict = refine(problem, threshold=0.999)
    assert strict.info["refine_levels"] == [{"value": pytest.approx(2.052404, abs=1e-6), "columns": list(range(6))}]
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
