"""The figure of ``ffu-cvx report --plot``: accuracy per query and the privacy profile.

CLI layer: imports numpy, matplotlib (lazily: only when a figure is asked for)
and ``io.files``. The figure states the privacy level it shows ((eps, delta), rho-zCDP
and the neighbouring relation) in its title; queries are named by their labels
(grouped when labels repeat); an axis is logarithmic when its values span more than
:data:`LOG_SPAN`; a profile of many cells is drawn as a line relative to alpha, with
the number of tight cells, rather than as a block of bars of one height.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from ..io.files import atomic_write_bytes

__all__ = ["LOG_SPAN", "result_figure", "plot_result"]

#: An axis is logarithmic when its positive values span more than this factor.
LOG_SPAN = 20.0
#: Up to this many queries every one gets its label on the x-axis.
MAX_TICK_LABELS = 40
#: Up to this many cells the profile is drawn as bars; above, as a line.
MAX_BARS = 64
#: A cell is tight when its profile entry is within this relative distance of alpha.
TIGHT_RTOL = 1e-6


def _spans_decades(values: np.ndarray) -> bool:
    pos = values[values > 0]
    return pos.size > 0 and pos.max() > LOG_SPAN * pos.min()


def _label_queries(ax, labels: tuple, m: int) -> None:
    """Query labels on the x-axis: each one when few and distinct, else one per run of equal labels."""
    if not labels:
        ax.set_xlabel("query $j$")
        return
    if m <= MAX_TICK_LABELS and len(set(labels)) == m:
        ax.set_xticks(np.arange(m), labels, rotation=60, ha="right", fontsize=7)
        return
    starts = [0] + [j for j in range(1, m) if labels[j] != labels[j - 1]]
    ends = starts[1:] + [m]
    if len(starts) > MAX_TICK_LABELS:
        ax.set_xlabel("query $j$")
        return
    ax.set_xticks([(a + b - 1) / 2 for a, b in zip(starts, ends)], [labels[a] for a in starts],
                  rotation=30 if len(starts) > 4 else 0, ha="right" if len(starts) > 4 else "center", fontsize=8)
    for a in starts[1:]:
        ax.axvline(a - 0.5, color="0.7", lw=0.6)
    ax.set_xlabel("query (grouped by label)")


def _accuracy(ax, sol, k: float) -> None:
    problem = sol.problem
    q = np.arange(problem.m)
    target = problem.c
    var = np.asarray(sol.variances)
    ax.bar(q, target, width=1.0, color="0.85", label="target $c_j$" if k == 1 else f"target $k c_j$, k = {k:.4g}")
    ax.plot(q, var, "o" if problem.m <= 200 else ".", ms=3, color="C0", label="achieved variance")
    ax.set(ylabel="variance", title=f"accuracy ({sol['method']}): {int(np.sum(var <= target * (1 + 1e-6)))}"
                                    f"/{problem.m} queries within target")
    if _spans_decades(np.concatenate([target, var])):
        ax.set_yscale("log")
    else:
        ax.set_ylim(0, 1.15 * max(target.max(), var.max()))
    _label_queries(ax, problem.labels, problem.m)
    ax.legend(loc="best", fontsize=8)


def _profile(ax, sol) -> None:
    p = np.asarray(sol.profile)
    alpha = sol.privacy_cost
    ratio = p / alpha
    cells = np.arange(p.size)
    tight = int(np.sum(ratio >= 1 - TIGHT_RTOL))
    if p.size <= MAX_BARS:
        ax.bar(cells, ratio, width=0.8, color="C1", label="profile $p_i / \\alpha$")
    else:
        ax.plot(cells, ratio, "-", lw=0.8, color="C1", label="profile $p_i / \\alpha$")
    ax.axhline(1.0, color="k", lw=1, ls="--", label=f"privacy cost $\\alpha$ = {alpha:.4g}")
    if _spans_decades(ratio):
        ax.set_yscale("log")
    else:
        ax.set_ylim(0, 1.1)
    ax.set(xlabel="cell $i$", ylabel="$p_i / \\alpha$ (1 = tight)",
           title=f"privacy profile: {tight}/{p.size} cells tight")
    ax.legend(loc="lower right", fontsize=8)


def result_figure(sol, *, epsilon: float, delta: float, k: float = 1.0):
    """The matplotlib ``Figure`` of ``sol``'s accuracy (left) and privacy profile (right).

    ``epsilon`` at ``delta`` is the privacy level stated in the title; ``k`` is the
    Problem 2 scaling already in ``sol``'s targets (named in the legend).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    problem = sol.problem
    fig = Figure(figsize=(12, 4.8), layout="constrained")
    FigureCanvasAgg(fig)
    ax1, ax2 = fig.subplots(1, 2)
    _accuracy(ax1, sol, k)
    _profile(ax2, sol)
    fig.suptitle(f"{problem.name} (m = {problem.m}, d = {problem.d}): ({epsilon:.4g}, {delta:g})-DP, "
                 f"{sol.rho:.4g}-zCDP; neighbours: {sol.neighbours}")
    return fig


def plot_result(sol, path: Path, *, epsilon: float, delta: float, k: float = 1.0) -> Path:
    """Draw :func:`result_figure` to ``path`` (.png, .pdf, .svg), atomically."""
    fig = result_figure(sol, epsilon=epsilon, delta=delta, k=k)
    buf = io.BytesIO()
    fig.savefig(buf, format=path.suffix.lstrip(".").lower() or "png", dpi=120)
    return atomic_write_bytes(path, buf.getvalue())
