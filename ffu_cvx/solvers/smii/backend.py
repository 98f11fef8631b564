"""SM-II's array backends: numpy (the default and tested path) and, when installed, PyTorch or CuPy.

Solver layer (SM-II), bottom of the package: imports numpy, scipy, ``model.privacy``, ``model.basis`` (its
``is_identity``) and ``openblas`` (its ``SHORT_SPIN``) only;
``array_api_compat`` with ``torch`` or ``cupy`` is imported only when such a backend is
asked for (the optional extra ``pip install ffu-cvx[gpu]``).

SM-II's dense kernels (the point's Cholesky factor and profile, the whitened gradient,
the Hessian products, the preconditioner's eigendecomposition, CG and the line search)
are written once against an array namespace ``xp`` and take it from their arrays
(:func:`of`), so the same code runs wherever the arrays live: on numpy ``xp`` is numpy
itself (so the default path calls exactly the numpy and scipy functions it always
did), elsewhere the array-API namespace of array-api-compat. What the array API
leaves out, each :class:`Backend` adds: ``cholesky`` (``None`` when the matrix is not
positive definite), ``spd_inverse``, a lower ``solve_triangular`` (optionally transposed), ``eigh``,
``einsum``, ``diag``, ``maximum`` / ``minimum`` (with a Python float, which
array-api-compat 1.15's torch ``maximum`` refuses), ``arange`` (on an array's device),
``queries`` (how ``L`` is held: numpy keeps a sparse ``L`` as
CSR and a triangular one as :class:`TriangularQueries`), ``variances``
(``diag(L S L^T)``), ``inner``, the float32 /
float64 casts and the products of the float32 step solver: ``gram`` (``A diag(w) A^T``
for any signs of ``w``; numpy: BLAS ``syrk``), ``triangular_times`` (``R X`` for
triangular ``R``; numpy: BLAS ``trmm``), ``congruence`` (``X E X^T``; numpy: one
``trmm`` and one product), ``quadratic_forms`` (``diag(W^T E W)``;
numpy: one ``trmm`` on ``E``'s lower triangle) and ``rotated_single`` (the float32 array
``[Q^T Y, V^T]``). numpy's ``solve_triangular`` inverts by LAPACK ``trtri`` when the
right-hand side is the identity (:func:`lower_inverse`). The arrays also need
numpy-style boolean column masks, which torch and CuPy support.

:func:`select` turns the option ``array_backend`` into a backend: ``"numpy"``,
``"torch"`` (CUDA when available, else the CPU), ``"torch:cpu"``, ``"torch:cuda"`` or
``"cupy"``, all in float64. The start (from ``LARGE_K``, k = 1,000) and the cheap certificate run on the backend too
(:class:`Placed` gives :mod:`ffu_cvx.model.certificate` the arrays and kernels there); the dual
ascent, the polish and the Solution stay on numpy in float64: the driver moves arrays back
with :meth:`Backend.to_numpy`.
"""

from __future__ import annotations

import functools
import importlib

import numpy as np
from scipy import linalg, sparse
from scipy.linalg import blas, lapack

from ... import openblas
from ...model import privacy
from ...model.basis import is_identity

__all__ = ["BACKENDS", "LARGE_K", "Backend", "Placed", "TriangularQueries", "NUMPY", "available", "of", "select"]

#: The values of the option ``array_backend``.
BACKENDS = ("numpy", "torch", "torch:cpu", "torch:cuda", "cupy")
#: What the non-numpy backends need, for the error message and the optional extra.
INSTALL_HINT = "pip install 'ffu-cvx[gpu]' (array-api-compat) plus torch or cupy"


