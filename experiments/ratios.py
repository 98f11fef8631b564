"""The paper's comparison protocol (§7), shared by Tables 4-9 and Figures 2-3.

SM-II finds the least privacy cost ``alpha`` that meets every variance target; every
other mechanism is rescaled to that same ``alpha`` (Theorem 8: variances scale by
``alpha_M / alpha``) and we report its largest achieved / target variance ratio
(:func:`ffu_cvx.max_variance_ratio`). SM-II's own ratio is its ``max_ratio`` (1 up to
the solver's feasibility). Mechanisms, as :mod:`ffu_cvx.baselines` Solutions:

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
from ffu_cvx import baselines

from . import common

#: Mechanisms in the paper's column order.
MECHANISMS = ("GM", "HM", "CA", "SM-II")
#: SM-II options every ratio experiment uses (recorded in the results). ``max_time`` (s) keeps
#: the suite within an hour on a 2-core machine; a capped run reports its certified gap.
SMII_OPTIONS = {"tol": 1e-4, "max_time": 180.0}
#: Bumped when the computation of a cell changes, so stale cache entries are not reused.
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


def paper_value(paper: dict, case: str, mech: str):
    """The paper's number for ``mech`` on ``case`` (None when the paper has none)."""
    row = paper.get(case)
    return None if row is None else row[MECHANISMS.index(mech)]


def display_rows(rows: Sequence[dict], case_column: str, extra: Sequence[str] = ("HM_b", "IM", "HM3", "alpha")):
    """Rows formatted for the terminal: ours and the paper's side by side, 2 decimals."""
    def f(v, fmt=".2f"):
        return "" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)

    out = []
    for r in rows:
        d = {case_column: r["case"]}
        for mech in MECHANISMS:
            d[mech] = f(r.get(mech))
            d[f"{mech} (paper)"] = f(r.get(f"{mech}_paper"))
        for e in extra:
            v = r.get(e)
            d[e] = str(v) if isinstance(v, int) else f(v, ".4g" if e == "alpha" else ".2f")
        out.append(d)
    return out


def run_ratio_table(name: str, description: str, cases: Sequence[tuple[str, dict, Callable]],
                    quick_cases: Sequence[tuple[str, dict, Callable]], paper: dict, argv=None, *,
                    case_column: str = "case", title: str = "", notes: str = "", meta: dict | None = None):
    """Run one ratio table: cache every cell, print ours beside the paper's, write results.

    ``cases`` / ``quick_cases``: ``(label, key, build)`` with ``key`` a JSON-able dict that
    identifies the workload (seeds included) and ``build()`` returning the FitnessProblem.
    Returns the result rows (dicts with the ratios, the paper's values and timings).
    """
    args = common.parser(description).parse_args(argv)
    cache = common.Cache(name, force=args.force, collect=args.collect, enabled=not args.no_cache)
    todo = quick_cases if args.quick else cases
    t_start = time.perf_counter()
    rows = []
    by_label = {label: (key, build) for label, key, build in todo}
    for label in common.progress(list(by_label), name, args.quiet):
        key, build = by_label[label]
        cell_key = {"case": label, **key, "smii_options": SMII_OPTIONS, "version": CELL_VERSION}
        value = cache.run(cell_key, lambda: mechanism_ratios(build()))
        if value is None:  # --collect and not cached
            continue
        row = {"case": label, **key, **value}
        for mech in MECHANISMS:
            row[f"{mech}_paper"] = paper_value(paper, label, mech)
        rows.append(row)
    total = time.perf_counter() - t_start
    columns = ["case", *[c for mech in MECHANISMS for c in (mech, f"{mech}_paper")], "HM_b", "IM", "HM3",
               "HM3_b", "alpha", "smii_gap", "smii_status", "CA_gap", "m", "d", "k", "basis",
               "SM-II_time", "GM_time", "HM_time", "CA_time"]
    if not args.quiet:
        print(f"\n{title or name}\n")
        print(common.format_table(display_rows(rows, case_column)))
        print(f"\n({total:.1f} s; IM = identity strategy, the authors' code's 'GM'; "
              f"HM3 = 3-level sqrt(d) tree of the authors' code; HM_b = Qardaji branching factor)")
    common.write_results(name, rows, meta={"quick": args.quick, "smii_options": SMII_OPTIONS,
                                           "ca_options": {"solver": "dual", "tol": 1e-9},
                                           "paper": paper, "total_time_s": total, **(meta or {})},
                         columns=columns, title=title or name, notes=notes)
    return rows
