"""SM-II's float32 step solver: the symmetric-product kernels (``gram``, ``triangular_times``) and
the fused single-precision Hessian product and preconditioner.

What must hold exactly (float64): the gradient in the rotated frame, hence
``delta = <E, grad>``, and the directional derivatives ``e`` of the variance ratios along
``D = RQ E RQ^T``. What may carry single-precision error: the Hessian products and the
preconditioner (CG's directions only).
"""

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx import workloads
from ffu_cvx.solvers import smii
from ffu_cvx.solvers.smii import backend, model
from ffu_cvx.solvers.smii.model import Whitened, evaluate, initial_sigma, variance_ratios
from ffu_cvx.solvers.smii.newton import newton_direction, smii_direction
from ffu_cvx.model.status import OPTIMAL

NP = backend.NUMPY


def _ranges(d=24, seed=2):
    return ffu.FitnessProblem.from_workload(workloads.random_ranges(d, targets="random", seed=seed))


def _point(problem, t=3.0, seed=0):
    """A point near SM-II's start (perturbed) at sharpness ``t``, and the targets it is on."""
    rng = np.random.default_rng(seed)
    sigma = initial_sigma(problem, None)
    A = 0.1 * np.sqrt(np.abs(sigma).max()) * rng.standard_normal((problem.k, problem.k))
    return evaluate(problem.B, problem.L, problem.c, sigma + A @ A.T / problem.k, t, t), problem.c


def _symmetric(k, seed=1):
    A = np.random.default_rng(seed).standard_normal((k, k))
    return A + A.T


# ---- kernels -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-13), (np.float32, 1e-5)])
@pytest.mark.parametrize("signs", ["mixed", "positive", "negative", "zero"])
def test_gram_is_the_weighted_product_for_any_signs(dtype, rtol, signs):
    rng = np.random.default_rng(4)
    A = rng.standard_normal((37, 53)).astype(dtype)
    w = rng.standard_normal(53).astype(dtype)
    w = {"mixed": w, "positive": np.abs(w), "negative": -np.abs(w), "zero": 0 * w}[signs]
    before = A.copy()
    want = (A.astype(float) * w) @ A.T.astype(float)
    scale = max(float(np.abs(want).max()), 1.0)
    for got in (NP.gram(A, w), NP.gram(np.ascontiguousarray(A.T), w, trans=True)):
        assert got.dtype == dtype and got.shape == (37, 37)
        np.testing.assert_array_equal(got, got.T)  # exactly symmetric
        assert float(np.abs(got - want).max()) <= rtol * scale
    np.testing.assert_array_equal(A, before)  # the input is not scaled in place


@pytest.mark.parametrize("large_k", [1, 10**9])
def test_congruence_is_the_symmetric_product(large_k):
    # large_k = 1: the trmm path at every order; 10**9: the two products.
    rng = np.random.default_rng(6)
    X = rng.standard_normal((30, 30))
    E = rng.standard_normal((30, 30))
    E = E + E.T
    got = backend.Backend(large_k=large_k).congruence(X, E)
    want = X @ E @ X.T
    np.testing.assert_array_equal(got, got.T)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-13 * np.abs(want).max())


@pytest.mark.parametrize("lower", [True, False])
def test_triangular_times_is_the_triangular_product(lower):
    rng = np.random.default_rng(5)
    R = np.tril(rng.standard_normal((30, 30)))
    R = R if lower else R.T.copy()
    X = rng.standard_normal((30, 30))
    np.testing.assert_allclose(NP.triangular_times(R, X, lower), R @ X, rtol=0, atol=1e-13 * np.abs(R @ X).max())


@pytest.mark.parametrize("dtype, atol", [(np.float64, 1e-13), (np.float32, 1e-5)])
@pytest.mark.parametrize("width", [7, 64])
@pytest.mark.parametrize("trmm", [True, False])  # trmm on E's lower triangle, or gemm blocks
def test_quadratic_forms_are_the_diagonal_of_the_congruence(dtype, atol, width, trmm):
    # n = 50 columns: a last block narrower than ``width`` when width = 7
    rng = np.random.default_rng(6)
    E = _symmetric(30, seed=7).astype(dtype)
    W = rng.standard_normal((30, 50)).astype(dtype)
    before = E.copy()
    want = np.einsum("ij,ij->j", W, E.astype(float) @ W.astype(float))
    got = NP.quadratic_forms(E, W, width, trmm=trmm)
    assert got.shape == (50,) and got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=0, atol=atol * np.abs(want).max())
    np.testing.assert_array_equal(E, before)  # the triangle is a copy


# ---- the float32 operator ----------------------------------------------------------------------------------

@pytest.mark.parametrize("t", [1.0, 30.0])
def test_float32_operator_keeps_the_gradient_exact(t):
    # grad (by syrk) and RQ (by trmm) stay float64: <E, grad> is F's exact derivative
    # along D = RQ E RQ^T (the step's e, diag(L D L^T) / c, is checked in test_sparse_queries.py).
    problem = _ranges()
    p, c = _point(problem, t)
    op = Whitened(p, problem.L, c, rotate=True, float32=True)
    assert op.grad.dtype == op.RQ.dtype == np.float64
    np.testing.assert_allclose(op.RQ, p.R @ op.Q, rtol=0, atol=1e-13 * np.abs(op.RQ).max())
    E = _symmetric(problem.k)
    D = op.RQ @ E @ op.RQ.T
    D = 0.5 * (D + D.T)
    _, G = smii.objective(problem, p.sigma, t, t)
    want = float(np.vdot(D, G))
    assert float(np.vdot(E, op.grad)) == pytest.approx(want, rel=1e-11, abs=1e-12 * np.abs(G).max())


