"""Domain validation and records -> sparse counts (arrays, CSV, mappings, DataFrames), at scale."""

import time
import tracemalloc

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx.workloads.counts import Counts

DOM = {"age": 6, "sex": ["F", "M"], "region": ["N", "S", "E"]}


@pytest.fixture
def dom():
    return ffu.Domain(DOM)


def _records(dom, n, seed=0):
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, s, n) for s in dom.sizes], axis=1)


# ---------------------------------------------------------------------------- validation
@pytest.mark.parametrize("attrs, ordered, needle", [
    ({}, None, "non-empty mapping"),
    ({"age": 0}, None, "`age` must be an integer >= 1"),
    ({"age": 2.5}, None, "give a size"),
    ({"age": True}, None, "give a size"),
    ({"sex": "FM"}, None, "must be a list"),
    ({"sex": []}, None, "empty"),
    ({"sex": ["F", "F"]}, None, "distinct"),
    ({"sex": ["F", ["M"]]}, None, "strings or numbers"),
    ({"": 3}, None, "non-empty strings"),
    ({"age": 3}, ["agee"], "unknown attributes ['agee']"),
])
def test_bad_domains_name_the_attribute(attrs, ordered, needle):
    with pytest.raises(ValueError, match=None) as info:
        ffu.Domain(attrs, ordered=ordered)
    assert needle in str(info.value)


def test_domain_basics(dom):
    assert dom.names == ("age", "sex", "region") and dom.sizes == (6, 2, 3) and dom.size == 36
    assert dom.ordered == ("age",) and dom["sex"].code("M") == 1 and dom["age"].code(4.0) == 4
    assert ffu.Domain(dom.spec(), ordered=dom.ordered) == dom and dom != ffu.Domain({"age": 6, "sex": 2})
    with pytest.raises(ValueError, match="unknown attribute 'race'"):
        dom.index("race")
    with pytest.raises(ValueError, match="no value 'X'"):
        dom["sex"].code("X")
    assert ffu.Domain({"a": 1 << 40, "b": 1 << 40}).size == 1 << 80  # exact, beyond int64


# ---------------------------------------------------------------------------- counts
def test_counts_from_codes_match_a_dense_histogram(dom):
    rec = _records(dom, 400)
    c = dom.counts(rec)
    x = np.zeros(dom.size)
    np.add.at(x, np.ravel_multi_index(tuple(rec.T), dom.sizes), 1)
    np.testing.assert_array_equal(c.dense(), x)
    assert c.n_records == 400 and len(c) == np.count_nonzero(x)
    np.testing.assert_array_equal(c.cells, np.flatnonzero(x))  # cell order
    np.testing.assert_array_equal(c.marginal(["age", "region"]), x.reshape(6, 2, 3).sum(axis=1))
    np.testing.assert_array_equal(c.marginal([1]), x.reshape(6, 2, 3).sum(axis=(0, 2)))
    assert float(c.marginal([])) == 400
    back = Counts.from_histogram(dom, x)
    np.testing.assert_array_equal(back.codes, c.codes) and np.testing.assert_array_equal(back.counts, c.counts)
    with pytest.raises(ValueError, match="domain order"):
        c.marginal(["region", "age"])


def test_the_same_records_in_every_form(dom, tmp_path):
    rec = _records(dom, 50, seed=3)
    labels = {a.name: [a.values[v] for v in rec[:, j]] for j, a in enumerate(dom.attributes)}
    path = tmp_path / "r.csv"
    rows = ["sex,extra,region,age"] + [f"{s},x,{r},{a}" for a, s, r in zip(labels["age"], labels["sex"],
                                                                         labels["region"])]
    path.write_text("\n".join(rows) + "\n")
    want = dom.counts(rec).dense()
    np.testing.assert_array_equal(dom.counts(path).dense(), want)          # CSV: columns by name, any order
    np.testing.assert_array_equal(dom.counts(str(path)).dense(), want)
    np.testing.assert_array_equal(dom.counts(labels).dense(), want)        # mapping of named columns
    np.testing.assert_array_equal(dom.counts(rec.astype(float)).dense(), want)  # integral floats are codes


def test_dataframe_records(dom):
    pd = pytest.importorskip("pandas")
    rec = _records(dom, 30, seed=5)
    frame = pd.DataFrame({"age": rec[:, 0], "sex": pd.Categorical([DOM["sex"][v] for v in rec[:, 1]]),
                          "region": [DOM["region"][v] for v in rec[:, 2]], "other": 1.5})
    np.testing.assert_array_equal(dom.counts(frame).dense(), dom.counts(rec).dense())
    with pytest.raises(ValueError, match=r"row 2, column `sex`: unknown value 'X'"):
        dom.counts(frame.assign(sex=["F", "M", "X"] + ["F"] * 27))


