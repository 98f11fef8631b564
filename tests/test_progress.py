"""Progress and time budget of the exact SDP: callbacks and logs during the ≺R refinement, ``max_time``."""

import logging
import time

import numpy as np
import pytest
from scipy import linalg

import ffu_cvx as ffu
from ffu_cvx.solvers.sdp import cvx
from ffu_cvx.solvers.sdp.refine import Clock, refine_levels
from ffu_cvx.solvers.sdp.driver import refine, solve_sdp
from ffu_cvx.model.status import MAX_ITER, OPTIMAL, USER_STOPPED, SolverError

ALPHA = 4 / 3  # §5.1's optimum at targets 1, set by the first block alone


def spread_problem():
    """Three copies of §5.1's workload with targets 1, 10 and 100 (B = W): three levels, 4/3, 2/15, 1/75."""
    W1 = np.array([[1.0, 1.0], [1.0, 0.0]])
    W = linalg.block_diag(W1, W1, W1)
    return ffu.FitnessProblem(W, [1.0, 1.0, 10.0, 10.0, 100.0, 100.0], basis=W)


def assert_certified_optimum(sol):
    """An optimum of Problem 1 (alpha 4/3), certified, meeting every target."""
    assert sol.privacy_cost == pytest.approx(ALPHA, rel=1e-7)
    assert 0 <= sol.gap <= 1e-6 and sol.lower_bound == pytest.approx(ALPHA, rel=1e-6)
    assert sol.max_ratio <= 1 + 1e-12


def test_callback_sees_every_refinement_level_with_progress():
    problem = spread_problem()
    seen = []
    sol = ffu.solve(problem, method="sdp", callback=seen.append)
    assert sol.status == OPTIMAL and sol.info["refine_complete"] and "refine_stopped" not in sol.info
    assert [(r.level, r.columns, r.n_fixed, r.n_free) for r in seen] == \
        [(1, [0, 1], 2, 4), (2, [2, 3], 4, 2), (3, [4, 5], 6, 0)]
    assert [r.value for r in seen] == pytest.approx([ALPHA, 2 / 15, 1 / 75], rel=1e-6)
    elapsed = [r.elapsed for r in seen]
    assert 0 < elapsed[0] <= elapsed[1] <= elapsed[2] <= sol.time


def test_levels_are_logged(caplog):
    with caplog.at_level(logging.INFO, logger="ffu_cvx"):
        solve_sdp(spread_problem())
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("ffu_cvx")]
    assert any("Problem 1 by CLARABEL" in line for line in lines)
    assert [line.split(":")[0] for line in lines if "fixed in all" in line] == \
        ["SDP level 1", "SDP level 2", "SDP level 3"]
    assert any("6 of 6 fixed in all" in line for line in lines)


def test_stop_iteration_stops_the_refinement():
    problem = spread_problem()
    calls = []

    def stop(result):
        calls.append(result.level)
        raise StopIteration

    sol = ffu.solve(problem, method="sdp", callback=stop)
    assert calls == [1]
    assert sol.status == USER_STOPPED and not sol.success
    assert sol.info["refine_complete"] is False and sol.info["refine_stopped"] == "callback"
    assert sol.info["refine_free"] == [2, 3, 4, 5] and len(sol.info["refine_levels"]) == 1
    assert "StopIteration" in sol.message and "not its unique ≺R-minimal one" in sol.message
    assert_certified_optimum(sol)


def test_spent_max_time_stops_the_refinement_after_the_first_sdp():
    problem = spread_problem()
    sol = refine(problem, solve_sdp(problem, refine=False), max_time=1e-9)
    assert sol.status == MAX_ITER and not sol.success
    assert sol.info["refine_complete"] is False and sol.info["refine_stopped"] == "max_time"
    assert sol.info["refine_free"] == [2, 3, 4, 5] and len(sol.info["refine_levels"]) == 1
    assert "max_time" in sol.message and "not its unique ≺R-minimal one" in sol.message
    assert_certified_optimum(sol)  # the first SDP's optimum: certified for alpha, only not ≺R-minimal
    unlimited = refine(problem, solve_sdp(problem, refine=False), max_time=None)
    assert unlimited.status == OPTIMAL and unlimited.info["refine_complete"]
    assert len(unlimited.info["refine_levels"]) == 3


