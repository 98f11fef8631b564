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

from . import common

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
COLUMNS = ["workload", "k", "alpha", "epsilon", "b_sign", "b_safe", "b_corollary", "b_dp"]


def epsilon_grid(quick: bool) -> list[float]:
    """Our eps grid on [0.1, 3], plus the reference points."""
    grid = np.linspace(0.1, 3.0, 5 if quick else 59)
    return sorted(set(np.round(grid, 12).tolist()) | {0.5, 1.0, 2.0})


def curve(k: int, alpha: float, epsilons: list[float]) -> list[dict]:
    """Minimum b for every eps and bound, differences with k classes, prior bound alpha."""
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


def plot(rows: list[dict]):
    """Draw the figure from result rows: one panel per alpha."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    alphas = sorted({r["alpha"] for r in rows})
    fig, axes = plt.subplots(1, len(alphas), figsize=(4.2 * len(alphas), 3.6), sharey=True)
    styles = {"b_sign": ("-", r"$b_{PML(i)}$ Thm 2"), "b_safe": (":", "safe (exact worst case)"),
              "b_corollary": ("--", r"$b_{PML(ii)}$ Cor. 1"), "b_dp": ("-.", r"$b_{DP}$")}
    for ax, a in zip(np.atleast_1d(axes), alphas):
        sel = [r for r in rows if r["alpha"] == a]
        eps = [r["epsilon"] for r in sel]
        for key, (ls, label) in styles.items():
            ax.plot(eps, [r[key] if r[key] > 0 else np.nan for r in sel], ls, label=label)
        ax.set_yscale("log")
        ax.set_title(rf"differences k={sel[0]['k']}, $\alpha$={a:g}")
        ax.set_xlabel(r"target leakage $\varepsilon$")
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("minimum noise scale b")
    np.atleast_1d(axes)[0].legend(fontsize=8)
    fig.suptitle(r"Minimum Laplace scale vs $\varepsilon$ (grid ours; b = 0 where $\varepsilon \geq \log(1/\alpha)$, "
                 "not drawn on the log axis)", fontsize=10)
    fig.tight_layout()
    return fig


def main(argv=None) -> list[dict]:
    args = common.parser(__doc__.splitlines()[0]).parse_args(argv)
    cache = common.Cache(NAME, force=args.force, collect=args.collect, enabled=not args.no_cache)
    epsilons = epsilon_grid(args.quick)
    rows = []
    for a in common.progress(ALPHAS, NAME, args.quiet):
        cell = cache.run({"workload": "difference", "k": K, "alpha": a, "epsilons": epsilons},
                         lambda: curve(K, a, epsilons))
        rows.extend(cell or [])
    if not rows:
        print("no cached cells (run without --collect)")
        return rows
    notes = ("Grid ours (the paper's is not given): consecutive differences, k = 8, Delta_1 = 4, eps in "
             "[0.1, 3], alpha in {0.01, 0.05, 0.1}. b = 0 where eps >= log(1/alpha): no noise is needed "
             "under the alpha assumption.")
    common.write_results(NAME, rows, meta={"k": K, "alphas": ALPHAS, "epsilons": epsilons, "quick": args.quick},
                         columns=COLUMNS, title="PML Figure 2: minimum b vs epsilon", notes=notes)
    check = reference_check(rows) if len(rows) == len(ALPHAS) * len(epsilons) else []
    if not args.quiet:
        print(common.format_table(check or rows, floatfmt=".6f"))
    fig = plot(rows)
    common.save_figure(fig, NAME)
    return rows


if __name__ == "__main__":
    main()
