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

from . import common

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
COLUMNS = ["workload", "k", "b", "alpha", "sign", "safe", "corollary", "dp"]


def alpha_grid(k: int, quick: bool) -> list[float]:
    """Our alpha grid: log-spaced from 1e-4 to 1/k, plus the reference points."""
    grid = np.geomspace(1e-4, 1.0 / k, 7 if quick else 61)
    return sorted(set(np.round(grid, 12).tolist()) | set(REFERENCE_ALPHAS))


def curve(workload: str, k: int, alphas: list[float]) -> list[dict]:
    """Leakage of ``workload`` (k classes) at ``b = Delta_1/EPS0`` for every alpha."""
    W = pml.pml_workload(workload, k)
    b = pml.l1_sensitivity(W) / EPS0
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


def plot(rows: list[dict]):
    """Draw the figure from result rows: one panel per workload."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(WORKLOADS), figsize=(4.2 * len(WORKLOADS), 3.6), sharey=True)
    styles = {"sign": ("-", "Thm 2 (sign)"), "safe": (":", "exact worst case (safe)"),
              "corollary": ("--", "Cor. 1"), "dp": ("-.", r"DP $\Delta_1/b$")}
    for ax, wl in zip(axes, WORKLOADS):
        sel = [r for r in rows if r["workload"] == wl]
        alphas = [r["alpha"] for r in sel]
        for key, (ls, label) in styles.items():
            ax.plot(alphas, [r[key] for r in sel], ls, label=label)
        ax.set_xscale("log")
        ax.set_title(f"{wl}, k={sel[0]['k']}, b={sel[0]['b']:g}")
        ax.set_xlabel(r"prior bound $\alpha$")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("leakage (nats)")
    axes[0].legend(fontsize=8)
    fig.suptitle(r"PML leakage vs $\alpha$ (grid ours: k=8, $b=\Delta_1/1$)", fontsize=10)
    fig.tight_layout()
    return fig


def main(argv=None) -> list[dict]:
    args = common.parser(__doc__.splitlines()[0]).parse_args(argv)
    cache = common.Cache(NAME, force=args.force, collect=args.collect, enabled=not args.no_cache)
    alphas = alpha_grid(K, args.quick)
    rows = []
    for wl in common.progress(WORKLOADS, NAME, args.quiet):
        cell = cache.run({"workload": wl, "k": K, "eps0": EPS0, "alphas": alphas}, lambda: curve(wl, K, alphas))
        rows.extend(cell or [])
    if not rows:
        print("no cached cells (run without --collect)")
        return rows
    notes = ("Grid ours (the paper's is not given): k = 8, b = Delta_1(W)/1, alpha log-spaced in "
             "[1e-4, 1/k]. 'sign' is Theorem 2, 'safe' the exact worst case over the other records, "
             "'corollary' Corollary 1, 'dp' = Delta_1/b.")
    common.write_results(NAME, rows, meta={"k": K, "eps0": EPS0, "alphas": alphas, "quick": args.quick},
                         columns=COLUMNS, title="PML Figure 1: leakage vs alpha", notes=notes)
    check = reference_check(rows) if len(rows) == len(WORKLOADS) * len(alphas) else []
    if not args.quiet:
        print(common.format_table(check or rows, floatfmt=".4f"))
    fig = plot(rows)
    common.save_figure(fig, NAME)
    return rows


if __name__ == "__main__":
    main()
