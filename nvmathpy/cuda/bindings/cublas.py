"""cuBLAS binding (``cublas_api.h``): the enums cuBLASLt and cuSOLVER share, the batched LU and
the triangular solves.

The legacy cuBLAS handle is needed only for ``cublas<t>getrfBatched`` / ``getrsBatched``, the
batched small-matrix LU that cuSOLVER does not offer, and ``cublas<t>trsm_v2`` /
``trsmBatched`` (``scipy.linalg.solve_triangular``: cuSOLVER has no dense ``trtrs``).
"""

from __future__ import annotations

import enum
from ctypes import POINTER, c_int, c_size_t, c_void_p

from ..driver import device_unavailable
from ..ffi import STATUS, Fn, Library, enum_names, new_handle
from .library_types import property_version

__all__ = ["LIB", "ComputeType", "DiagType", "FillMode", "Operation", "SideMode", "Status", "create", "version"]


class Status(enum.IntEnum):
    """``cublasStatus_t`` (also returned by cuBLASLt)."""

    CUBLAS_STATUS_SUCCESS = 0
    CUBLAS_STATUS_NOT_INITIALIZED = 1
    CUBLAS_STATUS_ALLOC_FAILED = 3
    CUBLAS_STATUS_INVALID_VALUE = 7
    CUBLAS_STATUS_ARCH_MISMATCH = 8
    CUBLAS_STATUS_MAPPING_ERROR = 11
    CUBLAS_STATUS_EXECUTION_FAILED = 13
    CUBLAS_STATUS_INTERNAL_ERROR = 14
    CUBLAS_STATUS_NOT_SUPPORTED = 15
    CUBLAS_STATUS_LICENSE_ERROR = 16


class Operation(enum.IntEnum):
    """``cublasOperation_t``: op(A) is A, its transpose, or its conjugate transpose."""

    N = 0
    T = 1
    C = 2


class FillMode(enum.IntEnum):
    """``cublasFillMode_t``: which triangle of a matrix is referenced."""

    LOWER = 0
    UPPER = 1
    FULL = 2


class SideMode(enum.IntEnum):
    """``cublasSideMode_t``: whether a matrix multiplies from the left or the right."""

    LEFT = 0
    RIGHT = 1


class DiagType(enum.IntEnum):
    """``cublasDiagType_t``: whether a triangular matrix's diagonal is read or taken as ones."""

    NON_UNIT = 0
    UNIT = 1


class ComputeType(enum.IntEnum):
    """``cublasComputeType_t``: precision of the multiply-accumulate."""

    COMPUTE_16F = 64
    COMPUTE_16F_PEDANTIC = 65
    COMPUTE_32F = 68
    COMPUTE_32F_PEDANTIC = 69
    COMPUTE_32F_FAST_16F = 74
    COMPUTE_32F_FAST_16BF = 75
    COMPUTE_32F_FAST_TF32 = 77
    COMPUTE_32F_EMULATED_16BFX9 = 78
    COMPUTE_64F = 70
    COMPUTE_64F_PEDANTIC = 71
    COMPUTE_64F_EMULATED_FIXEDPOINT = 79
    COMPUTE_32I = 72
    COMPUTE_32I_PEDANTIC = 73


def _batched_lu(prefix: str) -> list[Fn]:
    # getrfBatched(handle, n, A[], lda, P, info, batch); getrsBatched(handle, trans, n, nrhs,
    # A[], lda, P, B[], ldb, info, batch): pointer arrays live in device memory.
    return [
        Fn(f"cublas{prefix}getrfBatched", STATUS, (c_void_p, c_int, c_void_p, c_int, c_void_p, c_void_p, c_int)),
        Fn(
            f"cublas{prefix}getrsBatched",
            STATUS,
            (c_void_p, c_int, c_int, c_int, c_void_p, c_int, c_void_p, c_void_p, c_int, c_void_p, c_int),
        ),
    ]


def _triangular(prefix: str) -> list[Fn]:
    # trsm_v2(handle, side, uplo, trans, diag, m, n, *alpha, A, lda, B, ldb) and trsmBatched(...,
    # *alpha, A[], lda, B[], ldb, batchCount): alpha on the host (the default pointer mode), B
    # overwritten by X; the pointer arrays live in device memory.
    head = (c_void_p, c_int, c_int, c_int, c_int, c_int, c_int, c_void_p, c_void_p, c_int, c_void_p, c_int)
    return [Fn(f"cublas{prefix}trsm_v2", STATUS, head), Fn(f"cublas{prefix}trsmBatched", STATUS, head + (c_int,))]


LIB = Library(
    "cublas",
    enum_names(Status),
    [
        Fn("cublasCreate_v2", STATUS, (POINTER(c_void_p),), device=True),
        Fn("cublasDestroy_v2", STATUS, (c_void_p,)),
        Fn("cublasSetStream_v2", STATUS, (c_void_p, c_void_p)),
        Fn("cublasSetWorkspace_v2", STATUS, (c_void_p, c_void_p, c_size_t)),
        Fn("cublasGetProperty", STATUS, (c_int, POINTER(c_int))),
        *(fn for prefix in "SDCZ" for fn in _batched_lu(prefix)),
        *(fn for prefix in "SDCZ" for fn in _triangular(prefix)),
    ],
    unavailable=device_unavailable,
)


def create() -> int:
    """Create a cuBLAS handle (needs a usable CUDA device)."""
    return new_handle(LIB.cublasCreate_v2)


def version() -> tuple[int, int, int]:
    """Return the cuBLAS version as ``(major, minor, patch)``."""
    return property_version(LIB.cublasGetProperty)
