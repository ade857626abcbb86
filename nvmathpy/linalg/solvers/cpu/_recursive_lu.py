"""Recursive LU with partial pivoting on NumPy's OpenBLAS: ``getrf`` built from BLAS-3 calls.

OpenBLAS's own ``?getrf`` parallelises poorly on a few cores: a second thread helps it far
less than it helps a product of the same order. Splitting the columns in halves (Toledo's
recursion) puts almost all the work into two large calls per level, a triangular solve and a
matrix product, which OpenBLAS runs on every core at full speed; only narrow panels
(:data:`LEAF` columns) go to ``?getrf`` itself. ``benchmarks/bench_linalg.py --only engines``
times it against ``?getrf``.

The pivots are chosen as LAPACK chooses them (the largest magnitude in the column, first
one on ties), so the factors and pivots are LAPACK's, up to rounding. The row interchanges
reach the columns outside a panel a recursion level at a time (a half's interchanges applied
to the other half in one ``?laswp`` call), not a panel at a time: with the matrix in column
order each such call is a pass over the columns it touches, and this makes ``log2(n / LEAF)``
passes per column instead of one per panel (applied per panel, the interchanges are a large
share of the factorization's time). A call runs on the cores free at its start
(:func:`._pool_threads.stepped_down`).
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any, Callable

import numpy as np

from ._numpy_lapack import FROM_ORDER, _PREFIX, _fortran, _scipy_symbol, _symbol, available, dtype_name, scipy_exports
from ._pool_threads import BUSY_LEARN_FROM, NUMPY, SCIPY, only_hot, stepped_down

__all__ = ["LEAF", "UP_TO", "recursive_available", "recursive_first", "recursive_getrf", "scipy_recursion_fits",
           "scipy_recursive_available", "scipy_recursive_getrf", "scipys_getrf_or_recursion"]

#: Columns of the panels handed to ``?getrf`` itself (narrower panels do not time better).
LEAF = 128

#: Up to this order the recursion is preferred to OpenBLAS's ``?getrf`` for real matrices (the
#: look-ahead LU of :mod:`._lookahead_lu` comes before both from n = 768 in float64): beyond
#: it OpenBLAS's ``?getrf`` catches up, its panels being a smaller share of the work. Complex
#: matrices stay on ``?getrf`` first (their products are denser work, which OpenBLAS's own
#: panels already keep busy).
UP_TO = 1024

_ROUTINES = ("getrf", "laswp", "trsm", "gemm")
_SCALAR = {"s": ctypes.c_float, "d": ctypes.c_double, "c": ctypes.c_float * 2, "z": ctypes.c_double * 2}


def recursive_available(dtype: Any) -> bool:
    """Whether NumPy's OpenBLAS exports what the recursion calls for ``dtype``."""
    return available(dtype, "getrf") and all(_symbol(_PREFIX[dtype_name(dtype)] + r) is not None
                                             for r in _ROUTINES[1:])


def scipy_recursive_available(dtype: Any) -> bool:
    """Whether SciPy's OpenBLAS is loaded and exports what the recursion calls for ``dtype``
    (real and complex LAPACK dtypes)."""
    prefix = _PREFIX.get(dtype_name(dtype))
    return prefix is not None and scipy_exports(tuple(prefix + r for r in _ROUTINES))


def scipy_recursive_getrf(dtype: Any) -> Callable[..., tuple[np.ndarray, np.ndarray, int]]:
    """:func:`recursive_getrf` on SciPy's OpenBLAS: for a factorization that starts while
    SciPy's pool alone spins (right after a SciPy call), where SciPy's own ``?getrf`` would run
    on the same threads with the panels that keep them waiting. Check
    :func:`scipy_recursive_available` first.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.linalg  # noqa: F401  (SciPy's OpenBLAS loaded)
    >>> a = np.array([[1.0, 2.0], [3.0, 4.0]], order="F")
    >>> if scipy_recursive_available(a.dtype):
    ...     lu, piv, info = scipy_recursive_getrf(a.dtype)(a)
    ... else:
    ...     (lu, piv), info = scipy.linalg.lu_factor(a), 0
    >>> piv.tolist(), info
    ([1, 1], 0)
    """
    return _recursive_getrf(dtype_name(dtype), "scipy")


