"""A tiny experiment for the runner's tests (``python tests/tiny_experiment.py [--cells N] ...``).

Cell ``i`` returns ``i**2``, ``sqrt(i)`` and a NaN (written as ``null``); it sleeps
``TINY_SLEEP`` seconds first (so a test can interrupt a run between cells), appends
``i`` to the file ``TINY_LOG`` (so a test sees which cells were computed rather than
read from the cache), and raises ``SolverError`` for ``i`` in ``TINY_FAIL`` (comma
separated). The figure plots the squares read from the results JSON and keeps the data
it was drawn from in :data:`DRAWN`.
"""

from __future__ import annotations

import math
import os
import time

from experiments import runner
from ffu_cvx.model.status import SolverError

NAME = "tiny"
DRAWN: list[dict] = []


def cell(i: int) -> dict:
    time.sleep(float(os.environ.get("TINY_SLEEP", "0")))
    if str(i) in os.environ.get("TINY_FAIL", "").split(","):
        raise SolverError(f"cell {i} failed on purpose")
    if os.environ.get("TINY_LOG"):
        with open(os.environ["TINY_LOG"], "a") as fh:
            fh.write(f"{i}\n")
    return {"square": i * i, "root": math.sqrt(i), "nan": float("nan")}


def draw(data: dict):
    import matplotlib.pyplot as plt

    DRAWN.append(data)
    fig, ax = plt.subplots()
    ax.plot([r["i"] for r in data["rows"]], [r.get("square") for r in data["rows"]], "o")
    return fig


def main(argv=None):
    p = runner.parser("tiny experiment of the runner's tests", figures=True)
    p.add_argument("--cells", type=int, default=4)
    args = p.parse_args(argv)
    cells = [runner.Cell({"i": i}, row={"i": i}, label=f"i = {i}") for i in range(2 if args.quick else args.cells)]
    table = runner.Table("Tiny", ("i", "square", "root", "nan", "error"))
    return runner.run_grid(NAME, cells, cell, args, version=1, table=table, errors=(SolverError,),
                           figures=[runner.Figure(NAME, draw)])


if __name__ == "__main__":
    runner.cli(main)
