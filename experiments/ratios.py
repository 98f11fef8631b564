"""The paper's comparison protocol (§7), shared by Tables 4-9 and Figures 2-3.

SM-II finds the least privacy cost ``alpha`` that meets every variance target; every
other mechanism is rescaled to that same ``alpha`` (Theorem 8: variances scale by
``alpha_M / alpha``) and we report its largest achieved / target variance ratio
(:func:`ffu_cvx.max_variance_ratio`). SM-II's own ratio is its ``max_ratio`` (1 up to
the solver's feasibility). Mechanisms, as :mod:`ffu_cvx.solvers.baselines` Solutions:

- ``GM``: noise on every workload answer, least-squares answers (strategy ``W``);
- ``HM``: tree with the Qardaji-Yang-Li branching factor ``HM_b``;
- ``CA``: optimal total-error matrix mechanism (certified dual solver);
- diagnostics that explain the paper's numbers: ``IM``, the identity strategy (what
  the authors' public code reports as "GM"), and ``HM3``, the three-level tree with
  branching ``ceil(sqrt(d))`` that the authors' code uses.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Sequence

import numpy as np

import ffu_cvx as ffu
from ffu_cvx import workloads
from ffu_cvx.solvers import baselines

from . import runner
from .formatting import cell_text

#: Mechanisms in the paper's column order.
MECHANISMS = ("GM", "HM", "CA", "SM-II")
#: SM-II options every ratio experiment uses (recorded in the results). ``max_time`` (s) keeps
#: the suite within an hour on a 2-core machine; a capped run reports its certified gap.
SMII_OPTIONS = {"tol": 1e-4, "max_time": 180.0}
#: The cells' version (``version`` of :func:`experiments.runner.run_grid`).
CELL_VERSION = 3


def mechanism_ratios(problem: ffu.FitnessProblem, *, smii_options: dict | None = None,
                     diagnostics: bool = True) -> dict:
    """Solve ``problem`` with SM-II and compare every baseline at SM-II's privacy cost.

    Returns a JSON-able dict: ``alpha`` (SM-II's privacy cost), the ratio of each of
    :data:`MECHANISMS` (and ``IM``, ``HM3`` with ``diagnostics``), SM-II's certificate
    (``smii_lower_bound``, ``smii_gap``, ``smii_status``), ``HM_b`` and per-mechanism times.
    """
    opts = dict(SMII_OPTIONS if smii_options is None else smii_options)
    out: dict = {"m": problem.m, "d": problem.d, "k": problem.k, "basis": problem.basis}
    t0 = time.perf_counter()
    sm = ffu.solve(problem, method="smii", **opts)
    out["SM-II_time"] = time.perf_counter() - t0
    alpha = float(sm.privacy_cost)
    out.update({"alpha": alpha, "SM-II": ffu.max_variance_ratio(sm, alpha), "smii_status": sm.status,
                "smii_lower_bound": float(sm.lower_bound), "smii_gap": float(sm.gap), "smii_nit": sm.nit})
    runs: list[tuple[str, Callable]] = [("GM", baselines.gm), ("HM", baselines.hm), ("CA", baselines.ca)]
    if diagnostics:
        runs += [("IM", lambda p: baselines.strategy_solution(p, np.eye(p.d), method="identity")),
                 ("HM3", lambda p: baselines.hm(p, branching=max(2, math.ceil(math.sqrt(p.d)))))]
    for name, fn in runs:
        t0 = time.perf_counter()
        sol = fn(problem)
        out[f"{name}_time"] = time.perf_counter() - t0
        out[name] = ffu.max_variance_ratio(sol, alpha)
        out[f"{name}_cost"] = float(sol.privacy_cost * sol.max_ratio)  # its least cost meeting every target
        if name == "HM":
            out["HM_b"] = sol.info["branching"]
        if name == "HM3":
            out["HM3_b"] = sol.info["branching"]
        if name == "CA":
            tv, lb = sol.info["total_variance"], sol.info["total_variance_lower_bound"]
            out["CA_gap"] = tv / lb - 1.0
            out["CA_nit"] = sol.nit
    return out


def restrict(wl: workloads.Workload, keep: Sequence[Sequence[int]], name: str) -> workloads.Workload:
    """``wl`` on a sub-domain (the ``--quick`` versions): the values ``keep[a]`` of attribute ``a``.

    The columns of the other cells are dropped, then every query that counts no kept
    cell, and every repeat of a query (the first stays, with the least target of its repeats).
    """
    cols = np.ravel_multi_index(np.meshgrid(*keep, indexing="ij"), wl.domain).ravel()
    first: dict[bytes, int] = {}
    rows, c, labels = [], [], []
    for w, target, label in zip(wl.W[:, cols], wl.c, wl.labels):
        if not w.any():
            continue
        i = first.setdefault(w.tobytes(), len(rows))
        if i == len(rows):
            rows.append(w), c.append(target), labels.append(label)
        c[i] = min(c[i], target)
    return workloads.from_matrix(np.array(rows), np.array(c), labels, tuple(len(v) for v in keep), name=name)


def paper_value(paper: dict, case: str, mech: str):
    """The paper's number for ``mech`` on ``case`` (None when the paper has none)."""
    row = paper.get(case)
    return None if row is None else row[MECHANISMS.index(mech)]


def display_rows(rows: Sequence[dict], case_column: str, extra: Sequence[str] = ("HM_b", "IM", "HM3", "alpha")):
    """Rows formatted for the terminal: ours and the paper's side by side, 2 decimals."""
    out = []
    for r in rows:
        d = {case_column: r["case"]}
        for mech in MECHANISMS:
            d[mech] = cell_text(r.get(mech), ".2f")
            d[f"{mech} (paper)"] = cell_text(r.get(f"{mech}_paper"), ".2f")
        for e in extra:
            v = r.get(e)
            d[e] = str(v) if isinstance(v, int) else cell_text(v, ".4g" if e == "alpha" else ".2f")
        out.append(d)
    return out


#: Columns of every ratio table's results files.
COLUMNS = ("case", *[c for mech in MECHANISMS for c in (mech, f"{mech}_paper")], "HM_b", "IM", "HM3", "HM3_b",
           "alpha", "smii_gap", "smii_status", "CA_gap", "m", "d", "k", "basis", "SM-II_time", "GM_time", "HM_time",
           "CA_time")
#: Printed under every ratio table.
FOOTER = ("; IM = identity strategy, the authors' code's 'GM'; HM3 = 3-level sqrt(d) tree of the authors' code; "
          "HM_b = Qardaji branching factor")


def run_ratio_table(name: str, argv, cases: Sequence[tuple[str, dict]], quick_cases: Sequence[tuple[str, dict]],
                    build: Callable[..., ffu.FitnessProblem], paper: dict, *, title: str, case_column: str = "case",
                    notes: str = "", meta: dict | None = None) -> list[dict]:
    """Run one ratio table (``cases``, or ``quick_cases`` with ``--quick``), ours beside the paper's.

    A case is ``(label, key)`` with ``key`` the JSON-able keyword arguments of
    ``build`` (seeds included), which returns the case's FitnessProblem. Returns the
    result rows (the ratios, the paper's values and timings).
    """
    args = runner.parser(title).parse_args(argv)

    def cell(smii_options, **workload):
        return mechanism_ratios(build(**workload), smii_options=smii_options)

    cells = [runner.Cell({**key, "smii_options": SMII_OPTIONS}, label=label,
                         row={"case": label, **key, **{f"{m}_paper": paper_value(paper, label, m) for m in MECHANISMS}})
             for label, key in (quick_cases if args.quick else cases)]
    table = runner.Table(title, COLUMNS, notes=notes, display=lambda rows: display_rows(rows, case_column),
                         footer=FOOTER)
    return runner.run_grid(name, cells, cell, args, version=CELL_VERSION, table=table,
                           meta={"smii_options": SMII_OPTIONS, "ca_options": {"solver": "dual", "tol": 1e-9},
                                 "paper": paper, **(meta or {})})
