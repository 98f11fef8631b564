"""Table 8: max variance ratio on random +-1 queries, random targets (python -m experiments.table8).

See :mod:`experiments.random_tables`.
"""

from __future__ import annotations

from . import runner
from .random_tables import run


def main(argv=None):
    return run("table8", argv)


if __name__ == "__main__":
    runner.cli(main)
