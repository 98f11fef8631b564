"""Figure 3: marginal workload B against the number of binary attributes (``python -m experiments.figure3``).

See :mod:`experiments.marginal_figures`.
"""

from __future__ import annotations

from . import runner
from .marginal_figures import run


def main(argv=None):
    return run("figure3", argv)


if __name__ == "__main__":
    runner.cli(main)
