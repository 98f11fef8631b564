"""Workload builders: shapes, seeds, structure, group sizes, targets and ranks."""

from itertools import product

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx import workloads as wl


def _rank(W):
    return int(np.linalg.matrix_rank(W))


# ---------------------------------------------------------------- random ranges


@pytest.mark.parametrize("targets", ["uniform", "random"])
def test_random_ranges_shape_and_contiguous_runs(targets):
    w = wl.random_ranges(50, targets=targets, seed=7)
    assert w.W.shape == (100, 50) and w.c.shape == (100,) and w.domain == (50,)
    assert set(np.unique(w.W)) <= {0.0, 1.0}
    for row in w.W:
        ones = np.flatnonzero(row)
        assert ones.size >= 1
        # one contiguous run of ones: indices are consecutive
        assert np.all(np.diff(ones) == 1)
    assert w.labels == ("range",) * 100
    assert w.params == {"d": 50, "targets": targets, "seed": 7}


def test_random_ranges_targets():
    assert np.array_equal(wl.random_ranges(30, "uniform", seed=1).c, np.ones(60))
    c = wl.random_ranges(500, "random", seed=1).c
    assert c.min() >= 1.0 and c.max() <= 10.0
    # U(1, 10) has mean 5.5 and sd 2.6; 1000 draws put the mean within 0.3 (> 3.5 sd).
    assert abs(c.mean() - 5.5) < 0.3
    assert c.min() < 1.2 and c.max() > 9.8


def test_random_ranges_endpoints_are_uniform_and_single_cells_occur():
    d = 20
    w = wl.random_ranges(d, seed=3)
    lengths = w.W.sum(axis=1)
    # With two independent uniform end points a range is one cell with probability 1/d.
    many = np.concatenate([wl.random_ranges(d, seed=s).W.sum(axis=1) for s in range(50)])
    assert abs(np.mean(many == 1) - 1 / d) < 0.02
    # E[length] = E|X - Y| + 1 = (d^2 - 1) / (3 d) + 1 for X, Y iid uniform on {0..d-1}.
    assert abs(many.mean() - ((d * d - 1) / (3 * d) + 1)) < 0.3
    assert lengths.max() <= d


def test_random_ranges_seeded():
    a, b = wl.random_ranges(40, "random", seed=11), wl.random_ranges(40, "random", seed=11)
    assert np.array_equal(a.W, b.W) and np.array_equal(a.c, b.c)
    c = wl.random_ranges(40, "random", seed=12)
    assert not np.array_equal(a.W, c.W) and not np.array_equal(a.c, c.c)


# ---------------------------------------------------------------- random +-1


def test_random_pm1_entries_and_frequency():
    w = wl.random_pm1(256, seed=0)
    assert w.W.shape == (512, 256)
    assert set(np.unique(w.W)) == {-1.0, 1.0}
    # 131072 Bernoulli(0.2) draws: sd of the frequency is 0.0011.
    assert abs(np.mean(w.W == 1.0) - 0.2) < 0.005
    fair = wl.random_pm1(256, seed=0, p_plus=0.5)
    assert abs(np.mean(fair.W == 1.0) - 0.5) < 0.005
    assert np.all(wl.random_pm1(8, p_plus=0.0).W == -1.0)
    assert np.all(wl.random_pm1(8, p_plus=1).W == 1.0)


def test_random_pm1_random_targets():
    w = wl.random_pm1(100, "random", seed=5)
    n_imp = 200 // 10
    imp = np.array([lab == "important" for lab in w.labels])
    assert imp.sum() == n_imp and np.all(imp[:n_imp])
    assert w.c[imp].min() >= 1 and w.c[imp].max() <= 3
    assert w.c[~imp].min() >= 10 and w.c[~imp].max() <= 15
    assert abs(w.c[~imp].mean() - 12.5) < 0.5
    u = wl.random_pm1(100, "uniform", seed=5)
    assert np.array_equal(u.c, np.ones(200)) and set(u.labels) == {"pm1"}


def test_random_pm1_seeded():
    a, b = wl.random_pm1(32, "random", seed=2), wl.random_pm1(32, "random", seed=2)
    assert np.array_equal(a.W, b.W) and np.array_equal(a.c, b.c)
    c = wl.random_pm1(32, "random", seed=3)
    assert not np.array_equal(a.W, c.W) and not np.array_equal(a.c, c.c)
    assert a.params == {"d": 32, "targets": "random", "seed": 2, "p_plus": 0.2}


