"""The experiments' runner and paths: cache, interrupts, quick runs, figures from the results JSON.

Every test writes under its own tmp folder (``experiments.paths.ENV``), never in the clone.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

import tiny_experiment as tiny
from experiments import paths, runner

REPO = Path(__file__).resolve().parent.parent
KEYS = [{"i": i} for i in range(4)]


@pytest.fixture
def out(tmp_path, monkeypatch):
    monkeypatch.setenv(paths.ENV, str(tmp_path))
    monkeypatch.setenv("TINY_LOG", str(tmp_path / "computed.log"))
    for var in ("TINY_SLEEP", "TINY_FAIL"):
        monkeypatch.delenv(var, raising=False)
    tiny.DRAWN.clear()
    return tmp_path


def computed(out) -> list[int]:
    """The cells computed since the last call (read from the tiny experiment's log, then cleared)."""
    log = out / "computed.log"
    done = [int(s) for s in log.read_text().split()] if log.exists() else []
    log.unlink(missing_ok=True)
    return done


def cache_file(key) -> Path:
    return runner.Cache(paths.cache_dir(tiny.NAME)).path(1, key)


def test_rows_results_figures_and_printed_paths(out, capsys):
    rows = tiny.main(["--quiet"])
    assert [(r["i"], r["square"], r["nan"]) for r in rows] == [(i, i * i, None) for i in range(4)]
    assert rows[2]["root"] == pytest.approx(2**0.5, rel=1e-15)
    written = [out / "results" / f"tiny.{ext}" for ext in ("csv", "json", "md")]
    written += [out / "figures" / f"tiny.{ext}" for ext in ("png", "pdf")]
    printed = capsys.readouterr().out.splitlines()
    assert printed == [f"wrote {p}" for p in written]
    data = json.loads(written[1].read_text())
    assert data["rows"] == rows and data["meta"]["quick"] is False and data["meta"]["cell_version"] == 1
    assert "NaN" not in written[1].read_text()  # one JSON encoding: non-finite -> null
    assert tiny.DRAWN == [data]  # the figure was drawn from the JSON as written
    assert written[0].read_text().splitlines()[:2] == ["i,square,root,nan,error", "0,0,0.0,,"]


def test_resume_reads_the_cache_and_force_recomputes(out):
    first = tiny.main(["--quiet"])
    assert computed(out) == [0, 1, 2, 3]
    assert tiny.main(["--quiet"]) == first and computed(out) == []
    assert tiny.main(["--quiet", "--collect"]) == first and computed(out) == []
    assert tiny.main(["--quiet", "--force"]) == first and computed(out) == [0, 1, 2, 3]
    assert tiny.main(["--quiet", "--no-cache", "--cells", "5"])[4]["square"] == 16 and computed(out) == [0, 1, 2, 3, 4]
    assert not cache_file({"i": 4}).exists()  # --no-cache wrote nothing


CORRUPTIONS = {
    "truncated": lambda text: text[: len(text) // 2],
    "empty": lambda text: "",
    "no value": lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "value"}),
    "value null": lambda text: json.dumps({**json.loads(text), "value": None}),
    "not an object": lambda text: "[1, 2, 3]",
    "another cell": lambda text: json.dumps({**json.loads(text), "key": {"i": 99}}),
    "another version": lambda text: json.dumps({**json.loads(text), "version": 0}),
    "not utf-8": lambda text: "\udcff",
}


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_an_unreadable_cache_file_is_a_miss_named_in_a_warning(out, kind):
    first = tiny.main(["--quiet"])
    computed(out)
    bad = cache_file({"i": 2})
    text = CORRUPTIONS[kind](bad.read_text())
    bad.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.warns(runner.CacheWarning, match=re.escape(str(bad))) as seen:
        again = tiny.main(["--quiet"])
    assert len(seen) == 1 and "recomputing that cell" in str(seen[0].message)
    assert again == first and computed(out) == [2]  # that cell alone
    assert json.loads(bad.read_text())["value"]["square"] == 4  # and its file repaired