def test_max_time_through_solve_stops_between_levels():
    problem = spread_problem()
    t = time.perf_counter()
    solve_sdp(problem, refine=False)
    budget = 3 * (time.perf_counter() - t) + 1.0  # the first SDP fits; the callback spends the rest
    seen = []

    def slow(result):
        seen.append(result.level)
        time.sleep(max(budget - result.elapsed, 0.0) + 0.01)

    sol = ffu.solve(problem, method="sdp", max_time=budget, callback=slow)
    assert seen == [1] and sol.status == MAX_ITER
    assert sol.info["refine_stopped"] == "max_time" and sol.info["refine_free"] == [2, 3, 4, 5]
    assert_certified_optimum(sol)


def test_no_level_solve_starts_once_the_clock_is_spent():
    problem = spread_problem()
    first = cvx.solve_level(problem, solver="CLARABEL")
    calls = []

    def counting(*args, **kwargs):
        calls.append(kwargs)
        return cvx.solve_level(*args, **kwargs)

    out = refine_levels(problem, first, solve_level=counting, solver="CLARABEL",
                        clock=Clock(t0=time.perf_counter() - 10.0, max_time=1.0))
    assert calls == [] and out.timed_out and out.free == [2, 3, 4, 5] and not out.failed
    out = refine_levels(problem, first, solve_level=counting, solver="CLARABEL", clock=Clock(max_time=600.0))
    assert len(calls) == 2 and not out.timed_out and out.free == []
    # The time left reaches the solver as its own limit.
    assert all(0 < c["solver_options"]["time_limit"] <= 600.0 for c in calls)


def test_max_time_spent_before_problem_1_is_solved(monkeypatch):
    from ffu_cvx.solvers.sdp import driver as sdp

    calls = []

    def failing(problem, **kwargs):
        calls.append(kwargs["solver"])
        time.sleep(0.05)
        raise SolverError("time limit", status="user_limit")

    monkeypatch.setattr(sdp, "solve_level", failing)
    with pytest.raises(SolverError, match="max_time") as err:
        solve_sdp(spread_problem(), max_time=0.01)  # "auto": Clarabel, then SCS (not tried)
    assert calls == ["CLARABEL"] and err.value.status == MAX_ITER
    calls.clear()
    with pytest.raises(SolverError) as err:
        solve_sdp(spread_problem())
    assert calls == ["CLARABEL", "SCS"] and err.value.status == "user_limit"  # no budget: every fallback runs


def test_time_limit_options():
    assert cvx.time_limit_options("CLARABEL", 2.5, None) == {"time_limit": 2.5}
    assert cvx.time_limit_options("SCS", 2.5, {"eps_abs": 1e-6}) == {"eps_abs": 1e-6, "time_limit_secs": 2.5}
    assert cvx.time_limit_options("SCS", -1.0, None) == {"time_limit_secs": 1e-3}  # spent: the least time
    own = {"time_limit": 9.0}
    assert cvx.time_limit_options("CLARABEL", 2.5, own) is own
    assert cvx.time_limit_options("CLARABEL", None, own) is own
    assert cvx.time_limit_options("CLARABEL", float("inf"), None) is None


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "soon"])
def test_max_time_is_validated(bad):
    with pytest.raises(ValueError, match="max_time"):
        ffu.solve(spread_problem(), method="sdp", max_time=bad)


def test_long_solves_log_a_heartbeat(monkeypatch, caplog):
    monkeypatch.setattr(cvx, "HEARTBEAT_S", 0.01)
    with caplog.at_level(logging.INFO, logger="ffu_cvx"):
        with cvx._heartbeat("SDP (pair) on test", "CLARABEL"):
            time.sleep(0.1)
    beats = [r.getMessage() for r in caplog.records if "still solving" in r.getMessage()]
    assert beats and beats[0].startswith("SDP (pair) on test: CLARABEL still solving after")


def test_an_inaccurate_first_sdp_cut_by_max_time_says_so():
    from ffu_cvx.solvers.sdp.driver import finish
    from ffu_cvx.model.status import OPTIMAL_INACCURATE

    problem = spread_problem()
    first = cvx.solve_level(problem, solver="CLARABEL")
    sigma = first.sigma + 1e-4 * np.eye(problem.k)  # feasible after rescaling, certified gap ~1e-4
    args = dict(status=OPTIMAL_INACCURATE, nit=1, t0=time.perf_counter(), tol=1e-6, solver="CLARABEL")
    with pytest.warns(RuntimeWarning, match="max_time ran out"):
        cut = finish(problem, sigma, first.lam, first.mu, out_of_time=True, **args)
    assert cut.status == MAX_ITER and 1e-6 < cut.gap < 1e-3 and "max_time" in cut.message
    with pytest.warns(RuntimeWarning, match="inaccurate"):
        slow = finish(problem, sigma, first.lam, first.mu, **args)
    assert slow.status == OPTIMAL_INACCURATE and slow.gap == pytest.approx(cut.gap)
