"""SM-II's KKT steps (ffu_cvx.solvers.smii.kkt): the exponential sum, the QP's matrix, the step, the driver's use."""

import math

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx import workloads
from ffu_cvx.model import certificate
from ffu_cvx.solvers.smii import kkt
from ffu_cvx.model.result import OPTIMAL


def decades(d, seed=0):
    return ffu.FitnessProblem.from_workload(workloads.prefix(d, targets="decades", seed=seed))


def tree(d, seed=0):
    return ffu.FitnessProblem.from_workload(workloads.tree(d, 4, targets="random", seed=seed))


@pytest.mark.parametrize("lo, hi, accuracy", [(1e-8, 2.0, 1e-5), (1e-3, 5.0, 1e-5), (0.5, 0.5, 1e-8),
                                              (1e-9, 1e3, 1e-9)])
def test_expsum_approximates_the_reciprocal(lo, hi, accuracy):
    nodes, weights = kkt.expsum(lo, hi, accuracy)
    x = np.geomspace(lo, hi, 2000)
    err = np.abs(np.exp(-np.outer(x, nodes)) @ weights * x - 1.0)
    assert err.max() <= 3 * accuracy


@pytest.mark.parametrize("case", ["plain", "singular", "scales", "spread"])
def test_gram_matches_the_direct_sum(case):
    # P_ab = (z_a o z_b)^T K (z_a o z_b), K_pq = 1 / (m_p + m_q + rho), also where M is singular
    # (m = 0 on part of the frame: there K is 1 / rho, which the exponential sum must carry), where
    # the columns' norms span 24 decades (float32 products of the raw columns would under- and
    # overflow) and where m spans 12 decades and Z has entries near 0 (float32 subnormals).
    rng = np.random.default_rng(3)
    k, n = 40, 9
    Z = rng.standard_normal((k, n))
    m = rng.uniform(0.01, 2.0, k)
    if case == "singular":
        m[:5] = 0.0
    if case == "scales":
        Z *= np.geomspace(1e-12, 1e12, n)
    if case == "spread":
        m = np.geomspace(1e-12, 1.0, k)
        Z[::3] *= 1e-20
    rho = 1e-6 * m.max()
    K = 1.0 / (m[:, None] + m[None, :] + rho)

    def pairs(f):
        return np.array([[f(Z[:, a] * Z[:, b]) @ K @ f(Z[:, a] * Z[:, b]) for b in range(n)] for a in range(n)])

    direct = pairs(lambda v: v)
    P = kkt._gram(Z, m, rho)
    # Each K_pq is within the sum's relative accuracy, so each entry within that of sum |.| K_pq.
    assert (np.abs(P - direct) <= 3 * kkt.EXPSUM_ACCURACY * pairs(np.abs)).all()
    np.testing.assert_array_equal(P, P.T)


@pytest.mark.parametrize("lo, hi", [(1e-8, 2.0), (1e-3, 3.0), (2.0, 2.0)])
def test_merged_terms_keep_the_sum(lo, hi):
    # The terms that weigh every eigenvector (s <= full) become a few Gauss nodes inside their
    # range with positive weights (each term of P stays semidefinite), the sum within accuracy.
    nodes, weights = kkt.expsum(lo, hi)
    full = 2 * kkt.GRAM_CUT / hi
    merged, mw = kkt._merge(nodes, weights, lo, hi, full)
    few = nodes <= full
    n_full = int(few.sum())
    assert np.array_equal(merged[len(merged) - (len(nodes) - n_full):], nodes[~few])
    assert len(merged) < len(nodes) if n_full > 8 else len(merged) <= len(nodes)
    assert (mw > 0).all() and (merged[:len(merged) - (len(nodes) - n_full)] <= full).all()
    x = np.geomspace(lo, hi, 3000)
    err = np.abs(np.exp(-np.outer(x, merged)) @ mw * x - 1.0)
    assert err.max() <= 3 * kkt.EXPSUM_ACCURACY


