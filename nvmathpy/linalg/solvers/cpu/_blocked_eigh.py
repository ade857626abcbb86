"""Hermitian eigendecomposition on NumPy's OpenBLAS with a back-transformation in large blocks.

``?syevd`` / ``?heevd`` reduce the matrix to tridiagonal form (``?sytrd``), solve the
tridiagonal problem by divide and conquer (``?stedc``) and turn its eigenvectors into the
matrix's by applying the reduction's reflectors (``?ormtr``). That last step applies the
reflectors 32 at a time, so its products have an inner dimension of 32 and run far below the
machine's product speed, and that step is a large share of ``?syevd``'s time. Here
:mod:`._householder` applies the same reflectors 128 at a time, in less time. The reduction
and the
tridiagonal solver are LAPACK's own (the reduction with its full blocked workspace), so the
eigenvalues are ``?syevd``'s and the eigenvectors equal them to rounding.

Either triangle is taken as stored (``?sytrd``'s ``'L'`` and ``'U'`` reflectors are applied
in their own orders), so a C-ordered matrix is read through its Fortran view uncopied.
Eigenvalues alone are ``?sytrd`` with its blocked workspace followed by ``?sterf``. A call runs
on the cores free at its start (:func:`._pool_threads.stepped_down`), or, started while SciPy's
pool alone spins (right after a SciPy call), the same on SciPy's OpenBLAS.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any, Callable

import numpy as np

from ._householder import reflectors, reflectors_available
from ._numpy_lapack import _PREFIX, _fortran, _scipy_symbol, _symbol, scipy_exports
from ._pool_threads import BUSY_LEARN_FROM, stepped_down

__all__ = ["blocked_eigh", "blocked_eigh_available"]

_REAL_PREFIX = {"s": "s", "d": "d", "c": "s", "z": "d"}


def _routine_names(prefix: str) -> dict[str, str]:
    real = _REAL_PREFIX[prefix]
    reduce_ = "hetrd" if prefix in "cz" else "sytrd"
    norm = "lanhe" if prefix in "cz" else "lansy"
    return {"reduce": prefix + reduce_, "norm": prefix + norm, "stedc": real + "stedc", "sterf": real + "sterf"}


def blocked_eigh_available(dtype: Any) -> bool:
    """Whether NumPy's OpenBLAS exports every routine the blocked eigensolver calls for ``dtype``."""
    prefix = _PREFIX.get(np.dtype(dtype).name)
    return (prefix is not None and reflectors_available(dtype)
            and all(_symbol(name) is not None for name in _routine_names(prefix).values()))


def blocked_eigh(dtype: Any) -> Callable[..., tuple[np.ndarray, np.ndarray | None, int]]:
    """``eigh(a, lower, vectors, overwrite_a=False) -> (w, v, info)`` for Fortran-ordered
    ``(n, n)`` matrices of ``dtype`` on NumPy's OpenBLAS (check :func:`blocked_eigh_available`
    first). Only the ``lower`` (else upper) triangle of ``a`` is read; ``w`` ascends; ``v`` is
    ``None`` without ``vectors``; ``info > 0`` means the tridiagonal solver did not converge
    (LAPACK's code).

    Examples
    --------
    >>> import numpy as np
    >>> a = np.array([[2.0, 1.0], [1.0, 2.0]], order="F")
    >>> if blocked_eigh_available(a.dtype):
    ...     w, v, info = blocked_eigh(a.dtype)(a, True, True)
    ... else:
    ...     (w, v), info = np.linalg.eigh(a), 0
    >>> w.tolist(), info, bool(np.allclose(a @ v, v * w))
    ([1.0, 3.0], 0, True)
    """
    return _blocked_eigh(np.dtype(dtype).name)


def _byref(integer: type, value: int) -> Any:
    return ctypes.byref(integer(value))


def _scipy_available(dtype_name: str) -> bool:
    """Whether SciPy's OpenBLAS is loaded and exports every routine the eigensolver calls."""
    return (scipy_exports(tuple(_routine_names(_PREFIX[dtype_name]).values()))
            and reflectors_available(dtype_name, "scipy"))


@functools.lru_cache(maxsize=None)
def _blocked_eigh(dtype_name: str) -> Callable[..., tuple[np.ndarray, np.ndarray | None, int]]:
    """The eigensolver on NumPy's OpenBLAS on the cores free at a call's start, or on SciPy's
    instead while SciPy's pool alone spins."""
    decompose = _decomposer(dtype_name, "numpy")

    def eigh(a: np.ndarray, lower: bool, vectors: bool,
             overwrite_a: bool = False) -> tuple[np.ndarray, np.ndarray | None, int]:
        twin = _decomposer(dtype_name, "scipy") if _scipy_available(dtype_name) else None
        return stepped_down(lambda: decompose(a, lower, vectors, overwrite_a),
                            instead=twin and (lambda: twin(a, lower, vectors, overwrite_a)),
                            busy_learn=a.size >= BUSY_LEARN_FROM)

    return eigh


