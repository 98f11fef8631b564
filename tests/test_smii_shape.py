"""SM-II's heuristics are options, switched per call: the bank's ablations name real options, and no
test reaches a heuristic by patching a module constant of the solver."""

import ast
import dataclasses
from pathlib import Path

from experiments import bench_bank
from ffu_cvx.solvers.smii import options

TESTS = Path(__file__).parent
#: The modules whose constants tests must not patch.
SOLVER = ("ffu_cvx.solvers.smii", "ffu_cvx.model.certificate")


def _solver_names(tree: ast.Module) -> set[str]:
    """The names a test module binds to SM-II's modules (``from ffu_cvx.solvers.smii import kkt``, ``import ... as``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(SOLVER):
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module == "ffu_cvx":
            names.update(a.asname or a.name for a in node.names if a.name == "certificate")
        elif isinstance(node, ast.Import):
            names.update(a.asname for a in node.names if a.asname and a.name.startswith(SOLVER))
    return names


def _constant_patches(path: Path) -> list[str]:
    """``monkeypatch.setattr`` calls in ``path`` that set an upper-case name of an SM-II module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    solver, found = _solver_names(tree), []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "setattr"
                and node.args):
            continue
        first = node.args[0]
        dotted = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
        if dotted and dotted.startswith(SOLVER) and dotted.rsplit(".", 1)[-1].isupper():
            found.append(f"{path.name}:{node.lineno}")
        name = len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value
        if isinstance(first, ast.Name) and first.id in solver and isinstance(name, str) and name.isupper():
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_test_patches_a_constant_of_the_solver():
    found = [hit for path in sorted(TESTS.glob("test_*.py")) for hit in _constant_patches(path)]
    assert found == []


def test_the_detector_sees_a_patched_constant(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text("from ffu_cvx.solvers.smii import kkt\n\ndef test_x(monkeypatch):\n"
                      "    monkeypatch.setattr(kkt, 'START', 0.0)\n"
                      "    monkeypatch.setattr('ffu_cvx.solvers.smii.schedule.SETTLE', 1.0)\n"
                      "    monkeypatch.setattr(kkt, 'kkt_step', None)\n", encoding="utf-8")
    assert _constant_patches(sample) == ["test_sample.py:4", "test_sample.py:5"]


def test_every_ablation_switches_a_real_option():
    fields = {f.name for f in dataclasses.fields(options.Options)}
    for name, (switch, what) in bench_bank.ABLATIONS.items():
        assert set(switch) <= fields, name
        assert what, name
        options.smii_options(**switch)  # a valid value
