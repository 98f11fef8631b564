"""Numbers a new user sees are right: extreme values, statements, reports and the report figure."""

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx.model import basis as bs
from ffu_cvx.cli import cli, cliplot
from ffu_cvx.model import privacy
from ffu_cvx.release import mechanism

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


# ---------------------------------------------------------------------------- 8. scale
def test_rank_does_not_depend_on_row_scale():
    W = np.diag([1e9, 1e-9])
    assert bs.numerical_rank(W) == 2
    problem = ffu.FitnessProblem(W, [1.0, 1e-20])
    assert problem.k == 2 and problem.basis == "identity"
    sol = ffu.solve(problem, method="sdp")
    # Separable: query 1 forces Sigma_11 = 1e-18 and alpha = 1e18; query 2 is met by any
    # Sigma_22 in [1 / alpha, 1e-2], i.e. a variance in [1e-36, 1e-20].
    assert sol.variances[0] == pytest.approx(1.0, rel=1e-6)
    assert 1e-36 * (1 - 1e-6) <= sol.variances[1] <= 1e-20 * (1 + 1e-6)
    assert sol.privacy_cost == pytest.approx(1e18, rel=1e-6)
    rel = ffu.GaussianMechanism(sol).release([3, 1], rng=0)
    assert rel.variances[1] > 0 and rel.upper[1] > rel.lower[1]  # never an exact zero with CI [0, 0]


def test_row_basis_keeps_tiny_rows_of_a_rank_deficient_workload():
    M = ffu.workloads.marginals_a(3).W  # rank 4 of 8 columns
    scales = np.where(np.arange(M.shape[0]) % 2, 1e9, 1e-9)
    W = scales[:, None] * M
    B, L, used = bs.decompose(W, "auto")
    assert used == "rows" and B.shape[0] == np.linalg.matrix_rank(M) == 4
    err = np.linalg.norm(W - L @ B, axis=1) / np.linalg.norm(W, axis=1)
    assert err.max() < 1e-10  # every query, tiny or huge, reproduced to its own scale


def test_a_tiny_row_is_neither_dropped_nor_lost():
    W = np.array([[1e9, 0.0, 0.0], [0.0, 1e9, 0.0], [1e-12, 1e-12, 1e-12]])
    with pytest.raises(ValueError, match=r"rank 2 but W has rank 3"):
        bs.decompose(W, np.eye(3)[:2])
    # Before: rank 2 here (the tiny row fell below the tolerance) and the row basis dropped it.
    B, L, used = bs.decompose(W, "rows")
    assert B.shape == (3, 3) and np.linalg.norm(W[2] - L[2] @ B) <= 1e-10 * np.linalg.norm(W[2])


def test_scale_spread_and_the_overflow_limit():
    problem = ffu.FitnessProblem(np.diag([1e9, 1e-9]), [1.0, 1e-20])
    assert problem.scale_spread == pytest.approx(1e8, rel=1e-12)  # norms 1e9 / 1 and 1e-9 / 1e-10
    assert ffu.FitnessProblem.from_workload(ffu.workloads.prefix(16)).scale_spread == pytest.approx(4.0)
    with pytest.raises(ValueError, match=r"`W` and `c` are badly scaled: query 1"):
        ffu.FitnessProblem([[1.0, 0.0], [0.0, 1e60]], 1.0)


def test_with_targets_shares_the_decomposition():
    problem = ffu.FitnessProblem.from_workload(ffu.workloads.random_ranges(16, seed=0))
    scaled = problem.with_targets(3.0 * problem.c)
    assert scaled.B is problem.B and scaled.L is problem.L and scaled.basis == problem.basis
    np.testing.assert_array_equal(scaled.c, 3.0 * problem.c)
    with pytest.raises(ValueError, match="`c` must be > 0"):
        problem.with_targets(-problem.c)


# ---------------------------------------------------------------------------- 10. Problem 2's bound
def test_problem2_bound_is_that_of_the_scaled_problem():
    problem = ffu.FitnessProblem.from_workload(ffu.workloads.prefix(8))
    res = mechanism.problem2(problem, 1.0, 1e-6)
    at_k = res.scaled_targets_solution
    np.testing.assert_allclose(at_k.problem.c, res.k * problem.c, rtol=1e-15)
    np.testing.assert_array_equal(at_k.sigma, res.solution.sigma)
    assert at_k.privacy_cost == pytest.approx(res.privacy_cost, rel=1e-12)
    assert at_k.max_ratio == pytest.approx(1.0, rel=1e-12)
    # The bound now sits beside its own privacy cost (not Problem 1's 2.28 next to 0.056).
    assert at_k.lower_bound <= at_k.privacy_cost * (1 + 1e-9)
    assert at_k.lower_bound == pytest.approx(at_k.privacy_cost, rel=1e-6)
    assert at_k.gap == pytest.approx(res.solution.gap, abs=1e-12)
    assert res.k_lower_bound == pytest.approx(at_k.lower_bound / res.privacy_cost * res.k, rel=1e-12)


