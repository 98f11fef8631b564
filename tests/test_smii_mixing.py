"""SM-II's mixed ends: the bound on a mix's cost, its minimiser, the pool and the driver's stop on a mix."""

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx import workloads
from ffu_cvx.model import privacy
from ffu_cvx.solvers.smii import driver, incumbents, mixing, model, newton, options
from ffu_cvx.model.status import OPTIMAL


def _ranges(d=24, seed=0):
    return ffu.FitnessProblem.from_workload(workloads.random_ranges(d, targets="random", seed=seed))


def _meeting_targets(problem, sigma):
    """``(S, g, r)``: ``sigma`` scaled to meet every target, its profile and variance ratios."""
    r = privacy.variances(problem.L, sigma) / problem.c
    S = sigma / r.max()
    return S, privacy.profile(S, problem.B), r / r.max()


def _random_spd(k, rng):
    A = rng.standard_normal((k, 2 * k))
    return A @ A.T / (2 * k) + 0.1 * np.eye(k)


def _cost(problem, sigma):
    S, g, r = _meeting_targets(problem, sigma)
    return g.max() * r.max()


def test_the_bound_holds_for_every_weight_and_is_exact_at_the_ends():
    problem, rng = _ranges(), np.random.default_rng(3)
    S, g, r = _meeting_targets(problem, _random_spd(problem.k, rng))
    S2, g2, r2 = _meeting_targets(problem, _random_spd(problem.k, rng))
    for theta in np.linspace(0.0, 1.0, 11):
        mixed = mixing.mix(S, S2, theta)
        bound = (theta * g + (1 - theta) * g2).max() * (theta * r + (1 - theta) * r2).max()
        assert _cost(problem, mixed) <= bound * (1 + 1e-12)
    U, theta = mixing.pair_bound(g, r, g2, r2)
    assert U <= min(g.max() * r.max(), g2.max() * r2.max()) * (1 + 1e-15)
    assert _cost(problem, mixing.mix(S, S2, theta)) <= U * (1 + 1e-12)


def test_pair_bound_finds_the_least_bound_on_a_fine_grid():
    rng = np.random.default_rng(7)
    for _ in range(20):
        d, m = rng.integers(3, 40, size=2)
        g, g2 = rng.uniform(0.5, 1.5, d), rng.uniform(0.5, 1.5, d)
        r, r2 = rng.uniform(0.0, 1.0, m), rng.uniform(0.0, 1.0, m)
        r[0] = r2[-1] = 1.0
        fine = np.linspace(0.0, 1.0, 200001)[:, None]
        brute = (np.max(g2 + fine * (g - g2), axis=1) * np.max(r2 + fine * (r - r2), axis=1)).min()
        U, theta = mixing.pair_bound(g, r, g2, r2)
        assert 0.0 <= theta <= 1.0
        assert U <= brute * (1 + 1e-5)  # the nested grids' resolution (8e-6 in theta)
        assert U == pytest.approx((theta * g + (1 - theta) * g2).max() * (theta * r + (1 - theta) * r2).max(),
                                  rel=1e-12)


def test_the_pool_keeps_the_last_ends_and_picks_the_best_partner():
    g, r = np.array([1.0, 0.5]), np.array([1.0, 0.2])
    assert mixing.EndPool(0).best_mix(g, r) is None
    pool = mixing.EndPool(2)
    assert pool.best_mix(g, r) is None
    # Partner "b" overshoots where this end is low: its mix costs less than "a"'s or "c"'s.
    ends = {"a": (np.array([1.0, 0.5]), np.array([1.0, 0.2])), "b": (np.array([0.5, 1.0]), np.array([0.2, 1.0])),
            "c": (np.array([1.2, 1.2]), np.array([1.0, 1.0]))}
    for name in "abc":
        pool.push(name, 1.0, *ends[name])
    assert len(pool) == 2  # "a" dropped
    U, theta, partner, scale = pool.best_mix(g, r)
    assert partner == "b" and scale == 1.0 and theta == pytest.approx(0.5, abs=1e-6) and U == pytest.approx(0.75 * 0.6)
    U_a, _, partner_a, _ = pool.best_mix(g, r, extra=(("a", 1.0, *ends["a"]),))
    assert partner_a == "b" and U_a == U


def _run(problem, tol):
    opts = options.smii_options(tol=tol, refine=False).resolved(problem.k)
    method = driver.Method("smii", "SM-II", None, (), "")
    return driver.Run(problem, opts, None, method, None)


