"""Records where they live: Parquet, Arrow IPC and CSV through pyarrow, Polars and pandas frames, a
Dask cluster; identical counts to the in-memory path and one message naming file, row and column for
a bad record, in every path. Each engine's tests skip without its extra."""

import json
import shutil

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx.workloads import counts as core
from ffu_cvx.workloads import records
from ffu_cvx.cli.cli import main

DOMAIN = {"age": 12, "sex": ["F", "M"], "race": ["white", "black", "asian", "other"], "region": 5}
LABELS = {"sex": np.array(["F", "M"]), "race": np.array(["white", "black", "asian", "other"])}


@pytest.fixture(scope="module")
def dom():
    return ffu.Domain(DOMAIN)


@pytest.fixture(scope="module")
def codes(dom):
    """20,000 skewed records as codes (n, 4)."""
    rng = np.random.default_rng(4)
    cols = [rng.choice(n, 20_000, p=rng.dirichlet(np.full(n, 0.4))) for n in dom.sizes]
    return np.stack(cols, axis=1)


def _columns(dom, codes) -> dict:
    """The records as named columns: numbers for sized attributes, labels for labelled ones."""
    return {a.name: (LABELS[a.name][codes[:, j]] if a.name in LABELS else codes[:, j])
            for j, a in enumerate(dom.attributes)}


def _same(a, b):
    np.testing.assert_array_equal(a.codes, b.codes)
    np.testing.assert_array_equal(a.counts, b.counts)


def _parquet(tmp_path, columns, name="r.parquet", row_group_size=5000, dictionary=True):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({k: pa.array(v) for k, v in columns.items()})
    path = tmp_path / name
    pq.write_table(table, path, row_group_size=row_group_size, use_dictionary=dictionary)
    return path


# ---------------------------------------------------------------------------- files through pyarrow
def test_parquet_file_folder_and_feather_give_the_in_memory_counts(dom, codes, tmp_path):
    pa = pytest.importorskip("pyarrow")
    feather = pytest.importorskip("pyarrow.feather")
    ref = dom.counts(codes)
    cols = _columns(dom, codes)
    _same(dom.counts(_parquet(tmp_path, cols)), ref)
    parts = tmp_path / "parts"
    parts.mkdir()
    for k, sl in enumerate((slice(0, 7000), slice(7000, 20_000))):
        _parquet(parts, {n: v[sl] for n, v in cols.items()}, name=f"part-{k}.parquet")
    _same(dom.counts(parts), ref)
    table = pa.table({n: pa.array(v).dictionary_encode() if n in LABELS else pa.array(v) for n, v in cols.items()})
    feather.write_feather(table, tmp_path / "r.feather")
    _same(dom.counts(tmp_path / "r.feather"), ref)


def test_csv_fast_path_equals_the_python_parser(dom, codes, tmp_path):
    pytest.importorskip("pyarrow")
    cols = _columns(dom, codes)
    path = tmp_path / "r.csv"
    path.write_text(",".join(cols) + "\n" + "".join(",".join(str(c[i]) for c in cols.values()) + "\n"
                                                      for i in range(len(codes))))
    _same(records.count(dom, path), core.from_records(dom, path))
    _same(records.count(dom, path), dom.counts(codes))


@pytest.mark.parametrize("case, needle", [
    ("outside", r"r.parquet, row 7012 \(row group 1\), column `age`: value 40 is outside the domain"),
    ("nan", r"r.parquet, row 7012 \(row group 1\), column `age`: value nan is NaN"),
    ("fraction", r"row 7012 \(row group 1\), column `age`: value 2.5 is not a whole number"),
    ("label", r"row 7012 \(row group 1\), column `race`: unknown value 'martian'"),
    ("null", r"row 7012 \(row group 1\), column `race`: value nan is NaN"),
    ("text", r"row 7012 \(row group 1\), column `age`: value 'ten' is not a number"),
])
def test_a_bad_parquet_record_is_named_by_file_row_group_and_column(dom, codes, tmp_path, case, needle):
    cols = {k: v.astype(object) for k, v in _columns(dom, codes).items()}
    bad = {"outside": ("age", 40), "nan": ("age", float("nan")), "fraction": ("age", 2.5),
           "label": ("race", "martian"), "null": ("race", None), "text": ("age", "ten")}[case]
    name, value = bad
    cols[name][7012] = value
    if case in ("nan", "fraction"):
        cols[name] = cols[name].astype(float)
    if case == "text":
        cols[name] = cols[name].astype(str)
    path = _parquet(tmp_path, cols)
    with pytest.raises(ValueError, match=needle):
        dom.counts(path)


def test_a_missing_column_or_file_is_named(dom, codes, tmp_path):
    cols = _columns(dom, codes)
    del cols["race"]
    path = _parquet(tmp_path, cols)
    with pytest.raises(ValueError, match=r"r.parquet has no column `race`"):
        dom.counts(path)
    with pytest.raises(ValueError, match="no such file"):
        dom.counts(tmp_path / "none.parquet")


