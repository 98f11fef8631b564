"""The ``ffu-cvx`` command line: solve -> release -> report, and bad input (exit 2, no output)."""

import csv
import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx.cli import cli
from ffu_cvx.model import privacy
from ffu_cvx.solvers.kron import solution as kron_solution
from ffu_cvx.release.noise import release_epsilon, release_max_delta_m

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
METHOD = "sdp"


def _run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _answers(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_round_trip_on_the_example(tmp_path, capsys):
    result = tmp_path / "prefix16.result.json"
    code, _, err = _run(capsys, "solve", EXAMPLES / "prefix16.json", "--method", METHOD, "--out", result)
    assert code == 0, err
    assert "solving with method" in err and "wrote" in err  # progress on stderr
    res = json.loads(result.read_text())
    assert res["schema_version"] == cli.SCHEMA_VERSION
    W = np.array(res["problem"]["W"])
    np.testing.assert_array_equal(W, ffu.workloads.prefix(16).W)
    sigma = np.array(res["sigma"])
    assert sigma.shape == (16, 16)
    alpha = privacy.privacy_cost(sigma, np.array(res["problem"]["B"]))
    assert res["privacy_cost"] == pytest.approx(alpha, rel=1e-12)
    assert max(res["profile"]) == pytest.approx(alpha, rel=1e-12)
    assert res["delta"] == 1e-6
    assert res["epsilon"] == pytest.approx(privacy.gaussian_epsilon(1e-6, math.sqrt(alpha)), rel=1e-12)
    assert res["rho"] == pytest.approx(alpha / 2, rel=1e-12)
    assert max(res["variances"]) <= 1 + 1e-6
    assert 0 <= res["certificate"]["gap"] < 1e-3
    assert res["certificate"]["lower_bound"] <= alpha * (1 + 1e-9)
    assert set(res["timings"]) == {"load_s", "solve_s", "total_s"}
    # Problem 1 for prefix(16): the solver's alpha is the library's.
    direct = ffu.solve(ffu.FitnessProblem.from_workload(ffu.workloads.prefix(16)), method=METHOD)
    assert alpha == pytest.approx(direct.privacy_cost, rel=1e-6)

    answers = tmp_path / "answers.csv"
    code, _, err = _run(capsys, "release", result, "--data", EXAMPLES / "hist16.csv", "--out", answers,
                        "--seed", 7, "--level", 0.9)
    assert code == 0, err
    assert "differential privacy" in err
    rows = _answers(answers)
    assert len(rows) == 16
    x = np.array([int(r["count"]) for r in csv.DictReader(open(EXAMPLES / "hist16.csv"))])
    got = np.array([float(r["answer"]) for r in rows])
    var = np.array([float(r["variance"]) for r in rows])
    np.testing.assert_allclose(var, res["variances"], rtol=1e-12)
    assert np.all(np.abs(got - W @ x) <= 6 * np.sqrt(var))  # 6 sd: fails with probability < 1e-7
    half = np.array([float(r["upper"]) - float(r["answer"]) for r in rows])
    np.testing.assert_allclose(half, 1.6448536269514722 * np.sqrt(var), rtol=1e-9)
    # Same seed, same noise; the default (no seed) draws fresh noise.
    again = tmp_path / "again.csv"
    assert _run(capsys, "release", result, "--data", EXAMPLES / "hist16.csv", "--out", again,
                "--seed", 7, "--level", 0.9)[0] == 0
    assert again.read_text() == answers.read_text()
    fresh = tmp_path / "fresh.csv"
    assert _run(capsys, "release", result, "--data", EXAMPLES / "hist16.csv", "--out", fresh, "--quiet")[0] == 0
    assert fresh.read_text() != answers.read_text()

    fig = tmp_path / "fig.png"
    code, out, err = _run(capsys, "report", result, "--plot", fig)
    assert code == 0, err
    assert f"alpha = {alpha:.10g}" in out and "16/16 queries within their targets" in out
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and fig.stat().st_size > 10_000
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["prefix16.result.json", "answers.csv", "again.csv", "fresh.csv", "fig.png", "answers.privacy.json",
         "again.privacy.json", "fresh.privacy.json"])  # each answers file with its statement, no temp files left


