"""Blocks coupled across the classes of one attribute (the states of a geography, joined by the
national rows): the structured step and the rigorous bound against the dense block they stand for,
the ascent against the dense optimum, and the levels' certificate from them."""

import math
import warnings

import numpy as np
import pytest

import ffu_cvx as ffu
import ffu_cvx.solvers.kron.driver as driver
from ffu_cvx.solvers.kron import coupled, solve_kron
from ffu_cvx.solvers.kron import reduce as reduce_module
from ffu_cvx.solvers.kron import terms as terms_module
from ffu_cvx.solvers.kron.coupled import CoupledBlock
from ffu_cvx.solvers.kron import KronSolution
from ffu_cvx.solvers.kron.reduce import (_block_precision, _cholesky_upper, _flat_variances, _start, _step_all,
                                         _update, ascent, certified_bound, classes_of, coupled_reduction,
                                         mixed_covariances, mixture, reduce)
from test_kron import check_against_dense

#: Eleven counties in five states of sizes 1, 2, 3, 3 and 2.
STATES = {"ranges": [[0, 0], [1, 2], [3, 5], [6, 8], [9, 10]]}
HIERARCHY = [({"a": "identity", "b": "prefix"}, 1.0), ({"a": "identity", "county": STATES}, 4.0),
             ({"b": "prefix", "county": STATES}, 3.0), ({"a": "identity", "county": "identity"}, 16.0),
             ({"a": "total", "b": "identity"}, 2.0)]


def problem(groups):
    dom = ffu.Domain({"a": 3, "b": 4, "county": 11})
    return ffu.FitnessProblem.from_workload(ffu.workloads.product(dom, groups))


def optimum(prob) -> float:
    """The dense optimum, certified to 1e-7 (its cost: a mechanism at least as cheap exists)."""
    sol = ffu.solve(prob.dense(), method="smii", tol=1e-7)
    assert sol.gap <= 1e-7
    return sol.privacy_cost


def points(dense, n: int = 3, every: int = 25):
    """Multipliers along the dense ascent: the uniform start, then every ``every`` steps."""
    lam, mu = _start(dense)
    out = []
    for _ in range(n):
        out.append((lam, mu))
        for _ in range(every):
            F, _, p, v = _step_all(dense, lam, mu)
            lam, mu = _update(dense, lam, mu, p, v, F, 1.9)
    return out


@pytest.fixture(scope="module")
def reductions():
    prob = problem(HIERARCHY)
    classes = classes_of(prob.workload)
    return prob, coupled_reduction(prob.workload, classes), reduce(prob.workload, classes)


def test_the_states_are_coupled_by_the_national_rows_only(reductions):
    prob, red, dense = reductions
    blocks = [b for b in red.blocks if isinstance(b, CoupledBlock)]
    assert blocks and all(b.attr == 2 and b.r == 5 for b in blocks)
    assert set().union(*[b.coupling for b in blocks]) == {0, 4}                  # the national groups
    sizes = np.array([1, 2, 3, 3, 2])
    u = next(b.coupling[0][0] for b in blocks if 0 in b.coupling)
    np.testing.assert_allclose(np.sort(u), np.sort(np.sqrt(sizes)))           # the total's class sums
    assert max(b.D for b in blocks) == max(b.D for b in dense.blocks if b.pattern[2] == -1)
    assert sum(b.D for b in dense.blocks) == sum(b.D for b in red.blocks)      # the same coordinates


def same_steps(prob, red, dense, lam, mu, rel: float, rtol_v: float) -> list:
    """The steps of ``red`` and ``dense`` at ``(lam, mu)`` agree (``F`` to ``rel``, the profile to 1e-5,
    the variances to ``rtol_v``); ``red``'s blocks' steps."""
    F, steps, p, v = _step_all(red, lam, mu)
    Fd, _, pd, vd = _step_all(dense, lam, mu)
    assert F == pytest.approx(Fd, rel=rel)
    np.testing.assert_allclose(p, pd, rtol=1e-5)
    for g in range(len(prob.groups)):
        np.testing.assert_allclose(np.broadcast_to(v[g], np.shape(vd[g])), vd[g], rtol=rtol_v)
    return steps


