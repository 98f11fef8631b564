"""A sparse or triangular query matrix ``L``: exact integer decompositions, SM-II's CSR and ``trmm`` products.

``basis.decompose`` snaps a least-squares ``L`` to integers only when they reproduce ``W``
exactly; SM-II on numpy then holds a sparse ``L`` as CSR and a square triangular one as
``backend.TriangularQueries`` (``backend.queries``), and each must give the dense path's
products and the same Newton steps. The structured kernels run from ``backend.LARGE_K`` on;
a :class:`backend.Backend` built with ``large_k=1`` chooses them at these small sizes.
"""

import numpy as np
import pytest
from scipy import sparse

import ffu_cvx as ffu
from ffu_cvx import workloads
from ffu_cvx.model import basis, privacy
from ffu_cvx.solvers.smii import backend
from ffu_cvx.solvers.smii.model import evaluate, initial_sigma, normalise, variance_ratios
from ffu_cvx.solvers.smii.newton import line_search, smii_direction

NP = backend.NUMPY
#: numpy's kernels with the structured ones at every size (CSR for L at most half non-zero).
STRUCTURED = backend.Backend(large_k=1, sparse_density=0.5)


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


def test_queries_are_csr_only_when_large_and_sparse():
    problem = _ranges()
    dense = np.ones((8, problem.k))
    assert (NP.large_k, NP.sparse_density) == (backend.LARGE_K, backend.SPARSE_MAX_DENSITY)
    assert isinstance(NP.queries(problem.L), np.ndarray)  # k = 63 < LARGE_K
    got = STRUCTURED.queries(problem.L)
    assert sparse.issparse(got) and got.shape == problem.L.shape
    assert backend.of(got) is NP
    assert isinstance(STRUCTURED.queries(dense), np.ndarray)  # dense stays dense
    assert isinstance(backend.Backend(large_k=1, sparse_density=0.0).queries(problem.L), np.ndarray)


def test_csr_products_match_the_dense_ones():
    problem = _ranges()
    csr = STRUCTURED.queries(problem.L)
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
def test_direction_with_csr_queries_has_the_exact_variance_derivative(float32):
    problem = _ranges(48, seed=1)
    L = STRUCTURED.queries(problem.L)
    assert sparse.issparse(L)
    p = evaluate(problem.B, L, problem.c, initial_sigma(problem, None), 3.0, 3.0)
    dense = evaluate(problem.B, problem.L, problem.c, p.sigma, 3.0, 3.0)
    np.testing.assert_allclose(p.h, dense.h, rtol=1e-12)
    step = smii_direction(p, L, problem.c, 5, 1e-10, 1.0, precondition=True, float32=float32)
    assert step.delta < 0
    # h is linear in Sigma: e is exactly the change of h per unit step along D.
    change = variance_ratios(problem.L, p.sigma + step.D, problem.c) - variance_ratios(problem.L, p.sigma, problem.c)
    np.testing.assert_allclose(step.e, change, rtol=0, atol=1e-9 * np.abs(change).max())


def _along(B, L, c, p, d, t: float):
    """The trial points ``p.sigma + a D`` of the line search along the direction ``d``."""
    return lambda a: evaluate(B, L, c, p.sigma + a * d.D, t, t, h=p.h + a * d.e)


def _newton_steps(problem, L, steps: int, t: float):
    """``steps`` SM-II Newton steps driven by hand (the solver's direction and line search at a fixed
    ``t``) from its normalised start, the queries held as ``L``: ``(F, step length, D)`` per step and the
    last point."""
    B = problem.B
    sigma, c, _ = normalise(initial_sigma(problem, None, queries=L), B, L, problem.c)
    p, seen = evaluate(B, L, c, sigma, t, t), []
    for _ in range(steps):
        d = smii_direction(p, L, c, 5, 1e-10, 1.0, precondition=True)
        step, q = line_search(_along(B, L, c, p, d, t), p.F, d.delta, 0.01, 0.5)
        assert q is not None
        seen.append((p.F, step, d.D))
        p = q
    return seen, p


def _same_newton_steps(problem, L, steps: int = 5, t: float = 30.0):
    """The Newton steps with the structured ``L`` are the dense path's to rounding: the same step
    lengths, objectives and directions, and they make progress. (CG amplifies the products'
    rounding step by step: on the CSR ranges below, D parts by 2e-8 of its largest entry at the
    fifth step and F by 1.4e-11.)"""
    want, last_want = _newton_steps(problem, problem.L, steps, t)
    got, last_got = _newton_steps(problem, L, steps, t)
    for (F_w, step_w, D_w), (F_g, step_g, D_g) in zip(want, got):
        assert step_g == step_w
        assert F_g == pytest.approx(F_w, rel=1e-9)
        np.testing.assert_allclose(D_g, D_w, rtol=0, atol=1e-6 * np.abs(D_w).max())
    assert last_got.F == pytest.approx(last_want.F, rel=1e-9) and last_got.F < got[0][0]
    np.testing.assert_allclose(last_got.h, last_want.h, rtol=1e-6)


def test_newton_steps_with_csr_queries_follow_the_dense_ones():
    # The solver holds L as CSR from backend.LARGE_K on; its Newton steps at this small size, with the
    # CSR L that STRUCTURED gives, are those of the dense L.
    problem = _ranges(64, seed=2)
    L = STRUCTURED.queries(problem.L)
    assert sparse.issparse(L)
    _same_newton_steps(problem, L)


def _prefix(d=48):
    return ffu.FitnessProblem.from_workload(workloads.prefix(d))


def test_queries_are_triangular_only_when_large_square_and_triangular():
    L = _prefix().L  # upper triangular ones on the identity basis
    assert isinstance(NP.queries(L), np.ndarray)  # k = 48 < LARGE_K
    triangular = backend.Backend(large_k=1)  # the default density: prefix's L (51% non-zero) is not CSR
    for array, lower in ((L, False), (L.T.copy(), True)):
        got = triangular.queries(array)
        assert isinstance(got, backend.TriangularQueries) and got.lower is lower
        assert got.shape == array.shape and backend.of(got) is NP
    full = L.copy()
    full[-1, 0] = 1.0  # one entry below the diagonal: neither triangle
    assert isinstance(triangular.queries(full), np.ndarray)
    assert isinstance(triangular.queries(np.ones((3, 5))), np.ndarray)  # not square


@pytest.mark.parametrize("lower", [False, True])
def test_triangular_products_match_the_dense_ones(lower):
    rng = np.random.default_rng(4)
    L = np.triu(rng.standard_normal((40, 40)))
    L = L.T.copy() if lower else L
    T = backend.Backend(large_k=1).queries(L)
    A = rng.standard_normal((40, 40))
    for S in (A @ A.T, A + A.T):  # a covariance and an indefinite direction
        want = privacy.variances(L, S)
        np.testing.assert_allclose(NP.variances(T, S), want, rtol=0, atol=1e-12 * np.abs(want).max())
    np.testing.assert_allclose(T @ A, L @ A, rtol=0, atol=1e-12 * np.abs(L @ A).max())


def test_newton_steps_with_triangular_queries_follow_the_dense_ones():
    problem = _prefix(64)
    L = backend.Backend(large_k=1).queries(problem.L)
    assert isinstance(L, backend.TriangularQueries)
    _same_newton_steps(problem, L)
