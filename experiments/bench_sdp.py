"""Benchmark of the exact SDP formulations and solvers (docs/design/sdp.rst).

``python -m experiments.bench_sdp [--formulations pair schur inverse dual]
[--solvers auto CLARABEL SCS] [--sizes 16 32 64 128] [--workloads prefix ranges related authors_range ...]
[--refine] [--warm-start auto|none]``

For every (size, formulation, solver) cell it solves Problem 1 once (``refine=False``
unless ``--refine``) and records CVXPY's compile time, the solver's time, alpha, the
certified lower bound and gap, the warm start and the fallbacks ``solver="auto"``
took; prefix rows show the paper's Table 2 (IP row) beside ours. ``related`` is the
seed authors' dense Gaussian workload ``W = C A`` (``C`` (d/2, d/2), ``A`` (d/2, d)
standard Gaussian, seeded by ``--seed``, targets 1; their script ``6_related.py``).
``authors_range``, ``authors_discrete``, ``authors_marginal`` and ``authors_related``
are the workloads of the authors' scripts as :func:`experiments.bench_authors.build`
makes them (d = 64 whatever ``--sizes``). ``main_s`` is the time to the first level
(Problem 1, with the warm start and the Clarabel re-solve the refinement may ask for:
``resolved``), ``refine_s`` the rest; ``single`` says the later levels were read off a
unique optimum. Cells are cached under ``out/results/cache/bench_sdp`` (timings included: use
``--force`` or ``--no-cache`` to re-measure). A cell whose predicted Clarabel time is
hopeless (LMI order above ``--clarabel-max-order``, default 140) is skipped and shown
as such rather than run for hours. ``--quick`` runs d = 8 and 16 only.
"""

from __future__ import annotations

import time

import numpy as np

from ffu_cvx import workloads
from ffu_cvx.solvers.sdp import driver as sdp
from ffu_cvx.model.problem import FitnessProblem

from . import bench_authors, runner

NAME = "bench_sdp"

#: The paper's Table 2, IP row (two decimals).
PAPER_IP = {2: 1.33, 4: 1.76, 8: 2.28, 16: 2.91, 64: 4.46}

#: The cells' version (``version`` of :func:`experiments.runner.run_grid`); 2: warm starts,
#: fallbacks and the solver's status recorded; 3: time split into main solve and refinement.
CELL_VERSION = 3

#: The authors' workloads, by the name of their :func:`experiments.bench_authors.build`.
AUTHORS = {"authors_range": "range", "authors_discrete": "discrete", "authors_marginal": "marginal",
           "authors_related": "related"}
WORKLOADS = ("prefix", "ranges", "related", *AUTHORS)


def gaussian_product(d: int, seed: int) -> FitnessProblem:
    """``W = C A`` with ``C`` (d/2, d/2) and ``A`` (d/2, d) standard Gaussian (seeded), targets 1."""
    rng = np.random.default_rng(seed)
    k = d // 2
    W = rng.standard_normal((k, k)) @ rng.standard_normal((k, d))
    return FitnessProblem(W, np.ones(k), name=f"gaussian C A (d = {d}, seed {seed})")


def _problem(workload: str, d: int, seed: int) -> FitnessProblem:
    if workload in AUTHORS:
        return bench_authors.build(AUTHORS[workload], seed)
    if workload == "prefix":
        return FitnessProblem.from_workload(workloads.prefix(d))
    if workload == "related":
        return gaussian_product(d, seed)
    return FitnessProblem.from_workload(workloads.random_ranges(d, targets="random", seed=seed), basis="auto")


COLUMNS = ("workload", "d", "k", "m", "formulation", "solver", "solver_used", "order", "compile_s", "solve_s",
           "main_s", "refine_s", "wall_s", "alpha", "paper_IP", "lower_bound", "gap", "nit", "levels", "resolved",
           "single", "status", "warm_start", "fallbacks", "solver_status", "refine_failed")
SHOWN = ("workload", "d", "formulation", "solver_used", "order", "main_s", "refine_s", "wall_s", "alpha", "paper_IP",
         "gap", "nit", "levels", "single", "status", "warm_start")


