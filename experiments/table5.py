"""Table 5: max variance ratio on random range queries, uniform targets (python -m experiments.table5).

See :mod:`experiments.random_tables`.
"""

from __future__ import annotations

from . import runner
from .random_tables import run


def main(argv=None):
    return run("table5", argv)


if __name__ == "__main__":
    runner.cli(main)
