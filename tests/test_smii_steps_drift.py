"""SM-II's sub-problem ends: ``schedule.settles`` and the ``DRIFT`` guard of shifted sub-problems."""

import math
import types

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx import workloads
from ffu_cvx.model.result import OPTIMAL
from ffu_cvx.solvers.smii import driver, incumbents, model, newton, options, schedule

# The SDP's six-decimal optimum of prefix(32) (tests/test_sdp.py, tests/test_smii.py).
PREFIX32_OPT = 3.630723


def test_a_full_step_that_gains_little_settles():
    small = 1e-5
    assert schedule.settles(1.0, 0.5 * small, small, math.nan, math.inf)
    assert not schedule.settles(0.5, 0.5 * small, small, math.nan, math.inf)  # the line search backtracked
    assert not schedule.settles(1.0, 2.0 * small, small, math.nan, math.inf)  # the step still gained


def test_a_shifted_iterate_far_above_the_best_gap_does_not_settle():
    small, best = 1e-5, 1e-3
    assert schedule.settles(1.0, 0.5 * small, small, 0.99 * schedule.DRIFT * best, best)
    assert not schedule.settles(1.0, 0.5 * small, small, 1.01 * schedule.DRIFT * best, best)
    # No certificate yet (NaN gap) or no best one (inf): nothing to compare, the rule is SETTLE's.
    assert schedule.settles(1.0, 0.5 * small, small, math.nan, best)
    assert schedule.settles(1.0, 0.5 * small, small, 1.0, math.inf)


@pytest.mark.parametrize("shifted, settle, settles", [(True, True, True), (True, False, False), (False, True, False)])
def test_a_shifted_step_that_gains_little_against_its_gap_settles(shifted, settle, settles):
    # A full step of a shifted sub-problem whose gain in F is under SETTLE_GAP |F| times the iterate's
    # certified gap ends it, though the gain is far over SETTLE times the Newton-decrement threshold
    # (so that rule alone would not end it: schedule.settles with SETTLE's bound says no); unshifted, or
    # with settle=False (neither rule), it does not.
    problem = ffu.FitnessProblem.from_workload(workloads.random_ranges(24, targets="random", seed=0))
    opts = options.smii_options(tol=1e-4, refine=False, start="cheapest", settle=settle).resolved(problem.k)
    run = driver.Run(problem, opts, None, driver.Method("smii", "SM-II", None, (), ""), None)
    run.bounds.certify(run.p, run.kappa, run.c_int)
    shift = (np.zeros(problem.d), np.zeros(problem.m)) if shifted else (None, None)
    q = model.evaluate(run.B, run.L, run.c_int, run.p.sigma, run.schedule.t1, run.schedule.t2, s1=shift[0],
                       s2=shift[1])
    gap = run.bounds.gap(q.cost(run.kappa))
    assert gap > incumbents.MIX_WITHIN * opts.tol  # no mixing in the way
    threshold, gain = 1e-12, 0.5 * schedule.SETTLE_GAP * gap * abs(q.F)
    assert gain > 1e3 * schedule.SETTLE * threshold
    assert not schedule.settles(1.0, gain, schedule.SETTLE * threshold, math.nan, math.inf)  # SETTLE alone: no
    run.p = types.SimpleNamespace(F=q.F + gain)  # the point before the step: only its F is read
    run._accept(1.0, q, newton.Step(None, -1.0, None, 3), threshold=threshold)
    assert run.schedule.settled is settles


@pytest.mark.parametrize("settle", [True, False])
def test_with_or_without_the_settle_rule_the_same_optimum_is_certified(settle):
    # settle=True: sub-problems also end by SETTLE / SETTLE_GAP, a shifted one's first step guarded
    # by DRIFT (it settles only on an iterate within DRIFT of the best gap); settle=False: only by
    # the Newton decrement or a stall. Both certify, at the SDP's optimum of prefix(32)
    # and at the default run's cost on random ranges.
    ranges = ffu.FitnessProblem.from_workload(workloads.random_ranges(64, targets="random", seed=0))
    default = ffu.solve(ranges, method="smii", refine=False)
    for problem, want in ((ffu.FitnessProblem.from_workload(workloads.prefix(32)), PREFIX32_OPT),
                          (ranges, default.privacy_cost)):
        sol = ffu.solve(problem, method="smii", refine=False, settle=settle)
        assert sol.status == OPTIMAL and 0 <= sol.gap <= 1e-4
        assert sol.max_ratio == pytest.approx(1.0, rel=1e-12)
        assert sol.lower_bound <= sol.privacy_cost
        assert sol.privacy_cost == pytest.approx(want, rel=2e-4)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mixed_scale_workloads_certify_within_maxiter(seed):
    # Mixed scales (rows and columns over two decades): every seed certifies well within maxiter.
    from experiments import bench_workloads

    sol = ffu.solve(bench_workloads.build("mixed", 64, seed), method="smii", tol=1e-4, refine=False)
    assert sol.status == OPTIMAL and sol.gap <= 1e-4
    assert sol.nit < 1000
