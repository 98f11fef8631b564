"""Figure 2: marginal workload A against the number of binary attributes (``python -m experiments.figure2``).

See :mod:`experiments.marginal_figures`.
"""

from __future__ import annotations

from . import runner
from .marginal_figures import run


def main(argv=None):
    return run("figure2", argv)


if __name__ == "__main__":
    runner.cli(main)
