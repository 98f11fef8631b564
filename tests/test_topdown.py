"""Top-down estimation of nested count tables (ffu_cvx.estimate.topdown): the lattice, the fits, the rounding."""

import itertools

import cvxpy as cp
import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx.estimate import topdown


def _workload(sizes, groups):
    return ffu.workloads.product(ffu.Domain(sizes), [(blocks, 1.0, name) for name, blocks in groups])


def test_partition_blocks():
    dom = ffu.Domain({"a": 6})
    a = dom.attributes[0]
    from ffu_cvx.workloads.products import block
    assert np.array_equal(topdown.partition(block(a, "identity")), np.arange(6))
    assert np.array_equal(topdown.partition(block(a, "total")), np.zeros(6))
    assert np.array_equal(topdown.partition(block(a, {"bands": 4})), [0, 0, 0, 0, 1, 1])
    assert np.array_equal(topdown.partition(block(a, {"ranges": [(1, 2), (4, 5)]})), [-1, 0, 0, -1, 1, 1])
    for spec in ("prefix", {"ranges": [(0, 2), (2, 3)]}, 2 * np.eye(6)):
        assert topdown.partition(block(a, spec)) is None


def test_lattice_of_sparse_tables():
    wl = _workload({"age": 6, "race": 3, "county": 4},
                   [("county", {"county": "identity"}), ("race x county", {"race": "identity", "county": "identity"}),
                    ("band x county", {"age": {"bands": 3}, "county": "identity"}),
                    ("cells", {"age": "identity", "race": "identity", "county": "identity"}),
                    ("county again", {"county": "identity"})])
    lat = topdown.lattice(wl)
    assert lat.parents[:4] == ((), (0,), (0,), (1, 2)) and lat.depth[:4] == (0, 1, 1, 2)
    assert lat.cover == 3 and lat.same[4] == 0 and lat.published == 5 and len(lat.shapes) == 5
    assert topdown.lattice(_workload({"age": 4}, [("c", {"age": "prefix"})])) is None


def test_meets_join_the_lattice():
    """County x sex and state x sex x age share state x sex, which the workload does not publish."""
    states = [(0, 1), (2, 4)]
    wl = _workload({"county": 5, "sex": 2, "age": 3},
                   [("state x sex x age", {"county": {"ranges": states}, "sex": "identity", "age": "identity"}),
                    ("county x sex", {"county": "identity", "sex": "identity"}),
                    ("cells", {"county": "identity", "sex": "identity", "age": "identity"})])
    lat = topdown.lattice(wl)
    assert lat.published == 3 and lat.shapes[3:] == ((2, 2, 1),)
    assert lat.parents[0] == (3,) and lat.parents[1] == (3,) and lat.parents[2] == (0, 1)
    rng = np.random.default_rng(0)
    x = rng.poisson(3.0, wl.d).astype(float)
    values = [wl.groups[g].apply(x) + rng.normal(0, 2, wl.groups[g].m) for g in range(3)]
    values[:2] = [wl.groups[g].apply(x) for g in range(2)]  # consistent with the cells only through x
    values[2] = wl.groups[2].apply(x) + rng.normal(0, 2, wl.groups[2].m)
    assert np.allclose(lat.from_published(3, values), np.bincount(
        np.repeat([0, 0, 1, 1, 1], 6).reshape(5, 2, 3).reshape(-1) * 2 + np.tile(np.repeat([0, 1], 3), 5), x, 4))


def _exact_projection(v, constraints):
    t = cp.Variable(v.size)
    cons = [t >= 0]
    for parent, totals in constraints:
        for p, total in enumerate(totals):
            cons.append(cp.sum(t[np.flatnonzero(parent == p)]) == total)
    cp.Problem(cp.Minimize(cp.sum_squares(t - v)), cons).solve(solver="CLARABEL")
    return t.value


def test_simplex_projection_is_exact():
    rng = np.random.default_rng(1)
    v = rng.normal(0.5, 2.0, 40)
    parent = rng.integers(-1, 6, 40)
    parent[:6] = np.arange(6)
    totals = np.r_[0.0, rng.uniform(0, 8, 5)]
    t = topdown.project_simplices(v, parent, totals)
    assert t.min() >= 0 and np.allclose(np.bincount(parent[parent >= 0], t[parent >= 0], 6), totals)
    assert np.allclose(t, _exact_projection(v, [(parent, totals)]), atol=1e-6)


def test_two_parents_fit_is_the_projection_onto_both():
    """A 4 x 5 table with row and column sums (a transportation polytope)."""
    rng = np.random.default_rng(2)
    truth = rng.poisson(2.0, (4, 5)).astype(float)
    v = (truth + rng.normal(0, 1.5, truth.shape)).reshape(-1)
    rows, cols = np.repeat(np.arange(4), 5), np.tile(np.arange(5), 4)
    constraints = [(rows, truth.sum(axis=1)), (cols, truth.sum(axis=0))]
    t, info = topdown.fit(v, constraints)
    assert info["fit_violation"] <= 1e-6
    assert np.allclose(t, _exact_projection(v, constraints), atol=1e-4)