def test_problem2_target_and_custom_matrix_spec(tmp_path, capsys):
    np.savetxt(tmp_path / "W.csv", np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [1.0, 0.0, 0.0]]), delimiter=",")
    np.save(tmp_path / "c.npy", np.array([1.0, 2.0, 1.0]))
    spec = {"name": "custom", "W": "W.csv", "c": "c.npy", "target": {"epsilon": 1.0, "delta": 1e-6},
            "labels": ["a", "b", "c"]}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    result = tmp_path / "r.json"
    code, _, err = _run(capsys, "solve", tmp_path / "spec.json", "--method", METHOD, "--out", result, "--quiet")
    assert code == 0, err
    assert err == ""  # --quiet
    res = json.loads(result.read_text())
    dm = release_max_delta_m(1.0, 1e-6)  # the target holds for the release through OpenDP's sampler
    assert res["privacy_cost"] == pytest.approx(dm ** 2, rel=1e-12)
    assert release_epsilon(res["delta_m"], 1e-6) == pytest.approx(1.0, rel=1e-9) and res["epsilon"] < 1.0
    k = res["target"]["k"]
    assert np.all(np.array(res["variances"]) <= k * np.array([1.0, 2.0, 1.0]) * (1 + 1e-12))
    assert res["problem"]["labels"] == ["a", "b", "c"]
    hist = tmp_path / "h.csv"
    hist.write_text("4,5,6\n")  # one row of d counts is accepted too
    assert _run(capsys, "release", result, "--data", hist, "--out", tmp_path / "a.csv", "--seed", 1)[0] == 0
    assert [r["label"] for r in _answers(tmp_path / "a.csv")] == ["a", "b", "c"]
    code, out, _ = _run(capsys, "report", result)
    assert code == 0 and "Problem 2" in out and "(1, 1e-06)-DP" in out


def _bad_case(tmp_path, case):
    """(argv, output path) for one bad-input case."""
    spec = tmp_path / "spec.json"
    out = tmp_path / "out.json"
    good = {"W": [[1.0, 1.0], [1.0, 0.0]], "c": [1.0, 1.0]}
    if case == "malformed json":
        spec.write_text('{"W": [[1, 1], [1, 0]], "c": [1, 1]')
    elif case == "W not 2-D":
        spec.write_text(json.dumps({"W": [1.0, 2.0, 3.0], "c": 1.0}))
    elif case == "ragged W":
        spec.write_text(json.dumps({"W": [[1.0, 2.0], [3.0]], "c": [1.0, 1.0]}))
    elif case == "W and c disagree":
        spec.write_text(json.dumps({"W": [[1.0, 2.0], [3.0, 4.0]], "c": [1.0, 1.0, 1.0]}))
    elif case == "negative targets":
        spec.write_text(json.dumps({"W": [[1.0, 1.0], [1.0, 0.0]], "c": [1.0, -2.0]}))
    elif case == "missing spec":
        pass
    elif case == "missing W file":
        spec.write_text(json.dumps({"W": "nowhere.npy", "c": 1.0}))
    elif case == "unknown workload":
        spec.write_text(json.dumps({"workload": "nope", "params": {}}))
    elif case == "bad params":
        spec.write_text(json.dumps({"workload": "prefix", "params": {"size": 4}}))
    elif case == "unknown key":
        spec.write_text(json.dumps({**good, "tagret": {"epsilon": 1}}))
    elif case == "output dir missing":
        spec.write_text(json.dumps(good))
        out = tmp_path / "no" / "such" / "dir" / "out.json"
    elif case == "output is a directory":
        spec.write_text(json.dumps(good))
        out = tmp_path / "adir"
        out.mkdir()
        return ["solve", spec, "--method", METHOD, "--out", out], None
    return ["solve", spec, "--method", METHOD, "--out", out], out


BAD_CASES = ["malformed json", "W not 2-D", "ragged W", "W and c disagree", "negative targets", "missing spec",
             "missing W file", "unknown workload", "bad params", "unknown key", "output dir missing",
             "output is a directory"]


