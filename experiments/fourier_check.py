"""Fourier optimum vs the exact SDP and SM-II on small marginal and product workloads.

``python -m experiments.fourier_check``. For every case the weighted Fourier
factorization's Problem 1 optimum (:func:`ffu_cvx.solvers.fourier.max_optimal`) is compared with
``ffu.solve(problem, method="sdp")`` and ``method="smii"`` on the dense workload (row
basis): the spec's § 6 examples and the fitness-for-use paper's marginal workloads A
(1-way, attribute i has target i) and B (2-way (1, j), target j - 1). A method whose
solver failure (``SolverError``) is reported with its message in the table and never
cached; no number is ever filled in.
"""

from __future__ import annotations

import itertools
import time

import numpy as np

import ffu_cvx as ffu
from ffu_cvx.solvers import fourier as F

from . import runner

NAME = "fourier_check"
#: The cells' version (``version`` of :func:`experiments.runner.run_grid`).
CELL_VERSION = 1
METHODS = ("sdp", "smii")


def _ex5():
    fams = [F.ProductFamily((0,), [[1, 1, 0, 0, 0]], 1.0),
            F.ProductFamily((0, 1), [[1, 1, 1, 0, 0], [1, 0, 0, 0]], 2.0),
            F.ProductFamily((1,), [[1, -1, 0, 0]], 0.5)]
    return F.CirculantWorkload((5, 4), fams)


def _all_k(d, ks):
    return {A: 1.0 for k in ks for A in itertools.combinations(range(d), k)}


def _paper(kind, n):
    """Workload A or B as a Fourier workload plus the dense matrices of ``ffu.workloads``."""
    mech_wl = F.marginal_workload_optimum(n, kind).workload
    builder = ffu.workloads.marginals_a if kind == "A" else ffu.workloads.marginals_b
    wl = builder(n)
    return mech_wl, (np.asarray(wl.W), np.asarray(wl.c))


#: name -> (builder of (fourier workload, dense (W, c) or None), spec § 6 value or None)
CASES = {
    "ex1: binary d=2, 1-way": (lambda: (F.MarginalWorkload.from_targets((2, 2), _all_k(2, [1])), None), 1.457107),
    "ex1: binary d=3, 1-way": (lambda: (F.MarginalWorkload.from_targets((2,) * 3, _all_k(3, [1])), None), 1.866025),
    "ex2: binary d=3, 2-way": (lambda: (F.MarginalWorkload.from_targets((2,) * 3, _all_k(3, [2])), None), 1.678023),
    "ex3: (3,3,3), 1+2-way": (lambda: (F.MarginalWorkload.from_targets((3,) * 3, _all_k(3, [1, 2])), None), 2.952316),
    "ex4: (2,3,4) weighted": (lambda: (F.MarginalWorkload.from_weights(
        (2, 3, 4), {(0, 1): 1.0, (1, 2): 2.0, (0,): 0.5}), None), 2.513475),
    "ex5: product Z5 x Z4": (lambda: (_ex5(), None), 4.704939),
    "thresholds (4,3), numeric 0": (lambda: (F.extended_marginals(
        (4, 3), [0], {(0,): 1.0, (0, 1): 2.0, (1,): 1.5}), None), None),
    **{f"workload A, n={n}": ((lambda n=n: _paper("A", n)), None) for n in range(2, 7)},
    **{f"workload B, n={n}": ((lambda n=n: _paper("B", n)), None) for n in range(2, 7)},
}
QUICK = ("ex5: product Z5 x Z4", "workload B, n=3")


COLUMNS = ("case", "N", "m", "components", "fourier", "spec", "fourier_s", "fourier_gap",
           "sdp", "sdp_rel", "sdp_s", "sdp_status", "smii", "smii_rel", "smii_s", "smii_status")
NOTES = ("alpha = least privacy cost meeting every target (Problem 1). `sdp`/`smii` report "
         "privacy_cost * max_ratio (the cost at which the method meets every target); `*_rel` is "
         "the relative difference to the Fourier optimum; `spec` is the value printed in "
         "specs/fourier.md § 6.")


def _dense(name: str):
    wl, dense = CASES[name][0]()
    W, c, _ = F.dense_workload(wl) if dense is None else (*dense, None)
    return wl, W, c


def fourier_cell(name: str) -> dict:
    wl, W, _ = _dense(name)
    t0 = time.perf_counter()
    mech = F.max_optimal(wl)
    return {"N": int(W.shape[1]), "m": int(W.shape[0]), "components": len(mech.components),
            "fourier": mech.privacy_cost, "fourier_s": time.perf_counter() - t0, "fourier_gap": mech.gap}


def method_cell(name: str, method: str) -> dict:
    """``method``'s least privacy cost meeting every target (``privacy_cost * max_ratio``)."""
    _, W, c = _dense(name)
    problem = ffu.FitnessProblem(W, c, basis="rows")
    t0 = time.perf_counter()
    sol = ffu.solve(problem, method=method)
    return {"alpha": float(sol.privacy_cost * sol.max_ratio), "time": time.perf_counter() - t0,
            "status": sol.status}


def cell(case: str, method: str) -> dict:
    return fourier_cell(case) if method == "fourier" else method_cell(case, method)


def one_row_per_case(rows: list[dict]) -> list[dict]:
    """The cells' rows (one per case and method) as one row per case, methods beside the Fourier optimum."""
    out: dict[str, dict] = {}
    for r in rows:
        row = out.setdefault(r["case"], {"case": r["case"], "spec": CASES[r["case"]][1]})
        if r["method"] == "fourier":
            row.update({k: v for k, v in r.items() if k not in ("case", "method")})
            continue
        m = r["method"]
        row[m], row[f"{m}_s"] = r.get("alpha"), r.get("time")
        row[f"{m}_status"] = r.get("status") or f"error: {r['error']}"
    for row in out.values():
        for m in METHODS:
            alpha, base = row.get(m), row.get("fourier")
            row[f"{m}_rel"] = None if alpha is None or base is None else abs(alpha - base) / base
    return list(out.values())


def main(argv=None):
    args = runner.parser(__doc__.splitlines()[0]).parse_args(argv)
    import cvxpy  # noqa: F401  (imported once up front so no cell's time includes it)
    cells = [runner.Cell({"case": name, "method": method}, row={"case": name, "method": method},
                         label=f"{name}: {method}")
             for name in (QUICK if args.quick else tuple(CASES)) for method in ("fourier", *METHODS)]
    table = runner.Table("Fourier optimum vs SDP vs SM-II", COLUMNS, notes=NOTES, floatfmt=".7g",
                         display=lambda rows: [{c: r.get(c) for c in ("case", "N", "fourier", "spec", "fourier_s",
                                                                      "sdp", "sdp_rel", "sdp_s", "smii", "smii_rel",
                                                                      "smii_s")} for r in rows])
    # A method's failure is reported in the table (never cached); the other cells go on.
    return runner.run_grid(NAME, cells, cell, args, version=CELL_VERSION, table=table, errors=(ffu.SolverError,),
                           combine=one_row_per_case)


if __name__ == "__main__":
    runner.cli(main)
