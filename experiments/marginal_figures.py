"""Figures 2 and 3: marginal workloads A and B on ``n`` binary attributes (§7.6).

For each ``n`` up to ``2**n = 4096`` cells, the §7 protocol of
:mod:`experiments.ratios` (SM-II on the row basis, every baseline rescaled to its
privacy cost). The Fourier mechanism (:mod:`ffu_cvx.solvers.fourier`) gives the exact optimum
``alpha*`` in closed form, so it is drawn as the reference curve well past the reach
of the dense solvers, and SM-II's cost is checked against it. The figure is drawn from
``results/<name>.json`` (``--replot`` draws it again from that file alone).
"""

from __future__ import annotations

import ffu_cvx as ffu
from ffu_cvx import workloads
from ffu_cvx.io.jsonio import number
from ffu_cvx.model.privacy import ADD_REMOVE

from . import runner
from .formatting import cell_text
from .plotting import coinciding, curve
from .ratios import SMII_OPTIONS, mechanism_ratios

#: Dense range (cells 2**n) and the Fourier-only range of n. The dense mechanisms stop at
#: n = 12: they work on d x d matrices (A^T A, its Cholesky factor), so n = 13 (8,192
#: cells) needs 0.5 GiB per matrix and about 8 times the time of n = 12.
N_DENSE, N_FOURIER = tuple(range(2, 13)), tuple(range(2, 21))
QUICK_N_DENSE, QUICK_N_FOURIER = (2, 3, 4), tuple(range(2, 7))
#: The cells' version (``version`` of :func:`experiments.runner.run_grid`).
CELL_VERSION = 1
#: mechanism -> matplotlib style. IM is drawn hollow, larger and dashed, on top, so it
#: stays visible where it coincides with GM.
STYLES = {"GM": dict(marker="o", color="tab:blue", ls="-"),
          "HM": dict(marker="s", color="tab:orange", ls="-"),
          "CA": dict(marker="^", color="tab:green", ls="-"),
          "SM-II": dict(marker="D", color="tab:red", ls="-"),
          "IM": dict(marker="o", color="black", ls="--", mfc="none", ms=10, zorder=3)}
LABELS = {"IM": "IM (identity strategy; the authors' 'GM')"}
COLUMNS = ("n", "cells", "GM", "HM", "CA", "SM-II", "IM", "HM3", "HM_b", "alpha", "fourier_alpha", "smii_vs_fourier",
           "GM_cost", "HM_cost", "CA_cost", "k", "smii_gap", "SM-II_time", "CA_time")

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


def cell(name: str, n: int, dense: bool, smii_options: dict | None = None) -> dict:
    """Every mechanism on the dense workload (``dense``), or the Fourier optimum alone."""
    if not dense:
        return {"fourier_alpha": fourier_alpha(name, n)}
    out = mechanism_ratios(ffu.FitnessProblem.from_workload(SPECS[name][1](n)), smii_options=smii_options)
    out["fourier_alpha"] = fourier_alpha(name, n)
    out["smii_vs_fourier"] = out["alpha"] / out["fourier_alpha"] - 1.0
    return out


