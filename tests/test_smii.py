"""SM-II (and its gradient-descent twin) against closed forms, the paper and the exact SDP."""

import time
import warnings

import numpy as np
import pytest
from scipy import linalg

import ffu_cvx as ffu
from ffu_cvx import workloads
from ffu_cvx.solvers import smii
from ffu_cvx.solvers.smii import driver, incumbents, multipliers, polish
from ffu_cvx.solvers.smii.model import Whitened, evaluate, initial_sigma, variance_ratios
from ffu_cvx.solvers.smii.newton import conjugate_gradient
from ffu_cvx.solvers.smii.polish import LevelPoint, LevelWhitened, epigraph_max
from ffu_cvx.model.result import MAX_ITER, OPTIMAL, USER_STOPPED, SolverError

# Exact optima of prefix(d) (the SDP's six-decimal values, see tests/test_sdp.py) and
# the SM-II row of the paper's Table 2 (two decimals).
PREFIX_OPT = {2: 4 / 3, 4: 1.758601, 8: 2.281561, 16: 2.905253, 32: 3.630723}
TABLE2_SMII = {2: 1.33, 4: 1.76, 8: 2.28, 16: 2.91, 64: 4.46}


def prefix_problem(d, basis="auto"):
    return ffu.FitnessProblem.from_workload(workloads.prefix(d), basis=basis)


def block_problem():
    """Two copies of §5.1's workload (targets 1 and 2, B = W): Problem 1 has many optima."""
    W1 = np.array([[1.0, 1.0], [1.0, 0.0]])
    W = linalg.block_diag(W1, W1)
    return ffu.FitnessProblem(W, [1.0, 1.0, 2.0, 2.0], basis=W)


def rel_frobenius(problem, s1, s2):
    c1, c2 = problem.L @ s1 @ problem.L.T, problem.L @ s2 @ problem.L.T
    return np.linalg.norm(c1 - c2) / np.linalg.norm(c1)


def check_solution(sol, tol=1e-4):
    assert sol.status == OPTIMAL and sol.success
    assert sol.max_ratio == pytest.approx(1.0, rel=1e-12)  # Problem 3 -> Problem 1 rescaling
    assert 0 <= sol.gap <= tol
    assert sol.lower_bound <= sol.privacy_cost


@pytest.mark.parametrize("gamma", [1.0, 0.25, 7.0])
def test_section51_closed_form(gamma):
    W = np.array([[1.0, 1.0], [1.0, 0.0]])
    sol = ffu.solve(ffu.FitnessProblem(W, gamma, basis=W), method="smii")
    check_solution(sol)
    assert sol.privacy_cost == pytest.approx(4 / (3 * gamma), rel=1e-4)
    np.testing.assert_allclose(sol.sigma, gamma * np.array([[1.0, 0.5], [0.5, 1.0]]), rtol=2e-3, atol=2e-3 * gamma)


@pytest.mark.parametrize("d", sorted(PREFIX_OPT))
@pytest.mark.parametrize("basis", ["identity", "upper"])
def test_prefix_matches_exact_optimum(d, basis):
    sol = ffu.solve(prefix_problem(d, basis), method="smii")
    check_solution(sol)
    assert sol.privacy_cost == pytest.approx(PREFIX_OPT[d], rel=1e-4)
    if d in TABLE2_SMII:
        assert round(sol.privacy_cost, 2) == TABLE2_SMII[d]


@pytest.mark.slow
def test_table2_d64():
    sol = ffu.solve(prefix_problem(64), method="smii")
    check_solution(sol)
    assert round(sol.privacy_cost, 2) == TABLE2_SMII[64]
    assert sol.privacy_cost == pytest.approx(4.457869, rel=1e-4)


