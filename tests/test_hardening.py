"""Hostile inputs (malformed files, fields, arguments and sizes) get one line, a documented exit status, and no file."""

import json
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest

from ffu_cvx.cli import cli

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _snapshot(folder: Path) -> dict:
    """Every file under ``folder`` with its bytes (a changed, added or removed file shows)."""
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _refused(capsys, folder, argv, *needles, code=2):
    """Run ``argv``: exit ``code``, one stderr line containing every needle, nothing written."""
    before = _snapshot(folder)
    got, out, err = _run(capsys, *argv)
    lines = [line for line in err.strip().splitlines() if not line.startswith("ffu-cvx [")]  # not progress
    assert got == code, err
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert _snapshot(folder) == before
    return lines[0]


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    d = tmp_path_factory.mktemp("solved")
    shutil.copy(EXAMPLES / "prefix16.json", d / "spec.json")
    assert cli.main(["solve", str(d / "spec.json"), "--out", str(d / "r.json"), "--quiet"]) == 0
    return d / "r.json"


@pytest.fixture
def work(tmp_path, solved):
    """A folder with a RESULT, a histogram and a spec."""
    shutil.copy(solved, tmp_path / "r.json")
    shutil.copy(EXAMPLES / "hist16.csv", tmp_path / "h.csv")
    (tmp_path / "s.json").write_text(json.dumps({"W": "W.csv", "c": 1.0}))
    np.savetxt(tmp_path / "W.csv", np.array([[1.0, 1.0], [1.0, 0.0]]), delimiter=",")
    return tmp_path


# ---------------------------------------------------------------------------- 1. output is an input
@pytest.mark.parametrize("case", ["release over data", "release over result", "solve over spec",
                                  "solve over W file", "report plot over result", "symlink to data",
                                  "hard link to result"])
def test_an_output_that_is_an_input_is_refused(capsys, work, case):
    release = ["release", work / "r.json", "--data", work / "h.csv", "--out"]
    if case == "release over data":
        argv, flag, what = release + [work / "h.csv"], "--out", "--data"
    elif case == "release over result":
        argv, flag, what = release + [work / "r.json"], "--out", "result"
    elif case == "solve over spec":
        argv, flag, what = ["solve", work / "s.json", "--out", work / "s.json"], "--out", "spec"
    elif case == "solve over W file":
        argv, flag, what = ["solve", work / "s.json", "--out", work / "W.csv"], "--out", "`W` file"
    elif case == "report plot over result":
        (work / "r.png").symlink_to(work / "r.json")
        argv, flag, what = ["report", work / "r.json", "--plot", work / "r.png"], "--plot", "result"
    elif case == "symlink to data":
        (work / "link.csv").symlink_to(work / "h.csv")
        argv, flag, what = release + [work / "link.csv"], "--out", "--data"
    else:
        os.link(work / "r.json", work / "hard.json")
        argv, flag, what = release + [work / "hard.json"], "--out", "result"
    _refused(capsys, work, argv, flag, "same file", what)


def test_a_read_only_output_is_left_alone(capsys, work):
    target = work / "answers.csv"
    target.write_text("keep me\n")
    target.chmod(stat.S_IRUSR)
    try:
        _refused(capsys, work, ["release", work / "r.json", "--data", work / "h.csv", "--out", target],
                 "--out", "read-only")
        _refused(capsys, work, ["solve", work / "s.json", "--out", target], "read-only")
    finally:
        target.chmod(stat.S_IRUSR | stat.S_IWUSR)


# ---------------------------------------------------------------------------- 2. RESULT validated whole
def _edit(res, case):
    if case == "problem.basis missing":
        del res["problem"]["basis"]
    elif case == "target not an object":
        res["target"] = 7
    elif case == "certificate a list":
        res["certificate"] = [1.0, 2.0]
    elif case == "edited problem.W":
        res["problem"]["W"][3] = res["problem"]["W"][4]  # rank 15: B = I no longer decomposes it
    elif case == "edited W entry":
        res["problem"]["W"][3][0] = 1.0
    elif case == "bad delta":
        res["delta"] = 2.0
    elif case == "sigma not positive definite":
        res["sigma"] = (-np.array(res["sigma"])).tolist()
    elif case == "sigma ragged":
        res["sigma"][0] = res["sigma"][0][:3]
    elif case == "edited problem.c":
        res["problem"]["c"] = [0.1] * 16
    elif case == "labels a string":
        res["problem"]["labels"] = "prefix"
    elif case == "old schema":
        res["schema_version"] = 1
    elif case == "edited epsilon":
        res["epsilon"] *= 0.5
    elif case == "unknown neighbours":
        res["neighbours"] = "substitute one record"
    return res


