"""Hostile input ends in one clear line naming the field, group, row or file.

API: a ``ValueError`` whose message names the thing. Command line: ``ffu-cvx: error: ...``
on one line, exit status 2, and no output file written.
"""

import json

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx.cli import cli
from ffu_cvx.model import memory as ffu_memory

DOMAIN = {"age": 4, "sex": ["F", "M"]}


@pytest.fixture
def dom():
    return ffu.Domain(DOMAIN)


def refused(capsys, tmp_path, *argv, out="out.json"):
    """Run the command line, check the bad-input contract (status 2, one line, no output); return the line."""
    target = tmp_path / out
    before = set(tmp_path.iterdir())
    code = cli.main([str(a) for a in argv] + ["--out", str(target)])
    err = capsys.readouterr().err.strip()
    assert code == cli.EXIT_BAD_INPUT, err
    lines = [line for line in err.splitlines() if not line.startswith("ffu-cvx [")]
    assert len(lines) == 1 and lines[0].startswith("ffu-cvx: error: "), err
    assert set(tmp_path.iterdir()) == before  # nothing written: no output, no statement, no temporary file
    return lines[0]


def write_json(path, obj):
    path.write_text(json.dumps(obj))
    return path


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    """RESULT files of a dense spec (``prefix`` d = 4) and of a product spec over :data:`DOMAIN`."""
    folder = tmp_path_factory.mktemp("solved")
    specs = {"dense": {"workload": "prefix", "params": {"d": 4}},
             "product": {"domain": DOMAIN, "groups": [{"blocks": {"age": "identity", "sex": "identity"},
                                                       "variance": 1.0}]}}
    for name, spec in specs.items():
        spec_path = write_json(folder / f"{name}.json", spec)
        assert cli.main(["solve", str(spec_path), "--out", str(folder / f"{name}.result.json"), "--quiet"]) == 0
    return folder


# ---------------------------------------------------------------------------- NaN in counts and records
def test_nan_in_a_histogram_names_the_cell(dom):
    x = np.zeros(dom.size)
    x[3] = np.nan
    with pytest.raises(ValueError, match=r"x\[3\] = nan is NaN \(not a number"):
        ffu.Counts.from_histogram(dom, x)
    wl = ffu.workloads.product(dom, [({"age": "identity"}, 1.0)])
    sol = ffu.solve(wl.to_problem(), method="kron")
    with pytest.raises(ValueError, match=r"x\[3\] = nan is NaN"):
        ffu.release_product(sol, wl, x, rng=0)


@pytest.mark.parametrize("records", [np.array([[0, 0], [np.nan, 1]]), {"age": [0, np.nan], "sex": ["F", "M"]},
                                     {"age": [0, "nan"], "sex": ["F", "M"]}])
def test_nan_in_records_names_the_row_and_column(dom, records):
    with pytest.raises(ValueError, match=r"records row 1, column `age`: value (nan|'nan') is NaN \(not a number"):
        dom.counts(records)


def test_nan_in_a_labelled_column_is_not_an_unknown_label():
    dom = ffu.Domain({"age": 3, "score": [1.5, 2.5]})
    with pytest.raises(ValueError, match=r"row 1, column `score`: value nan is NaN"):
        dom.counts({"age": [0, 1], "score": [1.5, np.nan]})


@pytest.mark.parametrize("value, why", [("", "is empty"), ("1.5", "is not a whole number"), ("inf", "is infinite"),
                                        ("x", "is not a number")])
def test_other_bad_codes_say_what_is_wrong(dom, tmp_path, value, why):
    path = tmp_path / "records.csv"
    path.write_text(f"age,sex\n1,F\n{value},M\n")
    with pytest.raises(ValueError, match=f"records {path}, line 3, column `age`: value '{value}' {why}"):
        dom.counts(path)


def test_a_fractional_code_is_not_truncated(dom):
    with pytest.raises(ValueError, match="value 1.5 is not a whole number"):
        dom["age"].code(1.5)