#: From this basis size (the order of the (k, k) arrays) on, numpy takes its structured kernels;
#: below it numpy keeps the dense path (scipy's triangular solve, general products), which the
#: torch backend matches to 1e-10 over a whole run (tests/test_smii_backends.py), and the
#: structured kernels would save milliseconds at most. The structured kernels:
#:
#: - identity solves ``R^{-1} I`` by LAPACK ``trtri`` (:meth:`Backend.solve_triangular`,
#:   :func:`lower_inverse`), equal to the solve to rounding;
#: - a query matrix ``L`` (m, k) with at most ``SPARSE_MAX_DENSITY`` of its entries non-zero
#:   held as a CSR array (:meth:`Backend.queries`): ``L X`` and ``diag(L S L^T)`` then cost
#:   O(nnz k) instead of O(m k^2);
#: - a dense triangular ``L`` (k, k) (prefix on the identity basis) held as
#:   :class:`TriangularQueries`, whose products are BLAS ``trmm`` (half a product's flops);
#: - a direction mapped back (:meth:`Backend.congruence`, ``X E X^T``) by one ``trmm`` and one
#:   product;
#: - on an accelerator backend the start (:func:`ffu_cvx.solvers.smii.model.initial_sigma`), computed
#:   on its device; below this size on numpy and moved there;
#: - each sub-problem starting from the last point rescaled, not factored afresh (the option ``rescale``).
#:
#: :class:`Backend` takes its own threshold (``large_k``); :data:`NUMPY` has this one.
LARGE_K = 1000
#: numpy holds ``L`` as CSR (see ``LARGE_K``) when at most this fraction of its entries is non-zero
#: (denser, CSR products are no faster than dense ones).
SPARSE_MAX_DENSITY = 0.03


