"""Census-like product workload: the Kronecker solver against the strategies that reach that scale.

``python -m experiments.census [--quick] [--force] [--replot]``

Interfaces layer (experiments): imports ``ffu_cvx`` (``kron``, ``baselines``, ``workloads``),
:mod:`experiments.paths` and :mod:`experiments.runner`; matplotlib in the figure only.

The workload is ``examples/census.json`` (age 116 x sex 2 x hispanic 2 x race 63 x region
50 = 1,461,600 cells; age bands x sex x region, race x hispanic x region, totals per
region at a tighter target); ``--quick`` shrinks every attribute. ``method="kron"`` gives
the least privacy cost (certified: its lower bound and gap are printed) and every
baseline is a Kronecker strategy ``A = A_1 (x) ... (x) A_a`` with unit noise and
least-squares answers, kept in factors like the solver's own mechanism:

- ``identity``: ``A_i = I`` (noise on every cell);
- ``GM (Kronecker)``: ``A_i`` = the groups' blocks on attribute ``i`` stacked;
- ``HM (Kronecker)``: ``A_i`` = the hierarchical tree (Qardaji-Yang-Li branching) on the
  attributes with ordered blocks (bands), the identity elsewhere.

Every mechanism is compared at the Kronecker solution's privacy cost (Theorem 8): the
column ``ratio`` is its largest achieved / target variance there, per group in
``ratio_<group>``.
"""

from __future__ import annotations

import json

import numpy as np

import ffu_cvx as ffu
from ffu_cvx.solvers import baselines
from ffu_cvx.solvers.kron import Factor, KronSolution, Term

from . import paths, runner

NAME = "census"
CELL_VERSION = 1
SPEC = paths.REPO / "examples" / "census.json"
#: ``--quick``: the same groups over a small domain.
QUICK_SPEC = {"domain": {"age": 20, "sex": ["F", "M"], "hispanic": ["N", "Y"], "race": 6, "region": 5},
              "groups": [{"blocks": {"age": {"bands": 5}, "sex": "identity", "region": "identity"}, "variance": 100.0},
                         {"blocks": {"race": "identity", "hispanic": "identity", "region": "identity"},
                          "variance": 200.0},
                         {"blocks": {"region": "identity"}, "variance": 10.0}]}
MECHANISMS = ("kron", "identity", "GM (Kronecker)", "HM (Kronecker)")
COLUMNS = ("mechanism", "privacy_cost", "ratio", "ratio_g0", "ratio_g1", "ratio_g2", "epsilon_1e-6", "lower_bound",
           "gap", "time_s")
ORDERED = ("prefix", "ranges", "bands", "given ranges")


def problem_of(spec: dict):
    """The ProductProblem of a ``{"domain": ..., "groups": [{"blocks", "variance"}]}`` spec."""
    dom = ffu.Domain(spec["domain"])
    return ffu.FitnessProblem.from_workload(ffu.workloads.product(dom, [(g["blocks"], g["variance"])
                                                                         for g in spec["groups"]]))


def strategy_solution(problem, strategies, lower_bound: float, name: str) -> KronSolution:
    """The Kronecker strategy ``(x) A_i`` (one (p_i, n_i) per attribute), unit noise, least squares."""
    factors = [Factor.build((i,), A, np.eye(A.shape[0])) for i, A in enumerate(strategies)]
    pinv = [np.linalg.pinv(A) for A in strategies]
    recon = {g: tuple(b.matrix @ P for b, P in zip(grp.blocks, pinv)) for g, grp in enumerate(problem.groups)}
    sol = KronSolution.from_terms(problem, [Term(tuple(factors), recon)], method=name, status="baseline",
                                  lower_bound=lower_bound, structure="strategy")
    return sol.scaled(sol.privacy_cost * sol.max_ratio)   # meets every target, the tightest exactly


def _stacked(problem, i: int) -> np.ndarray:
    blocks = {b.matrix.tobytes(): b.matrix for b in (g.blocks[i] for g in problem.groups)}
    return np.vstack(list(blocks.values()))


def _tree(n: int) -> np.ndarray:
    return baselines.hierarchical_strategy(n, baselines.hierarchical_branching(n)) if n >= 2 else np.eye(n)


def compare(quick: bool) -> list[dict]:
    """Solve the census workload with method="kron" and compare the strategies at its privacy cost."""
    spec = QUICK_SPEC if quick else json.loads(SPEC.read_text(encoding="utf-8"))
    problem = problem_of(spec)
    sizes = problem.domain.sizes
    sol = ffu.solve(problem, method="kron")
    ordered = [any(g.blocks[i].kind in ORDERED for g in problem.groups) for i in range(len(sizes))]
    mechs = {"kron": sol,
             "identity": strategy_solution(problem, [np.eye(n) for n in sizes], sol.lower_bound, "identity"),
             "GM (Kronecker)": strategy_solution(problem, [_stacked(problem, i) for i in range(len(sizes))],
                                                 sol.lower_bound, "gm"),
             "HM (Kronecker)": strategy_solution(problem, [_tree(n) if o else np.eye(n) for n, o in zip(sizes, ordered)],
                                                 sol.lower_bound, "hm")}
    alpha = sol.privacy_cost
    rows = []
    for name, m in mechs.items():
        at = m.privacy_cost / alpha    # variances scale by this at the solver's privacy cost
        row = {"mechanism": name, "privacy_cost": m.privacy_cost * m.max_ratio, "ratio": m.max_ratio * at,
               "epsilon_1e-6": m.epsilon(1e-6), "lower_bound": sol.lower_bound,
               "gap": m.privacy_cost * m.max_ratio / sol.lower_bound - 1, "time_s": m.time}
        for g, grp in enumerate(problem.groups):
            row[f"ratio_g{g}"] = float(np.max(m.group_variances(g)) / grp.target * at)
        rows.append(row)
    return rows


def cell(quick: bool) -> list[dict]:
    return compare(quick)


def draw(data: dict):
    """Largest variance ratio per group at the Kronecker solution's privacy cost, per mechanism."""
    import matplotlib.pyplot as plt

    rows = data["rows"]
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    groups = [c for c in ("ratio_g0", "ratio_g1", "ratio_g2")]
    labels = ["age bands x sex x region", "race x hispanic x region", "region totals"]
    width = 0.8 / len(rows)
    for k, r in enumerate(rows):
        ax.bar(np.arange(len(groups)) + k * width, [r[g] for g in groups], width, label=r["mechanism"])
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(np.arange(len(groups)) + 0.4 - width / 2, labels, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("max variance / target at equal privacy")
    ax.set_title(f"Census-like workload ({data['meta']['cells']:,} cells): "
                 f"kron certified gap {rows[0]['gap']:.1e}", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def main(argv=None) -> list[dict]:
    args = runner.parser(__doc__.splitlines()[0], figures=True).parse_args(argv)
    spec = QUICK_SPEC if args.quick else json.loads(SPEC.read_text(encoding="utf-8"))
    cells = [runner.Cell({"quick": bool(args.quick)}, label="census (quick)" if args.quick else "census")]
    table = runner.Table("Census-like product workload: privacy cost and variance ratios at equal privacy",
                         COLUMNS, floatfmt=".4g",
                         footer="; ratio = largest variance / target at the kron privacy cost")
    return runner.run_grid(NAME, cells, cell, args, version=CELL_VERSION, table=table,
                           figures=[runner.Figure(NAME, draw)],
                           meta={"cells": problem_of(spec).d, "spec": spec})


if __name__ == "__main__":
    runner.cli(main)