# ---------------------------------------------------------------- PL94


def test_pl94_race_encoding():
    masks = wl.PL94_RACE_MASKS
    assert len(masks) == 63 and sorted(masks) == list(range(1, 64))
    assert masks[:6] == tuple(1 << r for r in range(6))
    popcounts = [bin(m).count("1") for m in masks]
    assert popcounts == sorted(popcounts)  # single races first, then pairs, ...
    assert masks[6] == 0b11  # White and Black, the first two-race combination


def test_pl94_groups_targets_and_rank():
    w = wl.pl94()
    assert w.W.shape == (319, 252) and w.domain == (2, 2, 63)
    sizes = [w.labels.count(g) for g in wl.PL94_GROUPS]
    assert sizes == [2, 2, 6, 57, 252]
    expected_c = np.repeat([1.0, 1.0, 1.0, 2.0, 4.0], sizes)
    assert np.array_equal(w.c, expected_c)
    assert _rank(w.W) == 252
    assert np.array_equal(wl.pl94(targets=(1, 1, 1, 1, 1)).c, np.ones(319))


def test_pl94_each_query_counts_the_right_cells():
    w = wl.pl94()
    W = w.W
    cells = list(product(range(2), range(2), range(63)))  # C order of (voting age, ethnicity, race)
    col = {cell: np.ravel_multi_index(cell, (2, 2, 63)) for cell in cells}
    rows = {g: W[[i for i, lab in enumerate(w.labels) if lab == g]] for g in wl.PL94_GROUPS}
    for v in range(2):
        assert set(np.flatnonzero(rows["voting_age"][v])) == {col[c] for c in cells if c[0] == v}
    for e in range(2):
        assert set(np.flatnonzero(rows["ethnicity"][e])) == {col[c] for c in cells if c[1] == e}
    for r in range(6):
        want = {col[c] for c in cells if wl.PL94_RACE_MASKS[c[2]] == 1 << r}
        assert len(want) == 4  # all four voting-age x ethnicity combinations
        assert set(np.flatnonzero(rows["one_race"][r])) == want
    multi = [m for m in wl.PL94_RACE_MASKS if bin(m).count("1") >= 2]
    for q, mask in zip(rows["two_or_more_races"], multi):
        want = {col[c] for c in cells if wl.PL94_RACE_MASKS[c[2]] == mask}
        assert set(np.flatnonzero(q)) == want and len(want) == 4
    assert np.array_equal(rows["identity"], np.eye(252))
    # Every race query (groups c and d) adds up to the total, like the race marginal.
    race = np.vstack([rows["one_race"], rows["two_or_more_races"]])
    assert np.array_equal(race.sum(axis=0), np.ones(252))


# ---------------------------------------------------------------- age pyramid


def test_age_pyramid_queries_and_targets():
    w = wl.age_pyramid()
    assert w.W.shape == (351, 232) and w.domain == (2, 116)
    assert [w.labels.count(g) for g in wl.AGE_GROUPS] == [117, 117, 117]
    assert _rank(w.W) == 232
    ones = w.c == 1.0
    assert ones.sum() == 6 and np.all(w.c[~ones] == 10.0)
    ages = np.arange(116)
    sex_weights = {"male": (1, 0), "female": (0, 1), "both": (1, 1)}
    for g, (male, female) in sex_weights.items():
        block = w.W[[i for i, lab in enumerate(w.labels) if lab == g]]
        cb = w.c[[i for i, lab in enumerate(w.labels) if lab == g]]
        for x in range(116):
            age_ind = (ages <= x).astype(float)
            assert np.array_equal(block[x], np.concatenate([male * age_ind, female * age_ind]))
            assert cb[x] == (1.0 if x == 17 else 10.0)
        adult = (ages >= 18).astype(float)
        assert np.array_equal(block[116], np.concatenate([male * adult, female * adult]))
        assert cb[116] == 1.0
    # [0, 17] + [18, 115] is the [0, 115] prefix (the total of the group).
    both = w.W[[i for i, lab in enumerate(w.labels) if lab == "both"]]
    assert np.array_equal(both[17] + both[116], both[115])
    assert np.array_equal(both[115], np.ones(232))


# ---------------------------------------------------------------- marginals