def test_each_kkt_step_starts_from_a_tenth_of_the_last_steps_rho(monkeypatch):
    # Growing rho costs the QP's matrix and the QP again: newton hands each step RHO_CARRY times the
    # relative rho the last one ended with, and a step never takes less than it is handed. (On this
    # seed the first step's trust rule grows rho from RHO_SINGULAR to 1e-4.)
    problem = decades(96, seed=1)
    start = ffu.solve(problem, method="smii", tol=1e-2, refine=False, start="cheapest")
    handed, ended, step = [], [], kkt.kkt_step

    def spy(*args):
        handed.append(args[-1])
        found = step(*args)
        ended.append(found.rho)
        return found

    monkeypatch.setattr(kkt, "kkt_step", spy)
    kkt.newton(problem.B, problem.L, problem.c, start.sigma, start.lam,
               lambda lam, mu, alpha: certificate.lower_bound(problem, lam, mu / problem.c), tol=1e-9)
    assert len(handed) >= 2 and handed[0] == 0.0 and max(ended) > kkt.RHO_SINGULAR  # some step grew rho
    assert handed[1:] == [kkt.RHO_CARRY * r for r in ended[:-1]]
    assert all(r >= max(h, kkt.RHO) * (1 - 1e-12) for h, r in zip(handed, ended))  # relative: rounding
    # Handed more than a step would take by itself (RHO_SINGULAR, or what the trust rule grows it to),
    # a step takes at least that.
    for rho in (1e-3, 1e-2):
        found = kkt.kkt_step(problem.B, problem.L, problem.c, start.sigma, start.lam, None, rho)
        assert found is not None and rho * (1 - 1e-12) <= found.rho


def test_kkt_steps_may_begin_at_start_on_every_basis_from_min_k_to_max_k():
    # Past WORTH_K too (kkt.pays decides there, and a run gone astray finishes from its best end
    # under START); outside MIN_K..MAX_K never.
    assert [kkt.start(k) for k in (kkt.MIN_K - 1, kkt.MIN_K, kkt.WORTH_K, kkt.WORTH_K + 1, kkt.MAX_K, kkt.MAX_K + 1)] \
        == [0.0, kkt.START, kkt.START, kkt.START, kkt.START, 0.0]


@pytest.mark.parametrize("build, d", [(decades, 96), (tree, 64)])
def test_newton_converges_fast_and_certifies(build, d):
    # From SM-II's iterate at a gap of about 1e-2 (the classic start), a few KKT steps reach about 1e-7
    # (the rounding of the QP's float32 matrix, kkt._gram, floors it near 1.1e-7), and each step's
    # multipliers are a dual certificate: alpha / bound - 1 is a certified gap. The float32 rounding
    # differs between CPUs' kernels: near the floor one more step may be needed (7 on an AMD EPYC).
    problem = build(d)
    start = ffu.solve(problem, method="smii", tol=1e-2, refine=False, start="cheapest")
    bounds = []

    def bound(lam, mu, alpha):
        bounds.append(certificate.lower_bound(problem, lam, mu / problem.c))
        return bounds[-1]

    step, n = kkt.newton(problem.B, problem.L, problem.c, start.sigma, start.lam, bound, tol=1e-7)
    assert step is not None and n <= 7
    gap = step.alpha / max(bounds) - 1.0
    assert 0 <= gap <= 2e-7
    ref = ffu.solve(problem, method="smii", tol=1e-7, refine=False)
    assert step.alpha == pytest.approx(ref.privacy_cost * ref.max_ratio, rel=2e-7)
    assert kkt.cost(problem.B, problem.L, problem.c, step.sigma) == pytest.approx(step.alpha, rel=1e-12)
    assert step.lam.sum() == pytest.approx(1.0) and (step.lam >= 0).all() and (step.mu >= 0).all()


def test_kkt_step_never_raises_the_cost():
    problem = decades(64, seed=2)
    start = ffu.solve(problem, method="smii", tol=3e-2, refine=False)
    sigma, lam = start.sigma, start.lam
    alpha = kkt.cost(problem.B, problem.L, problem.c, sigma)
    for _ in range(4):
        step = kkt.kkt_step(problem.B, problem.L, problem.c, sigma, lam)
        if step is None:
            break
        assert step.alpha < alpha
        sigma, lam, alpha = step.sigma, step.lam, step.alpha


def test_a_failed_qp_gives_no_step(monkeypatch):
    problem = decades(64)
    start = ffu.solve(problem, method="smii", tol=1e-2, refine=False)
    monkeypatch.setattr(kkt, "_qp", lambda *args: None)
    assert kkt.kkt_step(problem.B, problem.L, problem.c, start.sigma, start.lam) is None
    # SM-II then goes on with its multiplier phase and still certifies.
    sol = ffu.solve(problem, method="smii", refine=False)
    assert sol.status == OPTIMAL and sol.gap <= 1e-4 and sol.info["kkt_steps"] >= 1


