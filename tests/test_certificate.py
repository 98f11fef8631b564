"""The dual certificate: an independent formula, weak duality, tightness at SDP optima."""

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx import workloads
from ffu_cvx.model import certificate, privacy
from ffu_cvx.solvers.sdp.driver import solve_sdp


def nuclear_bound(problem, lam, mu):
    """The bound from its nuclear-norm form: ||diag(sqrt mu) W diag(sqrt lam)||_*^2 / (mu . c)."""
    lam = lam / lam.sum()
    M = np.sqrt(mu)[:, None] * problem.W * np.sqrt(lam)[None, :]
    return np.linalg.svd(M, compute_uv=False).sum() ** 2 / (mu @ problem.c)


@pytest.fixture(scope="module")
def ranges():
    return ffu.FitnessProblem.from_workload(workloads.random_ranges(12, targets="random", seed=5))


def test_lower_bound_matches_nuclear_norm_on_every_branch(ranges):
    rng = np.random.default_rng(0)
    d, m = ranges.d, ranges.m
    for n_lam, n_mu in ((d, m), (3, m), (d, 4), (5, 5), (1, 1)):
        lam = np.zeros(d)
        lam[rng.choice(d, n_lam, replace=False)] = rng.random(n_lam)
        mu = np.zeros(m)
        mu[rng.choice(m, n_mu, replace=False)] = rng.random(n_mu)
        assert certificate.lower_bound(ranges, lam, mu) == pytest.approx(nuclear_bound(ranges, lam, mu), rel=1e-10)


def test_bound_is_basis_free():
    rng = np.random.default_rng(1)
    lam, mu = rng.random(10), rng.random(10)
    vals = [certificate.lower_bound(ffu.FitnessProblem.from_workload(workloads.prefix(10), basis=b), lam, mu)
            for b in ("identity", "upper")]
    assert vals[0] == pytest.approx(vals[1], rel=1e-10)


def test_weak_duality(ranges):
    opt = solve_sdp(ranges).privacy_cost
    rng = np.random.default_rng(2)
    for _ in range(50):
        lam, mu = rng.exponential(size=ranges.d), rng.exponential(size=ranges.m) ** 3
        assert certificate.lower_bound(ranges, lam, mu) <= opt * (1 + 1e-9)


@pytest.mark.parametrize("d", [8, 16])  # d = 32: tests/test_sdp.py::test_prefix32_certified
def test_sdp_solutions_are_certified_below_1e6(d):
    problem = ffu.FitnessProblem.from_workload(workloads.prefix(d))
    sol = solve_sdp(problem)
    assert 0 <= sol.gap < 1e-6
    assert sol.lower_bound <= sol.privacy_cost


def test_sdp_solution_certified_on_random_ranges(ranges):
    sol = solve_sdp(ranges)
    assert 0 <= sol.gap < 1e-6
    # Without the solver's multipliers the search still gets close.
    blind = certificate.certify(ranges, sol.sigma)
    assert 0 <= blind.gap < 1e-2
    assert blind.lower_bound <= sol.lower_bound * (1 + 1e-9)


def test_suboptimal_sigma_gets_positive_gap():
    problem = ffu.FitnessProblem.from_workload(workloads.prefix(16))
    sol = solve_sdp(problem)
    for sigma in (np.eye(16), sol.sigma + 0.05 * np.eye(16), sol.sigma @ np.diag(np.linspace(1, 1.2, 16)) @ sol.sigma):
        sigma = 0.5 * (sigma + sigma.T)
        for lam, mu in ((None, None), (sol.lam, sol.mu)):
            cert = certificate.certify(problem, sigma, lam, mu)
            assert cert.gap > 1e-4
            assert cert.lower_bound <= sol.privacy_cost * (1 + 1e-9)
            alpha_norm = privacy.privacy_cost(sigma, problem.B) * max(
                np.einsum("ij,ij->i", problem.L @ sigma, problem.L) / problem.c)
            assert cert.gap == pytest.approx(alpha_norm / cert.lower_bound - 1, rel=1e-12)


