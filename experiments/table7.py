"""Table 7: max variance ratio on random +-1 queries, uniform targets (python -m experiments.table7).

See :mod:`experiments.random_tables`.
"""

from __future__ import annotations

from . import runner
from .random_tables import run


def main(argv=None):
    return run("table7", argv)


if __name__ == "__main__":
    runner.cli(main)
