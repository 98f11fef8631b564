"""Accuracy in the publisher's words: margins, joint table targets, budget from accuracy and back."""

import csv
import io
import json
import math

import numpy as np
import pytest
from scipy import special

import ffu_cvx as ffu
from ffu_cvx.model import accuracy
from ffu_cvx.release import budget
from ffu_cvx.release.noise import inflation, release_epsilon
from ffu_cvx.cli.cli import main


def test_a_margin_converts_exactly_and_is_stated_back():
    goal = accuracy.target({"margin": 50, "level": 0.95})
    z = special.ndtri(0.975)
    assert goal.variance == (50 / z) ** 2 and goal.kind == "margin"
    assert goal.text("each county total") == "each county total within ±50 at 95%"
    joint = accuracy.target({"margin": 50, "level": 0.95, "joint": True}, queries=200)
    assert joint.query_level == 0.95 ** (1 / 200)
    assert joint.variance == pytest.approx((50 / special.ndtri(0.5 + 0.5 * 0.95 ** (1 / 200))) ** 2, rel=1e-14)
    assert joint.variance < goal.variance  # a joint guarantee asks more of each query
    # Šidák's per-query level is never looser than Bonferroni's.
    assert joint.query_level <= 1 - 0.05 / 200 + 1e-15
    assert accuracy.target(2.5) == accuracy.Target("variance", 2.5)


@pytest.mark.parametrize("spec, needle", [
    ({"margin": 50}, "exactly `variance`, or `margin` and `level`"),
    ({"margin": -1, "level": 0.9}, "`t.margin` must be a positive number"),
    ({"margin": 5, "level": 1.5}, "`t.level` must lie in (0, 1)"),
    ({"margin": 5, "level": 0.9, "joint": "yes"}, "`t.joint` must be true or false"),
    ({"variance": 1, "margin": 2}, "exactly"),
    ("50", "must be a variance"),
])
def test_bad_targets_name_the_field(spec, needle):
    with pytest.raises(ValueError, match=None) as info:
        accuracy.target(spec, "t")
    assert needle in str(info.value)


@pytest.fixture(scope="module")
def agency():
    dom = ffu.Domain({"county": 200, "sex": ["F", "M"]})
    wl = ffu.workloads.product(dom, [
        ({"county": "identity"}, {"margin": 50, "level": 0.95, "joint": True}, "county totals"),
        ({"county": "identity", "sex": "identity"}, {"margin": 60, "level": 0.9}, "county x sex"),
        ({}, 30.0, "total")])
    return dom, wl, ffu.solve(wl.to_problem(), method="kron", tol=1e-8)


def test_a_joint_table_target_is_met_jointly_and_measured(agency):
    dom, wl, sol = agency
    goal = wl.groups[0].accuracy
    assert goal.kind == "joint" and goal.queries == 200
    lo, hi = wl.offsets[0], wl.offsets[1]
    noise = lambda gen: sol.sample_answer_noise(gen)[lo:hi]  # noqa: E731
    cov = accuracy.joint_coverage(noise, goal.margin, draws=2000, rng=1)
    # The optimum is tight on this table, its noise nearly independent: Šidák is nearly exact.
    assert cov.high >= 0.95 and abs(cov.rate - 0.95) <= 0.01, cov.text()
    rel = ffu.release_product(sol, wl, np.zeros(wl.d), rng=0, coverage_draws=500)
    stated = rel.statement()["groups"]
    assert "all 200 answers of 'county totals' within ±50 at once with probability at least 95%" in \
        stated[0]["accuracy"]["stated"]
    assert stated[0]["accuracy"]["measured"]["draws"] == 500 and "measured" not in stated[1]["accuracy"]
    assert stated[1]["accuracy"]["stated"] == "each answer of 'county x sex' within ±60 at 90%"
    rows = list(csv.DictReader(io.StringIO(rel.csv_bytes().decode())))
    assert rows[0]["target"] == "all 200 within ±50 at once at 95%: joint_lower, joint_upper"
    assert rows[200]["target"] == "±60 at 90%"
    assert rows[-1]["target"] == "variance <= 30"