def test_the_coupled_step_is_the_dense_step(reductions):
    prob, red, dense = reductions
    for lam, mu in points(dense):
        steps = same_steps(prob, red, dense, lam, mu, 1e-5, 5e-4)
        assert all(s[1] is None for s, b in zip(steps, red.blocks) if isinstance(b, CoupledBlock))


def test_the_coupled_bound_is_rigorous_and_tight(reductions):
    prob, red, dense = reductions
    for lam, mu in points(dense):
        bound, exact = certified_bound(red, lam, mu), certified_bound(dense, lam, mu)
        assert exact * (1 - 1e-7) <= bound <= exact * (1 + 1e-10)


def test_the_bound_never_exceeds_the_nuclear_norm_on_random_blocks(reductions):
    """Random multipliers, far from any ascent: the bound stays below the exact ``F`` block by block."""
    prob, red, dense = reductions
    rng = np.random.default_rng(3)
    lam0, mu0 = _start(dense)
    by_pattern = {b.pattern: b for b in dense.blocks}
    for _ in range(5):
        lam = lam0 * rng.lognormal(0, 3, lam0.shape)
        lam = lam / lam.sum()
        mu = [m * rng.lognormal(0, 3, m.shape) for m in mu0]
        for blk in (b for b in red.blocks if isinstance(b, CoupledBlock)):
            exact = certified_bound(type(dense)(dense.workload, dense.classes, dense.grids, [by_pattern[blk.pattern]]),
                                    lam, [m / sum(float(x.sum()) * c for x, c in zip(mu, dense.targets)) for m in mu])
            mc = sum(float(m.sum()) * c for m, c in zip(mu, dense.targets))
            F = coupled.bound(blk, lam, [m / mc for m in mu])
            assert F * F <= exact * (1 + 1e-10)       # the dense nuclear norm has its own rounding
            assert F * F >= exact * (1 - 1e-4)
        assert coupled.step(blk, lam, mu, _cholesky_upper)[0] > 0


def test_the_coupled_ascent_certifies_the_optimum(reductions):
    prob, red, dense = reductions
    best = optimum(prob)
    res = ascent(red, tol=1e-5, max_iter=3000)
    assert res.status == "optimal"
    assert best * (1 - 2e-5) <= res.lower_bound <= best
    assert res.cost == pytest.approx(best, rel=1e-4)       # the estimate, from the approximate step
    with pytest.raises(ValueError, match="never formed"):
        red.terms(res.sigmas)


def test_a_mixture_of_primal_points_costs_what_it_claims(reductions):
    prob, red, dense = reductions
    lam, mu = _start(dense)
    steps, sigmas, single = [], [], []
    for _ in range(12):                       # early steps: each primal point well above the optimum
        F, st, p, v = _step_all(dense, lam, mu)
        steps.append((p, _flat_variances(dense, v)))
        sigmas.append([s[1] for s in st])
        single.append(float(p.max()) * max(float(np.max(vg)) / c for vg, c in zip(v, dense.targets)))
        lam, mu = _update(dense, lam, mu, p, v, F, 1.9)
    cost, c = mixture(dense, steps)
    assert np.count_nonzero(c) >= 2 and cost <= min(single) * (1 - 1e-3)
    # the mixture formed: X = sum_t c_t Sigma_t^{-1} per block, priced exactly by its terms
    mixed = [np.linalg.inv(sum(ct * np.linalg.inv(sig[k]) for ct, sig in zip(c, sigmas) if ct > 0))
             for k in range(len(dense.blocks))]
    sol = KronSolution.from_terms(prob, dense.terms(mixed))
    assert optimum(prob) * (1 - 1e-7) <= sol.privacy_cost * sol.max_ratio <= cost * (1 + 1e-9)
    res = ascent(red, tol=1e-5, max_iter=40, keep_steps=30)
    assert len(res.steps) == min(30, res.nit)
    cut = mixture(red, res.steps)[0]
    assert optimum(prob) * (1 - 1e-4) <= cut < math.inf                        # the coupled steps' mixture