FIELDS = {"problem.basis missing": "`problem.basis`", "target not an object": "`target`",
          "certificate a list": "`certificate`", "edited problem.W": "`problem.B`",
          "edited W entry": "`variances[3] (or problem.W)`", "bad delta": "`delta`",
          "sigma not positive definite": "`sigma`", "sigma ragged": "`sigma`",
          "edited problem.c": "problem.c", "labels a string": "`problem.labels`",
          "old schema": "schema_version", "edited epsilon": "`epsilon`", "unknown neighbours": "`neighbours`"}


@pytest.mark.parametrize("command", ["release", "report"])
@pytest.mark.parametrize("case", sorted(FIELDS))
def test_an_edited_result_is_refused_naming_the_field(capsys, work, case, command):
    path = work / "edited.json"
    path.write_text(json.dumps(_edit(json.loads((work / "r.json").read_text()), case)))
    if command == "release":
        argv = ["release", path, "--data", work / "h.csv", "--out", work / "a.csv"]
    else:
        argv = ["report", path, "--plot", work / "fig.png"]
    _refused(capsys, work, argv, str(path), FIELDS[case])


def test_load_result_names_the_file_and_field(work):
    path = work / "edited.json"
    path.write_text(json.dumps(_edit(json.loads((work / "r.json").read_text()), "edited problem.W")))
    with pytest.raises(cli.InputError, match=r"edited\.json: `problem\.B` does not decompose problem\.W"):
        cli.load_result(path)
    sol, res = cli.load_result(work / "r.json")
    assert sol.privacy_cost == pytest.approx(res["privacy_cost"], rel=1e-12)


# ---------------------------------------------------------------------------- 3. the histogram's cell column
def _answers(path):
    return [line.split(",")[2] for line in path.read_text().splitlines()[1:]]


def test_cell_column_is_honoured_in_any_order(capsys, work):
    rows = (work / "h.csv").read_text().splitlines()
    shuffled = work / "shuffled.csv"
    order = np.random.default_rng(0).permutation(16)
    shuffled.write_text("\n".join([rows[0]] + [rows[1 + i] for i in order]) + "\n")
    a, b = work / "a.csv", work / "b.csv"
    assert _run(capsys, "release", work / "r.json", "--data", work / "h.csv", "--out", a, "--seed", 3)[0] == 0
    assert _run(capsys, "release", work / "r.json", "--data", shuffled, "--out", b, "--seed", 3)[0] == 0
    assert _answers(a) == _answers(b)
    headerless = work / "noheader.csv"
    headerless.write_text("\n".join(rows[1 + i] for i in order[::-1]) + "\n")
    c = work / "c.csv"
    assert _run(capsys, "release", work / "r.json", "--data", headerless, "--out", c, "--seed", 3)[0] == 0
    assert _answers(c) == _answers(a)


@pytest.mark.parametrize("case, needles", [
    ("outside", ("cell '16'", "0..15")), ("negative cell", ("cell '-1'",)), ("duplicate", ("cell 3 appears again",)),
    ("gap", ("cells [5] are missing",)), ("fractional cell", ("cell '2.5'",)),
    ("three columns, no header", ("header naming",)), ("ragged", ("columns",)),
])
def test_bad_cell_columns_are_refused(capsys, work, case, needles):
    cells = list(range(16))
    rows = [f"{i},{3}" for i in cells]
    if case == "outside":
        rows[-1] = "16,3"
    elif case == "negative cell":
        rows[0] = "-1,3"
    elif case == "duplicate":
        rows[5] = "3,3"
    elif case == "gap":
        del rows[5]
    elif case == "fractional cell":
        rows[2] = "2.5,3"
    elif case == "three columns, no header":
        rows = [f"{i},x,{3}".replace("x", "7") for i in cells]
    elif case == "ragged":
        rows[4] = "4,3,9"
    data = work / "bad.csv"
    data.write_text(("cell,count\n" if case not in ("three columns, no header",) else "") + "\n".join(rows) + "\n")
    _refused(capsys, work, ["release", work / "r.json", "--data", data, "--out", work / "a.csv"], str(data), *needles)


