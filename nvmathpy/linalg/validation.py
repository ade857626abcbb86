"""Checks of bad input shared by ``nvmathpy.linalg`` and ``nvmathpy.scipy.linalg``: the one
place that decides what reaches LAPACK and the generated C. A public module
(``nvmathpy.linalg.validation``), so that layers over the solvers check what they pass on
with the solvers' own rules and errors.

- :func:`host_array` turns array-likes into NumPy arrays and non-native byte order into
  native (once, at the wrapping boundary; results are native, as NumPy's).
- :func:`check_dtype` refuses the dtypes LAPACK cannot compute in (``TypeError`` naming the
  dtype and the allowed ones, as NumPy does).
- :func:`check_result_size` raises NumPy's ``ValueError``/``MemoryError`` for a result that
  cannot exist, before a Python loop over a huge broadcast batch starts.
- :func:`factor_pair` and :func:`lu_factors` validate factor tuples (a pair; ``lu`` square,
  pivots integers of its order and batch, each in range), so no native call is reached with
  indices LAPACK or the generated C could read or write out of bounds with. (Cholesky and
  triangular factors are square matrices, which ``as_stack`` checks.)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import InvalidOperandError, LinAlgError

__all__ = [
    "UnsupportedDtypeError", "NotAMatrixError", "host_array", "native", "check_dtype", "check_result_size",
    "check_matrix", "factor_pair", "lu_factors", "ALLOWED",
]

#: The dtypes the solvers take (what the error messages list).
ALLOWED = "bool, integer, float16/32/64, complex64/128"

#: Results above this many bytes are tried for allocation before any work (smaller ones always fit).
_PROBE_BYTES = 1 << 30


class UnsupportedDtypeError(InvalidOperandError, TypeError):
    """An operand's dtype is one the solvers cannot compute in (a ``TypeError``, as NumPy's)."""


class NotAMatrixError(InvalidOperandError, LinAlgError):
    """An operand has fewer than two dimensions, or is not square where square matrices are
    required (a ``LinAlgError``, as NumPy's)."""


def native(x: np.ndarray) -> np.ndarray:
    """``x`` in native byte order (a converted copy when it is byte-swapped)."""
    dtype = x.dtype
    if dtype.isnative or dtype.fields is not None:
        return x
    return x.astype(dtype.newbyteorder("="))


def host_array(x: Any) -> Any:
    """An argument ready for wrapping: array-likes (lists, scalars) as NumPy arrays, NumPy
    arrays in native byte order; other arrays (torch, CuPy, DLPack producers) unchanged."""
    if type(x) is np.ndarray:
        return x if x.dtype.isnative else native(x)
    if isinstance(x, np.ndarray):
        return native(np.asarray(x))
    if x is None or hasattr(x, "__dlpack__") or type(x).__module__.split(".")[0] in ("torch", "cupy"):
        return x
    return native(np.asarray(x))


def check_dtype(dtype: np.dtype, name: str) -> None:
    """Raise :class:`UnsupportedDtypeError` for a dtype the solvers cannot compute in."""
    dtype = np.dtype(dtype)
    ok = dtype.kind in "biu" or dtype.kind == "f" and dtype.itemsize <= 8 or dtype.kind == "c" and dtype.itemsize <= 16
    if not ok and dtype.name != "bfloat16":
        raise UnsupportedDtypeError(f"{name}: dtype {dtype} is not supported; allowed: {ALLOWED}")


def check_matrix(a: Any, name: str) -> None:
    """Raise NumPy's ``LinAlgError`` (naming ``name``) for fewer than two dimensions."""
    if a.ndim < 2:
        raise NotAMatrixError(
            f"{name}: {a.ndim}-dimensional array given (shape {tuple(a.shape)}). Array must be at least two-dimensional"
        )


def check_result_size(shape: tuple[int, ...], dtype: np.dtype, name: str = "result") -> None:
    """Raise as NumPy does for a result of ``shape`` and ``dtype`` that cannot be allocated:
    ``ValueError`` when its size overflows, NumPy's own ``MemoryError`` when the memory is not
    there. Cheap for results under 1 GiB (arithmetic only)."""
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    if nbytes <= _PROBE_BYTES:
        return
    if nbytes > np.iinfo(np.intp).max:
        raise ValueError(
            f"{name}: array is too big ({math.prod(shape)} elements of {np.dtype(dtype)} for shape {shape})")
    probe = np.empty(nbytes, np.uint8)  # NumPy's MemoryError ("Unable to allocate ...") when it cannot be had
    del probe


def _as_pivots(piv: Any, name: str) -> np.ndarray:
    arr = np.asarray(host_array(piv))
    if arr.dtype.kind not in "iu":
        raise InvalidOperandError(f"{name}: pivot indices must be integers, got dtype {arr.dtype}")
    return arr


def lu_factors(lu: np.ndarray, piv: Any, *, lu_name: str = "lu", piv_name: str = "piv") -> np.ndarray:
    """Validate LAPACK LU factors: ``lu`` square ``(..., n, n)``, ``piv`` integers of shape
    ``(..., n)`` (batch equal to or broadcasting with ``lu``'s), 0-based, each in ``[0, n)``.
    Returns the pivots as int32 (LAPACK's)."""
    check_matrix(lu, lu_name)
    n = lu.shape[-1]
    if lu.shape[-2] != n:
        raise InvalidOperandError(f"{lu_name}: LU factors must be square (..., n, n), got shape {tuple(lu.shape)}")
    pivs = _as_pivots(piv, piv_name)
    if pivs.ndim < 1 or pivs.shape[-1] != n:
        raise InvalidOperandError(
            f"{piv_name}: shape {pivs.shape} does not match {lu_name}'s {tuple(lu.shape)}; expected (..., {n})"
        )
    try:
        batch = np.broadcast_shapes(pivs.shape[:-1], lu.shape[:-2])
    except ValueError:
        batch = None
    if batch is None or batch != lu.shape[:-2]:
        raise InvalidOperandError(
            f"{piv_name}: batch shape {pivs.shape[:-1]} does not match {lu_name}'s batch {tuple(lu.shape[:-2])}"
        )
    if pivs.size:
        low, high = int(pivs.min()), int(pivs.max())
        if low < 0 or high >= n:
            bad = low if low < 0 else high
            raise InvalidOperandError(
                f"{piv_name}: pivot index {bad} is out of range; 0-based pivots of an order-{n} factor lie in [0, {n})"
            )
    return pivs.astype(np.int32, copy=False)


def factor_pair(pair: Any, name: str, form: str) -> tuple[Any, Any]:
    """The two parts of a factor tuple ``pair`` (argument ``name``, of the ``form`` shown in
    the message), or a clear error when it is not a pair."""
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        sized = isinstance(pair, (tuple, list))
        what = f"a {type(pair).__name__} of length {len(pair)}" if sized else type(pair).__name__
        raise InvalidOperandError(f"{name}: expected the pair {form} the factorization returns, got {what}")
    return pair[0], pair[1]