class Backend:
    """numpy's kernels: exactly the scipy / numpy calls of the original solver.

    ``large_k``: the order from which the structured kernels run (see ``LARGE_K``);
    ``sparse_density``: the largest fraction of non-zero entries of a query matrix held as
    CSR (``SPARSE_MAX_DENSITY``). :data:`NUMPY` has the defaults; another instance chooses
    the kernels at any size (the tests check each kernel against the dense path at small k).
    """

    name = "numpy"
    xp = np
    einsum = staticmethod(np.einsum)
    diag = staticmethod(np.diag)

    def __init__(self, large_k: int = LARGE_K, sparse_density: float = SPARSE_MAX_DENSITY):
        self.large_k, self.sparse_density = large_k, sparse_density

    def asarray(self, x):
        """``x`` as a float64 array of this backend (a numpy array: itself)."""
        return np.asarray(x, dtype=float)

    def queries(self, L):
        """The query matrix ``L`` (m, k) as SM-II multiplies it: a CSR array when it is sparse
        (at most ``sparse_density`` of its entries non-zero), a :class:`TriangularQueries` when it
        is square and triangular, else the float64 array; the first two from ``k = large_k`` on.
        Each gives ``L @ X`` (dense) and :meth:`variances`."""
        L = self.asarray(L)
        if L.shape[1] >= self.large_k and np.count_nonzero(L) <= self.sparse_density * L.size:
            return sparse.csr_array(L)
        if L.shape[0] == L.shape[1] >= self.large_k:
            for lower in (True, False):
                if not np.any(np.triu(L, 1) if lower else np.tril(L, -1)):
                    return TriangularQueries(L, lower)
        return L

    def variances(self, L, S):
        """``diag(L S L^T)`` (m,) for ``L`` (m, k), dense or CSR (:meth:`queries`), and ``S`` (k, k)."""
        if sparse.issparse(L):
            return np.asarray(L.multiply(L @ S).sum(axis=1)).ravel()
        if isinstance(L, TriangularQueries):
            return np.einsum("ij,ij->i", L @ S, L.array)
        return privacy.variances(L, S)

    def to_numpy(self, x) -> np.ndarray:
        """``x`` as a numpy array on the host."""
        return np.asarray(x)

    def cholesky(self, A):
        """The lower Cholesky factor of ``A``, or ``None`` when it is not positive definite."""
        try:
            R = linalg.cholesky(A, lower=True, check_finite=False)
        except linalg.LinAlgError:
            return None
        return R if np.all(np.isfinite(np.diag(R))) else None

    def solve_triangular(self, R, B, trans: bool = False):
        """``R^{-1} B`` (``R^{-T} B`` with ``trans``) for lower triangular ``R``.

        ``B`` the identity (the identity basis: prefix, the range basis of a full-rank
        workload) of order at least ``large_k``: ``R^{-1}`` by LAPACK
        ``trtri`` (:func:`lower_inverse`), a third of the solve's flops.
        """
        if (not trans and R.shape[0] >= self.large_k and isinstance(B, np.ndarray)
                and B.shape == R.shape and is_identity(B)):
            return lower_inverse(R)
        if trans:
            return linalg.solve_triangular(R, B, lower=True, trans="T", check_finite=False)
        return linalg.solve_triangular(R, B, lower=True, check_finite=False)

    def eigh(self, M):
        """``(eigenvalues ascending, eigenvectors)`` of the symmetric ``M``."""
        return linalg.eigh(M, check_finite=False, driver="evd")

    def spd_inverse(self, A):
        """``A^{-1}`` for a symmetric positive definite ``A``, or ``None`` when it is not."""
        C = self.cholesky(A)
        return None if C is None else linalg.cho_solve((C, True), np.eye(len(A)), check_finite=False)

    def inner(self, X, Y) -> float:
        """The Frobenius inner product ``<X, Y>``."""
        return float(np.vdot(X, Y))

    def maximum(self, x, y):
        """The elementwise larger of ``x`` (an array) and ``y`` (an array or a Python float)."""
        return np.maximum(x, y)

    def minimum(self, x, y):
        """The elementwise smaller of ``x`` (an array) and ``y`` (an array or a Python float)."""
        return np.minimum(x, y)

    def arange(self, n: int, like):
        """``0, 1, ..., n - 1`` as an integer array on ``like``'s device."""
        return np.arange(n)

    def single(self, x):
        return x.astype(np.float32, copy=False)

    def double(self, x):
        return x.astype(np.float64, copy=False)

    def gram(self, A, w, trans: bool = False):
        """``A diag(w) A^T`` (``A^T diag(w) A`` with ``trans``), symmetric, for ``w`` of any signs.

        ``S S^T`` per sign of ``w``, ``S`` the columns (rows) of ``A`` scaled by
        ``sqrt(|w|)``: numpy evaluates a product with its own transpose by BLAS ``syrk``,
        in about half the time of ``(A * w) @ A.T``. ``A`` and ``w`` of one dtype.
        """
        out = None
        for sign in (1.0, -1.0):
            sel = np.flatnonzero(sign * w > 0)
            if sel.size == 0:
                continue
            # np.take: far faster than a boolean column mask.
            root = np.sqrt(sign * w[sel])
            root = root[:, None] if trans else root
            if sel.size == w.size:
                S = A * root
            else:
                S = np.take(A, sel, axis=0 if trans else 1)
                S *= root  # a fresh copy: scaled in place
            part = _self_product(S, trans)
            del S
            if out is None:
                out = part if sign > 0 else np.negative(part, out=part)
            else:
                out -= part  # the second pass is the negative one
        n = A.shape[1] if trans else A.shape[0]
        return np.zeros((n, n), dtype=A.dtype) if out is None else out

    def rotated_single(self, Q, Y, V):
        """``[Q^T Y, V^T]`` (k, d + m) in float32 for ``Q`` (k, k), ``Y`` (k, d), ``V`` (m, k).

        The float32 step solver's array ``W`` in the turned frame: ``Q^T Y`` by one float32
        ``gemm`` written into the stacked array (no float64 rotation, concatenation and cast).
        Entries carry float32 product rounding, a direction's error, never the gradient's.
        """
        k, d = Y.shape
        W = np.empty((k, d + V.shape[0]), dtype=np.float32)
        np.matmul(self.single(Q).T, self.single(Y), out=W[:, :d])
        W[:, d:] = V.T
        return W

    def congruence(self, X, E):
        """``X E X^T`` (k, k), exactly symmetric, for ``X`` (k, k) and a symmetric ``E`` (k, k).

        From order ``large_k`` on: ``E = A + A^T`` with ``A`` the lower triangle of
        ``E`` and half its diagonal, so ``X E X^T = S + S^T`` with ``S = (X A) X^T``:
        ``X A`` is a ``trmm`` (half a product's flops), so the whole costs 1.5 products, not 2.
        """
        if X.shape[0] < self.large_k:
            return _congruence_products(X, E)
        A = _half_lower(E)
        trmm = blas.get_blas_funcs("trmm", (A, X))
        # X A = (A^T X^T)^T; with C-ordered A and X their transposes are Fortran-ordered.
        S = trmm(1.0, A.T, X.T, side=0, lower=0).T @ X.T
        return S + S.T

    def triangular_times(self, R, X, lower: bool = True):
        """``R X`` for lower (``lower=False``: upper) triangular ``R`` (BLAS ``trmm``: half a product's flops)."""
        trmm = blas.get_blas_funcs("trmm", (R, X))
        # R X = (X^T R^T)^T; with C-ordered R and X their transposes are Fortran-ordered.
        return trmm(1.0, R.T, X.T, side=1, lower=0 if lower else 1).T

    def quadratic_forms(self, E, W, width: int, trmm: bool | None = None):
        """``diag(W^T E W)`` (n,) for a symmetric ``E`` (k, k) and ``W`` (k, n), ``width`` columns at a time.

        ``E = A + A^T`` with ``A`` the lower triangle of ``E`` and half its diagonal, so
        ``w^T E w = 2 w^T A w`` and ``A W`` is a (scipy) ``trmm``: half the flops of
        ``E W``, equal to numpy's ``gemm`` blocks to float32 rounding. Only when numpy's and
        scipy's OpenBLAS pools do not fight (``openblas.SHORT_SPIN``): otherwise the ``trmm``
        is slower and slows the numpy products after it, so numpy's ``gemm`` blocks are used.
        ``trmm``: the ``trmm`` route (True) or the ``gemm`` blocks (False) whatever the pools;
        None: as ``openblas.SHORT_SPIN`` says.
        """
        if not (openblas.SHORT_SPIN if trmm is None else trmm):
            return _block_forms(E.__matmul__, W, width)
        A = _half_lower(E)
        out = _block_forms(lambda X: self.triangular_times(A, X), W, width)
        out *= 2.0
        return out