def run_cell(workload: str, d: int, seed: int, formulation: str, solver: str, refine: bool,
             warm_start: str = "auto") -> dict:
    """Solve one cell and return its measurements (a JSON-able dict)."""
    problem = _problem(workload, d, seed)
    seen = []
    t0 = time.perf_counter()
    sol = sdp.solve_sdp(problem, formulation=formulation, solver=solver, refine=refine,
                        warm_start=None if warm_start == "none" else warm_start,
                        callback=lambda result: seen.append(time.perf_counter()))
    wall = time.perf_counter() - t0
    main = seen[0] - t0 if seen else wall
    return {"solver_used": sol.info["solver"], "compile_s": sol.info["compile_time"],
            "solve_s": sol.info["solve_time"], "main_s": main, "refine_s": wall - main if refine else None,
            "resolved": sol.info.get("refine_resolved", False) if refine else None,
            "single": sol.info.get("refine_single") if refine else None, "wall_s": wall, "alpha": sol.privacy_cost,
            "lower_bound": sol.lower_bound, "gap": sol.gap, "nit": sol.nit, "status": sol.status,
            "levels": len(sol.info.get("refine_levels", [])) or None, "warm_start": sol.info.get("warm_start"),
            "fallbacks": "; ".join(sol.info.get("fallbacks", [])) or None,
            "solver_status": sol.info.get("solver_status"), "refine_failed": sol.info.get("refine_failed")}


def _cells(args, names, sizes) -> tuple[list, list]:
    """``(cells to run, rows of skipped cells)`` for ``names`` x ``sizes`` x formulations x solvers."""
    cells, skipped = [], []
    for workload in names:
        for d in sorted({bench_authors.D} if workload in AUTHORS else sizes):
            problem = _problem(workload, d, args.seed)
            for form in args.formulations:
                for solver in args.solvers:
                    order, used = sdp.lmi_order(problem, form), sdp.pick_solver(problem, solver, form)
                    row = {"workload": workload, "d": d, "k": problem.k, "m": problem.m, "formulation": form,
                           "solver": solver, "order": order,
                           "paper_IP": PAPER_IP.get(d) if workload == "prefix" else None}
                    if used == "CLARABEL" and order > args.clarabel_max_order:  # hours: shown, not run
                        skipped.append({**row, "solver_used": used,
                                        "status": f"skipped (order {order} > {args.clarabel_max_order})"})
                        continue
                    cells.append(runner.Cell({"workload": workload, "d": d, "seed": args.seed, "formulation": form,
                                              "solver": solver, "refine": args.refine,
                                              "warm_start": args.warm_start}, row=row,
                                             label=f"{workload}, d = {d}, {form}, {solver}"))
    return cells, skipped


def main(argv=None):
    p = runner.parser("Benchmark the exact SDP formulations of Problem 1")
    p.add_argument("--formulations", nargs="+", default=list(sdp.FORMULATIONS), choices=sdp.FORMULATIONS)
    p.add_argument("--solvers", nargs="+", default=["auto"], choices=["auto", "CLARABEL", "SCS"])
    p.add_argument("--sizes", nargs="+", type=int, default=[16, 32, 64, 128])
    p.add_argument("--workloads", nargs="+", default=None, choices=WORKLOADS,
                   help="workloads to run (default: --workload's one); the authors_* ones run at d = 64 only")
    p.add_argument("--workload", default="prefix", choices=WORKLOADS, help="one workload (see --workloads)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random ranges and related workloads")
    p.add_argument("--warm-start", default="auto", choices=["auto", "none"],
                   help="solve_sdp's warm_start ('auto': SCS from SM-II where auto picks SCS)")
    p.add_argument("--refine", action="store_true", help="time the full refined solve")
    p.add_argument("--clarabel-max-order", type=int, default=140,
                   help="skip Clarabel cells whose LMI order exceeds this (dense KKT blocks)")
    args = p.parse_args(argv)
    names = args.workloads or [args.workload]
    cells, skipped = _cells(args, names, [8, 16] if args.quick else args.sizes)
    table = runner.Table("Exact SDP: formulations and solvers", COLUMNS, floatfmt=".7g",
                         display=lambda rows: [{c: r.get(c) for c in SHOWN} for r in rows],
                         footer="; times are wall-clock on this machine, shared with other jobs")
    return runner.run_grid(NAME, cells, run_cell, args, version=CELL_VERSION, table=table,
                           combine=lambda rows: rows + skipped,
                           meta={"refine": args.refine, "workloads": names, "seed": args.seed,
                                 "warm_start": args.warm_start})


if __name__ == "__main__":
    runner.cli(main)