@pytest.mark.parametrize("case, needle", [
    ("age out of range", "line 3, column `age`: value '7' is outside the domain"),
    ("unknown label", "line 2, column `sex`: unknown value 'W'"),
    ("missing column", "no column `region`"),
    ("empty value", "line 2, column `region`: unknown value ''"),
    ("ragged", "line 3: 2 fields where the header has 3"),
    ("empty file", "is empty"),
    ("duplicate header", "more than once"),
])
def test_bad_csv_records_name_column_row_and_value(dom, tmp_path, case, needle):
    text = {"age out of range": "age,sex,region\n1,F,N\n7,M,S\n",
            "unknown label": "age,sex,region\n1,W,N\n",
            "missing column": "age,sex\n1,F\n",
            "empty value": "age,sex,region\n1,F,\n",
            "ragged": "age,sex,region\n1,F,N\n2,M\n",
            "empty file": "",
            "duplicate header": "age,sex,region,age\n1,F,N,1\n"}[case]
    path = tmp_path / "r.csv"
    path.write_text(text)
    with pytest.raises(ValueError) as info:
        dom.counts(path)
    assert needle in str(info.value)


@pytest.mark.parametrize("records, needle", [
    ([[1, 0, 0], [2, 2, 0]], "row 1, column `sex`: value 2 is outside the domain; `sex` has codes 0..1"),
    ([[1, 0, 0], [-1, 0, 0]], "row 1, column `age`: value -1"),
    ([[1.5, 0, 0]], "row 0, column `age`: value 1.5"),
    ([[1, 0]], "shape (n, 3)"),
    ([["a", "b", "c"]], "integer codes"),
])
def test_bad_code_arrays(dom, records, needle):
    with pytest.raises(ValueError) as info:
        dom.counts(records)
    assert needle in str(info.value)


def test_csv_errors_count_lines_across_chunks(dom, tmp_path, monkeypatch):
    monkeypatch.setattr(ffu.workloads.counts, "CSV_CHUNK", 4)
    rows = ["age,sex,region"] + ["1,F,N"] * 9 + ["9,F,N"]
    (tmp_path / "r.csv").write_text("\n".join(rows) + "\n")
    with pytest.raises(ValueError, match="line 11, column `age`: value '9'"):
        dom.counts(tmp_path / "r.csv")
    (tmp_path / "ok.csv").write_text("\n".join(rows[:-1]) + "\n")
    assert dom.counts(tmp_path / "ok.csv").n_records == 9


def test_marginal_and_dense_refuse_large_arrays():
    big = ffu.Domain({"a": 1000, "b": 1000, "c": 1000})
    c = big.counts([[1, 2, 3], [1, 2, 4]])
    with pytest.raises(ValueError, match=r"marginal over \['a', 'b', 'c'\] has 1000000000 cells"):
        c.dense()
    assert c.marginal(["a", "b"]).shape == (1000, 1000) and c.cells.tolist() == [1002003, 1002004]
    huge = ffu.Domain({f"x{i}": 1 << 16 for i in range(5)})  # 2^80 cells: codes only
    hc = huge.counts([[1, 2, 3, 4, 5], [1, 2, 3, 4, 5], [0, 0, 0, 0, 1]])
    assert len(hc) == 2 and hc.counts.tolist() == [1, 2] and hc.codes[0].tolist() == [0, 0, 0, 0, 1]
    with pytest.raises(ValueError, match="more than an int64"):
        hc.cells


def test_a_billion_cells_from_1e5_records_is_fast_and_small():
    dom = ffu.Domain({"age": 116, "sex": 2, "hisp": 2, "race": 63, "region": 50, "income": 300, "tenure": 3})
    assert dom.size > 1e9
    rec = _records(dom, 100_000, seed=7)
    wl = ffu.workloads.product(dom, [({"age": {"bands": 10}, "sex": "identity", "region": "identity"}, 20.0),
                                     ({"race": "identity", "hisp": "identity", "region": "identity"}, 5.0),
                                     ({"region": "identity"}, 1.0)])
    tracemalloc.start()
    t0 = time.perf_counter()
    counts = dom.counts(rec)
    answers = wl.apply(counts)
    elapsed = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert elapsed < 5 and peak < 100e6  # measured: about 0.05 s and 25 MB
    # Per-region totals are the region column's counts.
    np.testing.assert_array_equal(answers[-50:], np.bincount(rec[:, 4], minlength=50))
    assert answers.shape == (wl.m,) and answers[:12 * 2 * 50].sum() == 100_000


# ---------------------------------------------------------------------------- geographies
COUNTIES = ["Ada", "Bee", "Cal", "Dee", "Eve"]
STATES = {"Ada": "ID", "Bee": "TX", "Cal": "ID", "Dee": "UT", "Eve": "TX"}