def test_marginal_queries_matches_kronecker_form():
    domain = (2, 3, 4)
    I = np.eye
    one = lambda n: np.ones((1, n))  # noqa: E731
    assert np.array_equal(wl.marginal_queries(domain, (1,)), np.kron(np.kron(one(2), I(3)), one(4)))
    assert np.array_equal(wl.marginal_queries(domain, (0, 2)), np.kron(np.kron(I(2), one(3)), I(4)))
    assert np.array_equal(wl.marginal_queries(domain, ()), np.ones((1, 24)))
    assert np.array_equal(wl.marginal_queries(domain, (0, 1, 2)), np.eye(24))
    # Attributes in another order permute the rows: row (x2, x0) lists x2 first.
    M20 = wl.marginal_queries(domain, (2, 0))
    M02 = wl.marginal_queries(domain, (0, 2))
    perm = [np.ravel_multi_index((x0, x2), (2, 4)) for x2 in range(4) for x0 in range(2)]
    assert np.array_equal(M20, M02[perm])


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_marginals_a_structure(n):
    w = wl.marginals_a(n)
    assert w.W.shape == (2 * n, 2**n) and w.domain == (2,) * n
    assert np.array_equal(w.c, np.repeat(np.arange(1, n + 1, dtype=float), 2))
    assert _rank(w.W) == n + 1
    assert np.array_equal(w.W.sum(axis=0), np.full(2**n, n))  # each cell in one row per marginal
    # Attribute 1 is the first (slowest) axis in C order.
    assert np.array_equal(w.W[0], np.concatenate([np.ones(2 ** (n - 1)), np.zeros(2 ** (n - 1))]))
    assert w.labels[:2] == ("marginal(1)", "marginal(1)")


@pytest.mark.parametrize("n", [2, 3, 5])
def test_marginals_b_structure(n):
    w = wl.marginals_b(n)
    assert w.W.shape == (4 * (n - 1), 2**n)
    assert np.array_equal(w.c, np.repeat(np.arange(1, n, dtype=float), 4))
    assert _rank(w.W) == 2 * n
    for j in range(2, n + 1):
        rows = w.W[[i for i, lab in enumerate(w.labels) if lab == f"marginal(1,{j})"]]
        assert np.array_equal(rows, wl.marginal_queries((2,) * n, (0, j - 1)))


def test_marginals_general_values_rank():
    # rank of one-way marginals: n (k - 1) + 1; two-way (1, j): (k - 1)(1 + (n - 1) k) + 1.
    assert _rank(wl.marginals_a(3, n_values=3).W) == 3 * 2 + 1
    assert _rank(wl.marginals_b(3, n_values=3).W) == 2 * (1 + 2 * 3) + 1


def test_marginals_get_the_row_basis():
    prob = ffu.FitnessProblem.from_workload(wl.marginals_a(4))
    assert prob.basis == "rows" and prob.k == 5
    prob = ffu.FitnessProblem.from_workload(wl.marginals_b(4))
    assert prob.basis == "rows" and prob.k == 8


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: wl.random_ranges(0), "`d`"),
        (lambda: wl.random_ranges(4.5), "`d`"),
        (lambda: wl.random_ranges(True), "`d`"),
        (lambda: wl.random_pm1(-3), "`d`"),
        (lambda: wl.random_ranges(8, targets="gaussian"), "`targets`.*uniform"),
        (lambda: wl.random_pm1(8, targets=None), "`targets`"),
        (lambda: wl.random_pm1(8, seed=-1), "`seed`"),
        (lambda: wl.random_ranges(8, seed=None), "`seed`"),
        (lambda: wl.random_pm1(8, p_plus=1.5), "`p_plus`"),
        (lambda: wl.random_pm1(8, p_plus=float("nan")), "`p_plus`"),
        (lambda: wl.marginals_a(0), "`n_attrs`"),
        (lambda: wl.marginals_b(1), "`n_attrs`"),
        (lambda: wl.marginals_a(3, n_values=1), "`n_values`"),
        (lambda: wl.marginals_a(40), "fourier"),
        (lambda: wl.pl94(targets=(1, 1, 1, 2)), "`targets`"),
        (lambda: wl.pl94(targets=(1, 1, 1, 2, 0)), "`targets`"),
        (lambda: wl.marginal_queries((2, 3), (2,)), "`attrs`"),
        (lambda: wl.marginal_queries((2, 3), (0, 0)), "`attrs`"),
        (lambda: wl.marginal_queries((2, 0), (0,)), "`domain"),
    ],
)
def test_bad_arguments_name_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_every_builder_gives_a_valid_problem():
    for w in (wl.prefix(8), wl.random_ranges(8, seed=1), wl.random_pm1(8, seed=1), wl.pl94(),
              wl.age_pyramid(), wl.marginals_a(3), wl.marginals_b(3)):
        prob = ffu.FitnessProblem.from_workload(w)
        assert prob.m == w.m and prob.d == w.d == int(np.prod(w.domain))
        assert len(prob.labels) == w.m
        assert not w.W.flags.writeable


