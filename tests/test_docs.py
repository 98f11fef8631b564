"""The documentation: README's shape and examples, the generated tables, and the Sphinx site built with -W.

The site's builds need the ``[docs]`` extra (``pip install -e '.[test,docs]'``, the README's test
command) and skip without it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
MAIN_JOB = "pip install -e . && python -m experiments.table2"
TEST_COMMAND = "pip install -e '.[test,docs]' && python -m pytest -q"


def _env() -> dict:
    return {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}


def test_readme_is_short_and_opens_with_the_two_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; at most 300"
    long = [f"README.md:{i}" for i, line in enumerate(lines, 1) if len(line) > 200]
    assert not long, f"lines over 200 characters: {long}"
    first = [line.split("#")[0].strip() for line in lines[:6] if line.startswith("pip install")]
    assert first == [MAIN_JOB, TEST_COMMAND]


def test_ci_runs_exactly_the_readmes_test_command():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert TEST_COMMAND in ci.splitlines()


def test_readme_links_point_into_the_clone():
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#]+)\)", text)
    assert targets
    missing = [t for t in targets if not t.startswith("http") and not (REPO / t).exists()]
    assert not missing, f"README links to files a clone does not have: {missing}"
    assert "../shared" not in text


def test_generated_tables_match_the_committed_results():
    run = subprocess.run([sys.executable, "-m", "experiments.perf_tables", "--check"], cwd=REPO, env=_env(),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


@pytest.mark.slow
def test_readme_python_examples_run(tmp_path):
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 2
    for code in blocks:
        run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                             timeout=300)
        assert run.returncode == 0, f"README example failed:\n{code}\n{run.stderr[-2000:]}"
        # A print's comment is the line it prints (up to a colon, where an explanation follows).
        printed = run.stdout.splitlines()
        for expected in re.findall(r"print\(.*\)\s+#\s*(.+)", code):
            line = expected.split(":")[0].strip()
            assert line in printed, f"README promises {line!r}; the example printed {printed!r}"


def _sphinx(builder: str, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", builder,
                           "-d", str(out / "doctrees"), str(REPO / "docs"), str(out / builder)],
                          cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.parametrize("builder", ["html", "doctest"])
def test_docs_build_with_warnings_as_errors(builder, tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("numpydoc")
    pytest.importorskip("pydata_sphinx_theme")
    run = _sphinx(builder, tmp_path)
    assert run.returncode == 0, f"sphinx-build -W -b {builder} failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
