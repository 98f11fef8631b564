"""Regenerate every table and figure: ``python -m experiments.all [--quick] [...]``.

§7 of the fitness-for-use paper (Tables 2-9, Figures 2 and 3), the census example and the two
PML figures (:mod:`experiments.pml_figure1`, :mod:`experiments.pml_figure2`).

Flags are passed to every experiment as given; the total and per-experiment times are
printed and written to ``results/all.{csv,json,md}``; a failing experiment does not stop
the others, but the run exits non-zero naming it. With ``--jobs N`` (or ``--scheduler
ADDRESS``) every experiment's grid is built first and all their missing cells are
computed on the same workers at once (:func:`experiments.runner.computed`: one pool, so
one experiment's long cell does not leave the other workers idle, and the workers start
once), each cached as it finishes; then the experiments write their tables and figures
from those values, as a serial run would (row "cells": the time of that first step).
Ctrl-C stops the whole run (status 130): the interrupted experiment keeps its finished
cells, the finished experiments their results.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import time
import traceback

from . import runner

EXPERIMENTS = ("table2", "table3", "table4", "table5", "table6", "table7", "table8", "table9",
               "figure2", "figure3", "census", "pml_figure1", "pml_figure2")
TABLE = runner.Table("Run time of every experiment", ("experiment", "time_s", "error"))


def _grids(flags: list[str]) -> list[runner.Grid]:
    """Every experiment's grid, built but not computed (an experiment that fails here is
    reported when it runs)."""
    grids = []
    for name in EXPERIMENTS:
        with runner.planning() as plan:
            try:
                importlib.import_module(f"experiments.{name}").main(flags)
            except (runner.Planned, Exception):  # a failure is reported, with its traceback, by the run below
                pass
        grids += plan
    return grids


def main(argv=None):
    flags = list(sys.argv[1:] if argv is None else argv)
    args = runner.parser("Run every table and figure (the paper's §7, census, PML)").parse_args(flags)
    rows = []
    t0 = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if args.jobs != 1 or args.scheduler:  # every experiment's cells on the same workers, then the tables
            stack.enter_context(runner.computed(_grids(flags), args))
            rows.append({"experiment": "cells", "time_s": time.perf_counter() - t0, "error": ""})
        for name in EXPERIMENTS:
            t = time.perf_counter()
            error = ""
            try:
                importlib.import_module(f"experiments.{name}").main(flags)
            except Exception as exc:  # keep going, report every failure, exit non-zero at the end
                traceback.print_exc()
                error = f"{type(exc).__name__}: {exc}"
            rows.append({"experiment": name, "time_s": time.perf_counter() - t, "error": error})
            if not args.quiet:
                print(f"== {name}: {rows[-1]['time_s']:.1f} s {error}\n", flush=True)
    total = time.perf_counter() - t0
    rows.append({"experiment": "total", "time_s": total, "error": ""})
    runner.write_files(runner.result_files("all", rows, TABLE, {"flags": flags, "total_time_s": total}, args.quick,
                                           args.update_results))
    print(f"All experiments: {total:.1f} s ({total / 60:.1f} min)")
    failed = [r["experiment"] for r in rows if r["error"]]
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)} (see the tracebacks above)")
    return rows


if __name__ == "__main__":
    runner.cli(main)