def test_a_cache_folder_in_place_of_a_file_is_a_miss(out):
    tiny.main(["--quiet", "--cells", "1"])
    bad = cache_file({"i": 0})
    bad.unlink()
    bad.mkdir()
    with pytest.warns(runner.CacheWarning, match=re.escape(str(bad))):
        with pytest.raises(OSError):  # recomputed, then the folder refuses the write
            tiny.main(["--quiet", "--cells", "1"])


def test_failures_are_error_rows_never_cached(out, monkeypatch, capsys):
    monkeypatch.setenv("TINY_FAIL", "1")
    rows = tiny.main(["--quiet"])
    assert rows[1] == {"i": 1, "error": "SolverError: cell 1 failed on purpose"}
    assert "cell 1 failed on purpose" in capsys.readouterr().err
    assert not cache_file({"i": 1}).exists() and cache_file({"i": 2}).exists()
    monkeypatch.delenv("TINY_FAIL")
    computed(out)
    assert tiny.main(["--quiet"])[1]["square"] == 1 and computed(out) == [1]


def test_other_exceptions_propagate_and_keep_the_finished_cells(out):
    def cell(i):
        if i == 2:
            raise RuntimeError("boom")
        return {"v": i}

    args = runner.parser("t").parse_args(["--quiet"])
    with pytest.raises(RuntimeError, match="boom"):
        runner.run_grid("boom", [runner.Cell(k) for k in KEYS], cell, args, version=1,
                        table=runner.Table("t", ("i", "v")))
    assert len(list(paths.cache_dir("boom").iterdir())) == 2
    assert not (out / "results" / "boom.json").exists()


def test_interrupt_in_process_keeps_cells_and_writes_nothing(out, capsys):
    def cell(i):
        if i == 2:
            raise KeyboardInterrupt
        return {"v": i}

    args = runner.parser("t").parse_args([])
    with pytest.raises(SystemExit) as stop:
        runner.run_grid("stop", [runner.Cell(k) for k in KEYS], cell, args, version=1,
                        table=runner.Table("t", ("i", "v")))
    assert stop.value.code == runner.EXIT_INTERRUPTED == 130
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == (f"stop: interrupted; 2 finished cell(s) kept in {paths.cache_dir('stop')}; run the same "
                       "command to resume; no results or figures written")
    assert sorted(p.name for p in out.rglob("*") if p.is_file()) == sorted(
        runner.Cache(paths.cache_dir("stop")).path(1, k).name for k in KEYS[:2])


def test_a_ctrl_c_a_library_swallowed_stops_the_run_at_the_next_write(out, capsys):
    def cell(i):
        if i == 2:  # as CVXPY does with a Ctrl-C during its import of a solver
            try:
                signal.raise_signal(signal.SIGINT)
            except KeyboardInterrupt:
                pass
        return {"v": i}

    args = runner.parser("t").parse_args([])
    with pytest.raises(SystemExit) as stop:
        runner.cli(lambda: runner.run_grid("lost", [runner.Cell(k) for k in KEYS], cell, args, version=1,
                                           table=runner.Table("t", ("i", "v"))))
    assert stop.value.code == 130
    assert "lost: interrupted; 2 finished cell(s) kept" in capsys.readouterr().err.splitlines()[-1]
    assert not (out / "results" / "lost.json").exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _subprocess_env(out, **extra):
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", **extra)
    env[paths.ENV] = str(out)
    return env


def _finished(cache: Path) -> list[Path]:
    """The cache's finished cells: a cell being written is a hidden temporary file until its rename."""
    return sorted(cache.glob("[!.]*.json")) if cache.exists() else []


