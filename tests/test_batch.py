"""Batch solves (``ffu.solve_many``, ``ffu_cvx.solvers.batch.completed``) and the experiments' ``--jobs``.

Parallel runs must give the serial run's numbers bit for bit (one BLAS thread per
worker); a failing problem is reported in its place; the engines are optional extras.
The Dask tests skip where distributed is not installed.
"""

import dataclasses
import importlib
import json
import os
import pickle
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

import ffu_cvx as ffu
from ffu_cvx import workloads
from ffu_cvx.solvers import batch

joblib = pytest.importorskip("joblib")  # the parallel extra; serial runs are tested without it below


def bits(x):
    """``x`` with every number as its exact bits, every timing and the machine's environment (its load)
    left out: equal iff bit-identical."""
    if isinstance(x, ffu.FitnessProblem):
        return bits({"W": x.W, "c": x.c, "B": x.B, "L": x.L})
    if isinstance(x, ffu.Solution):
        return bits({f.name: getattr(x, f.name) for f in dataclasses.fields(x)})
    if isinstance(x, Mapping):
        return {k: bits(v) for k, v in x.items() if "time" not in str(k) and k != "environment"}
    if isinstance(x, (list, tuple)):
        return [bits(v) for v in x]
    if isinstance(x, np.ndarray):
        return (x.shape, x.dtype.str, x.tobytes())
    if isinstance(x, (float, np.floating)):
        return float(x).hex()
    return x


def problems():
    return [ffu.FitnessProblem.from_workload(w) for w in
            (workloads.prefix(4), workloads.random_ranges(8, targets="random", seed=3), workloads.prefix(8))]


@pytest.fixture(scope="module")
def serial():
    """The serial results the parallel runs are held to: SM-II and the SDP on three problems."""
    return {m: ffu.solve_many(problems(), method=m) for m in ("smii", "sdp")}


@pytest.mark.parametrize("method", ["smii", "sdp"])
def test_workers_give_the_serial_numbers_bit_for_bit(serial, method):
    parallel = ffu.solve_many(problems(), method=method, n_jobs=2)
    assert all(isinstance(s, ffu.Solution) and s.success for s in parallel)
    assert [s.method for s in parallel] == [method] * 3
    assert bits(parallel) == bits(serial[method])
    assert bits(serial[method][0].history or []) == bits(parallel[0].history or [])
    direct = ffu.solve(problems()[1], method=method)  # solve_many adds nothing to the solve itself
    assert bits(direct) == bits(serial[method][1])


def test_threads_backend_gives_the_serial_numbers(serial):
    assert bits(ffu.solve_many(problems(), method="smii", n_jobs=2, backend="threading")) == bits(serial["smii"])


def test_a_solution_pickles_and_stays_frozen(serial):
    sol = serial["smii"][1]
    back = pickle.loads(pickle.dumps(sol))
    assert type(back) is ffu.Solution and bits(back) == bits(sol) and back.gap == sol.gap
    with pytest.raises(dataclasses.FrozenInstanceError):
        back.sigma = None
    with pytest.raises(TypeError):
        back.info["nit"] = 0


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_a_failing_problem_is_reported_in_its_place_and_the_others_solved(serial, n_jobs):
    mixed = problems()
    mixed.insert(1, "not a problem")
    seen = []
    results = ffu.solve_many(mixed, method="smii", n_jobs=n_jobs, progress=seen.append)
    failure = results[1]
    assert isinstance(failure, batch.Failure) and not failure.success
    assert (failure.index, failure.error_type, failure.status) == (1, "ValueError", None)
    assert "`problem` must be a FitnessProblem or a ProductProblem, got str" in failure.message == str(failure)[len("ValueError: "):]
    assert "solvers/__init__.py" in failure.traceback
    assert bits([results[0]] + results[2:]) == bits(serial["smii"])
    # progress: once per problem, as each finishes, counting up to the total
    assert sorted(f.index for f in seen) == [0, 1, 2, 3] and [f.done for f in seen] == [1, 2, 3, 4]
    assert {f.total for f in seen} == {4} and all(f.seconds >= 0 and f.elapsed >= 0 for f in seen)
    assert all(f.result is results[f.index] or isinstance(f.result, batch.Failure) for f in seen)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_raise_errors_stops_at_the_failure(n_jobs):
    with pytest.raises(ValueError, match="must be a FitnessProblem"):
        ffu.solve_many([problems()[0], "not a problem"], method="smii", n_jobs=n_jobs, raise_errors=True)


