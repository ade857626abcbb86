"""nvJitLink binding (``nvJitLink.h``): link LTO-IR, PTX and cubins into one cubin at run time.

The header turns each call into a versioned symbol, ``__nvJitLink<Name>_<major>_<minor>``, for
the minor release it was written for. Both majors also export the plain names, but the versioned
``_<major>_0`` symbols are the ABI the headers promise to keep across a major's minor releases, so
those are bound (CUDA 13 exports ``_13_0`` to ``_13_5`` as of 13.5, CUDA 12 ``_12_0`` to ``_12_9``).
"""

from __future__ import annotations

import enum
from ctypes import POINTER, c_char_p, c_size_t, c_uint, c_uint32, c_void_p

from ..ffi import STATUS, Fn, Library, enum_names, versioned

__all__ = ["LIB", "InputType", "Result", "version"]


class Result(enum.IntEnum):
    """``nvJitLinkResult``."""

    NVJITLINK_SUCCESS = 0
    NVJITLINK_ERROR_UNRECOGNIZED_OPTION = 1
    NVJITLINK_ERROR_MISSING_ARCH = 2
    NVJITLINK_ERROR_INVALID_INPUT = 3
    NVJITLINK_ERROR_PTX_COMPILE = 4
    NVJITLINK_ERROR_NVVM_COMPILE = 5
    NVJITLINK_ERROR_INTERNAL = 6
    NVJITLINK_ERROR_THREADPOOL = 7
    NVJITLINK_ERROR_UNRECOGNIZED_INPUT = 8
    NVJITLINK_ERROR_FINALIZE = 9
    NVJITLINK_ERROR_NULL_INPUT = 10
    NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS = 11
    NVJITLINK_ERROR_INCORRECT_INPUT_TYPE = 12
    NVJITLINK_ERROR_ARCH_MISMATCH = 13
    NVJITLINK_ERROR_OUTDATED_LIBRARY = 14
    NVJITLINK_ERROR_MISSING_FATBIN = 15
    NVJITLINK_ERROR_UNRECOGNIZED_ARCH = 16
    NVJITLINK_ERROR_UNSUPPORTED_ARCH = 17
    NVJITLINK_ERROR_LTO_NOT_ENABLED = 18


class InputType(enum.IntEnum):
    """``nvJitLinkInputType``: what an added input is (``ANY`` lets nvJitLink tell)."""

    CUBIN = 1
    PTX = 2
    LTOIR = 3
    FATBIN = 4
    OBJECT = 5
    LIBRARY = 6
    ANY = 10


_MINOR = {12: 0, 13: 0}
_HANDLE = c_void_p  # nvJitLinkHandle
_SIZE_OUT = POINTER(c_size_t)

LIB = Library(
    "nvJitLink",
    enum_names(Result),
    [
        versioned("nvJitLinkCreate", STATUS, (POINTER(_HANDLE), c_uint32, POINTER(c_char_p)), _MINOR),
        versioned("nvJitLinkDestroy", STATUS, (POINTER(_HANDLE),), _MINOR),
        # handle, input type, data, size, name (for messages)
        versioned("nvJitLinkAddData", STATUS, (_HANDLE, c_uint, c_void_p, c_size_t, c_char_p), _MINOR),
        versioned("nvJitLinkComplete", STATUS, (_HANDLE,), _MINOR),
        versioned("nvJitLinkGetLinkedCubinSize", STATUS, (_HANDLE, _SIZE_OUT), _MINOR),
        versioned("nvJitLinkGetLinkedCubin", STATUS, (_HANDLE, c_void_p), _MINOR),
        versioned("nvJitLinkGetErrorLogSize", STATUS, (_HANDLE, _SIZE_OUT), _MINOR),
        versioned("nvJitLinkGetErrorLog", STATUS, (_HANDLE, c_void_p), _MINOR),
        versioned("nvJitLinkGetInfoLogSize", STATUS, (_HANDLE, _SIZE_OUT), _MINOR),
        versioned("nvJitLinkGetInfoLog", STATUS, (_HANDLE, c_void_p), _MINOR),
        Fn("nvJitLinkVersion", STATUS, (POINTER(c_uint), POINTER(c_uint))),
    ],
)


def version() -> tuple[int, int, int]:
    """Return the nvJitLink version as ``(major, minor, 0)``."""
    major, minor = c_uint(), c_uint()
    LIB.nvJitLinkVersion(major, minor)
    return major.value, minor.value, 0
