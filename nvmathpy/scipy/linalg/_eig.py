"""The general (non-Hermitian) eigenproblem with SciPy 1.17's signatures, results and errors:
``eig`` and ``eigvals``, standard (``?geev``) and generalized (``?ggev``).

SciPy's steps are kept - the same LAPACK wrapper called with the same arguments and workspace,
the same post-processing (eigenvalues ``alpha / beta`` with SciPy's infinities and NaNs,
conjugate pairs of real input turned into complex eigenvectors, the generalized eigenvectors
divided by their BLAS ``?nrm2``), so the results are SciPy's bit for bit - except where this
machine's calibration found MKL's ``?geev`` on one thread faster than SciPy's for the matrix's
order and dtype (:func:`nvmathpy.linalg.lapack.calibrated_mkl`; then the same LAPACK routine's
results of another library, equal to rounding) - and its Python overhead goes: the wrappers
and the workspace sizes are looked up once per dtype and order, the pairs and the
normalisation are done in whole-array operations. NumPy arrays of a LAPACK
dtype (``float32``, ``float64``, ``complex64``, ``complex128``) take this path, batches matrix
by matrix as SciPy does; every other input (array-likes, other dtypes, torch tensors) is
SciPy's own function.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ...linalg.lapack import calibrated_mkl, routines, threaded
from ._validate import LinAlgError, all_finite, over_batch, refuse_cuda, scipy_own

__all__ = ["eig", "eigvals", "lapack_input", "lapack_lwork"]

_NOT_FINITE = "array must not contain infs or NaNs"  # SciPy's message
_I = np.array(1j, dtype="F")  # SciPy's w = wr + _I * wi: its 1j is a complex64 array, whatever the real dtype


def lapack_input(x: Any) -> bool:
    """A NumPy array of a LAPACK dtype in native byte order (what the fast paths take)."""
    return type(x) is np.ndarray and x.dtype.char in "fdFD" and x.dtype.isnative


def lapack_lwork(value: Any, char: str) -> int:
    """SciPy's integer workspace size from LAPACK's (float) answer to a size query: rounded
    up past single precision's rounding for single-precision routines, as SciPy does."""
    value = float(np.real(value))
    if char in "fF":
        value = float(np.nextafter(np.float32(value), np.float32(np.inf)))
    return int(value)


@functools.lru_cache(maxsize=256)
def _geev(char: str, n: int, left: bool, right: bool) -> tuple[Callable[..., Any], int]:
    """``?geev`` of dtype ``char`` and SciPy's workspace for order ``n``."""
    geev, geev_lwork = routines(np.dtype(char), n, "geev", "geev_lwork")
    work, info = geev_lwork(n, compute_vl=int(left), compute_vr=int(right))
    if info != 0:
        raise ValueError(f"Internal work array size computation failed: {info}")
    return geev, lapack_lwork(work, char)


@functools.lru_cache(maxsize=256)
def _ggev(char: str, n: int) -> tuple[Callable[..., Any], int]:
    """``?ggev`` of dtype ``char`` and SciPy's workspace for order ``n`` (SciPy asks with the
    wrapper's default flags, whatever vectors the call computes)."""
    (ggev,) = routines(np.dtype(char), n, "ggev")
    a = np.zeros((n, n), np.dtype(char), order="F")
    return ggev, int(np.real(ggev(a, a, lwork=-1)[-2][0]))


@functools.lru_cache(maxsize=None)
def _nrm2(char: str) -> Callable[..., Any]:
    from scipy.linalg.blas import get_blas_funcs

    return get_blas_funcs("nrm2", dtype=np.dtype(char), ilp64="preferred")


def _eigvals(alpha: np.ndarray, beta: np.ndarray | None, homogeneous: bool) -> np.ndarray:
    """SciPy's eigenvalues from LAPACK's ``alpha`` (and ``beta``): ``alpha / beta``, infinite
    where only ``beta`` is zero, NaN where both are; ``(2, n)`` pairs when ``homogeneous``."""
    if homogeneous:
        return np.vstack((alpha, np.ones_like(alpha) if beta is None else beta))
    if beta is None:
        return alpha
    w = np.empty_like(alpha)
    alpha_zero, beta_zero = alpha == 0, beta == 0
    nonzero = ~beta_zero
    w[nonzero] = alpha[nonzero] / beta[nonzero]
    w[~alpha_zero & beta_zero] = np.inf
    w[alpha_zero & beta_zero] = np.nan if np.all(alpha.imag == 0) else complex(np.nan, np.nan)
    return w