def test_a_geography_level_is_one_sum_per_unit_in_either_form():
    by_list = ffu.Domain({"county": COUNTIES}, levels={"county": {"state": [STATES[c] for c in COUNTIES]}})
    by_map = ffu.Domain({"county": COUNTIES}, levels={"county": {"state": STATES}})
    assert by_list == by_map and by_map.levels == {"county": {"state": ["ID", "TX", "ID", "UT", "TX"]}}
    assert ffu.Domain(by_map.spec(), ordered=by_map.ordered, levels=by_map.levels) == by_map
    blk = ffu.workloads.products.block(by_map["county"], {"level": "state"})
    np.testing.assert_array_equal(blk.matrix, [[1, 0, 1, 0, 0], [0, 1, 0, 0, 1], [0, 0, 0, 1, 0]])
    wl = ffu.workloads.product(by_map, [({"county": {"level": "state"}}, 2.0)])
    assert list(wl.labels) == ["state ID", "state TX", "state UT"]
    x = by_map.counts(np.array([[0], [2], [2], [3]]))
    np.testing.assert_array_equal(wl.apply(x), [3, 0, 1])


def test_nested_levels_and_their_order():
    regions = {"ID": "W", "TX": "S", "UT": "W"}
    dom = ffu.Domain({"county": COUNTIES},
                     levels={"county": {"region": {c: regions[s] for c, s in STATES.items()}, "state": STATES}})
    assert [lv for lv, _ in dom["county"].levels] == ["state", "region"]   # finest first
    wl = ffu.workloads.product(dom, [({"county": {"level": "region"}}, 1.0)])
    assert list(wl.labels) == ["region W", "region S"]


@pytest.mark.parametrize("levels, needle", [
    ({"county": {"state": ["ID", "TX"]}}, "`levels.county.state`: 2 units for the 5 values"),
    ({"county": {"state": {"Ada": "ID"}}}, "the value 'Bee' of `county` has no unit (4 values"),
    ({"county": {"state": {**STATES, "Zed": "NV"}}}, "'Zed' is not a value of `county`"),
    ({"county": {"state": ["ID", None, "ID", "UT", "TX"]}}, "the unit of value 'Bee' is None"),
    ({"county": {"state": "IDTX"}}, "one unit per value"),
    ({"county": {"": STATES}}, "level names must be non-empty strings"),
    ({"county": {}}, "`levels.county` must be a non-empty mapping"),
    ({"parish": {"state": STATES}}, "unknown attributes ['parish']"),
    ({"county": {"state": STATES, "region": ["W", "S", "S", "W", "S"]}},
     "levels `state` and `region` do not nest: state 'ID' holds 'Ada' (in region 'W') and 'Cal' (in region 'S')"),
])
def test_bad_levels_name_the_level_and_the_value(levels, needle):
    with pytest.raises(ValueError) as info:
        ffu.Domain({"county": COUNTIES}, levels=levels)
    assert needle in str(info.value)


def test_a_level_block_needs_a_known_level():
    dom = ffu.Domain({"county": COUNTIES, "sex": ["F", "M"]}, levels={"county": {"state": STATES}})
    with pytest.raises(ValueError, match="`county` has no level 'nation'; its levels are \\['state'\\]"):
        ffu.workloads.product(dom, [({"county": {"level": "nation"}}, 1.0)])
    with pytest.raises(ValueError, match="`sex` has no level 'state'; it has none"):
        ffu.workloads.product(dom, [({"sex": {"level": "state"}}, 1.0)])


def test_a_geography_hierarchy_solves_as_its_partition_matrix():
    """The level block is the partition: the same optimum as the matrix, and the exact dense one."""
    dom = ffu.Domain({"sex": ["F", "M"], "county": COUNTIES}, levels={"county": {"state": STATES}})
    tiers = [({}, 1.0), ({"county": {"level": "state"}, "sex": "identity"}, 4.0),
             ({"county": "identity"}, 16.0)]
    level = ffu.solve(ffu.FitnessProblem.from_workload(ffu.workloads.product(dom, tiers)), method="kron")
    A = ffu.workloads.products.block(dom["county"], {"level": "state"}).matrix
    plain = ffu.Domain({"sex": ["F", "M"], "county": COUNTIES})
    as_matrix = ffu.workloads.product(plain, [(b if "county" not in b or b["county"] == "identity"
                                               else {**b, "county": A}, c) for b, c in tiers])
    dense = ffu.solve(ffu.FitnessProblem.from_workload(as_matrix), method="smii")
    assert level.status == "optimal"
    assert level.privacy_cost == pytest.approx(dense.privacy_cost, rel=1e-3)
