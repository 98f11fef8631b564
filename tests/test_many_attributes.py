"""Unions of product groups over many attributes: the symmetry reduction forms only the blocks
the groups reach, against the enumeration of every block on small domains and the dense
optimum; 1-way marginals of 100 binary attributes by the block ascent and the Fourier
route, against each other's certificates and the closed form.

``python tests/test_many_attributes.py`` prints the solve times of the large cases.
"""

import itertools
import math
import time

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx.solvers.kron import reduce as kron_reduce
from ffu_cvx.solvers.kron import structure_of
from ffu_cvx.solvers.kron import terms as kron_terms

TOL = 1e-4


def binary_union(n_attrs, sets, target_of=lambda A: 1.0):
    """The union of the marginals ``sets`` (tuples of attribute indices) over ``n_attrs`` binary attributes."""
    dom = ffu.Domain({f"x{i}": 2 for i in range(n_attrs)})
    groups = [({f"x{i}": "identity" for i in A}, target_of(A)) for A in sets]
    return ffu.FitnessProblem.from_workload(ffu.workloads.product(dom, groups))


def one_way(n_attrs, count=None):
    return binary_union(n_attrs, [(i,) for i in range(n_attrs if count is None else count)],
                        lambda A: 1.0 + A[0] % 3)


def normalised(sol):
    return sol.privacy_cost * sol.max_ratio


def assert_certified(sol):
    assert sol.status == "optimal" and sol.gap <= TOL
    assert sol.max_ratio <= 1.0 + TOL


# ----------------------------------------------------------------------------- against every block
def every_block_beta(problem):
    """``{S: {g: beta_{g,S} > 0}}`` over all ``2^|sym|`` sets, from the projectors themselves."""
    groups, sizes = problem.groups, problem.domain.sizes
    sym = [i for i, c in enumerate(kron_reduce.classes_of(problem.workload)) if c.r == 1]
    split = [i for i in sym if sizes[i] >= 2]
    out = {}
    for r in range(len(split) + 1):
        for part in itertools.combinations(split, r):
            beta = {}
            for g, grp in enumerate(groups):
                b = 1.0
                for i in sym:
                    n = sizes[i]
                    ones = np.full((n, n), 1.0 / n)
                    proj = np.eye(n) - ones if i in part else ones
                    b *= float(np.sum((grp.blocks[i].matrix[0] @ proj) ** 2))
                if b > 1e-12:
                    beta[g] = b
            if beta:
                out[part] = beta
    return out


MIXED = [
    ({"a": 4, "b": 2, "c": 3, "d": 1, "e": 2, "f": 2},
     [({"a": "prefix", "b": "identity"}, 1.0), ({"b": "identity", "c": "identity", "d": "identity"}, 2.0),
      ({"c": "identity", "e": "identity"}, 0.5), ({"f": "identity"}, 1.5), ({}, 3.0)]),
    ({f"x{i}": 2 for i in range(7)},
     [({f"x{i}": "identity"}, 1.0 + i % 3) for i in range(7)] + [({"x0": "identity", "x5": "identity"}, 2.0)]),
]


@pytest.mark.parametrize("domain, groups", MIXED)
def test_reduction_has_exactly_the_blocks_some_group_reaches(domain, groups):
    problem = ffu.FitnessProblem.from_workload(ffu.workloads.product(ffu.Domain(domain), groups))
    expected = every_block_beta(problem)
    red = kron_reduce.reduce(problem.workload)
    assert [blk.part for blk in red.blocks] == list(expected)  # by size, then lexicographically
    for blk in red.blocks:
        assert sorted(blk.beta) == sorted(expected[blk.part])
        for g, b in blk.beta.items():
            assert np.ptp(b) == 0 and float(np.max(b)) == pytest.approx(expected[blk.part][g], rel=1e-12)
    assert structure_of(problem)[1].count(f"{len(red.blocks)} block(s)") == 1


@pytest.mark.parametrize("domain, groups", MIXED)
def test_small_unions_reach_the_dense_optimum(domain, groups):
    problem = ffu.FitnessProblem.from_workload(ffu.workloads.product(ffu.Domain(domain), groups))
    dense = ffu.solve(problem.dense(), method="smii", tol=1e-8)
    for method in ("kron", "auto"):
        sol = ffu.solve(problem, method=method)
        assert_certified(sol)
        assert normalised(sol) == pytest.approx(dense.privacy_cost, rel=TOL)
        assert sol.lower_bound <= dense.privacy_cost * (1 + 1e-9)
        np.testing.assert_allclose(sol.variances, np.concatenate([sol.group_variances(g)
                                                                 for g in range(len(problem.groups))]))


# ----------------------------------------------------------------------------- many attributes
def test_one_way_marginals_of_100_binary_attributes_at_one_target_have_the_closed_form():
    n, c = 100, 2.0
    problem = binary_union(n, [(i,) for i in range(n)], lambda A: c)
    expected = (1 + math.sqrt(n)) ** 2 / (4 * c)  # Fourier components: the total and one per attribute
    for method in ("kron", "auto"):
        sol = ffu.solve(problem, method=method)
        assert_certified(sol)
        assert normalised(sol) == pytest.approx(expected, rel=1e-9)