def test_smii_finishes_by_kkt_steps_and_agrees_without_them():
    problem = decades(128, seed=1)
    seen = []
    with_kkt = ffu.solve(problem, method="smii", refine=False, callback=seen.append)
    assert with_kkt.status == OPTIMAL and with_kkt.gap <= 1e-4 and with_kkt.info["kkt_steps"] >= 1
    # The KKT iterate is reported as an iteration, so a callback sees the cost the run returns.
    assert min(s.alpha for s in seen) == pytest.approx(with_kkt.privacy_cost * with_kkt.max_ratio, rel=1e-9)
    assert len(seen) == with_kkt.nit
    without = ffu.solve(problem, method="smii", refine=False, kkt=False)
    assert without.info["kkt_steps"] == 0 and without.nit > with_kkt.nit
    assert with_kkt.privacy_cost * with_kkt.max_ratio == pytest.approx(without.privacy_cost * without.max_ratio,
                                                                       rel=2e-4)
    assert max(with_kkt.max_ratio, without.max_ratio) <= 1 + 1e-9


def test_kkt_steps_start_where_the_multiplier_phase_would_cost_more():
    # Up to WORTH_K always; past it, at this end's rate the multiplier phase needs
    # log(gap / tol) / log(before / gap) more ends of `steps` Newton steps each, and KKT steps
    # are taken when that is over WORTH (order / k)^2 steps (order: the QP's, k: the basis').
    big = 2 * kkt.WORTH_K
    at = kkt.WORTH * 4  # a QP of order 2 k
    assert kkt.pays(1e-2, 1e-1, 1e-3, 5, kkt.WORTH_K, 3 * kkt.WORTH_K) and kkt.pays(1e-2, math.inf, 1e-4, 50, 512, 9)
    assert kkt.pays(1e-2, 2e-2, 1e-4, 2, big, 2 * big) == (2 * math.log(100) / math.log(2) > at)
    assert kkt.pays(1e-2, 2e-2, 1e-4, 3, big, 2 * big) and not kkt.pays(1e-2, 2e-2, 1e-4, 3, big, 3 * big)
    assert not kkt.pays(1e-2, 1e-1, 1e-3, 5, big, 2 * big)  # one end
    assert kkt.pays(1e-2, 1e-2, 1e-3, 1, big, 2 * big) and kkt.pays(5e-3, 4e-3, 1e-3, 1, big, 2 * big)  # no progress
    assert not kkt.pays(1e-2, math.inf, 1e-4, 50, big, 2 * big)  # the first certificate: no rate yet


def test_qp_order_counts_the_near_active_terms():
    g = np.array([1.0, 0.75, 0.69, 0.2])
    h = np.array([2.0, 1.5, 1.3])  # ratios not normalised: within ACTIVE of their largest
    assert kkt.qp_order(g, h) == 2 + 2


def test_kkt_steps_finish_a_multiplier_phase_gone_astray(monkeypatch):
    # With the rate rule refusing every KKT step, the only ones taken are from the best end
    # after a shifted sub-problem went astray (restarts=1: any end worse than the best counts):
    # the run certifies with them.
    monkeypatch.setattr(kkt, "pays", lambda *args: False)
    sol = ffu.solve(decades(96), method="smii", tol=1e-6, refine=False, restarts=1.0)
    assert sol.status == OPTIMAL and sol.info["kkt_steps"] > 0 and sol.gap <= 1e-6


def test_small_bases_keep_the_multiplier_phase():
    problem = ffu.FitnessProblem.from_workload(workloads.prefix(32, targets="decades", seed=0))
    assert problem.k < kkt.MIN_K
    assert ffu.solve(problem, method="smii", refine=False).info["kkt_steps"] == 0


def test_driver_reports_kkt_steps_in_the_log(capsys):
    ffu.solve(tree(64, seed=1), method="smii", refine=False, verbose=True)
    assert "KKT steps" in capsys.readouterr().out


