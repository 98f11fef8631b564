"""A release keeps its promise: nothing exact in published files, a solution only for its own
workload, answers and statement as one unit (interrupts and concurrent writers included)."""

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx.io import files
from ffu_cvx.cli.cli import main
from ffu_cvx.release.release import sidecar_path, verify


@pytest.fixture(scope="module")
def case():
    dom = ffu.Domain({"age": 6, "sex": ["F", "M"]})
    wl = ffu.workloads.product(dom, [({"age": "identity", "sex": "identity"}, 2.0), ({}, 1.0, "total")])
    sol = ffu.solve(ffu.FitnessProblem.from_workload(wl), method="kron")
    rng = np.random.default_rng(3)
    rec = np.stack([rng.integers(0, n, 300) for n in dom.sizes], axis=1)
    return dom, wl, sol, rec


def _published(folder, names):
    """The published files' JSON/CSV with the noisy answers and what follows from them blanked."""
    out = {}
    for name in names:
        text = (folder / name).read_text()
        if name.endswith(".json"):
            doc = json.loads(text)
            for key in ("answers_sha256", "created_utc"):
                doc.pop(key, None)
            out[name] = doc
        else:
            rows = [line.split(",") for line in text.splitlines()]
            head = rows[0]
            noisy = {head.index(c) for c in ("answer", "lower", "upper", "postprocessed") if c in head}
            out[name] = [[v if j not in noisy else "*" for j, v in enumerate(r)] for r in rows[1:]] + [head]
    return out


# ---------------------------------------------------------------------------- nothing exact
def test_neighbouring_records_publish_the_same_files_but_the_noisy_answers(case, tmp_path):
    dom, wl, sol, rec = case
    docs = []
    for name, records in (("all", rec), ("less", rec[1:])):
        folder = tmp_path / name
        folder.mkdir()
        ffu.release_product(sol, wl, records, rng=1).postprocess(nonnegative=True).to_csv(folder / "a.csv")
        docs.append(_published(folder, ["a.csv", "a.privacy.json"]))
        assert "records" not in json.dumps(docs[-1]["a.privacy.json"])
    assert docs[0] == docs[1]


@pytest.mark.parametrize("source", ["records", "data"])
def test_cli_neighbouring_releases_differ_only_in_the_noisy_answers(tmp_path, capsys, source):
    spec = {"domain": {"age": 4, "sex": ["F", "M"]},
            "groups": [{"blocks": {"age": "identity", "sex": "identity"}, "variance": 2.0}, {"variance": 1.0}]}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    method = "kron" if source == "records" else "sdp"
    assert main(["solve", str(tmp_path / "s.json"), "--method", method, "--out", str(tmp_path / "r.json"),
                 "--quiet"]) == 0
    rows = [(a, s) for a in range(4) for s in "FM" for _ in range(a + 2)]
    docs = []
    for name, data in (("all", rows), ("less", rows[1:])):
        folder = tmp_path / name
        folder.mkdir()
        if source == "records":
            (folder / "in.csv").write_text("age,sex\n" + "".join(f"{a},{s}\n" for a, s in data))
        else:
            hist = np.zeros(8, dtype=int)
            for a, s in data:
                hist[2 * a + "FM".index(s)] += 1
            (folder / "in.csv").write_text("".join(f"{c}\n" for c in hist))
        args = ["release", str(tmp_path / "r.json"), f"--{source}", str(folder / "in.csv"), "--out",
                str(folder / "a.csv"), "--seed", "4"]
        assert main(args) == 0
        err = capsys.readouterr().err
        assert "confidential" not in err and f" {len(data)} " not in err  # no exact count on the terminal
        docs.append(_published(folder, ["a.csv", "a.privacy.json"]))
    assert docs[0] == docs[1]


# ---------------------------------------------------------------------------- bound to its problem
def test_a_solution_is_released_only_for_its_own_workload(case):
    dom, wl, sol, rec = case
    # Same sizes, other queries: age prefixes instead of single ages.
    other = ffu.workloads.product(dom, [({"age": "prefix", "sex": "identity"}, 2.0), ({}, 1.0, "total")])
    assert other.m == wl.m
    with pytest.raises(ValueError, match="group 0 .* other queries on attribute 'age'"):
        ffu.release_product(sol, other, rec, rng=0)
    # Same queries, other targets.
    looser = ffu.workloads.product(dom, [({"age": "identity", "sex": "identity"}, 2.0), ({}, 4.0, "total")])
    with pytest.raises(ValueError, match="group 1 .* has target 4.0"):
        ffu.release_product(sol, looser, rec, rng=0)
    # A dense solution of the other workload, and its mechanism.
    dense = ffu.solve(ffu.FitnessProblem.from_workload(other).dense(), method="sdp")
    for src in (dense, ffu.GaussianMechanism(dense)):
        with pytest.raises(ValueError, match="other queries"):
            ffu.release_product(src, wl, rec, rng=0)
    assert sol.fingerprint == ffu.model.fingerprint.of(wl) != ffu.model.fingerprint.of(other)


