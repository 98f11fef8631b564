"""SM-II across workload classes: targets over decades, trees, mixed scales and dense W beside prefix and ranges.

``python -m experiments.bench_workloads [--quick] [--sizes 256 512] [--workloads ...]
[--seeds S ...] [--tol 1e-4] [--max-time 600] [--no-cache]``

Interface layer (experiments): imports numpy, ``ffu_cvx`` and :mod:`experiments.runner`.
Each class against its easy twin, so that a slow class shows as a ratio:

- ``prefix`` (targets 1) against ``prefix-decades`` (targets log-uniform over 1..1000:
  the dual multipliers spread over decades too);
- ``ranges`` (random ranges, targets U(1, 10)) against ``tree`` (every node of a 4-ary
  tree over the domain, targets U(1, 10));
- the dense real-valued classes: ``dense-ca`` (``W = C A`` with Gaussian ``C`` (d/2 x d/2)
  and ``A`` (d/2 x d), targets 1; at d = 64 the seed authors' ``6_related.py``, the same
  matrix as ``experiments.bench_authors.build("related", seed)``), ``gaussian`` (Gaussian
  ``W`` (2d x d), targets 1) and ``mixed`` (that ``W`` with rows and columns scaled by
  factors log-uniform over 0.1..10: mixed signs and scales).

One row per workload, size and seed (prefix has no seed): wall time, Newton steps,
Hessian products, alpha, the certified gap, the restarts of the multiplier phase and
the polish (``-``, ``polished`` or ``stopped``) with its seconds (part of the wall
time; ``n_hvp`` counts its products too). Default SM-II options (the ≺R polish runs
for ``k <= 32``). Cells are cached under ``out/results/cache/bench_workloads`` (timings
included: ``--force`` or ``--no-cache`` re-measures). Run it as
``OPENBLAS_NUM_THREADS=1 python -m experiments.bench_workloads`` on a shared machine.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

import ffu_cvx as ffu
from ffu_cvx import workloads

from . import runner

NAME = "bench_workloads"
#: The cells' version (``version`` of :func:`experiments.runner.run_grid`; 2: the polish's seconds added).
CELL_VERSION = 2
WORKLOADS = ("prefix", "prefix-decades", "ranges", "tree", "dense-ca", "gaussian", "mixed")
#: The workloads without a seed (one row per size).
SEEDLESS = ("prefix",)
#: Children per node of the ``tree`` workload.
BRANCHING = 4
#: ``mixed`` scales rows and columns by ``10 ** U(-MIXED_DECADES, MIXED_DECADES)``.
MIXED_DECADES = 1.0

COLUMNS = ("workload", "d", "seed", "m", "k", "time_s", "nit", "n_hvp", "alpha", "gap", "restarts", "polish",
           "polish_s", "status")


def dense_ca(d: int, seed: int) -> ffu.FitnessProblem:
    """``W = C A``, Gaussian ``C`` (d/2 x d/2) and ``A`` (d/2 x d), targets 1 (``A`` drawn first)."""
    rng = np.random.default_rng(seed)
    s = d // 2
    A = rng.standard_normal((s, d))
    C = rng.standard_normal((s, s))
    return ffu.FitnessProblem(C @ A, np.ones(s))


def build(workload: str, d: int, seed: int = 0) -> ffu.FitnessProblem:
    """The problem of one row (see the module docstring)."""
    if workload == "prefix":
        return ffu.FitnessProblem.from_workload(workloads.prefix(d))
    if workload == "prefix-decades":
        return ffu.FitnessProblem.from_workload(workloads.prefix(d, targets="decades", seed=seed))
    if workload == "ranges":
        return ffu.FitnessProblem.from_workload(workloads.random_ranges(d, targets="random", seed=seed))
    if workload == "tree":
        return ffu.FitnessProblem.from_workload(workloads.tree(d, BRANCHING, targets="random", seed=seed))
    if workload == "dense-ca":
        return dense_ca(d, seed)
    if workload in ("gaussian", "mixed"):
        rng = np.random.default_rng(seed)
        W = rng.standard_normal((2 * d, d))
        if workload == "mixed":
            rows = 10.0 ** rng.uniform(-MIXED_DECADES, MIXED_DECADES, size=(2 * d, 1))
            W = rows * W * 10.0 ** rng.uniform(-MIXED_DECADES, MIXED_DECADES, size=d)
        return ffu.FitnessProblem(W, np.ones(2 * d))
    raise ValueError(f"`workload` must be one of {WORKLOADS}, got {workload!r}")


def run_cell(workload: str, d: int, seed: int, tol: float, max_time: float) -> dict:
    """One default SM-II solve of ``build(workload, d, seed)`` with its time and counters."""
    problem = build(workload, d, seed)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a stopped polish or solve is reported in the row
        sol = ffu.solve(problem, method="smii", tol=tol, max_time=max_time)
    wall = time.perf_counter() - t0
    failed = sol.info.get("refine_failed")
    polish = "-" if "refine_levels" not in sol.info else ("stopped" if failed else "polished")
    return {"m": problem.m, "k": problem.k, "time_s": wall, "nit": sol.nit, "n_hvp": sol.n_hvp,
            "alpha": sol.privacy_cost, "gap": sol.gap, "restarts": sol.info["restarts"], "polish": polish,
            "polish_s": sol.info.get("refine_time"), "status": sol.status}


def main(argv=None):
    p = runner.parser("SM-II across workload classes")
    p.add_argument("--sizes", nargs="+", type=int, default=None, help="domain sizes (default 64 128 256 512)")
    p.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    p.add_argument("--seeds", nargs="+", type=int, default=[0], help="seeds of the randomised workloads")
    p.add_argument("--tol", type=float, default=1e-4, help="certified relative gap to stop at")
    p.add_argument("--max-time", type=float, default=600.0, help="per-solve time cap in seconds")
    args = p.parse_args(argv)
    sizes = args.sizes or ([64] if args.quick else [64, 128, 256, 512])
    cells = [runner.Cell({"workload": w, "d": d, "seed": s, "tol": args.tol, "max_time": args.max_time},
                         row={"workload": w, "d": d, "seed": s}, label=f"{w}, d = {d}, seed {s}")
             for w in args.workloads for d in sizes for s in ([0] if w in SEEDLESS else args.seeds)]
    table = runner.Table("SM-II across workload classes", COLUMNS, floatfmt=".6g",
                         footer="; wall-clock on this machine, shared with other jobs")
    return runner.run_grid(NAME, cells, run_cell, args, version=CELL_VERSION, table=table,
                           meta={"tol": args.tol, "max_time": args.max_time, "seeds": args.seeds})


if __name__ == "__main__":
    runner.cli(main)
