"""Figure 2 of the PML paper: minimum Laplace scale b against the target leakage eps.

Zhao, Saeidian and Oechtering, "Context-aware Privacy Bounds for Linear Queries"
(arXiv:2601.02855), Figure 2: for the difference workload, the smallest b meeting
eps under Theorem 2 (``b_PML(i)``, solid), Corollary 1 (``b_PML(ii)``, dashed) and DP
(``b_DP = Delta_1/eps``, dash-dotted); we add the guaranteed "safe" bound (dotted).

The paper's grid and its exact difference workload are not known (spec ``pml.md``
§§5-6). **Ours:** consecutive differences with k = 8 (Delta_1 = 4), eps in [0.1, 3],
alpha in {0.01, 0.05, 0.1}. Where eps >= log(1/alpha) no noise is needed and b = 0.
Beside our numbers the table prints the spec's reference values (§7).

    python -m experiments.pml_figure2 [--quick]
"""

from __future__ import annotations

import warnings

import numpy as np

from ffu_cvx import pml
from ffu_cvx.io.jsonio import number

from . import runner
from .plotting import coinciding, curve

NAME = "pml_figure2"
K = 8
ALPHAS = (0.01, 0.05, 0.1)
BOUNDS = ("sign", "safe", "corollary")
#: spec pml.md §7, differences k = 8: (eps, alpha) -> (b_sign, b_safe, b_cor, b_DP)
REFERENCE = {
    (1.0, 0.01): (3.772992, 3.908611, 3.931170, 4.0),
    (1.0, 0.05): (2.906270, 3.544449, 3.653669, 4.0),
    (1.0, 0.1): (1.980632, 3.092923, 3.300717, 4.0),
    (0.5, 0.05): (6.142944, 7.270867, 7.480275, 8.0),
    (2.0, 0.05): (1.189577, 1.601791, 1.659838, 2.0),
}
COLUMNS = ("workload", "k", "alpha", "epsilon", "b_sign", "b_safe", "b_corollary", "b_dp")
#: The cells' version (``version`` of :func:`experiments.runner.run_grid`).
CELL_VERSION = 1
TITLE = "PML Figure 2: minimum b vs epsilon"
NOTES = ("Grid ours (the paper's is not given): consecutive differences, k = 8, Delta_1 = 4 (L1 sensitivity under "
         "substitution: one record changes class), eps in [0.1, 3], alpha in {0.01, 0.05, 0.1}. b = 0 where "
         "eps >= log(1/alpha): no noise is needed under the alpha assumption.")
#: column -> (line style and colour, legend name)
STYLES = {"b_sign": ("-C0", r"$b_{PML(i)}$ Thm 2"), "b_safe": (":C1", "safe (exact worst case)"),
          "b_corollary": ("--C2", r"$b_{PML(ii)}$ Cor. 1"), "b_dp": ("-.C3", r"$b_{DP} = \Delta_1/\varepsilon$")}


def epsilon_grid(quick: bool) -> list[float]:
    """Our eps grid on [0.1, 3], plus the reference points."""
    grid = np.linspace(0.1, 3.0, 5 if quick else 59)
    return sorted(set(np.round(grid, 12).tolist()) | {0.5, 1.0, 2.0})


def scale_curve(k: int, alpha: float, epsilons: list[float]) -> list[dict]:
    """Minimum b for every eps and bound, differences with k classes, prior bound alpha (one row each)."""
    W = pml.differences(k)
    delta = pml.l1_sensitivity(W)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pml.NoNoiseNeededWarning)  # b = 0 is recorded in the rows
        for eps in epsilons:
            row = {"workload": "difference", "k": k, "alpha": alpha, "epsilon": eps, "b_dp": delta / eps}
            row.update({f"b_{bd}": pml.min_noise_scale(W, eps, alpha, bd) for bd in BOUNDS})
            rows.append(row)
    return rows


def reference_check(rows: list[dict]) -> list[dict]:
    """Our minimum scales at the reference points beside the spec's."""
    out = []
    for (eps, a), ref in REFERENCE.items():
        ours = next(r for r in rows if abs(r["alpha"] - a) < 1e-12 and abs(r["epsilon"] - eps) < 1e-12)
        row = {"alpha": a, "epsilon": eps}
        for name, value in zip(("b_sign", "b_safe", "b_corollary", "b_dp"), ref):
            row[name] = ours[name]
            row[f"{name} (spec)"] = value
        out.append(row)
    return out


def draw(data: dict):
    """The figure from the results JSON: one panel per alpha, log b; coinciding curves share a line."""
    import matplotlib.pyplot as plt

    rows = data["rows"]
    alphas = sorted({r["alpha"] for r in rows})
    fig, axes = plt.subplots(1, len(alphas), figsize=(4.4 * len(alphas), 3.9), sharey=True, squeeze=False)
    for ax, a in zip(axes[0], alphas):
        sel = [r for r in rows if r["alpha"] == a]
        # b = 0 (no noise needed) cannot sit on a log axis: those points are left out.
        drawn = {key: [r for r in sel if r[key] is not None and r[key] > 0] for key in STYLES}
        groups = coinciding({key: [r[key] for r in sel] for key in STYLES})
        for group in groups:
            label = " = ".join(STYLES[key][1] for key in group) + (" (coincide)" if len(group) > 1 else "")
            ax.plot(*curve(drawn[group[0]], "epsilon", group[0]), STYLES[group[0]][0], label=label)
        free = np.log(1 / a)  # no noise needed from here on
        if free <= max(r["epsilon"] for r in sel):
            ax.axvline(free, color="gray", lw=0.8, ls=":")
            where = rf"b = 0 from $\log(1/\alpha)$ = {free:.2f} (dotted)"
        else:
            where = rf"$\log(1/\alpha)$ = {free:.2f}: b > 0 throughout"
        ax.set_yscale("log")
        ax.set_title(rf"prior bound $\alpha$ = {a:g}; {where}", fontsize=9)
        ax.set_xlabel(r"target leakage $\varepsilon$ (nats): the release is $\varepsilon$-PML")
        ax.grid(alpha=0.3, which="both")
    axes[0][0].set_ylabel("least Laplace noise scale b")
    axes[0][0].legend(fontsize=8)
    delta = number(rows[0]["b_dp"]) * number(rows[0]["epsilon"])
    fig.suptitle(f"Least Laplace noise meeting a target leakage, consecutive differences on k = {data['meta']['k']} "
                 rf"classes ($\Delta_1$ = {delta:g} under substitution; the DP line gives $\varepsilon$-DP)",
                 fontsize=10)
    fig.tight_layout()
    return fig


def main(argv=None) -> list[dict]:
    args = runner.parser(__doc__.splitlines()[0], figures=True).parse_args(argv)
    epsilons = epsilon_grid(args.quick)
    cells = [runner.Cell({"k": K, "alpha": a, "epsilons": epsilons}, label=f"alpha = {a:g}") for a in ALPHAS]
    table = runner.Table(TITLE, COLUMNS, notes=NOTES, floatfmt=".6f",
                         display=lambda rows: reference_check(rows) if len(rows) == len(ALPHAS) * len(epsilons)
                         else rows)
    return runner.run_grid(NAME, cells, scale_curve, args, version=CELL_VERSION, table=table,
                           figures=[runner.Figure(NAME, draw)], meta={"k": K, "alphas": ALPHAS, "epsilons": epsilons})


if __name__ == "__main__":
    runner.cli(main)
