"""Table 6: max variance ratio on random range queries, random targets (python -m experiments.table6).

See :mod:`experiments.random_tables`.
"""

from __future__ import annotations

from . import runner
from .random_tables import run


def main(argv=None):
    return run("table6", argv)


if __name__ == "__main__":
    runner.cli(main)