def _complex_pairs(char: str, w: np.ndarray, vl: Any, vr: Any, left: bool, right: bool) -> tuple[Any, Any]:
    """The computed eigenvectors of a real problem made complex where eigenvalues came in
    conjugate pairs (as SciPy does when not every ``w.imag`` is 0, NaN included)."""
    if char in "fd" and (left or right) and w.imag.any():
        if left:
            vl = _complex_vectors(w, vl)
        if right:
            vr = _complex_vectors(w, vr)
    return vl, vr


def _complex_vectors(w: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The complex eigenvectors of real LAPACK output ``v``: columns ``i, i + 1`` of a conjugate
    pair hold the real and the imaginary part (SciPy's marking of the pairs, its guard for
    LAPACK output with the positive member second included; many well-separated pairs at once,
    the others one by one, as SciPy)."""
    out = v.astype(w.dtype)
    imag = w.imag
    if imag.ndim == 1 and imag.size <= 32:  # a short Python scan beats NumPy's calls
        x = imag.tolist()
        last = len(x) - 1
        first = [i for i in range(len(x)) if x[i] > 0 or (i < last and x[i + 1] < 0)]
    else:
        mark = imag > 0
        mark[:-1] |= imag[1:] < 0
        first = np.flatnonzero(mark).tolist()
    if len(first) > 4 and first[-1] + 1 < v.shape[1] and min(np.diff(first)) > 1:
        index = np.array(first)
        out.imag[:, index] = v[:, index + 1]
        out[:, index + 1] = out[:, index].conj()
        return out
    for i in first:
        out.imag[:, i] = v[:, i + 1]
        np.conj(out[:, i], out[:, i + 1])
    return out


def _normalise(v: np.ndarray, count: int) -> None:
    """Divide the first ``count`` columns of ``v`` by their ``?nrm2``, as SciPy's ``norm``
    (``ValueError`` for a column holding NaN or infinity, as its finiteness check)."""
    part = v[:, :count]
    if not all_finite(part):
        raise ValueError(_NOT_FINITE)
    nrm2 = _nrm2(v.dtype.char)
    part /= np.array([nrm2(part[:, i]) for i in range(count)], dtype=part.real.dtype)


def _pack(w: np.ndarray, vl: np.ndarray | None, vr: np.ndarray | None, left: bool, right: bool) -> Any:
    if not (left or right):
        return w
    if left:
        return (w, vl, vr) if right else (w, vl)
    return w, vr


def _check_info(info: int, driver: str, positive: str) -> None:
    if info < 0:
        raise ValueError(f"illegal value in argument {-info} of internal {driver}")
    if info > 0:
        raise LinAlgError(f"{driver} {positive % info}")


def _empty(a: np.ndarray, left: bool, right: bool, homogeneous: bool) -> Any:
    """SciPy's results for a ``0 x 0`` matrix (the dtypes its order-2 identity gives)."""
    w = _eigvals(np.empty((0,), np.result_type(a.dtype, np.complex64)), None, homogeneous)
    vectors = np.empty((0, 0), a.dtype)
    return _pack(w, vectors, vectors.copy(), left, right)


def _standard(a: np.ndarray, left: bool, right: bool, overwrite_a: bool, homogeneous: bool) -> Any:
    char = a.dtype.char
    if (mkl := calibrated_mkl("geev", a)) is not None:
        out = mkl(a, compute_vl=left, compute_vr=right, overwrite_a=overwrite_a)
    else:
        geev, lwork = _geev(char, a.shape[0], left, right)
        out = threaded("geev", a, lambda: geev(a, lwork=lwork, compute_vl=left, compute_vr=right,
                                               overwrite_a=overwrite_a))
    if char in "FD":
        w, vl, vr, info = out
    else:
        wr, wi, vl, vr, info = out
        w = wr + _I * wi
    w = _eigvals(w, None, homogeneous)
    _check_info(info, "eig algorithm (geev)", "did not converge (only eigenvalues with order >= %d have converged)")
    vl, vr = _complex_pairs(char, w, vl, vr, left, right)
    return _pack(w, vl, vr, left, right)


def _generalized(a: np.ndarray, b: np.ndarray, left: bool, right: bool, overwrite_a: bool, overwrite_b: bool,
                 homogeneous: bool) -> Any:
    char = np.result_type(a.dtype, b.dtype).char
    ggev, lwork = _ggev(char, a.shape[0])
    if char in "FD":
        alpha, beta, vl, vr, _, info = ggev(a, b, left, right, lwork, overwrite_a, overwrite_b)
    else:
        alphar, alphai, beta, vl, vr, _, info = ggev(a, b, left, right, lwork, overwrite_a, overwrite_b)
        alpha = alphar + _I * alphai
    w = _eigvals(alpha, beta, homogeneous)
    _check_info(info, "generalized eig algorithm (ggev)", "did not converge (LAPACK info=%d)")
    vl, vr = _complex_pairs(char, w, vl, vr, left, right)
    count = vr.shape[0]  # SciPy normalises this many columns (1 when the right vectors are not computed)
    if right:
        _normalise(vr, count)
    if left:
        _normalise(vl, count)
    return _pack(w, vl, vr, left, right)


def eig(a: Any, b: Any = None, left: bool = False, right: bool = True, overwrite_a: bool = False,
        overwrite_b: bool = False, check_finite: bool = True, homogeneous_eigvals: bool = False) -> Any:
    """Eigenvalues and eigenvectors of a general square matrix, as :func:`scipy.linalg.eig`:
    ``a @ vr[:, i] = w[i] * b @ vr[:, i]`` and ``a.conj().T @ vl[:, i] = w[i].conj() * b.conj().T
    @ vl[:, i]`` (``b`` the identity when not given).

    Parameters
    ----------
    a
        ``(M, M)`` real or complex matrix (or a batch ``(..., M, M)``).
    b
        ``(M, M)`` right-hand matrix of the generalized problem (default: the identity).
    left, right
        Return the left (default no) and the right (default yes) eigenvectors.
    overwrite_a, overwrite_b
        Let LAPACK work in the input where its layout and dtype allow it, as SciPy's.
    check_finite
        Raise ``ValueError`` when an input holds NaN or infinity.
    homogeneous_eigvals
        Return the eigenvalues as ``(2, M)`` pairs ``(alpha, beta)``, ``w = alpha / beta``.

    Returns
    -------
    w : numpy.ndarray
        ``(M,)`` (or ``(2, M)``) complex eigenvalues.
    vl : numpy.ndarray
        ``(M, M)`` left eigenvectors as columns (only with ``left``).
    vr : numpy.ndarray
        ``(M, M)`` right eigenvectors as columns, of unit norm (only with ``right``).

    Raises
    ------
    numpy.linalg.LinAlgError
        When LAPACK's iteration does not converge.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import eig
    >>> w, v = eig(np.array([[0.0, -1.0], [1.0, 0.0]]))
    >>> w
    array([0.+1.j, 0.-1.j])
    """
    if not (lapack_input(a) and (b is None or lapack_input(b))):
        refuse_cuda("eig", a, b)
        return scipy_own("_decomp", "eig")(a, b, left, right, overwrite_a, overwrite_b, check_finite,
                                           homogeneous_eigvals)
    if a.ndim > 2 or (b is not None and b.ndim > 2):  # SciPy's batches: matrix by matrix
        return over_batch(lambda a2, b2: eig(a2, b2, left, right, overwrite_a, overwrite_b, check_finite,
                                             homogeneous_eigvals), [a, b], [2, 2], "eig")
    if check_finite and not all_finite(a):
        raise ValueError(_NOT_FINITE)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError("expected square matrix")
    if a.size == 0:
        return _empty(a, left, right, homogeneous_eigvals)
    if b is None:
        return _standard(a, left, right, overwrite_a, homogeneous_eigvals)
    if check_finite and not all_finite(b):
        raise ValueError(_NOT_FINITE)
    if b.ndim != 2 or b.shape[0] != b.shape[1]:
        raise ValueError("expected square matrix")
    if b.shape != a.shape:
        raise ValueError("a and b must have the same shape")
    return _generalized(a, b, left, right, overwrite_a, overwrite_b, homogeneous_eigvals)


def eigvals(a: Any, b: Any = None, overwrite_a: bool = False, check_finite: bool = True,
            homogeneous_eigvals: bool = False) -> Any:
    """Eigenvalues of a general square matrix (or of the pencil ``(a, b)``), as
    :func:`scipy.linalg.eigvals`; the parameters are :func:`eig`'s.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import eigvals
    >>> eigvals(np.array([[3.0, 0.0], [0.0, 8.0]]))
    array([3.+0.j, 8.+0.j])
    """
    if not (lapack_input(a) and (b is None or lapack_input(b))):
        refuse_cuda("eigvals", a, b)
        return scipy_own("_decomp", "eigvals")(a, b, overwrite_a, check_finite, homogeneous_eigvals)
    if a.ndim > 2 or (b is not None and b.ndim > 2):
        return over_batch(lambda a2, b2: eig(a2, b2, False, False, overwrite_a, False, check_finite,
                                             homogeneous_eigvals), [a, b], [2, 2], "eigvals")
    return eig(a, b, False, False, overwrite_a, False, check_finite, homogeneous_eigvals)
