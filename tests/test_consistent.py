"""Consistent non-negative integer tables from a release (ffu_cvx.estimate.consistent, ffu_cvx.estimate.gls)."""

import dataclasses
import math

import numpy as np
import pytest
from scipy import optimize

import ffu_cvx as ffu
from ffu_cvx.estimate import consistent, gls, nonneg
from ffu_cvx.solvers.kron import solve_kron
from ffu_cvx.solvers.kron import terms as kterms

SIZES = {"county": 5, "age": 4, "sex": 2}
GROUPS = [({"county": "identity"}, 10.0, "county"),
          ({"county": "identity", "age": "identity", "sex": "identity"}, 40.0, "age x sex x county"),
          ({}, 5.0, "total")]


@pytest.fixture(scope="module")
def wl():
    return ffu.workloads.product(ffu.Domain(SIZES), GROUPS, name="small")


@pytest.fixture(scope="module")
def solutions(wl):
    problem = ffu.FitnessProblem.from_workload(wl)
    return {"kron": ffu.solve(problem, method="kron"), "dense": ffu.solve(problem.dense(), method="sdp")}


@pytest.fixture(scope="module")
def counts(wl):
    # small counts, many near zero: non-negativity binds
    return np.random.default_rng(0).poisson(3.0, wl.d).astype(float)


def _dense_covariance(sol, wl):
    """``C = W Sigma W^T`` of a structured solution, column by column from unit draws."""
    if sol.get("terms") is None:
        return ffu.GaussianMechanism(sol).covariance()
    ks = [math.prod(f.k for f in t.factors) for t in sol.terms]
    cols = []
    for t, k in enumerate(ks):
        for j in range(k):
            xis = [np.zeros(n) for n in ks]
            xis[t][j] = 1.0
            cols.append(np.concatenate([kterms.group_noise(sol.terms, xis, g, grp.shape)
                                        for g, grp in enumerate(wl.groups)]))
    G = np.array(cols).T
    return G @ G.T


def _structured(wl, structure):
    """A structure the solver would not pick here (it warns of its gap, which is not what is tested)."""
    with pytest.warns(RuntimeWarning, match="certified gap"):
        return solve_kron(ffu.FitnessProblem.from_workload(wl), structure=structure)


@pytest.mark.parametrize("which", ["kron", "dense", "independent", "kronecker"])
def test_operators_match_dense_gls(wl, solutions, which):
    _check_operator(solutions.get(which) or _structured(wl, which), wl)


def test_operator_of_a_reduction_with_banded_attribute():
    """Terms of residual classes of a banded attribute, factors in another order than the others'."""
    wl = ffu.workloads.product(ffu.Domain({"a": 10, "b": 3, "c": 3}),
                               [({"a": {"bands": 3}, "b": "identity"}, 1.0), ({"a": "identity", "c": "identity"}, 4.0),
                                ({}, 0.2)])
    _check_operator(ffu.solve(ffu.FitnessProblem.from_workload(wl), method="kron"), wl)


def _check_operator(sol, wl):
    op = gls.operator(sol, wl)
    W, _ = wl.dense()
    C = _dense_covariance(sol, wl)
    assert np.allclose(np.diag(C), sol.variances if sol.get("variances") is not None else np.diag(C))
    F = np.array([op.forward(e) for e in np.eye(wl.d)]).T
    normal = W.T @ np.linalg.pinv(C, rcond=1e-10) @ W
    assert np.allclose(F.T @ F, normal, atol=1e-10 * np.abs(normal).max())
    r = np.random.default_rng(1).standard_normal(op.n)
    assert np.allclose(op.adjoint(r), F.T @ r)
    x = np.random.default_rng(2).poisson(4.0, wl.d).astype(float)
    assert np.allclose(op.answers(x), W @ x)
    noise = np.random.default_rng(3).multivariate_normal(np.zeros(wl.m), C, method="eigh")
    a = W @ x + noise
    gls_value = noise @ np.linalg.pinv(C, rcond=1e-10) @ noise
    assert math.isclose(float(np.sum((op.whiten(a) - op.forward(x)) ** 2)), gls_value, rel_tol=1e-6)


def _fit(sol, wl, answers, nonnegative, solver):
    op = gls.operator(sol, wl)
    z = op.whiten(answers)
    x, info = nonneg.fit(op, z, np.zeros(wl.d), nonnegative=nonnegative, gtol=consistent.GTOL * sol.privacy_cost,
                         solver=solver)
    return op, x, info