def _around_optimum(problem, tol, seed):
    """``(run, star, a, b)``: a fresh run certified at the optimum's point ``star`` and the
    points ``a, b`` of ``sigma* +- delta``, a symmetric 2% perturbation in ``sigma*``'s own
    metric (both stay positive definite) drawn from ``seed``."""
    exact = ffu.solve(problem, method="smii", tol=1e-7, refine=False)
    X = np.random.default_rng(seed).standard_normal((problem.k, problem.k))
    X = X + X.T
    half = np.linalg.cholesky(exact.sigma)
    delta = 0.02 * half @ (X / np.linalg.norm(X, 2)) @ half.T
    run = _run(problem, tol)
    star, a, b = (model.evaluate(run.B, run.L, run.c_int, exact.sigma + sign * delta, run.schedule.t1, run.schedule.t2)
                  for sign in (0, 1, -1))
    run.bounds.certify(star, run.kappa, run.c_int)
    return run, star, a, b


def test_the_driver_stops_on_a_mix_of_two_ends_that_certifies():
    # Two ends on either side of the optimum, sigma* +- eps Delta, each above tol: their
    # half-and-half mix is sigma* itself, which the certified bound accepts.
    problem, tol = _ranges(), 1e-3
    run, star, a, b = _around_optimum(problem, tol, seed=0)
    assert run.bounds.gap(star.cost(run.kappa)) <= tol
    gaps = [run.bounds.gap(q.cost(run.kappa)) for q in (a, b)]
    assert min(gaps) > 3 * tol
    assert run._mix(b, gaps[1]) == gaps[1] and run.incumbents.mixed is None  # nothing to mix with yet
    run.incumbents.best = incumbents.Best(gaps[1], b, run.kappa)
    mixed_gap = run._mix(a, gaps[0])
    assert mixed_gap <= tol and run.incumbents.mixed == pytest.approx(0.5, abs=0.05)
    assert run.incumbents.best.gap == mixed_gap
    sol = ffu.Solution.from_sigma(problem, run.incumbents.best.point.sigma, method="smii", lower_bound=run.bounds.value)
    assert sol.gap <= tol


def test_an_end_is_mixed_with_the_least_cost_iterate_too():
    # The partner may be the cheapest iterate of any Newton step (incumbents.Lowest), with no
    # best end and no kept end to mix with: sigma* +- delta mix to sigma* again.
    problem, tol = _ranges(), 1e-3
    run, _, a, b = _around_optimum(problem, tol, seed=2)
    alpha_b = b.cost(run.kappa)
    run.incumbents.lowest = incumbents.Lowest(alpha_b, 1, mixing.end_of(b, run.kappa, run.bk.to_numpy), run.c_int,
                                              b.t1, b.t2, None, None)
    assert run.incumbents.best is None and len(run.incumbents.ends) == 0
    mixed_gap = run._mix(a, run.bounds.gap(a.cost(run.kappa)))
    assert mixed_gap <= tol < run.bounds.gap(alpha_b) and run.incumbents.mixed == pytest.approx(0.5, abs=0.05)


def test_an_accepted_step_that_mixes_to_tol_ends_the_run():
    # Not only sub-problem ends: every accepted iterate near tol is mixed (and not kept
    # among the ends), and a mix that certifies ends the run at that step.
    problem, tol = _ranges(), 1e-3
    run, _, a, b = _around_optimum(problem, tol, seed=0)
    gap_a, gap_b = (run.bounds.gap(q.cost(run.kappa)) for q in (a, b))
    assert min(gap_a, gap_b) > tol
    run.incumbents.best, run.p = incumbents.Best(gap_b, b, run.kappa), b
    run._accept(0.5, a, newton.Step(None, -1.0, None, 3), threshold=1e-9)  # not a full step: no SETTLE end
    assert run.status == OPTIMAL and run.incumbents.mixed == pytest.approx(0.5, abs=0.05)
    assert run.incumbents.best.gap <= tol and len(run.incumbents.ends) == 0
    sol = run._finish()
    assert sol.status == OPTIMAL and sol.gap <= tol and sol.info["mix"] == run.incumbents.mixed


def test_a_mix_that_does_not_certify_changes_nothing():
    problem, tol = _ranges(seed=1), 1e-3
    run = _run(problem, tol)
    rng = np.random.default_rng(1)
    p = model.evaluate(run.B, run.L, run.c_int, _random_spd(problem.k, rng), run.schedule.t1, run.schedule.t2)
    q = model.evaluate(run.B, run.L, run.c_int, _random_spd(problem.k, rng), run.schedule.t1, run.schedule.t2)
    run.bounds.certify(p, run.kappa, run.c_int)
    gap_q = run.bounds.gap(q.cost(run.kappa))
    run.incumbents.best = incumbents.Best(run.bounds.gap(p.cost(run.kappa)), p, run.kappa)
    assert run._mix(q, gap_q) == gap_q
    assert run.incumbents.mixed is None and run.incumbents.best.point is p and len(run.incumbents.ends) == 1


def test_a_solution_says_whether_it_is_a_mix():
    sol = ffu.solve(_ranges(), method="smii", tol=1e-3, refine=False)
    assert "mix" in sol.info
    assert sol.info["mix"] is None or 0.0 <= sol.info["mix"] <= 1.0
    assert sol.gap <= 1e-3
