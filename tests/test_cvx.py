"""The CVXPY adapter: one status map, the level solve, solver tolerances, interrupts."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import cvxpy as cp
import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx import workloads
from ffu_cvx.solvers.sdp import cvx, scsmodels, driver as sdp
from ffu_cvx.model.status import OPTIMAL, SOLVER_ERROR, SolverError

ROOT = Path(__file__).resolve().parents[1]


def prefix_problem(d):
    return ffu.FitnessProblem.from_workload(workloads.prefix(d))


def test_old_sdp_names_are_the_adapters():
    for name in ("FORMULATIONS", "SOLVERS", "STATUS_MAP", "LevelResult", "lmi_order", "pick_solver", "solve_level",
                 "normalise_sigma"):
        assert getattr(sdp, name) is getattr(cvx, name), name


def test_solve_model_maps_statuses_and_names_the_failure():
    x = cp.Variable(2)
    lp = cp.Problem(cp.Minimize(cp.sum(x)), [x >= np.array([1.0, 2.0])])
    status, nit = cvx.solve_model(lp, "test lp", solver="CLARABEL", remedy="no remedy needed")
    assert status == OPTIMAL and nit >= 1
    assert lp.value == pytest.approx(3.0, rel=1e-8)
    bad = cp.Problem(cp.Minimize(cp.sum(x)), [x >= 1, x <= 0])
    with pytest.raises(SolverError, match=r"test lp: CLARABEL returned status 'infeasible'; relax it") as err:
        cvx.solve_model(bad, "test lp", solver="CLARABEL", remedy="relax it")
    assert err.value.status == "infeasible"


class _Chain:
    """A solving chain whose solver returns SCS's raw output for a caught SIGINT."""

    def solve_via_data(self, prob, data, warm_start, verbose, solver_opts):
        return {"info": {"status": "interrupted", "status_val": -5}}


class _Problem:
    def get_problem_data(self, solver, verbose=False, solver_opts=None):
        return {}, _Chain(), []

    def unpack_results(self, raw, chain, inverse):  # pragma: no cover - never reached
        raise AssertionError("an interrupted solve must not be unpacked")


def test_interrupted_solver_output_raises_keyboard_interrupt():
    with pytest.raises(KeyboardInterrupt, match="model x: SCS was interrupted"):
        cvx.solve_model(_Problem(), "model x", solver="SCS", remedy="")


SIGINT_SCRIPT = textwrap.dedent("""
    import os, signal, sys, threading
    import ffu_cvx as ffu
    from ffu_cvx import workloads
    solver, d = sys.argv[1], int(sys.argv[2])
    problem = ffu.FitnessProblem.from_workload(workloads.prefix(d))
    # A small solve first loads CVXPY and the solver, so the timer below runs from the solve.
    ffu.solve(ffu.FitnessProblem.from_workload(workloads.prefix(4)), method="sdp", solver=solver, refine=False)
    # SCS at an unreachable tolerance runs for minutes, Clarabel's order-64 solve for
    # seconds; the interrupt lands inside the solver.
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
    try:
        ffu.solve(problem, method="sdp", solver=solver, refine=False, solver_tol=1e-14,
                  solver_options={"max_iters": 10**8} if solver == "SCS" else None)
        print("finished")
    except KeyboardInterrupt as exc:
        print("KeyboardInterrupt:", exc)
    except ffu.SolverError as exc:
        print("SolverError:", exc)
""")