# ---------------------------------------------------------------- tree and decades targets


def _runs(W):
    """(first, last + 1) of each row's one contiguous run of ones."""
    out = []
    for row in W:
        ones = np.flatnonzero(row)
        assert ones.size >= 1 and np.all(np.diff(ones) == 1)
        out.append((int(ones[0]), int(ones[-1]) + 1))
    return out


@pytest.mark.parametrize("d, branching, m", [(16, 4, 1 + 4 + 16), (8, 2, 15), (64, 4, 85), (1, 4, 1)])
def test_tree_counts_and_levels_partition_the_domain(d, branching, m):
    w = wl.tree(d, branching, seed=3)
    assert w.W.shape == (m, d) and set(np.unique(w.W)) <= {0.0, 1.0}
    assert w.params == {"d": d, "branching": branching, "targets": "uniform", "seed": 3}
    assert np.array_equal(w.c, np.ones(m)) and w.labels[0] == "level0"
    for level in sorted(set(w.labels)):
        rows = w.W[[lab == level for lab in w.labels]]
        # Each level's ranges are disjoint and cover the domain.
        np.testing.assert_array_equal(rows.sum(axis=0), np.ones(d))
    runs = _runs(w.W)
    assert runs[0] == (0, d) and sorted(runs[-d:]) == [(i, i + 1) for i in range(d)]


def test_tree_uneven_split_and_children_nest_in_parents():
    w = wl.tree(10, 4)
    runs = _runs(w.W)
    # 10 cells: blocks of 3, 3, 2, 2; then 1 + 1 + 1 per block of 3 and 1 + 1 per block of 2.
    assert runs[1:5] == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert w.m == 1 + 4 + 10 and w.labels.count("level2") == 10
    assert _rank(w.W) == 10


@pytest.mark.parametrize("build", [lambda t, s: wl.prefix(400, targets=t, seed=s),
                                   lambda t, s: wl.random_ranges(200, targets=t, seed=s),
                                   lambda t, s: wl.random_pm1(200, targets=t, seed=s),
                                   lambda t, s: wl.tree(256, targets=t, seed=s)])
def test_decades_targets_are_log_uniform_over_three_decades(build):
    c = build("decades", 5).c
    assert c.size >= 341 and c.min() >= 1.0 and c.max() <= wl.DECADES_MAX
    u = np.log10(c)
    # U(0, 3): mean 1.5, sd 0.87; with >= 341 draws the mean is within 0.2 (> 4 sd) and
    # each decade holds between a fifth and a half of the targets.
    assert abs(u.mean() - 1.5) < 0.2
    for lo in range(3):
        assert 0.2 < np.mean((u >= lo) & (u < lo + 1)) < 0.5
    np.testing.assert_array_equal(build("decades", 5).c, c)
    assert not np.array_equal(build("decades", 6).c, c)


def test_prefix_targets_default_is_unchanged_and_random_kinds_are_recorded():
    w = wl.prefix(6)
    assert w.name == "prefix(d=6)" and w.params == {"d": 6} and np.array_equal(w.c, np.ones(6))
    r = wl.prefix(6, targets="random", seed=2)
    assert r.params == {"d": 6, "targets": "random", "seed": 2} and 1.0 <= r.c.min() <= r.c.max() <= 10.0
    np.testing.assert_array_equal(r.W, w.W)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: wl.tree(0), "`d`"),
        (lambda: wl.tree(8, branching=1), "`branching`"),
        (lambda: wl.tree(8, branching=2.0), "`branching`"),
        (lambda: wl.tree(8, targets="log"), "`targets`.*decades"),
        (lambda: wl.tree(8, seed=-2), "`seed`"),
        (lambda: wl.prefix(8, targets="gaussian"), "`targets`"),
        (lambda: wl.prefix(8, targets="decades", seed=1.5), "`seed`"),
    ],
)
def test_tree_and_prefix_bad_arguments_name_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()
