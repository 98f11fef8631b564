"""A sparse or triangular query matrix ``L``: exact integer decompositions, SM-II's CSR and ``trmm`` products.

``basis.decompose`` snaps a least-squares ``L`` to integers only when they reproduce ``W``
exactly; SM-II on numpy then holds a sparse ``L`` as CSR and a square triangular one as
``backend.TriangularQueries`` (``backend.queries``), and each must give the dense path's
products and the same certified optimum.
"""

import numpy as np
import pytest
from scipy import sparse

import ffu_cvx as ffu
from ffu_cvx import basis, privacy, workloads
from ffu_cvx.smii import backend
from ffu_cvx.smii.model import evaluate, initial_sigma, variance_ratios
from ffu_cvx.smii.newton import smii_direction
from ffu_cvx.status import OPTIMAL

NP = backend.NUMPY


def _ranges(d=64, seed=0):
    return ffu.FitnessProblem.from_workload(workloads.random_ranges(d, targets="random", seed=seed))


def test_row_basis_of_a_01_workload_is_exact_and_integer():
    W = workloads.random_ranges(64, seed=0).W  # rank 63: a row basis
    B, L, name = basis.decompose(W)
    assert name == "rows" and B.shape[0] == 63
    np.testing.assert_array_equal(L, np.round(L))
    np.testing.assert_array_equal(L @ B, W)  # exact, not to rounding
    assert np.count_nonzero(L) < 0.1 * L.size


def test_fractional_coefficients_are_not_snapped():
    r1, r2 = np.array([1.0, 1.0, 0.0, 2.0]), np.array([0.0, 1.0, 1.0, 0.0])
    W = np.vstack([r1, r2, 0.3 * r1 + 0.7 * r2, r1 + r2])
    B, L, name = basis.decompose(W)
    assert name == "rows" and B.shape[0] == 2
    assert not np.array_equal(L, np.round(L))  # 0.3 and 0.7 (or their inverses) are kept
    np.testing.assert_allclose(L @ B, W, rtol=0, atol=1e-12)
    # An integer W whose L on an integer basis has halves: rounding would not reproduce W.
    W = np.array([[1.0, 1.0], [1.0, -1.0], [1.0, 0.0]])
    L = ffu.FitnessProblem(W, np.ones(3), basis=W[:2]).L
    np.testing.assert_allclose(L[2], [0.5, 0.5], rtol=0, atol=1e-14)
    np.testing.assert_allclose(L[:2], np.eye(2), rtol=0, atol=1e-14)


def test_a_non_integer_basis_is_never_snapped():
    # A basis off by 1e-11 from integers: L is within 1e-11 of integers, but rounding it would
    # miss W by 1e-11 (and products of non-integers prove nothing), so L stays least squares.
    W = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    B = np.array([[1.0, 0.0, 0.0], [0.0, 1.0 + 1e-11, 0.0]])
    L = ffu.FitnessProblem(W, np.ones(3), basis=B).L
    assert not np.array_equal(L, np.round(L))
    np.testing.assert_allclose(L @ B, W, rtol=0, atol=1e-12)


def test_queries_are_csr_only_when_large_and_sparse(monkeypatch):
    problem = _ranges()
    dense = np.ones((8, problem.k))
    assert isinstance(NP.queries(problem.L), np.ndarray)  # k = 63 < SPARSE_MIN_K
    monkeypatch.setattr(backend, "SPARSE_MIN_K", 1)
    monkeypatch.setattr(backend, "SPARSE_MAX_DENSITY", 0.5)
    got = NP.queries(problem.L)
    assert sparse.issparse(got) and got.shape == problem.L.shape
    assert backend.of(got) is NP
    assert isinstance(NP.queries(dense), np.ndarray)  # dense stays dense
    monkeypatch.setattr(backend, "SPARSE_MAX_DENSITY", 0.0)
    assert isinstance(NP.queries(problem.L), np.ndarray)


