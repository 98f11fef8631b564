"""Release from records (any noise source), self-describing releases: statement, CSV + sidecar, frame."""

import csv
import json
import math

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx.model import privacy
from ffu_cvx.release.noise import FLOAT_RTOL
from ffu_cvx.release.product_release import release_product
from ffu_cvx.release.release import Release, sidecar_path


@pytest.fixture(scope="module")
def case():
    dom = ffu.Domain({"age": 8, "sex": ["F", "M"], "region": ["N", "S", "E"]})
    wl = ffu.workloads.product(dom, [({"age": {"bands": 4}, "sex": "identity"}, 4.0),
                                     ({"region": "identity"}, 2.0, "per region"), ({}, 1.0, "total")])
    sol = ffu.solve(ffu.FitnessProblem.from_workload(wl).dense(), method="sdp")
    rng = np.random.default_rng(11)
    rec = np.stack([rng.integers(0, n, 200) for n in dom.sizes], axis=1)
    return dom, wl, sol, rec


def test_dense_solution_gives_the_gaussian_mechanism_answers(case):
    dom, wl, sol, rec = case
    counts = dom.counts(rec)
    rel = release_product(sol, wl, counts, rng=5, level=0.9)
    ref = ffu.GaussianMechanism(sol).release(counts.dense(), rng=5, level=0.9)
    np.testing.assert_allclose(rel.answers, ref.answers, rtol=1e-12, atol=1e-9)  # same noise, same answers
    np.testing.assert_allclose(rel.variances, ref.variances, rtol=1e-12)
    np.testing.assert_allclose(rel.upper - rel.answers, 1.6448536269514722 * np.sqrt(rel.variances), rtol=1e-12)
    assert rel.privacy_cost == pytest.approx(sol.privacy_cost, rel=1e-9)
    assert list(rel.labels)[:2] == ["age 0-3 × sex F", "age 0-3 × sex M"] and rel.labels[-1] == "total"
    assert rel.group_names == ("age bands x sex identity", "per region", "total")
    assert "records" not in rel.info and rel.info["domain"]["region"] == ["N", "S", "E"]
    # The same records as codes, a CSV-like mapping or a dense histogram give the same release.
    again = release_product(sol, wl, rec, rng=5, level=0.9)
    np.testing.assert_array_equal(again.answers, rel.answers)
    from_hist = release_product(ffu.GaussianMechanism(sol), wl, counts.dense(), rng=5, level=0.9)
    np.testing.assert_allclose(from_hist.answers, rel.answers, rtol=1e-13)


class StandIn:
    """A structured solution's release interface: independent noise with known variances."""

    method = "stand-in"

    def __init__(self, variances, privacy_cost, fingerprint=None):
        self.variances, self.privacy_cost = np.asarray(variances, dtype=float), privacy_cost
        self.fingerprint = fingerprint

    def sample_answer_noise(self, rng):
        return np.sqrt(self.variances) * rng.standard_normal(self.variances.size)


def test_any_noise_source_with_the_interface(case):
    dom, wl, _, rec = case
    standin = StandIn(np.linspace(1.0, 3.0, wl.m), 0.8, ffu.model.fingerprint.of(wl))
    counts = dom.counts(rec)
    draws = np.array([release_product(standin, wl, counts, rng=s).answers for s in range(2000)])
    exact = wl.apply(counts)
    np.testing.assert_allclose(draws.mean(axis=0), exact, atol=5 * np.sqrt(3.0 / 2000))
    np.testing.assert_allclose(draws.var(axis=0), standin.variances, rtol=0.15)
    rel = release_product(standin, wl, counts, rng=1, delta=1e-9)
    assert rel.privacy_cost == 0.8 and rel.statement_delta == 1e-9
    # seeded: numpy's sampler, the exact Gaussian at the sensitivity plus the float allowance
    assert rel.epsilon() == pytest.approx(privacy.gaussian_epsilon(1e-9, math.sqrt(0.8) * (1 + FLOAT_RTOL)), rel=1e-12)
    assert "'stand-in'" in rel.mechanism and rel.neighbours == privacy.ADD_REMOVE


@pytest.mark.parametrize("bad, needle", [
    ("wrong variances", "variances` have shape"),
    ("wrong noise", "sample_answer_noise returned shape"),
    ("no privacy cost", "has no `privacy_cost`"),
    ("no fingerprint", "does not say which workload"),
    ("other fingerprint", "its fingerprint"),
    ("other workload", "is for"),
    ("not a mechanism", "must be a Solution"),
])
def test_mismatched_noise_sources_are_refused(case, bad, needle):
    dom, wl, sol, rec = case
    mark = ffu.model.fingerprint.of(wl)
    if bad == "wrong variances":
        src = StandIn(np.ones(wl.m + 1), 1.0, mark)
    elif bad == "wrong noise":
        src = StandIn(np.ones(wl.m), 1.0, mark)
        src.sample_answer_noise = lambda rng: np.zeros(3)
    elif bad == "no privacy cost":
        src = StandIn(np.ones(wl.m), 1.0, mark)
        del src.privacy_cost
    elif bad == "no fingerprint":
        src = StandIn(np.ones(wl.m), 1.0)
    elif bad == "other fingerprint":
        src = StandIn(np.ones(wl.m), 1.0, ffu.model.fingerprint.of(ffu.workloads.product(dom, [({}, 1.0)])))
    elif bad == "other workload":
        src = ffu.solve(ffu.FitnessProblem.from_workload(ffu.workloads.prefix(4)), method="sdp")
    else:
        src = {"sigma": np.eye(2)}
    with pytest.raises(ValueError, match=needle):
        release_product(src, wl, rec, rng=0)


