"""SM-II on the harder workload classes: targets over decades, trees, dense real W.

Each against the exact SDP at a small size (certified, alpha to 1e-4), and the
benchmark's builders (:mod:`experiments.bench_workloads`) against their definitions.
"""

import numpy as np
import pytest

import ffu_cvx as ffu
from experiments import bench_authors, bench_workloads
from ffu_cvx import workloads
from ffu_cvx.model.result import OPTIMAL

CASES = [
    ("prefix-decades", lambda: workloads.prefix(16, targets="decades", seed=1)),
    ("tree-random", lambda: workloads.tree(16, 4, targets="random", seed=2)),
    ("tree-decades", lambda: workloads.tree(16, 2, targets="decades", seed=0)),
    ("ranges-decades", lambda: workloads.random_ranges(16, targets="decades", seed=3)),
]


def _check(sol, ref, tol=1e-4):
    assert sol.status == OPTIMAL and 0 <= sol.gap <= tol
    assert sol.max_ratio == pytest.approx(1.0, rel=1e-12)
    assert sol.lower_bound <= ref.privacy_cost * (1 + 1e-6)
    assert sol.privacy_cost == pytest.approx(ref.privacy_cost, rel=tol)


@pytest.mark.parametrize("name, build", CASES, ids=[c[0] for c in CASES])
def test_structured_workloads_match_sdp(name, build):
    problem = ffu.FitnessProblem.from_workload(build())
    ref = ffu.solve(problem, method="sdp", refine=False)
    _check(ffu.solve(problem, method="smii", refine=False), ref)


@pytest.mark.parametrize("workload", ["dense-ca", "gaussian", "mixed"])
def test_dense_real_workloads_match_sdp(workload):
    problem = bench_workloads.build(workload, 12, seed=4)
    ref = ffu.solve(problem, method="sdp", refine=False)
    _check(ffu.solve(problem, method="smii", refine=False), ref)


@pytest.mark.parametrize("seed", [0, 1])
def test_dense_ca_at_64_is_the_authors_related_workload(seed):
    ours, theirs = bench_workloads.dense_ca(64, seed), bench_authors.build("related", seed)
    np.testing.assert_array_equal(ours.W, theirs.W)
    np.testing.assert_array_equal(ours.c, theirs.c)
    assert ours.W.shape == (32, 64) and np.linalg.matrix_rank(ours.W) == 32


def test_benchmark_builders():
    d = 16
    shapes = {"prefix": (16, 16), "prefix-decades": (16, 16), "ranges": (32, 16), "tree": (21, 16),
              "dense-ca": (8, 16), "gaussian": (32, 16), "mixed": (32, 16)}
    for name in bench_workloads.WORKLOADS:
        assert bench_workloads.build(name, d, seed=1).W.shape == shapes[name]
    mixed = bench_workloads.build("mixed", 64, seed=0).W
    assert (mixed > 0).any() and (mixed < 0).any()
    # Rows and columns scaled over two decades: row norms spread far more than a Gaussian's.
    norms = np.linalg.norm(mixed, axis=1)
    assert norms.max() / norms.min() > 20
    with pytest.raises(ValueError, match="`workload`"):
        bench_workloads.build("banded", 8)


def test_benchmark_cell_reports_a_certified_row():
    row = bench_workloads.run_cell("tree", 16, 0, tol=1e-4, max_time=60.0)
    assert row["status"] == OPTIMAL and row["gap"] <= 1e-4 and row["m"] == 21 and row["polish"] in ("polished", "stopped")
    assert row["nit"] > 0 and row["n_hvp"] >= row["nit"] and row["restarts"] >= 0
    assert 0 < row["polish_s"] < row["time_s"]
    assert bench_workloads.run_cell("tree", 64, 0, tol=1e-4, max_time=60.0)["polish_s"] is None  # k > 32: none


# Cells that end uncertified without preconditioned CG or a bounded run of certificate skips
# (tol 1e-4, refine off): targets over decades with plain CG (t_max or maxiter: alpha stuck 1.4e-4 above the SDP's at t = 1e9, CG at its
# cap every step) and a tree whose bound was never recomputed (smii.bounds.CERTIFY_MAX_SKIPS).
STUCK = [("prefix-decades", 64, 0), ("prefix-decades", 96, 5), ("prefix-decades", 96, 10), ("tree", 48, 8)]


@pytest.mark.parametrize("workload, d, seed", STUCK, ids=[f"{w}-{d}-{s}" for w, d, s in STUCK])
def test_cells_that_used_to_end_uncertified_now_certify(workload, d, seed):
    sol = ffu.solve(bench_workloads.build(workload, d, seed), method="smii", tol=1e-4, refine=False)
    assert sol.status == OPTIMAL and 0 <= sol.gap <= 1e-4
    assert sol.nit < 200  # were 135, 2,000, 2,000 and 58 (the last at t_max)
