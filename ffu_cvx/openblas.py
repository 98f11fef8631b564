"""OpenBLAS's idle threads: how long they spin after a call, set before numpy loads.

Foundation layer: imports ``os`` and ``sys`` only, and must be the package's first import
(``ffu_cvx/__init__.py``), before anything loads numpy or scipy.

pip's numpy and scipy wheels each bundle their own OpenBLAS, each with its own thread
pool. After a call, OpenBLAS keeps its helper threads spinning for about 2^28 cycles
(0.1 s) in case another call follows; when the next call goes to the other library (a
scipy ``trmm``, ``cholesky`` or ``eigh`` between numpy products, as in every SM-II step)
the spinning threads take a core from it. Measured on the 2-core machine (two BLAS
threads each; ``tests`` and README "Performance: SM-II"): a float32 ``syrk`` at
k = 1011 took 0.020 s after a numpy product and 0.049 s after a scipy ``trmm``, and SM-II
on random ranges d = 1,024 (seed 0) took 16.6 s with ``OPENBLAS_THREAD_TIMEOUT=20`` (2^20
cycles, a third of a millisecond: a burst of calls to one library still finds its
threads awake) against 30.3-32.7 s unset with its Hessian products by scipy ``trmm``
and 23.4-27.4 s unset for the previous, numpy-only products.

So ``OPENBLAS_THREAD_TIMEOUT`` defaults to ``SPIN_EXPONENT`` for this process and the
processes it starts (joblib workers), unless already set. OpenBLAS reads it when it
loads: :data:`SHORT_SPIN` says whether both numpy and scipy.linalg were still to load
when this module ran, or the variable was the user's, i.e. whether the two pools can be
expected not to fight (kernels that mix the libraries check it).
"""

from __future__ import annotations

import os
import sys

__all__ = ["SPIN_EXPONENT", "SHORT_SPIN"]

#: ``OPENBLAS_THREAD_TIMEOUT``: helper threads spin for 2^this cycles after a call (OpenBLAS: 4 to 30, default 28).
#: Random ranges d = 1,024 (seed 0), two BLAS threads: 17.2 s at 4, 16.7 s at 16, 16.6 s at 20.
SPIN_EXPONENT = 20

_USERS = "OPENBLAS_THREAD_TIMEOUT" in os.environ
_LOADED = [name for name in ("numpy", "scipy.linalg") if name in sys.modules]
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", str(SPIN_EXPONENT))
#: Whether numpy's and scipy's OpenBLAS pools both spin briefly after a call (see the module docstring).
SHORT_SPIN = _USERS or not _LOADED