RANDOM_CASES = [
    ("ranges", 16, "uniform", 0), ("ranges", 16, "random", 1), ("pm1", 16, "random", 2),
    pytest.param("ranges", 32, "random", 1, marks=pytest.mark.slow),
    pytest.param("pm1", 32, "random", 1, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("kind, d, targets, seed", RANDOM_CASES)
def test_random_workloads_match_sdp(kind, d, targets, seed):
    build = workloads.random_ranges if kind == "ranges" else workloads.random_pm1
    problem = ffu.FitnessProblem.from_workload(build(d, targets=targets, seed=seed))
    ref = ffu.solve(problem, method="sdp")
    sol = ffu.solve(problem, method="smii")
    check_solution(sol)
    assert sol.privacy_cost == pytest.approx(ref.privacy_cost, rel=1e-4)
    assert sol.lower_bound <= ref.privacy_cost * (1 + 1e-6)


def test_tighter_tol_is_honoured():
    sol = ffu.solve(prefix_problem(16), method="smii", tol=1e-6)
    check_solution(sol, tol=1e-6)
    assert sol.privacy_cost == pytest.approx(PREFIX_OPT[16], rel=2e-6)


def test_unique_optimum_covariance_matches_sdp():
    problem = ffu.FitnessProblem.from_workload(workloads.random_pm1(16, targets="random", seed=2))
    ref = ffu.solve(problem, method="sdp")
    sol = ffu.solve(problem, method="smii", tol=1e-5)
    assert rel_frobenius(problem, ref.sigma, sol.sigma) < 1e-3


def diagonal_problem():
    """Identity workload with targets (1, 100, 4): the ≺R-minimal Sigma is diag(1, 100, 4)."""
    return ffu.FitnessProblem(np.eye(3), [1.0, 100.0, 4.0])


REFINE_CASES = [block_problem, lambda: ffu.FitnessProblem.from_workload(
    workloads.random_ranges(8, targets="random", seed=3)), diagonal_problem]


@pytest.mark.parametrize("make", REFINE_CASES, ids=["block", "ranges8", "diagonal"])
def test_refinement_agreement(make):
    # Problem 1 has many optima here; the refined SDP and SM-II's barrier levels must
    # both land on the unique ≺R-minimal one (Theorem 5), level by level.
    problem = make()
    ref = ffu.solve(problem, method="sdp")
    raw = ffu.solve(problem, method="smii", tol=1e-5, refine=False)
    sol = ffu.solve(problem, method="smii", tol=1e-5, refine=True)
    check_solution(sol, tol=1e-5)
    assert sol.privacy_cost == pytest.approx(ref.privacy_cost, rel=1e-4)
    assert sol.privacy_cost <= raw.privacy_cost * (1 + 1e-6)  # the certified gap still holds
    assert rel_frobenius(problem, ref.sigma, raw.sigma) > 0.05  # the soft max alone misses it
    assert rel_frobenius(problem, ref.sigma, sol.sigma) < 1e-3
    levels, ref_levels = sol.info["refine_levels"], ref.info["refine_levels"]
    assert [lv["columns"] for lv in levels] == [lv["columns"] for lv in ref_levels]
    np.testing.assert_allclose([lv["value"] for lv in levels], [lv["value"] for lv in ref_levels], rtol=1e-3)
    assert "refine_failed" not in sol.info


def test_refinement_closed_form():
    sol = ffu.solve(diagonal_problem(), method="smii")  # k = 3: refined by default
    np.testing.assert_allclose(sol.sigma, np.diag([1.0, 100.0, 4.0]), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(sol.profile, [1.0, 0.01, 0.25], rtol=1e-6)
    assert [lv["columns"] for lv in sol.info["refine_levels"]] == [[0], [2], [1]]
    np.testing.assert_allclose([lv["value"] for lv in sol.info["refine_levels"]], [1.0, 0.25, 0.01], rtol=1e-6)


def test_refine_option():
    problem = prefix_problem(4)
    assert "refine_levels" not in ffu.solve(problem, method="smii", refine=False).info
    assert "refine_levels" in ffu.solve(problem, method="smii").info  # "auto": k = 4 <= REFINE_AUTO_MAX_K
    big = ffu.FitnessProblem.from_workload(workloads.prefix(smii.REFINE_AUTO_MAX_K + 1))
    assert "refine_levels" not in ffu.solve(big, method="smii").info
    # A run stopped early is returned as it is, unpolished.
    assert "refine_levels" not in ffu.solve(problem, method="smii", refine=True, maxiter=2).info
    with pytest.raises(ValueError, match="`refine`"):
        ffu.solve(problem, method="smii", refine="yes")


def test_refinement_zero_column_and_fallback(monkeypatch):
    # A cell no query touches (a zero column of B) has profile 0 in every Sigma: it is
    # the last level, with value 0, and needs no barrier solve.
    problem = ffu.FitnessProblem(np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]]), [1.0, 1.0])
    sol = ffu.solve(problem, method="smii")
    assert sol.privacy_cost == pytest.approx(4 / 3, rel=1e-6)
    assert [lv["columns"] for lv in sol.info["refine_levels"]] == [[0, 1], [2]]
    assert sol.info["refine_levels"][-1]["value"] == 0.0
    # A failing level keeps SM-II's certified Sigma, with a warning and the reason.
    raw = ffu.solve(problem, method="smii", refine=False)

    def fail(*args, **kwargs):
        raise SolverError("refinement level: the starting Sigma is not strictly feasible", nit=0)

    monkeypatch.setattr(polish, "refine_smii", fail)
    with pytest.warns(RuntimeWarning, match="returning the unrefined optimum"):
        sol = ffu.solve(problem, method="smii")
    assert "not strictly feasible" in sol.info["refine_failed"]
    np.testing.assert_allclose(sol.sigma, raw.sigma, rtol=1e-12)
    check_solution(sol)
    monkeypatch.undo()
    with pytest.raises(SolverError, match="not strictly feasible"):
        smii.refine_smii(problem, 2.0 * raw.sigma)  # violates the targets
    for kwargs, name in (({"slack": 0.0}, "`slack`"), ({"threshold": 1.0}, "`threshold`")):
        with pytest.raises(ValueError, match=name):
            smii.refine_smii(problem, raw.sigma, **kwargs)
    with pytest.raises(ValueError, match="`sigma`"):
        smii.refine_smii(problem, np.eye(3))


