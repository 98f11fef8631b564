"""The privacy ledger: budgets composed in zCDP, refusals before writing, concurrent and
interrupted writers, and tampering detected."""

import json
import multiprocessing
import os
import random
import signal
import time

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx.model import privacy
from ffu_cvx.cli.cli import main
from ffu_cvx.release.ledger import Ledger
from ffu_cvx.release.release import sidecar_path, verify


@pytest.fixture(scope="module")
def mech():
    problem = ffu.FitnessProblem.from_workload(ffu.workloads.prefix(8))
    return ffu.GaussianMechanism(ffu.solve(problem, method="sdp"))


X = np.array([4, 0, 7, 1, 12, 3, 0, 9])


def test_budget_is_the_largest_rho_within_epsilon(tmp_path):
    book = Ledger.create(tmp_path / "l.jsonl", epsilon=2.0, delta=1e-6, dataset="people")
    assert privacy.zcdp_epsilon(book.rho_budget, 1e-6) == pytest.approx(2.0, rel=1e-9)
    assert privacy.zcdp_epsilon(book.rho_budget * 1.001, 1e-6) > 2.0
    again = Ledger.open(tmp_path / "l.jsonl")
    assert again.dataset == "people" and again.charges == () and again.spent_epsilon() == 0.0
    with pytest.raises(ValueError, match="exists"):
        Ledger.create(tmp_path / "l.jsonl", epsilon=5.0, delta=1e-6)
    assert Ledger.open(tmp_path / "l.jsonl").epsilon == 2.0


def test_the_release_that_does_not_fit_is_refused_before_writing(mech, tmp_path):
    one = mech.release(X)
    eps_two = privacy.zcdp_epsilon(2 * one.rho, 1e-6)
    book = Ledger.create(tmp_path / "l.jsonl", epsilon=0.5 * (one.epsilon() + eps_two), delta=1e-6)
    one.to_csv(tmp_path / "a.csv", ledger=book)
    doc = verify(tmp_path / "a.csv")
    assert doc["ledger"]["entry"] == 1 and "Charged to the privacy ledger l.jsonl" in doc["text"]
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ValueError, match="does not fit"):
        mech.release(X).to_csv(tmp_path / "b.csv", ledger=tmp_path / "l.jsonl")
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    book = Ledger.open(tmp_path / "l.jsonl")
    assert len(book.charges) == 1 and book.spent_rho == pytest.approx(one.rho)
    assert book.charges[0].answers_sha256 == doc["answers_sha256"]
    assert book.charges[0].digest == doc["ledger"]["entry_digest"]


def test_a_release_is_never_written_over_its_ledger(mech, tmp_path):
    Ledger.create(tmp_path / "l.csv", epsilon=50, delta=1e-6)
    with pytest.raises(ValueError, match="ledger"):
        mech.release(X).to_csv(tmp_path / "l.csv", ledger=tmp_path / "l.csv", overwrite=True)
    assert Ledger.open(tmp_path / "l.csv").charges == ()


@pytest.mark.parametrize("edit", ["number", "delete", "swap", "header", "garbage"])
def test_an_edited_ledger_is_detected(mech, tmp_path, edit):
    path = tmp_path / "l.jsonl"
    Ledger.create(path, epsilon=100, delta=1e-6)
    for name in "abc":
        mech.release(X).to_csv(tmp_path / f"{name}.csv", ledger=path)
    lines = path.read_text().splitlines()
    if edit == "number":
        entry = json.loads(lines[2])
        entry["rho"] /= 10
        lines[2] = json.dumps(entry)
    elif edit == "delete":
        del lines[2]
    elif edit == "swap":
        lines[1], lines[2] = lines[2], lines[1]
    elif edit == "header":
        head = json.loads(lines[0])
        head["epsilon"] = 1000
        lines[0] = json.dumps(head)
    else:
        lines[3] = lines[3][:-5]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"line \d|edited"):
        Ledger.open(path)
    with pytest.raises(ValueError, match=r"line \d|edited"):
        mech.release(X).to_csv(tmp_path / "d.csv", ledger=path)
    assert not (tmp_path / "d.csv").exists()


