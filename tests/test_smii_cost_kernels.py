"""The kernels that cut SM-II's cost per Newton step, against float64 references.

- :func:`ffu_cvx.solvers.smii.backend.lower_inverse` (LAPACK ``trtri``), which
  ``Backend.solve_triangular(R, I)`` uses when the right-hand side is the identity (the
  identity basis: prefix and every full-rank workload) of order at least the backend's
  ``large_k`` (``backend.LARGE_K`` on ``backend.NUMPY``), equals the triangular solve
  to rounding and keeps its contract (lower triangular result whatever ``R`` holds above
  its diagonal).
- :func:`ffu_cvx.solvers.smii.newton.conjugate_gradient` updates ``r``, ``p`` and the product in
  place: its iterates equal a textbook (out-of-place) Steihaug CG on the same operator;
  past ``maxcg`` it goes on exactly while :func:`ffu_cvx.solvers.smii.newton.extension_pays`.
- ``Backend.rotated_single`` (the float32 array ``[Q^T Y, V^T]`` of the turned frame by one
  float32 product) equals the float64 product to single precision.
"""

import math

import numpy as np
import pytest
from scipy import linalg

from ffu_cvx.solvers.smii import backend
from ffu_cvx.solvers.smii import newton
from ffu_cvx.solvers.smii.newton import conjugate_gradient

NP = backend.NUMPY


def _lower(n, seed=0, dtype=np.float64):
    """A well-conditioned lower Cholesky factor (n, n), Fortran-ordered as scipy returns it."""
    A = np.random.default_rng(seed).standard_normal((n, n))
    return linalg.cholesky(A @ A.T / n + np.eye(n), lower=True).astype(dtype, order="F")


# ---- the triangular inverse --------------------------------------------------------------------------------

@pytest.mark.parametrize("order", ["F", "C"])
def test_identity_solve_is_the_triangular_inverse(order):
    R = np.asarray(_lower(70), order=order)
    want = linalg.solve_triangular(R, np.eye(70), lower=True)
    for got in (backend.lower_inverse(R), backend.Backend(large_k=64).solve_triangular(R, np.eye(70))):
        assert float(np.abs(got - want).max()) <= 1e-13 * float(np.abs(want).max())
        np.testing.assert_array_equal(np.triu(got, 1), 0.0)
    np.testing.assert_allclose(R @ backend.lower_inverse(R), np.eye(70), rtol=0, atol=1e-13)


def test_small_identity_solves_stay_the_scipy_solve():
    R = _lower(70)
    np.testing.assert_array_equal(NP.solve_triangular(R, np.eye(70)),
                                  linalg.solve_triangular(R, np.eye(70), lower=True, check_finite=False))


@pytest.mark.parametrize("order", ["F", "C"])
def test_triangular_inverse_ignores_the_upper_triangle(order):
    # solve_triangular reads only the lower triangle; so does the inverse.
    R = _lower(40, seed=1)
    junk = np.asarray(R + np.triu(np.full((40, 40), 7.0), 1), order=order)
    before = junk.copy()
    np.testing.assert_allclose(backend.lower_inverse(junk), backend.lower_inverse(R), rtol=0, atol=1e-14)
    np.testing.assert_array_equal(junk, before)  # the input is not overwritten


def test_triangular_inverse_in_single_precision_and_a_zero_pivot():
    R = _lower(30, seed=2, dtype=np.float32)
    got = backend.lower_inverse(R)
    assert got.dtype == np.float32
    want = np.linalg.inv(R.astype(float))
    assert float(np.abs(got - want).max()) <= 1e-5 * float(np.abs(want).max())
    S = _lower(5, seed=3)
    S[2, 2] = 0.0
    with pytest.raises(np.linalg.LinAlgError, match=r"R\[2, 2\]"):
        backend.lower_inverse(S)


@pytest.mark.parametrize("B", ["identity plus one entry", "scaled identity", "rectangular", "random"])
def test_other_right_hand_sides_still_solve(B):
    structured = backend.Backend(large_k=16)  # the trtri route open at order 25: only the identity takes it
    R = _lower(25, seed=4)
    rhs = {"identity plus one entry": np.eye(25) + np.eye(25, k=-3) * (np.arange(25) == 7),
           "scaled identity": 2.0 * np.eye(25), "rectangular": np.eye(25, 30),
           "random": np.random.default_rng(5).standard_normal((25, 9))}[B]
    want = np.linalg.solve(np.tril(R), rhs)
    for trans in (False, True):
        got = structured.solve_triangular(R, rhs, trans=trans)
        ref = np.linalg.solve(np.tril(R).T, rhs) if trans else want
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12 * np.abs(ref).max())


# ---- in-place conjugate gradients ---------------------------------------------------------------------------

class _Dense:
    """The operator ``E -> mat(A vec(E))`` on (k, k) matrices with gradient ``grad``."""

    def __init__(self, A, grad):
        self.A, self.grad, self.calls = A, grad, 0
        self.cg_grad = grad  # CG's precision: the gradient's own

    def hvp(self, E):
        self.calls += 1
        return (self.A @ E.ravel()).reshape(E.shape)