def test_a_solver_error_keeps_its_status():
    def fails(i):
        if i == 1:
            raise ffu.SolverError("diverged", status="max_iter")
        return i

    results = [f.result for f in batch.completed(fails, [{"i": i} for i in range(3)])]
    assert results[0] == 0 and results[2] == 2
    assert (results[1].error_type, results[1].message, results[1].status) == ("SolverError", "diverged", "max_iter")


def test_other_exceptions_pass_through_completed():
    def interrupted(i):
        if i == 1:
            raise KeyboardInterrupt
        return i

    seen = []
    with pytest.raises(KeyboardInterrupt):
        for f in batch.completed(interrupted, [{"i": i} for i in range(3)]):
            seen.append(f.result)
    assert seen == [0]
    with pytest.raises(RuntimeError, match="boom"):  # not in `catch`
        list(batch.completed(lambda: (_ for _ in ()).throw(RuntimeError("boom")), [{}], catch=(ValueError,)))


def blas_threads_here() -> int:
    """The BLAS threads of the process this runs in (threadpoolctl's view)."""
    from threadpoolctl import threadpool_info

    return max(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas")


@pytest.mark.slow
def test_each_worker_gets_the_blas_threads_asked_for():
    pytest.importorskip("threadpoolctl")
    for n in (2, 1):
        assert [f.result for f in batch.completed(blas_threads_here, [{}] * 2, n_jobs=2, blas_threads=n)] == [n, n]
    assert [f.result for f in batch.completed(blas_threads_here, [{}], blas_threads=1)] == [1]  # serial, here


def test_arguments_are_checked_before_anything_runs():
    ps = problems()[:1]
    for kwargs, match in [({"n_jobs": 0}, "`n_jobs` must be an integer >= 1"), ({"n_jobs": 1.5}, "`n_jobs`"),
                          ({"backend": "mpi"}, "`backend` must be one of"),
                          ({"scheduler": "tcp://x:1", "backend": "loky"}, "use it with backend='dask'"),
                          ({"blas_threads": 0}, "`blas_threads`"), ({"method": "newton"}, "unknown method")]:
        with pytest.raises(ValueError, match=match):
            ffu.solve_many(ps, **{"method": "smii", **kwargs})


def test_missing_engines_name_the_extra_and_serial_needs_none(monkeypatch, serial):
    monkeypatch.setitem(sys.modules, "joblib", None)
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match=r"pip install 'ffu-cvx\[parallel\]'"):
        ffu.solve_many(problems(), method="smii", n_jobs=2)
    with pytest.raises(ImportError, match=r"pip install 'ffu-cvx\[dask\]'"):
        ffu.solve_many(problems(), method="smii", scheduler="tcp://127.0.0.1:1")
    assert bits(ffu.solve_many(problems(), method="smii")) == bits(serial["smii"])


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as local:
        yield local


def test_dask_cluster_gives_the_serial_numbers(cluster, serial):
    from distributed import Client

    seen = []
    by_address = ffu.solve_many(problems(), method="smii", scheduler=cluster.scheduler_address, progress=seen.append)
    assert bits(by_address) == bits(serial["smii"]) and sorted(f.index for f in seen) == [0, 1, 2]
    with Client(cluster) as client:
        assert bits(ffu.solve_many(problems(), method="sdp", scheduler=client)) == bits(serial["sdp"])
        assert bits(ffu.solve_many(problems(), method="smii", backend="dask")) == bits(serial["smii"])
    mixed = ffu.solve_many([problems()[0], "not a problem"], method="smii", scheduler=cluster.scheduler_address)
    assert bits(mixed[0]) == bits(serial["smii"][0]) and mixed[1].error_type == "ValueError"


