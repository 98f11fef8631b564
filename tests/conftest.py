"""Settings for the whole test session, applied before numpy is imported.

One BLAS thread unless the caller chose otherwise: the solvers' matrices here are small
to medium, and on a machine shared with other jobs multithreaded OpenBLAS was
pathological in our measurements (a 16 x 16 triangular solve took 14 ms instead of 0.1 ms).
Figures are drawn with the non-interactive Agg backend; SIGINT gets Python's default
handler even when the run was started with it ignored. Experiments run by the tests
write under a session tmp folder (``experiments.paths.ENV``), never into the clone.
"""

import os
import signal

import pytest

# A test run started in the background of a non-interactive shell inherits SIGINT ignored,
# and so would every subprocess the interrupt tests start: give them Python's default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(autouse=True, scope="session")
def _experiment_outputs_in_tmp(tmp_path_factory):
    """Point every experiment the tests run at a tmp folder (tests may override it)."""
    from experiments import paths

    os.environ[paths.ENV] = str(tmp_path_factory.mktemp("experiments"))
