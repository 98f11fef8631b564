"""Figure 1 of the PML paper: leakage against the prior bound alpha, per workload.

Zhao, Saeidian and Oechtering, "Context-aware Privacy Bounds for Linear Queries"
(arXiv:2601.02855), Figure 1: the histogram, all-range and Haar workloads released
with Laplace noise, comparing the Theorem 2 bound ("sign"), the exact worst case over
the other records ("safe"), Corollary 1 and the DP level ``Delta_1/b``.

The paper's grid is not known (spec ``pml.md`` §6). **Ours:** k = 8 classes and
``b = Delta_1(W) / eps0`` with eps0 = 1, so every DP line sits at 1 and every PML
curve starts there as alpha -> 0; alpha on a log grid up to 1/k. Beside our numbers
the table prints the spec's double-precision reference values (§7).

    python -m experiments.pml_figure1 [--quick]
"""

from __future__ import annotations

import numpy as np

from ffu_cvx import pml

from . import runner
from .plotting import coinciding, curve

NAME = "pml_figure1"
WORKLOADS = ("histogram", "range", "haar")
K = 8
EPS0 = 1.0
#: spec pml.md §7, k = 8, b = Delta_1: (sign, safe) at alpha = 0.01, 0.05, 0.1, 0.125
REFERENCE_ALPHAS = (0.01, 0.05, 0.1, 0.125)
REFERENCE = {
    "histogram": ((0.9830, 0.9830), (0.9176, 0.9176), (0.8414, 0.8414), (0.8054, 0.8054)),
    "range": ((0.9661, 0.9661), (0.8408, 0.8408), (0.7036, 0.7036), (0.6414, 0.6414)),
    "haar": ((0.9441, 0.9660), (0.7474, 0.8406), (0.5459, 0.7031), (0.4585, 0.6408)),
}
COLUMNS = ("workload", "k", "b", "alpha", "sign", "safe", "corollary", "dp")
#: The cells' version (``version`` of :func:`experiments.runner.run_grid`).
CELL_VERSION = 1
TITLE = "PML Figure 1: leakage vs alpha"
NOTES = ("Grid ours (the paper's is not given): k = 8, b = Delta_1(W)/1, alpha log-spaced in [1e-4, 1/k]. "
         "'sign' is Theorem 2, 'safe' the exact worst case over the other records, 'corollary' Corollary 1, "
         "'dp' = Delta_1/b. Delta_1 is the L1 sensitivity under substitution (one record changes class).")
#: bound -> (line style and colour, legend name)
STYLES = {"sign": ("-C0", "Thm 2 (sign)"), "safe": (":C1", "exact worst case (safe)"), "corollary": ("--C2", "Cor. 1"),
          "dp": ("-.C3", r"DP bound $\Delta_1/b$")}
#: Panel titles of the workloads.
PANELS = {"histogram": "histogram (one count per class)", "range": "all ranges", "haar": "Haar wavelet"}


def alpha_grid(k: int, quick: bool) -> list[float]:
    """Our alpha grid: log-spaced from 1e-4 to 1/k, plus the reference points."""
    grid = np.geomspace(1e-4, 1.0 / k, 7 if quick else 61)
    return sorted(set(np.round(grid, 12).tolist()) | set(REFERENCE_ALPHAS))


def leakage_curve(workload: str, k: int, eps0: float, alphas: list[float]) -> list[dict]:
    """Leakage of ``workload`` (k classes) at ``b = Delta_1/eps0`` for every alpha (one row each)."""
    W = pml.pml_workload(workload, k)
    b = pml.l1_sensitivity(W) / eps0
    rows = []
    for a in alphas:
        row = {"workload": workload, "k": k, "b": b, "alpha": a, "dp": pml.dp_leakage(W, b)}
        row.update({bound: pml.leakage(W, b, a, bound) for bound in pml.BOUNDS})
        rows.append(row)
    return rows


def reference_check(rows: list[dict]) -> list[dict]:
    """Our sign/safe values at the reference alphas beside the spec's."""
    out = []
    for wl, ref in REFERENCE.items():
        for a, (sign, safe) in zip(REFERENCE_ALPHAS, ref):
            ours = next(r for r in rows if r["workload"] == wl and abs(r["alpha"] - a) < 1e-12)
            out.append({"workload": wl, "alpha": a, "sign": ours["sign"], "sign (spec)": sign,
                        "safe": ours["safe"], "safe (spec)": safe})
    return out


def draw(data: dict):
    """The figure from the results JSON: one panel per workload; coinciding bounds share a line."""
    import matplotlib.pyplot as plt

    rows = data["rows"]
    fig, axes = plt.subplots(1, len(WORKLOADS), figsize=(4.4 * len(WORKLOADS), 3.9), sharey=True)
    for ax, wl in zip(axes, WORKLOADS):
        sel = [r for r in rows if r["workload"] == wl]
        groups = coinciding({bound: curve(sel, "alpha", bound)[1] for bound in STYLES})
        for group in groups:
            label = " = ".join(STYLES[bound][1] for bound in group) + (" (coincide)" if len(group) > 1 else "")
            ax.plot(*curve(sel, "alpha", group[0]), STYLES[group[0]][0], label=label)
        ax.set_xscale("log")
        ax.set_title(f"{PANELS[wl]}, b = {sel[0]['b']:g}", fontsize=10)
        ax.set_xlabel(r"prior bound $\alpha$ (every class has probability $\geq \alpha$)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7, loc="lower left")
    axes[0].set_ylabel("leakage of one record (nats)")
    meta = data["meta"]
    fig.suptitle(f"How much a Laplace release of linear queries leaks about one record, k = {meta['k']} classes, "
                 rf"noise scale $b = \Delta_1/\varepsilon_0$, $\varepsilon_0$ = {meta['eps0']:g} "
                 rf"(so {meta['eps0']:g}-DP under substitution)", fontsize=10)
    fig.tight_layout()
    return fig


def main(argv=None) -> list[dict]:
    args = runner.parser(__doc__.splitlines()[0], figures=True).parse_args(argv)
    alphas = alpha_grid(K, args.quick)
    cells = [runner.Cell({"workload": wl, "k": K, "eps0": EPS0, "alphas": alphas}, label=wl) for wl in WORKLOADS]
    table = runner.Table(TITLE, COLUMNS, notes=NOTES, floatfmt=".4f",
                         display=lambda rows: reference_check(rows) if len(rows) == len(WORKLOADS) * len(alphas)
                         else rows)
    return runner.run_grid(NAME, cells, leakage_curve, args, version=CELL_VERSION, table=table,
                           figures=[runner.Figure(NAME, draw)], meta={"k": K, "eps0": EPS0, "alphas": alphas})


if __name__ == "__main__":
    runner.cli(main)