def _brute_rounding(t, constraints):
    base = np.floor(t)
    best, arg = np.inf, None
    for bits in itertools.product((0.0, 1.0), repeat=t.size):
        r = base + np.array(bits)
        if all(np.allclose(np.bincount(p, r, tot.size), tot) for p, tot in constraints):
            cost = np.sum((r - t) ** 2)
            if cost < best:
                best, arg = cost, r
    return arg


@pytest.mark.parametrize("parents", [1, 2])
def test_controlled_rounding_keeps_every_sum_and_is_closest(parents):
    rng = np.random.default_rng(3 + parents)
    truth = rng.uniform(0, 3, (3, 4))
    rows, cols = np.repeat(np.arange(3), 4), np.tile(np.arange(4), 3)
    row_totals = np.round(truth.sum(axis=1))
    constraints = [(rows, row_totals)]
    if parents == 2:
        col_totals = np.round(truth.sum(axis=0))
        col_totals[0] += row_totals.sum() - col_totals.sum()
        constraints.append((cols, col_totals))
    t, _ = topdown.fit(truth.reshape(-1), constraints)
    r, violation = topdown.round_in_parents(t, constraints)
    assert violation == 0 and np.all(np.abs(r - t) < 1) and r.min() >= 0
    for p, tot in constraints:
        assert np.array_equal(np.bincount(p, r, tot.size), tot)
    assert np.isclose(np.sum((r - t) ** 2), np.sum((_brute_rounding(t, constraints) - t) ** 2))


def test_estimate_nests_exactly_without_a_covering_table():
    """Age x county and race x county: the histogram (age x race x county) is fitted under both."""
    wl = _workload({"age": 5, "race": 3, "county": 4},
                   [("county", {"county": "identity"}), ("age x county", {"age": "identity", "county": "identity"}),
                    ("race x county", {"race": "identity", "county": "identity"})])
    lat = topdown.lattice(wl)
    assert lat.cover is None
    rng = np.random.default_rng(5)
    x = rng.poisson(1.0, wl.d).astype(float)
    x_tilde = x + rng.normal(0, 1, wl.d)
    values = [wl.groups[g].apply(x_tilde) for g in range(3)]
    tables, atoms, info = topdown.estimate(lat, values, atom_values=x_tilde)
    assert atoms.min() >= 0 and np.array_equal(atoms, np.round(atoms))
    assert np.array_equal(np.concatenate(tables), wl.apply(atoms))
    with pytest.raises(ValueError, match="atom_values"):
        topdown.estimate(lat, values)


def test_conflicting_parents_are_relaxed_and_reported():
    """A x B, A x C and B x C with their meets: three parents of the cells whose integer sums may conflict;
    the rounding relaxes them at a price and reports it, never failing."""
    wl = _workload({"a": 3, "b": 3, "c": 3},
                   [("ab", {"a": "identity", "b": "identity"}), ("ac", {"a": "identity", "c": "identity"}),
                    ("bc", {"b": "identity", "c": "identity"}),
                    ("abc", {"a": "identity", "b": "identity", "c": "identity"})])
    lat = topdown.lattice(wl)
    assert lat.parents[3] == (0, 1, 2)
    rng = np.random.default_rng(6)
    x = rng.poisson(0.7, wl.d).astype(float)
    for seed in range(5):
        noisy = x + np.random.default_rng(seed).normal(0, 1, wl.d)
        tables, atoms, info = topdown.estimate(lat, [wl.groups[g].apply(noisy) for g in range(4)])
        assert atoms.min() >= 0 and info["tables"][3]["violation"] >= 0
        if info["tables"][3]["violation"] == 0:
            assert np.array_equal(np.concatenate(tables), wl.apply(atoms))


def test_a_histogram_under_many_conflicting_tables_ends_in_its_time_budget(monkeypatch):
    """All ten three-way marginals of five attributes: the histogram has ten parents, its 0/1 programme is
    not integral and branch and bound would not end; HiGHS's best point within the time budget is taken, the
    conflicts are reported, and the published tables are still the sums of one non-negative integer histogram."""
    import time

    monkeypatch.setattr(topdown, "ROUNDING_SECONDS", 1.0)
    names = "abcde"
    wl = _workload({n: 3 for n in names}, [("".join(t), {n: "identity" for n in t})
                                           for t in itertools.combinations(names, 3)])
    lat = topdown.lattice(wl)
    assert lat.cover is None and len(lat.shapes) == 10 + 10 + 5 + 1
    rng = np.random.default_rng(7)
    x = rng.poisson(0.6, wl.d).astype(float)
    noisy = x + rng.normal(0, 1.5, wl.d)
    t0 = time.perf_counter()
    tables, atoms, info = topdown.estimate(lat, [g.apply(noisy) for g in wl.groups], atom_values=noisy)
    assert time.perf_counter() - t0 < 30
    assert atoms.min() >= 0 and np.array_equal(atoms, np.round(atoms))
    assert info["atoms"]["violation"] == np.abs(np.concatenate(tables) - wl.apply(atoms)).sum()