@pytest.mark.parametrize("case", BAD_CASES)
def test_bad_solve_input_exits_2_and_writes_nothing(tmp_path, capsys, case):
    argv, out = _bad_case(tmp_path, case)
    before = {p for p in tmp_path.rglob("*")}
    code, stdout, err = _run(capsys, *argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ffu-cvx: error: ")
    assert stdout == ""
    if out is not None:
        assert not out.exists()
    assert {p for p in tmp_path.rglob("*")} == before  # nothing written, no temp file left


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    d = tmp_path_factory.mktemp("solved")
    shutil.copy(EXAMPLES / "prefix16.json", d / "spec.json")
    assert cli.main(["solve", str(d / "spec.json"), "--method", METHOD, "--out", str(d / "r.json"), "--quiet"]) == 0
    return d / "r.json"


@pytest.mark.parametrize("case", ["missing data", "negative count", "wrong length", "not a number",
                                  "edited result", "output dir missing", "bad plot suffix", "unknown method"])
def test_bad_release_and_report_input_exits_2(tmp_path, capsys, solved, case):
    hist = tmp_path / "h.csv"
    hist.write_text("count\n" + "\n".join(["3"] * 16) + "\n")
    out = tmp_path / "answers.csv"
    result = solved
    argv = ["release", result, "--data", hist, "--out", out]
    if case == "missing data":
        argv[3] = tmp_path / "none.csv"
    elif case == "negative count":
        hist.write_text("count\n" + "\n".join(["3"] * 15 + ["-1"]) + "\n")
    elif case == "wrong length":
        hist.write_text("\n".join(["3"] * 15) + "\n")
    elif case == "not a number":
        hist.write_text("count\n" + "\n".join(["3"] * 15 + ["x"]) + "\n")
    elif case == "edited result":
        res = json.loads(solved.read_text())
        res["privacy_cost"] *= 0.5
        result = tmp_path / "edited.json"
        result.write_text(json.dumps(res))
        argv[1] = result
    elif case == "output dir missing":
        out = tmp_path / "missing" / "answers.csv"
        argv[-1] = out
    elif case == "bad plot suffix":
        out = tmp_path / "fig.txt"
        argv = ["report", result, "--plot", out]
    elif case == "unknown method":
        argv = ["solve", EXAMPLES / "prefix16.json", "--method", "magic", "--out", out]
    code, _, err = _run(capsys, *argv)
    assert code == 2
    assert err.strip()  # argparse prints its usage; ours print one line
    if case != "unknown method":
        assert len(err.strip().splitlines()) == 1 and "ffu-cvx: error:" in err
    assert not out.exists()
    assert not [p for p in tmp_path.rglob("*.tmp")]


def test_solve_with_smii_agrees_with_sdp(tmp_path, capsys, solved):
    out = tmp_path / "smii.json"
    assert _run(capsys, "solve", EXAMPLES / "prefix16.json", "--method", "smii", "--out", out, "--quiet")[0] == 0
    a_smii = json.loads(out.read_text())["privacy_cost"]
    a_sdp = json.loads(solved.read_text())["privacy_cost"]
    assert a_smii == pytest.approx(a_sdp, rel=1e-4)


def test_load_spec_builds_the_problem():
    problem, spec = cli.load_spec(EXAMPLES / "prefix16.json")
    assert (problem.m, problem.d, problem.k, problem.basis) == (16, 16, 16, "identity")
    assert spec["workload"] == "prefix"
    problem, spec = cli.load_spec(EXAMPLES / "hierarchy6.json")
    assert (problem.m, problem.d, problem.k) == (9, 6, 6)
    np.testing.assert_array_equal(problem.W[0], np.ones(6))
    np.testing.assert_array_equal(problem.c, [1, 2, 2, 4, 4, 4, 4, 4, 4])
    assert problem.labels[0] == "total" and spec["target"] == {"epsilon": 1.0, "delta": 1e-6}


def test_problem2_example(tmp_path, capsys):
    out = tmp_path / "h6.json"
    code, _, err = _run(capsys, "solve", EXAMPLES / "hierarchy6.json", "--out", out)
    assert code == 0, err
    assert "Problem 2" in err
    res = json.loads(out.read_text())
    problem, _ = cli.load_spec(EXAMPLES / "hierarchy6.json")
    alpha1 = ffu.solve(problem, method="sdp").privacy_cost
    dm = release_max_delta_m(1.0, 1e-6)
    assert res["target"]["k"] == pytest.approx(alpha1 / dm ** 2, rel=1e-7)
    assert res["target"]["k_lower_bound"] == pytest.approx(res["target"]["k"], rel=1e-6)
    assert release_epsilon(math.sqrt(res["privacy_cost"]), 1e-6) == pytest.approx(1.0, rel=1e-9)
    # At epsilon = 1 (as released through OpenDP's sampler) the targets are missed 25.9x: the solve, the
    # RESULT and the report say so.
    assert res["target"]["k"] > 25 and res["target"]["met"] is False
    assert "warning: At (1, 1e-06)-DP the targets cannot all be met" in err
    code, report, _ = _run(capsys, "report", out)
    assert code == 0 and "0/9 queries within their targets" in report
    assert f"targets MISSED by up to a factor {res['target']['k']:.6g}" in report


def test_module_entry_point_exit_status(tmp_path):
    # The console script calls main(); running the module shows the exit status reaches the shell.
    proc = subprocess.run([sys.executable, "-m", "ffu_cvx.cli.cli", "solve", str(tmp_path / "none.json"),
                           "--out", str(tmp_path / "r.json")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("ffu-cvx: error: cannot read spec")
    assert not (tmp_path / "r.json").exists()


# ---------------------------------------------------------------------------- product specs and records
PRODUCT_SPEC = {"name": "people", "domain": {"age": 30, "sex": ["F", "M"], "region": ["N", "S", "E"]},
                "groups": [{"blocks": {"age": {"bands": 10}, "sex": "identity"}, "variance": 20},
                           {"blocks": {"region": "identity"}, "variance": 5, "name": "per region"},
                           {"variance": 2, "name": "total"}]}


def _records_csv(path, n=300, seed=1, extra=""):
    rng = np.random.default_rng(seed)
    rows = ["age,sex,region,income"] + [f"{rng.integers(30)},{'FM'[rng.integers(2)]},{'NSE'[rng.integers(3)]},"
                                        f"{rng.integers(100)}" for _ in range(n)]
    path.write_text("\n".join(rows) + "\n" + extra)
    return path


def test_product_spec_records_to_labelled_answers_and_statement(tmp_path, capsys):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({**PRODUCT_SPEC, "method": "smii", "target": {"epsilon": 1.0, "delta": 1e-6}}))
    result = tmp_path / "r.json"
    code, _, err = _run(capsys, "solve", spec, "--out", result)
    assert code == 0, err
    assert "method=smii" in err and "product problem" not in err  # solved densely: small domain
    res = json.loads(result.read_text())
    assert release_epsilon(res["delta_m"], 1e-6) == pytest.approx(1.0, rel=1e-9)
    assert res["problem"]["labels"][0] == "age 0-9 × sex F"
    records = _records_csv(tmp_path / "people.csv")
    out = tmp_path / "answers.csv"
    code, _, err = _run(capsys, "release", result, "--records", records, "--out", out, "--seed", 3, "--round",
                        "--show-confidential")
    assert code == 0, err
    assert "300 records" in err and "differential privacy" in err
    rows = _answers(out)
    assert [r["label"] for r in rows][:2] == ["age 0-9 × sex F", "age 0-9 × sex M"] and len(rows) == 10
    assert rows[6]["group"] == "per region" and rows[6]["label"] == "region N"
    counts = np.zeros(3)
    for r in csv.DictReader(open(records)):
        counts["NSE".index(r["region"])] += 1
    got = np.array([float(r["answer"]) for r in rows[6:9]])
    assert np.all(np.abs(got - counts) <= 6 * np.sqrt([float(r["variance"]) for r in rows[6:9]]))
    assert all(float(r["postprocessed"]) == round(float(r["answer"])) for r in rows)
    side = json.loads((tmp_path / "answers.privacy.json").read_text())
    # seeded, so numpy's sampler: the exact Gaussian's epsilon, below the target OpenDP's accounting meets
    assert side["noise"]["sampler"] == "numpy" and 0.9 < side["epsilon"] < 1.0
    assert side["neighbours"] == privacy.ADD_REMOVE
    assert side["post_processing"]["steps"] == ["answers rounded to the nearest integer"]
    assert "records" not in side and side["answers_file"] == "answers.csv"  # nothing exact is published
    # The histogram route gives the same answers for the same noise.
    hist = tmp_path / "h.csv"
    x = ffu.Domain(PRODUCT_SPEC["domain"]).counts(_records_csv(tmp_path / "p2.csv")).dense()
    hist.write_text("\n".join(str(int(v)) for v in x) + "\n")
    assert _run(capsys, "release", result, "--data", hist, "--out", tmp_path / "d.csv", "--seed", 3)[0] == 0
    np.testing.assert_allclose([float(r["answer"]) for r in _answers(tmp_path / "d.csv")],
                               [float(r["answer"]) for r in rows], rtol=1e-12)
    assert (tmp_path / "d.privacy.json").exists()


def test_a_spec_with_a_geography_releases_its_levels(tmp_path, capsys):
    spec = {"name": "tiers", "domain": {"sex": ["F", "M"], "region": ["N", "S", "E"]},
            "levels": {"region": {"zone": {"N": "north", "S": "south", "E": "south"}}}, "method": "kron",
            "groups": [{"variance": 1, "name": "nation"}, {"blocks": {"region": {"level": "zone"}}, "variance": 4},
                       {"blocks": {"region": "identity", "sex": "identity"}, "variance": 16}]}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    result, out = tmp_path / "r.json", tmp_path / "a.csv"
    code, _, err = _run(capsys, "solve", tmp_path / "spec.json", "--out", result)
    assert code == 0, err
    records = tmp_path / "people.csv"
    records.write_text("sex,region\nF,N\nM,S\nM,E\nF,E\n")
    code, _, err = _run(capsys, "release", result, "--records", records, "--out", out, "--seed", 1)
    assert code == 0, err
    assert [r["label"] for r in _answers(out)][:3] == ["total", "zone north", "zone south"]
    (tmp_path / "bad.json").write_text(json.dumps({**spec, "levels": {"region": {"zone": ["north"]}}}))
    code, _, err = _run(capsys, "solve", tmp_path / "bad.json", "--out", tmp_path / "bad.result.json")
    assert code == 2 and "`levels.region.zone`: 1 units for the 3 values" in err
    assert not (tmp_path / "bad.result.json").exists()


@pytest.mark.parametrize("case, needle", [
    ("unknown attribute", "unknown attribute 'race'"),
    ("bad block size", "must have 30 columns"),
    ("zero target", "`group 0 target`"),
    ("unknown key", "unknown key(s) ['colour']"),
    ("bad domain", "`domain`"),
    ("group without variance", "`groups[0]`"),
    ("large domain, dense method", "method='kron' or 'auto'"),
    ("record outside the domain", "line 4, column `sex`: unknown value 'X'"),
    ("missing column", "no column `region`"),
    ("records with a matrix result", "not solved from a product spec"),
    ("both --data and --records", "exactly one of --data"),
])
def test_bad_product_input_is_one_line_and_no_output(tmp_path, capsys, case, needle):
    spec = dict(PRODUCT_SPEC)
    if case == "unknown attribute":
        spec["groups"] = [{"blocks": {"race": "identity"}, "variance": 1}]
    elif case == "bad block size":
        spec["groups"] = [{"blocks": {"age": [[1, 2, 3]]}, "variance": 1}]
    elif case == "zero target":
        spec["groups"] = [{"blocks": {"age": "identity"}, "variance": 0}]
    elif case == "unknown key":
        spec["colour"] = "red"
    elif case == "bad domain":
        spec["domain"] = {"age": 0}
    elif case == "group without variance":
        spec["groups"] = [{"blocks": {"age": "identity"}}]
    elif case == "large domain, dense method":
        spec["domain"] = {"age": 116, "sex": 2, "race": 63, "region": 50}
        spec["groups"] = [{"blocks": {"age": "prefix"}, "variance": 1}]
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    out = tmp_path / "out.csv"
    if case in ("record outside the domain", "missing column", "records with a matrix result",
                "both --data and --records"):
        result = tmp_path / "r.json"
        src = EXAMPLES / "prefix16.json" if case == "records with a matrix result" else tmp_path / "spec.json"
        assert _run(capsys, "solve", src, "--out", result, "--quiet")[0] == 0
        records = _records_csv(tmp_path / "rec.csv", n=5, extra="3,X,N,1\n")
        if case == "missing column":
            records.write_text("age,sex\n1,F\n")
        argv = ["release", result, "--records", records, "--out", out, "--quiet"]
        if case == "both --data and --records":
            argv += ["--data", EXAMPLES / "hist16.csv"]
        if case == "record outside the domain":
            records.write_text("age,sex,region\n1,F,N\n2,M,S\n3,X,N\n")
    else:
        argv = ["solve", tmp_path / "spec.json", "--out", out, "--method", "sdp"]
    code, _, err = _run(capsys, *argv)
    assert code == 2, err
    assert needle in err and len(err.strip().splitlines()) == 1
    assert not out.exists() and not (tmp_path / "out.privacy.json").exists()


def test_structured_results_are_re_solved_on_release(tmp_path, capsys, monkeypatch):
    """method="kron": a structured RESULT (no Sigma), then release re-solves it and checks every number."""
    from ffu_cvx import solvers

    calls = []
    kron = solvers.STRUCTURED_METHODS["kron"]

    def counted(problem, **options):
        calls.append(problem)
        return kron(problem, **options)

    monkeypatch.setitem(solvers.STRUCTURED_METHODS, "kron", counted)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({**PRODUCT_SPEC, "method": "kron", "options": {"tol": 1e-6}}))
    result = tmp_path / "r.json"
    assert _run(capsys, "solve", spec, "--out", result, "--quiet")[0] == 0
    res = json.loads(result.read_text())
    assert res["kind"] == "structured" and res["method"] == "kron" and "W" not in res and "sigma" not in res
    assert isinstance(calls[0], ffu.workloads.products.ProductProblem)
    direct = ffu.solve(ffu.FitnessProblem.from_workload(ffu.io.specfile.product_workload(PRODUCT_SPEC, spec)),
                       method="sdp")
    assert res["privacy_cost"] == pytest.approx(direct.privacy_cost, rel=2e-6)
    out = tmp_path / "a.csv"
    code, _, err = _run(capsys, "release", result, "--records", _records_csv(tmp_path / "p.csv"), "--out", out)
    assert code == 0, err
    assert len(calls) == 2
    assert json.loads((tmp_path / "a.privacy.json").read_text())["privacy_cost"] == pytest.approx(res["privacy_cost"])
    assert [float(r["variance"]) for r in _answers(out)] == pytest.approx(res["variances"])
    res["privacy_cost"] *= 0.5  # an edited RESULT no longer matches the re-solved mechanism
    result.write_text(json.dumps(res))
    code, _, err = _run(capsys, "release", result, "--records", tmp_path / "p.csv", "--out", tmp_path / "b.csv")
    assert code == 2 and "`privacy_cost` records" in err and not (tmp_path / "b.csv").exists()
    assert _run(capsys, "report", result)[0] == 2


def test_structured_result_above_the_recorded_variances_limit_releases(tmp_path, capsys, monkeypatch):
    """A structured RESULT with too many queries to record their variances (null in the file)
    still loads and releases; the answers' variances come group by group from the factors."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({**PRODUCT_SPEC, "method": "kron"}))
    records = _records_csv(tmp_path / "people.csv")
    full, small = tmp_path / "full.json", tmp_path / "small.json"
    assert _run(capsys, "solve", spec, "--out", full, "--quiet")[0] == 0
    assert _run(capsys, "release", full, "--records", records, "--out", tmp_path / "a.csv", "--seed", 4)[0] == 0
    monkeypatch.setattr(kron_solution, "VARIANCES_MAX", 5)  # fewer than the workload's 10 queries
    code, _, err = _run(capsys, "solve", spec, "--out", small, "--quiet")
    assert code == 0, err
    res = json.loads(small.read_text())
    assert res["variances"] is None and res["max_ratio"] == json.loads(full.read_text())["max_ratio"]
    code, _, err = _run(capsys, "release", small, "--records", records, "--out", tmp_path / "b.csv", "--seed", 4)
    assert code == 0, err
    a, b = _answers(tmp_path / "a.csv"), _answers(tmp_path / "b.csv")
    assert [(r["answer"], r["variance"]) for r in a] == [(r["answer"], r["variance"]) for r in b]
    # An edited file that records variances where none can be checked is refused.
    res["variances"] = [1.0] * 10
    small.write_text(json.dumps(res))
    code, _, err = _run(capsys, "release", small, "--records", records, "--out", tmp_path / "c.csv", "--seed", 4)
    assert code == 2 and "variances" in err and not (tmp_path / "c.csv").exists()


def test_version_and_python_dash_m_run_the_same_command_line(capsys):
    code, out, _ = _run(capsys, "--version")
    assert code == 0 and out.strip() == f"ffu-cvx {ffu.__version__}"
    run = subprocess.run([sys.executable, "-m", "ffu_cvx", "--version"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == f"ffu-cvx {ffu.__version__}", run.stderr
    run = subprocess.run([sys.executable, "-m", "ffu_cvx", "budget"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "usage: ffu-cvx budget" in run.stderr


def test_a_release_speaks_of_margins_when_the_spec_gave_margins(tmp_path, capsys):
    spec, result, out = tmp_path / "s.json", tmp_path / "r.json", tmp_path / "a.csv"
    spec.write_text(json.dumps({"workload": "prefix", "params": {"d": 16},
                                "c": {"margin": 20, "level": 0.95, "joint": True}}))
    assert _run(capsys, "solve", spec, "--method", "sdp", "--out", result, "--quiet")[0] == 0
    assert _run(capsys, "release", result, "--data", EXAMPLES / "hist16.csv", "--out", out, "--seed", 1)[0] == 0
    text = json.loads((tmp_path / "a.privacy.json").read_text())["text"]
    assert "meet their joint margins of error" in text and "variance target" not in text
    rows = _answers(out)
    assert rows[0]["target"] == "all 16 within ±20 at once at 95%: joint_lower, joint_upper"
    half = float(rows[0]["joint_upper"]) - float(rows[0]["answer"])
    assert 0 < half <= 20 * (1 + 1e-6)


def test_max_time_bounds_the_whole_command(tmp_path, capsys):
    # Gradient descent to a gap of 1e-12 would run for minutes; the command ends within 10% of its budget.
    spec, out = tmp_path / "s.json", tmp_path / "r.json"
    spec.write_text(json.dumps({"workload": "prefix", "params": {"d": 128}, "options": {"tol": 1e-12}}))
    t0 = time.perf_counter()
    assert _run(capsys, "solve", spec, "--method", "gd", "--max-time", 8, "--out", out)[0] == 0
    assert time.perf_counter() - t0 <= 8 * 1.1
    res = json.loads(out.read_text())
    assert res["status"] == "max_iter" and "max_time" in res["message"]
    assert res["timings"]["max_time_s"] == 8 and res["timings"]["solve_budget_s"] <= 8 * cli.SOLVE_SHARE


def test_the_solver_gets_what_the_command_has_left_less_the_write():
    dense = ffu.FitnessProblem.from_workload(ffu.workloads.prefix(1000))  # W and Sigma: 2 x 10^6 numbers
    assert cli.solve_budget(90, 0, dense) == pytest.approx(90 * cli.SOLVE_SHARE)
    assert cli.solve_budget(90, 80, dense) == pytest.approx(10 - 2e6 * cli.WRITE_SECONDS_PER_NUMBER)
    assert cli.solve_budget(10, 9.9, dense) == 1e-3