def test_ctrl_c_stops_the_command_then_a_rerun_resumes(out):
    tiny.main(["--quiet", "--cells", "1"])  # earlier results, which the interrupted run must leave alone
    computed(out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and "cache" not in p.parts}
    cache = paths.cache_dir(tiny.NAME)
    proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "tiny_experiment.py"), "--quiet", "--cells", "6"],
                            env=_subprocess_env(out, TINY_SLEEP="0.4"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(_finished(cache)) < 2 and time.monotonic() < deadline:  # a cell finished in this run
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1 and "interrupted" in stderr
    assert stdout == ""
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and "cache" not in p.parts
            and p.name != "computed.log"} == before  # nothing written, nothing replaced
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]
    kept = {json.loads(p.read_text())["key"]["i"]: json.loads(p.read_text())["value"] for p in _finished(cache)}
    assert 2 <= len(kept) < 6 and sorted(kept) == list(range(len(kept)))
    assert computed(out) == list(range(1, len(kept)))  # cell 0 came from the cache
    rows = tiny.main(["--quiet", "--cells", "6"])
    assert computed(out) == list(range(len(kept), 6))  # resumed: the finished cells were not recomputed
    assert [{k: r[k] for k in ("square", "root", "nan")} for r in rows[: len(kept)]] == [kept[i] for i in sorted(kept)]
    assert rows == tiny.main(["--quiet", "--cells", "6", "--no-cache"])  # identical to a fresh run


@pytest.fixture
def clone(tmp_path, monkeypatch):
    """A stand-in clone: the default folders, with no ``FFU_CVX_EXPERIMENTS_OUT``."""
    monkeypatch.delenv(paths.ENV, raising=False)
    monkeypatch.delenv("TINY_LOG", raising=False)
    monkeypatch.setattr(paths, "REPO", tmp_path)
    tiny.DRAWN.clear()
    return tmp_path


def test_quick_runs_are_kept_apart_from_full_results(clone):
    out = clone / paths.OUT
    tiny.main(["--quiet"])
    full = (out / "results" / "tiny.json").read_bytes()
    figure = (out / "figures" / "tiny.png").read_bytes()
    tiny.main(["--quiet", "--quick"])
    assert (out / "results" / "tiny.json").read_bytes() == full
    assert (out / "figures" / "tiny.png").read_bytes() == figure
    quick = json.loads((out / "results" / "quick" / "tiny.json").read_text())
    assert quick["meta"]["quick"] is True and len(quick["rows"]) == 2
    assert "(--quick" in (out / "results" / "quick" / "tiny.md").read_text().splitlines()[0]
    assert (out / "figures" / "quick" / "tiny.pdf").exists()
    assert sorted(p.name for p in (out / "results" / "cache" / "tiny").iterdir()) == sorted(
        runner.Cache(clone / "x").path(1, k).name for k in KEYS)  # one cache: quick cells are full cells
    assert not (clone / "results").exists() and not (clone / "figures").exists()


def test_update_results_writes_the_committed_folders_and_replots_from_them(clone, capsys):
    tiny.main(["--quiet"])
    tiny.main(["--quiet", "--update-results"])
    data = json.loads((clone / "results" / "tiny.json").read_text())
    assert (clone / "figures" / "tiny.png").exists() and tiny.DRAWN[-1] == data
    assert sorted(p.name for p in clone.iterdir()) == ["figures", paths.OUT, "results"]
    assert not (clone / "results" / "cache").exists()  # the cells came from the output folder's cache
    data["rows"][0]["square"] = 123
    (clone / "results" / "tiny.json").write_text(json.dumps(data))
    capsys.readouterr()
    assert tiny.main(["--replot", "--update-results"])[0]["square"] == 123 and tiny.DRAWN[-1] == data
    assert capsys.readouterr().out.splitlines() == [f"wrote {clone / 'figures' / f'tiny.{e}'}" for e in ("png", "pdf")]
    assert tiny.main(["--replot"])[0]["square"] == 0  # the output folder's results, drawn into it
    tiny.main(["--quiet", "--quick", "--update-results"])  # a quick run stays in the output folder
    assert (clone / paths.OUT / "results" / "quick" / "tiny.json").exists()
    assert not (clone / "results" / "quick").exists() and not (clone / "figures" / "quick").exists()


