"""Every mechanism's release has one interface: answers, variances, intervals, statement, CSV + statement
written as one unit, a frame, and verify on its files (dense Gaussian, product, Fourier, PML Laplace)."""

import csv
import dataclasses
import json
import math
import sys

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx import pml
from ffu_cvx.model import privacy
from ffu_cvx.release.release import LaplaceAccount, Release, check_statement, sidecar_path, verify

MECHANISMS = ("dense", "product", "fourier", "laplace")
X = np.array([5, 3, 0, 2, 7, 1, 1, 9])


@pytest.fixture(scope="module")
def make():
    """``{name: rng -> Release}`` for the four mechanisms (seeded: numpy's samplers)."""
    prefix = ffu.GaussianMechanism(ffu.solve(ffu.FitnessProblem.from_workload(ffu.workloads.prefix(8)),
                                             method="sdp"))
    dom = ffu.Domain({"age": 4, "sex": ["F", "M"]})
    wl = ffu.workloads.product(dom, [({"age": "identity", "sex": "identity"}, 2.0), ({}, 1.0, "total")])
    sol = ffu.solve(ffu.FitnessProblem.from_workload(wl), method="kron")
    records = np.stack([np.random.default_rng(3).integers(0, n, 100) for n in dom.sizes], axis=1)
    fourier = ffu.fourier.max_optimal(ffu.fourier.MarginalWorkload.from_targets((4, 2), {(0, 1): 1.0, (0,): 2.0}))
    return {"dense": lambda rng: prefix.release(X, rng=rng),
            "product": lambda rng: ffu.release_product(sol, wl, records, rng=rng),
            "fourier": lambda rng: fourier.release(records, rng=rng),
            "laplace": lambda rng: pml.laplace_release(X, 1.0, 0.05, W=pml.differences(8), rng=rng,
                                                       labels=[f"x{j} - x{j + 1}" for j in range(7)])}


@pytest.mark.parametrize("name", MECHANISMS)
def test_release_to_csv_verify_round_trip(make, name, tmp_path):
    rel = make[name](1)
    assert isinstance(rel, Release) and rel.answers.shape == rel.variances.shape == (rel.m,)
    np.testing.assert_allclose(rel.upper - rel.lower, 2 * (rel.answers - rel.lower))
    lower, upper = rel.interval(0.5)
    assert np.all(rel.lower < lower) and np.all(upper < rel.upper)  # narrower at a lower level
    assert rel.interval() == (rel.lower, rel.upper)
    out, side = rel.to_csv(tmp_path / "a.csv")
    doc = verify(out)
    assert doc == json.loads(side.read_text()) and doc["queries"] == rel.m and doc["answers_file"] == "a.csv"
    assert doc["epsilon"] == pytest.approx(rel.epsilon()) and doc["rho_zcdp"] == pytest.approx(rel.rho)
    rows = list(csv.DictReader(open(out, newline="", encoding="utf-8")))
    np.testing.assert_array_equal([float(r["answer"]) for r in rows], rel.answers)  # written exactly
    np.testing.assert_array_equal([float(r["upper"]) for r in rows], rel.upper)
    assert rel.statement()["text"] == doc["text"]
    pytest.importorskip("pandas")
    frame = rel.to_frame()
    assert list(frame.columns) == list(rows[0]) and frame.attrs["privacy"]["epsilon"] == doc["epsilon"]


@pytest.mark.parametrize("name", MECHANISMS)
def test_to_csv_refuses_an_input_and_another_release_statement(make, name, tmp_path):
    first = make["laplace" if name != "laplace" else "dense"](2)
    _, side = first.to_csv(tmp_path / "a.csv")
    data = tmp_path / "data.csv"
    data.write_text("kept")
    rel = dataclasses.replace(make[name](3), inputs={"records": data})
    for overwrite in (False, True):
        with pytest.raises(ValueError, match="same file as the records"):
            rel.to_csv(data, overwrite=overwrite)
        with pytest.raises(ValueError, match="name of a privacy statement"):
            rel.to_csv(side, overwrite=overwrite)
    with pytest.raises(ValueError, match=r"privacy statement .*a\.privacy\.json exists"):
        rel.to_csv(tmp_path / "a.txt")  # a free answers name whose statement would be the other release's
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "a.privacy.json", "data.csv"]
    assert data.read_text() == "kept" and verify(tmp_path / "a.csv")["mechanism"] == first.mechanism


