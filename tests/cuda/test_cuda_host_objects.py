"""cuBLASLt descriptors, layouts, preferences and algorithms, and cuSOLVER params: built and read
back without a GPU (these are host-side objects)."""

from __future__ import annotations

import ctypes
from contextlib import contextmanager

import pytest

from nvmathpy.errors import LibraryError


@pytest.fixture
def lt(cuda_wheels):
    return cuda_wheels["cublasLt"]


@contextmanager
def created(lt, create, destroy, *args):
    handle = create(*args)
    try:
        yield handle
    finally:
        destroy(handle)


def matmul_desc(lt, compute, scale):
    return created(lt, lt.create_matmul_desc, lt.LIB.cublasLtMatmulDescDestroy, compute, scale)


def layout(lt, dtype, rows, cols, ld):
    return created(lt, lt.create_matrix_layout, lt.LIB.cublasLtMatrixLayoutDestroy, dtype, rows, cols, ld)


@pytest.mark.parametrize(
    ("compute", "scale"),
    [
        ("COMPUTE_32F", "R_32F"),
        ("COMPUTE_64F", "R_64F"),
        ("COMPUTE_32F_FAST_TF32", "R_32F"),
        ("COMPUTE_32F", "C_32F"),
    ],
)
def test_matmul_desc_reads_back_compute_and_scale_type(lt, compute, scale):
    with matmul_desc(lt, lt.ComputeType[compute], lt.DataType[scale]) as desc:
        assert lt.get_attribute(desc, lt.MatmulDescAttribute.COMPUTE_TYPE) == lt.ComputeType[compute]
        assert lt.get_attribute(desc, lt.MatmulDescAttribute.SCALE_TYPE) == lt.DataType[scale]
        assert lt.get_attribute(desc, lt.MatmulDescAttribute.EPILOGUE) == lt.Epilogue.DEFAULT


def test_matmul_desc_every_epilogue_and_transpose(lt):
    attr = lt.MatmulDescAttribute
    with matmul_desc(lt, lt.ComputeType.COMPUTE_32F, lt.DataType.R_32F) as desc:
        for epilogue in lt.Epilogue:
            lt.set_attribute(desc, attr.EPILOGUE, epilogue)
            assert lt.get_attribute(desc, attr.EPILOGUE) == epilogue
        for which in (attr.TRANSA, attr.TRANSB):
            for op in lt.Operation:
                lt.set_attribute(desc, which, op)
                assert lt.get_attribute(desc, which) == op


def test_matmul_desc_every_attribute_round_trips(lt):
    # Each value is written with the C type the header gives the attribute; cuBLASLt rejects a
    # buffer of the wrong size, so a round trip also checks the declared types.
    with matmul_desc(lt, lt.ComputeType.COMPUTE_32F, lt.DataType.R_32F) as desc:
        for index, attr in enumerate(lt.MatmulDescAttribute):
            is_pointer = attr.name.endswith("POINTER")
            value = 0x10000 + 0x100 * index if is_pointer else index % 3 + 1
            lt.set_attribute(desc, attr, value)
            assert lt.get_attribute(desc, attr) == value, attr.name
        lt.set_attribute(desc, lt.MatmulDescAttribute.BIAS_POINTER, 0)
        assert lt.get_attribute(desc, lt.MatmulDescAttribute.BIAS_POINTER) == 0


@pytest.mark.parametrize("order", ["COL", "ROW"])
def test_matrix_layout_batched_and_transposed(lt, order):
    rows, cols, ld, batch, stride = 7, 13, 16, 5, 7 * 16 + 3
    attr = lt.MatrixLayoutAttribute
    # A transposed operand is described by its stored shape: swap rows and cols.
    for r, c in ((rows, cols), (cols, rows)):
        with layout(lt, lt.DataType.R_64F, r, c, ld) as handle:
            lt.set_attribute(handle, attr.ORDER, lt.Order[order])
            lt.set_attribute(handle, attr.BATCH_COUNT, batch)
            lt.set_attribute(handle, attr.STRIDED_BATCH_OFFSET, stride)
            expected = {
                attr.TYPE: lt.DataType.R_64F,
                attr.ORDER: lt.Order[order],
                attr.ROWS: r,
                attr.COLS: c,
                attr.LD: ld,
                attr.BATCH_COUNT: batch,
                attr.STRIDED_BATCH_OFFSET: stride,
                attr.PLANE_OFFSET: 0,
            }
            assert {a: lt.get_attribute(handle, a) for a in attr} == expected


def test_preference_defaults_and_workspace(lt):
    attr = lt.MatmulPreferenceAttribute
    with created(lt, lt.create_preference, lt.LIB.cublasLtMatmulPreferenceDestroy) as pref:
        assert lt.get_attribute(pref, attr.MAX_WORKSPACE_BYTES) == 0
        assert lt.get_attribute(pref, attr.MIN_ALIGNMENT_A_BYTES) == 256
        for value in (32 << 20, 1 << 40):
            lt.set_attribute(pref, attr.MAX_WORKSPACE_BYTES, value)
            assert lt.get_attribute(pref, attr.MAX_WORKSPACE_BYTES) == value
        for which in (attr.MIN_ALIGNMENT_A_BYTES, attr.MIN_ALIGNMENT_D_BYTES):
            lt.set_attribute(pref, which, 16)
            assert lt.get_attribute(pref, which) == 16
        lt.set_attribute(pref, attr.MAX_WAVES_COUNT, 1.5)
        assert lt.get_attribute(pref, attr.MAX_WAVES_COUNT) == 1.5
        lt.set_attribute(pref, attr.REDUCTION_SCHEME_MASK, lt.ReductionScheme.INPLACE)
        assert lt.get_attribute(pref, attr.REDUCTION_SCHEME_MASK) == lt.ReductionScheme.INPLACE


def test_algo_config_round_trips_and_serialises(lt):
    algo = lt.MatmulAlgo()
    attr = lt.AlgoConfigAttribute
    lt.set_attribute(algo, attr.TILE_ID, 5)
    lt.set_attribute(algo, attr.SPLITK_NUM, 4)
    lt.set_attribute(algo, attr.CLUSTER_SHAPE_ID, 2)
    config = lt.algo_config(algo)
    assert set(config) == {a.name for a in attr}
    assert (config["TILE_ID"], config["SPLITK_NUM"], config["CLUSTER_SHAPE_ID"]) == (5, 4, 2)
    restored = lt.MatmulAlgo.from_buffer_copy(bytes(algo))
    assert lt.algo_config(restored) == config


def test_wrong_attribute_size_is_rejected(lt):
    with created(lt, lt.create_preference, lt.LIB.cublasLtMatmulPreferenceDestroy) as pref:
        small = ctypes.c_uint32(1)  # MAX_WORKSPACE_BYTES is a uint64_t
        with pytest.raises(LibraryError, match="CUBLAS_STATUS_INVALID_VALUE"):
            lt.LIB.cublasLtMatmulPreferenceSetAttribute(
                pref, lt.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES, ctypes.byref(small), 4
            )


def test_cusolver_params_work_without_a_device(cuda_wheels):
    cusolver = cuda_wheels["cusolver"]
    params = cusolver.create_params()
    try:
        assert params
        cusolver.LIB.cusolverDnSetAdvOptions(params, cusolver.Function.GETRF, cusolver.AlgMode.ALG_1)
        with pytest.raises(LibraryError, match="CUSOLVER_STATUS_INVALID_VALUE"):
            cusolver.LIB.cusolverDnSetAdvOptions(params, cusolver.Function.GETRF, 77)
    finally:
        cusolver.LIB.cusolverDnDestroyParams(params)