def test_replot_draws_from_the_results_file_alone(out, capsys):
    tiny.main(["--quiet"])
    source = out / "results" / "tiny.json"
    data = json.loads(source.read_text())
    data["rows"][0]["square"] = 123
    source.write_text(json.dumps(data))
    for p in out.rglob("*.json"):
        if "cache" in p.parts:
            p.unlink()
    capsys.readouterr()
    tiny.DRAWN.clear()
    assert tiny.main(["--replot"])[0]["square"] == 123
    assert tiny.DRAWN == [data] and computed(out) == [0, 1, 2, 3]  # (the log is from the first run)
    assert capsys.readouterr().out.splitlines() == [f"wrote {out / 'figures' / f'tiny.{e}'}" for e in ("png", "pdf")]
    source.unlink()
    with pytest.raises(SystemExit, match="run without --replot first"):
        tiny.main(["--replot"])


def test_same_results_draw_the_same_figure_bytes(out):
    tiny.main(["--quiet"])
    png, pdf = ((out / "figures" / f"tiny.{e}").read_bytes() for e in ("png", "pdf"))
    tiny.main(["--quiet", "--replot"])
    assert (out / "figures" / "tiny.png").read_bytes() == png and (out / "figures" / "tiny.pdf").read_bytes() == pdf