def test_problem2_result_and_report_are_consistent(tmp_path, capsys):
    out = tmp_path / "h6.json"
    assert cli.main(["solve", str(EXAMPLES / "hierarchy6.json"), "--out", str(out), "--quiet"]) == 0
    res = json.loads(out.read_text())
    alpha, lb = res["privacy_cost"], res["certificate"]["lower_bound"]
    assert lb == pytest.approx(alpha, rel=1e-6) and lb <= alpha * (1 + 1e-9)
    assert res["max_ratio"] == pytest.approx(1.0, rel=1e-9)
    np.testing.assert_allclose(res["problem"]["c"], res["target"]["k"] * np.array([1, 2, 2, 4, 4, 4, 4, 4, 4]),
                               rtol=1e-12)
    capsys.readouterr()
    assert cli.main(["report", str(out)]) == 0
    report = capsys.readouterr().out
    assert f"lower bound {lb:.10g}" in report and f"alpha = {alpha:.10g}" in report


# ---------------------------------------------------------------------------- 11. neighbours
def test_every_privacy_statement_names_the_relation(tmp_path, capsys):
    problem = ffu.FitnessProblem.from_workload(ffu.workloads.prefix(4))
    sol = ffu.solve(problem, method="sdp")
    mech = ffu.GaussianMechanism(sol)
    assert sol.neighbours == mech.neighbours == privacy.ADD_REMOVE
    assert mech.release([1, 2, 3, 4], rng=0).neighbours == privacy.ADD_REMOVE
    assert privacy.ADD_REMOVE in mech.statement(1e-6)
    shutil.copy(EXAMPLES / "prefix16.json", tmp_path / "s.json")
    out = tmp_path / "r.json"
    assert cli.main(["solve", str(tmp_path / "s.json"), "--out", str(out)]) == 0
    assert privacy.ADD_REMOVE in capsys.readouterr().err
    assert json.loads(out.read_text())["neighbours"] == privacy.ADD_REMOVE
    assert cli.main(["report", str(out)]) == 0
    assert f"neighbours    {privacy.ADD_REMOVE}" in capsys.readouterr().out
    answers = tmp_path / "a.csv"
    assert cli.main(["release", str(out), "--data", str(EXAMPLES / "hist16.csv"), "--out", str(answers)]) == 0
    assert privacy.ADD_REMOVE in capsys.readouterr().err


# ---------------------------------------------------------------------------- the report figure
def _figure(problem, **kw):
    sol = ffu.solve(problem, method="smii")
    return sol, cliplot.result_figure(sol, epsilon=sol.epsilon(1e-6), delta=1e-6, **kw)


def test_figure_states_the_privacy_level_and_uses_labels_and_log_axes():
    W = np.vstack([np.ones(6), np.eye(6)])
    labels = ["total"] + [f"cell {i}" for i in range(6)]
    problem = ffu.FitnessProblem(W, [1.0] + [100.0] * 6, labels=labels)
    sol, fig = _figure(problem)
    title = fig._suptitle.get_text()
    assert f"({sol.epsilon(1e-6):.4g}, 1e-06)-DP" in title and privacy.ADD_REMOVE in title
    ax1, ax2 = fig.axes
    assert [t.get_text() for t in ax1.get_xticklabels()] == labels
    assert ax1.get_yscale() == "log"  # targets span 100x
    assert ax2.get_yscale() == "linear"


def test_figure_groups_repeated_labels_and_draws_many_cells_as_a_line():
    problem = ffu.FitnessProblem.from_workload(ffu.workloads.pl94())
    _, fig = _figure(problem)
    ax1, ax2 = fig.axes
    ticks = [t.get_text() for t in ax1.get_xticklabels()]
    assert len(ticks) == len(set(problem.labels)) and set(ticks) == set(problem.labels)
    big = ffu.FitnessProblem.from_workload(ffu.workloads.prefix(100))
    _, fig = _figure(big)
    ax2 = fig.axes[1]
    assert len(ax2.patches) == 0 and len(ax2.lines[0].get_xdata()) == 100  # a line, not 100 bars
    assert "cells tight" in ax2.get_title()


def test_report_plot_prints_the_path(tmp_path, capsys):
    shutil.copy(EXAMPLES / "hierarchy6.json", tmp_path / "s.json")
    shutil.copy(EXAMPLES / "hierarchy6_W.csv", tmp_path / "hierarchy6_W.csv")
    assert cli.main(["solve", str(tmp_path / "s.json"), "--out", str(tmp_path / "r.json"), "--quiet"]) == 0
    fig = tmp_path / "fig.svg"
    capsys.readouterr()
    assert cli.main(["report", str(tmp_path / "r.json"), "--plot", str(fig)]) == 0
    assert f"plot          {fig}" in capsys.readouterr().out
    text = fig.read_text()
    assert "neighbours" in text and "total" in text and math.isfinite(fig.stat().st_size)