def test_kkt_steps_on_an_array_backend():
    # The KKT steps run on the host from the backend's iterate; the point they return goes back.
    pytest.importorskip("torch")
    pytest.importorskip("array_api_compat")
    problem = decades(96, seed=1)
    host = ffu.solve(problem, method="smii", refine=False)
    torch_run = ffu.solve(problem, method="smii", refine=False, array_backend="torch:cpu")
    for sol in (host, torch_run):
        assert sol.status == OPTIMAL and sol.gap <= 1e-4 and sol.info["kkt_steps"] >= 1
    assert torch_run.privacy_cost * torch_run.max_ratio == pytest.approx(host.privacy_cost * host.max_ratio, rel=2e-4)


def test_newton_stops_before_a_step_once_expired():
    problem = decades(64)
    start = ffu.solve(problem, method="smii", tol=3e-2, refine=False)
    calls = []

    def bound(lam, mu, alpha):
        return certificate.lower_bound(problem, lam, mu / problem.c)

    def expired(n):
        calls.append(n)
        return n >= 1

    step, n = kkt.newton(problem.B, problem.L, problem.c, start.sigma, start.lam, bound, tol=1e-12, expired=expired)
    assert n == 1 and calls == [0, 1] and step is not None
    assert kkt.newton(problem.B, problem.L, problem.c, start.sigma, start.lam, bound, tol=1e-12,
                      expired=lambda n: True) == (None, 0)


def test_newton_goes_on_while_its_own_bounds_close_the_gap(monkeypatch):
    # Targets over decades d = 1,024 (seed 0) from an end at certified gap 0.18: the steps' costs
    # and their own bounds as measured, the bound known before (floor) 1.6% below the optimum.
    # Against the floor alone the third step "stalls" (2.45e-2 -> 2.14e-2) while the true gap
    # halves; against its own bound the gap falls 3.5e-2 -> 2.3e-2 -> 4.3e-3, and the run goes on.
    alphas = [4.177435, 4.097968, 4.085233, 4.070597, 4.068087, 4.066990]
    owns = [3.845293, 3.958772, 3.994658, 4.053031, 4.062178, 4.066680]
    steps = iter(kkt.KKTStep(np.eye(2), a, np.ones(2) / 2, np.ones(3), 1.0, (2, 3)) for a in alphas)
    monkeypatch.setattr(kkt, "kkt_step", lambda *args: next(steps))
    offered = iter(owns)
    step, n = kkt.newton(None, None, None, None, None, lambda lam, mu, alpha: next(offered), tol=1e-3, floor=3.9997898)
    assert n == 6 and step.alpha == alphas[-1]


@pytest.mark.parametrize("seed", [0, 1])
def test_interior_point_agrees_with_clarabel(seed, monkeypatch):
    # A QP of the step's form (P a Gram matrix of the K-product, badly scaled rows) solved both
    # ways; and with the interior point failing, _qp falls back to Clarabel.
    rng = np.random.default_rng(seed)
    k, n, n_cols = 10, 14, 8
    Z = rng.standard_normal((k, n)) * 10.0 ** rng.uniform(-2, 2, n)
    m = rng.uniform(0.0, 1.0, k)
    signs = np.where(np.arange(n) < n_cols, 1.0, -1.0)
    P = signs[:, None] * kkt._gram(Z, m, 1e-6) * signs[None, :]
    q = rng.uniform(0.5, 1.5, n)
    x_ip, x_cl = kkt._interior_point(P, q, n_cols)[0], kkt._clarabel(P, q, n_cols)
    objective = [q @ x - 0.5 * x @ P @ x for x in (x_ip, x_cl)]
    assert objective[0] == pytest.approx(objective[1], rel=1e-7, abs=1e-9)
    assert x_ip[:n_cols].sum() == pytest.approx(1.0) and (x_ip >= 0).all()
    monkeypatch.setattr(kkt, "_interior_point", lambda *args: None)
    x, z = kkt._qp(P, q, n_cols)
    np.testing.assert_array_equal(x, x_cl)
    assert z is None