@pytest.mark.parametrize("key, value, needle", [("variance", 0.5, "the spec's queries or targets are not those"),
                                                 ("blocks", {"age": "prefix"}, "the spec's queries or targets")])
def test_cli_refuses_a_result_whose_spec_was_edited(tmp_path, capsys, key, value, needle):
    spec = {"domain": {"age": 4}, "groups": [{"blocks": {"age": "identity"}, "variance": 2.0}]}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    assert main(["solve", str(tmp_path / "s.json"), "--method", "sdp", "--out", str(tmp_path / "r.json"),
                 "--quiet"]) == 0
    res = json.loads((tmp_path / "r.json").read_text())
    res["spec"]["groups"][0][key] = value  # same number of queries, other queries or targets
    (tmp_path / "r.json").write_text(json.dumps(res))
    (tmp_path / "rec.csv").write_text("age\n0\n1\n")
    code = main(["release", str(tmp_path / "r.json"), "--records", str(tmp_path / "rec.csv"), "--out",
                 str(tmp_path / "a.csv")])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "a.csv").exists() and not (tmp_path / "a.privacy.json").exists()


# ---------------------------------------------------------------------------- one unit
def test_to_csv_refuses_before_writing_anything(case, tmp_path):
    dom, wl, sol, rec = case
    people = tmp_path / "people.csv"
    people.write_text("age,sex\n" + "".join(f"{a},{'FM'[s]}\n" for a, s in rec))
    rel = ffu.release_product(sol, wl, people, rng=0)
    before = people.read_bytes()
    for overwrite in (False, True):
        with pytest.raises(ValueError, match="same file as the records"):
            rel.to_csv(people, overwrite=overwrite)
    assert people.read_bytes() == before
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(ValueError, match="is a directory"):
        rel.to_csv(tmp_path / "dir.csv")
    with pytest.raises(ValueError, match="name of a privacy statement"):
        rel.to_csv(tmp_path / "other.privacy.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.csv", "people.csv"]
    out, side = rel.to_csv(tmp_path / "a.csv")
    with pytest.raises(ValueError, match="exists; .* overwrite=True"):
        rel.to_csv(out)
    readonly = tmp_path / "ro.csv"
    readonly.write_text("keep")
    readonly.chmod(0o444)
    with pytest.raises(ValueError, match="read-only") as info:
        rel.to_csv(readonly, overwrite=True)
    assert ".tmp" not in str(info.value) and readonly.read_text() == "keep"
    again = ffu.release_product(sol, wl, rec, rng=5)
    again.to_csv(out, overwrite=True)
    assert verify(out)["answers_sha256"].startswith("sha256:")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_verify_tells_a_pair_from_two_releases(case, tmp_path):
    _, wl, sol, rec = case
    a, _ = ffu.release_product(sol, wl, rec, rng=0).to_csv(tmp_path / "a.csv")
    b, _ = ffu.release_product(sol, wl, rec, rng=1).to_csv(tmp_path / "b.csv")
    a.write_bytes(b.read_bytes())  # another release's answers beside a's statement
    with pytest.raises(ValueError, match="digest differs"):
        verify(a)


def _interrupt_after(delay: float) -> threading.Timer:
    timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_interrupted_releases_never_part_answers_from_their_statement(case, tmp_path):
    _, wl, sol, rec = case
    releases = [ffu.release_product(sol, wl, rec, rng=s) for s in range(4)]
    out = tmp_path / "a.csv"
    releases[0].to_csv(out)
    rnd = random.Random(0)
    interrupted = 0
    for i in range(100):
        try:
            with files.signals_unwind():
                timer = _interrupt_after(rnd.uniform(0.0, 0.004))
                try:
                    releases[i % 4].to_csv(out, overwrite=True)
                finally:
                    timer.join()  # the signal is sent inside the block whenever it lands
                    time.sleep(0.05)  # and handled here at the latest
        except KeyboardInterrupt:
            interrupted += 1
        verify(out)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "a.privacy.json"]
    assert interrupted == 100


