"""Settings for the whole test session, applied before numpy is imported.

One BLAS thread unless the caller chose otherwise: the solvers' matrices here are small
to medium, and on a machine shared with other jobs multithreaded OpenBLAS was
pathological in our measurements (a 16 x 16 triangular solve took 14 ms instead of 0.1 ms).
Figures are drawn with the non-interactive Agg backend.
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("MPLBACKEND", "Agg")