def test_one_way_marginals_of_100_binary_attributes_certify_each_other():
    problem = one_way(100)
    assert structure_of(problem)[0] == "symmetric"
    kron = ffu.solve(problem, method="kron")
    auto = ffu.solve(problem, method="auto")
    assert kron.info["structure"] == "symmetric" and kron.info["blocks"] == 101
    assert auto.info["structure"] == "fourier"
    for sol, other in ((kron, auto), (auto, kron)):
        assert_certified(sol)
        assert sol.lower_bound <= normalised(other) * (1 + 1e-9)
    assert normalised(kron) == pytest.approx(normalised(auto), rel=TOL)
    assert kron.variances.shape == (200,)


def test_two_one_way_marginals_over_40_binary_attributes():
    problem = one_way(40, count=2)
    kron = ffu.solve(problem, method="kron")
    auto = ffu.solve(problem, method="auto")
    assert kron.info["blocks"] == 3
    for sol in (kron, auto):
        assert_certified(sol)
        assert sol.lower_bound <= min(normalised(kron), normalised(auto)) * (1 + 1e-9)
    # targets 1 and 2: the Fourier optimum of two binary 1-way marginals
    exact = ffu.fourier.min_privacy_cost((2, 2), {(0,): 1.0, (1,): 2.0}).privacy_cost
    assert normalised(auto) == pytest.approx(exact, rel=1e-8)
    assert normalised(kron) == pytest.approx(exact, rel=TOL)
    z = kron.sample_answer_noise(np.random.default_rng(0))
    assert z.shape == (4,) and np.all(np.isfinite(z))


def test_structured_attribute_beside_70_symmetric_ones():
    """Dense 8 x 8 blocks over the structured attribute, one per block the groups reach."""
    n = 70
    dom = ffu.Domain({"age": 8, **{f"x{i}": 2 for i in range(n)}}, ordered=["age"])
    groups = ([({"age": "prefix"}, 1.0)] + [({f"x{i}": "identity"}, 1.0 + i % 3) for i in range(n)]
              + [({"age": "identity", "x0": "identity"}, 2.0)])
    problem = ffu.FitnessProblem.from_workload(ffu.workloads.product(dom, groups))
    sol = ffu.solve(problem, method="auto")
    assert sol.info["structure"] == "symmetric" and sol.info["blocks"] == n + 1 and sol.info["D"] == 8
    assert_certified(sol)
    # dropping groups can only lower the optimum: the prefix alone (Table 2, d = 8) is below
    prefix = ffu.solve(ffu.FitnessProblem.from_workload(ffu.workloads.prefix(8)), method="sdp")
    assert prefix.privacy_cost < sol.lower_bound


def test_noise_of_terms_with_more_factors_than_numpy_axes_has_the_variances():
    """Each term of 1-way marginals over 100 binary attributes has 101 factors of rank 1:
    its noise is one standard normal, so unit draws give the exact covariance."""
    sol = ffu.solve(one_way(100), method="kron")
    terms = sol.terms
    assert all(len(t.factors) == 101 and all(f.k == 1 for f in t.factors) for t in terms)
    for g in (0, 57):
        rows = tuple(b.matrix.shape[0] for b in sol.problem.groups[g].blocks)
        unit = np.eye(len(terms))
        cols = [kron_terms.group_noise(terms, unit[t], g, rows) for t in range(len(terms)) if g in terms[t].recon]
        assert len(cols) == 2  # the total's block and the group's own
        cov = sum(np.outer(c, c) for c in cols)
        np.testing.assert_allclose(np.diag(cov), sol.group_variances(g), rtol=1e-12)


@pytest.mark.slow
def test_two_way_marginals_of_30_binary_attributes():
    sets = list(itertools.combinations(range(30), 2))
    problem = binary_union(30, sets, lambda A: 1.0 + sum(A) % 3)
    kron = ffu.solve(problem, method="kron")
    auto = ffu.solve(problem, method="auto")
    assert kron.info["blocks"] == 1 + 30 + len(sets)
    for sol, other in ((kron, auto), (auto, kron)):
        assert_certified(sol)
        assert sol.lower_bound <= normalised(other) * (1 + 1e-9)


def _timings():
    cases = {"1-way, 20 binary attributes": lambda: one_way(20),
             "2 1-way, 40 binary attributes": lambda: one_way(40, count=2),
             "1-way, 100 binary attributes": lambda: one_way(100),
             "2-way, 30 binary attributes": lambda: binary_union(30, list(itertools.combinations(range(30), 2)),
                                                                 lambda A: 1.0 + sum(A) % 3)}
    for name, build in cases.items():
        problem = build()
        for method in ("kron", "auto"):
            t0 = time.perf_counter()
            sol = ffu.solve(problem, method=method)
            print(f"{name:32s} {method:5s} {time.perf_counter() - t0:6.2f} s  gap {sol.gap:.1e}")


if __name__ == "__main__":
    _timings()
