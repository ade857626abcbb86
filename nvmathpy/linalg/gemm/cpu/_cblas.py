"""``?gemm`` of the BLAS NumPy itself runs on, called through its CBLAS interface.

``numpy.matmul`` always asks BLAS for ``beta = 0``; accumulating onto a prefilled result
(``c``, a bias) needs ``?gemm``'s ``beta``. SciPy's ``?gemm`` wrappers run on SciPy's own copy
of OpenBLAS, whose worker threads then spin beside NumPy's after every call (two thread
pools on the same cores, slower when a program interleaves the two). This module
finds NumPy's BLAS among the loaded libraries (threadpoolctl lists them), binds its
``cblas_?gemm`` (the scipy-openblas builds of NumPy's wheels export it as
``scipy_cblas_?gemm64_``, 64-bit integers), and returns ``None`` when it cannot, so callers
fall back to SciPy.
"""

from __future__ import annotations

import ctypes
import functools
import os
from typing import Any, Callable

import numpy as np

from ....execution import numpy_openblas_file, numpy_openblas_library

__all__ = ["gemm_call", "numpy_gemm"]

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d", np.dtype(np.complex64): "c",
           np.dtype(np.complex128): "z"}
_SCALAR = {"s": ctypes.c_float, "d": ctypes.c_double}


@functools.lru_cache(maxsize=None)
def _numpy_blas() -> ctypes.CDLL | None:
    """NumPy's BLAS library (the loaded one whose file lies in NumPy's package), or ``None``:
    :func:`~nvmathpy.execution.numpy_openblas_library` where NumPy's OpenBLAS file is found,
    else threadpoolctl's entry."""
    if numpy_openblas_file() is not None:
        return numpy_openblas_library()
    from threadpoolctl import threadpool_info

    numpy_dir = os.path.dirname(os.path.dirname(np.__file__))
    for info in threadpool_info():
        path = info.get("filepath") or ""
        if info.get("user_api") == "blas" and os.path.basename(os.path.dirname(path)).startswith("numpy"):
            if os.path.dirname(os.path.dirname(path)) == numpy_dir:
                try:
                    return ctypes.CDLL(path)
                except OSError:
                    return None
    return None


def _bind(prefix: str) -> tuple[Any, type] | None:
    lib = _numpy_blas()
    if lib is None:
        return None
    for name, integer in ((f"scipy_cblas_{prefix}gemm64_", ctypes.c_int64), (f"cblas_{prefix}gemm64_", ctypes.c_int64),
                          (f"cblas_{prefix}gemm", ctypes.c_int)):
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = None
            return fn, integer
    return None


def _operand(x: np.ndarray) -> tuple[int, int]:
    """(transpose flag, leading dimension) of a 2-D operand in row-major CBLAS terms."""
    rows, cols = x.shape
    row_step, col_step = x.strides[0] // x.itemsize, x.strides[1] // x.itemsize
    if (cols == 1 or col_step == 1) and (rows == 1 or row_step >= cols):
        return _NO_TRANS, max(1, cols, row_step if rows > 1 else 1)
    return _TRANS, max(1, rows, col_step if cols > 1 else 1)  # F-order: its transpose is row-major


