"""SM-II's dual-ascent start: ``certificate.ascend``, ``model.ascent_start`` and the ``start`` option."""

import numpy as np
import pytest

import ffu_cvx as ffu
from experiments.bench_workloads import build
from ffu_cvx.model import certificate
from ffu_cvx.solvers.smii import backend
from ffu_cvx.solvers.smii.model import ascent_start, initial_sigma, variance_ratios
from ffu_cvx.solvers.smii.options import ASCENT_MAX_K, ASCENT_MIN_K, smii_options


def decades(d, seed=0):
    return build("prefix-decades", d, seed)


def cost(problem, sigma):
    return ffu.model.privacy.privacy_cost(sigma, problem.B) * variance_ratios(problem.L, sigma, problem.c).max()


def test_ascend_raises_a_valid_bound_faster_when_over_relaxed():
    problem = decades(48)
    optimum = ffu.solve(problem, method="smii", refine=False, tol=1e-6).privacy_cost
    uniform = certificate.lower_bound(problem, np.ones(problem.d), 1.0 / problem.c)
    found = {}
    for omega in (1.0, 2.0):
        lam, mu = certificate.ascend(problem, 5, omega=omega)
        assert lam.sum() == pytest.approx(1.0) and mu @ problem.c == pytest.approx(1.0)
        assert np.all(lam > 0) and np.all(mu > 0)  # the uniform multipliers mixed back keep every weight
        found[omega] = certificate.lower_bound(problem, lam, mu)
        assert uniform < found[omega] <= optimum * (1 + 1e-9)
    assert found[2.0] > found[1.0]
    assert found[2.0] > 0.95 * optimum


def test_ascent_start_meets_every_target_and_beats_the_classic_start():
    problem = decades(96)
    sigma, lam, u = ascent_start(problem)
    ratios = variance_ratios(problem.L, sigma, problem.c)
    assert ratios.max() == pytest.approx(0.99)  # scaled as the classic start is (START_MARGIN)
    assert cost(problem, sigma) < 0.5 * cost(problem, initial_sigma(problem, None))
    # ``u`` is per variance ratio: divided by c it is the certificate's mu (mu . c = 1).
    assert u.sum() == pytest.approx(1.0) and lam.sum() == pytest.approx(1.0)
    assert certificate.lower_bound(problem, lam, u / problem.c) <= cost(problem, sigma)


def test_start_option_resolves_and_is_validated():
    opts = smii_options()
    assert opts.start == "auto"
    assert opts.resolved(ASCENT_MIN_K).start == "ascent"
    assert opts.resolved(ASCENT_MIN_K - 1).start == opts.resolved(ASCENT_MAX_K + 1).start == "cheapest"
    assert smii_options(t_shift=None).resolved(1024).start == "cheapest"  # the paper's schedule
    assert smii_options(start="ascent").resolved(8).start == "ascent"
    assert smii_options(start="cheapest").resolved(4096).start == "cheapest"
    if "torch:cpu" in backend.available():  # the ascent runs on the host: not by default on a device
        assert smii_options(array_backend="torch:cpu").resolved(1024).start == "cheapest"
    with pytest.raises(ValueError, match="`start` must be one of"):
        smii_options(start="dual")
    with pytest.raises(ValueError, match="finite `t_shift`"):
        smii_options(start="ascent", t_shift=None)
    with pytest.raises(ValueError, match="start"):
        ffu.solve(decades(8), method="smii", start=3)


def test_ascent_start_run_begins_at_t_shift_with_its_bound(capsys):
    problem = decades(64, seed=1)
    ascent = ffu.solve(problem, method="smii", refine=False, start="ascent", verbose=True)
    assert "dual-ascent start: bound" in capsys.readouterr().out
    cheapest = ffu.solve(problem, method="smii", refine=False, start="cheapest")
    for sol in (ascent, cheapest):
        assert sol.status == ffu.model.status.OPTIMAL and sol.gap <= 1e-4
    assert ascent.history[0]["t1"] == ascent.history[0]["t2"] == 30.0
    assert cheapest.history[0]["t1"] == 1.0
    assert ascent.privacy_cost == pytest.approx(cheapest.privacy_cost, rel=2e-4)
    # A user's Q wins over the ascent (and starts at the user's t1).
    user = ffu.solve(problem, method="smii", refine=False, start="ascent", Q=np.eye(problem.k), maxiter=1)
    assert user.history[0]["t1"] == 1.0


