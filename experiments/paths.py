"""Where the experiments write: ``results/``, ``results/cache/`` and ``figures/`` (the one place).

Interfaces layer (experiments): imports the standard library only. Every folder is
resolved from this file, so a run writes into the clone whatever the working
directory. Layout:

- full runs: ``results/<name>.{csv,json,md}`` and ``figures/<name>.{png,pdf}``;
- ``--quick`` runs: ``results/quick/`` and ``figures/quick/``, so a small run never
  replaces the full results (or the committed figures drawn from them);
- finished cells: ``results/cache/<name>/`` (for both: a cell's key holds everything it
  depends on, so a quick cell equal to a full one is the same computation).

One override, for tests and for users who want their outputs elsewhere: the
environment variable :data:`ENV` names a folder; then ``results/``, ``results/cache/``
and ``figures/`` are made under it and used as given, for quick runs too (whoever names
the folder decides what goes in it). Tests set it to a temporary folder (one
``monkeypatch.setenv``), and it reaches subprocesses.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ENV", "REPO", "root", "results_dir", "cache_dir", "figures_dir", "shown"]

#: Environment variable naming the folder that receives every output (see the module docstring).
ENV = "FFU_CVX_EXPERIMENTS_OUT"
#: The clone: the folder above ``experiments/``.
REPO = Path(__file__).resolve().parent.parent
#: Sub-folder of ``results/`` and ``figures/`` for ``--quick`` runs (default location only).
QUICK = "quick"


def root() -> Path:
    """The folder holding ``results/`` and ``figures/``: :data:`ENV` if set, else the clone."""
    chosen = os.environ.get(ENV)
    return Path(chosen).expanduser().resolve() if chosen else REPO


def _split(folder: Path, quick: bool) -> Path:
    return folder / QUICK if quick and not os.environ.get(ENV) else folder


def results_dir(quick: bool = False) -> Path:
    """``results/`` (``results/quick/`` for a quick run in the clone)."""
    return _split(root() / "results", quick)


def cache_dir(name: str) -> Path:
    """``results/cache/<name>/``: one JSON file per finished cell of experiment ``name``."""
    return root() / "results" / "cache" / name


def figures_dir(quick: bool = False) -> Path:
    """``figures/`` (``figures/quick/`` for a quick run in the clone)."""
    return _split(root() / "figures", quick)


def shown(path: Path) -> str:
    """``path`` as printed to the user: relative to the working directory when below it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
