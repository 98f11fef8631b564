"""The command line shows the solvers' progress and honours a time budget."""

import json

from ffu_cvx.cli.cli import main


def test_solve_prints_the_solvers_progress_and_quiet_silences_it(tmp_path, capsys):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"workload": "prefix", "params": {"d": 8}}))
    assert main(["solve", str(spec), "--method", "sdp", "--out", str(tmp_path / "r.json")]) == 0
    err = capsys.readouterr().err
    assert "SDP level 1" in err and "Problem 1 by" in err
    assert main(["solve", str(spec), "--method", "sdp", "--out", str(tmp_path / "q.json"), "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_max_time_reaches_the_solver_and_is_checked(tmp_path, capsys):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"workload": "prefix", "params": {"d": 8}}))
    assert main(["solve", str(spec), "--method", "smii", "--max-time", "1e-9", "--out", str(tmp_path / "r.json"),
                 "--quiet"]) in (0, 1)
    res_or_err = (tmp_path / "r.json").read_text() if (tmp_path / "r.json").exists() else capsys.readouterr().err
    assert "max_iter" in res_or_err
    assert main(["solve", str(spec), "--max-time", "-1", "--out", str(tmp_path / "x.json")]) == 2
    assert "--max-time must be a positive number" in capsys.readouterr().err
    product = tmp_path / "p.json"
    product.write_text(json.dumps({"domain": {"age": 4, "sex": 2},
                                   "groups": [{"blocks": {"age": "identity"}, "variance": 1},
                                              {"blocks": {"sex": "identity"}, "variance": 1}]}))
    assert main(["solve", str(product), "--method", "kron", "--max-time", "5", "--out", str(tmp_path / "k.json"),
                 "--quiet"]) == 0
    capsys.readouterr()
    assert main(["solve", str(product), "--method", "fourier", "--max-time", "5", "--out",
                 str(tmp_path / "y.json")]) == 2  # the exact Fourier optimum takes no time budget
    assert "max_time" in capsys.readouterr().err and not (tmp_path / "y.json").exists()


def test_smii_keeps_a_small_max_time(tmp_path, capsys):
    # SM-II asked for a gap of 1e-12 on prefix(128); the command ends within 10% of a 3 s budget.
    import time

    spec, out = tmp_path / "s.json", tmp_path / "r.json"
    spec.write_text(json.dumps({"workload": "prefix", "params": {"d": 128}, "options": {"tol": 1e-12}}))
    t0 = time.perf_counter()
    assert main(["solve", str(spec), "--method", "smii", "--max-time", "3", "--out", str(out), "--quiet"]) == 0
    assert time.perf_counter() - t0 <= 3 * 1.1
    res = json.loads(out.read_text())
    assert res["status"] in ("max_iter", "optimal_inaccurate") and res["certificate"]["gap"] is not None
