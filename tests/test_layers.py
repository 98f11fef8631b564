"""The package layout is the architecture: every module imports only its own layer and the layers below.

Every import of every module of ``ffu_cvx`` (function-level ones included) is parsed with ``ast``,
each module is mapped to its layer (:data:`LAYERS`, the longest matching prefix) and an import of a
higher layer fails, as does an import of another module's underscore names. Two packages span two
levels each, their bottom and their top: ``io`` (atomic writes and the JSON encoding; the command
line's formats) and ``release`` (the Release, its noise and the ledger, which the Fourier solver
builds on; the mechanisms, Problem 2 and budgets, which solve).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ffu_cvx as ffu

PACKAGE = Path(ffu.__file__).parent

#: Module prefix -> layer, from the bottom. A module takes the layer of its longest matching prefix.
LAYERS = {
    "ffu_cvx.version": 0, "ffu_cvx.openblas": 0,
    "ffu_cvx.model": 1,
    "ffu_cvx.io": 2, "ffu_cvx.io.files": 2, "ffu_cvx.io.jsonio": 2,
    "ffu_cvx.workloads": 3,
    "ffu_cvx.release": 4, "ffu_cvx.release.noise": 4, "ffu_cvx.release.ledger": 4, "ffu_cvx.release.release": 4,
    "ffu_cvx.solvers": 5,
    "ffu_cvx.release.mechanism": 6, "ffu_cvx.release.product_release": 6, "ffu_cvx.release.budget": 6,
    "ffu_cvx.estimate": 7,
    "ffu_cvx.pml": 8,
    "ffu_cvx.io.specfile": 9, "ffu_cvx.io.clifiles": 9, "ffu_cvx.io.resultfile": 9,
    "ffu_cvx.cli": 10,
    "ffu_cvx": 11, "ffu_cvx.__main__": 11,
}

#: The one import of a higher layer, function-level and why: a Laplace release's statement is checked with
#: PML's bound names and Corollary 1, and the PML package builds its releases on the Release.
UPWARD = {("ffu_cvx.release.release", "ffu_cvx.pml"), ("ffu_cvx.release.release", "ffu_cvx.pml.formulas")}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> int:
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in LAYERS:
            return LAYERS[".".join(parts[:n])]
    raise KeyError(module)


def imports(module: str) -> list[tuple[int, str, list[str], bool]]:
    """``(line, imported module, names taken from it, at module level)`` for every import of the package."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(node) for node in tree.body}
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, [], id(node) in top) for a in node.names if a.name.startswith("ffu_cvx")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                target = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not (target == "ffu_cvx" or target.startswith("ffu_cvx.")):
                continue
            for a in node.names:  # a submodule imported by name is that module
                sub = f"{target}.{a.name}"
                if sub in MODULES:
                    found.append((node.lineno, sub, [], id(node) in top))
                else:
                    found.append((node.lineno, target, [a.name], id(node) in top))
    return found


def test_every_module_has_a_layer():
    assert {m: layer(m) for m in MODULES}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_a_higher_layer(module):
    mine = layer(module)
    bad = [f"{module}:{line} imports {target} (layer {layer(target)} above {mine})"
           for line, target, _, _ in imports(module)
           if layer(target) > mine and (module, target) not in UPWARD]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_another_modules_private_names(module):
    bad = [f"{module}:{line} imports {name} from {target}"
           for line, target, names, _ in imports(module) for name in names
           if name.startswith("_") and name != "__version__" and target != module]
    assert not bad, "\n".join(bad)


def test_the_one_upward_import_is_function_level():
    found = {(module, target): at_top for module in MODULES for _, target, _, at_top in imports(module)
             if (module, target) in UPWARD}
    assert found and not any(found.values()), found


def test_the_package_exports_concepts_not_internals():
    exported = set(ffu.__all__)
    assert {"solve", "METHODS", "solve_many", "FitnessProblem", "Solution", "SolverError", "SDPOptions", "KronOptions",
            "Domain", "Counts", "workloads", "GaussianMechanism", "release_product", "ledger", "consistent",
            "fourier", "pml", "estimate", "__version__"} <= exported
    internals = {"openblas", "validation", "cvx", "refine", "scsmodels", "gls", "nonneg", "topdown", "files",
                 "jsonio", "clifiles", "specfile", "resultfile", "cli", "io"}
    assert not exported & internals
    assert all(hasattr(ffu, name) for name in exported)
    assert ffu.consistent is __import__("ffu_cvx.estimate.consistent", fromlist=["estimate"])
    assert ffu.fourier is ffu.solvers.fourier and ffu.ledger is ffu.release.ledger
