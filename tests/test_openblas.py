"""ffu_cvx.openblas: OpenBLAS's idle spin is shortened for processes that load ffu_cvx first."""

import os
import subprocess
import sys

from ffu_cvx import openblas


def _child(code, **env):
    environ = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    environ.update(env)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, check=True)
    return out.stdout.split()


SHOW = "import os; print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'), ffu_cvx.openblas.SHORT_SPIN)"


def test_imported_first_it_sets_the_spin_for_both_pools():
    assert _child("import ffu_cvx; " + SHOW) == [str(openblas.SPIN_EXPONENT), "True"]


def test_after_numpy_it_still_sets_the_variable_but_says_the_pools_may_fight():
    assert _child("import numpy, ffu_cvx; " + SHOW) == [str(openblas.SPIN_EXPONENT), "False"]


def test_a_users_setting_is_kept():
    assert _child("import numpy, ffu_cvx; " + SHOW, OPENBLAS_THREAD_TIMEOUT="28") == ["28", "True"]