@pytest.mark.parametrize("solver", ["lbfgsb", "projected"])
def test_fit_is_the_exact_nonnegative_gls(wl, solutions, counts, solver):
    sol = solutions["dense"]
    rel = ffu.release_product(sol, wl, counts, rng=4)
    op, x, info = _fit(sol, wl, rel.answers, True, solver)
    x_ref, _ = optimize.nnls(op.F, op.whiten(rel.answers), maxiter=10_000)
    W, _ = wl.dense()
    assert np.allclose(W @ x, W @ x_ref, atol=1e-3)
    assert x.min() >= 0
    assert info["projected_gradient"] <= consistent.GTOL * sol.privacy_cost


def test_compact_quasi_newton_matches_bfgs_recursion():
    rng = np.random.default_rng(12)
    d, size = 7, 3
    A = rng.standard_normal((d, d))
    hessian, pairs, kept = A @ A.T + np.eye(d), nonneg._Pairs(d, size), []
    for _ in range(5):
        s, x, g = rng.standard_normal((3, d))
        assert pairs.add(x + s, x, g + hessian @ s, g)
        kept.append((s, hessian @ s))
    s, y = kept[-1]
    H = (s @ y) / (y @ y) * np.eye(d)
    for s, y in kept[-size:]:
        V = np.eye(d) - np.outer(y, s) / (s @ y)
        H = V.T @ H @ V + np.outer(s, s) / (s @ y)
    q = rng.standard_normal(d)
    assert np.allclose(pairs.apply(q), H @ q, atol=1e-12)


@pytest.mark.parametrize("solver", ["lbfgsb", "projected"])
def test_unconstrained_fit_is_the_gls_projection(wl, solutions, counts, solver):
    sol = solutions["kron"]
    rel = ffu.release_product(sol, wl, counts, rng=5)
    op, x, _ = _fit(sol, wl, rel.answers, False, solver)
    W, _ = wl.dense()
    Cp = np.linalg.pinv(_dense_covariance(sol, wl), rcond=1e-10)
    blue = W @ np.linalg.pinv(W.T @ Cp @ W) @ W.T @ Cp @ rel.answers
    assert np.allclose(op.answers(x), blue, atol=1e-3)  # the fit's tolerance: far below the noise (std >= 1)


@pytest.mark.parametrize("which", ["kron", "dense", "independent"])
@pytest.mark.parametrize("method", ["topdown", "gls"])
def test_tables_add_up_nonnegative_integers(wl, solutions, counts, which, method):
    sol = solutions.get(which) or _structured(wl, which)
    rel = ffu.release_product(sol, wl, counts, rng=6)
    est = consistent.estimate(rel, sol, wl, method=method)
    pub = est.published
    assert est.method == method and est.integer_histogram.dtype == np.int64
    assert np.all(pub >= 0) and np.array_equal(pub, np.round(pub))
    assert est.integer_histogram.min() >= 0
    county, cells, total = np.split(pub, [5, 5 + 40])
    assert np.array_equal(cells.reshape(5, 8).sum(axis=1), county)
    assert county.sum() == total[0]
    W, _ = wl.dense()
    assert np.array_equal(pub, W @ est.integer_histogram)
    assert np.all(est.lower <= pub) and np.all(pub <= est.upper) and est.lower.min() >= 0
    # the raw answers, clipped and rounded one by one, do not add up here: the check can fail
    raw = rel.postprocess(nonnegative=True, round=True).postprocessed
    assert not np.array_equal(np.split(raw, [5, 45])[1].reshape(5, 8).sum(axis=1), raw[:5])


def test_consistent_answers_are_their_own_unbiased_values(wl, solutions, counts):
    """The optimal mechanism's answers are consistent: they are the GLS values; redundant measurements
    (independent products) are not, and their GLS values are."""
    sol = solutions["kron"]
    rel = ffu.release_product(sol, wl, counts, rng=6)
    assert np.array_equal(consistent.estimate(rel, sol, wl).unbiased, rel.answers)
    independent = _structured(wl, "independent")
    rel = ffu.release_product(independent, wl, counts, rng=6)
    est = consistent.estimate(rel, independent, wl)
    op, x, _ = _fit(independent, wl, rel.answers, False, "projected")
    assert not np.allclose(est.unbiased, rel.answers) and np.allclose(est.unbiased, op.answers(x), atol=1e-3)