def test_a_bad_csv_record_gets_the_python_parsers_message(dom, tmp_path):
    pytest.importorskip("pyarrow")
    text = "age,sex,race,region\n1,F,white,2\n\n3,M,white,9\n"
    path = tmp_path / "r.csv"
    path.write_text(text)
    with pytest.raises(ValueError) as fast:
        records.count(dom, path)
    with pytest.raises(ValueError) as slow:
        core.from_records(dom, path)
    assert str(fast.value) == str(slow.value) and "line 4, column `region`" in str(fast.value)


# ---------------------------------------------------------------------------- data frames
def test_polars_dataframe_and_lazyframe_are_grouped_in_polars(dom, codes, tmp_path):
    pl = pytest.importorskip("polars")
    ref = dom.counts(codes)
    cols = _columns(dom, codes)
    frame = pl.DataFrame({n: (pl.Series(n, v).cast(pl.Categorical) if n in LABELS else pl.Series(n, v))
                          for n, v in cols.items()})
    _same(dom.counts(frame), ref)
    _same(dom.counts(frame.lazy().filter(pl.col("age") >= 0)), ref)
    bad = frame.with_columns(pl.when(pl.int_range(pl.len()) == 123).then(99).otherwise(pl.col("region"))
                             .alias("region"))
    with pytest.raises(ValueError, match=r"records row 123, column `region`: value 99 is outside the domain"):
        dom.counts(bad)
    with pytest.raises(ValueError, match="no column `age`"):
        dom.counts(frame.drop("age"))


def test_pandas_categoricals_and_nullable_dtypes(dom, codes):
    pd = pytest.importorskip("pandas")
    ref = dom.counts(codes)
    cols = _columns(dom, codes)
    frame = pd.DataFrame({n: (pd.Categorical(v) if n in LABELS else pd.array(v, dtype="Int64"))
                          for n, v in cols.items()})
    _same(dom.counts(frame), ref)
    frame.loc[321, "age"] = pd.NA
    with pytest.raises(ValueError, match=r"records row 321, column `age`: value nan is NaN"):
        dom.counts(frame)


# ---------------------------------------------------------------------------- Dask
@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    pytest.importorskip("dask.dataframe")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as lc:
        yield lc


def test_dask_cluster_counts_a_parquet_file_identically(dom, codes, tmp_path, cluster):
    import dask.dataframe as dd

    ref = dom.counts(codes)
    cols = _columns(dom, codes)
    path = _parquet(tmp_path, cols)
    _same(dom.counts(path, scheduler=cluster.scheduler_address), ref)
    _same(dom.counts(dd.read_parquet(str(path))), ref)
    csv = tmp_path / "r.csv"
    csv.write_text(",".join(cols) + "\n" + "".join(",".join(str(c[i]) for c in cols.values()) + "\n"
                                                     for i in range(len(codes))))
    _same(dom.counts(csv, scheduler=cluster.scheduler_address), ref)
    bad = {k: v.copy() for k, v in cols.items()}
    bad["region"][15_000] = 77
    path = _parquet(tmp_path, bad, name="bad.parquet")
    with pytest.raises(ValueError, match=r"bad.parquet, row 15000 \(partition \d+\), column `region`: value 77"):
        dom.counts(path, scheduler=cluster.scheduler_address)


def test_cli_releases_from_parquet_a_folder_and_a_cluster(dom, codes, tmp_path, capsys, cluster):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"domain": DOMAIN, "groups": [{"blocks": {"age": "identity"}, "variance": 4.0},
                                                             {"blocks": {"race": "identity", "sex": "identity"},
                                                              "variance": 2.0}]}))
    assert main(["solve", str(spec), "--method", "kron", "--out", str(tmp_path / "r.json"), "--quiet"]) == 0
    path = _parquet(tmp_path, _columns(dom, codes))
    parts = tmp_path / "parts"
    parts.mkdir()
    shutil.copy(path, parts / "a.parquet")
    for source, extra, out in ((path, [], "a.csv"), (parts, [], "b.csv"),
                               (path, ["--scheduler", cluster.scheduler_address], "c.csv")):
        assert main(["release", str(tmp_path / "r.json"), "--records", str(source), "--out", str(tmp_path / out),
                     "--quiet", *extra]) == 0
        assert ffu.release.release.verify(tmp_path / out)["queries"] == 12 + 8
    cols = _columns(dom, codes)
    cols["age"] = cols["age"].astype(float)
    cols["age"][5] = np.nan
    bad = _parquet(tmp_path, cols, name="bad.parquet")
    assert main(["release", str(tmp_path / "r.json"), "--records", str(bad), "--out", str(tmp_path / "d.csv")]) == 2
    assert "bad.parquet, row 5 (row group 0), column `age`: value nan is NaN" in capsys.readouterr().err
    assert not (tmp_path / "d.csv").exists()
    assert main(["release", str(tmp_path / "r.json"), "--data", str(bad), "--scheduler", "tcp://x:1", "--out",
                 str(tmp_path / "e.csv")]) == 2
