"""The census experiment and the Kronecker benchmark in their quick forms."""

import numpy as np
import pytest

import ffu_cvx as ffu

from experiments import bench_kron, census


def test_census_quick_compares_at_equal_privacy():
    rows = {r["mechanism"]: r for r in census.main(["--quick", "--quiet"])}
    assert set(rows) == set(census.MECHANISMS)
    kron = rows["kron"]
    assert kron["ratio"] == pytest.approx(1.0, rel=1e-6) and kron["gap"] <= 1e-4
    for name in ("identity", "GM (Kronecker)", "HM (Kronecker)"):
        # at equal privacy cost a baseline's worst ratio is its cost over the solver's
        assert rows[name]["ratio"] == pytest.approx(rows[name]["privacy_cost"] / kron["privacy_cost"], rel=1e-6)
        assert rows[name]["ratio"] > 1.0 and rows[name]["lower_bound"] == kron["lower_bound"]


def test_bench_kron_quick_bank_matches_the_dense_optimum():
    rows = bench_kron.main(["--quick", "--quiet", "--cases", "bank"])
    assert len(rows) == len(bench_kron.QUICK_BANK)
    for r in rows:
        assert abs(r["kron_excess"]) <= 1e-4 and r["bound_excess"] <= 1e-9
        assert r["kron"] <= min(r["kronecker"], r["independent"])


def test_census_tables_reduce_to_small_blocks():
    from experiments import census_tables
    from ffu_cvx.solvers.kron import reduce as kron_reduce
    from ffu_cvx.solvers.kron import structure_of
    problem = census_tables.problem("national")
    assert problem.d == 500_480 and len(problem.groups) == 13
    classes = kron_reduce.classes_of(problem.workload)
    assert [c.r for c in classes] == [1, 1, 8, 1, 25]   # race: White, 5 other races alone, 2..6 races, none
    assert structure_of(problem, classes)[0] == "symmetric"


def test_census_tables_baselines_are_never_below_the_bound():
    import ffu_cvx as ffu
    from experiments import census_tables
    from ffu_cvx.solvers.kron import solve_kron
    race = census_tables.race_blocks()
    dom = ffu.Domain({"sex": 2, "race": 64, "age": 12})
    wl = ffu.workloads.product(dom, [({"race": race["alone"], "age": {"bands": 4}}, 4.0),
                                     ({"race": race["count"], "sex": "identity"}, 2.0), ({}, 1.0)])
    problem = ffu.FitnessProblem.from_workload(wl)
    ours = solve_kron(problem)
    assert ours.status == "optimal"
    for sol in (census_tables.hdmm_solution(problem, ours.lower_bound),
                census_tables.identity_solution(problem, ours.lower_bound)):
        assert sol.privacy_cost * sol.max_ratio >= ours.lower_bound
        assert sol.privacy_cost * sol.max_ratio >= ours.privacy_cost * ours.max_ratio * (1 - 1e-4)