def scipy_recursion_fits(n: int, dtype: Any) -> bool:
    """Whether an ``n x n`` ``getrf`` of ``dtype`` started while SciPy's pool alone spins runs
    as the recursion on SciPy's OpenBLAS (:func:`scipy_recursive_getrf`): real dtypes up to
    :data:`UP_TO`, where the recursion puts the work into products and triangular solves that
    OpenBLAS runs on every thread (``benchmarks/bench_linalg.py --only targets --mode
    interleaved`` measures such calls right after SciPy's)."""
    return np.dtype(dtype).kind == "f" and n <= UP_TO and scipy_recursive_available(dtype)


def scipys_getrf_or_recursion(getrf: Callable[..., Any], dtype: Any
                              ) -> Callable[..., tuple[np.ndarray, np.ndarray, int]]:
    """SciPy's ``getrf`` wrapper ``getrf`` on the cores free at a call's start (which learns
    SciPy's workers), but a call started while SciPy's pool alone spins runs as
    :func:`scipy_recursive_getrf` (for orders where :func:`scipy_recursion_fits`)."""
    recursion = scipy_recursive_getrf(dtype)

    def factor(a: np.ndarray, overwrite_a: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
        if only_hot(SCIPY):
            return recursion(a, overwrite_a)
        return stepped_down(lambda: getrf(a, overwrite_a=overwrite_a), (SCIPY,), busy_learn=a.size >= BUSY_LEARN_FROM)

    return factor


def recursive_first(n: int, dtype: Any) -> bool:
    """Whether an ``n x n`` factorization of ``dtype`` should try the recursion first (from
    NumPy's threshold :data:`~._numpy_lapack.FROM_ORDER` up to :data:`UP_TO`, real dtypes)."""
    dtype = np.dtype(dtype)
    return FROM_ORDER <= n <= UP_TO and dtype.kind == "f" and recursive_available(dtype)


def _scalar(prefix: str, value: float) -> Any:
    kind = _SCALAR[prefix]
    return kind(value, 0.0) if prefix in "cz" else kind(value)


def recursive_getrf(dtype: Any) -> Callable[..., tuple[np.ndarray, np.ndarray, int]]:
    """An f2py-compatible ``getrf(a, overwrite_a=0) -> (lu, piv, info)`` for ``dtype`` that
    factors recursively (``piv`` 0-based int32, ``info`` the first zero pivot, 1-based, as
    SciPy's wrapper returns them). Check :func:`recursive_available` first.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.array([[1.0, 2.0], [3.0, 4.0]], order="F")
    >>> if recursive_available(a.dtype):
    ...     lu, piv, info = recursive_getrf(a.dtype)(a)
    ... else:
    ...     from scipy.linalg import lu_factor
    ...     (lu, piv), info = lu_factor(a), 0
    >>> piv.tolist(), info, np.round(lu, 12).tolist()
    ([1, 1], 0, [[3.0, 4.0], [0.333333333333, 0.666666666667]])
    """
    return _recursive_getrf(dtype_name(dtype), "numpy")


@functools.lru_cache(maxsize=None)
def _recursive_getrf(dtype_name: str, library: str) -> Callable[..., tuple[np.ndarray, np.ndarray, int]]:
    """The recursion on ``library``'s OpenBLAS (``"numpy"`` or ``"scipy"``) on the cores free at
    its start; NumPy's on SciPy's instead while SciPy's pool alone spins."""
    recursive = _recursion(dtype_name, library)
    pools = (NUMPY,) if library == "numpy" else (SCIPY,)

    def factor(a: np.ndarray, overwrite_a: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
        on_scipy = (_recursion(dtype_name, "scipy") if library == "numpy" and scipy_recursive_available(dtype_name)
                    else None)
        return stepped_down(lambda: recursive(a, overwrite_a), pools,
                            instead=on_scipy and (lambda: on_scipy(a, overwrite_a)),
                            busy_learn=a.size >= BUSY_LEARN_FROM)

    return factor


@functools.lru_cache(maxsize=None)
def _recursion(dtype_name: str, library: str) -> Callable[..., tuple[np.ndarray, np.ndarray, int]]:
    """``recursive(a, overwrite_a)``: the recursion itself on ``library``'s OpenBLAS, on its
    threads as they are set."""
    dtype = np.dtype(dtype_name)
    prefix = _PREFIX[dtype_name]
    symbol = _symbol if library == "numpy" else _scipy_symbol
    (getrf, integer), (laswp, _), (trsm, _), (gemm, _) = (symbol(prefix + r) for r in _ROUTINES)
    index = np.dtype(np.int64 if integer is ctypes.c_int64 else np.int32)
    item = dtype.itemsize
    one, minus_one = ctypes.byref(_scalar(prefix, 1.0)), ctypes.byref(_scalar(prefix, -1.0))
    left, lower, no, unit = (ctypes.c_char_p(c) for c in (b"L", b"L", b"N", b"U"))
    step = ctypes.byref(integer(1))

    def recursive(a: np.ndarray, overwrite_a: int) -> tuple[np.ndarray, np.ndarray, int]:
        lu = _fortran(a, dtype, bool(overwrite_a))
        m, n = lu.shape
        k = min(m, n)
        ipiv = np.zeros(k, index)
        base, pivots, ld = lu.ctypes.data, ipiv.ctypes.data, max(1, m)
        lda = ctypes.byref(integer(ld))
        first_zero = [0]

        def at(i: int, j: int) -> ctypes.c_void_p:
            return ctypes.c_void_p(base + (i + j * ld) * item)

        def swap_rows(cols: int, col: int, j0: int, j1: int) -> None:
            """Apply the interchanges of rows j0+1..j1 (ipiv, 1-based, global) to ``cols`` columns from ``col``."""
            if cols > 0:
                laswp(ctypes.byref(integer(cols)), at(0, col), lda, ctypes.byref(integer(j0 + 1)),
                      ctypes.byref(integer(j1)), ctypes.c_void_p(pivots), step)

        def panel(j0: int, cols: int) -> None:
            info = integer(0)
            getrf(ctypes.byref(integer(m - j0)), ctypes.byref(integer(cols)), at(j0, j0), lda,
                  ctypes.c_void_p(pivots + j0 * index.itemsize), ctypes.byref(info))
            if info.value > 0 and not first_zero[0]:
                first_zero[0] = j0 + info.value
            ipiv[j0:j0 + cols] += j0

        def columns(j0: int, cols: int) -> None:
            """Factor columns j0..j0+cols (rows j0..m); their rows are interchanged within these
            columns only (the columns outside get them from the caller, a level at a time)."""
            if cols <= LEAF:
                panel(j0, cols)
                return
            half = -(-cols // 2 // LEAF) * LEAF if cols > 2 * LEAF else cols // 2
            columns(j0, half)
            rest = cols - half
            swap_rows(rest, j0 + half, j0, j0 + half)  # the left half's interchanges, on the right half
            # U12 = L11^-1 A12, then A22 -= L21 U12
            trsm(left, lower, no, unit, ctypes.byref(integer(half)), ctypes.byref(integer(rest)), one,
                 at(j0, j0), lda, at(j0, j0 + half), lda)
            gemm(no, no, ctypes.byref(integer(m - j0 - half)), ctypes.byref(integer(rest)), ctypes.byref(integer(half)),
                 minus_one, at(j0 + half, j0), lda, at(j0, j0 + half), lda, one, at(j0 + half, j0 + half), lda)
            columns(j0 + half, rest)
            swap_rows(half, j0, j0 + half, j0 + cols)  # the right half's interchanges, on the left half

        if k:
            columns(0, k)
            swap_rows(n - k, k, 0, k)  # a wide matrix: every interchange on the columns right of the square
            if n > m:  # wide: the columns right of the square part, U12 = L11^-1 A12
                trsm(left, lower, no, unit, ctypes.byref(integer(m)), ctypes.byref(integer(n - m)), one,
                     at(0, 0), lda, at(0, m), lda)
        return lu, (ipiv - 1).astype(np.int32), first_zero[0]

    return recursive