def test_systematic_rounding_keeps_runs_within_one():
    rng = np.random.default_rng(7)
    x = rng.exponential(0.7, 500) * (rng.random(500) < 0.6)
    xi = consistent.systematic_round(x)
    assert xi.dtype == np.int64 and xi.min() >= 0
    S, Si = np.concatenate([[0.0], np.cumsum(x)]), np.concatenate([[0], np.cumsum(xi)])
    i, j = np.triu_indices(501, k=1)
    assert np.abs((Si[j] - Si[i]) - (S[j] - S[i])).max() < 1.0 + 1e-9
    assert abs(Si[-1] - S[-1]) <= 0.5


SPARSE = {"age": 12, "race": 5, "county": 6}
SPARSE_GROUPS = [({"county": "identity"}, (30 / 1.96) ** 2, "county"),
                 ({"race": "identity", "county": "identity"}, (20 / 1.96) ** 2, "race x county"),
                 ({"age": {"bands": 4}, "county": "identity"}, (20 / 1.96) ** 2, "band x county"),
                 ({"age": "identity", "race": "identity", "county": "identity"}, (8 / 1.96) ** 2, "cells")]


@pytest.fixture(scope="module")
def sparse():
    """Lumpy sparse counts: most cells empty, a few large."""
    wl = ffu.workloads.product(ffu.Domain(SPARSE), SPARSE_GROUPS, name="sparse")
    rng = np.random.default_rng(3)
    p = rng.gamma(0.3, 1.0, wl.d) * (rng.random(wl.d) < 0.4)
    x = rng.multinomial(3000, p / p.sum()).astype(float)
    return wl, ffu.solve(ffu.FitnessProblem.from_workload(wl), method="auto"), x


@pytest.mark.slow
def test_sparse_tables_beat_raw_and_intervals_keep_their_level(sparse):
    """Over 150 releases of sparse lumpy data: no table's RMSE above its raw answers' (the totals, whose raw
    answers are already the best unbiased values, within their rounding to integers: 1/12 of a count squared),
    the fine cells far below, the totals' bias under 0.2 standard deviations, and the 95% intervals covering at
    least 93% in every table and every cell-size class."""
    wl, sol, x = sparse
    true, g = wl.apply(x), wl.group_index()
    raw, pub, hit = [], [], []
    for seed in range(150):
        rel = ffu.release_product(sol, wl, x, rng=seed, sampler="numpy")
        est = consistent.estimate(rel, sol, wl)
        raw.append(rel.answers - true)
        pub.append(est.published - true)
        hit.append((est.lower <= true) & (true <= est.upper))
    raw, pub, hit = map(np.array, (raw, pub, hit))
    sd = np.sqrt(wl.c)
    for k in range(len(SPARSE_GROUPS)):
        on = g == k
        mse_raw, mse_pub = np.mean(raw[:, on] ** 2), np.mean(pub[:, on] ** 2)
        assert mse_pub <= mse_raw + 1 / 12 + 3 * np.std(pub[:, on] ** 2 - raw[:, on] ** 2) / np.sqrt(pub[:, on].size)
        for lo, hi in ((0, 0), (1, 2), (3, 9), (10, np.inf)):
            cls = on & (true >= lo) & (true <= hi)
            if cls.sum() * 150 >= 300:
                assert hit[:, cls].mean() >= 0.93, (k, lo)
    county = g == 0
    assert np.abs(pub[:, county].mean(axis=0) / sd[county]).max() <= 0.2 + 3 / np.sqrt(150)
    cells = g == 3
    assert np.mean(pub[:, cells] ** 2) <= 0.6 * np.mean(raw[:, cells] ** 2)


def test_topdown_keeps_totals_unbiased_where_one_fit_pushes_them_up(sparse):
    """The one-histogram GLS fit lifts the many empty cells and their county totals with them; top down
    keeps each county total within its own noise."""
    wl, sol, x = sparse
    true = wl.apply(x)
    bias = {"topdown": [], "gls": []}
    for seed in range(20):
        rel = ffu.release_product(sol, wl, x, rng=seed, sampler="numpy")
        for method in bias:
            bias[method].append(consistent.estimate(rel, sol, wl, method=method).published[:6] - true[:6])
    sd = np.sqrt(wl.c[0])
    assert np.abs(np.mean(bias["topdown"])) / sd < 0.25 < np.mean(bias["gls"]) / sd