def numpy_gemm(dtype: np.dtype, alpha: Any, beta: Any) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None:
    """``fn(a, b, out)``: ``out = alpha a @ b + beta out`` on NumPy's BLAS, or ``None``.

    ``a`` and ``b`` are 2-D C- or F-ordered (each dimension's stride a multiple of the
    itemsize, one of them the itemsize); ``out`` is C-ordered. Nothing is checked per
    call: the plan checked the layouts once.

    Examples
    --------
    >>> a, b = np.arange(6.0).reshape(2, 3), np.ones((3, 2))
    >>> out = np.full((2, 2), 10.0)
    >>> gemm = numpy_gemm(out.dtype, 1.0, 1.0)
    >>> if gemm is not None:
    ...     gemm(a, b, out)
    ... else:
    ...     out += a @ b
    >>> out.tolist()
    [[13.0, 13.0], [22.0, 22.0]]
    """
    dtype = np.dtype(dtype)
    prefix = _PREFIX.get(dtype)
    bound = _bind(prefix) if prefix is not None else None
    if bound is None:
        return None
    fn, integer = bound
    if prefix in _SCALAR:
        alpha_arg, beta_arg = _SCALAR[prefix](alpha), _SCALAR[prefix](beta)
    else:  # complex scalars by pointer; the arrays live as long as the closure
        scalars = np.array([alpha, beta], dtype)
        alpha_arg, beta_arg = ctypes.c_void_p(scalars[0:].ctypes.data), ctypes.c_void_p(scalars[1:].ctypes.data)
    item = dtype.itemsize

    def gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        m, k = a.shape
        n = b.shape[1]
        trans_a, lda = _operand(a)
        trans_b, ldb = _operand(b)
        fn(_ROW_MAJOR, trans_a, trans_b, integer(m), integer(n), integer(k), alpha_arg,
           ctypes.c_void_p(a.ctypes.data), integer(lda), ctypes.c_void_p(b.ctypes.data), integer(ldb), beta_arg,
           ctypes.c_void_p(out.ctypes.data), integer(out.strides[0] // item))

    if prefix not in _SCALAR:
        gemm.scalars = scalars  # type: ignore[attr-defined]  # keep the scalars alive with the closure
    return gemm


def gemm_call(compute: np.dtype, alpha: Any, beta: Any, has_c: bool, with_addend: bool, a_layout: str,
              b_layout: str) -> Callable[[np.ndarray, np.ndarray, Any, Any, np.ndarray], None]:
    """``fn(a, b, c, addend, out)``: out (C-order M x N) = alpha a b + beta c (+ addend)
    through ``?gemm`` in ``compute`` (``beta`` the plan's, used where ``has_c``; ``a_layout`` and
    ``b_layout`` ``"C"`` or ``"F"``).

    NumPy's own BLAS runs it (:func:`numpy_gemm`; SciPy's when that cannot be bound); no operand
    is copied. ``c`` and the addend (a bias, broadcast) are
    written into ``out`` first and BLAS accumulates onto it (``beta = 1``): that costs one
    write pass, where ``beta = 0`` costs BLAS a pass zeroing ``out`` anyway.

    Examples
    --------
    >>> a, b = np.array([[1.0, 2.0]]), np.array([[3.0], [4.0]])
    >>> out = np.empty((1, 1))
    >>> gemm_call(np.dtype(np.float64), 1.0, None, False, True, "C", "C")(a, b, None, np.array([0.5]), out)
    >>> out
    array([[11.5]])
    """
    accumulate = 1.0 if with_addend else beta if has_c else 0.0
    gemm = numpy_gemm(compute, alpha, accumulate) or _scipy_gemm(compute, alpha, accumulate, a_layout, b_layout)

    def run(a: np.ndarray, b: np.ndarray, c: Any, addend: Any, out: np.ndarray) -> None:
        if has_c and with_addend:
            np.multiply(c, beta, out=out, casting="same_kind")
            np.add(out, addend, out=out, casting="same_kind")
        elif has_c:
            np.copyto(out, c)
        elif with_addend:
            np.copyto(out, addend, casting="same_kind")
        gemm(a, b, out)

    return run


def _scipy_gemm(compute: np.dtype, alpha: Any, beta: Any, a_layout: str,
                b_layout: str) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None]:
    """``fn(a, b, out)``: ``out = alpha a b + beta out`` through SciPy's ``?gemm`` (when NumPy's
    own BLAS cannot be bound). BLAS is column-major: ``out.T`` = ``b.T @ a.T``; a C-order
    operand's transpose is column-major as is, an F-order one is passed with the transpose flag."""
    from scipy.linalg.blas import get_blas_funcs

    gemm = get_blas_funcs("gemm", dtype=compute)
    trans_first = 0 if b_layout == "C" else 1
    trans_second = 0 if a_layout == "C" else 1

    def run(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        first = b.T if trans_first == 0 else b
        second = a.T if trans_second == 0 else a
        gemm(alpha, first, second, beta, out.T, trans_a=trans_first, trans_b=trans_second, overwrite_c=1)

    return run