def test_float32_hessian_product_in_sigma_coordinates_and_preconditioner():
    # In Sigma's coordinates the float32 product is the exact Hessian to single precision.
    problem = _ranges()
    p, c = _point(problem, 5.0)
    op = Whitened(p, problem.L, c, rotate=True, float32=True)
    E = _symmetric(problem.k, 2)
    D = op.RQ @ E @ op.RQ.T
    RQinv = np.linalg.inv(op.RQ)
    got = RQinv.T @ op.hvp(E) @ RQinv
    want = smii.hessp(problem, p.sigma, 0.5 * (D + D.T), 5.0, 5.0)
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    assert op.hvp(E).dtype == op.cg_grad.dtype  # CG's precision (float64 below model.CG_SINGLE_MIN_K)
    pre = op.preconditioner()
    X, Y = _symmetric(problem.k, 3), _symmetric(problem.k, 4)
    assert np.vdot(X, pre(Y)) == pytest.approx(np.vdot(pre(X), Y), rel=1e-5)
    assert np.vdot(X, pre(X)) > 0 and np.vdot(Y, pre(Y)) > 0


def test_float32_step_runs_cg_in_single_and_returns_an_exact_double_direction():
    # From cg_single_min_k (model.CG_SINGLE_MIN_K in the solver) CG's vectors are float32 (no
    # cast per product); D and delta come back in float64, delta = <D, grad F> exactly for that D,
    # and D is within float32 rounding of the float64 solver's direction. The step is
    # smii_direction's (newton_direction on the operator, its preconditioner) with CG in single
    # precision at this small k.
    problem = _ranges()
    p, c = _point(problem, 5.0)
    op = Whitened(p, problem.L, c, rotate=True, float32=True, cg_single_min_k=0)
    pre = op.preconditioner()
    assert op.cg_grad.dtype == np.float32 and pre(op.cg_grad).dtype == np.float32
    E, D, delta, n_cg = newton_direction(op, 5, 1e-10, 1.0, pre, descent_fallback=True)
    high = smii_direction(p, problem.L, c, 5, 1e-10, 1.0, precondition=True, float32=False)
    assert E.dtype == D.dtype == np.float64
    np.testing.assert_array_equal(D, D.T)
    _, G = smii.objective(problem, p.sigma, 5.0, 5.0)
    assert delta == pytest.approx(float(np.vdot(D, G)), rel=1e-10)
    assert delta < 0 and n_cg == high.n_cg
    assert np.abs(D - high.D).max() <= 1e-3 * np.abs(high.D).max()


@pytest.mark.parametrize("t, same_frame", [(2.0, True), (10.0, False), (400.0, True)])
def test_fused_float32_product_matches_float64_in_the_same_frame(t, same_frame):
    # At t = 400 many columns and rows are pruned (weights below PRUNE); the fused array
    # keeps the same ones as the float64 operator. At t = 10 the two eigh frames part
    # (nearly equal eigenvalues: by 1.5e-4 on one machine, by far more on another, where a
    # product compared frame to frame was off by 5.4e-4 of its largest entry), so products
    # and gradients are compared unturned and the preconditioners (diagonal in their own
    # frames) are not compared.
    problem = _ranges(40, seed=3)
    p, c = _point(problem, t)
    exact = Whitened(p, problem.L, c, rotate=True)
    low = Whitened(p, problem.L, c, rotate=True, float32=True)
    kept = int(np.sum(p.w > model.PRUNE * p.w.max()) + np.sum(p.u > model.PRUNE * p.u.max()))
    assert low.W.shape[1] == kept
    if t > 100:
        assert kept < problem.d + problem.m
    E = _symmetric(problem.k, 5)  # a direction in the unturned whitened frame

    def unturned_product(op):
        return op.Q @ op.hvp(op.Q.T @ E @ op.Q) @ op.Q.T

    want = unturned_product(exact)
    np.testing.assert_allclose(unturned_product(low), want, rtol=0, atol=1e-5 * np.abs(want).max())
    want = exact.Q @ exact.grad @ exact.Q.T
    np.testing.assert_allclose(low.Q @ low.grad @ low.Q.T, want, rtol=0, atol=1e-12 * np.abs(want).max())
    if not same_frame:
        return
    pw, pl = exact.preconditioner(), low.preconditioner()
    np.testing.assert_allclose(pl(exact.grad), pw(exact.grad), rtol=0, atol=1e-4 * np.abs(pw(exact.grad)).max())


def test_float32_direction_is_a_descent_direction_with_exact_derivatives():
    problem = _ranges(40, seed=1)
    p, c = _point(problem, 3.0)
    step = smii_direction(p, problem.L, c, 5, 1e-10, 1.0, precondition=True, float32=True)
    assert step.delta < 0 and step.n_cg >= 1
    _, G = smii.objective(problem, p.sigma, 3.0, 3.0)
    assert step.delta == pytest.approx(float(np.vdot(step.D, G)), rel=1e-10)
    np.testing.assert_allclose(step.e, variance_ratios(problem.L, step.D, c), rtol=1e-10,
                               atol=1e-12 * np.abs(step.e).max())


def test_float32_solves_are_certified_like_float64():
    problem = _ranges(64, seed=0)
    want = ffu.solve(problem, method="smii", tol=1e-4, refine=False)
    got = ffu.solve(problem, method="smii", tol=1e-4, refine=False, float32=True)
    assert want.status == got.status == OPTIMAL and got.gap <= 1e-4
    assert got.privacy_cost == pytest.approx(want.privacy_cost, rel=2e-4)
    # each run's certified bound holds for the other's iterate
    assert got.privacy_cost >= want.lower_bound and want.privacy_cost >= got.lower_bound
