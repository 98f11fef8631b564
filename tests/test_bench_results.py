"""Benchmarks as data: every benchmark below has a committed results file (``--update-results``) with its run's
environment, the documentation's tables come from those files, and a rerun with the same
numbers leaves a results file as it is."""

from __future__ import annotations

import importlib
import json
import subprocess

import pytest

from experiments import paths, perf_tables

#: The benchmarks whose results files are committed and shown in docs/performance.rst.
BENCHMARKS = ("bench_authors", "bench_backends", "bench_columnar", "bench_consistent", "bench_noise", "bench_records", "bench_sdp",
              "bench_smii", "bench_workloads", "census_tables")
#: What every results file records of its run.
ENVIRONMENT = ("command", "commit", "cpu_count", "blas_threads_env", "load_average", "time_utc")


def _git(*args) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *args], cwd=paths.REPO, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        pytest.skip("no git")


@pytest.mark.parametrize("name", BENCHMARKS)
def test_each_benchmark_has_a_committed_results_file_with_its_environment(name):
    path = paths.committed_results() / f"{name}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    env = data["environment"]
    assert all(env.get(key) is not None for key in ENVIRONMENT), {k: env.get(k) for k in ENVIRONMENT}
    assert env["command"].split()[:3] == ["python", "-m", f"experiments.{name}"]
    assert not data["meta"]["quick"], "a --quick run writes out/results/quick/, which is not committed"
    assert data["rows"] and data["columns"]
    listed = _git("ls-files", "--error-unmatch", f"results/{name}.json")
    if listed.returncode != 0 and "not a git repository" in listed.stderr:
        pytest.skip("not a git checkout")
    assert listed.returncode == 0, f"results/{name}.json is not tracked (see .gitignore)"


@pytest.mark.parametrize("name", BENCHMARKS)
def test_the_documentation_has_a_table_per_benchmark(name):
    assert name in perf_tables.SOURCES and name in perf_tables.BUILDERS
    text = perf_tables.generated()[perf_tables.OUT / f"{name}.rst"]
    assert f"results/{name}.json" in text and "list-table" in text
    assert f"generated/{name}.rst" in (paths.REPO / "docs" / "performance.rst").read_text(encoding="utf-8")


def test_generated_tables_are_checked_by_their_text_and_numbers():
    assert perf_tables.same_text("α = 4.4579, gap 1e-08, d = 1,024", "α = 4.45790000001, gap 1.0e-8, d = 1,024")
    assert not perf_tables.same_text("α = 4.4579", "α = 4.4580") and not perf_tables.same_text("d = 1,024", "d = 1,025")
    assert not perf_tables.same_text("``sdp`` 1.0", "``smii`` 1.0") and not perf_tables.same_text("1 2", "1 2 3")


def test_the_readmes_table_is_replaced_in_place():
    table = perf_tables.readme_table()
    assert table.startswith(perf_tables.README_HEADER)
    text = f"# x\n\n{perf_tables.README_HEADER}\n|---|\n| old | row |\n\nafter\n"
    assert perf_tables.readme_with_table(text, table) == f"# x\n\n{table}\n\nafter\n"
    with pytest.raises(ValueError, match="no performance table"):
        perf_tables.readme_with_table("# no table\n", table)


def test_bench_backends_says_which_backends_ran():
    text = perf_tables.generated()[perf_tables.OUT / "bench_backends.rst"]
    ran = {r["backend"] for r in perf_tables.load("bench_backends")["rows"]}
    assert "numpy" in ran and all(f"``{b}``" in text for b in ran)


@pytest.fixture
def tmp_outputs(tmp_path, monkeypatch):
    monkeypatch.setenv(paths.ENV, str(tmp_path))
    return tmp_path / "results"


def _main(name, *args):
    return importlib.import_module(f"experiments.{name}").main(["--quick", "--quiet", *args])


@pytest.mark.parametrize("name, extra, other", [
    ("bench_records", (), ("--seed", "1")),
    ("bench_authors", ("--workloads", "marginal"), ("--tol", "1e-3")),
])
def test_a_rerun_with_the_same_numbers_keeps_the_file(name, extra, other, tmp_outputs, capsys):
    rows = _main(name, *extra)
    path = tmp_outputs / f"{name}.json"
    before = path.read_bytes()
    again = _main(name, "--force", *extra)  # measured again: other timings, the same numbers
    assert [r["time_s"] for r in again] != [r["time_s"] for r in rows]
    assert path.read_bytes() == before
    assert "the same numbers" in capsys.readouterr().out
    _main(name, *extra, *other)  # other numbers: the file is written
    assert path.read_bytes() != before


def test_bench_records_rows_count_records_cells_and_queries(tmp_outputs):
    rows = _main("bench_records", "--records", "500", "--csv", "--no-cache")
    assert [r["step"] for r in rows] == ["counts from (n, a) codes", "exact answers W x (sparse)",
                                         "counts from a CSV file", "release (answers + noise + labels)",
                                         "answers CSV bytes"]
    assert all(r["records"] == 500 and 0 < r["nonzero_cells"] <= 500 and r["queries"] == 8750 for r in rows)
    meta = json.loads((tmp_outputs / "bench_records.json").read_text())["meta"]
    assert meta["domain_cells"] == 116 * 2 * 2 * 63 * 50 and len(meta["groups"]) == 3


def test_bench_columnar_counts_agree_across_engines(tmp_outputs):
    pytest.importorskip("pyarrow")
    pytest.importorskip("polars")
    pytest.importorskip("distributed")
    rows = _main("bench_columnar", "--sizes", "3000", "--no-agency", "--no-cache")
    assert [r["engine"] for r in rows] == ["parquet", "csv-python", "csv-arrow", "polars", "dask"]
    assert all(r["same_counts"] and r["records"] == 3000 and r["peak_MB"] > 0 for r in rows)


def test_bench_noise_times_both_samplers_in_each_cell(tmp_outputs):
    rows = _main("bench_noise", "--sizes", "500", "--records", "2000", "--no-cache")
    assert [r["kind"] for r in rows] == ["draw", "release_product, 2,000 records"]
    assert rows[0]["n"] == 500 and rows[1]["n"] > 0
    assert all(r["ratio"] == pytest.approx(r["opendp_s"] / r["numpy_s"]) and r["opendp_s"] > 0 for r in rows)


def test_bench_consistent_rows_per_table_and_cell_size(tmp_outputs):
    rows = _main("bench_consistent", "--parts", "accuracy", "time", "--cases", "sparse", "--no-cache")
    acc = [r for r in rows if r["part"] == "accuracy"]
    tables = ["county totals", "race x county", "age band x county", "cells", "grand total"]
    assert [t for t in tables if any(r["table"] == t for r in acc)] == tables
    cells = {r["size"]: r for r in acc if r["table"] == "cells"}
    assert set(cells) == {"all", "0", "1-2", "3-9", ">=10"} and cells["all"]["values"] == 5000
    assert cells["all"]["ratio"] < 0.8 and cells["0"]["coverage_low"] <= cells["0"]["coverage"] <= 1
    assert [r["case"] for r in rows if r["part"] == "time"] == ["sparse"]


@pytest.mark.parametrize("name, extra", [
    ("bench_sdp", ("--formulations", "inverse")),
    ("bench_workloads", ("--workloads", "tree", "--sizes", "16")),
])
def test_a_rerun_keeps_the_file_of_benchmarks_with_more_timing_columns(name, extra, tmp_outputs):
    _main(name, *extra)
    path = tmp_outputs / f"{name}.json"
    before = path.read_bytes()
    _main(name, "--force", *extra)
    assert path.read_bytes() == before