def test_concurrent_releases_to_one_path_leave_one_whole_release(case, tmp_path):
    _, wl, sol, rec = case
    releases = [ffu.release_product(sol, wl, rec, rng=s) for s in range(2)]
    for r in range(30):
        out = tmp_path / f"r{r}.csv"
        barrier = threading.Barrier(2)

        def write(rel):
            barrier.wait()
            rel.to_csv(out, overwrite=True)

        threads = [threading.Thread(target=write, args=(rel,)) for rel in releases]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        verify(out)
    assert len(list(tmp_path.iterdir())) == 60


def test_cli_release_refuses_to_overwrite_without_the_flag(tmp_path, capsys):
    spec = {"domain": {"age": 4}, "groups": [{"blocks": {"age": "identity"}, "variance": 2.0}]}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    assert main(["solve", str(tmp_path / "s.json"), "--method", "kron", "--out", str(tmp_path / "r.json"),
                 "--quiet"]) == 0
    (tmp_path / "rec.csv").write_text("age\n0\n1\n")
    args = ["release", str(tmp_path / "r.json"), "--records", str(tmp_path / "rec.csv"), "--out",
            str(tmp_path / "a.csv"), "--quiet"]
    assert main(args) == 0
    first = (tmp_path / "a.csv").read_bytes()
    capsys.readouterr()
    assert main(args) == 2 and "--overwrite" in capsys.readouterr().err
    assert (tmp_path / "a.csv").read_bytes() == first
    assert main(args + ["--overwrite"]) == 0 and (tmp_path / "a.csv").read_bytes() != first
    verify(tmp_path / "a.csv")
    assert sidecar_path(tmp_path / "a.csv").exists()


# ---------------------------------------------------------------------------- Problem 2 everywhere
EXAMPLES = __import__("pathlib").Path(__file__).resolve().parents[1] / "examples"


def test_problem2_of_a_structured_solution_matches_the_dense_one():
    wl = ffu.io.specfile.product_workload(json.loads((EXAMPLES / "people_product.json").read_text()),
                                         EXAMPLES / "people_product.json")
    kron = ffu.release.mechanism.problem2(ffu.solve(wl.to_problem(), method="kron", tol=1e-8), 1.0, 1e-6)
    dense = ffu.release.mechanism.problem2(wl.to_problem().dense(), 1.0, 1e-6, method="sdp")
    assert kron.k == pytest.approx(dense.k, rel=1e-5) and kron.k_lower_bound <= dense.k * (1 + 1e-6)
    assert not kron.met and "cannot all be met" in kron.summary and f"{kron.k:.4g}" in kron.summary
    assert kron.solution.privacy_cost == pytest.approx(kron.privacy_cost, rel=1e-12)
    assert ffu.release.mechanism.problem2(kron.solution, 20.0, 1e-6).met