def test_kkt_steps_may_finish_from_the_first_unshifted_end(monkeypatch):
    # From the dual-ascent start the first end (unshifted, t = 30) of this Gaussian workload already
    # certifies 4e-2, under kkt.START: KKT steps finish from there. (Taken from the first end, they
    # finish mixed scales d = 512 seeds 0-8 in 1-3 Newton steps, where waiting for a shifted end
    # takes 19-25.)
    from ffu_cvx.solvers.smii import driver
    seen, original = [], driver.Run._kkt_finish

    def recording(self, p, gap):
        seen.append(p.s1 is None)
        return original(self, p, gap)

    monkeypatch.setattr(driver.Run, "_kkt_finish", recording)
    sol = ffu.solve(build("gaussian", 64, 0), method="smii", refine=False, start="ascent")
    assert sol.status == ffu.model.status.OPTIMAL and sol.gap <= 1e-4
    assert seen[:1] == [True] and sol.nit <= 3


def test_a_start_too_stiff_for_t_shift_goes_one_level_down():
    # Rows and columns scaled over decades: from the dual-ascent start the soft maxes at t = 30 take
    # only short steps (one CG iteration, line searches of 1/16) and the first sub-problem ends
    # without a full step; the run then continues at t = 10 (d = 512: 155 -> 72 Newton steps over
    # seeds 0-2). Targets over decades take a full step there and stay at t = 30. (KKT steps off,
    # kkt=False: with them, they finish this run from that first end.)
    stiff = ffu.solve(build("mixed", 256, 1), method="smii", refine=False, start="ascent", kkt=False)
    plain = ffu.solve(decades(64), method="smii", refine=False, start="ascent", kkt=False)
    for sol in (stiff, plain):
        assert sol.status == ffu.model.status.OPTIMAL and sol.gap <= 1e-4
    assert stiff.history[0]["t1"] == 30.0 and stiff.history[0]["step"] < 1
    assert stiff.history[1]["t1"] == 10.0
    assert min(h["t1"] for h in plain.history) == 30.0


def test_ascent_start_on_an_accelerator_backend_matches_numpy():
    # The ascent runs on the host; its start is moved to the backend, and the run follows numpy's: its
    # first steps to rounding (here they part by 1e-8 at step 10, the trajectory amplifying rounding), the
    # end within the larger certified gap.
    if "torch:cpu" not in backend.available():
        pytest.skip("torch is not installed")
    problem = decades(48)
    runs = [ffu.solve(problem, method="smii", refine=False, start="ascent", array_backend=name)
            for name in ("numpy", "torch:cpu")]
    assert runs[0].history[0]["t1"] == runs[1].history[0]["t1"] == 30.0
    for a, b in zip(runs[0].history[:5], runs[1].history[:5]):
        assert b["alpha"] == pytest.approx(a["alpha"], rel=1e-10)
    assert all(r.status == ffu.model.status.OPTIMAL for r in runs)
    assert abs(runs[1].privacy_cost - runs[0].privacy_cost) <= max(r.gap for r in runs) * runs[0].privacy_cost


def test_a_singular_dual_sigma_falls_back_to_the_classic_start(monkeypatch):
    # ascent_start returns None where the dual Sigma is numerically singular; the run then starts
    # from the cheapest classic start at the user's t1, as with start="cheapest".
    from ffu_cvx.solvers.smii import model
    problem = decades(32)
    monkeypatch.setattr(model.certificate, "dual_sigma", lambda *a, **k: None)
    assert ascent_start(problem) is None
    sol = ffu.solve(problem, method="smii", refine=False, start="ascent")
    assert sol.status == ffu.model.status.OPTIMAL and sol.history[0]["t1"] == 1.0
