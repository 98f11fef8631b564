"""Figures 2 and 3: marginal workloads A and B on ``n`` binary attributes (§7.6).

For each ``n`` up to ``2**n = 4096`` cells, the §7 protocol of
:mod:`experiments.ratios` (SM-II on the row basis, every baseline rescaled to its
privacy cost). The Fourier mechanism (:mod:`ffu_cvx.fourier`) gives the exact optimum
``alpha*`` in closed form, so it is drawn as the reference curve well past the reach
of the dense solvers, and SM-II's cost is checked against it. Figures are drawn from
``results/<name>.json``.
"""

from __future__ import annotations

import json
import time

import ffu_cvx as ffu
from ffu_cvx import workloads

from . import common
from .ratios import SMII_OPTIONS, mechanism_ratios

#: Dense range (cells 2**n) and the Fourier-only range of n.
N_DENSE, N_FOURIER = tuple(range(2, 13)), tuple(range(2, 21))
QUICK_N_DENSE, QUICK_N_FOURIER = (2, 3, 4), tuple(range(2, 7))
CURVES = (("GM", "o", "tab:blue"), ("HM", "s", "tab:orange"), ("CA", "^", "tab:green"),
          ("SM-II", "D", "tab:red"), ("IM", "x", "tab:gray"))

#: name -> (workload letter, dense builder, Fourier targets of n, smallest n, title)
SPECS = {
    "figure2": ("A", workloads.marginals_a, lambda n: {(i,): i + 1.0 for i in range(n)}, 2,
                "Figure 2. Workload A: 1-way marginals, targets 1, 2, ..., n"),
    # n = 2 is skipped for B: one 2-way marginal on 2 attributes is the identity workload.
    "figure3": ("B", workloads.marginals_b, lambda n: {(0, j): float(j) for j in range(1, n)}, 3,
                "Figure 3. Workload B: 2-way marginals (1, j), targets 1, ..., n - 1"),
}


def fourier_alpha(name: str, n: int) -> float:
    """Exact optimal privacy cost of the workload on ``n`` binary attributes."""
    return float(ffu.fourier.min_privacy_cost((2,) * n, SPECS[name][2](n)).privacy_cost)


def dense_cell(name: str, n: int) -> dict:
    problem = ffu.FitnessProblem.from_workload(SPECS[name][1](n))
    out = mechanism_ratios(problem)
    out["fourier_alpha"] = fourier_alpha(name, n)
    out["smii_vs_fourier"] = out["alpha"] / out["fourier_alpha"] - 1.0
    return out


def plot(name: str, path=None) -> list:
    """Draw ``figures/<name>.{png,pdf}`` from ``results/<name>.json``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator, NullFormatter, ScalarFormatter

    data = json.loads((path or common.RESULTS_DIR / f"{name}.json").read_text())
    rows = data["rows"]
    dense = [r for r in rows if r.get("SM-II") is not None]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.4))
    for mech, marker, color in CURVES:
        pts = [(r["n"], r[mech]) for r in dense if r.get(mech) is not None]
        if pts:
            ax1.plot(*zip(*pts), marker=marker, color=color, ls=":" if mech == "IM" else "-",
                     label=mech if mech != "IM" else "IM (identity; authors' 'GM')")
    ax1.set_xlabel("number of binary attributes n (2^n cells)")
    ax1.set_ylabel("max variance / target at SM-II's cost")
    ax1.set_yscale("log")
    ax1.legend(fontsize=8)
    four = [(r["n"], r["fourier_alpha"]) for r in rows]
    ax2.plot(*zip(*four), color="black", label="optimum (Fourier, exact)")
    for mech, marker, color in CURVES[:4]:
        key = "alpha" if mech == "SM-II" else f"{mech}_cost"
        pts = [(r["n"], r[key]) for r in dense if r.get(key) is not None]
        if pts:
            ax2.plot(*zip(*pts), marker=marker, color=color, ls="none" if mech == "SM-II" else "-", label=mech)
    ax2.set_xlabel("number of binary attributes n")
    ax2.set_ylabel("alpha: least cost meeting every target")
    ax2.set_yscale("log")
    ax2.legend(fontsize=8)
    for ax in (ax1, ax2):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
    fig.suptitle(SPECS[name][4], fontsize=10)
    fig.tight_layout()
    return common.save_figure(fig, name)


def run(name: str, argv=None) -> list:
    """Compute (or collect from the cache) every cell of ``name``, write results and the figure."""
    args = common.parser(SPECS[name][4]).parse_args(argv)
    cache = common.Cache(name, force=args.force, collect=args.collect, enabled=not args.no_cache)
    n_dense, n_fourier = (QUICK_N_DENSE, QUICK_N_FOURIER) if args.quick else (N_DENSE, N_FOURIER)
    n_min = SPECS[name][3]
    n_dense, n_fourier = tuple(n for n in n_dense if n >= n_min), tuple(n for n in n_fourier if n >= n_min)
    t_start = time.perf_counter()
    rows = []
    for n in common.progress(n_fourier, name, args.quiet):
        key = {"n": n, "dense": n in n_dense, "smii_options": SMII_OPTIONS, "version": 1}
        if n in n_dense:
            value = cache.run(key, lambda: dense_cell(name, n))
        else:
            value = cache.run(key, lambda: {"fourier_alpha": fourier_alpha(name, n)})
        if value is not None:
            rows.append({"n": n, "cells": 2**n, **value})
    total = time.perf_counter() - t_start
    columns = ["n", "cells", "GM", "HM", "CA", "SM-II", "IM", "HM3", "HM_b", "alpha", "fourier_alpha",
               "smii_vs_fourier", "GM_cost", "HM_cost", "CA_cost", "k", "smii_gap", "SM-II_time", "CA_time"]
    if not args.quiet:
        def f(v, fmt):
            return "" if v is None else format(v, fmt)
        disp = [{"n": r["n"], "cells": r["cells"], **{m: f(r.get(m), ".2f") for m in ("GM", "HM", "CA", "SM-II", "IM")},
                 "HM_b": r.get("HM_b", ""), "alpha SM-II": f(r.get("alpha"), ".5g"),
                 "alpha* Fourier": f(r["fourier_alpha"], ".5g"),
                 "SM-II/opt - 1": f(r.get("smii_vs_fourier"), ".1e")} for r in rows]
        print(f"\n{SPECS[name][4]} (ratios at SM-II's privacy cost)\n")
        print(common.format_table(disp))
        print(f"\n({total:.1f} s; the paper gives this only as a plot)")
    common.write_results(name, rows, meta={"quick": args.quick, "n_dense": n_dense, "n_fourier": n_fourier,
                                           "smii_options": SMII_OPTIONS, "total_time_s": total},
                         columns=columns, title=SPECS[name][4])
    plot(name)
    return rows
