"""Decompositions W = L B: reconstruction, the automatic choice, rank handling, robustness."""

import numpy as np
import pytest
from scipy import linalg

import ffu_cvx as ffu
from ffu_cvx.model import basis as bs
from ffu_cvx import workloads as wl


def _rel_err(W, L, B):
    return np.linalg.norm(W - L @ B) / np.linalg.norm(W)


FULL_RANK = {
    "prefix16": lambda: wl.prefix(16).W,
    "pm1_24": lambda: wl.random_pm1(24, seed=1).W,
    "pl94": lambda: wl.pl94().W,
    "age": lambda: wl.age_pyramid().W,
    "theorem2": lambda: np.array([[1.0, 1.0], [1.0, 0.0]]),
}
RANK_DEFICIENT = {
    "marginals_a4": lambda: wl.marginals_a(4).W,
    "marginals_b4": lambda: wl.marginals_b(4).W,
    "ranges64_seed0": lambda: wl.random_ranges(64, seed=0).W,
    "wide": lambda: np.random.default_rng(0).normal(size=(3, 7)),
}


@pytest.mark.parametrize("name", sorted(FULL_RANK))
@pytest.mark.parametrize("basis", ["identity", "upper", "rows", "auto"])
def test_full_rank_decompositions_reproduce_W(name, basis):
    W = FULL_RANK[name]()
    B, L, used = bs.decompose(W, basis)
    d = W.shape[1]
    assert B.shape == (d, d) and L.shape == (W.shape[0], d)
    assert _rel_err(W, L, B) < 1e-10
    assert used == ("identity" if basis == "auto" else basis)
    if used == "identity":
        assert np.array_equal(B, np.eye(d)) and np.array_equal(L, W)
    if used == "upper":
        assert np.array_equal(B, np.triu(np.ones((d, d))))
        # L = W U^{-1}, checked against a triangular solve of U^T L^T = W^T
        assert np.allclose(L, linalg.solve_triangular(B.T, W.T, lower=True).T, atol=1e-12)


@pytest.mark.parametrize("name", sorted(RANK_DEFICIENT))
def test_rank_deficient_gets_row_basis(name):
    W = RANK_DEFICIENT[name]()
    k = np.linalg.matrix_rank(W)
    assert k < W.shape[1]
    B, L, used = bs.decompose(W, "auto")
    assert used == "rows" and B.shape == (k, W.shape[1]) and L.shape == (W.shape[0], k)
    assert _rel_err(W, L, B) < 1e-10
    assert np.linalg.matrix_rank(B) == k  # independent rows
    # every row of B is a row of W
    for b in B:
        assert np.min(np.abs(W - b).max(axis=1)) == 0.0


def test_known_ranks_through_the_problem():
    assert ffu.FitnessProblem.from_workload(wl.marginals_a(5)).k == 6
    assert ffu.FitnessProblem.from_workload(wl.marginals_b(5)).k == 10
    # 128 random ranges on 64 cells leave some cell boundary unused with probability
    # about 1 - (1 - e^-4)^63 = 0.69; for seed 0 one boundary is, so the rank is 63.
    W = wl.random_ranges(64, seed=0).W
    merged = int(np.sum(np.all(W[:, 1:] == W[:, :-1], axis=0)))
    assert merged == 1
    prob = ffu.FitnessProblem.from_workload(wl.random_ranges(64, seed=0))
    assert prob.basis == "rows" and prob.k == 63


@pytest.mark.parametrize("basis", ["identity", "upper"])
def test_identity_on_rank_deficient_raises_and_says_why(basis):
    with pytest.raises(ValueError, match=r"full column rank.*rank\(W\) = 5 < d = 16.*no attained optimum.*'rows'"):
        bs.decompose(wl.marginals_a(4).W, basis)
    with pytest.raises(ValueError, match="no attained optimum"):
        ffu.FitnessProblem.from_workload(wl.marginals_a(4), basis=basis)


def test_custom_basis():
    W = wl.prefix(5).W
    rng = np.random.default_rng(3)
    B = rng.normal(size=(5, 5))  # invertible with probability one
    Bc, L, used = bs.decompose(W, B)
    assert used == "custom" and np.array_equal(Bc, B)
    assert _rel_err(W, L, B) < 1e-10
    # §5.1: B = W itself gives L = I.
    W2 = np.array([[1.0, 1.0], [1.0, 0.0]])
    _, L2, _ = bs.decompose(W2, W2)
    assert np.allclose(L2, np.eye(2), atol=1e-14)


def test_custom_basis_with_dependent_rows_raises():
    B = np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match="`basis` rows must be linearly independent: rank 3 < 4"):
        bs.decompose(wl.prefix(4).W, B)


def test_custom_basis_rank_or_span_mismatch_raises():
    W = wl.marginals_a(2).W  # rank 3
    with pytest.raises(ValueError, match="rank 2 but W has rank 3"):
        bs.decompose(W, np.eye(4)[:2])
    # rank 3 but the wrong row space
    with pytest.raises(ValueError, match="do not span the row space of W"):
        bs.decompose(W, np.eye(4)[:3])
    with pytest.raises(ValueError, match=r"shape \(k, 4\)"):
        bs.decompose(W, np.eye(3))
    with pytest.raises(ValueError, match="NaN or inf"):
        bs.decompose(W, np.full((3, 4), np.nan))