def test_blind_certificate_of_identity_noise_is_reasonable():
    # Identity noise on prefix(16) costs alpha = 1 with variance 16: normalised cost 16,
    # the optimum 2.905; the search from the uniform weights must find a bound near it.
    problem = ffu.FitnessProblem.from_workload(workloads.prefix(16))
    cert = certificate.certify(problem, np.eye(16))
    assert cert.lower_bound == pytest.approx(2.905253, rel=1e-4)
    assert cert.gap == pytest.approx(16 / cert.lower_bound - 1, rel=1e-12)


def test_multipliers_are_validated(ranges):
    with pytest.raises(ValueError, match="shape"):
        certificate.lower_bound(ranges, np.ones(3), np.ones(ranges.m))
    with pytest.raises(ValueError, match="non-negative"):
        certificate.lower_bound(ranges, -np.ones(ranges.d), np.ones(ranges.m))
    with pytest.raises(ValueError, match="finite"):
        certificate.lower_bound(ranges, np.full(ranges.d, np.nan), np.ones(ranges.m))
    with pytest.raises(ValueError, match="iters"):
        certificate.certify(ranges, np.eye(ranges.k), iters=-1)
    with pytest.raises(ValueError, match="stall"):
        certificate.certify(ranges, np.eye(ranges.k), stall=-1.0)


def test_dual_sigma_at_optimal_multipliers_is_the_optimum():
    # prefix(16): every column is tight, so the certificate's multipliers determine the
    # optimal Sigma through Sigma Q Sigma = P, and its cost (scaled to meet the targets)
    # is the optimum.
    problem = ffu.FitnessProblem.from_workload(workloads.prefix(16))
    ref = solve_sdp(problem)
    sigma = certificate.dual_sigma(problem, ref.lam, ref.mu)
    lam, mu = ref.lam / ref.lam.sum(), ref.mu / (ref.mu @ problem.c)  # the normalisation it uses
    P = (problem.B * lam) @ problem.B.T
    Q = (problem.L.T * mu) @ problem.L
    np.testing.assert_allclose(sigma @ Q @ sigma, P, atol=1e-10)
    ratio = (np.einsum("ij,ij->i", problem.L @ sigma, problem.L) / problem.c).max()
    assert privacy.privacy_cost(sigma / ratio, problem.B) == pytest.approx(ref.privacy_cost, rel=1e-5)
    assert certificate.dual_sigma(problem, np.eye(1, problem.d, 0)[0], ref.mu) is None  # P singular


def test_dual_sigma_floors_a_nearly_singular_q_for_a_start():
    # Queries' weights over 16 decades leave Q numerically singular (the prefix sums' Q at d = 2,048
    # on targets over decades: 4e-14 of its largest): None, or with floor a positive definite Sigma
    # that still meets Sigma Q Sigma = P on the eigenvectors the floor leaves alone.
    problem = ffu.FitnessProblem.from_workload(workloads.prefix(16))
    lam, mu = np.full(problem.d, 1.0 / problem.d), np.logspace(0, -16, problem.m)
    assert certificate.dual_sigma(problem, lam, mu) is None
    sigma = certificate.dual_sigma(problem, lam, mu, floor=True)
    assert np.allclose(sigma, sigma.T) and np.linalg.eigvalsh(sigma).min() > 0
    R, w, V = certificate._pair_factors(problem, lam, mu / (mu @ problem.c), floor=True)
    assert w.min() == pytest.approx(certificate.SINGULAR_Q * w.max())
    mu = np.logspace(0, -3, problem.m)  # well conditioned: the floor changes nothing
    np.testing.assert_array_equal(certificate.dual_sigma(problem, lam, mu, floor=True),
                                  certificate.dual_sigma(problem, lam, mu))