@pytest.mark.parametrize("solver, d", [("SCS", 48), pytest.param("CLARABEL", 32, marks=pytest.mark.slow)])
def test_sigint_during_a_solve_raises_keyboard_interrupt(solver, d):
    # SCS catches SIGINT itself and CVXPY reports that as a solver failure: the adapter
    # turns it back into the user's interrupt. Clarabel does not look at signals, so
    # Python raises KeyboardInterrupt once its solve returns.
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.run([sys.executable, "-c", SIGINT_SCRIPT, solver, str(d)], capture_output=True, text=True,
                         timeout=300, env=env, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert "KeyboardInterrupt" in run.stdout and "SolverError" not in run.stdout, run.stdout
    if solver == "SCS":
        assert "SDP (pair)" in run.stdout and "SCS was interrupted" in run.stdout, run.stdout


def test_solver_tol_reaches_the_solver():
    assert cvx.solver_kwargs("SCS", 1e-5, None) == {"eps_abs": 1e-5, "eps_rel": 1e-5, "max_iters": 200_000}
    opts = cvx.solver_kwargs("CLARABEL", 1e-8, {"max_iter": 50})
    assert opts["tol_gap_abs"] == opts["tol_gap_rel"] == opts["tol_feas"] == 1e-8 and opts["max_iter"] == 50
    problem = prefix_problem(8)
    loose = cvx.solve_level(problem, solver="CLARABEL", solver_tol=1e-3)
    tight = cvx.solve_level(problem, solver="CLARABEL")
    assert loose.nit < tight.nit
    assert tight.value == pytest.approx(2.281561, abs=1e-6)
    assert abs(loose.value - tight.value) > 1e-7  # stopped visibly earlier
    with pytest.raises(ValueError, match="`solver_tol`"):
        cvx.solve_level(problem, solver_tol=1.0)


def test_tol_is_the_certified_gap_and_solver_tol_the_solvers():
    problem = prefix_problem(8)
    with pytest.warns(RuntimeWarning, match="exceeds tol=1e-06"):
        strict = sdp.solve_sdp(problem, solver="SCS", solver_tol=1e-5, refine=False)
    loose = ffu.solve(problem, method="sdp", tol=1e-2, solver="SCS", solver_tol=1e-5, refine=False)
    # The same solver run, judged by two certified-gap tolerances.
    assert strict.gap == pytest.approx(loose.gap, rel=1e-6) and 1e-6 < loose.gap < 1e-2
    assert strict.status == "optimal_inaccurate" and loose.status == OPTIMAL
    with pytest.raises(ValueError, match="`tol`"):
        sdp.solve_sdp(problem, tol=0.0)
    with pytest.raises(TypeError, match="gap_tol"):
        sdp.solve_sdp(problem, gap_tol=1e-6)


def test_normalise_sigma_and_failure_status():
    problem = prefix_problem(4)
    sigma, r = cvx.normalise_sigma(problem, 3.0 * np.eye(4))
    assert r == pytest.approx(3.0 * 4) and np.max(problem.L @ sigma @ problem.L.T / problem.c) == pytest.approx(1.0)
    with pytest.raises(SolverError) as err:
        cvx.normalise_sigma(problem, np.zeros((4, 4)))
    assert err.value.status == SOLVER_ERROR
    with pytest.raises(SolverError, match="gap of 2.00e-03 > 0.001") as err:
        cvx.reject_if_far(2e-3, solver="SCS", raw="solved (inaccurate)", nit=7)
    assert err.value.status == "solved (inaccurate)" and err.value.nit == 7
    cvx.reject_if_far(5e-4, solver="SCS", raw="solved (inaccurate)", nit=7)  # within FAIL_GAP: no error


def test_svec_round_trip_and_inner_product():
    rng = np.random.default_rng(0)
    M = rng.standard_normal((5, 5))
    M, N = M + M.T, np.eye(5) + 0.1 * (M @ M.T)
    np.testing.assert_allclose(scsmodels.unsvec(scsmodels.svec(M), 5), M, rtol=1e-15)
    # SCS's vectorisation keeps the trace inner product, which the warm start relies on.
    assert scsmodels.svec(M) @ scsmodels.svec(N) == pytest.approx(np.trace(M @ N), rel=1e-12)
    i, j = scsmodels.svec_index(5)
    np.testing.assert_array_equal(scsmodels.svec_pos(i, j, 5), np.arange(15))


def test_warm_point_is_feasible_and_primal_dual_consistent():
    # At the exact optimum (Clarabel), the warm point of the inverse model has A x + s = b,
    # A^T y + c = 0 (stationarity) up to the solver tolerance and equal objectives.
    problem = prefix_problem(6)
    lev = cvx.solve_level(problem, solver="CLARABEL")
    f, L = cvx._scaled(problem)
    data, cone = scsmodels.inverse_data(problem.B, L)
    x, y, s = scsmodels.inverse_point(problem.B, L, lev.sigma, lev.lam, lev.mu * problem.c)
    A, b, c = data["A"], data["b"], data["c"]
    assert cone == {"l": 12, "s": [12]} and A.shape == (12 + 78, 1 + 21 + 21)
    np.testing.assert_allclose(A @ x + s, b, atol=1e-12)
    assert np.max(np.abs(A.T @ y + c)) < 1e-6
    assert x[0] * f == pytest.approx(lev.value, rel=1e-7)
    assert -b @ y == pytest.approx(x[0], rel=1e-6)  # zero duality gap


def test_solve_warm_from_smii_is_exact_and_certified():
    problem = prefix_problem(16)
    start = ffu.solve(problem, method="smii", tol=1e-4)
    lev = cvx.solve_warm(problem, start.sigma, start.lam, start.mu, tol=1e-6)
    assert lev.solver == "SCS" and lev.status == OPTIMAL and lev.nit > 0
    assert lev.value == pytest.approx(2.905253, abs=1e-6)
    assert cvx.certified_gap(problem, lev) <= 1e-7  # tol * WARM_GAP_FACTOR
    with pytest.raises(ValueError, match="`tol`"):
        cvx.solve_warm(problem, start.sigma, start.lam, start.mu, tol=0.0)


def test_solve_warm_reports_a_failure_with_its_status():
    problem = prefix_problem(8)
    with pytest.raises(SolverError) as err:
        cvx.solve_warm(problem, np.eye(8), np.ones(8), np.ones(8), max_iters=1)
    assert "max_iters" in err.value.status and err.value.nit == 1
