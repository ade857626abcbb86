"""NVRTC binding (``nvrtc.h``): compile CUDA C++ to PTX, cubin or LTO-IR at run time, without a GPU."""

from __future__ import annotations

import enum
from ctypes import POINTER, c_char_p, c_int, c_size_t, c_void_p

from ..ffi import STATUS, Fn, Library, enum_names

__all__ = ["LIB", "Result", "supported_archs", "version"]


class Result(enum.IntEnum):
    """``nvrtcResult``."""

    NVRTC_SUCCESS = 0
    NVRTC_ERROR_OUT_OF_MEMORY = 1
    NVRTC_ERROR_PROGRAM_CREATION_FAILURE = 2
    NVRTC_ERROR_INVALID_INPUT = 3
    NVRTC_ERROR_INVALID_PROGRAM = 4
    NVRTC_ERROR_INVALID_OPTION = 5
    NVRTC_ERROR_COMPILATION = 6
    NVRTC_ERROR_BUILTIN_OPERATION_FAILURE = 7
    NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION = 8
    NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION = 9
    NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID = 10
    NVRTC_ERROR_INTERNAL_ERROR = 11
    NVRTC_ERROR_TIME_FILE_WRITE_FAILED = 12
    NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED = 13
    NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED = 14
    NVRTC_ERROR_PCH_CREATE = 15
    NVRTC_ERROR_CANCELLED = 16
    NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED = 17
    NVRTC_ERROR_BUSY = 18


_PROGRAM = c_void_p  # nvrtcProgram
_SIZE_OUT = POINTER(c_size_t)

LIB = Library(
    "nvrtc",
    enum_names(Result),
    [
        Fn("nvrtcVersion", STATUS, (POINTER(c_int), POINTER(c_int))),
        Fn("nvrtcGetErrorString", c_char_p, (c_int,)),
        Fn("nvrtcGetNumSupportedArchs", STATUS, (POINTER(c_int),)),
        Fn("nvrtcGetSupportedArchs", STATUS, (POINTER(c_int),)),
        # &prog, source, name, number of headers, header sources, header include names
        Fn(
            "nvrtcCreateProgram",
            STATUS,
            (POINTER(_PROGRAM), c_char_p, c_char_p, c_int, POINTER(c_char_p), POINTER(c_char_p)),
        ),
        Fn("nvrtcDestroyProgram", STATUS, (POINTER(_PROGRAM),)),
        Fn("nvrtcCompileProgram", STATUS, (_PROGRAM, c_int, POINTER(c_char_p))),
        Fn("nvrtcGetProgramLogSize", STATUS, (_PROGRAM, _SIZE_OUT)),
        Fn("nvrtcGetProgramLog", STATUS, (_PROGRAM, c_void_p)),
        Fn("nvrtcGetPTXSize", STATUS, (_PROGRAM, _SIZE_OUT)),
        Fn("nvrtcGetPTX", STATUS, (_PROGRAM, c_void_p)),
        Fn("nvrtcGetCUBINSize", STATUS, (_PROGRAM, _SIZE_OUT)),
        Fn("nvrtcGetCUBIN", STATUS, (_PROGRAM, c_void_p)),
        Fn("nvrtcGetLTOIRSize", STATUS, (_PROGRAM, _SIZE_OUT)),
        Fn("nvrtcGetLTOIR", STATUS, (_PROGRAM, c_void_p)),
    ],
)


def version() -> tuple[int, int, int]:
    """Return the NVRTC version as ``(major, minor, 0)``."""
    major, minor = c_int(), c_int()
    LIB.nvrtcVersion(major, minor)
    return major.value, minor.value, 0


def supported_archs() -> list[int]:
    """Return the SM architectures NVRTC can compile for, e.g. ``[75, 80, 86, ..., 120]``."""
    count = c_int()
    LIB.nvrtcGetNumSupportedArchs(count)
    archs = (c_int * count.value)()
    LIB.nvrtcGetSupportedArchs(archs)
    return list(archs)
