"""cuFFT binding (``cufft.h``, ``cufftXt.h``): plans, execution, work areas and LTO callbacks.

CUDA 12's cuFFT (libcufft.so.11) exports the LTO callback setter as
``__cufftXtSetJITCallback_12_7`` (its header maps ``cufftXtSetJITCallback`` onto it; the plain
symbol there is an older, different signature); CUDA 13's (libcufft.so.12) exports
``cufftXtSetJITCallback`` itself.
"""

from __future__ import annotations

import enum
from ctypes import POINTER, c_char_p, c_int, c_int64, c_size_t, c_void_p

from ..driver import device_unavailable
from ..ffi import STATUS, Fn, Library, enum_names, new_handle
from .library_types import property_version

__all__ = ["FORWARD", "INVERSE", "LIB", "CallbackType", "Result", "Type", "create", "version"]

FORWARD = -1
"""``CUFFT_FORWARD``: exponent sign of the forward transform."""
INVERSE = 1
"""``CUFFT_INVERSE``: exponent sign of the inverse (unnormalised) transform."""


class Result(enum.IntEnum):
    """``cufftResult``: the codes of CUDA 12 and CUDA 13 together."""

    CUFFT_SUCCESS = 0x0
    CUFFT_INVALID_PLAN = 0x1
    CUFFT_ALLOC_FAILED = 0x2
    CUFFT_INVALID_TYPE = 0x3
    CUFFT_INVALID_VALUE = 0x4
    CUFFT_INTERNAL_ERROR = 0x5
    CUFFT_EXEC_FAILED = 0x6
    CUFFT_SETUP_FAILED = 0x7
    CUFFT_INVALID_SIZE = 0x8
    CUFFT_UNALIGNED_DATA = 0x9
    CUFFT_INCOMPLETE_PARAMETER_LIST = 0xA
    CUFFT_INVALID_DEVICE = 0xB
    CUFFT_PARSE_ERROR = 0xC
    CUFFT_NO_WORKSPACE = 0xD
    CUFFT_NOT_IMPLEMENTED = 0xE
    CUFFT_LICENSE_ERROR = 0xF
    CUFFT_NOT_SUPPORTED = 0x10
    CUFFT_MISSING_DEPENDENCY = 0x11
    CUFFT_NVRTC_FAILURE = 0x12
    CUFFT_NVJITLINK_FAILURE = 0x13
    CUFFT_NVSHMEM_FAILURE = 0x14


class Type(enum.IntEnum):
    """``cufftType``: transform kind of the legacy (non-Xt) planning API."""

    R2C = 0x2A
    C2R = 0x2C
    C2C = 0x29
    D2Z = 0x6A
    Z2D = 0x6C
    Z2Z = 0x69


class CallbackType(enum.IntEnum):
    """``cufftXtCallbackType``: where a callback runs (load or store) and on which element type."""

    LD_COMPLEX = 0x0
    LD_COMPLEX_DOUBLE = 0x1
    LD_REAL = 0x2
    LD_REAL_DOUBLE = 0x3
    ST_COMPLEX = 0x4
    ST_COMPLEX_DOUBLE = 0x5
    ST_REAL = 0x6
    ST_REAL_DOUBLE = 0x7


_DIMS = POINTER(c_int64)  # long long int* (NULL for the default embedding)
# plan, rank, n, inembed, istride, idist, onembed, ostride, odist, type, batch, workSize
_PLAN_MANY_64 = (
    *(c_int, c_int, _DIMS),
    *(_DIMS, c_int64, c_int64),
    *(_DIMS, c_int64, c_int64),
    *(c_int, c_int64, POINTER(c_size_t)),
)

LIB = Library(
    "cufft",
    enum_names(Result),
    [
        Fn("cufftCreate", STATUS, (POINTER(c_int),), device=True),
        Fn("cufftDestroy", STATUS, (c_int,)),
        Fn("cufftGetVersion", STATUS, (POINTER(c_int),)),
        Fn("cufftGetProperty", STATUS, (c_int, POINTER(c_int))),
        Fn("cufftMakePlanMany64", STATUS, _PLAN_MANY_64),
        Fn("cufftGetSizeMany64", STATUS, _PLAN_MANY_64),
        Fn(
            "cufftXtMakePlanMany",
            STATUS,
            (
                *(c_int, c_int, _DIMS),  # plan, rank, n
                *(_DIMS, c_int64, c_int64, c_int),  # inembed, istride, idist, inputtype
                *(_DIMS, c_int64, c_int64, c_int),  # onembed, ostride, odist, outputtype
                *(c_int64, POINTER(c_size_t), c_int),  # batch, workSize, executiontype
            ),
        ),
        Fn("cufftSetAutoAllocation", STATUS, (c_int, c_int)),
        Fn("cufftSetWorkArea", STATUS, (c_int, c_void_p)),
        Fn("cufftSetStream", STATUS, (c_int, c_void_p)),
        Fn("cufftXtExec", STATUS, (c_int, c_void_p, c_void_p, c_int)),
        Fn("cufftExecC2C", STATUS, (c_int, c_void_p, c_void_p, c_int)),
        Fn("cufftExecZ2Z", STATUS, (c_int, c_void_p, c_void_p, c_int)),
        Fn("cufftExecR2C", STATUS, (c_int, c_void_p, c_void_p)),
        Fn("cufftExecD2Z", STATUS, (c_int, c_void_p, c_void_p)),
        Fn("cufftExecC2R", STATUS, (c_int, c_void_p, c_void_p)),
        Fn("cufftExecZ2D", STATUS, (c_int, c_void_p, c_void_p)),
        Fn(
            "cufftXtSetJITCallback",
            STATUS,
            # plan, callback symbol name, LTO-IR, its size, callback type, caller_info (void**)
            (c_int, c_char_p, c_void_p, c_size_t, c_int, POINTER(c_void_p)),
            symbols={12: "__cufftXtSetJITCallback_12_7"},
        ),
    ],
    unavailable=device_unavailable,
)


def create() -> int:
    """Create an empty cuFFT plan handle (needs a usable CUDA device)."""
    return new_handle(LIB.cufftCreate, ctype=c_int)


def version() -> tuple[int, int, int]:
    """Return the cuFFT library version as ``(major, minor, patch)`` (11.x is CUDA 12, 12.x CUDA 13)."""
    return property_version(LIB.cufftGetProperty)
