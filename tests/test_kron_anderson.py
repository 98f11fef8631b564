"""The Anderson-accelerated block ascent (ffu_cvx.solvers.kron.reduce.ascent): the same certified optimum as
the plain ascent in fewer steps, every iterate's bound below its cost and below the dense optimum."""

import warnings

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx.solvers.kron import reduce as kron_reduce

UNIONS = {
    "(8,3) prefix x identity + identity x total + total x identity": (
        {"a": 8, "b": 3}, [({"a": "prefix", "b": "identity"}, 2.0), ({"a": "identity", "b": "total"}, 0.5),
                           ({"a": "total", "b": "identity"}, 1.0)]),
    "(8,8) prefix x total + total x prefix + ranges x identity": (
        {"a": 8, "b": 8}, [({"a": "prefix"}, 1.0), ({"b": "prefix"}, 1.0), ({"a": "ranges", "b": "identity"}, 6.0)]),
    "(14,2) two identities under a tight range": (
        {"a": 14, "s": 2}, [({"a": "identity", "s": "identity"}, 4.0), ({"a": "identity"}, 4.0),
                            ({"a": {"ranges": [(13, 13), (4, 5), (8, 8), (8, 10)]}}, 0.5)]),
}
TOL = 1e-4


def _problem(name):
    domain, groups = UNIONS[name]
    return ffu.FitnessProblem.from_workload(ffu.workloads.product(ffu.Domain(domain), groups))


@pytest.fixture(scope="module")
def runs():
    out = {}
    for name in UNIONS:
        problem = _problem(name)
        red = kron_reduce.reduce(problem.workload)
        plain = kron_reduce.ascent(red, tol=TOL, max_iter=5000, anderson=0)
        fast = kron_reduce.ascent(red, tol=TOL, max_iter=5000)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)   # the dense polish's budget
            dense = ffu.solve(problem.dense(), method="smii", tol=1e-7)
        out[name] = plain, fast, dense
    return out


@pytest.mark.parametrize("name", UNIONS)
def test_accelerated_ascent_reaches_the_plain_certified_optimum(runs, name):
    plain, fast, dense = runs[name]
    assert kron_reduce.ANDERSON_MEMORY > 0   # the default is the accelerated ascent
    assert plain.status == fast.status == "optimal"
    for res in (plain, fast):
        assert res.lower_bound <= dense.privacy_cost * (1 + 1e-9)
        assert res.cost <= res.lower_bound * (1 + TOL) * (1 + 1e-9)
    assert fast.cost <= plain.cost * (1 + TOL)
    assert abs(fast.lower_bound / plain.lower_bound - 1) <= TOL


def test_accelerated_ascent_takes_fewer_steps(runs):
    steps = {name: (plain.nit, fast.nit) for name, (plain, fast, _) in runs.items()}
    assert all(f <= p for p, f in steps.values()), steps
    assert any(f <= p / 2 for p, f in steps.values()), steps


@pytest.mark.parametrize("name", UNIONS)
def test_every_accelerated_iterate_is_certified(runs, name):
    _, fast, dense = runs[name]
    history = np.array(fast.history)
    cost, bound = history[:, 1], history[:, 2]
    assert np.all(bound <= cost) and np.all(bound <= dense.privacy_cost * (1 + 1e-9))
    assert np.all(np.diff(bound) >= 0) and np.all(np.diff(cost) <= 0)   # the best so far


def test_an_accelerated_point_that_lowers_the_bound_falls_back_to_the_plain_step(monkeypatch):
    # An Anderson step that always overshoots (twice the accelerated move): the safeguard restarts
    # its memory, takes the plain step instead, and the ascent still reaches the optimum.
    resets, step, reset = [], kron_reduce._Anderson.step, kron_reduce._Anderson.reset

    def overshoot(self, x, gx):
        out = step(self, x, gx)
        return np.where(2 * out - x > 0, 2 * out - x, gx)

    monkeypatch.setattr(kron_reduce._Anderson, "step", overshoot)
    monkeypatch.setattr(kron_reduce._Anderson, "reset", lambda self: resets.append(1) or reset(self))
    red = kron_reduce.reduce(_problem("(8,3) prefix x identity + identity x total + total x identity").workload)
    res = kron_reduce.ascent(red, tol=TOL, max_iter=5000)
    assert res.status == "optimal" and len(resets) > 1


def test_the_solver_option_reaches_the_ascent(runs):
    """``KronOptions.anderson`` = 0 is the plain ascent, step for step; the default is the accelerated one."""
    name = "(14,2) two identities under a tight range"   # eight blocks: the ascent, not the one-block solve
    plain, fast = runs[name][0], runs[name][1]
    problem = _problem(name)
    assert ffu.solve(problem, method="kron", structure="symmetric", anderson=0).nit == plain.nit
    assert ffu.solve(problem, method="kron", options=ffu.KronOptions(structure="symmetric")).nit == fast.nit
    with pytest.raises(ValueError, match="anderson"):
        ffu.KronOptions(anderson=-1)