def lower_inverse(R: np.ndarray) -> np.ndarray:
    """``R^{-1}`` (lower triangular) of a lower triangular ``R`` with a non-zero diagonal, by LAPACK ``trtri``.

    About three times faster than ``solve_triangular(R, I)``; the two agree to rounding
    (``trtri`` computes the inverse column by column from the same triangle). The strict
    upper triangle of the result is zero, whatever ``R`` holds there.
    """
    # trtri works on the Fortran-ordered triangle in place of a copy: R lower (Fortran) or R^T upper.
    upper = not R.flags.f_contiguous
    trtri = lapack.get_lapack_funcs("trtri", (R,))
    inv, info = trtri(R.T if upper else R, lower=0 if upper else 1)
    if info != 0:
        raise np.linalg.LinAlgError(f"lower_inverse: R[{info - 1}, {info - 1}] is zero")
    # Zero the other triangle, column by column (contiguous slices in Fortran order).
    for j in range(inv.shape[0]):
        if upper:
            inv[j + 1:, j] = 0.0
        else:
            inv[:j, j] = 0.0
    return inv.T if upper else inv


def _half_lower(E: np.ndarray) -> np.ndarray:
    """``A`` (k, k): the lower triangle of the symmetric ``E`` with half its diagonal, so ``E = A + A^T``."""
    A = np.tril(E)
    i = np.arange(A.shape[0])
    A[i, i] *= 0.5
    return A


def _congruence_products(X, E):
    """``X E X^T`` by two products, symmetrised (any backend's arrays)."""
    S = X @ E @ X.T
    return 0.5 * (S + S.T)


def _block_forms(times, W, width: int, concat=np.concatenate, einsum=np.einsum):
    """``diag(W^T T W)`` (n,) for ``times(X) = T X``, on ``width``-column blocks of ``W`` (k, n)."""
    return concat([einsum("ij,ij->j", W[:, j:j + width], times(W[:, j:j + width])) for j in range(0, W.shape[1], width)])


def _self_product(S, trans: bool):
    """``S^T S`` (``trans``) or ``S S^T``: one operand the other's transpose, which numpy hands to ``syrk``."""
    return S.T @ S if trans else S @ S.T


#: The default backend.
NUMPY = Backend()


class TriangularQueries:
    """A dense lower (``lower=False``: upper) triangular query matrix ``array`` (k, k) on
    numpy whose products ``L @ X`` (X (k, n) float64) are BLAS ``trmm``
    (:meth:`Backend.triangular_times`)."""

    def __init__(self, array: np.ndarray, lower: bool):
        self.array, self.lower, self.shape = array, lower, array.shape

    def __matmul__(self, X):
        return NUMPY.triangular_times(self.array, X, self.lower)


