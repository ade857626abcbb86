"""What every CUDA math library shares (``library_types.h``): data types and version properties."""

from __future__ import annotations

import enum
from collections.abc import Callable
from ctypes import c_int

__all__ = ["DataType", "LibraryProperty", "property_version"]


class DataType(enum.IntEnum):
    """``cudaDataType``: element type of a matrix, vector or FFT operand."""

    R_16F = 2
    C_16F = 6
    R_16BF = 14
    C_16BF = 15
    R_32F = 0
    C_32F = 4
    R_64F = 1
    C_64F = 5
    R_8I = 3
    C_8I = 7
    R_8U = 8
    C_8U = 9
    R_32I = 10
    C_32I = 11
    R_32U = 12
    C_32U = 13
    R_64I = 24
    C_64I = 25
    R_8F_E4M3 = 28
    R_8F_E5M2 = 29
    R_8F_UE8M0 = 30


class LibraryProperty(enum.IntEnum):
    """``libraryPropertyType``: which part of a library version ``*GetProperty`` returns."""

    MAJOR_VERSION = 0
    MINOR_VERSION = 1
    PATCH_LEVEL = 2


def property_version(get_property: Callable[[int, c_int], int]) -> tuple[int, int, int]:
    """Read ``(major, minor, patch)`` through a library's ``*GetProperty(type, int*)`` function."""
    parts = []
    for prop in LibraryProperty:
        value = c_int()
        get_property(prop, value)
        parts.append(value.value)
    return parts[0], parts[1], parts[2]