@pytest.mark.parametrize("text, where", [("1\n2\nnan\n3\n", "line 3: count 'nan'"),
                                         ("cell,count\n0,1\n1,2\n2,NaN\n3,3\n", "line 4: count 'NaN'"),
                                         ("1,2,nan,3\n", "line 1: column 3 'nan'"),
                                         ("cell,count\n0,1\n1,2\nnan,0\n3,3\n", "line 4: cell 'nan'")])
def test_cli_nan_in_a_histogram_names_the_line(capsys, tmp_path, solved, text, where):
    data = tmp_path / "hist.csv"
    data.write_text(text)
    line = refused(capsys, tmp_path, "release", solved / "dense.result.json", "--data", data, out="answers.csv")
    assert f"data {data}, {where} is NaN (not a number)" in line


def test_cli_nan_in_records_names_the_line_and_column(capsys, tmp_path, solved):
    records = tmp_path / "records.csv"
    records.write_text("age,sex\n1,F\nnan,M\n")
    line = refused(capsys, tmp_path, "release", solved / "product.result.json", "--records", records,
                   out="answers.csv")
    assert f"records {records}, line 3, column `age`: value 'nan' is NaN (not a number" in line


# ---------------------------------------------------------------------------- a byte order mark
BOM = "\ufeff"


def test_a_byte_order_mark_before_the_records_header_is_dropped(dom, tmp_path):
    path = tmp_path / "records.csv"
    path.write_text(f"{BOM}age,sex\n1,F\n1,F\n3,M\n", encoding="utf-8")
    counts = dom.counts(path)
    assert counts.n_records == 3 and counts.marginal(["age"]).tolist() == [0, 2, 0, 1]


def test_cli_reads_csv_files_with_a_byte_order_mark(capsys, tmp_path, solved):
    records, hist, W = tmp_path / "records.csv", tmp_path / "hist.csv", tmp_path / "W.csv"
    records.write_text(f"{BOM}age,sex\n1,F\n3,M\n", encoding="utf-8")
    hist.write_text(f"{BOM}cell,count\n3,1\n2,0\n1,2\n0,5\n", encoding="utf-8")
    W.write_text(f"{BOM}1,0\n1,1\n", encoding="utf-8")
    spec = write_json(tmp_path / "spec.json", {"W": "W.csv", "c": 1.0})
    spec.write_text(BOM + spec.read_text(), encoding="utf-8")
    runs = [("release", solved / "product.result.json", "--records", records, "--out", tmp_path / "a.csv"),
            ("release", solved / "dense.result.json", "--data", hist, "--out", tmp_path / "b.csv"),
            ("solve", spec, "--out", tmp_path / "r.json")]
    for argv in runs:
        assert cli.main([str(a) for a in argv] + ["--quiet"]) == 0, capsys.readouterr().err
    assert json.loads((tmp_path / "r.json").read_text())["problem"]["W"] == [[1, 0], [1, 1]]


# ---------------------------------------------------------------------------- range bounds
@pytest.mark.parametrize("bound", [0.5, True, "1"])
def test_range_bounds_that_are_not_integers_are_refused_naming_group_and_attribute(dom, bound):
    groups = [({}, 1.0), ({"age": {"ranges": [[0, 1], [bound, 3]]}}, 2.0, "young")]
    with pytest.raises(ValueError, match=r"group 1 \('young'\): attribute `age`: `ranges` entry .* has the bound "
                                         f"{bound!r}, not an integer"):
        ffu.workloads.product(dom, groups)


def test_whole_float_range_bounds_are_codes(dom):
    wl = ffu.workloads.product(dom, [({"age": {"ranges": [[0.0, 2.0]]}}, 1.0)])
    assert wl.groups[0].blocks[0].matrix.tolist() == [[1, 1, 1, 0]]


def test_cli_fractional_range_bound_names_spec_group_and_attribute(capsys, tmp_path):
    spec = write_json(tmp_path / "spec.json", {"domain": DOMAIN, "groups": [
        {"blocks": {"age": {"ranges": [[0.5, 3]]}}, "variance": 1.0}]})
    line = refused(capsys, tmp_path, "solve", spec)
    assert f"spec {spec}: `groups`: group 0: attribute `age`: `ranges` entry [0.5, 3] has the bound 0.5" in line