def test_csr_products_match_the_dense_ones(monkeypatch):
    monkeypatch.setattr(backend, "SPARSE_MIN_K", 1)
    monkeypatch.setattr(backend, "SPARSE_MAX_DENSITY", 0.5)
    problem = _ranges()
    csr = NP.queries(problem.L)
    rng = np.random.default_rng(3)
    A = rng.standard_normal((problem.k, problem.k))
    S = A @ A.T
    want = privacy.variances(problem.L, S)
    np.testing.assert_allclose(NP.variances(csr, S), want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    np.testing.assert_allclose(csr @ A, problem.L @ A, rtol=0, atol=1e-12 * np.abs(A).max())
    # Indefinite S (a direction): the same products.
    D = A + A.T
    want = privacy.variances(problem.L, D)
    np.testing.assert_allclose(NP.variances(csr, D), want, rtol=0, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize("float32", [False, True])
def test_direction_with_csr_queries_has_the_exact_variance_derivative(monkeypatch, float32):
    monkeypatch.setattr(backend, "SPARSE_MIN_K", 1)
    monkeypatch.setattr(backend, "SPARSE_MAX_DENSITY", 0.5)
    problem = _ranges(48, seed=1)
    L = NP.queries(problem.L)
    assert sparse.issparse(L)
    p = evaluate(problem.B, L, problem.c, initial_sigma(problem, None), 3.0, 3.0)
    dense = evaluate(problem.B, problem.L, problem.c, p.sigma, 3.0, 3.0)
    np.testing.assert_allclose(p.h, dense.h, rtol=1e-12)
    step = smii_direction(p, L, problem.c, 5, 1e-10, 1.0, precondition=True, float32=float32)
    assert step.delta < 0
    # h is linear in Sigma: e is exactly the change of h per unit step along D.
    change = variance_ratios(problem.L, p.sigma + step.D, problem.c) - variance_ratios(problem.L, p.sigma, problem.c)
    np.testing.assert_allclose(step.e, change, rtol=0, atol=1e-9 * np.abs(change).max())


def test_smii_with_csr_queries_reaches_the_dense_optimum(monkeypatch):
    problem = _ranges(64, seed=2)
    want = ffu.solve(problem, method="smii", tol=1e-4, refine=False)
    monkeypatch.setattr(backend, "SPARSE_MIN_K", 1)
    monkeypatch.setattr(backend, "SPARSE_MAX_DENSITY", 0.5)
    assert sparse.issparse(NP.queries(problem.L))
    got = ffu.solve(problem, method="smii", tol=1e-4, refine=False)
    assert want.status == got.status == OPTIMAL
    assert got.gap <= 1e-4 and want.gap <= 1e-4
    assert got.privacy_cost == pytest.approx(want.privacy_cost, rel=1.5e-4)
    assert float(np.max(privacy.variances(problem.L, got.sigma) / problem.c)) <= 1 + 1e-9


def _prefix(d=48):
    return ffu.FitnessProblem.from_workload(workloads.prefix(d))


def test_queries_are_triangular_only_when_large_square_and_triangular(monkeypatch):
    L = _prefix().L  # upper triangular ones on the identity basis
    assert isinstance(NP.queries(L), np.ndarray)  # k = 48 < TRIANGULAR_MIN_K
    monkeypatch.setattr(backend, "TRIANGULAR_MIN_K", 1)
    for array, lower in ((L, False), (L.T.copy(), True)):
        got = NP.queries(array)
        assert isinstance(got, backend.TriangularQueries) and got.lower is lower
        assert got.shape == array.shape and backend.of(got) is NP
    full = L.copy()
    full[-1, 0] = 1.0  # one entry below the diagonal: neither triangle
    assert isinstance(NP.queries(full), np.ndarray)
    assert isinstance(NP.queries(np.ones((3, 5))), np.ndarray)  # not square


@pytest.mark.parametrize("lower", [False, True])
def test_triangular_products_match_the_dense_ones(monkeypatch, lower):
    monkeypatch.setattr(backend, "TRIANGULAR_MIN_K", 1)
    rng = np.random.default_rng(4)
    L = np.triu(rng.standard_normal((40, 40)))
    L = L.T.copy() if lower else L
    T = NP.queries(L)
    A = rng.standard_normal((40, 40))
    for S in (A @ A.T, A + A.T):  # a covariance and an indefinite direction
        want = privacy.variances(L, S)
        np.testing.assert_allclose(NP.variances(T, S), want, rtol=0, atol=1e-12 * np.abs(want).max())
    np.testing.assert_allclose(T @ A, L @ A, rtol=0, atol=1e-12 * np.abs(L @ A).max())


def test_smii_with_triangular_queries_reaches_the_dense_optimum(monkeypatch):
    problem = _prefix(64)
    want = ffu.solve(problem, method="smii", tol=1e-4, refine=False)
    monkeypatch.setattr(backend, "TRIANGULAR_MIN_K", 1)
    assert isinstance(NP.queries(problem.L), backend.TriangularQueries)
    got = ffu.solve(problem, method="smii", tol=1e-4, refine=False)
    assert want.status == got.status == OPTIMAL
    assert got.privacy_cost == pytest.approx(want.privacy_cost, rel=1.5e-4)
    assert float(np.max(privacy.variances(problem.L, got.sigma) / problem.c)) <= 1 + 1e-9