def draw(name: str, data: dict):
    """Figure ``name`` from its results JSON: ratios (left) and privacy costs (right) against n."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, LogLocator, MaxNLocator, NullFormatter

    rows = data["rows"]
    dense = [r for r in rows if r.get("SM-II") is not None]
    n_max = max(r["n"] for r in dense)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    labels = dict(LABELS)
    if len(coinciding({m: curve(dense, "n", m)[1] for m in ("GM", "IM")})) == 1:
        labels["IM"] = "IM (identity strategy; coincides with GM here)"
    two_level = [r["n"] for r in dense if r.get("HM_b") == r["cells"]]
    if two_level:
        labels["HM"] = f"HM (Qardaji's branching: a 2-level tree up to n = {max(two_level)})"
    off = max(abs(number(r["smii_vs_fourier"])) for r in dense)
    for mech, style in STYLES.items():
        ax1.plot(*curve(dense, "n", mech), label=labels.get(mech, mech), **style)
    ax1.set_ylabel("max variance / target, every mechanism at SM-II's cost")
    ax1.set_title("ratio at equal privacy (SM-II = 1 meets every target)", fontsize=9)
    ax2.plot(*curve(rows, "n", "fourier_alpha"), color="black", label="optimum α* (Fourier, exact)")
    for mech in ("GM", "HM", "CA", "SM-II"):
        style = dict(STYLES[mech], ls="none") if mech == "SM-II" else STYLES[mech]
        label = f"SM-II (= optimum to {off:.0e})" if mech == "SM-II" else mech
        ax2.plot(*curve(dense, "n", "alpha" if mech == "SM-II" else f"{mech}_cost"), label=label, **style)
    ax2.set_ylabel("least privacy cost α = Δ² meeting every target")
    ax2.set_title(f"privacy level: ρ-zCDP with ρ = α/2 ({ADD_REMOVE})", fontsize=9)
    ax2.axvline(n_max + 0.5, color="gray", lw=0.8, ls=":")
    for ax in (ax1, ax2):
        ax.set_xlabel("number of binary attributes n (2ⁿ cells)")
        ax.set_yscale("log")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.grid(alpha=0.3)
    ax1.legend(fontsize=8, loc="upper left")
    ax2.legend(fontsize=8, loc="lower right", bbox_to_anchor=(1, 0.2))
    fig.suptitle(SPECS[name][4], fontsize=11)
    if data["meta"]["quick"]:
        why = "the --quick grid"
    else:
        why = (f"they work on dense d × d matrices (d = 2ⁿ cells), {(2 ** (n_max + 1)) ** 2 * 8 / 2 ** 30:.2g} GiB "
               f"each and about 8 times the time at n = {n_max + 1}")
    fig.text(0.5, 0.015, f"GM, HM, CA, SM-II and IM end at n = {n_max} (dotted line): {why}. The Fourier optimum "
             "needs no dense matrix.", ha="center", fontsize=8)
    # Fixed margins (tight_layout would cost a third drawing pass): room for the labels and the note.
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.17, top=0.87, wspace=0.17)
    return fig


def _display(rows: list[dict]) -> list[dict]:
    return [{"n": r["n"], "cells": r["cells"], **{m: cell_text(r.get(m), ".2f") for m in STYLES},
             "HM_b": r.get("HM_b", ""), "alpha SM-II": cell_text(r.get("alpha"), ".5g"),
             "alpha* Fourier": cell_text(r["fourier_alpha"], ".5g"),
             "SM-II/opt - 1": cell_text(r.get("smii_vs_fourier"), ".1e")} for r in rows]


def run(name: str, argv=None) -> list:
    """Compute (or collect from the cache) every cell of ``name``, write results and the figure."""
    args = runner.parser(SPECS[name][4], figures=True).parse_args(argv)
    n_dense, n_fourier = (QUICK_N_DENSE, QUICK_N_FOURIER) if args.quick else (N_DENSE, N_FOURIER)
    n_min = SPECS[name][3]
    n_dense, n_fourier = tuple(n for n in n_dense if n >= n_min), tuple(n for n in n_fourier if n >= n_min)
    cells = [runner.Cell({"name": name, "n": n, "dense": n in n_dense,
                          **({"smii_options": SMII_OPTIONS} if n in n_dense else {})},
                         row={"n": n, "cells": 2**n}, label=f"n = {n}") for n in n_fourier]
    table = runner.Table(f"{SPECS[name][4]} (ratios at SM-II's privacy cost)", COLUMNS, display=_display,
                         footer="; the paper gives this only as a plot")
    return runner.run_grid(name, cells, cell, args, version=CELL_VERSION, table=table,
                           figures=[runner.Figure(name, lambda data: draw(name, data))],
                           meta={"n_dense": n_dense, "n_fourier": n_fourier, "smii_options": SMII_OPTIONS})
