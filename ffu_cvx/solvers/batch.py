"""Batch solves: many problems (or any tasks) at once, serially or on joblib's workers.

Solver layer, above :func:`ffu_cvx.solve`: imports ``solvers`` (the package's ``solve``), ``model.status`` and
``model.validation``;
the parallel engines are optional extras imported only when asked for: joblib (with
threadpoolctl when installed) for ``n_jobs > 1``, ``pip install 'ffu-cvx[parallel]'``;
dask and distributed for ``backend="dask"``, ``pip install 'ffu-cvx[dask]'``. A serial
run (``n_jobs=1``) needs neither.

:func:`solve_many` solves a list of problems and returns their Solutions in the
input's order; :func:`completed` is the engine beneath it (and beneath the
experiments' ``--jobs``): it runs ``fn(**kwargs)`` for every task and yields a
:class:`Finished` record as each one ends, in the order they end.

Identical results. A task's numbers do not depend on where it ran, provided the BLAS
uses the same number of threads (a multithreaded BLAS splits its sums differently):
``blas_threads`` (default 1) is set

- in loky worker processes through the ``OPENBLAS_NUM_THREADS``-style variables, which
  joblib puts in their environment before they start, hence before they import numpy
  (a change of limit starts fresh workers);
- in the calling process, for the whole batch, through threadpoolctl when it is
  installed: this covers the serial run, the ``threading`` backend and an in-process
  Dask cluster (without threadpoolctl the caller's BLAS keeps its own setting: set
  ``OPENBLAS_NUM_THREADS=1`` before starting Python for a serial run that matches);
- in any other worker process (a Dask worker), through threadpoolctl at the task's
  start and left in place (Dask's nannies already start workers with one BLAS thread).

On a Dask cluster the scheduler and every worker must import the same ffu-cvx (and,
for the experiments, the ``experiments`` package): a scheduler that cannot unpickle a
task logs "Error during deserialization of the task graph" and the batch waits.

A task that raises one of the ``catch`` exceptions (every ``Exception`` for
:func:`solve_many`) becomes a :class:`Failure` in its place; the others go on.
``KeyboardInterrupt`` is never caught: it stops the batch, joblib cancels the tasks
not yet started and ends its workers (loky workers ignore Ctrl-C themselves, so that
the caller alone decides).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from .. import solvers
from ..model import validation
from ..model.status import SolverError

__all__ = ["BACKENDS", "METHODS", "SCHEMES", "CONNECT_TIMEOUT_S", "Failure", "Finished", "check_address",
           "completed", "solve_many"]

#: joblib backends a batch may run on: worker processes, threads, a Dask cluster.
BACKENDS = ("loky", "threading", "dask")
#: The extra that provides each backend (``pip install 'ffu-cvx[<extra>]'``).
EXTRAS = {"loky": "parallel", "threading": "parallel", "dask": "dask"}
#: The methods :func:`solve_many` takes: every one :func:`ffu_cvx.solvers.solve` takes.
METHODS = (*sorted(solvers.METHODS), *sorted(solvers.STRUCTURED_METHODS), "auto")
#: The address schemes distributed connects by (``tcp`` when an address has none); ``inproc``
#: addresses (``inproc://host/pid/n``) reach a scheduler in this process.
SCHEMES = ("tcp", "tls", "ws", "wss", "ucx", "inproc")
#: Seconds to wait for a Dask scheduler given by its address before giving up (distributed's
#: default is 30 s, retried): a scheduler that answers at all answers within a second or two.
CONNECT_TIMEOUT_S = 10
_ADDRESS_FORMS = "'tcp://host:port' or 'host:port' (also tls://, ws://, wss://, ucx://), or 'inproc://host/pid/n'"


@dataclass(frozen=True)
class Failure:
    """A task that raised: its position in the batch, the exception's type name,
    message and traceback (as text, from wherever it ran), and the ``SolverError``'s
    status (None for any other exception). ``success`` is False, as for an unusable
    Solution, so ``[r.success for r in results]`` reads every result."""

    index: int
    error_type: str
    message: str
    status: str | None = None
    traceback: str = ""
    success = False

    def __str__(self) -> str:
        return f"{self.error_type}: {self.message}"


@dataclass(frozen=True)
class Finished:
    """One finished task: ``index`` in the batch, ``result`` (the value or a
    :class:`Failure`), ``done`` of ``total`` finished so far, ``seconds`` the task took
    where it ran, ``elapsed`` since the batch started (in the caller)."""

    index: int
    result: Any
    done: int
    total: int
    seconds: float
    elapsed: float


def _import(module: str, backend: str):
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"backend={backend!r} needs {module.split('.')[0]}, which is not installed: "
                          f"pip install 'ffu-cvx[{EXTRAS[backend]}]' (or run serially with n_jobs=1)") from exc


#: A warning filter for loky's resource tracker, a process that shares the caller's
#: stderr: after a Ctrl-C ends a batch it may find semaphores the stopped workers left
#: behind and warn about them (four lines after the caller's one-line message; 1 of 16
#: interrupted ``--jobs 2`` runs of the runner tests under load), then removes them all
#: the same. The filter ignores only warnings whose message starts with ``resource_tracker``.
QUIET_TRACKER = "ignore:resource_tracker:UserWarning"


def _blas_limit(blas_threads: int | None):
    """A context holding the BLAS to ``blas_threads`` in this process (threadpoolctl), else a no-op."""
    if blas_threads is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=blas_threads, user_api="blas")


def _in_worker_process(blas_threads: int | None) -> None:
    """Settings of a worker process (not the caller's): the BLAS limit, kept rather than
    restored (a Dask worker's threads share one setting), and, on the worker's main
    thread (loky), Ctrl-C ignored: the caller stops the batch and ends its workers."""
    _blas_limit(blas_threads)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_task(fn: Callable, index: int, kwargs: dict, catch: tuple, blas_threads: int | None,
              caller_pid: int) -> tuple[int, Any, float]:
    """Run one task where it is scheduled: ``(index, fn(**kwargs) or a Failure, seconds)``."""
    if os.getpid() != caller_pid:
        _in_worker_process(blas_threads)
    t0 = time.perf_counter()
    try:
        value = fn(**kwargs)
    except catch as exc:
        status = exc.status if isinstance(exc, SolverError) else None
        value = Failure(index, type(exc).__name__, str(exc), status, traceback.format_exc())
    return index, value, time.perf_counter() - t0


def _n_jobs(n_jobs) -> int:
    if n_jobs == -1:
        return os.cpu_count() or 1
    return validation.positive_int(n_jobs, "n_jobs")


def _bad_address(address: str, why: str):
    raise ValueError(f"`scheduler` {address!r} is not a Dask scheduler address: {why}; give {_ADDRESS_FORMS}")


def _check_port(address: str, port: str) -> None:
    if not (port.isdigit() and 0 < int(port) < 65536):
        _bad_address(address, f"the port {port!r} is not a number in 1..65535" if port else "it has no port")


def _check_host_port(address: str, loc: str) -> None:
    """``host:port`` or ``[ipv6]:port``, as distributed's ``parse_host_port`` reads them (a port required)."""
    if loc.startswith("["):
        host, sep, tail = loc[1:].partition("]")
        if not sep or (tail and not tail.startswith(":")):
            _bad_address(address, "an IPv6 host is written [host]:port")
        port = tail[1:]
    else:
        host, _, port = loc.partition(":")
        if ":" in port:
            _bad_address(address, "it has more than one ':' (write an IPv6 host as [host]:port)")
    if not host or any(ch.isspace() or ch == "/" for ch in host):
        _bad_address(address, f"the host {host!r} is empty or holds a space or '/'")
    _check_port(address, port)


def check_address(address: str) -> str:
    """``address`` if it has a form distributed connects to (:data:`SCHEMES`), else ``ValueError``.

    Checked before dask is imported or any connection is tried: ``[scheme://]host:port``
    (``tcp`` when no scheme is given; a port is required) or ``inproc://host/pid/n``.
    """
    scheme, sep, loc = address.partition("://")
    if not sep:
        scheme, loc = "tcp", address
    if scheme not in SCHEMES:
        _bad_address(address, f"distributed has no scheme {scheme!r} (it has {', '.join(SCHEMES)})")
    if "://" in loc:
        _bad_address(address, "it has two schemes")
    if scheme != "inproc":
        _check_host_port(address, loc)
    elif len(loc.split("/")) != 3 or not all(loc.split("/")):
        _bad_address(address, "an inproc address is inproc://host/pid/n (a cluster's `scheduler_address`)")
    return address


def _check_scheduler(scheduler) -> None:
    """A scheduler is an address (its form checked), a ``distributed.Client`` or a cluster."""
    if isinstance(scheduler, str):
        check_address(scheduler)
    elif not (hasattr(scheduler, "submit") or hasattr(scheduler, "scheduler_address")):
        raise ValueError(f"`scheduler` must be a Dask scheduler's address ({_ADDRESS_FORMS}), a distributed.Client "
                         f"or a cluster, got {type(scheduler).__name__} {scheduler!r:.60}")


def _backend(backend, scheduler, n_jobs) -> str | None:
    """The joblib backend to use, or None for the serial loop."""
    if backend is None:
        backend = "dask" if scheduler is not None else "loky"
    validation.choice(backend, "backend", BACKENDS)
    if scheduler is not None:
        _check_scheduler(scheduler)
    if scheduler is not None and backend != "dask":
        raise ValueError(f"`scheduler` ({scheduler!r}) is a Dask scheduler's address: use it with backend='dask', "
                         f"got backend={backend!r}")
    return backend if backend == "dask" or n_jobs > 1 else None


def _connect(distributed, scheduler):
    """A client of the scheduler at ``scheduler`` (an address or a cluster), waiting at most :data:`CONNECT_TIMEOUT_S`."""
    try:
        return distributed.Client(scheduler, set_as_default=False, timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:  # distributed's timeout is an OSError too
        where = scheduler if isinstance(scheduler, str) else getattr(scheduler, "scheduler_address", scheduler)
        raise OSError(f"cannot connect to the Dask scheduler at {where!r} within {CONNECT_TIMEOUT_S} s "
                      f"({' '.join(str(exc).split())}); check that it runs and that the address is right") from None


@contextlib.contextmanager
def _dask_client(scheduler):
    """The Dask client for a batch: ``scheduler`` itself (a Client), one connected to its
    address (closed afterwards), or the current default client."""
    distributed = _import("distributed", "dask")
    if scheduler is None:
        try:
            client = distributed.get_client()
        except ValueError:
            raise ValueError("backend='dask' needs a cluster: pass scheduler='tcp://host:8786' "
                             "(or a distributed.Client), or start a Client first") from None
        yield client
    elif isinstance(scheduler, distributed.Client):
        yield scheduler
    else:
        client = _connect(distributed, scheduler)
        try:
            yield client
        finally:
            client.close()


@contextlib.contextmanager
def _quiet_resource_tracker():
    """Start loky's processes with :data:`QUIET_TRACKER` among their warning filters
    (``PYTHONWARNINGS``, this process's own setting put back afterwards)."""
    old = os.environ.get("PYTHONWARNINGS")
    os.environ["PYTHONWARNINGS"] = f"{old},{QUIET_TRACKER}" if old else QUIET_TRACKER
    try:
        yield
    finally:
        if old is None:
            del os.environ["PYTHONWARNINGS"]
        else:
            os.environ["PYTHONWARNINGS"] = old


def _joblib_outputs(joblib, backend, n_jobs, scheduler, blas_threads, calls):
    """joblib's results in the order they finish, on ``backend``."""
    with contextlib.ExitStack() as stack:
        if backend == "loky":
            stack.enter_context(_quiet_resource_tracker())
        if backend == "dask":
            client = stack.enter_context(_dask_client(scheduler))
            stack.enter_context(joblib.parallel_config(backend="dask", client=client))
        else:  # loky workers get the limit in their environment; threads are held by _blas_limit
            limit = {"inner_max_num_threads": blas_threads} if backend == "loky" and blas_threads else {}
            stack.enter_context(joblib.parallel_config(backend=backend, n_jobs=n_jobs, **limit))
        run = joblib.Parallel(return_as="generator_unordered", max_nbytes=None)
        yield from run(joblib.delayed(_run_task)(*call) for call in calls)


def _finished(outputs, total: int, blas_threads: int | None) -> Iterator[Finished]:
    t0 = time.perf_counter()
    with _blas_limit(blas_threads):
        for done, (index, value, seconds) in enumerate(outputs, 1):
            yield Finished(index, value, done, total, seconds, time.perf_counter() - t0)


def completed(fn: Callable[..., Any], tasks: Sequence[dict], *, n_jobs: int = 1, backend: str | None = None,
              scheduler=None, blas_threads: int | None = 1, catch: tuple = (Exception,)) -> Iterator[Finished]:
    """Run ``fn(**task)`` for every task; yield a :class:`Finished` as each one ends.

    ``n_jobs`` workers (1: in this process, in order; -1: one per CPU) on ``backend``
    (``"loky"`` processes, the default; ``"threading"``; ``"dask"``, on the cluster at
    ``scheduler``, an address or a ``distributed.Client``, whose workers decide the
    parallelism, so ``n_jobs`` is not used; a ``scheduler`` alone implies ``"dask"``). An
    address's form is checked first (:func:`check_address`), and the connection waits at
    most :data:`CONNECT_TIMEOUT_S` seconds.
    ``blas_threads`` BLAS threads per worker (None: leave them). Exceptions of the
    types in ``catch`` become a :class:`Failure` result; any other one stops the batch
    and propagates (the tasks already yielded stay with the caller). ``fn`` and the
    tasks must pickle for a process or Dask backend; results come back as copies.
    The arguments are checked, and the engine imported, before this returns.
    """
    tasks, catch = list(tasks), tuple(catch)
    n_jobs = _n_jobs(n_jobs)
    engine = _backend(backend, scheduler, n_jobs)
    if blas_threads is not None:
        blas_threads = validation.positive_int(blas_threads, "blas_threads")
    calls = ((fn, i, task, catch, blas_threads, os.getpid()) for i, task in enumerate(tasks))
    if engine is None:
        return _finished((_run_task(*call) for call in calls), len(tasks), blas_threads)
    joblib = _import("joblib", engine)
    if engine == "dask":
        _import("distributed", engine)
    outputs = _joblib_outputs(joblib, engine, n_jobs, scheduler, blas_threads, calls)
    return _finished(outputs, len(tasks), blas_threads)


def solve_many(problems, method: str = "smii", *, n_jobs: int = 1, backend: str | None = None, scheduler=None,
               blas_threads: int | None = 1, progress: Callable[[Finished], Any] | None = None,
               raise_errors: bool = False, **options) -> list:
    """Solve every problem with ``solve(problem, method, **options)``; one result each, in order.

    ``method`` is any method :func:`ffu_cvx.solvers.solve` takes (:data:`METHODS`: the
    dense ones, ``"kron"`` for product problems and ``"auto"``).
    Each result is the problem's Solution or, for a problem whose solve raised, a
    :class:`Failure` (type, message, index) in its place: the other problems are solved
    all the same (``raise_errors=True`` instead stops the batch at the first failure
    and raises it). The workers: ``n_jobs``, ``backend``, ``scheduler`` and
    ``blas_threads`` as in :func:`completed` (default: one problem at a time, here).
    The numbers are those of the serial run, bit for bit, whatever the backend
    (module docstring); only timings differ, and a Solution from a worker carries a
    copy of its problem. ``progress(finished)`` is called here with a
    :class:`Finished` record as each problem ends (in the order they end).

    >>> import ffu_cvx as ffu
    >>> problems = [ffu.FitnessProblem.from_workload(ffu.workloads.prefix(d)) for d in (2, 4)]
    >>> [round(s.privacy_cost, 4) for s in ffu.solve_many(problems, method="smii", tol=1e-6)]
    [1.3333, 1.7586]
    """
    name = str(method).lower()
    if name not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid methods are {list(METHODS)}")
    tasks = [dict(problem=problem, method=name, **options) for problem in problems]
    results: list = [None] * len(tasks)
    for finished in completed(solvers.solve, tasks, n_jobs=n_jobs, backend=backend, scheduler=scheduler,
                              blas_threads=blas_threads, catch=() if raise_errors else (Exception,)):
        results[finished.index] = finished.result
        if progress is not None:
            progress(finished)
    return results
