"""cuBLASLt host objects for one :class:`~._lt_spec.LtSpec`: the matmul descriptor, the matrix
layouts of A, B and D (C shares D's), and the algorithm-search preference.

These are host-side objects: building them and reading their attributes back needs the cuBLASLt
library but no GPU, which is how CI checks them. Bias, aux and bias-gradient pointers are left
NULL here (the heuristic reads NULL as perfectly aligned); the hot path sets them per call, as it
does FP8's A/B scale pointers (NULL: a scale of 1). FP8 layouts carry their own types: A and B
the operands' FP8 types, C and D the result type.
"""

from __future__ import annotations

from typing import Any

from ....cuda.bindings import cublaslt
from ....cuda.bindings.cublaslt import (
    MatmulDescAttribute as Desc,
    MatmulPreferenceAttribute as Pref,
)
from ....cuda.bindings.cublaslt import MatrixLayoutAttribute as Layout
from ._lt_spec import LtSpec, matrix_fields

__all__ = ["LtDescriptors", "create_preference"]


def _layout(spec: LtSpec, matrix: Any, data_type: Any) -> int:
    fields = matrix_fields(matrix, spec.batch)
    handle = cublaslt.create_matrix_layout(data_type, fields["ROWS"], fields["COLS"], fields["LD"])
    try:
        cublaslt.set_attribute(handle, Layout.BATCH_COUNT, fields["BATCH_COUNT"])
        cublaslt.set_attribute(handle, Layout.STRIDED_BATCH_OFFSET, fields["STRIDED_BATCH_OFFSET"])
    except BaseException:
        cublaslt.LIB.cublasLtMatrixLayoutDestroy(handle)
        raise
    return handle


class LtDescriptors:
    """The descriptor and layouts of one spec (destroyed by :meth:`destroy`; a context manager).

    Attributes
    ----------
    desc : int
        ``cublasLtMatmulDesc_t``.
    a, b, d : int
        ``cublasLtMatrixLayout_t`` of cuBLASLt's A, B and D (C uses ``d``). With a C-ordered
        result cuBLASLt's A is the NumPy ``b`` (see :mod:`.cublaslt_layout`).
    """

    def __init__(self, spec: LtSpec):
        self.spec = spec
        self.desc = self.a = self.b = self.d = 0
        try:
            self.desc = cublaslt.create_matmul_desc(spec.compute_type, spec.scale_type)
            lt = spec.lt
            cublaslt.set_attribute(self.desc, Desc.TRANSA, cublaslt.Operation.T if lt.first.trans else 0)
            cublaslt.set_attribute(self.desc, Desc.TRANSB, cublaslt.Operation.T if lt.second.trans else 0)
            cublaslt.set_attribute(self.desc, Desc.EPILOGUE, spec.lt_epilogue)
            if spec.bias is not None or spec.bgrad is not None:
                cublaslt.set_attribute(self.desc, Desc.BIAS_DATA_TYPE, spec.out_type)
                stride = spec.bias.batch_stride if spec.bias is not None else spec.bgrad_batch_stride
                cublaslt.set_attribute(self.desc, Desc.BIAS_BATCH_STRIDE, stride)
            if spec.aux is not None:
                cublaslt.set_attribute(self.desc, Desc.EPILOGUE_AUX_LD, spec.aux.ld)
                cublaslt.set_attribute(self.desc, Desc.EPILOGUE_AUX_BATCH_STRIDE, spec.aux.batch_stride)
            types = spec.matrix_types or (spec.data_type,) * 3
            self.a = _layout(spec, lt.first, types[0])
            self.b = _layout(spec, lt.second, types[1])
            self.d = _layout(spec, lt.d, types[2])
        except BaseException:
            self.destroy()
            raise

    def destroy(self) -> None:
        """Release the descriptor and layouts (idempotent)."""
        lib = cublaslt.LIB
        for name in ("a", "b", "d"):
            handle, value = getattr(self, name), 0
            setattr(self, name, value)
            if handle:
                lib.cublasLtMatrixLayoutDestroy(handle)
        desc, self.desc = self.desc, 0
        if desc:
            lib.cublasLtMatmulDescDestroy(desc)

    def __enter__(self) -> "LtDescriptors":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.destroy()


def create_preference(workspace_limit: int, alignments: tuple[int, int, int, int] | None = None) -> int:
    """A search preference: at most ``workspace_limit`` bytes of workspace, and (when given) the
    guaranteed byte alignments of A, B, C and D (default: cuBLASLt's 256)."""
    pref = cublaslt.create_preference()
    try:
        cublaslt.set_attribute(pref, Pref.MAX_WORKSPACE_BYTES, workspace_limit)
        if alignments is not None:
            attrs = (Pref.MIN_ALIGNMENT_A_BYTES, Pref.MIN_ALIGNMENT_B_BYTES, Pref.MIN_ALIGNMENT_C_BYTES,
                     Pref.MIN_ALIGNMENT_D_BYTES)
            for attr, value in zip(attrs, alignments):
                cublaslt.set_attribute(pref, attr, value)
    except BaseException:
        cublaslt.LIB.cublasLtMatmulPreferenceDestroy(pref)
        raise
    return pref
