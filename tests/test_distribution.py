"""What a user installs and cites: the wheel's contents, the licence, the citation and the changelog."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import ffu_cvx as ffu

REPO = Path(__file__).resolve().parent.parent


def _source_copy(tmp_path: Path) -> Path:
    """The files a build reads, copied (a build writes build/ and *.egg-info beside its sources)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "ffu_cvx", src / "ffu_cvx", ignore=shutil.ignore_patterns("__pycache__"))
    return src


def test_the_wheel_installs_only_the_package_and_carries_the_licence(tmp_path):
    src = _source_copy(tmp_path)
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
                          str(src)], capture_output=True, text=True, timeout=600)
    if run.returncode and "No matching distribution found for setuptools" in run.stdout + run.stderr:
        pytest.skip("no package index to fetch the build backend from")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    info = f"ffu_cvx-{ffu.__version__}.dist-info"
    assert {n.split("/")[0] for n in names} == {"ffu_cvx", info}
    assert f"{info}/licenses/LICENSE" in names
    metadata = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    assert f"Version: {ffu.__version__}\n" in metadata and "License-Expression: MIT\n" in metadata


def test_the_sdist_carries_the_licence(tmp_path):
    pytest.importorskip("build")
    src = _source_copy(tmp_path)
    run = subprocess.run([sys.executable, "-m", "build", "--sdist", "-o", str(tmp_path / "dist"), str(src)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    (sdist,) = (tmp_path / "dist").glob("*.tar.gz")
    assert f"ffu_cvx-{ffu.__version__}/LICENSE" in tarfile.open(sdist).getnames()


def test_licence_citation_and_changelog_name_this_version():
    licence = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert licence.startswith("MIT License\n\nCopyright (c) 2026 the ffu-cvx authors\n")
    citation = (REPO / "CITATION.cff").read_text(encoding="utf-8")
    assert "cff-version: 1.2.0\n" in citation and "title: ffu-cvx\n" in citation
    assert f"\nversion: {ffu.__version__}\n" in citation
    assert 'name: "The ffu-cvx authors"' in citation
    refs = citation.split("\nreferences:\n")[1]
    assert "Optimizing Fitness-For-Use of Differentially Private Linear Queries" in refs and "volume: 14" in refs
    assert "year: 2021" in refs and "Kifer" in refs
    assert f"\n## {ffu.__version__}\n" in (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
