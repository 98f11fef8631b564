"""The SDP's warm start past d = 128: SCS's scale rule for m > k and the stall stop."""

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx import workloads
from ffu_cvx.solvers.sdp import cvx, scsmodels, driver as sdp
from ffu_cvx.model.status import OPTIMAL


def ranges_problem(d, seed=0):
    return ffu.FitnessProblem.from_workload(workloads.random_ranges(d, targets="random", seed=seed), basis="auto")


def recording_scs(monkeypatch):
    """Record the ``scale`` each SCS chunk is built with."""
    import scs

    scales, real = [], scs.SCS

    class Recording(real):
        def __init__(self, data, cone, **opts):
            scales.append(opts.get("scale"))
            super().__init__(data, cone, **opts)

    monkeypatch.setattr(scs, "SCS", Recording)
    return scales


def test_warm_options_raise_the_scale_only_on_wide_problems(monkeypatch):
    wide, square = ranges_problem(16), ffu.FitnessProblem.from_workload(workloads.prefix(16))
    assert wide.m > wide.k and square.m == square.k and wide.k + wide.m <= sdp.WARM_WIDE_ORDER
    assert sdp._warm_options(wide, None) is None  # small: solve_warm's own rule
    assert sdp._warm_options(ranges_problem(128), None) == {"scale": cvx.WARM_HIGH_SCALE}  # k + m = 382
    monkeypatch.setattr(sdp, "WARM_WIDE_ORDER", 0)
    assert sdp._warm_options(wide, None) == {"scale": cvx.WARM_HIGH_SCALE}
    assert sdp._warm_options(wide, {"scale": 0.3, "alpha": 1.8}) == {"scale": 0.3, "alpha": 1.8}  # the user's wins
    assert sdp._warm_options(square, None) is None
    assert sdp._warm_options(square, {"alpha": 1.8}) == {"alpha": 1.8}


@pytest.mark.parametrize("d, tol", [(16, 1e-7), pytest.param(32, 1e-6, marks=pytest.mark.slow)])
def test_warm_start_on_random_ranges_matches_the_cold_sdp(d, tol, monkeypatch):
    problem = ranges_problem(d)
    cold = sdp.solve_sdp(problem, refine=False, solver="CLARABEL")  # interior point, no warm start
    monkeypatch.setattr(sdp, "WARM_WIDE_ORDER", 0)  # the rule of d >= 128, here at small d
    scales = recording_scs(monkeypatch)
    # "auto" picks Clarabel below LMI order 48 (d = 16): SCS is asked for there.
    warm = sdp.solve_sdp(problem, refine=False, tol=tol, **({"solver": "SCS", "warm_start": "smii"} if d < 32 else {}))
    assert warm.info["warm_start"] == "smii" and warm.info["formulation"] == "inverse"
    assert warm.info["fallbacks"] == [] and warm.status == OPTIMAL
    assert scales and all(s == cvx.WARM_HIGH_SCALE for s in scales)  # from the first chunk on
    assert warm.privacy_cost == pytest.approx(cold.privacy_cost, rel=tol)
    cert = ffu.model.certificate.certify(problem, warm.sigma, warm.lam, warm.mu)
    assert cert.gap <= tol and warm.gap <= tol
    assert cold.lower_bound <= warm.privacy_cost * (1 + 1e-12)  # weak duality across the two solves


def test_warm_scs_stops_when_a_chunk_within_tol_barely_improves(monkeypatch):
    problem = ranges_problem(16)
    start = ffu.solve(problem, method="smii", tol=1e-4)
    opts = {"scale": cvx.WARM_HIGH_SCALE}
    monkeypatch.setattr(cvx, "WARM_GAP_FACTOR", 1e-9)  # the aim is out of reach: only the stall rule stops early
    monkeypatch.setattr(cvx, "WARM_CHUNK_ITERS", 100)
    monkeypatch.setattr(cvx, "WARM_STALL_FACTOR", 0.0)  # any chunk within tol counts as stalled
    lev = cvx.solve_warm(problem, start.sigma, start.lam, start.mu, tol=1e-5, solver_options=opts)
    assert lev.status == OPTIMAL and cvx.certified_gap(problem, lev) <= 1e-5
    assert 0 < lev.nit < cvx.WARM_MAX_ITERS
    monkeypatch.setattr(cvx, "WARM_STALL_FACTOR", np.inf)  # never stalled: runs on to its iteration limit
    more = cvx.solve_warm(problem, start.sigma, start.lam, start.mu, tol=1e-5, solver_options=opts,
                          max_iters=lev.nit + 300)
    assert more.nit > lev.nit and cvx.certified_gap(problem, more) <= 1e-5


def test_scs_model_round_trip_of_sigma():
    # The read-off inverts the X block; at the warm point it gives back the (rescaled) start.
    problem = ranges_problem(8)
    f, L = cvx._scaled(problem)
    sol = ffu.solve(problem, method="smii", tol=1e-6)
    x, _, _ = scsmodels.inverse_point(problem.B, L, sol.sigma, sol.lam, sol.mu * problem.c)
    sigma = scsmodels.inverse_sigma(x, problem.k)
    scale = float(np.max(ffu.model.privacy.variances(L, sol.sigma)))
    np.testing.assert_allclose(sigma, sol.sigma / scale, rtol=1e-9, atol=1e-12 * np.abs(sigma).max())