def _steihaug(A, b, maxcg, tol2, radius, m_inv):
    """Textbook truncated CG on ``A x = b`` in vectors, with Steihaug's ball and curvature exits."""
    x = np.zeros_like(b)
    r = b.copy()
    z = m_inv * r
    d = z.copy()
    rz = r @ z
    for it in range(1, maxcg + 1):
        Ad = A @ d
        dAd = d @ Ad
        if dAd <= 0 or (x + rz / dAd * d) @ (x + rz / dAd * d) >= radius ** 2:
            xd, dd, xx = x @ d, d @ d, x @ x
            tau = (-xd + math.sqrt(xd * xd + dd * (radius ** 2 - xx))) / dd
            return x + tau * d, it
        alpha = rz / dAd
        x = x + alpha * d
        r = r - alpha * Ad
        if r @ r <= tol2:
            return x, it
        z = m_inv * r
        rz_new = r @ z
        d = z + rz_new / rz * d
        rz = rz_new
    return x, maxcg


@pytest.mark.parametrize("case", ["converges", "ball", "negative curvature"])
@pytest.mark.parametrize("preconditioned", [False, True])
def test_in_place_cg_equals_the_textbook_iteration(case, preconditioned):
    k = 6
    rng = np.random.default_rng(6)
    X = rng.standard_normal((k * k, k * k))
    A = X @ X.T / (k * k) + 0.5 * np.eye(k * k)
    if case == "negative curvature":
        A -= 2.5 * np.eye(k * k)  # indefinite
    G = rng.standard_normal((k, k))
    m_inv = 1.0 / (1.0 + rng.random(k * k)) if preconditioned else np.ones(k * k)
    precond = (lambda R: R * m_inv.reshape(k, k)) if preconditioned else None
    radius = {"converges": 1e6, "ball": 0.3, "negative curvature": 50.0}[case]
    op = _Dense(A, G.copy())
    got, it = conjugate_gradient(op, 40, 1e-20, radius, precond=precond)
    want, it_want = _steihaug(A, -G.ravel(), 40, 1e-20, radius, m_inv)
    assert it == it_want == op.calls
    np.testing.assert_allclose(got.ravel(), want, rtol=0, atol=1e-10 * np.abs(want).max())
    np.testing.assert_array_equal(op.grad, G)  # the gradient is not updated in place
    if case != "converges":  # an early exit on the ball's boundary
        assert it < 40 and float(np.linalg.norm(got)) == pytest.approx(radius, rel=1e-12)
    if case == "converges":
        np.testing.assert_allclose(A @ got.ravel(), -G.ravel(), rtol=0, atol=1e-8)


# ---- the float32 array of the turned frame ------------------------------------------------------------------

def test_rotated_single_is_the_stacked_float32_product():
    rng = np.random.default_rng(7)
    Q = np.linalg.qr(rng.standard_normal((48, 48)))[0]
    Y, V = rng.standard_normal((48, 70)), rng.standard_normal((33, 48))
    want = np.concatenate([Q.T @ Y, V.T], axis=1)
    got = NP.rotated_single(Q, Y, V)
    assert got.dtype == np.float32 and got.shape == (48, 103) and got.flags.c_contiguous
    assert float(np.abs(got - want).max()) <= 1e-6 * float(np.abs(want).max())
    np.testing.assert_array_equal(got[:, 70:], V.T.astype(np.float32))  # V^T only cast


# ---- CG past maxcg while a product pays -----------------------------------------------------------------------

@pytest.mark.parametrize("spread", [1e3, 3.0])
def test_cg_goes_past_maxcg_exactly_while_the_next_product_pays(spread):
    # An ill-conditioned operator (spread 1e3) keeps gaining past maxcg = 5; a
    # well-conditioned one (3) stops at once. Either way the iterate is plain CG's at
    # the same count, and the count is where extension_pays first fails.
    k = 6
    rng = np.random.default_rng(7)
    U, _ = np.linalg.qr(rng.standard_normal((k * k, k * k)))
    A = (U * np.geomspace(1.0, spread, k * k)) @ U.T
    G = rng.standard_normal((k, k))
    op = _Dense(A, G)
    got, it = conjugate_gradient(op, 5, 1e-30, 1e6, extend_to=20)
    assert it == op.calls and 5 <= it <= 20
    q = [0.0]
    for j in range(1, 21):
        s, _ = _steihaug(A, -G.ravel(), j, 1e-30, 1e6, np.ones(k * k))
        q.append(float(G.ravel() @ s + 0.5 * s @ A @ s))
    np.testing.assert_allclose(got.ravel(), _steihaug(A, -G.ravel(), it, 1e-30, 1e6, np.ones(k * k))[0],
                               rtol=0, atol=1e-10 * np.abs(got).max())
    assert all(newton.extension_pays(q[j - 1] - q[j], q[j], j) for j in range(5, it))
    assert it == 20 or not newton.extension_pays(q[it - 1] - q[it], q[it], it)
    assert (it > 5) == (spread > 100)
    op.calls = 0
    assert conjugate_gradient(op, 5, 1e-30, 1e6, extend_to=5)[1] == op.calls == 5  # no extension asked for