def test_smallest_budget_and_the_accuracy_a_budget_buys(agency):
    _, wl, sol = agency
    found = budget.smallest_budget(wl.to_problem(), 1e-6, method="kron", tol=1e-8)
    # the epsilon a release through OpenDP's sampler states; the ideal Gaussian's beside it
    assert found.epsilon == pytest.approx(release_epsilon(sol.delta_m, 1e-6), rel=1e-9) and found.met
    assert found.ideal_epsilon == pytest.approx(sol.epsilon(1e-6), rel=1e-9) and found.ideal_epsilon < found.epsilon
    assert found.epsilon_lower_bound <= found.epsilon
    assert found.rho == pytest.approx(sol.privacy_cost * inflation("opendp") ** 2 / 2)
    assert found.tables[0].margin == pytest.approx(50, rel=1e-6) or found.tables[0].margin < 50
    half = budget.accuracy_at(wl.to_problem(), found.epsilon / 2, 1e-6, method="kron", tol=1e-8)
    assert not half.met and all("MISSED" in t.text() for t in half.tables if not t.met)
    double = budget.accuracy_at(wl.to_problem(), found.epsilon * 2, 1e-6, method="kron", tol=1e-8)
    assert double.met and double.tables[1].margin < found.tables[1].margin


def test_dense_spec_margins_and_the_budget_command(tmp_path, capsys):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"workload": "prefix", "params": {"d": 8}, "c": {"margin": 10, "level": 0.95}}))
    problem, _ = ffu.io.specfile.load_spec(spec)
    assert np.all(problem.c == (10 / special.ndtri(0.975)) ** 2)
    assert main(["budget", str(spec), "--quiet"]) == 0
    out = capsys.readouterr().out
    sol = ffu.solve(problem, method="auto")
    assert f"({release_epsilon(sol.delta_m, 1e-6):.6g}, 1e-06)-DP" in out and "(met)" in out
    assert f"an ideal continuous Gaussian: epsilon {sol.epsilon(1e-6):.6g}" in out
    assert main(["budget", str(spec), "--epsilon", "0.1", "--quiet"]) == 0
    assert "MISSED by a factor" in capsys.readouterr().out
    assert main(["budget", str(spec), "--epsilon", "-1"]) == 2
    capsys.readouterr()
    # Solved, reported and released: the margin is stated back in the report and the statement.
    assert main(["solve", str(spec), "--out", str(tmp_path / "r.json"), "--quiet"]) == 0
    assert main(["report", str(tmp_path / "r.json")]) == 0
    assert "each answer within ±10 at 95%; gets ±10 at 95%" in capsys.readouterr().out
    (tmp_path / "h.csv").write_text("".join(f"{i}\n" for i in range(8)))
    assert main(["release", str(tmp_path / "r.json"), "--data", str(tmp_path / "h.csv"), "--out",
                 str(tmp_path / "a.csv"), "--quiet"]) == 0
    assert ffu.release.release.verify(tmp_path / "a.csv")["target"]["stated"] == "each answer within ±10 at 95%"


def test_product_spec_with_margins_through_the_cli(tmp_path, capsys):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"domain": {"county": 30, "sex": ["F", "M"]}, "groups": [
        {"blocks": {"county": "identity"}, "margin": 50, "level": 0.95, "name": "county totals"},
        {"blocks": {"county": "identity", "sex": "identity"}, "margin": 60, "level": 0.95, "joint": True}]}))
    out = tmp_path / "r.json"
    assert main(["solve", str(spec), "--method", "kron", "--out", str(out), "--quiet"]) == 0
    res = json.loads(out.read_text())
    assert res["accuracy"][0] == {"table": "county totals", "stated": "±50 at 95%",
                                  "achieved": res["accuracy"][0]["achieved"], "met": True}
    assert main(["report", str(out)]) == 0
    report = capsys.readouterr().out
    assert "county totals: asked ±50 at 95%" in report and "all 60 at once" in report
    edited = tmp_path / "edited.json"
    tables = [{**res["accuracy"][0], "stated": "±5 at 95%"}, *res["accuracy"][1:]]
    edited.write_text(json.dumps({**res, "accuracy": tables}))
    assert main(["report", str(edited)]) == 2 and "`accuracy`" in capsys.readouterr().err
    rec = tmp_path / "rec.csv"
    rec.write_text("county,sex\n" + "".join(f"{i % 30},{'FM'[i % 2]}\n" for i in range(300)))
    assert main(["release", str(out), "--records", str(rec), "--out", str(tmp_path / "a.csv"), "--quiet"]) == 0
    doc = ffu.release.release.verify(tmp_path / "a.csv")
    assert doc["groups"][0]["accuracy"]["stated"] == "each answer of 'county totals' within ±50 at 95%"
    assert math.isclose(doc["groups"][1]["accuracy"]["level"], 0.95)
    spec.write_text(json.dumps({"domain": {"c": 3}, "groups": [{"margin": 5}]}))
    assert main(["solve", str(spec), "--method", "kron", "--out", str(tmp_path / "x.json")]) == 2
    assert "`group 0 target`" in capsys.readouterr().err
