"""Table 2: privacy cost of the exact SDP (the paper's interior point, IP) vs SM-II (§7.1.1).

``python -m experiments.table2``. Prefix workloads with targets 1; both costs are the
normalised cost ``alpha * max_ratio`` (the least cost at which each returned mechanism
meets every target). The paper stopped at d = 64; we add the larger d the SDP handles.
"""

from __future__ import annotations

import time

import numpy as np

import ffu_cvx as ffu
from ffu_cvx import workloads

from . import runner

SIZES = (2, 4, 8, 16, 64, 128)
QUICK_SIZES = (2, 4, 8)
PAPER = {2: (1.33, 1.33), 4: (1.76, 1.76), 8: (2.28, 2.28), 16: (2.91, 2.91), 64: (4.46, 4.46)}
SDP_OPTIONS: dict = {}
SMII_OPTIONS = {"tol": 1e-6}


TITLE = "Table 2. Privacy cost, exact SDP (IP) vs SM-II, prefix queries, targets 1"
COLUMNS = ("d", "IP", "IP_paper", "SM-II", "SM-II_paper", "rel_diff", "sigma_rel_diff", "IP_time", "SM-II_time",
           "IP_status", "SM-II_status", "IP_gap", "SM-II_gap", "error")
#: The cells' version (``version`` of :func:`experiments.runner.run_grid`).
CELL_VERSION = 1


def _solve(problem, method, options):
    t0 = time.perf_counter()
    sol = ffu.solve(problem, method=method, **options)
    return sol, time.perf_counter() - t0


def cell(d: int, sdp: dict, smii: dict) -> dict:
    """Both solvers on prefix(d): normalised costs, times, certificates, Sigma distance."""
    problem = ffu.FitnessProblem.from_workload(workloads.prefix(d))
    ip, t_sdp = _solve(problem, "sdp", sdp)
    sm, t_sm = _solve(problem, "smii", smii)
    a_sdp = ip.privacy_cost * ip.max_ratio
    a_sm = sm.privacy_cost * sm.max_ratio
    # Both Sigmas rescaled to meet every target exactly, then compared (Frobenius).
    s_sdp, s_sm = ip.sigma / ip.max_ratio, sm.sigma / sm.max_ratio
    return {"IP": a_sdp, "SM-II": a_sm, "rel_diff": (a_sm - a_sdp) / a_sdp,
            "sigma_rel_diff": float(np.linalg.norm(s_sm - s_sdp) / np.linalg.norm(s_sdp)),
            "IP_time": t_sdp, "SM-II_time": t_sm, "IP_status": ip.status, "SM-II_status": sm.status,
            "IP_gap": float(ip.gap), "SM-II_gap": float(sm.gap)}


def display(rows: list[dict]) -> list[dict]:
    """The terminal's table: costs to 2 decimals beside the paper's, then the difference and times."""
    def num(r, c, fmt):
        return format(r[c], fmt) if isinstance(r.get(c), float) else r.get(c, "")
    return [{"d": r["d"], **{c: num(r, c, ".2f") for c in ("IP", "IP_paper", "SM-II", "SM-II_paper")},
             "rel. diff": num(r, "rel_diff", ".1e") if "rel_diff" in r else r.get("error", ""),
             "IP time (s)": num(r, "IP_time", ".2f"), "SM-II time (s)": num(r, "SM-II_time", ".2f")} for r in rows]


def main(argv=None):
    args = runner.parser("Table 2: SDP (IP) vs SM-II privacy cost on prefix workloads").parse_args(argv)
    cells = [runner.Cell({"d": d, "sdp": SDP_OPTIONS, "smii": SMII_OPTIONS}, label=f"d = {d}",
                         row={"d": d, "IP_paper": PAPER.get(d, (None, None))[0],
                              "SM-II_paper": PAPER.get(d, (None, None))[1]})
             for d in (QUICK_SIZES if args.quick else SIZES)]
    # A size beyond the SDP's reach is reported as an error row, not hidden (and not cached).
    return runner.run_grid("table2", cells, cell, args, version=CELL_VERSION, errors=(ffu.SolverError,),
                           table=runner.Table(TITLE, COLUMNS, display=display),
                           meta={"sdp_options": SDP_OPTIONS, "smii_options": SMII_OPTIONS, "paper": PAPER})


if __name__ == "__main__":
    runner.cli(main)
