"""MKL's ``?geev`` on one thread, with the signature of SciPy's wrapper: a contender that the
``eig``/``eigvals`` drop-in's calibration times against SciPy's own call
(:mod:`._routine_threads`), and runs where it won on this machine.

The general eigenproblem spends its time in the Hessenberg QR iteration, whose many small
steps gain little from threads and whose speed is the library's own code: MKL's differs from
OpenBLAS's reference LAPACK. MKL comes with ``mkl_fft`` (``pip install 'nvmathpy[cpu]'``): its
single dynamic library ``libmkl_rt`` is loaded from the installed ``mkl`` wheel (where there is
none, or it lacks the routine, :func:`geev` is ``None`` and nothing changes). The calls use
the explicitly 64-bit integer entry points (``dgeev_64``; whatever MKL's interface layer is
set to) and run on one thread of the calling thread (``MKL_Set_Num_Threads_Local``): no
OpenMP team of MKL's is left spinning beside SciPy's and NumPy's OpenBLAS pools. pyFFTW is bound
to its own FFTW first (:func:`nvmathpy._fftw_binding.bind_pyfftw_first`).
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
from typing import Any, Callable

import numpy as np

from ...._fftw_binding import bind_pyfftw_first

__all__ = ["geev", "runtime"]

_SYMBOLS = {"f": "sgeev_64", "d": "dgeev_64", "F": "cgeev_64", "D": "zgeev_64"}
_INT = ctypes.c_int64


@functools.lru_cache(maxsize=None)
def runtime() -> ctypes.CDLL | None:
    """MKL's single dynamic library (``libmkl_rt``) of the installed ``mkl`` wheel, or ``None``."""
    try:
        distribution = importlib.metadata.distribution("mkl")
    except importlib.metadata.PackageNotFoundError:
        return None
    bind_pyfftw_first()  # before MKL's first call puts its FFTW wrappers in the global scope
    for file in distribution.files or ():
        if file.name.startswith(("libmkl_rt.so", "mkl_rt.")):
            try:
                return ctypes.CDLL(str(distribution.locate_file(file)))
            except OSError:
                return None
    return None


@functools.lru_cache(maxsize=None)
def geev(char: str) -> Callable[..., tuple] | None:
    """``geev(a, compute_vl=1, compute_vr=1, overwrite_a=0)`` of dtype character ``char``
    (``"fdFD"``) on MKL: SciPy's ``?geev`` wrapper's results (``(wr, wi, vl, vr, info)`` for
    real, ``(w, vl, vr, info)`` for complex ``a``; vectors not computed are ``(1, 1)`` arrays),
    ``a`` a finite square NumPy matrix of order at least 1 (MKL's routine crashes the process on
    NaN), copied into a Fortran-ordered one of ``char``'s dtype unless ``overwrite_a`` and it is
    one already. ``None`` without MKL.

    Examples
    --------
    >>> import numpy as np
    >>> call = geev("d")
    >>> call is None or sorted(call(np.array([[2.0, 0.0], [0.0, 3.0]]), compute_vr=0)[0]) == [2.0, 3.0]
    True
    """
    lib = runtime()
    routine = getattr(lib, _SYMBOLS[char], None) if lib is not None else None
    threads = getattr(lib, "MKL_Set_Num_Threads_Local", None) if lib is not None else None
    if routine is None or threads is None:
        return None
    routine.restype = None
    threads.restype, threads.argtypes = ctypes.c_int, [ctypes.c_int]
    return functools.partial(_geev, routine, threads, np.dtype(char))


def _geev(routine: Any, threads: Any, dtype: np.dtype, a: np.ndarray, compute_vl: Any = 1, compute_vr: Any = 1,
          overwrite_a: Any = 0) -> tuple:
    n = a.shape[0]
    inplace = overwrite_a and a.dtype == dtype and a.flags.f_contiguous and a.flags.writeable and a.flags.aligned
    work_a = a if inplace else np.array(a, dtype=dtype, order="F")
    left, right = bool(compute_vl), bool(compute_vr)
    vl = np.empty((n, n) if left else (1, 1), dtype, order="F")
    vr = np.empty((n, n) if right else (1, 1), dtype, order="F")
    if dtype.kind == "c":
        values: tuple[np.ndarray, ...] = (np.empty(n, dtype),)
        tail = [np.empty(2 * n, dtype.type(0).real.dtype)]  # rwork
    else:
        values, tail = (np.empty(n, dtype), np.empty(n, dtype)), []
    info = _INT()
    jobs = (ctypes.c_char_p(b"V" if left else b"N"), ctypes.c_char_p(b"V" if right else b"N"))
    order = ctypes.byref(_INT(n))

    def call(work: np.ndarray, lwork: int) -> None:
        routine(*jobs, order, _pointer(work_a), order, *map(_pointer, values), _pointer(vl),
                ctypes.byref(_INT(vl.shape[0])), _pointer(vr), ctypes.byref(_INT(vr.shape[0])), _pointer(work),
                ctypes.byref(_INT(lwork)), *map(_pointer, tail), ctypes.byref(info))

    previous = threads(1)
    try:
        query = np.empty(1, dtype)
        call(query, -1)  # the workspace size MKL asks for
        if info.value == 0:
            lwork = max(1, int(query[0].real))
            call(np.empty(lwork, dtype), lwork)
    finally:
        threads(previous)
    return (*values, vl, vr, info.value)


def _pointer(x: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(x.ctypes.data)