@pytest.mark.parametrize("shape", [(60, 40), (40, 60)])
def test_gram_nuclear_norm_is_a_close_lower_bound(shape):
    rng = np.random.default_rng(7)
    X = rng.standard_normal(shape) * np.logspace(0, -3, shape[1])  # singular values over three decades
    exact = float(np.linalg.svd(X, compute_uv=False).sum())
    assert certificate.nuclear_norm(X, gram_min_order=1) == exact  # no slack: the singular values themselves
    assert certificate.nuclear_norm(X, slack=1e-6) == exact  # below GRAM_MIN_ORDER: the same
    got = certificate.nuclear_norm(X, slack=1e-6, gram_min_order=1)
    assert exact * (1 - 1e-6) <= got <= exact * (1 + 1e-14)
    assert got != exact  # the Gram route was taken (its margin is never zero)


def test_gram_nuclear_norm_falls_back_where_its_margin_is_too_wide():
    rng = np.random.default_rng(8)
    X = rng.standard_normal((50, 3)) @ rng.standard_normal((3, 50))  # rank 3: 47 zero singular values
    exact = float(np.linalg.svd(X, compute_uv=False).sum())
    # Each zero eigenvalue of the Gram matrix may be up to delta: sqrt(delta) per singular
    # value is far more than the slack allows, so the singular values are taken.
    assert certificate.nuclear_norm(X, slack=1e-9, gram_min_order=1) == pytest.approx(exact, rel=1e-12)
    Y = rng.standard_normal((50, 50))
    # Below the order: never the Gram route.
    assert certificate.nuclear_norm(Y, slack=1.0, gram_min_order=51) == float(np.linalg.svd(Y, compute_uv=False).sum())


def test_smii_cheap_certificate_on_the_gram_route_stays_within_its_slack():
    # SM-II's cheap certificate (k = 300 > options.CHEAP_CERTIFY_K) asks lower_bound for a slack of
    # half bounds.CERTIFY_SLACK times tol, which from certificate.GRAM_MIN_ORDER on is the Gram
    # route. Below that order the run's bound is the singular values'; the Gram route (opened here
    # by gram_min_order=1) at the run's own multipliers stays within CERTIFY_SLACK tol of it.
    from ffu_cvx.solvers.smii import bounds, options

    problem = ffu.FitnessProblem.from_workload(workloads.prefix(300))
    assert options.CHEAP_CERTIFY_K < problem.k < certificate.GRAM_MIN_ORDER
    tol = 1e-3
    sol = ffu.solve(problem, method="smii", tol=tol, refine=False)
    exact = certificate.lower_bound(problem, sol.lam, sol.mu)  # the singular values of the same multipliers
    assert sol.gap <= tol
    assert sol.lower_bound == pytest.approx(exact, rel=1e-12)
    gram = certificate.lower_bound(problem, sol.lam, sol.mu, slack=0.5 * bounds.CERTIFY_SLACK * tol, gram_min_order=1)
    assert gram <= exact <= gram * (1 + bounds.CERTIFY_SLACK * tol)
    assert gram != exact  # the Gram route was taken


def test_gram_bound_skips_the_longer_factors_qr_and_stays_within_its_slack(monkeypatch):
    problem = ffu.FitnessProblem.from_workload(workloads.random_ranges(64, targets="random", seed=2))
    assert problem.m > certificate.REDUCE_RATIO * problem.k  # the queries' factor is the longer one
    rng = np.random.default_rng(0)
    lam, mu = rng.random(problem.d), rng.random(problem.m)
    qrs = []
    qr = certificate.linalg.qr
    monkeypatch.setattr(certificate.linalg, "qr", lambda *a, **kw: qrs.append(a[0].shape) or qr(*a, **kw))
    exact = certificate.lower_bound(problem, lam, mu)
    assert (problem.m, problem.k) in qrs  # without a slack both long factors are reduced
    qrs.clear()
    slack = 1e-6
    got = certificate.lower_bound(problem, lam, mu, slack=slack, gram_min_order=1)
    assert (problem.m, problem.k) not in qrs
    assert exact * (1 - 2 * slack) <= got <= exact


