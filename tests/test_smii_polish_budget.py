"""The ≺R polish's Hessian-product budget: a bounded polish, then the certified main result."""

import math

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx import workloads
from ffu_cvx.solvers.smii import polish
from ffu_cvx.solvers.smii.log import IterationLog
from ffu_cvx.solvers.smii.options import smii_options
from ffu_cvx.model.status import MAX_ITER, OPTIMAL, SolverError

from experiments import bench_authors


def test_related_workload_polish_stops_at_its_budget():
    # The authors' "related" workload (k = 32): an unbounded polish took 0.4-0.7 million
    # products; the bounded one stops and returns the main solve's certified Sigma.
    problem = bench_authors.build("related", seed=0)
    raw = ffu.solve(problem, method="smii", refine=False)
    with pytest.warns(RuntimeWarning, match="budget of 20000 Hessian products"):
        sol = ffu.solve(problem, method="smii")
    assert "budget" in sol.info["refine_failed"]
    assert sol.status == raw.status == OPTIMAL
    np.testing.assert_array_equal(sol.sigma, raw.sigma)  # same iterates, polish discarded
    assert sol.gap == raw.gap <= 1e-4
    budget = max(polish.REFINE_BUDGET * raw.n_hvp, polish.REFINE_MIN_HVP)
    maxcg = problem.k * (problem.k + 1) // 2  # the last direction may overshoot by one CG run
    assert raw.n_hvp + budget <= sol.n_hvp <= raw.n_hvp + budget + maxcg


def test_refine_smii_budget_raises_max_iter_with_products_spent():
    problem = ffu.FitnessProblem.from_workload(workloads.random_ranges(8, targets="random", seed=3))
    raw = ffu.solve(problem, method="smii", tol=1e-5, refine=False)
    sigma, levels, _, n_hvp = polish.refine_smii(problem, raw.sigma)
    assert len(levels) > 1 and n_hvp > 10
    again = polish.refine_smii(problem, raw.sigma, max_hvp=n_hvp + 1)  # enough: the same levels
    np.testing.assert_array_equal(again[0], sigma)
    assert again[1] == levels
    with pytest.raises(SolverError, match="budget of 10 Hessian products") as err:
        polish.refine_smii(problem, raw.sigma, max_hvp=10)
    assert err.value.status == MAX_ITER
    assert 10 <= err.value.info["n_hvp"] <= n_hvp
    with pytest.raises(ValueError, match="`max_hvp`"):
        polish.refine_smii(problem, raw.sigma, max_hvp=0)


@pytest.mark.parametrize("main_hvp, budget, want", [(0, polish.REFINE_BUDGET, polish.REFINE_MIN_HVP),
                                                    (5000, 20.0, 100_000.0), (5000, 2.0, polish.REFINE_MIN_HVP)])
def test_polish_budget_is_proportional_to_the_main_solve(monkeypatch, main_hvp, budget, want):
    problem = ffu.FitnessProblem(np.eye(3), [1.0, 100.0, 4.0])
    seen = {}

    def stopped(problem, sigma, *, slack, max_hvp):
        seen["max_hvp"] = max_hvp
        raise SolverError("budget spent", status=MAX_ITER, nit=3, n_hvp=int(max_hvp) + 7)

    monkeypatch.setattr(polish, "refine_smii", stopped)
    sigma = np.diag([1.0, 100.0, 4.0])
    log = IterationLog("", problem, {})
    with pytest.warns(RuntimeWarning, match="budget spent; returning the unrefined optimum"):
        out, info, n_hvp = polish.polish(problem, sigma, 105.0, 1e-4, log, main_hvp=main_hvp, budget=budget)
    assert seen["max_hvp"] == want
    assert out is sigma and info["refine_failed"] == "budget spent" and info["refine_newton"] == 3
    assert n_hvp == int(want) + 7  # the products spent count in the run's total


def test_refine_budget_option():
    assert smii_options().refine_budget == polish.REFINE_BUDGET == 20.0
    assert smii_options(refine_budget=3).refine_budget == 3.0
    for bad in (0, -1.0, math.nan, "20"):
        with pytest.raises(ValueError, match="`refine_budget`"):
            smii_options(refine_budget=bad)