def _release_many(path, folder, count, seed):
    """One writer: ``count`` releases charged to the ledger ``path`` (run in a child process)."""
    problem = ffu.FitnessProblem.from_workload(ffu.workloads.prefix(8))
    mech = ffu.GaussianMechanism(ffu.Solution.from_sigma(problem, np.eye(problem.k), method="test",
                                                         certify=False))
    for i in range(count):
        mech.release(X, rng=seed * 1000 + i).to_csv(os.path.join(folder, f"r{seed}-{i}.csv"), ledger=path)


def _charges_match_files(path, folder):
    book = Ledger.open(path)
    files = {p.name for p in folder.iterdir() if p.suffix == ".csv"}
    charged = [c.answers_file for c in book.charges]
    assert len(charged) == len(set(charged)) == len(files) and set(charged) == files
    for c in book.charges:
        assert verify(folder / c.answers_file)["ledger"]["entry_digest"] == c.digest
    return book


def _writers(path, out, count: int, seeds, interrupt_after: float | None = None) -> list:
    """Start one writer process per seed (``count`` releases each); SIGINT them all after
    ``interrupt_after`` seconds, if given; wait for them and return their exit codes."""
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_release_many, args=(path, str(out), count, s)) for s in seeds]
    for p in procs:
        p.start()
    if interrupt_after is not None:
        time.sleep(interrupt_after)
        for p in procs:
            os.kill(p.pid, signal.SIGINT)
    for p in procs:
        p.join(60)
    return [p.exitcode for p in procs]


def _ledger_and_folder(tmp_path, epsilon: float):
    Ledger.create(tmp_path / "l.jsonl", epsilon=epsilon, delta=1e-6)
    (tmp_path / "out").mkdir()
    return tmp_path / "l.jsonl", tmp_path / "out"


def test_thirty_concurrent_writers_never_lose_or_double_count(tmp_path):
    path, out = _ledger_and_folder(tmp_path, 1e4)
    assert _writers(path, out, 2, range(30)) == [0] * 30
    book = _charges_match_files(path, out)
    assert len(book.charges) == 60 and [c.index for c in book.charges] == list(range(1, 61))


def test_a_hundred_interrupted_writers_never_lose_or_double_count(tmp_path):
    path, out = _ledger_and_folder(tmp_path, 1e5)
    rng = random.Random(1)
    for batch in range(10):
        codes = _writers(path, out, 1000, range(10 * batch, 10 * batch + 10), 0.05 + 0.2 * rng.random())
        assert None not in codes
    book = _charges_match_files(path, out)
    assert len(book.charges) > 0
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_cli_ledger_create_release_refuse_and_show(mech, tmp_path, capsys):
    spec = tmp_path / "p.json"
    spec.write_text(json.dumps({"workload": "prefix", "params": {"d": 8}}))
    assert main(["solve", str(spec), "--method", "sdp", "--out", str(tmp_path / "r.json"), "--quiet"]) == 0
    (tmp_path / "h.csv").write_text("".join(f"{c}\n" for c in X))
    eps = privacy.zcdp_epsilon(1.5 * mech.release(X).rho, 1e-6)  # one release fits, two do not
    assert main(["ledger", str(tmp_path / "l.jsonl"), "--create", "--epsilon", str(eps)]) == 0
    capsys.readouterr()
    release = ["release", str(tmp_path / "r.json"), "--data", str(tmp_path / "h.csv"), "--ledger",
               str(tmp_path / "l.jsonl"), "--quiet"]
    assert main(release + ["--out", str(tmp_path / "a.csv")]) == 0
    assert main(release + ["--out", str(tmp_path / "b.csv")]) == 2
    assert "does not fit" in capsys.readouterr().err
    assert not (tmp_path / "b.csv").exists() and not sidecar_path(tmp_path / "b.csv").exists()
    assert main(["ledger", str(tmp_path / "l.jsonl")]) == 0
    shown = capsys.readouterr().out
    assert "1 releases" in shown and "prefix" in shown and "a.csv" in shown and "remaining rho" in shown
    assert main(["ledger", str(tmp_path / "none.jsonl")]) == 2
    assert main(["ledger", str(tmp_path / "m.jsonl"), "--create"]) == 2