# ---------------------------------------------------------------------------- all-zero blocks
@pytest.mark.parametrize("matrix, which", [([[1, 0], [0, 0]], "row 1"), ([[0, 0]], "every row")])
def test_an_all_zero_block_is_refused_when_the_workload_is_built(dom, matrix, which):
    with pytest.raises(ValueError, match=f"group 1: attribute `sex`: {which} of the block matrix is all zero"):
        ffu.workloads.product(dom, [({}, 1.0), ({"age": "identity", "sex": matrix}, 1.0)])


def test_cli_all_zero_block_names_spec_group_and_attribute(capsys, tmp_path):
    spec = write_json(tmp_path / "spec.json", {"domain": DOMAIN, "groups": [
        {"variance": 1.0}, {"blocks": {"sex": [[0, 0]]}, "variance": 2.0, "name": "nobody"}]})
    line = refused(capsys, tmp_path, "solve", spec, "--method", "kron")
    assert f"spec {spec}: `groups`: group 1 ('nobody'): attribute `sex`: every row of the block matrix is all zero" in line


# ---------------------------------------------------------------------------- duplicate JSON keys
@pytest.mark.parametrize("text, key", [
    ('{"workload": "prefix", "params": {"d": 4}, "c": 1, "c": 2}', "c"),
    ('{"domain": {"age": 4}, "groups": [{"variance": 1}], "groups": [{"variance": 2}]}', "groups"),
    ('{"domain": {"age": 4}, "groups": [{"variance": 1, "variance": 2}]}', "variance"),
])
def test_cli_a_key_given_twice_is_refused_naming_key_and_file(capsys, tmp_path, text, key):
    spec = tmp_path / "spec.json"
    spec.write_text(text)
    line = refused(capsys, tmp_path, "solve", spec)
    assert f"spec {spec}: the key '{key}' appears twice in one object" in line


def test_cli_a_result_with_a_key_given_twice_is_refused(capsys, tmp_path, solved):
    text = (solved / "dense.result.json").read_text()
    edited = tmp_path / "edited.json"
    edited.write_text(text.replace('"delta":', '"delta": 0.5, "delta":', 1))
    hist = tmp_path / "hist.csv"
    hist.write_text("1\n2\n3\n4\n")
    line = refused(capsys, tmp_path, "release", edited, "--data", hist, out="answers.csv")
    assert f"result {edited}: the key 'delta' appears twice" in line


# ---------------------------------------------------------------------------- an attribute of 10^12 values
@pytest.fixture
def memory_16gb(monkeypatch):
    monkeypatch.setattr(ffu_memory, "physical_memory", lambda: 16 * 10**9)