def test_a_formed_coupled_block_is_the_dense_block_it_stands_for(reductions):
    """The formed blocks step as the dense reduction's (the same block on another basis), and the coupled
    step's primal point formed from its quadrature is the dense step's."""
    prob, red, dense = reductions
    formed = red.formed()
    assert [b.pattern for b in formed.blocks] == [b.pattern for b in red.blocks]
    for lam, mu in points(dense):
        same_steps(prob, formed, dense, lam, mu, 1e-6, 1e-9)
        for cb, fb in zip(red.blocks, formed.blocks):
            if isinstance(cb, CoupledBlock):
                X = _block_precision(fb, lam, mu)
                np.testing.assert_allclose(coupled.precision(cb, lam, mu, _cholesky_upper), X,
                                           atol=2e-5 * np.abs(X).max())


@pytest.mark.parametrize("sparse_rows, indexed_min", [(0.0, 1 << 22), (1.0, 1)])   # formed rows dense; sparse, indexed
def test_the_coupled_mixture_formed_is_one_mechanism_priced_exactly(reductions, sparse_rows, indexed_min, monkeypatch):
    monkeypatch.setattr(reduce_module, "SPARSE_ROWS", sparse_rows)
    monkeypatch.setattr(reduce_module, "INDEXED_RECON_MIN", indexed_min)
    prob, red, dense = reductions
    best = optimum(prob)
    res = ascent(red, tol=1e-6, max_iter=40, keep_steps=40)
    cost, c = mixture(red, res.steps)
    assert np.count_nonzero(c) >= 2
    sol = KronSolution.from_terms(prob, red.formed().terms(mixed_covariances(red, res.steps, c)))
    check_against_dense(sol, rtol=1e-6)           # its terms are the mechanism they claim (condition 1e10)
    released = sol.privacy_cost * sol.max_ratio
    assert best * (1 - 1e-9) <= released <= cost * (1 + 2e-4)   # the program's variances are the approximate step's


def test_the_profile_max_on_classes_of_values_is_the_exact_max(reductions, monkeypatch):
    """Above ``GRID_MAX`` cells the max is taken on the values' classes that no profile tells apart, and is
    still the exact max; only above it on those too is it the terms' maxes summed."""
    prob, red, dense = reductions
    _, steps, _, _ = _step_all(dense, *_start(dense))
    terms, sizes = dense.terms([s[1] for s in steps]), prob.domain.sizes
    exact, is_exact = terms_module.profile_max(terms, sizes)
    assert is_exact and exact == pytest.approx(terms_module.profile_vector(terms, sizes).max(), rel=1e-12)
    monkeypatch.setattr(terms_module, "GRID_MAX", 24)         # 4 x 11 cells where it varies, 4 x 5 classes
    assert terms_module.profile_max(terms, sizes) == (pytest.approx(exact, rel=1e-12), True)
    monkeypatch.setattr(terms_module, "GRID_MAX", 4)
    summed, is_exact = terms_module.profile_max(terms, sizes)
    assert not is_exact and summed > exact


def test_rows_are_labelled_equal_exactly_where_they_are_equal():
    rng = np.random.default_rng(2)
    rows = rng.integers(0, 3, (40, 6)).astype(float)[rng.integers(0, 12, 200)]      # 12 rows, repeated
    w = np.random.default_rng(0).standard_normal(6)
    near = rows[0] + 4.0 * (w[1] * np.eye(6)[0] - w[0] * np.eye(6)[1])            # another row, same projection
    rows = np.vstack([rows, near])
    labels = terms_module._row_labels(rows)
    same = labels[:, None] == labels[None, :]
    np.testing.assert_array_equal(same, np.all(rows[:, None, :] == rows[None, :, :], axis=2))


def test_a_mostly_zero_reconstruction_is_read_by_a_sparse_product(monkeypatch):
    """A formed block's rows read one class each: their variances by a sparse product equal the dense ones,
    and a factor scaled carries its variances and profile over, scaled."""
    rng = np.random.default_rng(5)
    k = terms_module.SPARSE_K_MIN + 88
    R = np.zeros((40, k))
    for row in range(40):
        cols = rng.choice(k, 20, replace=False)
        R[row, cols] = rng.standard_normal(20)
    A = rng.standard_normal((k, k))
    sigma = A @ A.T / k + np.eye(k)
    dense = np.einsum("ij,ij->i", R @ sigma, R)
    np.testing.assert_allclose(terms_module._diag_quadratic(R, sigma), dense, rtol=1e-12)
    monkeypatch.setattr(terms_module, "SPARSE_CHUNK", 7 * k)                  # seven rows at a time
    np.testing.assert_allclose(terms_module._diag_quadratic(R, sigma), dense, rtol=1e-12)
    f = terms_module.Factor.build((0,), np.eye(k), sigma)
    np.testing.assert_allclose(f.variances(R), dense, rtol=1e-12)
    p = f.profile()
    g = f.scaled(3.0)
    assert id(R) in g._variances and g.known_profile is not None          # carried over, not computed again
    np.testing.assert_allclose(g.variances(R), 3.0 * dense, rtol=1e-12)
    np.testing.assert_allclose(g.profile(), p / 3.0, rtol=1e-12)
    np.testing.assert_allclose(terms_module.Factor.build((0,), np.eye(k), 3.0 * sigma).profile(), p / 3.0, rtol=1e-9)