class ArrayAPIBackend(Backend):
    """A non-numpy backend through array-api-compat's namespace ``xp`` of ``lib`` (torch or cupy)."""

    def __init__(self, name: str, lib, xp):
        super().__init__()
        self.name, self.lib, self.xp = name, lib, xp
        self.einsum, self.diag = lib.einsum, lib.diag

    def queries(self, L):
        return self.asarray(L)

    def variances(self, L, S):
        return self.einsum("ij,ij->i", L @ S, L)

    def inner(self, X, Y) -> float:
        xp = self.xp
        return float(xp.vecdot(xp.reshape(X, (-1,)), xp.reshape(Y, (-1,))))

    def eigh(self, M):
        return tuple(self.xp.linalg.eigh(M))

    def spd_inverse(self, A):
        C = self.cholesky(A)
        if C is None:
            return None
        inverse = self.solve_triangular(C, self.xp.eye(A.shape[0], dtype=A.dtype, device=A.device))
        return inverse.T @ inverse

    def maximum(self, x, y):
        return self.xp.maximum(x, self._like(x, y))

    def minimum(self, x, y):
        return self.xp.minimum(x, self._like(x, y))

    def arange(self, n: int, like):
        return self.xp.arange(n, device=like.device)

    def _like(self, x, y):
        """``y`` as a 0-d array of ``x``'s dtype and device, broadcast by the caller (array-api-compat's
        torch ``maximum`` takes no Python scalar)."""
        return self.xp.asarray(y, dtype=x.dtype, device=x.device) if isinstance(y, (int, float)) else y

    def single(self, x):
        return self.xp.astype(x, self.xp.float32, copy=False)

    def gram(self, A, w, trans: bool = False):
        return (A.T * w) @ A if trans else (A * w) @ A.T

    def triangular_times(self, R, X, lower: bool = True):
        return R @ X

    def congruence(self, X, E):
        return _congruence_products(X, E)

    def quadratic_forms(self, E, W, width: int):
        return _block_forms(E.__matmul__, W, width, self.xp.concat, self.einsum)

    def rotated_single(self, Q, Y, V):
        return self.single(self.xp.concat([Q.T @ Y, V.T], axis=1))

    def double(self, x):
        return self.xp.astype(x, self.xp.float64, copy=False)

    def finite_factor(self, R):
        xp = self.xp
        return R if bool(xp.all(xp.isfinite(xp.linalg.diagonal(R)))) else None


class Placed:
    """``B`` (k, d) and ``L`` (m, k) on the backend ``bk``, with the kernels that
    :func:`ffu_cvx.model.certificate.lower_bound` and :func:`~ffu_cvx.model.certificate.dual_sigma` call
    (:class:`ffu_cvx.model.certificate.HostAlgebra`'s attributes), so that an accelerator backend
    certifies and starts on its device: host multipliers in, host numbers out (k eigen- or
    singular values, never a (k, k) array)."""

    def __init__(self, bk: Backend, B, L):
        self.bk, self.B, self.L = bk, B, L
        self.asarray, self.eigh, self.inner = bk.asarray, bk.eigh, bk.inner

    def factors(self, lam: np.ndarray, mu: np.ndarray):
        """``(G, H)``: the columns of ``B`` and rows of ``L`` of positive weight, scaled by its square root."""
        return _scaled_support(self.bk, self.B, lam, 1), _scaled_support(self.bk, self.L, mu, 0).T

    def qr_r(self, A):
        return self.bk.xp.linalg.qr(A)[1]

    def cholesky_upper(self, A):
        R = self.bk.cholesky(A)
        return None if R is None else R.T

    def eigvalsh(self, A) -> np.ndarray:
        return self.bk.to_numpy(self.bk.xp.linalg.eigvalsh(A))

    def svdvals(self, X) -> np.ndarray:
        return self.bk.to_numpy(self.bk.xp.linalg.svdvals(X))


def _scaled_support(bk: Backend, A, weights: np.ndarray, axis: int):
    """The slices of ``A`` along ``axis`` whose host ``weights`` are positive, times their square roots."""
    keep = np.flatnonzero(weights > 0)
    root = bk.asarray(np.sqrt(weights[keep]))
    if len(keep) < len(weights):
        A = bk.xp.take(A, bk.xp.asarray(keep, device=A.device), axis=axis)
    return A * root if axis == 1 else A * root[:, None]