@pytest.mark.parametrize("fixed", [[], [0, 3]])
def test_level_gradient_and_hessp_match_finite_differences(fixed):
    # The refinement level's barrier objective Phi, its whitened gradient and Hessian
    # product, checked in the coordinates of Sigma: <grad, E> and R^T (dgrad/dSigma [D]) R.
    rng = np.random.default_rng(7)
    problem = ffu.FitnessProblem.from_workload(workloads.random_ranges(6, targets="random", seed=4))
    k, d = problem.k, problem.d
    sigma = 0.05 * random_spd(k, rng)
    g = ffu.model.privacy.profile(sigma, problem.B)
    h = np.einsum("ij,ij->i", problem.L @ sigma, problem.L) / problem.c
    sigma /= 1.5 * h.max()
    free = np.ones(d, dtype=bool)
    free[fixed] = False
    caps = np.where(free, np.inf, 2.0 * g * 1.5 * h.max())
    t, scale = 7.0, 1.3 * g.max()

    def point(s):
        return LevelPoint.at(problem.B, problem.L, problem.c, s, free, caps, scale, t)

    def grad_sigma(s):
        p = point(s)
        G = LevelWhitened(p, problem.L, problem.c).grad
        A = linalg.solve_triangular(p.R, G, lower=True, trans="T")
        return linalg.solve_triangular(p.R, A.T, lower=True, trans="T")

    p = point(sigma)
    op = LevelWhitened(p, problem.L, problem.c)
    D = 0.1 * random_symmetric(k, rng) * np.abs(sigma).max()
    Dw = linalg.solve_triangular(p.R, D, lower=True)
    E = linalg.solve_triangular(p.R, Dw.T, lower=True)
    E = 0.5 * (E + E.T)
    eps = 1e-6
    fd = (point(sigma + eps * D).F - point(sigma - eps * D).F) / (2 * eps)
    assert np.vdot(op.grad, E) == pytest.approx(fd, rel=1e-6)
    fd_h = p.R.T @ (grad_sigma(sigma + eps * D) - grad_sigma(sigma - eps * D)) @ p.R / (2 * eps)
    HE = op.hvp(E)
    np.testing.assert_allclose(HE, fd_h, rtol=1e-5, atol=1e-6 * np.abs(fd_h).max())
    assert np.vdot(E, HE) > 0  # the level objective is convex
    # The epigraph max's multipliers sum to 1 and its value bounds the max from above.
    phi, lam, _ = epigraph_max(g / scale, t)
    assert lam.sum() == pytest.approx(1.0, rel=1e-12) and np.all(lam > 0)
    assert g.max() / scale < phi


def test_user_q_initialisation():
    problem = prefix_problem(8)
    Q = np.random.default_rng(0).normal(size=(12, 8))
    sol = ffu.solve(problem, method="smii", Q=Q)
    check_solution(sol)
    assert sol.privacy_cost == pytest.approx(PREFIX_OPT[8], rel=1e-4)
    with pytest.raises(ValueError, match="`Q`"):
        ffu.solve(problem, method="smii", Q=np.ones((8, 8)))
    with pytest.raises(ValueError, match="`Q`"):
        ffu.solve(problem, method="smii", Q=np.eye(5))


def random_spd(k, rng):
    A = rng.normal(size=(k, k))
    return A @ A.T / k + np.eye(k)


def random_symmetric(k, rng):
    A = rng.normal(size=(k, k))
    return A + A.T


@pytest.mark.parametrize("t1, t2", [(1.0, 1.0), (4.0, 2.5)])
def test_gradient_and_hessp_match_finite_differences(t1, t2):
    rng = np.random.default_rng(5)
    problem = ffu.FitnessProblem.from_workload(workloads.random_pm1(6, targets="random", seed=4))
    sigma = random_spd(problem.k, rng)
    D = random_symmetric(problem.k, rng)
    F, G = smii.objective(problem, sigma, t1, t2)
    assert np.allclose(G, G.T)
    h = 1e-6
    fd = (smii.objective(problem, sigma + h * D, t1, t2)[0] - smii.objective(problem, sigma - h * D, t1, t2)[0]) / (2 * h)
    assert np.vdot(G, D) == pytest.approx(fd, rel=1e-6)
    HD = smii.hessp(problem, sigma, D, t1, t2)
    fd_h = (smii.objective(problem, sigma + h * D, t1, t2)[1] - smii.objective(problem, sigma - h * D, t1, t2)[1]) / (2 * h)
    np.testing.assert_allclose(HD, fd_h, rtol=1e-5, atol=1e-6 * np.abs(fd_h).max())
    assert np.vdot(D, HD) > 0  # Problem 4 is convex (Theorem 2)


def test_objective_value_is_the_soft_max_sum():
    problem = prefix_problem(4)
    sigma = random_spd(4, np.random.default_rng(1))
    g = ffu.model.privacy.profile(sigma, problem.B)
    h = np.diag(problem.L @ sigma @ problem.L.T) / problem.c
    t1, t2 = 3.0, 0.5
    expected = np.log(np.exp(t1 * g).sum()) / t1 + np.log(np.exp(t2 * h).sum()) / t2
    assert smii.objective(problem, sigma, t1, t2)[0] == pytest.approx(expected, rel=1e-13)
    # Shifted log-sum-exp: no overflow at a huge t.
    F, G = smii.objective(problem, sigma, 1e6, 1e6)
    assert np.isfinite(F) and np.all(np.isfinite(G))
    assert F == pytest.approx(g.max() + h.max(), rel=1e-5)


def test_callback_history_and_user_stop():
    seen = []

    def cb(state):
        seen.append(state)
        if state.nit == 3:
            raise StopIteration

    problem = prefix_problem(8)
    sol = ffu.solve(problem, method="smii", callback=cb, Q=np.eye(8))  # the paper's start: 3 steps at t1 = 1
    assert sol.status == USER_STOPPED and not sol.success
    assert [s.nit for s in seen] == [1, 2, 3] and sol.nit == 3
    assert len(sol.history) == 3 and sol.history[-1]["alpha"] == pytest.approx(seen[-1].alpha)
    last = seen[-1]
    assert last.sigma.shape == (8, 8) and last.t1 == 1.0 and last.n_cg >= 1
    # state.sigma is the iterate rescaled to meet the targets, and alpha its privacy cost.
    assert ffu.model.privacy.privacy_cost(last.sigma, problem.B) == pytest.approx(last.alpha, rel=1e-10)
    assert sol.privacy_cost == pytest.approx(last.alpha, rel=1e-10)
    assert [h["objective"] for h in sol.history] == sorted((h["objective"] for h in sol.history), reverse=True)


