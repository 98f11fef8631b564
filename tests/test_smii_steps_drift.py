"""SM-II's sub-problem ends: ``driver.settles`` and the ``DRIFT`` guard of shifted sub-problems."""

import math

import pytest

import ffu_cvx as ffu
from ffu_cvx import workloads
from ffu_cvx.result import OPTIMAL
from ffu_cvx.smii import driver

# The SDP's six-decimal optimum of prefix(32) (tests/test_sdp.py, tests/test_smii.py).
PREFIX32_OPT = 3.630723


def test_a_full_step_that_gains_little_settles():
    small = 1e-5
    assert driver.settles(1.0, 0.5 * small, small, math.nan, math.inf)
    assert not driver.settles(0.5, 0.5 * small, small, math.nan, math.inf)  # the line search backtracked
    assert not driver.settles(1.0, 2.0 * small, small, math.nan, math.inf)  # the step still gained


def test_a_shifted_iterate_far_above_the_best_gap_does_not_settle():
    small, best = 1e-5, 1e-3
    assert driver.settles(1.0, 0.5 * small, small, 0.99 * driver.DRIFT * best, best)
    assert not driver.settles(1.0, 0.5 * small, small, 1.01 * driver.DRIFT * best, best)
    # No certificate yet (NaN gap) or no best one (inf): nothing to compare, the rule is SETTLE's.
    assert driver.settles(1.0, 0.5 * small, small, math.nan, best)
    assert driver.settles(1.0, 0.5 * small, small, 1.0, math.inf)


@pytest.mark.parametrize("drift", [1.0, math.inf])
def test_every_drift_guard_certifies_the_same_optimum(monkeypatch, drift):
    # DRIFT = 1: a shifted sub-problem only settles on an iterate at least as good as the
    # best one; inf: never guarded (the rule before DRIFT). Both still certify, at the
    # SDP's optimum of prefix(32) and at the default run's cost on random ranges.
    ranges = ffu.FitnessProblem.from_workload(workloads.random_ranges(64, targets="random", seed=0))
    default = ffu.solve(ranges, method="smii", refine=False)
    monkeypatch.setattr(driver, "DRIFT", drift)
    for problem, want in ((ffu.FitnessProblem.from_workload(workloads.prefix(32)), PREFIX32_OPT),
                          (ranges, default.privacy_cost)):
        sol = ffu.solve(problem, method="smii", refine=False)
        assert sol.status == OPTIMAL and 0 <= sol.gap <= 1e-4
        assert sol.max_ratio == pytest.approx(1.0, rel=1e-12)
        assert sol.lower_bound <= sol.privacy_cost
        assert sol.privacy_cost == pytest.approx(want, rel=2e-4)