@functools.lru_cache(maxsize=None)
def _decomposer(dtype_name: str, library: str) -> Callable[..., tuple[np.ndarray, np.ndarray | None, int]]:
    """``decompose(a, lower, vectors, overwrite_a)`` on ``library``'s OpenBLAS (``"numpy"`` or
    ``"scipy"``), on its threads as they are set."""
    dtype = np.dtype(dtype_name)
    prefix = _PREFIX[dtype_name]
    real = np.dtype(np.finfo(dtype).dtype)
    symbol = _symbol if library == "numpy" else _scipy_symbol
    fns = {key: symbol(name)[0] for key, name in _routine_names(prefix).items()}
    integer = symbol(_routine_names(prefix)["reduce"])[1]
    index = np.dtype(np.int64 if integer is ctypes.c_int64 else np.int32)
    complex_ = dtype.kind == "c"
    householder = reflectors(dtype, library)
    # an object of its own for the norm's result type: the lookups' objects are shared, and every
    # lookup sets their result type to none
    fns["norm"] = type(fns["norm"])(ctypes.cast(fns["norm"], ctypes.c_void_p).value)
    fns["norm"].restype = ctypes.c_float if prefix in "sc" else ctypes.c_double
    # A matrix whose largest entry is tiny or huge is scaled into range first, as ?syevd does (RMIN/RMAX).
    tiny = np.finfo(real).tiny / np.finfo(real).eps
    safe_min, safe_max = np.sqrt(tiny), np.sqrt(1 / tiny)

    def decompose(a: np.ndarray, lower: bool, vectors: bool,
                  overwrite_a: bool) -> tuple[np.ndarray, np.ndarray | None, int]:
        t = _fortran(a, dtype, overwrite_a)
        n = t.shape[0]
        uplo = ctypes.c_char_p(b"L" if lower else b"U")
        ld = _byref(integer, max(1, n))
        if n == 0:
            return np.empty(0, real), (np.empty((0, 0), dtype) if vectors else None), 0
        scale = float(fns["norm"](ctypes.c_char_p(b"M"), uplo, _byref(integer, n), ctypes.c_void_p(t.ctypes.data),
                                  ld, ctypes.c_void_p(0)))
        sigma = safe_min / scale if 0 < scale < safe_min else safe_max / scale if scale > safe_max else 1.0
        if sigma != 1.0:
            with np.errstate(all="ignore"):  # the triangle not read may hold anything
                t *= sigma
        d, e = np.empty(n, real), np.empty(max(1, n - 1), real)
        tau = np.empty(max(1, n - 1), dtype)
        lwork = n * 64  # room for ?sytrd's blocked reduction (n x its block size, 32 in OpenBLAS)
        work = np.empty(lwork, dtype)
        info = integer(0)
        fns["reduce"](uplo, _byref(integer, n), ctypes.c_void_p(t.ctypes.data), ld, ctypes.c_void_p(d.ctypes.data),
                      ctypes.c_void_p(e.ctypes.data), ctypes.c_void_p(tau.ctypes.data),
                      ctypes.c_void_p(work.ctypes.data), _byref(integer, lwork), ctypes.byref(info))
        if not vectors:
            fns["sterf"](_byref(integer, n), ctypes.c_void_p(d.ctypes.data), ctypes.c_void_p(e.ctypes.data),
                         ctypes.byref(info))
            z = None
        else:
            z_real = np.empty((n, n), real, order="F")
            rwork, iwork = np.empty(1 + 4 * n + n * n, real), np.empty(3 + 5 * n, index)
            fns["stedc"](ctypes.c_char_p(b"I"), _byref(integer, n), ctypes.c_void_p(d.ctypes.data),
                         ctypes.c_void_p(e.ctypes.data), ctypes.c_void_p(z_real.ctypes.data), ld,
                         ctypes.c_void_p(rwork.ctypes.data), _byref(integer, rwork.size),
                         ctypes.c_void_p(iwork.ctypes.data), _byref(integer, iwork.size), ctypes.byref(info))
            z = np.asfortranarray(z_real, dtype) if complex_ else z_real
            if not info.value and lower:
                householder.forward(t, tau, z, count=n - 1, offset=1)
            elif not info.value:
                householder.backward(t, tau, z, count=n - 1)
        if sigma != 1.0:
            d /= sigma
        return d, z, int(info.value)

    return decompose