def test_verbose_log(capsys):
    ffu.solve(prefix_problem(4), method="smii", verbose=True)
    out = capsys.readouterr().out
    for word in ("t1", "t2", "objective", "alpha", "max ratio", "cg", "step", "gap", "status optimal"):
        assert word in out
    assert "sub-problem t1 = 1 done" in out
    assert "refinement: 1 levels" in out


def test_maxiter_status():
    sol = ffu.solve(prefix_problem(16), method="smii", maxiter=3)
    assert sol.status == MAX_ITER and not sol.success and sol.nit == 3
    assert sol.gap > 1e-4  # still certified, just not to tolerance


def test_line_search_failure_raises(monkeypatch):
    monkeypatch.setattr(driver, "line_search", lambda *a, **k: (1e-18, None))
    with pytest.raises(SolverError, match="line search made no progress at iteration 0") as info:
        ffu.solve(prefix_problem(4), method="smii")
    assert info.value.nit == 0 and info.value.residual > 0


@pytest.mark.parametrize("method", ["smii", "gd"])
def test_bad_input(method):
    with pytest.raises(ValueError, match="`W` contains NaN"):
        ffu.FitnessProblem([[1.0, np.nan]], [1.0])
    with pytest.raises(ValueError, match="`c` contains NaN"):
        ffu.FitnessProblem([[1.0, 1.0]], [np.inf])
    problem = prefix_problem(3)
    for opts, name in (({"mu": 1.0}, "`mu`"), ({"tol": 0}, "`tol`"), ({"beta": 1.5}, "`beta`"),
                       ({"maxiter": 0}, "`maxiter`"), ({"t1": np.nan}, "`t1`")):
        with pytest.raises(ValueError, match=name):
            ffu.solve(problem, method=method, **opts)
    with pytest.raises(TypeError):
        ffu.solve(problem, method=method, not_an_option=1)


@pytest.mark.parametrize("d, factor, ntrel", [
    (2, 30, 0.0), (4, 100, 1e-3), pytest.param(8, 100, 1e-3, marks=pytest.mark.slow),
    pytest.param(16, 100, 1e-3, marks=pytest.mark.slow)])
def test_table3_gradient_descent_is_much_slower(d, factor, ntrel):
    # Table 3: GD needs at least 100x SM-II's time to reach SM-II's alpha (to 1e-4), or
    # gives up. Both run the same schedule. At d = 2 (three unknowns) GD does reach it:
    # with the paper's NTTOL-only sub-problem rule (ntrel = 0) we measure about 60x, with
    # the default rule only a few times, so d = 2 is checked at 30x with ntrel = 0.
    # SM-II runs without the refinement polish, an extra stage GD does not have.
    problem = prefix_problem(d)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        sm = ffu.solve(problem, method="smii", ntrel=ntrel, refine=False)
        times.append(time.perf_counter() - t0)
    check_solution(sm)
    reached = []

    def cb(state):
        if state.alpha <= sm.privacy_cost * (1 + 1e-4):
            reached.append(time.perf_counter() - t0)
            raise StopIteration

    budget = factor * min(times)
    t0 = time.perf_counter()
    gd = ffu.solve(problem, method="gd", callback=cb, max_time=budget, ntrel=ntrel)
    assert not reached or reached[0] >= budget
    assert gd.privacy_cost >= sm.lower_bound


def test_gd_reaches_the_optimum_on_a_tiny_problem():
    W = np.array([[1.0, 1.0], [1.0, 0.0]])
    sol = ffu.solve(ffu.FitnessProblem(W, 1.0, basis=W), method="gd", tol=1e-3, max_time=60)
    assert sol.status == OPTIMAL and sol.gap <= 1e-3
    assert sol.privacy_cost == pytest.approx(4 / 3, rel=1e-3)


@pytest.mark.parametrize("t", [1.0, 3.0])
def test_preconditioner_is_spd_and_keeps_the_newton_direction(t):
    # The rotated frame and the diagonal-plus-rank-two preconditioner: a symmetric
    # positive definite map; preconditioned CG run to convergence solves the same
    # Newton system (in the rotated frame) as plain CG.
    rng = np.random.default_rng(11)
    problem = ffu.FitnessProblem.from_workload(workloads.random_ranges(10, targets="random", seed=3))
    sigma = random_spd(problem.k, rng)
    p = evaluate(problem.B, problem.L, problem.c, sigma, t, t)
    op = Whitened(p, problem.L, problem.c, rotate=True)
    Q = op.Q
    np.testing.assert_allclose(op.RQ, p.R @ Q)
    pre = op.preconditioner()
    X, Y = random_symmetric(problem.k, rng), random_symmetric(problem.k, rng)
    assert np.vdot(X, pre(Y)) == pytest.approx(np.vdot(pre(X), Y), rel=1e-9)
    assert np.vdot(X, pre(X)) > 0 and np.vdot(Y, pre(Y)) > 0
    n = problem.k * (problem.k + 1) // 2
    E_pre, _ = conjugate_gradient(op, 4 * n, 1e-20 * np.vdot(op.grad, op.grad), 1e12, precond=pre)
    res = op.hvp(E_pre) + op.grad
    assert np.linalg.norm(res) <= 1e-8 * np.linalg.norm(op.grad)
    # the directions themselves agree
    plain = Whitened(p, problem.L, problem.c)
    E_plain, _ = conjugate_gradient(plain, 4 * n, 1e-24, 1e12)
    np.testing.assert_allclose(Q @ E_pre @ Q.T, E_plain, rtol=0, atol=1e-7 * np.abs(E_plain).max())
    # and it is the Newton direction of Problem 4 in the coordinates of Sigma
    D = _sym(p.R @ Q @ E_pre @ Q.T @ p.R.T)
    _, G = smii.objective(problem, sigma, t, t)
    np.testing.assert_allclose(smii.hessp(problem, sigma, D, t, t), -G, rtol=0, atol=1e-6 * np.abs(G).max())


