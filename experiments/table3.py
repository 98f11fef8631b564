"""Table 3: time for gradient descent (GD) and SM-II to reach the same privacy cost (§7.1.2).

``python -m experiments.table3``. On prefix(d) a reference SM-II run (``tol`` 1e-6)
gives ``alpha_ref``; each method then runs on Problem 4 from the same start and is
stopped (by its callback) at the first iterate whose normalised cost is within
``RTOL`` of ``alpha_ref``. GD is capped at ``GD_MAX_TIME`` seconds; a GD that does not
get there (time cap, iteration cap, or its own stopping rule) is reported with its
status and the cost it reached.
"""

from __future__ import annotations

import time

import ffu_cvx as ffu
from ffu_cvx import workloads

from . import runner
from .formatting import cell_text

SIZES = (2, 4, 8, 16)
QUICK_SIZES = (2, 4)
RTOL = 1e-3
GD_MAX_TIME = 120.0
QUICK_GD_MAX_TIME = 5.0
TITLE = f"Table 3. Seconds to reach alpha_ref (1 + {RTOL:g}), GD vs SM-II, prefix queries"
COLUMNS = ("d", "GD_time", "GD_paper", "SM-II_time", "SM-II_paper", "speedup", "alpha_ref", "GD_alpha", "GD_reached",
           "GD_nit", "GD_status", "GD_message", "SM-II_alpha", "SM-II_reached", "SM-II_nit", "SM-II_status")
#: The cells' version (``version`` of :func:`experiments.runner.run_grid`).
CELL_VERSION = 2
PAPER = {2: (7.02, 0.027), 4: (44.90, 0.055), 8: (198.52, 0.053), 16: (264.36, 0.058)}


def time_to_alpha(problem, method: str, target: float, max_time: float) -> dict:
    """Run ``method`` until its normalised cost is <= ``target``; time and cost reached."""
    best = {"alpha": float("inf"), "nit": 0}

    def stop(state):
        best["alpha"] = min(best["alpha"], state.alpha)
        best["nit"] = state.nit
        if state.alpha <= target:
            raise StopIteration

    t0 = time.perf_counter()
    sol = ffu.solve(problem, method=method, callback=stop, max_time=max_time, tol=1e-8)
    elapsed = time.perf_counter() - t0
    return {"time": elapsed, "alpha": best["alpha"], "nit": best["nit"], "reached": best["alpha"] <= target,
            "status": sol.status, "message": sol.message}


def cell(d: int, rtol: float, gd_max_time: float) -> dict:
    problem = ffu.FitnessProblem.from_workload(workloads.prefix(d))
    ref = ffu.solve(problem, method="smii", tol=1e-6)
    target = ref.privacy_cost * ref.max_ratio * (1 + rtol)
    sm = time_to_alpha(problem, "smii", target, max_time=gd_max_time)
    gd = time_to_alpha(problem, "gd", target, max_time=gd_max_time)
    return {"alpha_ref": ref.privacy_cost * ref.max_ratio, "target": target,
            **{f"GD_{k}": v for k, v in gd.items()}, **{f"SM-II_{k}": v for k, v in sm.items()},
            "speedup": gd["time"] / sm["time"]}


def display(rows: list[dict]) -> list[dict]:
    """The terminal's table: GD's time (or why it did not get there) beside the paper's."""
    return [{"d": r["d"],
             "GD (s)": (f"{r['GD_time']:.2f}" if r["GD_reached"] else f"not reached: {r['GD_status']} after "
                        f"{r['GD_time']:.0f} s at alpha {cell_text(r['GD_alpha'])}"),
             "GD paper": r["GD_paper"], "SM-II (s)": f"{r['SM-II_time']:.3f}",
             "SM-II paper": r["SM-II_paper"], "alpha_ref": f"{r['alpha_ref']:.4f}"} for r in rows]


def main(argv=None):
    args = runner.parser("Table 3: GD vs SM-II time to the same privacy cost").parse_args(argv)
    max_time = QUICK_GD_MAX_TIME if args.quick else GD_MAX_TIME
    cells = [runner.Cell({"d": d, "rtol": RTOL, "gd_max_time": max_time}, label=f"d = {d}",
                         row={"d": d, "GD_paper": PAPER[d][0], "SM-II_paper": PAPER[d][1]})
             for d in (QUICK_SIZES if args.quick else SIZES)]
    table = runner.Table(TITLE, COLUMNS, display=display,
                         footer="; times on this machine, noisy under load")
    return runner.run_grid("table3", cells, cell, args, version=CELL_VERSION, table=table,
                           meta={"rtol": RTOL, "gd_max_time": max_time, "paper": PAPER})


if __name__ == "__main__":
    runner.cli(main)