@pytest.mark.parametrize("name", MECHANISMS)
def test_an_edited_statement_fails_verify(make, name, tmp_path):
    out, side = make[name](4).to_csv(tmp_path / "a.csv")
    doc = json.loads(side.read_text())
    edits = [lambda d: d.update(epsilon=d["epsilon"] * 0.5), lambda d: d.update(rho_zcdp=d["rho_zcdp"] * 0.5),
             lambda d: d.update(text=d["text"].replace(f"{d['epsilon']:.6g}", "0.01"))]
    if name == "laplace":
        edits += [lambda d: d["noise"].update(scale=d["noise"]["scale"] * 2),
                  lambda d: d["noise"].update(leakage=d["noise"]["leakage"] * 0.5),
                  lambda d: d["noise"].update(alpha=d["noise"]["alpha"] * 2),
                  lambda d: d.update(delta=1e-6), lambda d: d["noise"].pop("bound")]
    for edit in edits:
        bad = json.loads(json.dumps(doc))
        edit(bad)
        side.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match="edited|malformed"):
            verify(out)


def test_laplace_intervals_cover_their_level():
    """200 releases of the 8-cell histogram: the share of answers inside their interval is the level."""
    for level in (0.5, 0.9):
        hits = [np.mean((r.lower <= X) & (X <= r.upper))
                for r in (pml.laplace_release(X, 1.0, 0.05, rng=seed, level=level) for seed in range(200))]
        assert np.mean(hits) == pytest.approx(level, abs=4 * math.sqrt(level * (1 - level) / 1600))


def test_laplace_statement_is_pure_dp_and_states_the_leakage():
    rel = pml.laplace_release(X, 1.0, 0.05, W=pml.differences(8), rng=0, neighbours=privacy.ADD_REMOVE)
    acc = rel.noise
    assert isinstance(acc, LaplaceAccount) and rel.distribution == "laplace" and acc.bound == "safe"
    st = rel.statement(delta=1e-3)
    assert st["delta"] == 0 and st["epsilon"] == pytest.approx(2 / acc.scale) == rel.epsilon(1e-9)
    assert st["rho_zcdp"] == pytest.approx(st["epsilon"] ** 2 / 2) and st["delta_m"] == pytest.approx(st["epsilon"])
    assert acc.leakage <= acc.pml_epsilon == 1.0 and acc.pml_sensitivity == 4.0 and acc.sensitivity == 2.0
    assert f"at most {acc.leakage:.6g} nats" in st["text"] and "pure: delta = 0" in st["text"]
    np.testing.assert_allclose(rel.upper - rel.answers, acc.scale * math.log(20))
    check_statement(json.loads(rel.statement_bytes("a.csv")))
    with pytest.warns(pml.NoNoiseNeededWarning):
        exact = pml.laplace_release(X, 3.0, 0.05, rng=0)
    doc = json.loads(exact.statement_bytes("a.csv"))
    assert doc["epsilon"] is None and "not differentially private" in doc["text"]
    check_statement(doc)


def test_fourier_release_groups_tables_and_marginals(make):
    rel = make["fourier"](5)
    assert rel.group_names == ("A=(0, 1)", "A=(0,)") and [t.shape for t in rel.tables] == [(4, 2), (4,)]
    np.testing.assert_allclose(rel.tables[0].sum(axis=1), rel.tables[1], atol=1e-9)  # consistent
    np.testing.assert_array_equal(rel.tables[1], rel.marginals[(0,)])
    assert list(rel.labels)[:2] == ["(0, 0)", "(0, 1)"] and rel.labels[-1] == "(3,)" and len(rel.labels) == 12
    assert rel.statement()["accuracy"]["met"] and sidecar_path("x.csv").name == "x.privacy.json"


def test_to_frame_without_pandas_names_the_extra(make, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"pip install pandas \(or ffu-cvx\[pandas\]\)"):
        make["laplace"](6).to_frame()
