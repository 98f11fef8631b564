"""The solve contract, checked for every method in ``ffu.METHODS`` (scipy.optimize's contract tests)."""

import dataclasses
import math
import pickle

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx.model.status import STATUSES, SUCCESS, USER_STOPPED, IntermediateResult

METHODS = sorted(ffu.METHODS)
#: Small problems every method certifies quickly: prefix(4) (one level), a two-block W.
TOL = {"sdp": 1e-6, "smii": 1e-4, "gd": 1e-3}
FIELDS = ("method", "status", "success", "message", "problem", "sigma", "profile", "variances", "privacy_cost",
          "max_ratio", "lower_bound", "gap", "lam", "mu", "nit", "time", "info")


def small_problem():
    return ffu.FitnessProblem.from_workload(ffu.workloads.prefix(4))


@pytest.mark.parametrize("method", METHODS)
def test_tol_is_the_certified_gap(method):
    sol = ffu.solve(small_problem(), method=method, tol=TOL[method])
    assert sol.status in SUCCESS and sol.success
    assert 0 <= sol.gap <= TOL[method]
    assert sol.privacy_cost == pytest.approx(1.758601, rel=2 * TOL[method])  # Table 2, d = 4


@pytest.mark.parametrize("method", METHODS)
def test_solution_is_complete_and_immutable(method):
    problem = small_problem()
    sol = ffu.solve(problem, method=method, tol=TOL[method])
    assert {f.name for f in dataclasses.fields(sol)} >= set(FIELDS)
    assert sol.method == method and sol.problem is problem and sol.status in STATUSES
    assert sol.sigma.shape == (problem.k, problem.k) and sol.profile.shape == (problem.d,)
    assert sol.privacy_cost == pytest.approx(float(sol.profile.max()))
    assert sol.variances == pytest.approx(ffu.model.privacy.variances(problem.L, sol.sigma))
    assert sol.max_ratio == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(TypeError):
        sol["status"] = "optimal"
    with pytest.raises(dataclasses.FrozenInstanceError):
        sol.gap = 0.0
    with pytest.raises(TypeError):
        sol.info["extra"] = 1
    assert sol["status"] == sol.status and sol.get("no such field") is None
    copy = pickle.loads(pickle.dumps(sol))
    assert copy.status == sol.status and dict(copy.info) == dict(sol.info)
    np.testing.assert_array_equal(copy.sigma, sol.sigma)


@pytest.mark.parametrize("method", METHODS)
def test_callback_stop_gives_user_stopped(method):
    seen = []

    def stop(result):
        seen.append(result)
        raise StopIteration

    sol = ffu.solve(small_problem(), method=method, callback=stop)
    assert sol.status == USER_STOPPED and not sol.success
    assert len(seen) == 1 and isinstance(seen[0], IntermediateResult)
    r = seen[0]
    assert r.method == method and r.nit >= 1 and r.sigma.shape == (4, 4)
    assert math.isfinite(r.privacy_cost) and r.privacy_cost >= 1.758601 * (1 - 1e-6)
    assert r["nit"] == r.nit
    with pytest.raises(AttributeError):
        r.nit = 0
    assert not r.sigma.flags.writeable


@pytest.mark.parametrize("method", METHODS)
def test_unknown_option_raises_type_error(method):
    with pytest.raises(TypeError, match="no_such_option"):
        ffu.solve(small_problem(), method=method, no_such_option=1)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("bad", [float("nan"), -1.0, 0.0, float("inf")])
def test_bad_tol_names_the_argument(method, bad):
    with pytest.raises(ValueError, match="`tol`"):
        ffu.solve(small_problem(), method=method, tol=bad)


@pytest.mark.parametrize("method", METHODS)
def test_nan_input_is_refused_before_any_method_runs(method):
    W = np.eye(3)
    W[1, 2] = np.nan
    with pytest.raises(ValueError, match="`W`"):
        ffu.solve(ffu.FitnessProblem(W, 1.0), method=method)
    with pytest.raises(ValueError, match="`problem`"):
        ffu.solve(W, method=method)


def test_unknown_method_lists_the_valid_ones():
    with pytest.raises(ValueError, match="valid methods"):
        ffu.solve(small_problem(), method="newton")


def test_solver_error_on_a_badly_scaled_problem_names_the_cause(monkeypatch):
    problem = ffu.FitnessProblem(np.diag([1e9, 1e-9]), [1.0, 1.0])
    assert "badly scaled" in problem.scaling_advice

    def fail(problem, **options):
        raise ffu.SolverError("line search made no progress", status="solver_error", nit=3)

    monkeypatch.setitem(ffu.METHODS, "smii", fail)
    with pytest.raises(ffu.SolverError, match="line search made no progress; the problem is badly scaled") as err:
        ffu.solve(problem, method="smii")
    assert err.value.nit == 3 and err.value.status == "solver_error"
    assert ffu.FitnessProblem(np.eye(2), 1.0).scaling_advice == ""


def test_solver_error_keeps_its_fields_through_pickling():
    import pickle

    err = ffu.SolverError("no progress", status="max_iter", nit=7, residual=0.5, where="level 2")
    back = pickle.loads(pickle.dumps(err))
    assert isinstance(back, ffu.SolverError) and str(back) == "no progress"
    assert (back.status, back.nit, back.residual, back.info) == ("max_iter", 7, 0.5, {"where": "level 2"})