@pytest.mark.parametrize("which", ["prefix", "halves"])
def test_hdmm_style_factor_is_the_total_squared_error_optimum(which):
    """Per attribute, min tr(G Sigma) with every cell's profile at most 1, on the attribute's exchangeable
    classes (singletons for prefix sums; two classes of four for an identity, a total and two half sums),
    against CVXPY over the cells."""
    cp = pytest.importorskip("cvxpy")
    from types import SimpleNamespace

    import numpy as np
    from experiments import census_tables
    from ffu_cvx.solvers.kron.exchange import exchange_classes
    n = {"prefix": 6, "halves": 8}[which]
    halves = np.kron(np.eye(2), np.ones((1, n // 2)))
    blocks = ([np.tril(np.ones((n, n))), np.ones((1, n))] if which == "prefix"
              else [np.eye(n), np.ones((1, n)), halves])
    weights = [1.0, 3.0, 0.5][:len(blocks)]
    classes = exchange_classes(blocks, n)
    assert classes.r == {"prefix": 6, "halves": 2}[which]
    grams = [census_tables._gram(SimpleNamespace(matrix=A, kind=""), classes) for A in blocks]
    G = census_tables._Reduced(sum(w * x.avg for w, x in zip(weights, grams)),
                               sum(w * x.res for w, x in zip(weights, grams)))
    read = census_tables._Reduced(sum(x.avg for x in grams), sum(x.res for x in grams))
    B, S = census_tables._tse_mechanism(classes, *census_tables._tse_factor(classes, G, read, 300))
    np.testing.assert_allclose(B @ B.T, np.eye(B.shape[0]), atol=1e-12)
    sigma = B.T @ S @ B                                                        # over the cells
    profile = np.einsum("ij,ij->j", B, np.linalg.solve(S, B))
    assert profile.max() == pytest.approx(1.0, rel=1e-9)
    W = np.vstack([np.sqrt(w) * A for w, A in zip(weights, blocks)])
    X = cp.Variable((n, n), PSD=True)
    best = cp.Problem(cp.Minimize(cp.matrix_frac(W.T, X)), [cp.diag(X) <= 1]).solve()
    assert np.trace(W @ sigma @ W.T) == pytest.approx(best, rel=1e-3)
    assert np.trace(W @ sigma @ W.T) < np.trace(W @ W.T)          # better than the identity strategy


@pytest.mark.slow
def test_census_tables_quick_run_compares_at_equal_privacy_and_releases():
    from experiments import census_tables
    rows = {r["mechanism"]: r for r in census_tables.main(["--quick", "--quiet", "--no-cache"])}
    assert set(rows) == set(census_tables.MECHANISMS) | {census_tables.RELEASE}
    ours = rows["ours"]
    assert ours["worst"] == pytest.approx(1.0) and ours["gap"] <= 1e-4 and ours["status"] == "optimal"
    assert ours["vs_simple"] <= 1.0
    for name in ("best simple", "HDMM-style", "identity"):
        assert rows[name]["worst"] >= 1.0 and rows[name]["gap"] >= 0.0
    assert rows[census_tables.RELEASE]["worst"] <= 1.0 + 1e-9


def test_sf1_persons_is_hdmms_workload_and_reduces():
    from experiments import census_tables
    from ffu_cvx.solvers.kron import reduce as kron_reduce
    problem = census_tables.problem("sf1")
    assert (problem.d, problem.m, len(problem.groups)) == (500_480, 4_151, 33)
    assert all(g.target == 1.0 for g in problem.groups)
    classes = kron_reduce.classes_of(problem.workload)
    assert [c.r for c in classes] == [1, 2, 8, 1, 25]
    assert kron_reduce.reduce(problem.workload, classes).D <= 400


def test_census_tables_sf1_geographies_and_hierarchy_build():
    """Sizes only, no solve: SF1 by state and county, the hierarchy over 51 states of real sizes."""
    from experiments import census_tables as ct
    sf1 = ct.problem("sf1")
    assert (sf1.d, sf1.m, len(sf1.groups)) == (500_480, 4_151, 33)
    for case, n in (("sf1_states", 51), ("sf1_counties", 3_143)):
        prob = ct.problem(case)
        assert (prob.d, prob.m, len(prob.groups)) == (500_480 * n, 4_151 * (1 + n), 66)
    states = ct.state_of_county()
    assert len(states) == 3_143 == sum(n for _, n in ct.STATE_COUNTIES) and len(set(states)) == 51
    assert dict(ct.STATE_COUNTIES)["TX"] == 254 and dict(ct.STATE_COUNTIES)["DC"] == 1
    dom, groups = ct.hierarchy_tables()
    state = ffu.workloads.products.block(dom["county"], {"level": "state"}).matrix   # counties state by state
    assert state.shape == (51, 3_143) and np.array_equal(np.flatnonzero(np.diff(state.argmax(axis=0))) + 1,
                                                         np.cumsum([n for _, n in ct.STATE_COUNTIES])[:-1])
    prob = ct.problem("hierarchy")
    per_level = prob.m // (1 + 51 + 3_143)
    assert prob.d == 2 * 2 * 64 * 115 * 3_143 and prob.m == per_level * (1 + 51 + 3_143)
    assert len(prob.groups) == 33 and sorted({g[1] for g in groups}) == [1.0, 4.0, 16.0]
    race = ct.problem("hierarchy_race")   # without age: the race tables at every level
    assert race.domain.names == ("sex", "hispanic", "race", "county") and race.d == 2 * 2 * 64 * 3_143
    assert len(race.groups) == 18 and all("age" not in g.name for g in race.groups)


def test_census_tables_say_where_a_levels_bound_comes_from():
    from types import SimpleNamespace

    from experiments import census_tables as ct
    parts = [dict(groups=["P1 total, county"], levels=[2, 3], released=True),
             dict(groups=["P1 total, nation", "P1 total, state"], levels=[0, 2], released=True),
             dict(groups=["P1 total, nation"], levels=[0, 1], released=False)]
    joint = dict(steps=69, time=301.0, estimate=7.878, mixed=17, lower_bound=7.869)
    sol = SimpleNamespace(info=dict(parts=parts, joint=joint, hierarchy=None))
    assert ct._released_runs(sol) == "nation+state | county"
    assert "whole problem's ascent" in ct._levels_bound(sol) and "69 steps, 301 s" in ct._levels_bound(sol)
    assert "a mixture of 17 of its primal points costs about 7.878" in ct._levels_bound(sol)
    sol.info["joint"] = dict(joint, released=True, form_time=95.2, privacy_cost=7.8712)
    assert ct._released_runs(sol) == "the whole problem's mixture of 17 primal points, formed in 95 s"
    assert "costs about 7.878, 7.871 priced exactly" in ct._levels_bound(sol)
    sol.info.update(joint=None, hierarchy=dict(sub_bounds=[[39, 23, 7.84]], optimum_at_most=7.892))
    assert ct._levels_bound(sol) == "bound from the 39x23 uniform sub-hierarchies; the padded hierarchy costs 7.892"
    sol.info.update(hierarchy=None)
    assert ct._levels_bound(sol) == "bound from its runs"
