"""Benchmark of the Kronecker solver (docs/design/kron.rst).

``python -m experiments.bench_kron [--quick] [--cases bank census big] [--force]``

- ``bank``: ten small unions of product groups (d <= 1,024):
  ``method="kron"`` against the dense optimum (SM-II at tol 1e-7 on ``problem.dense()``),
  beside the two simple structures (one Kronecker Sigma by block-coordinate descent,
  independent per-group products); columns ``kron_excess`` = kron / dense - 1 and
  ``bound_excess`` = lower bound / dense - 1 (never above the dense solver's own gap).
- ``census``: ``examples/census.json`` (1,461,600 cells): time and peak memory of the solve.
- ``big``: a single product group over 10^9 cells: time of the solve.

Peak memory is ``tracemalloc``'s peak during the solve (numpy's arrays included). Cells
are cached under ``out/results/cache/bench_kron`` (timings too: ``--force`` re-measures). Run
it as ``OPENBLAS_NUM_THREADS=1 python -m experiments.bench_kron`` on a shared machine.
"""

from __future__ import annotations

import json
import time
import tracemalloc
import warnings

import ffu_cvx as ffu
from ffu_cvx.solvers.kron import solve_kron

from . import paths, runner

NAME = "bench_kron"
CELL_VERSION = 1

#: The bank: name -> (domain, [(blocks, target), ...]).
BANK = {
    "(12,2) prefix x total + identity x identity": (
        {"a": 12, "b": 2}, [({"a": "prefix", "b": "total"}, 1.0), ({"a": "identity", "b": "identity"}, 4.0)]),
    "(8,3) prefix x identity + identity x total + total x identity": (
        {"a": 8, "b": 3}, [({"a": "prefix", "b": "identity"}, 2.0), ({"a": "identity", "b": "total"}, 0.5),
                           ({"a": "total", "b": "identity"}, 1.0)]),
    "(16,4) ranges x total + prefix x identity": (
        {"a": 16, "b": 4}, [({"a": "ranges"}, 3.0), ({"a": "prefix", "b": "identity"}, 5.0)]),
    "(8,4,4) prefix x identity x total + total x identity x identity": (
        {"a": 8, "b": 4, "c": 4}, [({"a": "prefix", "b": "identity"}, 2.0), ({"b": "identity", "c": "identity"}, 1.0)]),
    "(10,3,3) bands x identity + identity x total x identity + total": (
        {"a": 10, "b": 3, "c": 3}, [({"a": {"bands": 3}, "b": "identity"}, 1.0),
                                    ({"a": "identity", "c": "identity"}, 4.0), ({}, 0.2)]),
    "(6,6,2) marginals 2-way + 1-way": (
        {"a": 6, "b": 6, "c": 2}, [({"a": "identity", "b": "identity"}, 2.0), ({"c": "identity"}, 0.5),
                                   ({"a": "identity"}, 0.7)]),
    "(8,8) prefix x total + total x prefix + ranges x identity": (
        {"a": 8, "b": 8}, [({"a": "prefix"}, 1.0), ({"b": "prefix"}, 1.0), ({"a": "ranges", "b": "identity"}, 6.0)]),
    "(16,16) prefix x prefix + identity x identity": (
        {"a": 16, "b": 16}, [({"a": "prefix", "b": "prefix"}, 10.0), ({"a": "identity", "b": "identity"}, 3.0)]),
    "(32,8,4) prefix x identity x total + bands x total x identity + total": (
        {"a": 32, "b": 8, "c": 4}, [({"a": "prefix", "b": "identity"}, 8.0), ({"a": {"bands": 8}, "c": "identity"}, 2.0),
                                    ({}, 0.5)]),
    "(64,16) ranges x total + identity x identity + prefix x total": (
        {"a": 64, "b": 16}, [({"a": "ranges"}, 20.0), ({"a": "identity", "b": "identity"}, 4.0),
                             ({"a": "prefix"}, 6.0)]),
}
QUICK_BANK = tuple(list(BANK)[:2])
COLUMNS = ("case", "d", "m", "dense", "kron", "kron_excess", "bound_excess", "kronecker", "kronecker_excess",
           "independent", "independent_excess", "structure", "kron_gap", "kron_time", "dense_time", "error")
