"""Benchmark of the exact SDP formulations (README "Performance: exact SDP").

``python -m experiments.bench_sdp [--formulations pair schur inverse dual]
[--solvers auto CLARABEL SCS] [--sizes 16 32 64 128] [--workload prefix|ranges] [--refine]``

For every (size, formulation, solver) cell it solves Problem 1 once (``refine=False``
unless ``--refine``) and records CVXPY's compile time, the solver's time, alpha, the
certified lower bound and gap; prefix rows show the paper's Table 2 (IP row) beside
ours. Cells are cached under ``results/cache/bench_sdp`` (timings included: use
``--force`` or ``--no-cache`` to re-measure). A cell whose predicted Clarabel time is
hopeless (LMI order above ``--clarabel-max-order``, default 140) is skipped and shown
as such rather than run for hours. ``--quick`` runs d = 8 and 16 only.
"""

from __future__ import annotations

import time

from ffu_cvx import sdp, workloads
from ffu_cvx.problem import FitnessProblem

from . import runner

NAME = "bench_sdp"

#: The paper's Table 2, IP row (two decimals).
PAPER_IP = {2: 1.33, 4: 1.76, 8: 2.28, 16: 2.91, 64: 4.46}

#: The cells' version (``version`` of :func:`experiments.runner.run_grid`).
CELL_VERSION = 1


def _problem(workload: str, d: int, seed: int) -> FitnessProblem:
    if workload == "prefix":
        return FitnessProblem.from_workload(workloads.prefix(d))
    return FitnessProblem.from_workload(workloads.random_ranges(d, targets="random", seed=seed), basis="auto")


COLUMNS = ("workload", "d", "k", "m", "formulation", "solver", "solver_used", "order", "compile_s", "solve_s",
           "wall_s", "alpha", "paper_IP", "lower_bound", "gap", "nit", "levels", "status")
SHOWN = ("d", "formulation", "solver_used", "order", "compile_s", "solve_s", "alpha", "paper_IP", "gap", "nit",
         "status")


def run_cell(workload: str, d: int, seed: int, formulation: str, solver: str, refine: bool) -> dict:
    """Solve one cell and return its measurements (a JSON-able dict)."""
    problem = _problem(workload, d, seed)
    t0 = time.perf_counter()
    sol = sdp.solve_sdp(problem, formulation=formulation, solver=solver, refine=refine)
    wall = time.perf_counter() - t0
    return {"solver_used": sol.info["solver"], "compile_s": sol.info["compile_time"],
            "solve_s": sol.info["solve_time"], "wall_s": wall, "alpha": sol.privacy_cost,
            "lower_bound": sol.lower_bound, "gap": sol.gap, "nit": sol.nit, "status": sol.status,
            "levels": len(sol.info.get("refine_levels", [])) or None}


def main(argv=None):
    p = runner.parser("Benchmark the exact SDP formulations of Problem 1")
    p.add_argument("--formulations", nargs="+", default=list(sdp.FORMULATIONS), choices=sdp.FORMULATIONS)
    p.add_argument("--solvers", nargs="+", default=["auto"], choices=["auto", "CLARABEL", "SCS"])
    p.add_argument("--sizes", nargs="+", type=int, default=[16, 32, 64, 128])
    p.add_argument("--workload", default="prefix", choices=["prefix", "ranges"])
    p.add_argument("--seed", type=int, default=0, help="seed of the random ranges workload")
    p.add_argument("--refine", action="store_true", help="time the full refined solve")
    p.add_argument("--clarabel-max-order", type=int, default=140,
                   help="skip Clarabel cells whose LMI order exceeds this (dense KKT blocks)")
    args = p.parse_args(argv)
    sizes = [8, 16] if args.quick else args.sizes
    cells, skipped = [], []
    for d in sizes:
        problem = _problem(args.workload, d, args.seed)
        for form in args.formulations:
            for solver in args.solvers:
                order, used = sdp.lmi_order(problem, form), sdp.pick_solver(problem, solver, form)
                row = {"workload": args.workload, "d": d, "k": problem.k, "m": problem.m, "formulation": form,
                       "solver": solver, "order": order,
                       "paper_IP": PAPER_IP.get(d) if args.workload == "prefix" else None}
                if used == "CLARABEL" and order > args.clarabel_max_order:  # hours: shown, not run
                    skipped.append({**row, "solver_used": used,
                                    "status": f"skipped (order {order} > {args.clarabel_max_order})"})
                else:
                    cells.append(runner.Cell({"workload": args.workload, "d": d, "seed": args.seed, "formulation": form,
                                              "solver": solver, "refine": args.refine}, row=row,
                                             label=f"d = {d}, {form}, {solver}"))
    table = runner.Table("Exact SDP: formulations and solvers", COLUMNS, floatfmt=".7g",
                         display=lambda rows: [{c: r.get(c) for c in SHOWN} for r in rows],
                         footer="; times are wall-clock on this machine, shared with other jobs")
    return runner.run_grid(NAME, cells, run_cell, args, version=CELL_VERSION, table=table,
                           combine=lambda rows: rows + skipped,
                           meta={"refine": args.refine, "workload": args.workload, "seed": args.seed})


if __name__ == "__main__":
    runner.cli(main)
