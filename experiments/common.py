"""Old patch targets for the output folders, kept for tests written before :mod:`experiments.paths`.

Interfaces layer (experiments): imports :mod:`experiments.paths` only. Reading
``common.RESULTS_DIR``, ``FIGURES_DIR`` or ``CACHE_DIR`` gives the folder in use;
setting one to ``<folder>/results``, ``<folder>/figures`` or ``<folder>/results/cache``
sets :data:`experiments.paths.ENV` to ``<folder>`` (setting the clone's folders back
clears it), so ``monkeypatch.setattr(common, "RESULTS_DIR", tmp / "results")`` still
sends every output under ``tmp``. New code sets the one variable instead:
``monkeypatch.setenv(paths.ENV, str(tmp))``. Remove this module when no test patches
these names (tests/test_pml.py and tests/test_sdp.py do today).
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

from . import paths

#: name -> (how many folders the patched path lies below the output folder, its value now)
_FOLDERS = {"RESULTS_DIR": (1, lambda: paths.root() / "results"),
            "FIGURES_DIR": (1, lambda: paths.root() / "figures"),
            "CACHE_DIR": (2, lambda: paths.root() / "results" / "cache")}


def _folder(name: str) -> property:
    depth, now = _FOLDERS[name]

    def set_folder(_module, value) -> None:
        base = Path(value).resolve().parents[depth - 1]
        if base == paths.REPO:
            os.environ.pop(paths.ENV, None)
        else:
            os.environ[paths.ENV] = str(base)

    return property(lambda _module: now(), set_folder)


class _LegacyModule(types.ModuleType):
    RESULTS_DIR = _folder("RESULTS_DIR")
    FIGURES_DIR = _folder("FIGURES_DIR")
    CACHE_DIR = _folder("CACHE_DIR")


sys.modules[__name__].__class__ = _LegacyModule
