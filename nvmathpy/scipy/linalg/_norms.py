"""``norm`` with :func:`scipy.linalg.norm`'s signature, results and errors, faster on the calls
real code makes most: a vector's 2-norm, a matrix's Frobenius, 1- and infinity norms and the
2-norms along one axis of an array of a LAPACK dtype.

SciPy scans the whole input for NaN/Inf before computing (``numpy.asarray_chkfinite``: a
boolean array as large as the input, then a reduction). Here the norm is computed first, by
the same arithmetic SciPy uses (BLAS ``nrm2`` for a vector; NumPy's sums of squares for the
others), and the input is scanned only when that result is not finite: a finite sum of
squares proves every entry finite. Every other case is SciPy's own function.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable

import numpy as np

from ._validate import all_finite

__all__ = ["norm"]

_NOT_FINITE = "array must not contain infs or NaNs"  # SciPy's (numpy.asarray_chkfinite's) message
_sqrt = np.sqrt
_add_reduce = np.add.reduce


@functools.lru_cache(maxsize=None)
def _nrm2(char: str) -> Callable[[np.ndarray], float]:
    from scipy.linalg.blas import get_blas_funcs

    return get_blas_funcs("nrm2", dtype=np.dtype(char), ilp64="preferred")


@functools.lru_cache(maxsize=None)
def _scipy_norm() -> Callable[..., Any]:
    """SciPy's own ``norm``, from the module defining it (``scipy.linalg.norm`` may be this
    function itself when nvmathpy patches SciPy)."""
    from scipy.linalg._misc import norm as scipy_norm

    return scipy_norm


def _check(result: Any, a: np.ndarray) -> None:
    """SciPy's ``ValueError`` when ``a`` holds NaN or infinity; ``result`` (a norm of ``a``, or
    norms along an axis) settles it without a scan when finite."""
    finite = math.isfinite(result) if np.ndim(result) == 0 else bool(np.isfinite(result).all())
    if not finite and not all_finite(a):
        raise ValueError(_NOT_FINITE)


#: The matrix norms of sums of absolute values: ``ord`` -> (the axis summed, the reduction of
#: the sums), as ``numpy.linalg.norm`` computes them.
_SUMS = {1: (0, np.maximum.reduce), -1: (0, np.minimum.reduce), math.inf: (1, np.maximum.reduce),
         -math.inf: (1, np.minimum.reduce)}


@functools.lru_cache(maxsize=None)
def _lange(char: str) -> Callable[..., float]:
    from scipy.linalg.lapack import get_lapack_funcs

    return get_lapack_funcs("lange", dtype=np.dtype(char), ilp64="preferred")


def _sum_norm(a: np.ndarray, ord: float) -> Any:
    """The 1-, infinity, -1 or -infinity norm of the matrix ``a``, as SciPy computes it: LAPACK's
    ``?lange`` (a float) for the 1- and infinity norms of a matrix that is Fortran-ordered (not
    also C-ordered) or whose transpose is, else NumPy's sums (a NumPy scalar)."""
    if ord == 1 or ord == math.inf:
        which = "1" if ord == 1 else "i"
        if np.isfortran(a):
            return _lange(a.dtype.char)(which, a)
        if np.isfortran(a.T):
            return _lange(a.dtype.char)("i" if which == "1" else "1", a.T)
    axis_summed, pick = _SUMS[ord]
    return pick(_add_reduce(abs(a), axis=axis_summed), axis=0)


def _frobenius(a: np.ndarray) -> Any:
    """NumPy's norm of ``a.ravel()`` (what SciPy returns for a matrix's default norm)."""
    x = a.ravel(order="K")
    if a.dtype.kind == "c":
        re, im = x.real, x.imag
        return _sqrt(re.dot(re) + im.dot(im))
    return _sqrt(x.dot(x))


def norm(a: Any, ord: Any = None, axis: Any = None, keepdims: bool = False, check_finite: bool = True) -> Any:
    """Matrix or vector norm, as :func:`scipy.linalg.norm` (same results, types and errors).

    Parameters
    ----------
    a
        Input array; with ``axis=None`` 1-D or 2-D unless ``ord`` is None (then the 2-norm of
        ``a.ravel()``).
    ord
        ``None``, ``'fro'``, ``'nuc'``, ``inf``, ``-inf``, ``0``, ``1``, ``-1``, ``2``, ``-2``
        or another number for vectors (:func:`scipy.linalg.norm`'s table).
    axis
        An axis (vector norms along it), a pair of axes (matrix norms) or ``None``.
    keepdims
        Keep the normed axes as dimensions of size one.
    check_finite
        Raise ``ValueError`` when ``a`` holds NaN or infinity.

    Returns
    -------
    float or numpy.ndarray
        The norm, or the norms along ``axis``.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import norm
    >>> norm(np.array([3.0, 4.0]))
    5.0
    >>> norm(np.array([[1.0, 2.0], [2.0, 4.0]]))
    np.float64(5.0)
    >>> norm(np.array([[3.0, 4.0], [6.0, 8.0]]), axis=1)
    array([ 5., 10.])
    """
    if type(a) is np.ndarray and a.dtype.char in "fdFD" and a.dtype.isnative and a.size:
        if axis is None and not keepdims:
            if a.ndim == 1 and (ord is None or type(ord) is int and ord == 2):  # SciPy: BLAS nrm2
                if check_finite and not all_finite(a):
                    raise ValueError(_NOT_FINITE)
                return _nrm2(a.dtype.char)(a)
            if a.ndim == 2 and (ord is None or type(ord) is str and ord in ("fro", "f")):  # SciPy: NumPy's
                out = _frobenius(a)
                if check_finite:
                    _check(out, a)
                return out
            if a.ndim == 2 and (type(ord) is int or type(ord) is float) and ord in _SUMS:
                out = _sum_norm(a, ord)
                if check_finite:
                    _check(out, a)
                return out
        elif type(axis) is int and -a.ndim <= axis < a.ndim and (ord is None or type(ord) is int and ord == 2):
            # NumPy's vector norms along an axis, as SciPy calls them
            out = _sqrt(_add_reduce((a.conj() * a).real, axis=axis, keepdims=keepdims))
            if check_finite:
                _check(out, a)
            return out
    return _scipy_norm()(a, ord=ord, axis=axis, keepdims=keepdims, check_finite=check_finite)