def _sym(X):
    return 0.5 * (X + X.T)


@pytest.mark.parametrize("options", [dict(precondition=True), dict(precondition=False, float32=True),
                                     dict(precondition=True, float32=True)])
def test_preconditioned_and_single_precision_solves_agree(options):
    # Every variant of the step solver reaches the exact optimum of prefix(32) (SDP value).
    problem = prefix_problem(32)
    sol = ffu.solve(problem, method="smii", refine=False, **options)
    check_solution(sol)
    assert sol.privacy_cost == pytest.approx(PREFIX_OPT[32], rel=1e-4)


def test_step_solver_options_are_validated():
    for bad in (dict(precondition="yes"), dict(float32=1)):
        with pytest.raises(ValueError, match="precondition|float32"):
            ffu.solve(prefix_problem(4), method="smii", **bad)


@pytest.mark.parametrize("kind", ["random_ranges", "random_pm1"])
def test_preconditioned_cg_needs_fewer_hessian_products(kind):
    # Random targets at d = 128 ("auto" preconditions): the preconditioned step solver certifies
    # 1e-4 with fewer Hessian products than plain CG at the paper's five a step, which takes more
    # (+-1) or stalls short of tol (random ranges: t_max at a gap of 1.4e-3). Without KKT steps
    # (kkt=False), which finish both runs from a gap of 0.1 in a few Newton steps, before CG matters.
    problem = ffu.FitnessProblem.from_workload(getattr(workloads, kind)(128, targets="random", seed=2))
    assert problem.k > smii.PRECONDITION_MIN_K
    pre = ffu.solve(problem, method="smii", refine=False, kkt=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # plain CG's t_max, where it stalls
        plain = ffu.solve(problem, method="smii", refine=False, precondition=False, kkt=False)
    check_solution(pre)
    assert pre.n_hvp < plain.n_hvp
    if plain.status == OPTIMAL:
        assert pre.privacy_cost == pytest.approx(plain.privacy_cost, rel=2e-4)


@pytest.mark.parametrize("method", ["smii", "gd"])
def test_start_at_the_optimum(method):
    # W = I with equal targets: Sigma0 = 0.99 c I is already optimal up to scale and the
    # gradient of the normalised objective vanishes; CG must not divide by a zero direction.
    problem = ffu.FitnessProblem.from_workload(workloads.marginals_b(2))
    sol = ffu.solve(problem, method=method)
    assert sol.status == OPTIMAL
    assert sol.privacy_cost == pytest.approx(1.0, rel=1e-12)
    assert sol.gap <= 1e-9


def test_shifted_soft_maxes_stop_sharpening():
    # With shifts (default t_shift = 30) the certified optimum of prefix(32) is reached at
    # a far smaller t1 than by the paper's schedule, which must sharpen to ~log(d)/tol.
    problem = prefix_problem(32)
    shifted = ffu.solve(problem, method="smii", refine=False)
    paper = ffu.solve(problem, method="smii", refine=False, t_shift=None)
    for sol in (shifted, paper):
        check_solution(sol)
        assert sol.privacy_cost == pytest.approx(PREFIX_OPT[32], rel=1e-4)
    assert shifted.info["t1"] <= 100 < paper.info["t1"]


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), True, "30"])
def test_t_shift_is_validated(bad):
    with pytest.raises(ValueError, match="t_shift"):
        ffu.solve(prefix_problem(4), method="smii", t_shift=bad)


def test_default_start_is_the_cheapest_candidate():
    # Random ranges on a row basis: the identity start costs far more than the chosen one.
    problem = ffu.FitnessProblem.from_workload(workloads.random_ranges(64, targets="random", seed=0))
    start = initial_sigma(problem, None)
    eye = initial_sigma(problem, np.eye(problem.k))
    cost = [ffu.model.privacy.privacy_cost(S, problem.B) * variance_ratios(problem.L, S, problem.c).max()
            for S in (start, eye)]
    assert cost[0] < cost[1] / 5


def test_regressed_multiplier_iterates_resume_from_the_best():
    # With restarts=1 every shifted sub-problem that does not improve on the best gap
    # sends the solver back to the best iterate with a sharper t: the run must still
    # certify (a restart at the same t would repeat itself forever) and agree with the
    # default run.
    problem = ffu.FitnessProblem.from_workload(workloads.random_ranges(64, targets="random", seed=0))
    default = ffu.solve(problem, method="smii", refine=False)
    strict = ffu.solve(problem, method="smii", refine=False, restarts=1.0)
    for sol in (default, strict):
        check_solution(sol)
    assert strict.info["restarts"] >= 1
    assert strict.privacy_cost == pytest.approx(default.privacy_cost, rel=2e-4)