def test_unknown_basis_name_lists_choices():
    with pytest.raises(ValueError, match="`basis` must be one of.*'rows'"):
        bs.decompose(np.eye(3), "cholesky")


def test_zero_workload_has_no_row_basis():
    with pytest.raises(ValueError, match="rank 0"):
        bs.decompose(np.zeros((2, 3)), "rows")


def test_row_basis_on_ill_conditioned_full_rank():
    # Singular values from 1 down to 1e-9 (condition number 1e9): still full rank.
    d = 10
    rng = np.random.default_rng(0)
    U = np.linalg.qr(rng.normal(size=(d, d)))[0]
    V = np.linalg.qr(rng.normal(size=(d, d)))[0]
    W = np.vstack([U @ np.diag(np.logspace(0, -9, d)) @ V.T, rng.normal(size=(3, d))])
    B, L, used = bs.decompose(W, "rows")
    assert B.shape == (d, d) and _rel_err(W, L, B) < 1e-10
    assert bs.decompose(W, "auto")[2] == "identity"
    # The Hilbert matrix (condition number 1.6e13) as well.
    H = linalg.hilbert(10)
    for basis in ("identity", "upper", "rows"):
        B, L, _ = bs.decompose(H, basis)
        assert B.shape == (10, 10) and _rel_err(H, L, B) < 1e-10


def test_row_basis_with_duplicated_rows():
    P = wl.prefix(6).W
    W = np.vstack([P, P, P[:2], 3.0 * P[3:4]])
    B, L, used = bs.decompose(W, "rows")
    assert B.shape == (6, 6) and _rel_err(W, L, B) < 1e-10
    M = wl.marginals_a(3).W
    W = np.vstack([M, M, M[::-1]])
    B, L, used = bs.decompose(W, "auto")
    assert used == "rows" and B.shape == (4, 8) and _rel_err(W, L, B) < 1e-10


def test_bases_give_the_same_workload_covariance():
    # The variances diag(L Sigma L^T) depend on the basis only through Sigma's meaning:
    # for B2 = T B1 the matching noise is Sigma2 = T Sigma1 T^T (Theorem 6's map).
    W = wl.random_ranges(6, seed=4).W
    B1, L1, _ = bs.decompose(W, "identity")
    B2, L2, _ = bs.decompose(W, "upper")
    T = linalg.solve(B1.T, B2.T).T  # B2 = T B1
    sigma1 = np.diag(np.arange(1.0, 7.0))
    sigma2 = T @ sigma1 @ T.T
    assert np.allclose(L1 @ sigma1 @ L1.T, L2 @ sigma2 @ L2.T, atol=1e-10)
    assert np.allclose(ffu.model.privacy.profile(sigma1, B1), ffu.model.privacy.profile(sigma2, B2), rtol=1e-10)


def test_exact_identity_is_its_own_decomposition_without_a_rank_test(monkeypatch):
    def no_svd(W):
        raise AssertionError("the identity needs no rank test")

    monkeypatch.setattr(bs, "numerical_rank", no_svd)
    B, L, name = bs.decompose(np.eye(5), "auto")
    assert name == "identity" and np.array_equal(B, np.eye(5)) and np.array_equal(L, np.eye(5))
    assert not bs.is_identity(np.eye(5)[:4]) and not bs.is_identity(2 * np.eye(3))
    near = np.eye(3)
    near[0, 1] = 1e-300
    assert not bs.is_identity(near)


def test_row_basis_falls_back_to_least_squares_when_the_qr_coefficients_miss(monkeypatch):
    # The pivoted QR's coefficients are the fast path; a row they fail to reproduce sends
    # the whole L to the least-squares solve, which must still give an exact decomposition.
    W = wl.random_ranges(12, seed=2).W
    calls = []

    def poor(R, piv, k, norms):
        calls.append(k)
        return np.zeros((piv.size, k))

    monkeypatch.setattr(bs, "_interpolative_L", poor)
    B, L = bs.row_basis(W)
    assert calls and _rel_err(W, L, B) < 1e-10
    np.testing.assert_array_equal(L @ B, W)  # snapped on the least-squares path too


def test_row_basis_from_the_qr_matches_least_squares(monkeypatch):
    rng = np.random.default_rng(5)
    solve_L = bs._solve_L
    fallbacks = []
    monkeypatch.setattr(bs, "_solve_L", lambda B, W: fallbacks.append(1) or solve_L(B, W))
    for W in (wl.random_ranges(40, seed=1).W, rng.normal(size=(60, 8)) @ rng.normal(size=(8, 30)),
              np.vstack([wl.marginals_a(3).W, np.zeros((2, 8)), 1e-6 * wl.marginals_a(3).W])):
        B, L = bs.row_basis(W)
        assert not fallbacks  # the QR's coefficients reproduced every row
        np.testing.assert_allclose(L, solve_L(B, W), rtol=0, atol=1e-12 * np.abs(L).max())
        assert np.all(L[~W.any(axis=1)] == 0)  # zero queries get zero rows