class TorchBackend(ArrayAPIBackend):
    """PyTorch on one device (``"cpu"`` or ``"cuda"``)."""

    def __init__(self, device: str):
        import array_api_compat.torch as xp
        import torch

        super().__init__(f"torch:{device}", torch, xp)
        self.device = torch.device(device)

    def asarray(self, x):
        return self.lib.tensor(np.asarray(x, dtype=float), dtype=self.lib.float64, device=self.device)

    def to_numpy(self, x) -> np.ndarray:
        return x.detach().cpu().numpy() if isinstance(x, self.lib.Tensor) else np.asarray(x)

    def cholesky(self, A):
        R, info = self.lib.linalg.cholesky_ex(A)
        return self.finite_factor(R) if int(info) == 0 else None

    def solve_triangular(self, R, B, trans: bool = False):
        solve = self.lib.linalg.solve_triangular
        return solve(R.mT, B, upper=True) if trans else solve(R, B, upper=False)


class CupyBackend(ArrayAPIBackend):
    """CuPy on the current CUDA device."""

    def __init__(self):
        import array_api_compat.cupy as xp
        import cupy
        import cupyx.scipy.linalg

        super().__init__("cupy", cupy, xp)
        self.triangular = cupyx.scipy.linalg.solve_triangular

    def asarray(self, x):
        return self.lib.asarray(np.asarray(x, dtype=float))

    def to_numpy(self, x) -> np.ndarray:
        return self.lib.asnumpy(x)

    def cholesky(self, A):
        # CuPy returns NaNs (or raises numpy's LinAlgError under cupyx.errstate) when A is not definite.
        try:
            R = self.lib.linalg.cholesky(A)
        except np.linalg.LinAlgError:
            return None
        return self.finite_factor(R)

    def solve_triangular(self, R, B, trans: bool = False):
        return self.triangular(R, B, trans="T" if trans else 0, lower=True)


def _importable(*modules: str) -> bool:
    """Whether every module imports (a missing or broken install is not usable)."""
    try:
        for name in modules:
            importlib.import_module(name)
    except ImportError:
        return False
    return True


def available() -> tuple[str, ...]:
    """The values of ``array_backend`` usable here (torch and cupy need array-api-compat;
    ``"torch:cuda"`` and ``"cupy"`` a CUDA device). Imports torch and cupy when installed."""
    names = ["numpy"]
    if _importable("array_api_compat", "torch"):
        names += ["torch", "torch:cpu"]
        if _torch_cuda():
            names.append("torch:cuda")
    if _importable("array_api_compat", "cupy") and _cupy_device():
        names.append("cupy")
    return tuple(names)


def _torch_cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _cupy_device() -> bool:
    import cupy

    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except cupy.cuda.runtime.CUDARuntimeError:
        return False


def check(name, option: str = "array_backend") -> str:
    """``name`` if it is a backend usable here; else a ``ValueError`` naming ``option`` and the installed choices."""
    if name == "numpy":
        return name
    if not isinstance(name, str) or name not in BACKENDS:
        raise ValueError(f"`{option}` must be one of {BACKENDS}, got {name!r}; installed here: {available()}")
    usable = available()
    if name not in usable:
        raise ValueError(f"`{option}` = {name!r} is not usable here (not installed, or no CUDA device); installed "
                         f"choices: {usable}; for torch or cupy: {INSTALL_HINT}")
    return name


def select(name: str) -> Backend:
    """The backend called ``name`` (checked by :func:`check`)."""
    name = check(name)
    if name == "numpy":
        return NUMPY
    if name == "cupy":
        return _cupy()
    device = name.partition(":")[2] or ("cuda" if _torch_cuda() else "cpu")
    return _torch(device)


@functools.lru_cache(maxsize=None)
def _torch(device: str) -> TorchBackend:
    return TorchBackend(device)


@functools.lru_cache(maxsize=1)
def _cupy() -> CupyBackend:
    return CupyBackend()


def of(x) -> Backend:
    """The backend whose arrays ``x`` is one of: numpy for a numpy array (or a scipy sparse
    one or a :class:`TriangularQueries`, :meth:`Backend.queries`), else torch (on ``x``'s device) or cupy."""
    if isinstance(x, (np.ndarray, TriangularQueries)) or sparse.issparse(x):
        return NUMPY
    kind = type(x).__module__.partition(".")[0]
    if kind == "torch":
        return _torch(x.device.type)
    if kind == "cupy":
        return _cupy()
    raise TypeError(f"SM-II kernels take numpy, torch or cupy arrays, got {type(x).__name__}")
