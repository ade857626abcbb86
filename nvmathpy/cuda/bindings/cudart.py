"""Minimal CUDA runtime binding: device count and versions (enough to tell whether CUDA works).

Memory, streams and launches go through CuPy, not through this module.
"""

from __future__ import annotations

from ctypes import POINTER, c_char_p, c_int

from ..ffi import STATUS, Fn, Library

__all__ = ["ERROR_INSUFFICIENT_DRIVER", "ERROR_NO_DEVICE", "LIB", "driver_version", "error_name", "version"]

ERROR_INSUFFICIENT_DRIVER = 35
"""``cudaErrorInsufficientDriver``: no driver, or one older than the runtime."""
ERROR_NO_DEVICE = 100
"""``cudaErrorNoDevice``: a driver but no visible device."""


def error_name(code: int) -> str:
    """Return the ``cudaError_t`` enumerator name of ``code`` (from ``cudaGetErrorName``)."""
    return LIB.cudaGetErrorName(code).decode()


LIB = Library(
    "cudart",
    error_name,
    [
        Fn("cudaGetDeviceCount", STATUS, (POINTER(c_int),)),
        Fn("cudaRuntimeGetVersion", STATUS, (POINTER(c_int),)),
        Fn("cudaDriverGetVersion", STATUS, (POINTER(c_int),)),
        Fn("cudaGetErrorName", c_char_p, (c_int,)),
        Fn("cudaGetErrorString", c_char_p, (c_int,)),
    ],
)


def _split(encoded: int) -> tuple[int, int, int]:
    # CUDA encodes versions as 1000 * major + 10 * minor.
    return encoded // 1000, encoded % 1000 // 10, 0


def version() -> tuple[int, int, int]:
    """Return the CUDA runtime version as ``(major, minor, 0)``."""
    value = c_int()
    LIB.cudaRuntimeGetVersion(value)
    return _split(value.value)


def driver_version() -> tuple[int, int, int]:
    """Return the newest CUDA version the installed driver supports; ``(0, 0, 0)`` without a driver."""
    value = c_int()
    LIB.cudaDriverGetVersion(value)
    return _split(value.value)
