"""Core types: FitnessProblem validation, Solution checks, the certificate on §5.1."""

import numpy as np
import pytest

import ffu_cvx as ffu


def test_theorem2_closed_form_is_certified_optimal():
    # §5.1: W = [[1, 1], [1, 0]] answered as W x + N(0, Sigma), targets gamma.
    W = np.array([[1.0, 1.0], [1.0, 0.0]])
    for gamma in (0.5, 1.0, 3.0):
        prob = ffu.FitnessProblem(W, [gamma, gamma], basis=W)
        sol = ffu.Solution.from_sigma(prob, gamma * np.array([[1, 0.5], [0.5, 1]]), method="closed_form")
        assert sol.privacy_cost == pytest.approx(4 / (3 * gamma), rel=1e-12)
        assert sol.max_ratio == pytest.approx(1.0, rel=1e-12)
        assert abs(sol.gap) < 1e-9
        assert sol.lower_bound == pytest.approx(4 / (3 * gamma), rel=1e-9)


def test_suboptimal_sigma_has_positive_gap():
    W = np.array([[1.0, 1.0], [1.0, 0.0]])
    prob = ffu.FitnessProblem(W, [1.0, 1.0], basis=W)
    sol = ffu.Solution.from_sigma(prob, np.array([[1, 0.3], [0.3, 1]]), method="test")
    assert sol.gap > 0.05
    assert sol.lower_bound <= 4 / 3 + 1e-12


def test_scaled_is_problem2():
    W = np.array([[1.0, 1.0], [1.0, 0.0]])
    prob = ffu.FitnessProblem(W, [1.0, 1.0], basis=W)
    sol = ffu.Solution.from_sigma(prob, np.array([[1, 0.5], [0.5, 1]]), method="closed_form")
    s2 = sol.scaled(0.5)
    assert np.max(ffu.model.privacy.profile(s2.sigma, prob.B)) == pytest.approx(0.5, rel=1e-12)
    assert ffu.max_variance_ratio(sol, 0.5) == pytest.approx(s2.max_ratio, rel=1e-12)
    assert s2.max_ratio == pytest.approx((4 / 3) / 0.5, rel=1e-12)


def test_not_positive_definite_sigma_is_solver_error():
    prob = ffu.FitnessProblem(np.eye(2), [1.0, 1.0])
    with pytest.raises(ffu.SolverError, match="positive definite"):
        ffu.Solution.from_sigma(prob, np.array([[1.0, 2.0], [2.0, 1.0]]), method="test")


@pytest.mark.parametrize(
    "W, c, match",
    [
        (np.array([[1.0, np.nan]]), [1.0], "`W`"),
        (np.array([[1.0, 0.0]]), [np.inf], "`c`"),
        (np.array([[1.0, 0.0]]), [0.0], "`c`"),
        (np.array([[1.0, 0.0]]), [1.0, 2.0], "`c`"),
        (np.array([[1.0, 0.0], [0.0, 0.0]]), [1.0, 1.0], "all-zero"),
        (np.zeros((0, 3)), [], "empty"),
        (np.ones(3), [1.0], "2-D"),
    ],
)
def test_bad_input_names_the_argument(W, c, match):
    with pytest.raises(ValueError, match=match):
        ffu.FitnessProblem(W, c)


def test_unknown_method_lists_valid_ones():
    prob = ffu.FitnessProblem(np.eye(2), [1.0, 1.0])
    with pytest.raises(ValueError, match="valid methods"):
        ffu.solve(prob, method="newton")