def test_no_coupled_reduction_without_one_row_across_classes():
    separable = problem([g for g in HIERARCHY if "county" in g[0]])
    assert coupled_reduction(separable.workload) is None
    regions = {"ranges": [[0, 2], [3, 10]]}                  # two rows over classes: not one reduced row
    assert coupled_reduction(problem(HIERARCHY + [({"a": "identity", "county": regions}, 2.0)]).workload) is None


def quiet_levels(prob, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return solve_kron(prob, structure="levels", tol=1e-6, **kw)


def test_the_levels_are_certified_by_the_whole_problem_and_release_its_mixture(monkeypatch):
    monkeypatch.setattr(driver, "_no_worse_than_simple", lambda problem, sol, *args: sol)
    prob = problem(HIERARCHY)
    best = optimum(prob)
    sol = quiet_levels(prob)
    joint = sol.info["joint"]
    assert sol.info["hierarchy"] is None and joint["status"] == "optimal"
    assert joint["lower_bound"] <= best and joint["estimate"] == pytest.approx(best, rel=1e-4)
    assert sol.lower_bound == joint["lower_bound"] >= max(p["lower_bound"] for p in sol.info["parts"])
    # the mixture formed, priced by its terms and released: cheaper than the levels, within 2e-4 of the optimum
    assert joint["released"] and not any(p["released"] for p in sol.info["parts"])
    assert sol.privacy_cost * sol.max_ratio == pytest.approx(joint["privacy_cost"], rel=1e-12)
    assert sol.max_ratio == pytest.approx(1.0, rel=1e-12)
    assert best * (1 - 1e-9) <= joint["privacy_cost"] <= best * (1 + 2e-4)
    assert sol.gap <= 2e-4 and "mixture of" in sol.message
    monkeypatch.setattr(driver, "FORMED_BYTES_MAX", 1)                       # too large to form: the levels
    levels = quiet_levels(prob)
    assert levels.info["joint"]["form_time"] is None and not levels.info["joint"]["released"]
    assert any(p["released"] for p in levels.info["parts"]) and "solved apart" in levels.message
    assert levels.privacy_cost * levels.max_ratio > joint["privacy_cost"]
    apart = quiet_levels(prob, joint_time=0)
    assert apart.info["joint"] is None and apart.info["hierarchy"] is not None
    assert apart.lower_bound <= sol.lower_bound
    with pytest.raises(ValueError, match="`joint_time`"):
        solve_kron(prob, joint_time=-1.0)


def test_the_mixture_keeps_the_steps_its_memory_allows(monkeypatch):
    monkeypatch.setattr(driver, "_no_worse_than_simple", lambda problem, sol, *args: sol)
    full = quiet_levels(problem(HIERARCHY)).info["joint"]
    monkeypatch.setattr(driver, "MIXTURE_BYTES", 1)                          # one step kept: no mixture
    one = quiet_levels(problem(HIERARCHY)).info["joint"]
    assert one["mixed"] == 1 and one["lower_bound"] <= one["estimate"] * (1 + 1e-4)
    assert full["estimate"] <= one["estimate"]


def test_a_coupled_block_too_large_for_memory_falls_back_to_the_sub_hierarchies(monkeypatch):
    monkeypatch.setattr(driver, "_no_worse_than_simple", lambda problem, sol, *args: sol)
    monkeypatch.setattr(driver, "COUPLED_BYTES_MAX", 1)
    sol = quiet_levels(problem(HIERARCHY))
    assert sol.info["joint"] is None and sol.info["hierarchy"] is not None
