"""The package's shape: what importing it loads, what each module says it imports, one default method."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import ffu_cvx as ffu

PACKAGE = Path(ffu.__file__).parent


def test_importing_the_package_loads_no_solver_library():
    code = ("import sys, ffu_cvx, ffu_cvx.solvers.smii; "
            "print(sorted(m for m in ('cvxpy', 'clarabel', 'scs', 'pandas', 'dask', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_module_says_what_it_may_import(path):
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    assert "import" in doc, f"{path}: the module docstring does not say what it may import"


def test_auto_is_the_default_method_and_fourier_has_a_name():
    prefix = ffu.FitnessProblem.from_workload(ffu.workloads.prefix(4))
    assert ffu.solve(prefix).info["auto"].startswith("dense problem of rank k = 4")
    dom = ffu.Domain({"a": 3, "b": 4})
    marginals = ffu.workloads.product(dom, [({"a": "identity"}, 1.0), ({"b": "identity"}, 2.0)]).to_problem()
    by_name, by_auto = ffu.solve(marginals, method="fourier"), ffu.solve(marginals)
    assert by_name.privacy_cost == by_auto.privacy_cost and "Fourier" in by_auto.info["auto"]
    with pytest.raises(ValueError, match="method='fourier' solves unions of marginals"):
        ffu.solve(ffu.workloads.product(dom, [({"a": "prefix"}, 1.0)]).to_problem(), method="fourier")
    with pytest.raises(TypeError, match="takes no options"):
        ffu.solve(marginals, method="fourier", max_iter=3)


def test_importing_the_package_needs_no_fcntl_and_loads_no_scipy_stats():
    # fcntl is blocked (absent on Windows); scipy.stats is the slowest import and loads where it is used.
    code = ("import sys; sys.modules['fcntl'] = None; import ffu_cvx; "
            "print('scipy.stats' in sys.modules, type(ffu_cvx.consistent).__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.split() == ["False", "module"], out.stderr


def test_a_lock_on_windows_goes_through_msvcrt(tmp_path, monkeypatch):
    from ffu_cvx.io import files

    calls = []
    fake = type(sys)("msvcrt")
    fake.LK_LOCK, fake.LK_UNLCK = 1, 0
    fake.locking = lambda fd, mode, n: calls.append((mode, n))
    monkeypatch.setitem(sys.modules, "msvcrt", fake)
    monkeypatch.setitem(sys.modules, "fcntl", None)
    monkeypatch.setattr(files.os, "name", "nt")
    with files.locked(tmp_path / "ledger.lock"):
        assert calls == [(1, 1)]
    assert calls == [(1, 1), (0, 1)]
    with files._folder_lock(tmp_path):
        assert (tmp_path / files.WINDOWS_FOLDER_LOCK).exists()


def test_options_types_are_exported():
    from ffu_cvx.solvers.kron import KronOptions
    from ffu_cvx.solvers.sdp.driver import SDPOptions

    assert ffu.SDPOptions is SDPOptions and ffu.KronOptions is KronOptions
    assert {"SDPOptions", "KronOptions"} <= set(ffu.__all__)