def test_progress_reports_to_the_end(sparse):
    wl, sol, x = sparse
    rel = ffu.release_product(sol, wl, x, rng=1)
    seen = []
    consistent.estimate(rel, sol, wl, progress=lambda done, left, what: seen.append((done, left, what)))
    done = [s[0] for s in seen]
    assert done == sorted(done) and done[-1] == 1.0 and seen[-1][1] == 0.0 and len(seen) >= 4


def test_topdown_needs_tables_of_counts():
    wl = ffu.workloads.product(ffu.Domain({"age": 8, "sex": 2}),
                               [({"age": "prefix", "sex": "identity"}, 4.0, "cumulative"), ({}, 1.0, "total")])
    sol = ffu.solve(ffu.FitnessProblem.from_workload(wl), method="kron")
    x = np.random.default_rng(0).poisson(2.0, wl.d).astype(float)
    rel = ffu.release_product(sol, wl, x, rng=2)
    with pytest.raises(ValueError, match="group 'cumulative' is not one: use method='gls'"):
        consistent.estimate(rel, sol, wl, method="topdown")
    est = consistent.estimate(rel, sol, wl)
    assert est.method == "gls" and np.array_equal(est.published, wl.apply(est.integer_histogram.astype(float)))


def test_release_with_postprocessed_column_and_statement(wl, solutions, counts, tmp_path):
    sol = solutions["kron"]
    rel = ffu.release_product(sol, wl, counts, rng=8)
    est = consistent.estimate(rel, sol, wl)
    out = est.to_release(rel)
    assert np.array_equal(out.postprocessed, est.published) and np.array_equal(out.answers, rel.answers)
    text = out.statement()["text"]
    assert "top down" in text and "exact Gaussian intervals" in text and "no longer unbiased" in text
    assert np.array_equal(out.postprocessed_interval[0], est.lower) and "exact Gaussian" in out.postprocessed_interval[2]
    answers, _ = out.to_csv(tmp_path / "answers.csv")
    assert "postprocessed_lower,postprocessed_upper" in answers.read_text().splitlines()[0]
    path = est.to_csv(tmp_path / "tables.csv", rel)
    header = path.read_text().splitlines()[0].split(",")
    assert header == list(consistent.COLUMNS)
    with pytest.raises(ValueError, match="exists"):
        est.to_csv(path, rel)


def test_refusals(wl, solutions, counts):
    sol = solutions["kron"]
    rel = ffu.release_product(sol, wl, counts, rng=10)
    with pytest.raises(ValueError, match="`method` must be one of"):
        consistent.estimate(rel, sol, wl, method="bootstrap")
    with pytest.raises(ValueError, match="40 cells, more than max_cells = 30"):
        consistent.estimate(rel, sol, wl, max_cells=30)
    other = sol.scaled(2 * sol.privacy_cost)
    with pytest.raises(ValueError, match="privacy cost"):
        consistent.estimate(rel, other, wl)
    bigger = ffu.workloads.product(ffu.Domain({**SIZES, "sex": 3}), GROUPS)
    with pytest.raises(ValueError):
        consistent.estimate(rel, sol, bigger)


def test_derived_tables_are_bound_to_their_release(wl, solutions, counts, tmp_path):
    """Another workload's release, another release's values, and writing over a release's own
    statement or answers are each refused, naming what does not match; nothing is written."""
    sol = solutions["kron"]
    other = ffu.workloads.product(wl.domain, [({}, 1.0, "total")])
    rel = ffu.release_product(sol, wl, counts, rng=4)
    twin = ffu.release_product(sol, wl, counts, rng=5)
    est = consistent.estimate(rel, sol, wl)
    foreign = dataclasses.replace(rel, fingerprint=ffu.model.fingerprint.of(other))
    with pytest.raises(ValueError, match="does not answer this workload"):
        consistent.estimate(foreign, sol, wl)
    with pytest.raises(ValueError, match="made from the release with answers"):
        est.to_release(twin)
    with pytest.raises(ValueError, match="made from the release with answers"):
        est.to_csv(tmp_path / "tables.csv", twin)
    answers, statement = rel.to_csv(tmp_path / "a.csv")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for path, what in ((statement, "privacy statement"), (answers, "answers")):
        with pytest.raises(ValueError, match=f"would replace a release's {what}"):
            est.to_csv(path, rel, overwrite=True)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert ffu.release.release.verify(answers)["answers_file"] == "a.csv"
    est.to_csv(tmp_path / "tables.csv", rel)
    assert est.to_release(rel).postprocessed is not None