def test_paths_resolve_from_the_package_not_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.delenv(paths.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    out = REPO / paths.OUT
    assert paths.results_dir() == out / "results" and paths.figures_dir(quick=True) == out / "figures" / "quick"
    assert paths.cache_dir("table2") == out / "results" / "cache" / "table2"
    assert paths.shown(REPO / "results") == str(REPO / "results")
    monkeypatch.chdir(REPO)
    assert paths.shown(REPO / "results" / "x.json") == os.path.join("results", "x.json")
    monkeypatch.setenv(paths.ENV, str(tmp_path / "o"))
    assert paths.results_dir(quick=True) == tmp_path / "o" / "results"  # a folder given is used as given
    assert paths.figures_dir(committed=True) == tmp_path / "o" / "figures"  # also for --update-results
    assert paths.committed_results() == REPO / "results"


def test_runs_write_a_git_ignored_folder_unless_told_to_update_the_committed_results(monkeypatch):
    monkeypatch.delenv(paths.ENV, raising=False)
    args = runner.parser("x").parse_args([])
    assert not args.update_results and runner.parser("x").parse_args(["--update-results"]).update_results
    written = [paths.results_dir(), paths.figures_dir(), paths.results_dir(quick=True), paths.figures_dir(quick=True),
               paths.cache_dir("table2"), paths.results_dir(quick=True, committed=True)]
    assert all(p.is_relative_to(REPO / paths.OUT) for p in written)
    assert paths.results_dir(committed=True) == REPO / "results"
    assert paths.figures_dir(committed=True) == REPO / "figures"
    try:
        ignored = subprocess.run(["git", "check-ignore", "--no-index", *(str(p / "table2.json") for p in written)],
                                 cwd=REPO, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        pytest.skip("no git")
    if "not a git repository" in ignored.stderr:
        pytest.skip("not a git checkout")
    assert ignored.stdout.split() == [str(p / "table2.json") for p in written], ignored.stderr


def test_crossval_reports_a_failed_refinement(monkeypatch):
    from experiments import crossval
    import ffu_cvx as ffu

    solve = ffu.solve

    def failing_refinement(problem, method, **options):
        sol = solve(problem, method=method, **options)
        if method != "sdp":
            return sol
        info = dict(sol.info, refine_failed="level 2 failed in every retry")
        return types.SimpleNamespace(privacy_cost=sol.privacy_cost, gap=sol.gap, sigma=sol.sigma, info=info)

    monkeypatch.setattr(ffu, "solve", failing_refinement)
    row = crossval.run_cell("pm1/uniform", 8, 0, 1e-4)
    assert (row["refined"], row["unique"], row["refine_failed"]) == (False, False, "level 2 failed in every retry")
    assert abs(row["rel_diff"]) < 1e-4


# --jobs and --scheduler: the cells on worker processes (ffu_cvx.solvers.batch), results as the serial run's.
# A fresh process for each run, so that the workers start with the environment the test sets.

def _tiny(out, *flags, **env):
    return subprocess.run([sys.executable, str(REPO / "tests" / "tiny_experiment.py"), "--quiet", *flags],
                          env=_subprocess_env(out, **env), capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_jobs_give_the_serial_results_failures_uncached(out):
    pytest.importorskip("joblib")
    serial = _tiny(out, "--cells", "5", "--no-cache", TINY_FAIL="2")
    expected = json.loads((out / "results" / "tiny.json").read_text())["rows"]
    parallel = _tiny(out, "--cells", "5", "--jobs", "2", TINY_FAIL="2")
    assert serial.returncode == parallel.returncode == 0, parallel.stderr
    assert json.loads((out / "results" / "tiny.json").read_text())["rows"] == expected
    assert expected[2] == {"i": 2, "error": "SolverError: cell 2 failed on purpose"}
    assert re.search(r"^tiny \[\d/5\] i = 2: SolverError: cell 2 failed on purpose$", parallel.stderr, re.M)
    assert sorted(computed(out)) == sorted([0, 1, 3, 4] * 2)  # each computed once per run, in the workers
    assert sorted(p.name for p in cache_file({"i": 0}).parent.iterdir()) == sorted(
        cache_file({"i": i}).name for i in (0, 1, 3, 4))  # every finished cell cached, the failure not


def _processes_with(out) -> list[int]:
    """Processes whose environment names ``out`` (this test's runs and their workers)."""
    mark = f"{paths.ENV}={out}".encode()
    found = []
    for env in Path("/proc").glob("[0-9]*/environ"):
        try:
            if mark in env.read_bytes().split(b"\0"):
                found.append(int(env.parent.name))
        except OSError:
            pass
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc to find the workers")
def test_ctrl_c_stops_the_workers_too_then_a_rerun_resumes(out):
    pytest.importorskip("joblib")
    cache = paths.cache_dir(tiny.NAME)
    proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "tiny_experiment.py"), "--cells", "12",
                             "--jobs", "2"], env=_subprocess_env(out, TINY_SLEEP="0.5"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while len(_finished(cache)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the command and its workers
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and stdout == "" and "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1].startswith("tiny: interrupted; ")
    deadline = time.monotonic() + 10
    while _processes_with(out) and time.monotonic() < deadline:  # the workers were ended, not left running
        time.sleep(0.1)
    assert _processes_with(out) == []
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")] == []  # no temporary file left
    kept = len(_finished(cache))
    assert 2 <= kept < 12 and f"{kept} finished cell(s) kept" in stderr
    computed(out)
    assert _tiny(out, "--cells", "12", "--jobs", "2").returncode == 0
    assert len(computed(out)) == 12 - kept  # resumed from the cache


def test_jobs_must_be_a_worker_count(out):
    for bad in ("0", "-2", "two"):
        with pytest.raises(SystemExit) as stop:
            tiny.main(["--jobs", bad])
        assert stop.value.code == 2
    assert runner.parser("t").parse_args(["--jobs", "-1"]).jobs == -1


@pytest.mark.parametrize("flags, threads", [([], 1), (["--blas-threads", "2"], 2)])
def test_cells_run_with_the_blas_threads_asked_for(out, flags, threads):
    """One BLAS thread per process computing cells by default (OPENBLAS_NUM_THREADS does not
    override it), ``--blas-threads N`` for N."""
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def cell(i):
        return {"i": i, "v": max(x["num_threads"] for x in threadpoolctl.threadpool_info() if x["user_api"] == "blas")}

    args = runner.parser("t").parse_args(["--quiet", "--no-cache", *flags])
    rows = runner.run_grid("threads", [runner.Cell(k) for k in KEYS[:1]], cell, args, version=1,
                           table=runner.Table("t", ("i", "v")))
    assert rows[0]["v"] == threads
    for bad in ("0", "-1", "x"):
        with pytest.raises(SystemExit):
            runner.parser("t").parse_args(["--blas-threads", bad])


def test_all_forwards_its_flags_as_given(out, monkeypatch):
    from experiments import all as run_all

    seen = []
    monkeypatch.setattr(run_all, "EXPERIMENTS", ("tiny_experiment",))
    monkeypatch.setitem(sys.modules, "experiments.tiny_experiment", types.SimpleNamespace(main=seen.append))
    run_all.main(["--quick", "--jobs", "2", "--scheduler", "tcp://127.0.0.1:8786", "--quiet"])
    flags = ["--quick", "--jobs", "2", "--scheduler", "tcp://127.0.0.1:8786", "--quiet"]
    assert seen == [flags, flags]  # its grid is built first (no run_grid here: nothing to compute), then it runs
    data = json.loads((out / "results" / "all.json").read_text())
    assert data["meta"]["flags"] == flags and [r["experiment"] for r in data["rows"]] == ["cells", "tiny_experiment",
                                                                                          "total"]


def test_cells_record_their_time_and_workers_take_the_longest_first(out, monkeypatch):
    tiny.main(["--quiet", "--cells", "4"])
    cache = runner.Cache(paths.cache_dir(tiny.NAME))
    assert all(cache.seconds(1, k) >= 0 for k in KEYS)
    assert runner.Cache(cache.folder, write=False).seconds(1, KEYS[0]) is None  # --no-cache reads nothing
    for i, took in enumerate((1.0, 9.0, 3.0)):  # as if cells 0-2 had taken these times
        cache.put(1, {"i": i}, {"square": i * i}, seconds=took)
    cache.path(1, {"i": 3}).unlink()
    submitted, completed = [], runner.batch.completed

    def record(fn, tasks, **kwargs):
        submitted.append([t["key"]["i"] for t in tasks])
        return completed(fn, tasks, **{**kwargs, "n_jobs": 1})  # computed here, in that order

    monkeypatch.setattr(runner.batch, "completed", record)
    rows = tiny.main(["--quiet", "--cells", "5", "--force", "--jobs", "2"])
    assert submitted == [[3, 4, 1, 2, 0]]  # never timed (grid order), then 9 s, 3 s, 1 s
    assert [r["square"] for r in rows] == [0, 1, 4, 9, 16]
    tiny.main(["--quiet", "--cells", "5", "--force"])
    assert submitted[1:] == [[0, 1, 2, 3, 4]]  # a serial run keeps the grid's order


def test_a_rerun_with_the_same_numbers_keeps_the_results_file(tmp_path):
    # Timings, memory peaks and the environment may change between runs; the numbers decide.
    table = runner.Table("t", ("d", "alpha", "time_s"))
    meta = {"cell_version": 1, "total_time_s": 1.0}
    files = runner.result_files("demo", [{"d": 4, "alpha": 1.75, "time_s": 0.1, "peak_mb": 3.0}], table, meta, False)
    path = tmp_path / "demo.json"
    path.write_bytes(next(data for p, data in files.items() if p.suffix == ".json"))
    again = json.loads(path.read_text())
    again["rows"][0].update(time_s=9.9, peak_mb=7.0)
    again["meta"]["total_time_s"] = 5.0
    again["environment"]["load_average"] = [9.0, 9.0, 9.0]
    assert runner.same_numbers(path, again) is not None
    again["rows"][0]["alpha"] = 1.7500001  # another processor's rounding
    assert runner.same_numbers(path, again) is not None
    again["rows"][0]["alpha"] = 1.7501
    assert runner.same_numbers(path, again) is None
    assert runner.same_numbers(tmp_path / "absent.json", again) is None


def test_same_values_compare_numbers_to_a_tolerance_and_everything_else_exactly():
    assert runner.same_values({"a": [1.0, 2e-9, "x", None]}, {"a": [1.0 + 1e-9, 5e-9, "x", None]})
    assert not runner.same_values({"a": 1.0}, {"a": 1.0, "b": 1.0}) and not runner.same_values([1.0], [1.0, 1.0])
    assert not runner.same_values("x", "y") and not runner.same_values(True, 1) and not runner.same_values(None, 0.0)
    assert not runner.same_values(64, 65) and not runner.same_values(2e-5, 4e-5)
    assert runner.same_values(1.0, 1.01, tol=0.1)
