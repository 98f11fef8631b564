"""Geography hierarchies in the Kronecker solver: attributes split class by class, attributes read
through class sums solved on their classes, levels solved apart, and the sub-hierarchy bounds,
each against the dense optimum of the same union."""

import warnings

import numpy as np
import pytest

import ffu_cvx as ffu
import ffu_cvx.solvers.kron.driver as driver
from ffu_cvx.solvers.kron import solve_kron
from ffu_cvx.solvers.kron.hierarchy import best_sub_hierarchy, frontier, nested_parts, uniform_hierarchy
from ffu_cvx.solvers.kron.reduce import classes_of, group_grids, reduce, separable
from test_kron import check_against_dense

#: Nine counties in four states of sizes 1, 2, 3 and 3.
STATES = {"ranges": [[0, 0], [1, 2], [3, 5], [6, 8]]}


def problem(groups, domain=None):
    dom = ffu.Domain(domain or {"a": 3, "b": 4, "county": 9})
    return ffu.FitnessProblem.from_workload(ffu.workloads.product(dom, groups))


def optimum(prob) -> float:
    sol = ffu.solve(prob.dense(), method="smii", tol=1e-7)
    assert sol.gap <= 1e-7
    return sol.privacy_cost


def quiet_solve(prob, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return solve_kron(prob, **kw)


def test_an_attribute_no_row_sums_across_classes_splits_class_by_class():
    prob = problem([({"a": "identity", "county": STATES}, 4.0),
                    ({"a": "identity", "b": "prefix", "county": "identity"}, 16.0),
                    ({"b": {"ranges": [[0, 1], [2, 3]]}, "county": STATES}, 3.0)])
    classes = classes_of(prob.workload)
    assert separable(group_grids(prob.groups, classes), classes) == (False, False, True)
    red = reduce(prob.workload)
    assert all(blk.pattern[2] != -1 for blk in red.blocks)      # the states are never one block
    assert {blk.pattern[2] for blk in red.blocks} >= {-2, -3, -4, -5}
    sol = quiet_solve(prob, tol=1e-7)
    assert sol.info["structure"] == "symmetric" and sol.gap <= 1e-6
    assert sol.privacy_cost * sol.max_ratio == pytest.approx(optimum(prob), rel=1e-5)
    check_against_dense(sol)


def test_a_nation_row_keeps_the_states_in_one_block():
    prob = problem([({"a": "identity"}, 1.0), ({"a": "identity", "county": STATES}, 4.0)])
    classes = classes_of(prob.workload)
    assert separable(group_grids(prob.groups, classes), classes)[2] is False


def test_an_attribute_read_through_class_sums_is_solved_on_its_classes(monkeypatch):
    monkeypatch.setattr(driver, "DENSE_D_MAX", 4)     # 4 states x 4 prefixes: too large, 4 prefixes: not
    monkeypatch.setattr(driver, "ONE_BLOCK_D_MAX", 4)
    prob = problem([({"a": "identity", "county": STATES}, 4.0), ({"b": "prefix", "county": STATES}, 3.0),
                    ({"a": "identity", "b": "identity"}, 2.0)])
    sol = quiet_solve(prob, tol=1e-7)
    assert sol.info["quotient"] == {"county": 4}
    assert sol.gap <= 1e-6 and sol.status == "optimal"
    assert sol.privacy_cost * sol.max_ratio == pytest.approx(optimum(prob), rel=1e-5)
    check_against_dense(sol)
    noise = np.array([sol.sample_answer_noise(np.random.default_rng(s)) for s in range(4000)])
    np.testing.assert_allclose(noise.var(axis=0) / sol.variances, 1.0, atol=0.12)


HIERARCHY = [({"a": "identity"}, 1.0), ({"a": "identity", "county": STATES}, 4.0),
             ({"a": "identity", "county": "identity"}, 16.0)]


def test_nested_parts_and_the_uniform_hierarchies():
    prob = problem(HIERARCHY)
    parts = nested_parts(prob, 2)
    np.testing.assert_array_equal(parts, [0, 1, 1, 2, 2, 2, 3, 3, 3])
    assert nested_parts(prob, 0) is None
    assert nested_parts(problem([({"county": "prefix"}, 1.0), ({"county": STATES}, 1.0)]), 2) is None
    assert frontier(parts) == [(2, 3), (3, 2), (4, 1)]
    uni = uniform_hierarchy(prob, 2, 3, 2)
    assert uni.domain.names == ("a", "b", "county part", "county member") and uni.domain.sizes == (3, 4, 3, 2)
    kinds = [tuple(b.kind for b in g.blocks[2:]) for g in uni.groups]
    assert kinds == [("total", "total"), ("identity", "total"), ("identity", "identity")]


def test_the_golden_section_search_finds_the_largest_bound_within_its_solves():
    points = [(S, 100 - S) for S in range(2, 60)]
    calls = []

    def bound_of(S, m):
        calls.append(S)
        return -(S - 37) ** 2
    seen = best_sub_hierarchy(bound_of, points, solves=12)
    assert max(seen, key=seen.get) == (37, 63) and len(calls) <= 12 and len(set(calls)) == len(calls)
    assert len(best_sub_hierarchy(bound_of, points, solves=3)) == 3


def test_a_hierarchy_too_large_to_reduce_is_solved_by_levels_and_bounded_by_sub_hierarchies(monkeypatch):
    monkeypatch.setattr(driver, "DENSE_D_MAX", 3)
    monkeypatch.setattr(driver, "ONE_BLOCK_D_MAX", 3)
    prob = problem(HIERARCHY)
    best = optimum(prob)
    sol = quiet_solve(prob, structure="levels", tol=1e-7, joint_time=0)   # the sub-hierarchies bound it
    assert sol.status == "optimal_inaccurate"
    parts = sol.info["parts"]
    assert [p["levels"] for p in parts][:3] == [[0, 1], [1, 2], [2, 3]] and len(parts) >= 4   # and runs of two
    released = [p for p in parts if p["released"]]
    assert sorted(k for p in released for k in range(*p["levels"])) == [0, 1, 2]
    apart = sum(p["privacy_cost"] for p in parts[:3])
    assert sum(p["privacy_cost"] for p in released) <= apart * (1 + 1e-9)
    cost = {tuple(p["levels"]): p["privacy_cost"] for p in parts}
    splits = [[(0, 1), (1, 2), (2, 3)], [(0, 2), (2, 3)], [(0, 1), (1, 3)], [(0, 3)]]
    cheapest = min(sum(cost[k] for k in split) for split in splits if all(k in cost for k in split))
    assert sum(p["privacy_cost"] for p in released) == pytest.approx(cheapest, rel=1e-12)
    assert all(p["privacy_cost"] >= p["lower_bound"] * (1 - 1e-9) for p in parts)
    # the runs meet their own targets and compose: the cost is at most the sum of theirs; the Kronecker
    # descent is cheaper on a union this small, and is returned
    levels = sol.info["costs"]["levels"] if sol.info["structure"] != "levels" else sol.privacy_cost * sol.max_ratio
    assert levels <= sum(p["privacy_cost"] for p in released) * (1 + 1e-9)
    assert sol.privacy_cost * sol.max_ratio <= levels
    check_against_dense(sol)
    h = sol.info["hierarchy"]
    assert all(b <= best * (1 + 1e-6) for _, _, b in h["sub_bounds"])
    assert h["optimum_at_most"] >= best * (1 - 1e-6)
    assert h["lower_bound"] > max(p["lower_bound"] for p in parts[:3])    # the sub-hierarchies see the sharing
    assert h["lower_bound"] <= sol.lower_bound <= best * (1 + 1e-6)


def test_the_levels_release_a_nation_and_its_states_together_exactly(monkeypatch):
    """The composed mechanism itself (not the simple structures it is compared with) against its dense
    definition, with the nation and the states released as one run (the whole problem's mixture, which
    the levels release where it is cheaper, not run: tests/test_kron_coupled.py)."""
    monkeypatch.setattr(driver, "DENSE_D_MAX", 3)
    monkeypatch.setattr(driver, "ONE_BLOCK_D_MAX", 3)
    monkeypatch.setattr(driver, "_no_worse_than_simple", lambda problem, sol, *args: sol)
    prob = problem([({"b": "identity"}, 1.0), ({"b": "identity", "county": STATES}, 2.0),
                    ({"a": "identity", "county": "identity"}, 16.0)])
    sol = quiet_solve(prob, structure="levels", tol=1e-7, joint_time=0)
    assert sol.info["structure"] == "levels"
    released = sorted(p["levels"] for p in sol.info["parts"] if p["released"])
    assert released == [[0, 2], [2, 3]]
    check_against_dense(sol)
    assert sol.max_ratio <= 1 + 1e-9
    apart = sum(p["privacy_cost"] for p in sol.info["parts"] if p["levels"][1] - p["levels"][0] == 1)
    assert sol.privacy_cost < apart * (1 - 1e-3) and sol.lower_bound <= optimum(prob) * (1 + 1e-6)


def test_the_cheapest_split_into_runs_of_adjacent_levels():
    cost = {(0, 1): 6.0, (1, 2): 1.5, (2, 3): 0.4, (0, 2): 7.0, (1, 3): 1.95}
    assert driver._cheapest_runs(cost, 3) == [(0, 2), (2, 3)]
    assert driver._cheapest_runs({**cost, (1, 3): 1.3}, 3) == [(0, 1), (1, 3)]
    assert driver._cheapest_runs({(0, 1): 1.0, (1, 2): 1.0, (0, 2): 2.5}, 2) == [(0, 1), (1, 2)]


def test_levels_on_request_and_refused_where_they_do_not_apply():
    prob = problem(HIERARCHY)
    exact = quiet_solve(prob)
    assert exact.info["structure"] == "symmetric" and exact.status == "optimal"
    levels = quiet_solve(prob, structure="levels")   # a union that reduces exactly may still be split
    assert levels.privacy_cost * levels.max_ratio >= exact.lower_bound * (1 - 1e-9)
    with pytest.raises(ValueError, match="`structure`='levels'"):
        solve_kron(problem([({"a": "identity", "county": STATES}, 1.0)]), structure="levels")


def test_an_indexed_reconstruction_is_the_formed_one(monkeypatch):
    """The county tables' reconstructions kept as distinct rows and an index: variances, noise and the
    GLS whitening equal those of the formed matrices."""
    from ffu_cvx.estimate import gls
    from ffu_cvx.solvers.kron import reduce as reduction
    from ffu_cvx.solvers.kron.terms import IndexedRecon
    prob = problem(HIERARCHY)
    formed = quiet_solve(prob, structure="symmetric", tol=1e-6)
    monkeypatch.setattr(reduction, "INDEXED_RECON_MIN", 1)
    indexed = quiet_solve(prob, structure="symmetric", tol=1e-6)
    assert any(isinstance(r, IndexedRecon) for t in indexed.terms for rs in t.recon.values() for r in rs)
    assert not any(isinstance(r, IndexedRecon) for t in formed.terms for rs in t.recon.values() for r in rs)
    np.testing.assert_array_equal(indexed.variances, formed.variances)
    assert indexed.privacy_cost == formed.privacy_cost
    np.testing.assert_allclose(indexed.sample_answer_noise(np.random.default_rng(5)),
                               formed.sample_answer_noise(np.random.default_rng(5)), rtol=1e-12, atol=1e-12)
    answers = np.random.default_rng(6).normal(size=prob.m)
    np.testing.assert_allclose(gls.operator(indexed, prob.workload).whiten(answers),
                               gls.operator(formed, prob.workload).whiten(answers), rtol=1e-9, atol=1e-9)
    check_against_dense(indexed)