def test_restarts_resume_from_the_least_cost_iterate_of_any_step(monkeypatch):
    # A restart (restarts=1: any end worse than the best) goes back to the accepted iterate of least normalised cost seen at any
    # Newton step (incumbents.Lowest), which may lie inside a sub-problem rather than at its end;
    # the point rebuilt from its sigma costs exactly that. Which restarts resume inside a
    # sub-problem is the trajectory's draw: random ranges d = 32 seeds 1, 2 and 4 restart
    # (1, 1 and 3 times with SETTLE_GAP; seed 2 inside), so at least one of them must.
    restart, end = driver.Run._restart_point, driver.Run._end_subproblem
    inside = 0
    for seed in (1, 2, 4):
        problem = ffu.FitnessProblem.from_workload(workloads.random_ranges(32, targets="random", seed=seed))
        seen, resumed, ends = [], [], []

        def spy_restart(self, gap):
            q = restart(self, gap)
            alpha = ffu.model.privacy.privacy_cost(q.sigma, problem.B) * variance_ratios(problem.L, q.sigma, problem.c).max()
            resumed.append((len(seen), alpha))
            return q

        def spy_end(self):
            ends.append(len(seen))
            end(self)

        monkeypatch.setattr(driver.Run, "_restart_point", spy_restart)
        monkeypatch.setattr(driver.Run, "_end_subproblem", spy_end)
        check_solution(ffu.solve(problem, method="smii", refine=False, restarts=1.0, callback=seen.append))
        assert resumed
        for n, alpha in resumed:
            assert alpha == pytest.approx(min(s.alpha for s in seen[:n]), rel=1e-9)
        lowest_at = [int(np.argmin([s.alpha for s in seen[:n]])) + 1 for n, _ in resumed]
        inside += sum(i not in ends for i in lowest_at)  # not a sub-problem's last iterate
    assert inside >= 1


def test_restart_point_is_the_cheaper_of_the_best_end_and_the_least_cost_iterate():
    problem = ffu.FitnessProblem.from_workload(workloads.random_ranges(16, targets="random", seed=0))
    opts = smii.options.smii_options(refine=False).resolved(problem.k)
    run = driver.Run(problem, opts, None, driver.Method("smii", "SM-II", None, (), ""), None)
    exact = ffu.solve(problem, method="smii", tol=1e-6, refine=False)
    cheap = evaluate(run.B, run.L, run.c_int, exact.sigma, run.schedule.t1, run.schedule.t2)
    dear = evaluate(run.B, run.L, run.c_int, exact.sigma + 0.1 * np.eye(problem.k), run.schedule.t1, run.schedule.t2)
    run.bounds.certify(cheap, run.kappa, run.c_int)
    assert cheap.cost(run.kappa) < dear.cost(run.kappa)
    shift = np.full(problem.d, -1.0)
    end = smii.mixing.end_of(cheap, run.kappa, np.asarray)
    low = incumbents.Lowest(cheap.cost(run.kappa), 7, end, run.c_int, 30.0, 30.0, shift, None)
    run.incumbents.best, run.incumbents.lowest = incumbents.Best(1.0, dear, run.kappa), low
    q = run._restart_point(2.0)
    assert q is not dear and np.array_equal(q.sigma, exact.sigma)
    assert (q.t1, q.t2, q.s2) == (30.0, 30.0, None) and q.s1 is shift
    assert q.cost(run.kappa) == pytest.approx(cheap.cost(run.kappa), rel=1e-12)
    run.incumbents.best = incumbents.Best(1.0, cheap, run.kappa)  # the best end is no dearer: it is kept
    assert run._restart_point(2.0) is cheap


def test_large_basis_certificate_is_the_bound_of_the_returned_multipliers():
    # Above options.CHEAP_CERTIFY_K (here at k = 16: cheap_certificate=True) the stopping bound is
    # that of the soft-max weights alone (no dual ascent): it must still certify tol, be exactly the
    # bound of the returned (lam, mu), and lie below the exact optimum.
    problem = prefix_problem(16)
    sol = ffu.solve(problem, method="smii", refine=False, cheap_certificate=True)
    check_solution(sol)
    assert sol.lower_bound == pytest.approx(ffu.model.certificate.lower_bound(problem, sol.lam, sol.mu), rel=1e-12)
    assert sol.lower_bound <= PREFIX_OPT[16] * (1 + 1e-6)
    assert sol.privacy_cost == pytest.approx(PREFIX_OPT[16], rel=1e-4)


# --- the package's pieces: callback contract, log gap, pure hvp, options, warnings ----------------------------


def test_callback_gets_intermediate_results_with_the_certified_gap():
    # Before the first certificate lower_bound and gap are NaN; after it every state's
    # gap is its normalised cost against the best bound so far, which never decreases.
    seen = []
    sol = ffu.solve(prefix_problem(8), method="smii", callback=seen.append, refine=False)
    assert all(isinstance(s, ffu.model.status.IntermediateResult) for s in seen) and smii.SMIIState is ffu.model.status.IntermediateResult
    assert {s.method for s in seen} == {"smii"} and [s.nit for s in seen] == list(range(1, sol.nit + 1))
    certified = [s for s in seen if np.isfinite(s.lower_bound)]
    assert np.isnan(seen[0].gap) and np.isnan(seen[0].lower_bound) and len(certified) >= 2
    assert all(np.isnan(s.gap) for s in seen[:len(seen) - len(certified)])  # NaN only before the first
    for s in certified:
        assert s.privacy_cost == s.alpha and s.gap == pytest.approx(s.alpha / s.lower_bound - 1.0, rel=1e-12)
        assert s.lower_bound <= PREFIX_OPT[8] * (1 + 1e-9)
    bounds_seen = [s.lower_bound for s in certified]
    assert bounds_seen == sorted(bounds_seen) and bounds_seen[-1] == pytest.approx(sol.lower_bound, rel=1e-12)
    assert certified[-1].gap <= 1e-4


def test_verbose_log_shows_the_gap_once_certified(capsys):
    ffu.solve(prefix_problem(8), method="smii", verbose=True, refine=False)
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line[:6].strip().isdigit()]
    gaps = [float(r[-1]) for r in rows]
    first = next(i for i, g in enumerate(gaps) if not np.isnan(g))
    assert 0 < first < len(gaps) and all(np.isnan(g) for g in gaps[:first])
    assert not any(np.isnan(g) for g in gaps[first:]) and 0 <= gaps[-1] <= 1e-4


