"""Implicit product workloads: blocks, groups, unions; apply on dense and sparse counts; grams; labels; limits."""

import tracemalloc

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx.workloads import products
from ffu_cvx.workloads.counts import Counts


@pytest.fixture
def dom():
    return ffu.Domain({"age": 7, "sex": ["F", "M"], "region": ["N", "S", "E"]})


@pytest.fixture
def wl(dom):
    return ffu.workloads.product(dom, [
        ({"age": "prefix", "sex": "identity"}, 2.0),
        ({"region": "ranges" if dom["region"].ordered else "identity", "age": {"bands": 3}}, 1.0, "bands x region"),
        ({"age": [[1.0, -1.0, 0, 0, 0, 0, 2.0]], "sex": "total"}, 3.0),
        ({}, 0.5),
    ])


def _brute_force(wl):
    """W built row by row from the block matrices (no Kronecker products): the reference."""
    rows = []
    for g in wl.groups:
        for idx in np.ndindex(*g.shape):
            w = np.ones(1)
            for b, i in zip(g.blocks, idx):
                w = np.outer(w, b.matrix[i]).ravel()
            rows.append(w)
    return np.array(rows)


def test_dense_apply_and_counts_agree_with_a_brute_force_w(dom, wl):
    W, c = wl.dense()
    np.testing.assert_array_equal(W, _brute_force(wl))
    assert wl.m == W.shape[0] == 7 * 2 + 3 * 3 + 1 + 1 and wl.d == 42
    np.testing.assert_array_equal(c, np.repeat([2.0, 1.0, 3.0, 0.5], [14, 9, 1, 1]))
    rng = np.random.default_rng(0)
    rec = np.stack([rng.integers(0, n, 300) for n in dom.sizes], axis=1)
    counts = dom.counts(rec)
    x = counts.dense()
    np.testing.assert_allclose(wl.apply(x), W @ x, rtol=1e-13)
    np.testing.assert_allclose(wl.apply(counts), W @ x, rtol=1e-13)
    assert wl.apply(counts)[-1] == 300  # the total


def test_grams_are_the_factors_of_w_transpose_w(wl):
    W, c = wl.dense()
    total = sum(_kron(gr) for gr in wl.grams)
    np.testing.assert_allclose(total, W.T @ W, atol=1e-12)
    g = wl.groups[0]
    assert [G.shape for G in g.grams] == [(7, 7), (2, 2), (3, 3)]
    np.testing.assert_array_equal(g.grams[2], np.ones((3, 3)))  # the total's gram


def _kron(mats):
    out = np.ones((1, 1))
    for M in mats:
        out = np.kron(out, M)
    return out


def test_labels_are_made_from_attribute_and_value_names(wl):
    labels = list(wl.labels)
    assert len(labels) == len(wl.labels) == wl.m
    assert labels[:3] == ["age 0 × sex F", "age 0 × sex M", "age 0-1 × sex F"]
    assert labels[14:17] == ["age 0-2 × region N", "age 0-2 × region S", "age 0-2 × region E"]
    assert labels[23] == "age row 0" and labels[24] == "total" == wl.labels[-1] == wl.label(24)
    assert wl.labels[14:16] == labels[14:16] and [wl.label(j) for j in range(wl.m)] == labels
    assert wl.group_of(15) == (1, 1) and wl.groups[1].name == "bands x region"
    np.testing.assert_array_equal(wl.group_index(), np.repeat(np.arange(4), [14, 9, 1, 1]))
    with pytest.raises(IndexError):
        wl.label(wl.m)
    problem = ffu.FitnessProblem.from_workload(wl).dense()
    assert problem.labels == tuple(labels)


