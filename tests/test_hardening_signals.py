"""SIGINT and SIGTERM stop the command line cleanly and leave no file behind."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _env():
    return dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=str(ROOT))


def _signal_solve(tmp_path, spec, method, sig, wait_for="solving with method"):
    """Start ``ffu-cvx solve``, send ``sig`` once it is solving; return (returncode, stderr)."""
    (tmp_path / "s.json").write_text(json.dumps(spec))
    out = tmp_path / "r.json"
    out.write_text("previous result\n")
    proc = subprocess.Popen([sys.executable, "-m", "ffu_cvx.cli.cli", "solve", str(tmp_path / "s.json"),
                             "--method", method, "--out", str(out)], stderr=subprocess.PIPE, text=True, env=_env())
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if wait_for in line:
            break
    time.sleep(0.5)
    proc.send_signal(sig)
    rest = proc.communicate(timeout=120)[1]
    err = "".join(lines) + rest
    assert out.read_text() == "previous result\n"  # the existing --out is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "s.json"]  # no partial or temp file
    return proc.returncode, err


RANGES = {"workload": "random_ranges", "params": {"d": 384}}  # SM-II takes about 3 s
PREFIX_CLARABEL = {"workload": "prefix", "params": {"d": 24}, "options": {"solver": "CLARABEL"}}


@pytest.mark.parametrize("spec, method", [(RANGES, "smii"), (PREFIX_CLARABEL, "sdp")], ids=["smii", "sdp-clarabel"])
def test_sigint_in_solve_exits_130_in_one_line(tmp_path, spec, method):
    code, err = _signal_solve(tmp_path, spec, method, signal.SIGINT)
    assert code == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "ffu-cvx: interrupted (Ctrl-C); no output written"


FLAGGED = """
import ctypes, sys
from ffu_cvx.cli import cli
ctypes.c_int.in_dll(ctypes.pythonapi, "_Py_UnhandledKeyboardInterrupt").value = 1  # as after PyRun_* saw Ctrl-C
if sys.argv[1] == "forget":
    cli.forget_unhandled_interrupt()
sys.exit(cli.EXIT_INTERRUPTED)
"""


@pytest.mark.skipif(sys.implementation.name != "cpython" or sys.version_info[:2] != (3, 11),
                    reason="the flag is CPython 3.11's")
def test_a_handled_interrupt_exits_with_our_status_not_by_sigint(tmp_path):
    # Run with -m, as `python -m ffu_cvx.cli.cli` is: CPython 3.11 then kills a process whose flag is
    # set with SIGINT at exit, whatever sys.exit said; the CLI clears it when it handles Ctrl-C.
    (tmp_path / "flagged.py").write_text(FLAGGED)
    env = dict(_env(), PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]))

    def exit_code(mode):
        return subprocess.run([sys.executable, "-m", "flagged", mode], env=env, timeout=60).returncode

    assert exit_code("keep") == -signal.SIGINT
    assert exit_code("forget") == 130


def test_sigterm_in_solve_exits_143_in_one_line(tmp_path):
    code, err = _signal_solve(tmp_path, RANGES, "smii", signal.SIGTERM)
    assert code == 143, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "ffu-cvx: terminated (SIGTERM); no output written"


WRITER = """
import os, sys, time
from ffu_cvx.io import files
real_fsync = os.fsync
def slow_fsync(fd):
    real_fsync(fd)
    print("writing", flush=True)
    time.sleep(30)
os.fsync = slow_fsync
files.atomic_write_bytes(sys.argv[1], b"x" * 5_000_000)
"""


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, -signal.SIGINT)])
def test_a_signal_during_an_atomic_write_leaves_no_temp_file(tmp_path, sig, code):
    target = tmp_path / "big.bin"
    target.write_bytes(b"old")
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env())
    assert proc.stdout.readline().strip() == "writing"
    assert len(list(tmp_path.iterdir())) == 2  # the temporary file exists now
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err  # SIGINT: Python re-raises an uncaught KeyboardInterrupt's signal
    assert [p.name for p in tmp_path.iterdir()] == ["big.bin"]
    assert target.read_bytes() == b"old"


def test_sigterm_handler_is_restored_after_a_write(tmp_path):
    from ffu_cvx.io import files

    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    files.atomic_write_text(tmp_path / "a.txt", "hi")
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert (tmp_path / "a.txt").read_text() == "hi"


@pytest.mark.parametrize("sig, code, line", [
    (signal.SIGINT, 130, "ffu-cvx: interrupted (Ctrl-C); no output written"),
    (signal.SIGTERM, 143, "ffu-cvx: terminated (SIGTERM); no output written")], ids=["sigint", "sigterm"])
def test_a_signal_whose_exception_a_library_swallowed_still_stops_the_command(tmp_path, monkeypatch, capsys,
                                                                                sig, code, line):
    # CVXPY logs a failed import of a solver and goes on; a Ctrl-C during its import of HiGHS
    # became such a failure, and the solve then wrote its output.
    import cvxpy

    from ffu_cvx.cli import cli

    real = cvxpy.Problem.get_problem_data

    def swallowing(self, *args, **kwargs):
        try:
            signal.raise_signal(sig)
        except BaseException:
            pass
        return real(self, *args, **kwargs)

    monkeypatch.setattr(cvxpy.Problem, "get_problem_data", swallowing)
    (tmp_path / "s.json").write_text(json.dumps({"workload": "prefix", "params": {"d": 6}}))
    out = tmp_path / "r.json"
    out.write_text("previous result\n")
    assert cli.main(["solve", str(tmp_path / "s.json"), "--method", "sdp", "--out", str(out)]) == code
    assert capsys.readouterr().err.strip().splitlines()[-1] == line
    assert out.read_text() == "previous result\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "s.json"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_signal_seen_in_a_nested_block_still_stops_the_outer_one():
    from ffu_cvx.io import files

    with files.signals_unwind():
        with files.signals_unwind():
            try:
                signal.raise_signal(signal.SIGINT)
            except KeyboardInterrupt:
                pass  # swallowed, as a library might
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        with pytest.raises(KeyboardInterrupt):
            files.raise_if_signalled()
    files.raise_if_signalled()  # the outermost block forgot it
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
