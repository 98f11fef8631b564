"""Where the experiments write: the output folder ``out/`` by default, the committed folders on request.

Interfaces layer (experiments): imports the standard library only. Every folder is
resolved from this file, so a run writes into the clone whatever the working
directory. Layout (``<root>`` is :func:`root`):

- full runs: ``<root>/results/<name>.{csv,json,md}`` and ``<root>/figures/<name>.{png,pdf}``;
- ``--quick`` runs: ``<root>/results/quick/`` and ``<root>/figures/quick/``, so a small run
  never replaces the full results (or the figures drawn from them);
- finished cells: ``<root>/results/cache/<name>/`` (for both: a cell's key holds everything it
  depends on, so a quick cell equal to a full one is the same computation).

By default ``<root>`` is :data:`OUT` in the clone, which git ignores: running an experiment
leaves the checkout clean. With ``committed=True`` (the experiments' ``--update-results``)
a full run's results and figures go to the clone's committed ``results/`` and ``figures/``
instead; its cells stay cached in the output folder, and quick runs always go there.

One override, for tests and for users who want their outputs elsewhere: the
environment variable :data:`ENV` names a folder; then ``results/``, ``results/cache/``
and ``figures/`` are made under it and used as given, for quick runs and for
``committed=True`` too (whoever names the folder decides what goes in it). Tests set it to
a temporary folder (one ``monkeypatch.setenv``), and it reaches subprocesses.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ENV", "REPO", "OUT", "root", "results_dir", "cache_dir", "figures_dir", "committed_results", "shown"]

#: Environment variable naming the folder that receives every output (see the module docstring).
ENV = "FFU_CVX_EXPERIMENTS_OUT"
#: The clone: the folder above ``experiments/``.
REPO = Path(__file__).resolve().parent.parent
#: The default output folder, in the clone and ignored by git (``.gitignore``).
OUT = "out"
#: Sub-folder of ``results/`` and ``figures/`` for ``--quick`` runs (default location only).
QUICK = "quick"


def root(committed: bool = False) -> Path:
    """The folder holding ``results/`` and ``figures/``: :data:`ENV` if set, else the clone
    (``committed``) or its output folder :data:`OUT`."""
    chosen = os.environ.get(ENV)
    if chosen:
        return Path(chosen).expanduser().resolve()
    return REPO if committed else REPO / OUT


def _folder(name: str, quick: bool, committed: bool) -> Path:
    if os.environ.get(ENV):
        return root() / name
    return root() / name / QUICK if quick else root(committed) / name


def results_dir(quick: bool = False, committed: bool = False) -> Path:
    """``results/`` of a run: the output folder's (its ``quick/`` for a quick run), the clone's with ``committed``."""
    return _folder("results", quick, committed)


def cache_dir(name: str) -> Path:
    """``results/cache/<name>/`` of the output folder: one JSON file per finished cell of experiment ``name``."""
    return root() / "results" / "cache" / name


def figures_dir(quick: bool = False, committed: bool = False) -> Path:
    """``figures/`` of a run: the output folder's (its ``quick/`` for a quick run), the clone's with ``committed``."""
    return _folder("figures", quick, committed)


def committed_results() -> Path:
    """The clone's committed ``results/``, whatever :data:`ENV` says (the documentation's tables are drawn from it)."""
    return REPO / "results"


def shown(path: Path) -> str:
    """``path`` as printed to the user: relative to the working directory when below it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