def test_dask_without_a_cluster_says_how_to_give_one(monkeypatch):
    distributed = pytest.importorskip("distributed")

    def no_client():  # what distributed says with no client and no in-process worker about
        raise ValueError("No global client found and no address provided")

    monkeypatch.setattr(distributed, "get_client", no_client)
    with pytest.raises(ValueError, match="needs a cluster: pass scheduler="):
        ffu.solve_many(problems()[:1], method="smii", backend="dask")


def run_table2(out, *flags):
    """table2 --quick's results file, timings left out (``bits``: the clock time and every *_time)."""
    importlib.import_module("experiments.table2").main(["--quick", "--no-cache", "--quiet", *flags])
    return bits(json.loads((out / "results" / "table2.json").read_text()))


@pytest.fixture
def table2_serial(tmp_path, monkeypatch):
    from experiments import paths

    monkeypatch.setenv(paths.ENV, str(tmp_path))
    rows = run_table2(tmp_path, "--jobs", "1")
    assert len(rows["rows"]) == 3 and all("error" not in r and r["SM-II"] is not None for r in rows["rows"])
    return tmp_path, rows


def test_an_experiment_on_workers_writes_the_serial_results(table2_serial):
    out, serial_rows = table2_serial
    assert run_table2(out, "--jobs", "2") == serial_rows


def test_an_experiment_on_a_dask_cluster_writes_the_serial_results(table2_serial, cluster):
    out, serial_rows = table2_serial
    assert run_table2(out, "--scheduler", cluster.scheduler_address) == serial_rows


def test_all_on_workers_writes_the_serial_results(tmp_path, monkeypatch, capsys):
    from experiments import all as run_all, paths

    monkeypatch.setattr(run_all, "EXPERIMENTS", ("table5", "figure2"))
    written = {}
    for jobs in ("1", "2"):
        monkeypatch.setenv(paths.ENV, str(tmp_path / jobs))
        rows = run_all.main(["--quick", "--no-cache", "--jobs", jobs])
        assert not any(r["error"] for r in rows)
        written[jobs] = {p.name: bits(json.loads(p.read_text())) for p in (tmp_path / jobs / "results").glob("*.json")
                         if p.name != "all.json"}
    assert sorted(written["2"]) == ["figure2.json", "table5.json"] and written["2"] == written["1"]
    err = capsys.readouterr().err
    # --no-cache: each cell computed once, on the workers, and the tables written from those values
    assert "table5: 2 cell(s), 0 of them from" in err and ", 2 computed with the other experiments' cells" in err
    assert len(re.findall(r"^table5 \[\d+/\d+\] d = 24: ", err, re.M)) == 2  # once in each run


def test_a_task_error_on_the_default_dask_client_is_not_taken_for_a_missing_cluster(cluster):
    from distributed import Client

    with Client(cluster):
        with pytest.raises(ValueError, match="must be a FitnessProblem"):
            ffu.solve_many(["not a problem"], method="smii", backend="dask", raise_errors=True)


LEAK = """
from ffu_cvx.solvers import batch
assert [f.result for f in batch.completed(dict, [{"x": 1}, {"x": 2}], n_jobs=2)] in ([{"x": 1}, {"x": 2}], [{"x": 2}, {"x": 1}])
from joblib.externals.loky.backend import resource_tracker
resource_tracker.register("/ffu-cvx-test-leak", "semlock")  # as a worker stopped by Ctrl-C leaves one
"""


def test_loky_resource_tracker_warnings_stay_off_the_callers_stderr(tmp_path):
    # The tracker shares our stderr and warned (four lines) about what a stopped batch left behind.
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    env.pop("PYTHONWARNINGS", None)
    proc = subprocess.run([sys.executable, "-c", LEAK], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "resource_tracker" not in proc.stderr


def test_the_tracker_filter_leaves_the_callers_environment_as_it_was(monkeypatch):
    monkeypatch.setenv("PYTHONWARNINGS", "default")
    assert [f.result for f in batch.completed(dict, [{"x": 1}], n_jobs=2)] == [{"x": 1}]
    assert os.environ["PYTHONWARNINGS"] == "default"
    monkeypatch.delenv("PYTHONWARNINGS")
    list(batch.completed(dict, [{"x": 1}], n_jobs=2))
    assert "PYTHONWARNINGS" not in os.environ