SCALE_COLUMNS = ("case", "cells", "queries", "privacy_cost", "gap", "status", "structure", "time_s", "peak_MB")


def _problem(domain, groups):
    return ffu.FitnessProblem.from_workload(ffu.workloads.product(ffu.Domain(domain), groups))


def _cost(sol) -> float:
    return sol.privacy_cost * sol.max_ratio


def bank_cell(case: str) -> dict:
    """One bank workload: dense optimum, kron, and the two simple structures."""
    problem = _problem(*BANK[case])
    t0 = time.perf_counter()
    dense = ffu.solve(problem.dense(), method="smii", tol=1e-7)
    t_dense = time.perf_counter() - t0
    t0 = time.perf_counter()
    kron = solve_kron(problem)
    t_kron = time.perf_counter() - t0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # the simple structures' gaps are the point
        simple = {s: _cost(solve_kron(problem, structure=s)) for s in ("kronecker", "independent")}
    opt = _cost(dense)
    return {"d": problem.d, "m": problem.m, "dense": opt, "kron": _cost(kron), "kron_excess": _cost(kron) / opt - 1,
            "bound_excess": kron.lower_bound / opt - 1, "kronecker": simple["kronecker"],
            "kronecker_excess": simple["kronecker"] / opt - 1, "independent": simple["independent"],
            "independent_excess": simple["independent"] / opt - 1, "structure": kron.info["structure"],
            "kron_gap": kron.gap, "kron_time": t_kron, "dense_time": t_dense}


def _census_problem():
    spec = json.loads((paths.REPO / "examples" / "census.json").read_text(encoding="utf-8"))
    return _problem(spec["domain"], [(g["blocks"], g["variance"]) for g in spec["groups"]])


def _big_problem():
    domain = {"a": 100, "b": 100, "c": 100, "d": 10, "e": 10, "f": 10}
    return _problem(domain, [({"a": "prefix", "b": {"bands": 10}, "c": "identity", "d": "ranges", "e": "prefix"}, 5.0)])


SCALE = {"census": _census_problem, "big": _big_problem}


def scale_cell(case: str) -> dict:
    """Time and peak memory of ``method="kron"`` on a large product problem."""
    problem = SCALE[case]()
    tracemalloc.start()
    t0 = time.perf_counter()
    sol = ffu.solve(problem, method="kron")
    elapsed = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"cells": problem.d, "queries": problem.m, "privacy_cost": sol.privacy_cost, "gap": sol.gap,
            "status": sol.status, "structure": sol.info["structure"], "time_s": elapsed, "peak_MB": peak / 1e6}


def main(argv=None):
    p = runner.parser("Benchmark of the Kronecker solver: bank of small unions, census scale, 10^9 cells")
    p.add_argument("--cases", nargs="+", default=["bank", "census", "big"], choices=["bank", "census", "big"])
    args = p.parse_args(argv)
    rows = []
    if "bank" in args.cases:
        cells = [runner.Cell({"case": c}, label=c, row={"case": c}) for c in (QUICK_BANK if args.quick else BANK)]
        rows += runner.run_grid(NAME, cells, bank_cell, args, version=CELL_VERSION, errors=(ffu.SolverError,),
                                table=runner.Table("Kronecker solver vs the dense optimum (bank of small unions)",
                                                   COLUMNS, floatfmt=".4g"))
    scale = [c for c in ("census", "big") if c in args.cases]
    if scale:
        cells = [runner.Cell({"case": c}, label=c, row={"case": c}) for c in scale]
        rows += runner.run_grid(NAME + "_scale", cells, scale_cell, args, version=CELL_VERSION,
                                table=runner.Table("Kronecker solver at scale", SCALE_COLUMNS, floatfmt=".4g"))
    return rows


if __name__ == "__main__":
    runner.cli(main)