@pytest.mark.parametrize("d, seed", [(16, 4), (20, 1)])
def test_dual_ascent_climbs_where_the_multipliers_span_decades(d, seed):
    # Targets log-uniform over 1..1000: the optimal multipliers span over 30 decades (some
    # are 0), so P and Q of multipliers near them are numerically singular. The ascent's
    # step comes from the singular vectors of diag(sqrt mu) W diag(sqrt lam), which needs
    # no inverse; the Cholesky form it replaced stopped within a step or two (3.0e-3 and
    # 3.9e-3 below the optimum here after ten steps, against 2.8e-4 and 2.2e-4).
    problem = ffu.FitnessProblem.from_workload(workloads.prefix(d, targets="decades", seed=seed))
    ref = solve_sdp(problem, refine=False)
    rng = np.random.default_rng(0)
    lam = ref.lam * np.exp(0.3 * rng.standard_normal(problem.d))
    mu = ref.mu * np.exp(0.3 * rng.standard_normal(problem.m))
    start = certificate.certify(problem, ref.sigma, lam, mu, iters=0).lower_bound
    climbed = certificate.certify(problem, ref.sigma, lam, mu, iters=10)
    assert start < climbed.lower_bound <= ref.privacy_cost * (1 + 1e-9)
    assert climbed.lower_bound >= ref.privacy_cost * (1 - 1e-3)
    assert climbed.lower_bound == pytest.approx(certificate.lower_bound(problem, climbed.lam, climbed.mu), rel=1e-12)


def test_one_ascent_step_from_near_optimal_multipliers_raises_the_bound():
    # certificate.ascent_step from multipliers near the optimum's (some zero, as a KKT step's):
    # the step's multipliers are normalised (lam on the simplex, mu . c = 1), keep the zeros, and
    # certify a higher bound than the ones it started from, never above the optimum.
    problem = ffu.FitnessProblem.from_workload(workloads.prefix(16, targets="decades", seed=4))
    ref = solve_sdp(problem, refine=False)
    rng = np.random.default_rng(0)
    lam = ref.lam * np.exp(0.3 * rng.standard_normal(problem.d))
    mu = ref.mu * np.exp(0.3 * rng.standard_normal(problem.m))
    lam[lam < 1e-6 * lam.max()], mu[::7] = 0.0, 0.0
    lam, mu = lam / lam.sum(), mu / (mu @ problem.c)
    F, lam1, mu1 = certificate.ascent_step(problem, lam, mu)
    assert F ** 2 == pytest.approx(certificate.lower_bound(problem, lam, mu), rel=1e-10)
    assert lam1.sum() == pytest.approx(1.0) and mu1 @ problem.c == pytest.approx(1.0)
    assert (lam1[lam == 0] == 0).all() and (mu1[mu == 0] == 0).all()
    assert F ** 2 < certificate.lower_bound(problem, lam1, mu1) <= ref.privacy_cost * (1 + 1e-9)


def test_smii_bound_keeper_ascends_from_a_kkt_steps_multipliers_only_near_tol(monkeypatch):
    # BoundKeeper.offer(lam, mu, alpha) adds one exact ascent step where alpha's gap against the best
    # bound is over tol but within ASCEND_WITHIN tol (a KKT step that just missed tol), not elsewhere.
    from ffu_cvx.solvers.smii import bounds
    problem = ffu.FitnessProblem.from_workload(workloads.prefix(16, targets="decades", seed=4))
    ref = solve_sdp(problem, refine=False)
    lam, u = ref.lam, ref.mu * problem.c  # offer takes mu per variance ratio
    calls, step = [], certificate.ascent_step
    monkeypatch.setattr(certificate, "ascent_step", lambda *a, **k: calls.append(1) or step(*a, **k))
    keeper = bounds.BoundKeeper(problem, tol=1e-4)
    lb = keeper.offer(lam, u)
    for factor, ascends in [(None, False), (0.5, False), (2.0, True), (bounds.ASCEND_WITHIN + 1, False)]:
        calls.clear()
        got = keeper.offer(lam, u, None if factor is None else lb * (1 + factor * keeper.tol))
        assert bool(calls) == ascends and got >= lb * (1 - 1e-12)


