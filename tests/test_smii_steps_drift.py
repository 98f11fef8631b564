"""SM-II's sub-problem ends: ``driver.settles`` and the ``DRIFT`` guard of shifted sub-problems."""

import math
import types

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx import workloads
from ffu_cvx.result import OPTIMAL
from ffu_cvx.smii import driver, model, newton, options

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


@pytest.mark.parametrize("shifted, settle_gap, settles", [(True, None, True), (True, 0.0, False), (False, None, False)])
def test_a_shifted_step_that_gains_little_against_its_gap_settles(monkeypatch, shifted, settle_gap, settles):
    # A full step of a shifted sub-problem whose gain in F is under SETTLE_GAP |F| times the iterate's
    # certified gap ends it, though the gain is far over SETTLE times the Newton-decrement threshold;
    # without SETTLE_GAP, or unshifted, it does not.
    if settle_gap is not None:
        monkeypatch.setattr(driver, "SETTLE_GAP", settle_gap)
    problem = ffu.FitnessProblem.from_workload(workloads.random_ranges(24, targets="random", seed=0))
    opts = options.smii_options(tol=1e-4, refine=False, start="cheapest").resolved(problem.k)
    run = driver.Run(problem, opts, None, driver.Method("smii", "SM-II", None, (), ""), None)
    run.bounds.certify(run.p, run.kappa, run.c_int)
    shift = (np.zeros(problem.d), np.zeros(problem.m)) if shifted else (None, None)
    q = model.evaluate(run.B, run.L, run.c_int, run.p.sigma, run.t1, run.t2, s1=shift[0], s2=shift[1])
    gap = run.bounds.gap(q.cost(run.kappa))
    assert gap > driver.MIX_WITHIN * opts.tol  # no mixing in the way
    threshold, gain = 1e-12, 0.5 * driver.SETTLE_GAP * gap * abs(q.F) if settle_gap is None else 1e-6
    assert gain > 1e3 * driver.SETTLE * threshold
    run.p = types.SimpleNamespace(F=q.F + gain)  # the point before the step: only its F is read
    run._accept(1.0, q, newton.Step(None, -1.0, None, 3), threshold=threshold)
    assert run.settled is settles


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


def _steps_per_subproblem(log: str) -> list[int]:
    """Newton steps between the sub-problem-end notes of a verbose log."""
    counts, n = [], 0
    for line in log.splitlines():
        if line.startswith("  sub-problem"):
            counts.append(n)
            n = 0
        elif line[:6].strip().isdigit():
            n += 1
    return counts


def test_no_subproblem_takes_more_than_sub_maxit_steps(monkeypatch, capsys):
    # Seed 1: one sub-problem takes 7 Newton steps uncapped (seed 0, with CG preconditioned at
    # d = 64, takes at most 5).
    problem = ffu.FitnessProblem.from_workload(workloads.random_ranges(64, targets="random", seed=1))
    ffu.solve(problem, method="smii", refine=False, verbose=True)
    free = _steps_per_subproblem(capsys.readouterr().out)
    assert max(free) > 5  # the cap below bites
    monkeypatch.setattr(driver, "SUB_MAXIT", 5)
    sol = ffu.solve(problem, method="smii", refine=False, verbose=True)
    capped = _steps_per_subproblem(capsys.readouterr().out)
    assert capped and max(capped) <= 5
    assert sol.status == OPTIMAL and sol.gap <= 1e-4


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mixed_scale_workloads_certify_within_maxiter(seed):
    # Seed 1 once spent 1,084 steps in one sub-problem at t = 2,430 and ended at maxiter
    # (gap 1.2e-3) before SUB_MAXIT capped sub-problems.
    from experiments import bench_workloads

    sol = ffu.solve(bench_workloads.build("mixed", 64, seed), method="smii", tol=1e-4, refine=False)
    assert sol.status == OPTIMAL and sol.gap <= 1e-4
    assert sol.nit < 1000
