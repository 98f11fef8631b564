"""A release speaks of its targets as they were given, and gives a joint target simultaneous intervals."""

import csv
import io

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx.model import accuracy

COUNTIES = 40


@pytest.fixture(scope="module")
def joint_release():
    dom = ffu.Domain({"county": COUNTIES, "sex": ["F", "M"]})
    wl = ffu.workloads.product(dom, [
        ({"county": "identity"}, {"margin": 50, "level": 0.95, "joint": True}, "county totals"),
        ({"county": "identity", "sex": "identity"}, {"margin": 60, "level": 0.9}, "county x sex")])
    sol = ffu.solve(wl.to_problem(), method="kron", tol=1e-8)
    return wl, sol, ffu.release_product(sol, wl, np.zeros(wl.d), rng=0, sampler="numpy")


def test_a_joint_target_gets_simultaneous_interval_columns(joint_release):
    wl, _, rel = joint_release
    rows = list(csv.DictReader(io.StringIO(rel.csv_bytes().decode())))
    joint, single = rows[:COUNTIES], rows[COUNTIES:]
    assert all(r["target"] == f"all {COUNTIES} within ±50 at once at 95%: joint_lower, joint_upper" for r in joint)
    assert all(r["target"] == "±60 at 90%" and r["joint_lower"] == r["joint_upper"] == "" for r in single)
    goal = wl.groups[0].accuracy
    z = accuracy.z_value(0.95 ** (1 / COUNTIES))
    for r in joint:
        half = float(r["joint_upper"]) - float(r["answer"])
        assert half == pytest.approx(z * float(r["std"]), rel=1e-12) and half <= goal.margin * (1 + 1e-6)
        assert float(r["answer"]) - float(r["joint_lower"]) == pytest.approx(half, rel=1e-12)
        assert half > float(r["upper"]) - float(r["answer"])  # wider than each answer's own 95% interval
    statement = rel.statement()
    assert statement["joint_intervals"]["columns"] == ["joint_lower", "joint_upper"]
    assert "joint_lower and joint_upper hold for all of their table at once" in statement["text"]
    frame_cols = rel._columns()
    assert frame_cols.index("joint_lower") == frame_cols.index("target") + 1


def test_the_joint_intervals_hold_at_once(joint_release):
    wl, sol, rel = joint_release
    lo, hi = wl.offsets[0], wl.offsets[1]
    half = (rel.joint_interval[1] - rel.answers)[lo:hi]
    cov = accuracy.joint_coverage(lambda gen: sol.sample_answer_noise(gen)[lo:hi], half, draws=1000, rng=3)
    assert cov.high >= 0.95 and cov.rate >= 0.92, cov.text()
    own = (rel.upper - rel.answers)[lo:hi]  # each answer's own 95% interval: far from simultaneous
    assert accuracy.joint_coverage(lambda gen: sol.sample_answer_noise(gen)[lo:hi], own, draws=300, rng=4).rate < 0.5


def test_without_a_joint_target_there_are_no_joint_columns():
    rel = ffu.GaussianMechanism(ffu.solve(ffu.FitnessProblem.from_workload(ffu.workloads.prefix(4)))).release(
        np.arange(4.0), rng=0, sampler="numpy")
    assert rel.joint_interval is None and "joint_lower" not in rel.csv_bytes().decode().splitlines()[0]
    assert rel.statement()["joint_intervals"] is None


@pytest.mark.parametrize("kinds, words", [
    ((), "All 3 answers meet their variance targets (worst variance/target 1)."),
    (("variance",), "All 3 answers meet their variance targets (worst variance/target 1)."),
    (("margin",), "All 3 answers meet their margins of error at their confidence levels (worst variance/the "
                  "variance its target allows 1)."),
    (("joint", "margin"), "All 3 answers meet their margins of error at their confidence levels and joint margins "
                          "of error (every answer of a table at once) (worst variance/the variance its target "
                          "allows 1)."),
])
def test_the_accuracy_sentence_follows_how_the_targets_were_given(kinds, words):
    assert ffu.release.release.accuracy_summary([1.0, 1.0, 1.0], [1.0, 1.0, 1.0], kinds)["text"] == words


def test_a_miss_is_stated_against_what_the_margin_allows():
    text = ffu.release.release.accuracy_summary([2.0, 1.0], [1.0, 1.0], ["margin"])["text"]
    assert text == ("Only 1 of 2 answers meet their margins of error at their confidence levels: the worst variance "
                    "is 2 times what its target allows.")
    with pytest.raises(ValueError, match="target kinds"):
        accuracy.targets_phrase(["margins"])