@pytest.mark.parametrize("blocks, kind, rows", [({"s": "identity"}, "total", 1), ({"x": "identity"}, "identity", 10**12),
                                                ({"x": {"bands": 10**6}}, "bands", 10**6),
                                                ({"x": "ranges"}, "ranges", 10**12 * (10**12 + 1) // 2)])
def test_a_block_over_a_huge_attribute_is_refused_before_it_is_formed(memory_16gb, blocks, kind, rows):
    dom = ffu.Domain({"x": 10**12, "s": 2})
    with pytest.raises(ValueError, match=f"group 0: `x`: the {kind} block of attribute `x` \\(1000000000000 values\\) "
                                         f"is a dense {rows} x 1000000000000 matrix"):
        ffu.workloads.product(dom, [(blocks, 1.0)])


def test_cli_huge_attribute_names_the_attribute(capsys, tmp_path, memory_16gb):
    spec = write_json(tmp_path / "spec.json", {"domain": {"x": 10**12, "s": 2},
                                               "groups": [{"blocks": {"s": "identity"}, "variance": 1.0}]})
    line = refused(capsys, tmp_path, "solve", spec, "--method", "kron")
    assert "group 0: `x`: the total block of attribute `x` (1000000000000 values)" in line and "8 TB" in line


# ---------------------------------------------------------------------------- batches
def test_solve_many_takes_every_method_solve_takes(dom):
    dense = [ffu.FitnessProblem.from_workload(ffu.workloads.prefix(d)) for d in (2, 3)]
    assert [s.method for s in ffu.solve_many(dense, method="auto")] == ["sdp", "sdp"]
    wl = ffu.workloads.product(dom, [({"age": "prefix"}, 1.0), ({"sex": "identity"}, 2.0)])
    (kron,) = ffu.solve_many([wl.to_problem()], method="kron", raise_errors=True)
    assert kron.privacy_cost == pytest.approx(ffu.solve(wl.to_problem(), method="kron").privacy_cost)
    assert set(ffu.solvers.batch.METHODS) == {*ffu.METHODS, *ffu.solvers.STRUCTURED_METHODS, "auto"}


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:8786", "127.0.0.1:8786", "localhost:8786", "tls://[::1]:8786",
                                     "ws://scheduler.example:80", "inproc://10.0.0.1/4242/1"])
def test_scheduler_addresses_distributed_reads_pass(address):
    assert ffu.solvers.batch.check_address(address) == address


@pytest.mark.parametrize("address, why", [
    ("localhost", "it has no port"), ("tcp://host:", "it has no port"), ("tcp://host:abc", "the port 'abc'"),
    ("tcp://host:0", "the port '0'"), ("tcp://host:70000", "the port '70000'"), ("tcp://:8786", "the host ''"),
    ("http://host:8786", "no scheme 'http'"), ("ipc:///tmp/sock", "no scheme 'ipc'"), ("a b:1", "the host 'a b'"),
    ("tcp://tcp://h:1", "two schemes"), ("fe80::1:8786", "more than one ':'"), ("inproc://x", "inproc://host/pid/n"),
    ("", "the host ''"),
])
def test_a_malformed_scheduler_address_is_refused_at_once_without_dask(monkeypatch, address, why):
    monkeypatch.setitem(__import__("sys").modules, "distributed", None)  # the check needs no dask
    problems = [ffu.FitnessProblem.from_workload(ffu.workloads.prefix(2))]
    with pytest.raises(ValueError, match=f"`scheduler` {address!r} is not a Dask scheduler address: .*{why}"):
        ffu.solve_many(problems, scheduler=address)


def test_a_scheduler_that_is_neither_address_nor_client_is_refused():
    with pytest.raises(ValueError, match="`scheduler` must be a Dask scheduler's address .* got int 8786"):
        ffu.solve_many([], scheduler=8786)


def test_an_unreachable_scheduler_fails_within_the_connection_timeout(monkeypatch):
    pytest.importorskip("distributed")
    pytest.importorskip("joblib")
    monkeypatch.setattr(ffu.solvers.batch, "CONNECT_TIMEOUT_S", 1)
    problems = [ffu.FitnessProblem.from_workload(ffu.workloads.prefix(2))]
    with pytest.raises(OSError, match="cannot connect to the Dask scheduler at 'tcp://127.0.0.1:1' within 1 s"):
        ffu.solve_many(problems, scheduler="tcp://127.0.0.1:1")


# ---------------------------------------------------------------------------- an ill-conditioned W
ILL = [[1e9, 1e9, 0], [0, 1e-9, 1e-9], [1, 1, 1]]
def test_an_ill_conditioned_w_is_built_with_advice_to_rescale():
    advice = ffu.FitnessProblem(ILL, 1.0).scaling_advice
    assert "badly scaled" in advice and "span 1.0e+18" in advice and "rescale rows of W" in advice


def test_an_ill_conditioned_w_never_ends_in_a_bare_linalg_error():
    try:
        sol = ffu.solve(ffu.FitnessProblem(ILL, 1.0), method="sdp")
    except ffu.SolverError as exc:
        assert "rescale rows of W" in str(exc)
    else:
        assert sol.gap < 1e-3


def test_cli_an_ill_conditioned_w_ends_solved_or_in_one_line_naming_the_scaling(capsys, tmp_path):
    spec = write_json(tmp_path / "spec.json", {"W": ILL, "c": 1.0})
    code = cli.main(["solve", str(spec), "--out", str(tmp_path / "r.json"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert "leading minor" not in err  # what a bare LinAlgError says, without its cause
    assert code == cli.EXIT_OK or (code == cli.EXIT_FAILED and "rescale rows of W" in err), err