def test_whitened_hvp_is_pure_and_float32_close():
    rng = np.random.default_rng(3)
    problem = ffu.FitnessProblem.from_workload(workloads.random_ranges(10, targets="random", seed=1))
    p = evaluate(problem.B, problem.L, problem.c, random_spd(problem.k, rng), 2.0, 3.0)
    E = random_symmetric(problem.k, rng)
    op = Whitened(p, problem.L, problem.c, rotate=True)
    def snapshot():  # every attribute, arrays copied (a tuple of arrays as a list of copies)
        return {k: [np.copy(x) for x in v] if isinstance(v, tuple) else np.copy(v) if isinstance(v, np.ndarray) else v
                for k, v in vars(op).items()}

    before = snapshot()
    first, second = op.hvp(E), op.hvp(E)
    np.testing.assert_array_equal(first, second)
    after = snapshot()
    assert after.keys() == before.keys()
    for k, v in before.items():
        if isinstance(v, list):
            for x, y in zip(v, after[k]):
                np.testing.assert_array_equal(x, y)
        elif isinstance(v, np.ndarray):
            np.testing.assert_array_equal(v, after[k])
        else:
            assert after[k] == v, k  # counters included: hvp changes nothing
    small = Whitened(p, problem.L, problem.c, rotate=True, float32=True)
    assert small.hvp(E).dtype == small.cg_grad.dtype == np.float64  # below CG_SINGLE_MIN_K: CG in float64
    op32 = Whitened(p, problem.L, problem.c, rotate=True, float32=True, cg_single_min_k=0)
    low = op32.hvp(E)
    assert low.dtype == op32.cg_grad.dtype == np.float32  # CG runs in the products' precision
    assert op32.grad.dtype == np.float64  # the gradient (delta, the certificate) does not
    np.testing.assert_array_equal(low, small.hvp(E))  # the same float32 product, cast or not
    np.testing.assert_allclose(low, first, rtol=0, atol=1e-5 * np.abs(first).max())


def test_options_are_one_frozen_validated_value():
    import dataclasses
    from ffu_cvx.solvers.smii.options import gd_options, smii_options
    opts = smii_options(tol=1e-5, t_shift=None)
    assert opts.t_shift == np.inf and opts.tol == 1e-5
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.tol = 1.0
    shifted = smii_options(tol=1e-5)
    small, big = shifted.resolved(smii.PRECONDITION_MIN_K), shifted.resolved(smii.PRECONDITION_MIN_K + 1)
    assert (small.precondition, big.precondition) == (False, True)
    assert opts.resolved(1000).precondition is False  # the paper's schedule keeps plain CG
    assert opts.resolved(smii.REFINE_AUTO_MAX_K).refine is True
    assert opts.resolved(smii.REFINE_AUTO_MAX_K + 1).refine is False
    with pytest.raises(TypeError, match="not_an_option"):
        smii_options(not_an_option=1)
    with pytest.raises(TypeError, match="maxcg"):
        gd_options(maxcg=3)  # gradient descent has no CG
    gd = gd_options()
    assert (gd.maxiter, gd.max_time, gd.t_shift, gd.refine) == (100_000, 60.0, np.inf, False)
    for bad, name in ((dict(maxcg_cap=0), "`maxcg_cap`"), (dict(radius=-1.0), "`radius`"),
                      (dict(ntrel=-1e-3), "`ntrel`"), (dict(verbose="yes"), "`verbose`")):
        with pytest.raises(ValueError, match=name):
            smii_options(**bad)


def test_gd_short_of_tol_warns_and_advises_smii():
    problem = prefix_problem(8)
    with pytest.warns(RuntimeWarning, match=r'reached maxiter = 40 at certified gap .* > tol = 0.0001; .*method="smii"'):
        sol = ffu.solve(problem, method="gd", maxiter=40)
    assert sol.status == MAX_ITER and sol.gap > 1e-4
    import warnings

    def stop(state):
        raise StopIteration

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a user stop or a certified run does not warn
        assert ffu.solve(problem, method="gd", maxiter=40, callback=stop).status == USER_STOPPED
        W = np.array([[1.0, 1.0], [1.0, 0.0]])
        assert ffu.solve(ffu.FitnessProblem(W, 1.0, basis=W), method="gd", tol=1e-3).status == OPTIMAL


def test_inaccurate_smii_warns():
    with pytest.warns(RuntimeWarning, match="t_max"):
        sol = ffu.solve(prefix_problem(8), method="smii", t_max=1.0, tol=1e-9)
    assert sol.status == ffu.model.status.OPTIMAL_INACCURATE and sol.success and sol.gap > 1e-9


def test_polish_shares_the_main_loop_line_search(monkeypatch):
    # One line search serves SM-II's steps and the polish's barrier levels.
    from ffu_cvx.solvers.smii import newton
    assert driver.line_search is newton.line_search is polish.line_search
    calls = []

    def counting(*args, **kwargs):
        calls.append(1)
        return newton.line_search(*args, **kwargs)

    monkeypatch.setattr(polish, "line_search", counting)
    raw = ffu.solve(diagonal_problem(), method="smii", refine=False)
    sigma, levels, n_newton, _ = smii.refine_smii(diagonal_problem(), raw.sigma)
    assert n_newton >= 1 and len(calls) >= n_newton
    np.testing.assert_allclose(sigma, np.diag([1.0, 100.0, 4.0]), rtol=1e-5, atol=1e-5)


