"""Regenerate every table and figure of §7: ``python -m experiments.all [--quick] [...]``.

Flags are passed to every experiment; the total and per-experiment times are printed
and written to ``results/all.json``.
"""

from __future__ import annotations

import importlib
import time

from . import common

EXPERIMENTS = ("table2", "table3", "table4", "table5", "table6", "table7", "table8", "table9",
               "figure2", "figure3")


def main(argv=None):
    args = common.parser("Run every table and figure of the paper's §7").parse_args(argv)
    flags = [f"--{k.replace('_', '-')}" for k, v in vars(args).items() if v]
    times = {}
    t0 = time.perf_counter()
    for name in EXPERIMENTS:
        t = time.perf_counter()
        importlib.import_module(f"experiments.{name}").main(flags)
        times[name] = time.perf_counter() - t
        if not args.quiet:
            print(f"== {name}: {times[name]:.1f} s\n", flush=True)
    total = time.perf_counter() - t0
    rows = [{"experiment": k, "time_s": v} for k, v in times.items()] + [{"experiment": "total", "time_s": total}]
    common.write_results("all", rows, meta={"flags": flags, "total_time_s": total},
                         title="Run time of every experiment")
    print(f"All experiments: {total:.1f} s ({total / 60:.1f} min)")
    return rows


if __name__ == "__main__":
    main()