def test_one_data_row_with_a_cell_header_is_not_a_histogram_row(capsys, tmp_path):
    (tmp_path / "s.json").write_text(json.dumps({"W": [[1.0, 1.0], [1.0, 0.0]], "c": [1.0, 1.0]}))
    assert cli.main(["solve", str(tmp_path / "s.json"), "--out", str(tmp_path / "r.json"), "--quiet"]) == 0
    data = tmp_path / "h.csv"
    data.write_text("cell,count\n0,5\n")  # d = 2: cell 1 is missing, not counts (0, 5)
    _refused(capsys, tmp_path, ["release", tmp_path / "r.json", "--data", data, "--out", tmp_path / "a.csv"],
             "cells [1] are missing")
    data.write_text("cell,count\n1,5\n0,2\n")
    assert _run(capsys, "release", tmp_path / "r.json", "--data", data, "--out", tmp_path / "a.csv",
                "--seed", 0)[0] == 0


# ---------------------------------------------------------------------------- 4 and 9: one line, named
SPECS = {
    "entry 1e308": ({"W": [[1e308, 1.0], [0.0, 1.0]], "c": [1.0, 1.0]}, ("`W` and `c` are badly scaled",)),
    "number 1e400": ('{"W": [[1e400, 1], [0, 1]], "c": [1, 1]}', ("1e400", "out of the range")),
    "NaN literal": ('{"W": [[NaN, 1], [0, 1]], "c": [1, 1]}', ("NaN",)),
    "labels 7": ({"W": [[1.0, 1.0], [1.0, 0.0]], "c": 1.0, "labels": 7}, ("`labels`", "int")),
    "labels a string": ({"W": [[1.0, 1.0], [1.0, 0.0]], "c": 1.0, "labels": "ab"}, ("`labels`", "str")),
    "c null": ({"W": [[1.0, 1.0], [1.0, 0.0]], "c": None}, ("`c`", "required")),
    "prefix d = 10^6": ({"workload": "prefix", "params": {"d": 10**6}}, ("`d`", "8 TB", "smaller `d`")),
    "prefix d = 10^12": ({"workload": "prefix", "params": {"d": 10**12}}, ("`d`", "smaller `d`")),
    "name not a string": ({"W": [[1.0]], "c": 1.0, "name": [1]}, ("`name`",)),
    "basis of strings": ({"W": [[1.0]], "c": 1.0, "basis": [["a"]]}, ("`basis`",)),
}


@pytest.mark.parametrize("case", sorted(SPECS))
def test_hostile_specs_get_one_named_line(capsys, tmp_path, case):
    spec, needles = SPECS[case]
    (tmp_path / "s.json").write_text(spec if isinstance(spec, str) else json.dumps(spec))
    _refused(capsys, tmp_path, ["solve", tmp_path / "s.json", "--out", tmp_path / "r.json"], *needles)


@pytest.mark.parametrize("exc, code, needles", [
    (KeyboardInterrupt, 130, ("interrupted", "no output written")),
    (MemoryError, 1, ("out of memory", "m=16, d=16, k=16", "--method smii")),
    (OverflowError, 1, ("numerical failure", "OverflowError")),
])
def test_failures_inside_the_solve_get_one_line(capsys, tmp_path, monkeypatch, exc, code, needles):
    shutil.copy(EXAMPLES / "prefix16.json", tmp_path / "s.json")
    (tmp_path / "r.json").write_text("previous result\n")

    def failing(*args, **kwargs):
        raise exc()

    monkeypatch.setattr(cli, "solve", failing)
    _refused(capsys, tmp_path, ["solve", tmp_path / "s.json", "--out", tmp_path / "r.json"], *needles, code=code)
    assert (tmp_path / "r.json").read_text() == "previous result\n"


def test_badly_scaled_solver_failure_says_so(capsys, tmp_path, monkeypatch):
    (tmp_path / "s.json").write_text(json.dumps({"W": [[1e9, 0.0], [0.0, 1e-9]], "c": [1.0, 1.0]}))

    def failing(*args, **kwargs):
        raise cli.SolverError("solver gave up", status="solver_error")

    monkeypatch.setattr(cli, "solve", failing)
    line = _refused(capsys, tmp_path, ["solve", tmp_path / "s.json", "--out", tmp_path / "r.json", "--quiet"],
                    "solver failed", "badly scaled", code=1)
    assert "span 1.0e+18" in line