def test_normalise_reuses_a_points_profile_exactly():
    # The driver passes the point's profile g to normalise, saving a factorisation: same result, bit for bit.
    from ffu_cvx.solvers.smii.model import normalise
    rng = np.random.default_rng(5)
    problem = ffu.FitnessProblem.from_workload(workloads.random_ranges(12, targets="random", seed=2))
    p = evaluate(problem.B, problem.L, problem.c, random_spd(problem.k, rng), 1.0, 1.0)
    plain, reused = normalise(p.sigma, problem.B, problem.L, problem.c), \
        normalise(p.sigma, problem.B, problem.L, problem.c, g=p.g)
    for x, y in zip(plain, reused):
        np.testing.assert_array_equal(x, y)
    sigma, c_int, a = reused
    q = evaluate(problem.B, problem.L, c_int, sigma, 1.0, 1.0)
    assert q.g.max() == pytest.approx(1.0, rel=1e-12) and q.h.max() == pytest.approx(1.0, rel=1e-12)
    assert q.cost(a) == pytest.approx(p.cost(1.0), rel=1e-12)


def test_renormalise_is_normalise_without_a_factorisation():
    # The driver rescales a point at each sub-problem start: the same point, to rounding,
    # as normalising Sigma and evaluating it afresh, with the cost unchanged.
    from ffu_cvx.solvers.smii.model import normalise, renormalise
    rng = np.random.default_rng(5)
    problem = ffu.FitnessProblem.from_workload(workloads.random_ranges(12, targets="random", seed=2))
    p = evaluate(problem.B, problem.L, problem.c, random_spd(problem.k, rng), 1.0, 1.0)
    sigma, c_int, a = normalise(p.sigma, problem.B, problem.L, problem.c)
    fresh = evaluate(problem.B, problem.L, c_int, sigma, 3.0, 5.0, s1=-p.g, s2=-p.h)
    q, c_q, a_q = renormalise(p, problem.L, problem.c, 3.0, 5.0, s1=-p.g, s2=-p.h)
    assert a_q == pytest.approx(a, rel=1e-13)
    np.testing.assert_allclose(c_q, c_int, rtol=1e-13)
    for name in ("sigma", "R", "Y", "g", "h", "w", "u"):
        np.testing.assert_allclose(getattr(q, name), getattr(fresh, name), rtol=1e-11, atol=1e-13, err_msg=name)
    assert q.F == pytest.approx(fresh.F, rel=1e-12) and (q.t1, q.t2) == (3.0, 5.0)
    assert q.g.max() == 1.0 and q.h.max() == 1.0
    assert q.cost(a_q) == pytest.approx(p.cost(1.0), rel=1e-12)


def test_float32_auto_is_single_precision_from_k_256_only():
    from ffu_cvx.solvers.smii.options import FLOAT32_MIN_K, gd_options, smii_options
    assert FLOAT32_MIN_K == 256
    assert smii_options().float32 == "auto"
    assert smii_options().resolved(FLOAT32_MIN_K).float32 is True
    assert smii_options().resolved(FLOAT32_MIN_K - 1).float32 is False
    assert smii_options(float32=False).resolved(4096).float32 is False
    assert smii_options(float32=True).resolved(8).float32 is True
    assert gd_options().resolved(4096).float32 is False
    with pytest.raises(ValueError, match="float32"):
        smii_options(float32="single")


def test_damped_shift_is_capped_per_update_and_floored():
    x = np.array([1.0, 0.99, 0.5, 0.0])
    t = 30.0
    first = multipliers.damped_shift(x, t)
    # The first update: 0.7 of the log weights, each at most SHIFT_CAP below the largest.
    logw = t * x - np.log(np.sum(np.exp(t * x)))
    want = multipliers.SHIFT_DAMP * logw
    np.testing.assert_allclose(first[:2] - first.max(), want[:2] - want.max(), rtol=1e-12)
    np.testing.assert_allclose(first[2:] - first.max(), -multipliers.SHIFT_CAP, rtol=1e-12)
    # Repeated updates: the slack entries fall by SHIFT_CAP each time until SHIFT_FLOOR.
    s = first
    for k in range(2, 12):
        s = multipliers.damped_shift(x, t, s)
        expect = -min(k * multipliers.SHIFT_CAP, multipliers.SHIFT_FLOOR)
        np.testing.assert_allclose(s[2:] - s.max(), expect, rtol=1e-12)
    assert np.all(s - s.max() >= -multipliers.SHIFT_FLOOR - 1e-12)


def test_damped_shift_raises_small_multipliers_faster():
    # Entries 2 and 3 sit above the soft max's level (log w > shift) and rise; 0 and 1 fall.
    t = 30.0
    x = np.array([0.0, 0.1, 0.25, 0.3])
    shift = np.array([0.0, -0.5, -2.0, -9.0])
    y = t * x + shift
    step = y - np.log(np.sum(np.exp(y))) - shift
    assert np.all(step[:2] < 0) and np.all(step[2:] > 0)
    factor = np.minimum(np.exp(-multipliers.RISE_RATE * shift), multipliers.RISE_MAX)
    assert 1.0 < factor[2] < multipliers.RISE_MAX == factor[3]
    new = shift + multipliers.SHIFT_DAMP * step * np.where(step > 0, factor, 1.0)
    want = np.maximum(np.maximum(new - new.max(), shift - multipliers.SHIFT_CAP), -multipliers.SHIFT_FLOOR)
    moved = multipliers.damped_shift(x, t, shift)
    np.testing.assert_allclose(moved - moved.max(), want, rtol=0, atol=1e-12)
    # Without the faster rise the smallest would stay more than 5 below the largest.
    plain = shift + multipliers.SHIFT_DAMP * step
    assert (plain - plain.max())[3] < -5.0 < (moved - moved.max())[3]