@pytest.mark.parametrize("method", ["kron", "auto"])
def test_cli_product_spec_with_a_privacy_target(tmp_path, capsys, method):
    out = tmp_path / "r.json"
    assert main(["solve", str(EXAMPLES / "people_product.json"), "--method", method, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    res = json.loads(out.read_text())
    assert res["kind"] == "structured" and res["target"]["met"] is False and res["max_ratio"] > 11
    assert "warning: At (1, 1e-06)-DP the targets cannot all be met" in err
    assert main(["report", str(out)]) == 0
    report = capsys.readouterr().out
    assert "0/10 queries within their targets" in report and "targets MISSED by up to a factor 12.88" in report
    answers = tmp_path / "a.csv"
    assert main(["release", str(out), "--records", str(EXAMPLES / "people_records.csv"), "--out", str(answers),
                 "--quiet"]) == 0
    doc = verify(answers)
    # the target holds in the release's own (OpenDP) accounting, within its allowances
    assert 1.0 - 1e-4 <= doc["epsilon"] <= 1.0 + 1e-9 and doc["accuracy"]["met"] is False
    assert "Only 0 of 10 answers meet their variance targets" in doc["text"]
    assert [g["meets_target"] for g in doc["groups"]] == [False, False, False]


@pytest.mark.parametrize("field, value, needle", [
    ("epsilon", 2.0, "`epsilon`"), ("rho", 0.001, "`rho`"), ("status", "optimal_inaccurate", "`status`"),
    ("neighbours", "replace one record", "`neighbours`"), ("max_ratio", 1.0, "`max_ratio`"),
    ("schema_version", 2, "schema_version"), ("fingerprint", "sha256:00", "`fingerprint`"),
    ("certificate", {"lower_bound": 1.0, "gap": 0.0}, "`certificate.lower_bound`"),
    ("target", {"epsilon": 1.0, "delta": 1e-6, "k": 1.0, "k_lower_bound": 1.0, "met": True}, "`target.k`"),
])
def test_an_edited_structured_result_is_refused(tmp_path, capsys, field, value, needle):
    out = tmp_path / "r.json"
    assert main(["solve", str(EXAMPLES / "people_product.json"), "--method", "kron", "--out", str(out),
                 "--quiet"]) == 0
    res = json.loads(out.read_text())
    res[field] = value
    out.write_text(json.dumps(res))
    capsys.readouterr()
    for command in (["report", str(out)], ["release", str(out), "--records", str(EXAMPLES / "people_records.csv"),
                                           "--out", str(tmp_path / "a.csv"), "--quiet"]):
        assert main(command) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert needle in err[-1] and err[-1].startswith("ffu-cvx: error: result")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


# ---------------------------------------------------------------------------- the same through the CLI
def _cli(*args) -> subprocess.Popen:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=str(EXAMPLES.parent))
    return subprocess.Popen([sys.executable, "-m", "ffu_cvx.cli.cli", *map(str, args)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_cli_releases_interrupted_or_concurrent_stay_whole(tmp_path):
    result = tmp_path / "r.json"
    assert _cli("solve", EXAMPLES / "people_product.json", "--method", "kron", "--out", result).wait() == 0
    release = ("release", result, "--records", EXAMPLES / "people_records.csv", "--overwrite")
    out = tmp_path / "a.csv"
    assert _cli(*release, "--out", out).wait() == 0
    rnd = random.Random(1)
    for _ in range(12):
        proc = _cli(*release, "--out", out)
        proc.stderr.readline()  # the command is running (imports done)
        time.sleep(rnd.uniform(0.0, 0.1))
        proc.send_signal(signal.SIGINT)
        # 130: stopped; 0: done first; -SIGINT: the signal came while the interpreter shut down, after the command
        assert proc.wait(timeout=120) in (0, 130, -signal.SIGINT), proc.stderr.read()
        verify(out)
    for r in range(4):
        both = [_cli(*release, "--out", tmp_path / f"c{r}.csv") for _ in range(2)]
        assert [p.wait(timeout=120) for p in both] == [0, 0]
        verify(tmp_path / f"c{r}.csv")
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_release_over_a_hundred_attributes():
    dom = ffu.Domain({f"a{i}": 2 for i in range(100)})
    wl = ffu.workloads.product(dom, [({f"a{i}": "identity"}, 1.0) for i in range(100)])
    sol = ffu.solve(wl.to_problem(), method="kron")
    rec = np.random.default_rng(0).integers(0, 2, (500, 100))
    draws = np.array([ffu.release_product(sol, wl, rec, rng=s, coverage_draws=0).answers for s in range(60)])
    exact = wl.apply(dom.counts(rec))
    assert draws.shape == (60, 200) and np.all(np.abs(draws.mean(axis=0) - exact) < 5 * np.sqrt(sol.variances / 60))
    np.testing.assert_allclose(draws.var(axis=0).mean(), sol.variances.mean(), rtol=0.1)


def test_an_error_a_swallowed_signal_caused_ends_as_the_signal(monkeypatch):
    """A library that turns the KeyboardInterrupt of a Ctrl-C into another error (numpy comparing
    structured arrays does) must not make the command report bad input: it ends as interrupted."""
    import argparse
    from ffu_cvx.cli import cli
    from ffu_cvx.io import files

    def command(args, run):
        raise ValueError("Cannot compare structured arrays unless they have a common dtype")
    monkeypatch.setattr(files, "_RECEIVED", {signal.SIGINT})
    assert cli._run_command(argparse.Namespace(func=command, quiet=True)) == cli.EXIT_INTERRUPTED
    monkeypatch.setattr(files, "_RECEIVED", set())
    assert cli._run_command(argparse.Namespace(func=command, quiet=True)) == cli.EXIT_BAD_INPUT
