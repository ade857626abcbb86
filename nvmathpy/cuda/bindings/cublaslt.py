"""cuBLASLt binding (``cublasLt.h``): matmul descriptors, matrix layouts, preferences, heuristics.

Descriptors, layouts and preferences are host-side objects: they are created and their
attributes set and read back without a GPU. The handle (``cublasLtCreate``) needs a device.
:func:`set_attribute` / :func:`get_attribute` serve all four attribute families (matmul
descriptor, matrix layout, preference, algorithm config) with the C type the header gives each
attribute, chosen from the attribute's enum class. The cuBLAS enums a matmul needs
(``ComputeType``, ``Operation``) and ``DataType`` are re-exported here.
"""

from __future__ import annotations

import ctypes
import enum
from ctypes import (
    POINTER,
    Structure,
    c_float,
    c_int,
    c_int8,
    c_int32,
    c_int64,
    c_size_t,
    c_uint16,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import Any

from ..driver import device_unavailable
from ..ffi import STATUS, Fn, Library, enum_names, new_handle
from .cublas import ComputeType, Operation, Status
from .library_types import DataType, property_version

__all__ = [
    "LIB",
    "AlgoConfigAttribute",
    "ComputeType",
    "DataType",
    "Epilogue",
    "HeuristicResult",
    "MatmulAlgo",
    "MatmulDescAttribute",
    "MatmulPreferenceAttribute",
    "MatrixLayoutAttribute",
    "Operation",
    "Order",
    "PointerMode",
    "ReductionScheme",
    "algo_config",
    "create",
    "create_matmul_desc",
    "create_matrix_layout",
    "create_preference",
    "get_attribute",
    "heuristics",
    "set_attribute",
    "version",
]


class Order(enum.IntEnum):
    """``cublasLtOrder_t``: memory order of a matrix."""

    COL = 0
    ROW = 1
    COL32 = 2
    COL4_4R2_8C = 3
    COL32_2R_4R4 = 4


class MatrixLayoutAttribute(enum.IntEnum):
    """``cublasLtMatrixLayoutAttribute_t``."""

    TYPE = 0
    ORDER = 1
    ROWS = 2
    COLS = 3
    LD = 4
    BATCH_COUNT = 5
    STRIDED_BATCH_OFFSET = 6
    PLANE_OFFSET = 7


class MatmulDescAttribute(enum.IntEnum):
    """``cublasLtMatmulDescAttributes_t``."""

    COMPUTE_TYPE = 0
    SCALE_TYPE = 1
    POINTER_MODE = 2
    TRANSA = 3
    TRANSB = 4
    TRANSC = 5
    FILL_MODE = 6
    EPILOGUE = 7
    BIAS_POINTER = 8
    BIAS_BATCH_STRIDE = 10
    EPILOGUE_AUX_POINTER = 11
    EPILOGUE_AUX_LD = 12
    EPILOGUE_AUX_BATCH_STRIDE = 13
    ALPHA_VECTOR_BATCH_STRIDE = 14
    SM_COUNT_TARGET = 15
    A_SCALE_POINTER = 17
    B_SCALE_POINTER = 18
    C_SCALE_POINTER = 19
    D_SCALE_POINTER = 20
    AMAX_D_POINTER = 21
    EPILOGUE_AUX_DATA_TYPE = 22
    EPILOGUE_AUX_SCALE_POINTER = 23
    EPILOGUE_AUX_AMAX_POINTER = 24
    FAST_ACCUM = 25
    BIAS_DATA_TYPE = 26


class PointerMode(enum.IntEnum):
    """``cublasLtPointerMode_t``: where alpha and beta live."""

    HOST = 0
    DEVICE = 1
    DEVICE_VECTOR = 2
    ALPHA_DEVICE_VECTOR_BETA_ZERO = 3
    ALPHA_DEVICE_VECTOR_BETA_HOST = 4


class Epilogue(enum.IntEnum):
    """``cublasLtEpilogue_t``: the operation fused after the product."""

    DEFAULT = 1
    RELU = 2
    RELU_AUX = 2 | 128
    BIAS = 4
    RELU_BIAS = 2 | 4
    RELU_AUX_BIAS = 2 | 128 | 4
    DRELU = 8 | 128
    DRELU_BGRAD = 8 | 128 | 16
    GELU = 32
    GELU_AUX = 32 | 128
    GELU_BIAS = 32 | 4
    GELU_AUX_BIAS = 32 | 128 | 4
    DGELU = 64 | 128
    DGELU_BGRAD = 64 | 128 | 16
    BGRADA = 256
    BGRADB = 512


class MatmulPreferenceAttribute(enum.IntEnum):
    """``cublasLtMatmulPreferenceAttributes_t``."""

    SEARCH_MODE = 0
    MAX_WORKSPACE_BYTES = 1
    REDUCTION_SCHEME_MASK = 3
    MIN_ALIGNMENT_A_BYTES = 5
    MIN_ALIGNMENT_B_BYTES = 6
    MIN_ALIGNMENT_C_BYTES = 7
    MIN_ALIGNMENT_D_BYTES = 8
    MAX_WAVES_COUNT = 9
    IMPL_MASK = 12


class ReductionScheme(enum.IntEnum):
    """``cublasLtReductionScheme_t``: how split-K partial results are combined."""

    NONE = 0
    INPLACE = 1
    COMPUTE_TYPE = 2
    OUTPUT_TYPE = 4
    MASK = 7


class AlgoConfigAttribute(enum.IntEnum):
    """``cublasLtMatmulAlgoConfigAttributes_t``: the fields that identify a configured algorithm."""

    ID = 0
    TILE_ID = 1
    SPLITK_NUM = 2
    REDUCTION_SCHEME = 3
    CTA_SWIZZLING = 4
    CUSTOM_OPTION = 5
    STAGES_ID = 6
    INNER_SHAPE_ID = 7
    CLUSTER_SHAPE_ID = 8


class MatmulAlgo(Structure):
    """``cublasLtMatmulAlgo_t``: a configured algorithm; its bytes serialise it for one cuBLAS version."""

    _fields_ = [("data", c_uint64 * 8)]


class HeuristicResult(Structure):
    """``cublasLtMatmulHeuristicResult_t``: one candidate from :func:`heuristics`."""

    _fields_ = [
        ("algo", MatmulAlgo),
        ("workspaceSize", c_size_t),
        ("state", c_int),
        ("wavesCount", c_float),
        ("reserved", c_int * 4),
    ]


# C type of each attribute's value, from the comments on the enumerators in cublasLt.h.
_LAYOUT_TYPES = {
    MatrixLayoutAttribute.TYPE: c_uint32,
    MatrixLayoutAttribute.ORDER: c_int32,
    MatrixLayoutAttribute.ROWS: c_uint64,
    MatrixLayoutAttribute.COLS: c_uint64,
    MatrixLayoutAttribute.LD: c_int64,
    MatrixLayoutAttribute.BATCH_COUNT: c_int32,
    MatrixLayoutAttribute.STRIDED_BATCH_OFFSET: c_int64,
    MatrixLayoutAttribute.PLANE_OFFSET: c_int64,
}
_D = MatmulDescAttribute
_DESC_TYPES = {
    _D.COMPUTE_TYPE: c_int32,
    _D.SCALE_TYPE: c_int32,
    _D.POINTER_MODE: c_int32,
    _D.TRANSA: c_int32,
    _D.TRANSB: c_int32,
    _D.TRANSC: c_int32,
    _D.FILL_MODE: c_int32,
    _D.EPILOGUE: c_uint32,
    _D.BIAS_POINTER: c_void_p,
    _D.BIAS_BATCH_STRIDE: c_int64,
    _D.EPILOGUE_AUX_POINTER: c_void_p,
    _D.EPILOGUE_AUX_LD: c_int64,
    _D.EPILOGUE_AUX_BATCH_STRIDE: c_int64,
    _D.ALPHA_VECTOR_BATCH_STRIDE: c_int64,
    _D.SM_COUNT_TARGET: c_int32,
    _D.A_SCALE_POINTER: c_void_p,
    _D.B_SCALE_POINTER: c_void_p,
    _D.C_SCALE_POINTER: c_void_p,
    _D.D_SCALE_POINTER: c_void_p,
    _D.AMAX_D_POINTER: c_void_p,
    _D.EPILOGUE_AUX_DATA_TYPE: c_int32,
    _D.EPILOGUE_AUX_SCALE_POINTER: c_void_p,
    _D.EPILOGUE_AUX_AMAX_POINTER: c_void_p,
    _D.FAST_ACCUM: c_int8,
    _D.BIAS_DATA_TYPE: c_int32,
}
_P = MatmulPreferenceAttribute
_PREFERENCE_TYPES = {
    _P.SEARCH_MODE: c_uint32,
    _P.MAX_WORKSPACE_BYTES: c_uint64,
    _P.REDUCTION_SCHEME_MASK: c_uint32,
    _P.MIN_ALIGNMENT_A_BYTES: c_uint32,
    _P.MIN_ALIGNMENT_B_BYTES: c_uint32,
    _P.MIN_ALIGNMENT_C_BYTES: c_uint32,
    _P.MIN_ALIGNMENT_D_BYTES: c_uint32,
    _P.MAX_WAVES_COUNT: c_float,
    _P.IMPL_MASK: c_uint64,
}
_A = AlgoConfigAttribute
_ALGO_TYPES = {
    _A.ID: c_int32,
    _A.TILE_ID: c_uint32,
    _A.SPLITK_NUM: c_int32,
    _A.REDUCTION_SCHEME: c_uint32,
    _A.CTA_SWIZZLING: c_uint32,
    _A.CUSTOM_OPTION: c_uint32,
    _A.STAGES_ID: c_uint32,
    _A.INNER_SHAPE_ID: c_uint16,
    _A.CLUSTER_SHAPE_ID: c_uint16,
}


def _attribute_functions(kind: str, obj_type: Any) -> list[Fn]:
    # cublasLt<kind>SetAttribute(obj, attr, const void* buf, size_t size)
    # cublasLt<kind>GetAttribute(obj, attr, void* buf, size_t size, size_t* written)
    return [
        Fn(f"cublasLt{kind}SetAttribute", STATUS, (obj_type, c_int, c_void_p, c_size_t)),
        Fn(
            f"cublasLt{kind}GetAttribute",
            STATUS,
            (obj_type, c_int, c_void_p, c_size_t, POINTER(c_size_t)),
        ),
    ]


LIB = Library(
    "cublasLt",
    enum_names(Status),
    [
        Fn("cublasLtCreate", STATUS, (POINTER(c_void_p),), device=True),
        Fn("cublasLtDestroy", STATUS, (c_void_p,)),
        Fn("cublasLtGetVersion", c_size_t, ()),
        Fn("cublasLtGetProperty", STATUS, (c_int, POINTER(c_int))),
        Fn("cublasLtMatmulDescCreate", STATUS, (POINTER(c_void_p), c_int, c_int)),
        Fn("cublasLtMatmulDescDestroy", STATUS, (c_void_p,)),
        *_attribute_functions("MatmulDesc", c_void_p),
        Fn("cublasLtMatrixLayoutCreate", STATUS, (POINTER(c_void_p), c_int, c_uint64, c_uint64, c_int64)),
        Fn("cublasLtMatrixLayoutDestroy", STATUS, (c_void_p,)),
        *_attribute_functions("MatrixLayout", c_void_p),
        Fn("cublasLtMatmulPreferenceCreate", STATUS, (POINTER(c_void_p),)),
        Fn("cublasLtMatmulPreferenceDestroy", STATUS, (c_void_p,)),
        *_attribute_functions("MatmulPreference", c_void_p),
        *_attribute_functions("MatmulAlgoConfig", POINTER(MatmulAlgo)),
        Fn(
            "cublasLtMatmulAlgoGetHeuristic",
            STATUS,
            # handle, desc, Adesc, Bdesc, Cdesc, Ddesc, preference, requested, results, returned
            (*[c_void_p] * 7, c_int, POINTER(HeuristicResult), POINTER(c_int)),
        ),
        Fn(
            "cublasLtMatmul",
            STATUS,
            # handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo,
            # workspace, workspace bytes, stream
            (*[c_void_p] * 12, POINTER(MatmulAlgo), c_void_p, c_size_t, c_void_p),
        ),
    ],
    unavailable=device_unavailable,
)

_ACCESSORS: dict[type[enum.IntEnum], tuple[str, dict[Any, Any]]] = {
    MatmulDescAttribute: ("MatmulDesc", _DESC_TYPES),
    MatrixLayoutAttribute: ("MatrixLayout", _LAYOUT_TYPES),
    MatmulPreferenceAttribute: ("MatmulPreference", _PREFERENCE_TYPES),
    AlgoConfigAttribute: ("MatmulAlgoConfig", _ALGO_TYPES),
}


def set_attribute(obj: int | MatmulAlgo, attr: enum.IntEnum, value: float) -> None:
    """Set one attribute of a descriptor, layout, preference or algorithm.

    Parameters
    ----------
    obj : int or MatmulAlgo
        The handle returned by a ``create_*`` function, or a :class:`MatmulAlgo`.
    attr : MatmulDescAttribute, MatrixLayoutAttribute, MatmulPreferenceAttribute or AlgoConfigAttribute
        The attribute; its enum class selects the family.
    value : int or float
        The value (an address for pointer attributes).
    """
    kind, types = _ACCESSORS[type(attr)]
    buf = types[attr](value)
    getattr(LIB, f"cublasLt{kind}SetAttribute")(obj, attr, ctypes.byref(buf), ctypes.sizeof(buf))


def get_attribute(obj: int | MatmulAlgo, attr: enum.IntEnum) -> float:
    """Read one attribute back (see :func:`set_attribute`); a NULL pointer reads as 0."""
    kind, types = _ACCESSORS[type(attr)]
    buf = types[attr]()
    written = c_size_t()
    getattr(LIB, f"cublasLt{kind}GetAttribute")(obj, attr, ctypes.byref(buf), ctypes.sizeof(buf), written)
    return buf.value or 0


def create() -> int:
    """Create a cuBLASLt handle (needs a usable CUDA device)."""
    return new_handle(LIB.cublasLtCreate)


def create_matmul_desc(compute_type: ComputeType, scale_type: DataType) -> int:
    """Create a matmul descriptor for ``compute_type`` with alpha/beta of ``scale_type``."""
    return new_handle(LIB.cublasLtMatmulDescCreate, compute_type, scale_type)


def create_matrix_layout(dtype: DataType, rows: int, cols: int, ld: int) -> int:
    """Create a column-major matrix layout (set :class:`MatrixLayoutAttribute` for the rest)."""
    return new_handle(LIB.cublasLtMatrixLayoutCreate, dtype, rows, cols, ld)


def create_preference() -> int:
    """Create an algorithm-search preference (default: no workspace allowed)."""
    return new_handle(LIB.cublasLtMatmulPreferenceCreate)


def heuristics(
    handle: int, desc: int, a: int, b: int, c: int, d: int, preference: int, count: int
) -> list[HeuristicResult]:
    """Ask the heuristic for up to ``count`` algorithms, best first.

    Parameters
    ----------
    handle : int
        cuBLASLt handle.
    desc : int
        Matmul descriptor.
    a, b, c, d : int
        Matrix layouts of A, B, C and D.
    preference : int
        Search preference (workspace limit, alignments).
    count : int
        Most results wanted.

    Returns
    -------
    list[HeuristicResult]
        The results returned, each with its algorithm and workspace size.
    """
    results = (HeuristicResult * count)()
    returned = c_int()
    LIB.cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, c, d, preference, count, results, returned)
    return list(results[: returned.value])


def algo_config(algo: MatmulAlgo) -> dict[str, int]:
    """Read every :class:`AlgoConfigAttribute` of ``algo`` (a readable description of it)."""
    return {attr.name: int(get_attribute(algo, attr)) for attr in AlgoConfigAttribute}


def version() -> tuple[int, int, int]:
    """Return the cuBLASLt version as ``(major, minor, patch)``."""
    return property_version(LIB.cublasLtGetProperty)