def test_labels_of_a_huge_workload_are_lazy():
    dom = ffu.Domain({f"a{i}": 1000 for i in range(4)})
    wl = ffu.workloads.product(dom, [({n: "identity" for n in dom.names}, 1.0)])
    assert wl.m == 10 ** 12
    tracemalloc.start()
    last = wl.label(10 ** 12 - 1)
    first = next(iter(wl.labels))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert last == "a0 999 × a1 999 × a2 999 × a3 999" and first == "a0 0 × a1 0 × a2 0 × a3 0"
    assert peak < 1e6


@pytest.mark.parametrize("groups, needle", [
    ([({"race": "identity"}, 1.0)], "group 0: unknown attribute 'race'"),
    ([({"age": "identity"}, 0.0)], "`group 0 target` must be a positive number"),
    ([({"age": "identity"}, -1.0)], "`group 0 target`"),
    ([({"age": np.ones((2, 5))}, 1.0)], "must have 7 columns (the attribute's size)"),
    ([({"age": {"ranges": [(0, 9)]}}, 1.0)], "outside 0..6"),
    ([({"age": "cumulative"}, 1.0)], "unknown block 'cumulative'"),
    ([({"sex": "prefix"}, 1.0)], "categorical"),
    ([({"age": {"bands": 0}}, 1.0)], "`age.bands`"),
    ([({"age": "identity"},)], "(blocks, target) pair"),
    ([{"age": "identity"}], "(blocks, target) pair"),
    ([], "`groups` is empty"),
    ({"age": "identity"}, "`groups` must be a list"),
])
def test_bad_groups_raise_naming_what_is_wrong(dom, groups, needle):
    with pytest.raises(ValueError) as info:
        ffu.workloads.product(dom, groups)
    assert needle in str(info.value)


def test_nothing_dense_above_the_limit():
    big = ffu.Domain({"age": 116, "sex": 2, "hisp": 2, "race": 63, "region": 50, "income": 300, "tenure": 3})
    wl = ffu.workloads.product(big, [({"age": "prefix", "region": "identity"}, 1.0)])
    for call in (wl.dense, wl.groups[0].dense, ffu.FitnessProblem.from_workload(wl).dense):
        with pytest.raises(ValueError) as info:
            call()
        msg = str(info.value)
        assert "cells > max_cells" in msg and ".apply(counts)" in msg and "method='kron'" in msg
    with pytest.raises(ValueError, match="method 'sdp' solves a dense problem"):
        ffu.FitnessProblem.from_workload(wl).for_method("sdp")
    assert ffu.FitnessProblem.from_workload(wl).for_method("kron").workload is wl
    counts = big.counts([[3, 0, 0, 0, 7, 0, 0], [5, 1, 1, 1, 7, 2, 2]])
    ans = wl.apply(counts).reshape(116, 50)
    assert ans[2, 7] == 0 and ans[3, 7] == 1 and ans[115, 7] == 2 and ans.sum() == 113 + 111


def test_apply_checks_its_input(dom, wl):
    with pytest.raises(ValueError, match=r"shape \(42,\)"):
        wl.apply(np.ones(41))
    other = ffu.Domain({"age": 7, "sex": 2, "region": 3})
    with pytest.raises(ValueError, match="the counts are over"):
        wl.apply(other.counts([[0, 0, 0]]))
    assert ffu.FitnessProblem.from_workload(wl).for_method("smii").m == wl.m


def test_single_query_groups_and_block_kinds(dom):
    b = products.block(dom["age"], {"ranges": [(1, 3), (4, 4)]})
    assert b.kind == "given ranges" and b.labels == ("1-3", "4") and b.attribute == "age"
    np.testing.assert_array_equal(b.matrix, [[0, 1, 1, 1, 0, 0, 0], [0, 0, 0, 0, 1, 0, 0]])
    assert products.block(dom["age"], "ranges").matrix.shape == (28, 7)
    assert products.block(dom["age"], {"bands": 3}).labels == ("0-2", "3-5", "6")
    counts = Counts.from_histogram(dom, np.arange(42))
    wl = ffu.workloads.product(dom, [({}, 1.0)])
    assert wl.apply(counts).tolist() == [sum(range(42))]
