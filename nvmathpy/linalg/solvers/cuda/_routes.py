"""What every route of the cuSOLVER engine shares: the process's library handles, the
:class:`Context` of one engine (device, package, stream, handles), route workspaces and the
:class:`Route` base class with its ``info`` codes.

The concrete routes (LU, Cholesky, eigensolvers, SVD, QR) are in :mod:`._engine`; the
generated ``tiny`` route in :mod:`._tiny_route`.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any, Callable

import numpy as np

from ....cuda import runtime
from ....cuda.bindings import cublas, cusolver
from ....cuda.bindings.library_types import DataType
from ....plan import Candidate, Prepared, Problem

__all__ = ["Context", "LURoute", "Route", "Workspaces", "blas_handle", "pointer", "query_sizes", "solver_handle",
           "solver_params"]

DATA_TYPE = {"float32": DataType.R_32F, "float64": DataType.R_64F, "complex64": DataType.C_32F,
             "complex128": DataType.C_64F}
REAL = {"float32": "float32", "float64": "float64", "complex64": "float32", "complex128": "float64"}
PREFIX = {"float32": "S", "float64": "D", "complex64": "C", "complex128": "Z"}


@functools.cache
def solver_handle(device_id: int) -> int:
    """The process's cuSOLVER dense handle for ``device_id`` (created once, on that device)."""
    cupy = runtime.import_cupy()
    with cupy.cuda.Device(device_id):
        return cusolver.create()


@functools.cache
def blas_handle(device_id: int) -> int:
    """The process's cuBLAS handle for ``device_id`` (for the batched LU)."""
    cupy = runtime.import_cupy()
    with cupy.cuda.Device(device_id):
        return cublas.create()


@functools.cache
def solver_params() -> int:
    """The ``cusolverDnParams_t`` every ``cusolverDnX*`` call takes (default algorithms)."""
    return cusolver.create_params()


class Context:
    """What every route of one engine shares: device, package, stream, handles."""

    def __init__(self, device_id: int, package: str, stream: Callable[[], int]):
        self.device_id, self.package, self.stream = device_id, package, stream
        self.cupy = runtime.import_cupy()
        self.handle = solver_handle(device_id)
        self.params = solver_params()
        self._blas: int | None = None

    @property
    def blas(self) -> int:
        if self._blas is None:
            self._blas = blas_handle(self.device_id)
        return self._blas

    def on_stream(self) -> int:
        """Point the cuSOLVER handle at this call's stream; returns the stream."""
        stream = self.stream()
        cusolver.LIB.cusolverDnSetStream(self.handle, stream)
        return stream

    def blas_on_stream(self) -> None:
        cublas.LIB.cublasSetStream_v2(self.blas, self.stream())


class Workspaces:
    """The device and host workspaces of a route, grown to the largest query seen."""

    def __init__(self, ctx: Context):
        self._ctx = ctx
        self.device_bytes = self.host_bytes = 0
        self.device = self.host = 0
        self._owners: list[Any] = []

    def need(self, device_bytes: int, host_bytes: int = 0) -> None:
        """Make sure at least this much is allocated (device from the package's pool)."""
        if device_bytes > self.device_bytes:
            owner, self.device = runtime.allocate(int(device_bytes), self._ctx.package, self._ctx.device_id,
                                                  self._ctx.stream())
            self._owners.append(owner)
            self.device_bytes = int(device_bytes)
        if host_bytes > self.host_bytes:
            buffer = np.empty(int(host_bytes), np.uint8)
            self._owners.append(buffer)
            self.host, self.host_bytes = buffer.ctypes.data, int(host_bytes)

    def free(self) -> None:
        self._owners = []
        self.device = self.host = self.device_bytes = self.host_bytes = 0


def query_sizes(fn: Callable[..., Any], *args: Any, tail: tuple = ()) -> tuple[int, int]:
    device, host = ctypes.c_size_t(), ctypes.c_size_t()
    fn(*args, ctypes.byref(device), ctypes.byref(host), *tail)
    return device.value, host.value


def pointer(array: Any) -> int:
    return int(array.data.ptr)


class Route(Prepared):
    """A prepared candidate: private buffers, workspaces and the routine calls.

    Subclasses allocate in ``__init__`` and enqueue in their methods; nothing synchronises
    except :meth:`failures`.
    """

    def __init__(self, candidate: Candidate, ctx: Context, problem: Problem):
        super().__init__(candidate)
        self.ctx, self.cupy = ctx, ctx.cupy
        self.dtype_name = problem.get("dtype")
        self.dtype = np.dtype(self.dtype_name)
        self.data_type = int(DATA_TYPE[self.dtype_name])
        self.real_type = int(DATA_TYPE[REAL[self.dtype_name]])
        self.count = int(problem.get("count", 1))
        self.work = Workspaces(ctx)
        self.info = self.cupy.zeros(max(1, self.count), np.int32)

    def failures(self) -> list[int]:
        """Flat indices of the batch elements whose last call reported ``info > 0`` (one sync)."""
        codes = self.cupy.asnumpy(self.info)[: self.count]
        return [int(i) for i in np.flatnonzero(codes > 0)]

    def codes(self) -> np.ndarray:
        """The ``info`` codes of the last call (one sync)."""
        return np.asarray(self.cupy.asnumpy(self.info)[: self.count])

    def free(self) -> None:
        self.work.free()
        super().free()


class LURoute(Route):
    """``getrf`` of a stack of ``n x n`` column-major matrices held in ``self.a`` (C storage
    ``(count, n, n)``: element ``[i, c, r]`` is row ``r``, column ``c`` of matrix ``i``), and
    ``getrs`` with its factors."""

    batched = False

    def __init__(self, candidate: Candidate, ctx: Context, problem: Problem):
        super().__init__(candidate, ctx, problem)
        self.n = n = int(problem.get("n"))
        self.a = self.cupy.empty((self.count, n, n), self.dtype)
        self.step = n * n * self.dtype.itemsize
        self.solve_info = self.cupy.zeros(max(1, self.count), np.int32)

    def load(self, target_view: Callable[[Any], Any], a3: Any) -> None:
        """Copy the caller's stack into the private buffer through ``target_view(self.a)``."""
        target_view(self.a)[...] = a3
