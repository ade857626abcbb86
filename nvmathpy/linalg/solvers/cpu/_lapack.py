"""LAPACK routines for the CPU solver engine: fetched once per (routine, dtype) and reused.

SciPy's ``scipy.linalg.lapack`` exposes the Fortran routines through thin f2py wrappers that
cost well under a microsecond per call; the ``scipy.linalg`` functions on top of them cost
ten times more. The plans call these wrappers directly; this module finds them (mapping the
real names to their complex counterparts: ``syevd`` -> ``heevd``, ``orgqr`` -> ``ungqr``),
queries workspace sizes once, and turns LAPACK ``info`` codes into nvmathpy errors.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ....errors import LibraryError, LinAlgError

__all__ = ["PREFIX", "routine", "routines", "lwork_of", "check_info", "lapack_dtype"]

#: LAPACK type prefix of each supported dtype.
PREFIX = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}

# Real routine name -> complex routine name, where they differ.
_COMPLEX_NAME = {
    "syevd": "heevd", "syevr": "heevr", "syev": "heev", "syevx": "heevx",
    "sygvd": "hegvd", "sygvx": "hegvx", "sygv": "hegv",
    "syevd_lwork": "heevd_lwork", "syevr_lwork": "heevr_lwork", "syev_lwork": "heev_lwork",
    "syevx_lwork": "heevx_lwork", "sygvx_lwork": "hegvx_lwork", "sygv_lwork": "hegv_lwork",
    "sysv": "hesv", "sysv_lwork": "hesv_lwork", "sycon": "hecon", "sytrf": "hetrf",
    "orgqr": "ungqr", "ormqr": "unmqr",
}


_LAPACK_DTYPES: dict[Any, np.dtype] = {}


def lapack_dtype(dtype: np.dtype) -> np.dtype:
    """The LAPACK dtype an input dtype computes in (NumPy's rules: integers and bools in
    float64, half precision in float32). Answers are remembered per dtype: the one-call
    functions ask on every call, and a dtype's ``name`` is slow to compute."""
    try:
        return _LAPACK_DTYPES[dtype]
    except (KeyError, TypeError):  # not seen yet, or not hashable
        pass
    found = _lapack_dtype(np.dtype(dtype))
    try:
        _LAPACK_DTYPES[dtype] = found
    except TypeError:
        pass
    return found


def _lapack_dtype(dtype: np.dtype) -> np.dtype:
    if dtype.name in PREFIX:
        return dtype
    if dtype.kind == "c" and dtype.itemsize <= 16:
        return np.dtype(np.complex128)
    if dtype.kind == "f" and dtype.itemsize <= 2 or dtype.name == "bfloat16":
        return np.dtype(np.float32)
    if dtype.kind in "biu" or dtype.kind == "f" and dtype.itemsize <= 8:
        return np.dtype(np.float64)
    raise TypeError(f"dtype {dtype} is not supported (LAPACK has no routines for it); "
                    "allowed: bool, integer, float16/32/64, complex64/128")


@functools.lru_cache(maxsize=None)
def routine(name: str, dtype_name: str) -> Callable[..., Any]:
    """The f2py wrapper of LAPACK routine ``name`` (real spelling) for ``dtype_name``."""
    from scipy.linalg import lapack

    complex_ = dtype_name.startswith("complex")
    base = _COMPLEX_NAME.get(name, name) if complex_ else name
    return getattr(lapack, PREFIX[dtype_name] + base)


def routines(dtype: np.dtype, *names: str) -> tuple[Callable[..., Any], ...]:
    """Several routines for one dtype."""
    dtype_name = np.dtype(dtype).name
    return tuple(routine(n, dtype_name) for n in names)


def lwork_of(result: Any) -> int:
    """The optimal workspace size from an ``*_lwork`` query result (first entry, rounded up)."""
    value = np.asarray(result[0] if isinstance(result, tuple) else result).ravel()[0]
    return max(1, int(np.ceil(np.real(value) * (1 + 1e-6))))


def check_info(info: int, routine_name: str, index: int | None, singular: str) -> None:
    """Raise for a nonzero LAPACK ``info``.

    ``info < 0`` is a bug in the arguments (``LibraryError``); ``info > 0`` is a numerical
    failure described by ``singular`` (formatted with ``{info}``, the 1-based LAPACK code,
    ``{k}`` = info - 1, 0-based) and raised as ``LinAlgError`` naming the batch element.
    """
    if info < 0:
        raise LibraryError(f"LAPACK {routine_name}: illegal value in argument {-info}", code=int(info))
    where = "" if index is None else f" (batch element {index})"
    raise LinAlgError(singular.format(info=int(info), k=int(info) - 1) + where)