def test_smii_bound_keeper_recertifies_after_a_run_of_skips(monkeypatch):
    # A certificate that did not raise the bound, far from tol, used to stop every later
    # dual ascent: on a 4-ary tree (d = 48, seed 8) the bound stayed at its second value
    # while SM-II's alpha reached the optimum (gap 2.6e-3 at t_max). Skips now come at
    # most CERTIFY_MAX_SKIPS in a row.
    from ffu_cvx.solvers.smii import bounds, model

    problem = ffu.FitnessProblem.from_workload(workloads.prefix(8))
    point = model.evaluate(problem.B, problem.L, problem.c, np.eye(problem.k), 30.0, 30.0)
    keeper = bounds.BoundKeeper(problem, tol=1e-4)
    keeper.certify(point, 1.0, problem.c)
    keeper.certify(point, 1.0, problem.c)  # the same point: the bound does not rise
    assert keeper.gain == 0.0 and keeper.gap(point.cost(1.0)) > bounds.CERTIFY_SKIP * keeper.tol
    calls = []
    certify = certificate.certify
    monkeypatch.setattr(certificate, "certify", lambda *a, **kw: calls.append(1) or certify(*a, **kw))
    for _ in range(2 * (bounds.CERTIFY_MAX_SKIPS + 1)):
        keeper.certify(point, 1.0, problem.c, force=False)
    assert len(calls) == 2


@pytest.mark.parametrize("shape", [(40, 25), (25, 40)])
def test_singular_triplets_by_the_gram_matrix_match_the_svd(shape):
    # Singular values over 11 decades: those over GRAM_SVD_CUT of the largest are kept, each within the
    # Gram matrix's rounding (eps S_max^2 / S_i) of the SVD's, with vectors that rebuild X.
    rng = np.random.default_rng(3)
    n = min(shape)
    left, _ = np.linalg.qr(rng.standard_normal((shape[0], n)))
    right, _ = np.linalg.qr(rng.standard_normal((shape[1], n)))
    exact = np.logspace(0, -11, n)
    X = (left * exact) @ right.T
    U, S, V = certificate._svd_by_gram(X)
    kept = exact[exact > certificate.GRAM_SVD_CUT * exact[0]]
    assert U.shape == (shape[0], len(kept)) and V.shape == (shape[1], len(kept))
    assert (np.abs(np.sort(S)[::-1] - kept) <= 10 * np.finfo(float).eps * exact[0] ** 2 / kept).all()
    big = S >= 1e-3 * S.max()  # one side is X V / S (or X^T U / S): eps S_max^2 / S^2 of rounding
    for A in (U, V):
        np.testing.assert_allclose(A[:, big].T @ A[:, big], np.eye(big.sum()), atol=1e-8)
    assert np.linalg.norm((U * S) @ V.T - X) <= 1e-5 * exact[0]  # the dropped values, under 1e-6 each


def test_an_ascent_step_by_gram_matrices_matches_the_svds():
    # ascend takes its steps' singular triplets from Gram matrices: a step so gives the SVD's
    # multipliers to rounding, and the ascent a valid bound (evaluated by the SVD).
    problem = ffu.FitnessProblem.from_workload(workloads.prefix(48, targets="decades", seed=0))
    by_gram = certificate.ascend(problem, 5)
    lam, mu = np.full(problem.d, 1.0 / problem.d), 1.0 / (problem.m * problem.c)
    gram, svd = (certificate._ascent_step(problem, lam, mu, gram=g) for g in (True, False))
    assert gram[0] == pytest.approx(svd[0], rel=1e-12)
    for a, b in zip(gram[1:], svd[1:]):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-14 * b.max())
    bound = certificate.lower_bound(problem, *by_gram)
    assert 0 < bound <= ffu.solve(problem, method="smii", refine=False).privacy_cost
