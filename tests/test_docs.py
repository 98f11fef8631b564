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


def _need_sphinx() -> None:
    for name in ("sphinx", "numpydoc", "pydata_sphinx_theme", "sphinx-mathjax-offline"):
        pytest.importorskip(name)


@pytest.fixture(scope="module")
def html_site(tmp_path_factory) -> Path:
    """The HTML site, built once with warnings as errors."""
    _need_sphinx()
    out = tmp_path_factory.mktemp("site")
    run = _sphinx("html", out)
    assert run.returncode == 0, f"sphinx-build -W -b html failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return out / "html"


@pytest.mark.slow
def test_docs_html_builds_with_warnings_as_errors(html_site):
    assert (html_site / "index.html").is_file()


@pytest.mark.slow
def test_docs_doctests_pass(tmp_path):
    _need_sphinx()
    run = _sphinx("doctest", tmp_path)
    assert run.returncode == 0, f"sphinx-build -W -b doctest failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"


@pytest.mark.slow
def test_formulas_render_offline_from_the_sites_own_mathjax(html_site):
    pages = {p: p.read_text(encoding="utf-8") for p in html_site.rglob("*.html")}
    remote = {str(p.relative_to(html_site)): url for p, text in pages.items()
              for url in re.findall(r"https?://[^\"'\s>]*mathjax[^\"'\s>]*", text, re.IGNORECASE)}
    assert not remote, f"pages load MathJax from the network: {remote}"
    assert (html_site / "_static" / "mathjax" / "tex-chtml.js").is_file()
    assert any("_static/mathjax/tex-chtml.js" in text for text in pages.values())


@pytest.mark.parametrize("module", ["estimate.consistent", "estimate.gls", "estimate.nonneg", "release.noise", "release.ledger",
                                    "workloads.records"])
def test_api_reference_has_a_page_for(module):
    api = REPO / "docs" / "api"
    toc = (api / "index.rst").read_text(encoding="utf-8").split(".. toctree::")[1].split()
    pages = [name for name in toc if (api / f"{name}.rst").is_file()]
    assert any(f".. automodule:: ffu_cvx.{module}\n" in (api / f"{name}.rst").read_text(encoding="utf-8")
               for name in pages), f"ffu_cvx.{module} is on no page of the API reference's table of contents"