def test_a_warm_start_reaches_the_same_solution_in_fewer_factorisations(monkeypatch):
    # The second-order correction's QP differs from the step's by a shift of the columns' linear
    # terms: started from the step's solution it converges to the cold start's solution, sooner.
    rng = np.random.default_rng(3)
    k, n, n_cols = 40, 70, 40
    Z = rng.standard_normal((k, n))
    signs = np.where(np.arange(n) < n_cols, 1.0, -1.0)
    P = signs[:, None] * kkt._gram(Z, rng.uniform(0.0, 1.0, k), 1e-6) * signs[None, :]
    q = np.concatenate([rng.uniform(0.8, 1.0, n_cols), rng.uniform(-0.3, 0.0, n - n_cols)])
    bent = q + np.concatenate([1e-3 * rng.standard_normal(n_cols), np.zeros(n - n_cols)])
    counted = []
    factor = kkt._factor
    monkeypatch.setattr(kkt, "_factor", lambda *args: counted.append(1) or factor(*args))
    first = kkt._interior_point(P, q, n_cols)
    counted.clear()
    cold = kkt._interior_point(P, bent, n_cols)
    n_cold = len(counted)
    counted.clear()
    warm = kkt._interior_point(P, bent, n_cols, start=first)
    assert len(counted) < n_cold
    np.testing.assert_allclose(warm[0], cold[0], atol=1e-7)
    assert warm[0][:n_cols].sum() == pytest.approx(1.0) and (warm[0] >= 0).all() and (warm[1] >= 0).all()


def test_the_next_step_starts_warm_from_the_last_qp():
    # A step carries its QP's solution over all columns then constraints (the multipliers it
    # returns) with the bounds' multipliers; the next step from it lands where a cold one does
    # (to the interior point's tolerance, amplified by the step: 7e-7 here).
    problem = decades(96)
    start = ffu.solve(problem, method="smii", tol=3e-2, refine=False)
    first = kkt.kkt_step(problem.B, problem.L, problem.c, start.sigma, start.lam)
    d, m = problem.B.shape[1], len(problem.c)
    assert first.warm.shape == (2, d + m) and (first.warm >= 0).all()
    np.testing.assert_array_equal(first.warm[0], np.concatenate([first.lam, first.mu]))
    cold = kkt.kkt_step(problem.B, problem.L, problem.c, first.sigma, first.lam)
    warm = kkt.kkt_step(problem.B, problem.L, problem.c, first.sigma, first.lam, first.warm)
    assert max(warm.alpha, cold.alpha) < first.alpha and warm.alpha == pytest.approx(cold.alpha, rel=1e-5)


def test_interior_point_survives_a_matrix_indefinite_by_its_rounding():
    # P semidefinite of rank 6 with -5e-8 (relative) added to its diagonal, as the QP's float32
    # products leave it: the factorisation fails once the iterate nears the support, the interior
    # point raises P's diagonal just enough and still solves the QP (to the shift's effect).
    rng = np.random.default_rng(7)
    n, n_cols = 40, 25
    A = rng.standard_normal((n, 6))
    P = A @ A.T
    P -= 5e-8 * np.diag(np.diag(P))
    assert np.linalg.eigvalsh(P).min() < 0
    q = np.concatenate([rng.uniform(0.7, 1.0, n_cols), rng.uniform(-0.3, 0.0, n - n_cols)])  # as g_A, h_C - 1
    x = kkt._interior_point(P, q, n_cols)[0]
    assert x is not None and x[:n_cols].sum() == pytest.approx(1.0) and (x >= 0).all()
    shifted = P + 1e-6 * np.diag(np.diag(P))  # semidefinite
    y = kkt._clarabel(shifted, q, n_cols)
    objective = [q @ v - 0.5 * v @ P @ v for v in (x, y)]
    assert objective[0] >= objective[1] - 1e-6 * abs(objective[1])


def test_singular_hessian_starts_with_a_larger_proximal_term():
    # M = Y diag(lam) Y^T is singular where the multipliers vanish on columns (identity basis):
    # rho starts at RHO_SINGULAR there, at RHO elsewhere, relative to M's largest eigenvalue.
    problem = tree(64)
    sigma = np.eye(problem.k)
    lam = np.ones(problem.d)
    dense = kkt._model(problem.B, problem.L, problem.c, sigma, lam)
    assert dense.m.min() > kkt.SINGULAR * dense.m.max() and dense.rho == pytest.approx(kkt.RHO * dense.m.max())
    lam[::2] = 0.0
    sparse = kkt._model(problem.B, problem.L, problem.c, sigma, lam)
    assert sparse.m.min() == 0.0 and sparse.rho == pytest.approx(kkt.RHO_SINGULAR * sparse.m.max())
    lam[::2] = 1e-8  # nearly singular (targets over decades begin there): a larger rho too
    near = kkt._model(problem.B, problem.L, problem.c, sigma, lam)
    assert near.m.min() > 0.0 and near.rho == pytest.approx(kkt.RHO_SINGULAR * near.m.max())
