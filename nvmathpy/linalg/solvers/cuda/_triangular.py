"""``solve_triangular`` on CUDA operands: cuBLAS ``<t>trsm_v2`` (one matrix) or ``<t>trsmBatched``
(a stack), no factorization and no copy of ``A``.

The solution is written into the result array, which is made once, in the order that lets
``trsm`` read the caller's ``A`` as it is (:func:`._layout.trsm_arguments`): a row-major ``A``
solves from the right on a row-major ``X``, a column-major one from the left on a column-major
``X``. Only ``A`` read neither way (strided both ways) is copied. ``trsm`` reports nothing: a zero
on the diagonal is found by a reduction over the diagonal (skipped for ``unit_diagonal``), read
per call or deferred as :mod:`._checks` says.
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import Any

import numpy as np

from ....cuda import runtime
from ....cuda.bindings import cublas
from ....errors import InvalidOperandError, LinAlgError
from .._operands import batch_index
from ..cpu._factored import check_trans
from ..cpu._lapack import lapack_dtype
from . import _layout as layout
from . import _routes as routes
from ._checks import defer, deferred
from ._operands import device_arrays

__all__ = ["solve_triangular"]

_PREFIX = {"float32": "S", "float64": "D", "complex64": "C", "complex128": "Z"}


@functools.cache
def _one(dtype: np.dtype) -> np.ndarray:
    """``alpha = 1`` in ``dtype`` on the host (cuBLAS's default pointer mode)."""
    return np.ones(1, dtype)


@functools.cache
def _names(dtype: np.dtype) -> tuple[str, str]:
    """The routines' names (looked up in the binding per call: a test may replace them)."""
    prefix = _PREFIX[dtype.name]
    return f"cublas{prefix}trsm_v2", f"cublas{prefix}trsmBatched"


#: :func:`._layout.trsm_arguments`, remembered per layout and options.
_arguments = functools.lru_cache(maxsize=256)(layout.trsm_arguments)


@functools.cache
def _stream(package: str, device_id: int) -> Any:
    return runtime.current_stream_pointer(package, device_id)


@functools.lru_cache(maxsize=64)
def _offsets(batch: tuple[int, ...], strides: tuple[int, ...], device_id: int) -> Any:
    """Byte offsets of the matrices of a stack (``strides`` in bytes, 0 where broadcast), on the device."""
    index = np.indices(batch, dtype=np.uint64).reshape(len(batch), -1)
    host = (index * np.array(strides, dtype=np.uint64)[:, None]).sum(axis=0, dtype=np.uint64)
    cupy = runtime.import_cupy()
    with cupy.cuda.Device(device_id):
        return cupy.asarray(host)


def _operands(a: Any, b: Any) -> tuple[Any, Any, np.dtype, bool, tuple[int, ...]]:
    """``(a, b as (..., n, k), dtype, vector, batch)`` checked against each other."""
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise InvalidOperandError(f"a: expected square matrices (..., n, n), got shape {a.shape}")
    if b.ndim == 0:
        raise InvalidOperandError("b: expected a vector (n,) or matrices (..., n, k), got a scalar")
    try:
        dtype = np.result_type(lapack_dtype(a.dtype), lapack_dtype(b.dtype))
    except TypeError as exc:
        raise InvalidOperandError(f"a, b: {exc}") from None
    vector = b.ndim == 1
    core = b[:, None] if vector else b
    n = a.shape[-1]
    if core.shape[-2] != n:
        raise InvalidOperandError(f"b: has {core.shape[-2]} rows but a is {n} x {n} (shape {b.shape}; expected "
                                  f"({n},) or (..., {n}, k))")
    batch = a.shape[:-2] if a.shape[:-2] == core.shape[:-2] else _batch(a.shape[:-2], core.shape[:-2])
    return (a if a.dtype == dtype else a.astype(dtype)), core, dtype, vector, batch


def _batch(a_batch: tuple[int, ...], b_batch: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(a_batch, b_batch))
    except ValueError:
        raise InvalidOperandError(f"b: batch shape {b_batch} does not broadcast with a's batch {a_batch}") from None


def solve_triangular(a: Any, b: Any, /, *, lower: bool = False, trans: Any = 0, unit_diagonal: bool = False,
                     execution: Any = None) -> Any:
    """``op(T) x = b`` for the triangle of ``a`` named by ``lower`` (the other one is not read)
    by cuBLAS ``trsm``: one result array, nothing else allocated for one matrix (a stack adds
    its two pointer arrays)."""
    trans = check_trans(trans)
    native, to_caller, space, package = device_arrays(execution, a=a, b=b)
    a, core, dtype, vector, batch = _operands(native["a"], native["b"])
    cupy = runtime.import_cupy()
    n, k, item = a.shape[-1], core.shape[-1], dtype.itemsize
    args = _arguments(n, (a.strides[-2] // item, a.strides[-1] // item), bool(lower), trans)
    stream = _stream(package, space.device_id)()
    with runtime.cupy_stream(stream, cupy, space.device_id) if package == "torch" else contextlib.nullcontext():
        if args is None:  # strided both ways: the one copy of A
            a = cupy.ascontiguousarray(a)
            args = _arguments(n, (n, 1), bool(lower), trans)
        if args.x_order == "C":
            x = cupy.empty(batch + (n, k), dtype)
        else:
            x = cupy.empty(batch + (k, n), dtype).swapaxes(-1, -2)
        x[...] = core
        if x.size:
            _trsm(a, x, args, batch, dtype, unit_diagonal, stream, space.device_id)
        if not unit_diagonal and a.size:
            _check_diagonal(cupy, a, stream)
    return to_caller(x[..., 0] if vector else x)


def _trsm(a: Any, x: Any, args: layout.TrsmArguments, batch: tuple[int, ...], dtype: np.dtype,
          unit_diagonal: bool, stream: int, device_id: int) -> None:
    n, k = a.shape[-1], x.shape[-1]
    m, cols, ldb = (k, n, max(1, k)) if args.side == cublas.SideMode.RIGHT else (n, k, max(1, n))
    diag = int(cublas.DiagType.UNIT if unit_diagonal else cublas.DiagType.NON_UNIT)
    handle, lib = routes.blas_handle(device_id), cublas.LIB
    lib.cublasSetStream_v2(handle, stream)
    single, batched = (getattr(lib, name) for name in _names(dtype))
    alpha = _one(dtype).ctypes.data
    count = math.prod(batch)
    if count == 1:
        single(handle, args.side, args.fill, args.operation, diag, m, cols, alpha, int(a.data.ptr), args.ld,
               int(x.data.ptr), ldb)
        return
    a_strides = (0,) * (len(batch) - (a.ndim - 2)) + tuple(
        0 if size == 1 else stride for size, stride in zip(a.shape[:-2], a.strides[:-2]))
    a_pointers = _offsets(batch, a_strides, device_id) + np.uint64(a.data.ptr)
    x_pointers = _offsets(batch, tuple(x.strides[:-2]), device_id) + np.uint64(x.data.ptr)
    batched(handle, args.side, args.fill, args.operation, diag, m, cols, alpha, int(a_pointers.data.ptr), args.ld,
            int(x_pointers.data.ptr), ldb, count)


def _check_diagonal(cupy: Any, a: Any, stream: int) -> None:
    """SciPy's singular-matrix error for a zero on the diagonal: read now (one synchronisation)
    or deferred (:mod:`._checks`)."""
    diagonal = cupy.diagonal(a, axis1=-2, axis2=-1)
    batch = a.shape[:-2]
    if deferred():  # one reduction: all() is False where a diagonal holds a zero
        flags = diagonal.all(axis=-1).reshape(-1)
        defer(cupy, flags, flags.size, "all", "singular matrix: a zero on the diagonal", batch, stream)
        return
    host = cupy.asnumpy(diagonal == 0).reshape(-1, a.shape[-1])
    bad = np.flatnonzero(host.any(axis=-1))
    if bad.size:
        where = f" (batch element {batch_index(int(bad[0]), batch)})" if batch else ""
        diagonal = int(np.flatnonzero(host[bad[0]])[0])
        raise LinAlgError(f"singular matrix: resolution failed at diagonal {diagonal}{where}")