def test_statement_files_and_post_processing(case, tmp_path):
    dom, wl, sol, rec = case
    rel = release_product(sol, wl, rec, rng=2, delta=1e-5).postprocess(nonnegative=True, round=True)
    assert np.all(rel.postprocessed >= 0) and np.all(rel.postprocessed == np.round(rel.postprocessed))
    np.testing.assert_array_equal(rel.postprocessed, np.round(np.maximum(rel.answers, 0)))
    out, side = rel.to_csv(tmp_path / "answers.csv")
    assert side == tmp_path / "answers.privacy.json" == sidecar_path(out)
    rows = list(csv.DictReader(open(out, newline="", encoding="utf-8")))
    assert list(rows[0]) == ["query", "group", "label", "answer", "variance", "std", "lower", "upper", "postprocessed"]
    assert len(rows) == wl.m and rows[0]["label"] == "age 0-3 × sex F" and rows[-1]["group"] == "total"
    np.testing.assert_array_equal([float(r["answer"]) for r in rows], rel.answers)  # written exactly
    doc = json.loads(side.read_text())
    assert doc["answers_file"] == "answers.csv" and doc["delta"] == 1e-5 and doc["neighbours"] == privacy.ADD_REMOVE
    assert doc["epsilon"] == pytest.approx(privacy.gaussian_epsilon(1e-5, sol.delta_m * (1 + FLOAT_RTOL)), rel=1e-9)
    assert doc["rho_zcdp"] == pytest.approx(sol.privacy_cost * (1 + FLOAT_RTOL) ** 2 / 2, rel=1e-9)
    assert doc["tool"] == {"name": "ffu-cvx", "version": ffu.__version__} and doc["created_utc"].endswith("+00:00")
    assert doc["post_processing"]["column"] == "postprocessed" and len(doc["post_processing"]["steps"]) == 2
    assert "Post-processing (no privacy cost)" in doc["text"] and doc["groups"][1]["name"] == "per region"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["answers.csv", "answers.privacy.json"]  # no temp files
    with pytest.raises(ValueError, match="nonnegative=True and/or round=True"):
        rel.postprocess()


def test_dense_release_carries_its_statement(case):
    _, wl, sol, _ = case
    mech = ffu.GaussianMechanism(sol)
    rel = mech.release(np.ones(wl.d), rng=0, delta=1e-8)
    dm = mech.delta_m * (1 + FLOAT_RTOL)  # seeded: numpy's sampler, exact Gaussian plus the float allowance
    assert rel.epsilon() == pytest.approx(privacy.gaussian_epsilon(1e-8, dm), rel=1e-12)
    assert rel.epsilon(1e-3) == pytest.approx(privacy.gaussian_epsilon(1e-3, dm), rel=1e-12)
    assert rel.rho == pytest.approx(mech.rho * (1 + FLOAT_RTOL) ** 2)
    st = rel.statement()
    assert st["post_processing"] is None and st["mechanism"] == mech.description and st["queries"] == wl.m
    assert f"{rel.epsilon():.6g}" in st["text"] and privacy.ADD_REMOVE in st["text"]
    assert rel.groups is None and b"group" not in rel.csv_bytes().splitlines()[0]
    free = ffu.release.mechanism.free_query(sol, np.ones(wl.d))
    assert isinstance(free, ffu.release.mechanism.FreeQuery)


def test_to_frame(case):
    pd = pytest.importorskip("pandas")
    _, wl, sol, rec = case
    rel = release_product(sol, wl, rec, rng=4).postprocess(round=True)
    frame = rel.to_frame()
    assert isinstance(frame, pd.DataFrame) and len(frame) == wl.m
    assert list(frame.columns) == ["query", "group", "label", "answer", "variance", "std", "lower", "upper",
                                   "postprocessed"]
    np.testing.assert_array_equal(frame["answer"].to_numpy(), rel.answers)
    assert frame.attrs["privacy"]["epsilon"] == rel.epsilon() and frame["label"].iloc[-1] == "total"


def test_release_is_a_frozen_value():
    rel = Release(answers=np.ones(2), variances=np.ones(2), lower=np.zeros(2), upper=2 * np.ones(2), level=0.95,
                  labels=("a", "b"), privacy_cost=1.0)
    with pytest.raises(AttributeError):
        rel.privacy_cost = 2.0
    assert rel.statement()["epsilon"] == pytest.approx(privacy.gaussian_epsilon(1e-6, 1.0), rel=1e-12)
