"""The cuBLASLt matmul engine checked without a GPU.

1. Descriptors: for representative problems (C/F/transposed/padded/batched/broadcast, every
   epilogue, every dtype) the engine's own descriptor code builds the cuBLASLt matmul descriptor
   and layouts, and every attribute reads back as the problem requires.
2. The hot path end to end on the host: the engine's kernel runs on a NumPy-backed stand-in for
   CuPy (host addresses as device pointers) with ``cublasLtMatmul`` replaced by a host emulation
   written from the cuBLASLt header (it reads the descriptors back, so it sees exactly what the
   engine configured). Results, aux outputs and bias gradients are compared with the CPU engine
   in float64. This checks the layout mapping, pointer choice, bias/aux/bgrad buffers, ReLU
   bit-mask packing, result order and copies; what the GPU does with them is for tests/gpu.
3. The engine behind the public Matmul plan (plan, autotune, wisdom hit in a fresh plan, the
   one-call function, ``out=``), with only the device calls stubbed (handle, heuristic,
   algorithm check, timer) and the emulated ``cublasLtMatmul`` computing.
4. Candidates and wisdom: an algorithm survives the JSON round trip byte for byte.
5. Without a driver, a CUDA matmul raises the one clear ExecutionSpaceUnavailableError.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from nvmathpy.errors import ExecutionSpaceUnavailableError, InvalidOperandError, OperandMismatchError
from nvmathpy.plan import Candidate, Problem

pytest.importorskip("cuda.pathfinder", reason="CUDA wheels not installed (pip install 'nvmathpy[cu13]')")
ml_dtypes = pytest.importorskip("ml_dtypes")

from nvmathpy.cuda import lt_algo, runtime  # noqa: E402
from nvmathpy.cuda.bindings import cublaslt as lt  # noqa: E402
from nvmathpy.errors import MissingDependencyError  # noqa: E402
from nvmathpy.linalg import Matmul  # noqa: E402
from nvmathpy.linalg.gemm.matmul_plan import _encode_scalar  # noqa: E402
from nvmathpy.linalg.gemm.cuda._lt_descriptors import LtDescriptors, create_preference  # noqa: E402
from nvmathpy.linalg.gemm.cuda._lt_execute import Launch, build_kernel  # noqa: E402
from nvmathpy.linalg.gemm.cuda._lt_spec import TYPES, build_spec  # noqa: E402
from nvmathpy.linalg.epilogues import DEFINITIONS  # noqa: E402
from nvmathpy.linalg.gemm.cuda._engine import candidate_for  # noqa: E402
from cuda_emulation import emulated_matmul, host, host_cupy, install  # noqa: E402

try:
    lt.LIB.loaded
except MissingDependencyError as exc:  # pragma: no cover - depends on the installation
    pytest.skip(f"cuBLASLt not installed: {exc}", allow_module_level=True)

Desc, Layout, Pref = lt.MatmulDescAttribute, lt.MatrixLayoutAttribute, lt.MatmulPreferenceAttribute
from numerics import DTYPES, TOL, np_dtype, rand, up  # noqa: E402







def rel_err(x, ref):
    x, ref = up(x), up(ref)
    assert x.shape == ref.shape
    assert np.isfinite(x).all()
    return np.linalg.norm((x - ref).ravel()) / max(np.linalg.norm(ref.ravel()), 1e-300)


# -- operands of every layout class ----------------------------------------------------------------


def operand(rng, shape, dtype, layout):
    """A ``shape`` array: "C", "F" (each matrix column-major), "T" (a transposed C array, batch
    included), "pad" (a C array inside a wider one: leading dimension > cols), "step" (every
    other column: needs a copy)."""
    if layout == "C" or len(shape) < 2:
        return rand(rng, shape, dtype)
    if layout == "F":
        return np.swapaxes(rand(rng, shape[:-2] + (shape[-1], shape[-2]), dtype), -1, -2)
    if layout == "T":
        return rand(rng, tuple(reversed(shape)), dtype).T
    if layout == "pad":
        return rand(rng, shape[:-1] + (shape[-1] + 3,), dtype)[..., : shape[-1]]
    return rand(rng, shape[:-1] + (2 * shape[-1],), dtype)[..., ::2]


def problem_of(a, b, c=None, *, epilogue=None, inputs=None, alpha=1.0, beta=None, strides=True, **extra):
    """The problem key the Matmul plan builds for these operands, plus the element strides when
    ``strides`` (what the plan records once the CUDA hook is wired)."""
    plan = Matmul(a, b, c, alpha=alpha, beta=beta, epilogue=epilogue, epilogue_inputs=inputs)
    fields = plan.problem.as_dict()["fields"]
    # CUDA-only fields: the host plan's key holds only the scalars' kinds
    fields["alpha"], fields["beta"] = _encode_scalar(alpha), _encode_scalar(beta)
    if strides:
        fields["a_strides"] = [s // a.itemsize for s in a.strides]
        fields["b_strides"] = [s // b.itemsize for s in b.strides]
    fields.update(extra)
    return Problem.of("matmul", **fields), plan


# -- 1. descriptors read back -----------------------------------------------------------------------


def read_layout(handle):
    return {attr.name: lt.get_attribute(handle, attr) for attr in
            (Layout.TYPE, Layout.ROWS, Layout.COLS, Layout.LD, Layout.BATCH_COUNT, Layout.STRIDED_BATCH_OFFSET)}


def expected_layout(spec, matrix):
    return {"TYPE": spec.data_type, "ROWS": matrix.rows, "COLS": matrix.cols, "LD": max(matrix.ld, 1),
            "BATCH_COUNT": spec.batch, "STRIDED_BATCH_OFFSET": matrix.batch_stride}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", [
    # (a shape, a layout, b shape, b layout, copies of a and b): C, F, transposed, padded, batched,
    # broadcast, 1-D; (2, 1) against (3,) batches cannot be walked by one stride: both are expanded
    ((7, 5), "C", (5, 3), "C", ""), ((7, 5), "F", (5, 3), "T", ""), ((7, 5), "pad", (5, 3), "F", ""),
    ((4, 7, 5), "C", (5, 3), "pad", ""), ((2, 1, 7, 5), "F", (3, 5, 3), "C", "ab"),
    ((5,), "C", (2, 5, 3), "T", "b"), ((7, 5), "step", (5,), "C", "a"),  # a 3-D .T has no unit stride
])
def test_descriptors_and_layouts_read_back(dtype, case):
    rng = np.random.default_rng(1)
    a_shape, a_layout, b_shape, b_layout, copies = case
    a, b = operand(rng, a_shape, dtype, a_layout), operand(rng, b_shape, dtype, b_layout)
    problem, _ = problem_of(a, b)
    spec = build_spec(problem)
    data_type, compute, scale = TYPES[dtype]
    with LtDescriptors(spec) as d:
        assert lt.get_attribute(d.desc, Desc.COMPUTE_TYPE) == compute
        assert lt.get_attribute(d.desc, Desc.SCALE_TYPE) == scale
        assert lt.get_attribute(d.desc, Desc.TRANSA) == (1 if spec.lt.first.trans else 0)
        assert lt.get_attribute(d.desc, Desc.TRANSB) == (1 if spec.lt.second.trans else 0)
        assert lt.get_attribute(d.desc, Desc.EPILOGUE) == lt.Epilogue.DEFAULT
        assert read_layout(d.a) == expected_layout(spec, spec.lt.first)
        assert read_layout(d.b) == expected_layout(spec, spec.lt.second)
        assert read_layout(d.d) == expected_layout(spec, spec.lt.d)
    # the C-ordered result swaps the operands: cuBLASLt's A is the NumPy b (stored N x K)
    assert spec.order == "C" and spec.lt.swapped
    assert (spec.lt.first.rows if not spec.lt.first.trans else spec.lt.first.cols) == spec.n
    assert (spec.lt.d.rows, spec.lt.d.cols, spec.lt.d.ld) == (spec.n, spec.m, spec.n)
    assert (spec.a_strides != tuple(s // a.itemsize for s in a.strides)) == ("a" in copies)
    assert (spec.b_strides != tuple(s // b.itemsize for s in b.strides)) == ("b" in copies)
    assert sorted(spec.expand) == (["a", "b"] if copies == "ab" else [])


def test_tf32_compute_type_is_an_option():
    a = np.ones((3, 4), np.float32)
    problem, _ = problem_of(a, a.T.copy())
    assert build_spec(problem).compute_type == lt.ComputeType.COMPUTE_32F
    assert build_spec(problem, allow_tf32=True).compute_type == lt.ComputeType.COMPUTE_32F_FAST_TF32
    f64, _ = problem_of(a.astype(np.float64), a.T.astype(np.float64))
    assert build_spec(f64, allow_tf32=True).compute_type == lt.ComputeType.COMPUTE_64F


EPILOGUE_ENUMS = {
    "relu": "RELU", "gelu": "GELU", "bias": "BIAS", "relu_bias": "RELU_BIAS", "gelu_bias": "GELU_BIAS",
    "relu_aux": "RELU_AUX", "gelu_aux": "GELU_AUX", "relu_aux_bias": "RELU_AUX_BIAS",
    "gelu_aux_bias": "GELU_AUX_BIAS", "drelu": "DRELU", "drelu_bgrad": "DRELU_BGRAD", "dgelu": "DGELU",
    "dgelu_bgrad": "DGELU_BGRAD", "bgrada": "BGRADB", "bgradb": "BGRADA",  # C order: a is cuBLASLt's B
}


def epilogue_inputs(rng, name, result_shape, m, n, dtype, bias_per="col", batch=()):
    inputs = {}
    for needed in DEFINITIONS[name].inputs:
        if needed == "bias":
            per = ((1, n) if batch else (n,)) if bias_per == "col" else (m, 1)
            inputs["bias"] = rand(rng, batch + per, dtype)
        elif needed == "relu_aux":
            inputs["relu_aux"] = rng.standard_normal(result_shape) > 0
        else:
            inputs["gelu_aux"] = rand(rng, result_shape, dtype)
    return inputs


@pytest.mark.parametrize("name", sorted(DEFINITIONS))
@pytest.mark.parametrize("batch", [(), (3,)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_every_epilogue_maps_to_its_cublaslt_epilogue(name, batch, dtype):
    rng = np.random.default_rng(2)
    m, n, k = 9, 13, 6
    a, b = rand(rng, batch + (m, k), dtype), rand(rng, (k, n), dtype)
    inputs = epilogue_inputs(rng, name, batch + (m, n), m, n, dtype, batch=batch)
    problem, _ = problem_of(a, b, epilogue=name, inputs=inputs)
    spec = build_spec(problem)
    assert spec.order == "C"  # column bias and every other epilogue: cuBLASLt's D is the result's transpose
    vector = {"bgrada": m}.get(name, n)  # bias / bias-gradient values per matrix: n (per column), m for bgrada
    batched = bool(batch) and (name not in ("bias", "relu_bias", "gelu_bias", "relu_aux_bias", "gelu_aux_bias")
                               or inputs["bias"].ndim > 1)
    with LtDescriptors(spec) as d:
        assert lt.get_attribute(d.desc, Desc.EPILOGUE) == lt.Epilogue[EPILOGUE_ENUMS[name]]
        assert (lt.get_attribute(d.desc, Desc.COMPUTE_TYPE), lt.get_attribute(d.desc, Desc.SCALE_TYPE)) == \
            TYPES[dtype][1:]
        if "bias" in inputs or DEFINITIONS[name].reductions:
            assert lt.get_attribute(d.desc, Desc.BIAS_DATA_TYPE) == TYPES[dtype][0]  # the result's type
            assert (spec.bias.length if spec.bias is not None else spec.bgrad[1]) == vector
            assert lt.get_attribute(d.desc, Desc.BIAS_BATCH_STRIDE) == (vector if batched else 0)
        aux = [x for x in ("relu_aux", "gelu_aux") if x in DEFINITIONS[name].aux + DEFINITIONS[name].inputs]
        if aux:
            ld = lt.get_attribute(d.desc, Desc.EPILOGUE_AUX_LD)
            multiple = 128 if aux[0] == "relu_aux" else 8  # bits of the ReLU mask, elements of the GELU input
            assert ld % multiple == 0 and n <= ld < n + multiple
            assert lt.get_attribute(d.desc, Desc.EPILOGUE_AUX_BATCH_STRIDE) == ld * m
        else:
            assert lt.get_attribute(d.desc, Desc.EPILOGUE_AUX_LD) == 0
        for pointer in (Desc.BIAS_POINTER, Desc.EPILOGUE_AUX_POINTER):
            assert lt.get_attribute(d.desc, pointer) == 0  # set per call by the hot path


def test_row_bias_uses_the_f_ordered_problem():
    rng = np.random.default_rng(3)
    a, b = rand(rng, (6, 4), "float64"), rand(rng, (4, 5), "float64")
    problem, _ = problem_of(a, b, epilogue="relu_bias", inputs={"bias": rand(rng, (6, 1), "float64")})
    spec = build_spec(problem)
    assert spec.order == "F" and not spec.lt.swapped and spec.bias.length == 6
    assert (spec.lt.d.rows, spec.lt.d.cols) == (6, 5)
    col, _ = problem_of(a, b, epilogue="relu_bias", inputs={"bias": rand(rng, (5,), "float64")})
    assert build_spec(col).order == "C" and build_spec(col).bias.length == 5


def test_full_matrix_bias_is_refused_with_a_clear_error():
    rng = np.random.default_rng(4)
    a, b = rand(rng, (6, 4), "float32"), rand(rng, (4, 5), "float32")
    problem, _ = problem_of(a, b, epilogue="bias", inputs={"bias": rand(rng, (6, 5), "float32")})
    with pytest.raises(InvalidOperandError, match=r"bias of shape \(6, 5\).*per column"):
        build_spec(problem)


def test_preference_holds_the_workspace_limit_and_alignments():
    pref = create_preference(12345, (16, 32, 64, 128))
    try:
        assert lt.get_attribute(pref, Pref.MAX_WORKSPACE_BYTES) == 12345
        got = [lt.get_attribute(pref, attr) for attr in (Pref.MIN_ALIGNMENT_A_BYTES, Pref.MIN_ALIGNMENT_B_BYTES,
                                                          Pref.MIN_ALIGNMENT_C_BYTES, Pref.MIN_ALIGNMENT_D_BYTES)]
        assert got == [16, 32, 64, 128]
    finally:
        lt.LIB.cublasLtMatmulPreferenceDestroy(pref)


# -- 2. the hot path on the host ---------------------------------------------------------------------


@pytest.fixture
def host_kernel(monkeypatch):
    """``make(problem) -> kernel`` built by the engine's own code, running on the host."""
    monkeypatch.setitem(sys.modules, "cupy", host_cupy())
    monkeypatch.setattr(lt.LIB, "cublasLtMatmul", emulated_matmul, raising=False)
    made, relaxed_calls = [], []

    def relaxed(alignments):
        relaxed_calls.append(alignments)
        return lt.MatmulAlgo(), 0, 0

    def make(problem, order=None):
        spec = build_spec(problem, order)
        descriptors = LtDescriptors(spec)
        made.append(descriptors)
        launch = Launch(handle=0, desc=descriptors.desc, a=descriptors.a, b=descriptors.b, d=descriptors.d,
                        algo=lt.MatmulAlgo(), workspace=0, workspace_bytes=0, relaxed=relaxed,
                        stream=lambda: 0, explicit_stream=None, package="cupy", device_id=0)
        return build_kernel(spec, launch)

    make.relaxed_calls = relaxed_calls
    yield make
    for descriptors in made:
        descriptors.destroy()


def run_both(make, a, b, c=None, *, epilogue=None, inputs=None, alpha=1.0, beta=None, strides=True, order=None):
    """(engine result on the host, CPU-engine float64 reference); both may be (result, aux)."""
    problem, _ = problem_of(a, b, c, epilogue=epilogue, inputs=inputs, alpha=alpha, beta=beta, strides=strides)
    kernel = make(problem, order)
    before = [np.array(x, copy=True) for x in (a, b, c, *(inputs or {}).values()) if x is not None]
    got = kernel(host(a), host(b), host(c), {k: host(v) for k, v in (inputs or {}).items()}, None)
    after = [x for x in (a, b, c, *(inputs or {}).values()) if x is not None]
    assert all(np.array_equal(x, y) for x, y in zip(before, after)), "an operand was modified"
    ups = {k: (v if v.dtype == bool else up(v)) for k, v in (inputs or {}).items()}
    with Matmul(up(a), up(b), None if c is None else up(c), alpha=alpha, beta=beta, epilogue=epilogue,
                epilogue_inputs=ups or None) as ref:
        ref.plan()
        return got, ref.execute()


def check(got, ref, dtype):
    if isinstance(ref, tuple):
        assert isinstance(got, tuple) and set(got[1]) == set(ref[1])
        for name, value in ref[1].items():
            if value.dtype == bool:
                assert got[1][name].dtype == bool and np.array_equal(np.asarray(got[1][name]), value), name
            else:
                assert rel_err(got[1][name], value) < TOL[dtype] * 10, name
        got, ref = got[0], ref[0]
    assert np.asarray(got).dtype == np_dtype(dtype)
    assert rel_err(got, ref) < TOL[dtype]


LAYOUT_CASES = [
    ((7, 5), "C", (5, 3), "C"), ((7, 5), "F", (5, 3), "F"), ((7, 5), "T", (5, 3), "pad"),
    ((4, 7, 5), "C", (5, 3), "F"), ((2, 1, 7, 5), "pad", (3, 5, 3), "T"), ((5,), "C", (2, 5, 3), "F"),
    ((2, 3, 7, 5), "C", (3, 5, 2), "pad"), ((3, 1, 7, 5), "T", (1, 4, 5, 2), "F"),
    ((7, 5), "step", (5,), "C"), ((3, 7, 5), "F", (3, 5, 11), "step"), ((11,), "C", (11,), "C"),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", LAYOUT_CASES)
def test_plain_products_on_the_host(host_kernel, dtype, case):
    rng = np.random.default_rng(5)
    a_shape, a_layout, b_shape, b_layout = case
    a, b = operand(rng, a_shape, dtype, a_layout), operand(rng, b_shape, dtype, b_layout)
    got, ref = run_both(host_kernel, a, b)
    check(got, ref, dtype)


@pytest.mark.parametrize("strides", [True, False])
def test_operands_whose_strides_are_not_recorded_are_copied(host_kernel, strides):
    rng = np.random.default_rng(6)
    a, b = operand(rng, (3, 9, 7), "float64", "pad"), operand(rng, (7, 5), "float64", "T")
    problem, _ = problem_of(a, b, strides=strides)
    spec = build_spec(problem)
    assert (spec.a_copy, spec.b_copy) == (None if strides else "C", "F")
    got, ref = run_both(host_kernel, a, b, strides=strides)
    check(got, ref, "float64")


def test_a_recorded_layout_that_changes_is_refused(host_kernel):
    rng = np.random.default_rng(7)
    a, b = operand(rng, (9, 7), "float64", "pad"), rand(rng, (7, 5), "float64")
    problem, _ = problem_of(a, b)
    kernel = host_kernel(problem)
    other = operand(rng, (9, 7), "float64", "step")
    with pytest.raises(OperandMismatchError, match=r"a has strides"):
        kernel(host(other), host(b), None, {}, None)


@pytest.mark.parametrize("name", sorted(DEFINITIONS))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("batch", [(), (3,)])
def test_every_epilogue_on_the_host(host_kernel, name, dtype, batch):
    rng = np.random.default_rng(8)
    m, n, k = 9, 13, 6
    a, b = operand(rng, batch + (m, k), dtype, "F"), operand(rng, (k, n), dtype, "C")
    inputs = epilogue_inputs(rng, name, batch + (m, n), m, n, dtype, batch=batch)
    got, ref = run_both(host_kernel, a, b, epilogue=name, inputs=inputs)
    if dtype == "float32" and name in ("relu_aux", "relu_aux_bias"):
        # a mask bit may differ from the float64 reference only where the pre-activation is ~0
        x = up(a) @ up(b) + (up(inputs["bias"]) if "bias" in inputs else 0)
        differ = np.asarray(got[1]["relu_aux"]) != ref[1]["relu_aux"]
        assert np.all(np.abs(x[differ]) < 1e-5)
        got, ref = got[0], ref[0]
    check(got, ref, dtype)


@pytest.mark.parametrize("name", ["bias", "relu_aux_bias", "gelu_aux_bias"])
def test_row_bias_on_the_host(host_kernel, name):
    rng = np.random.default_rng(9)
    a, b = rand(rng, (2, 7, 4), "float64"), operand(rng, (4, 5), "float64", "F")
    got, ref = run_both(host_kernel, a, b, epilogue=name, inputs={"bias": rand(rng, (7, 1), "float64")})
    check(got, ref, "float64")


@pytest.mark.parametrize("bias_shape", [(1,), (), (3, 1, 5), (1, 1, 5)])
def test_broadcast_bias_shapes_on_the_host(host_kernel, bias_shape):
    rng = np.random.default_rng(10)
    a, b = rand(rng, (3, 7, 4), "float64"), rand(rng, (4, 5), "float64")
    got, ref = run_both(host_kernel, a, b, epilogue="gelu_bias", inputs={"bias": rand(rng, bias_shape, "float64")})
    check(got, ref, "float64")


@pytest.mark.parametrize("c_shape", [(7, 5), (5,), (3, 7, 5), (7, 1)])
@pytest.mark.parametrize("epilogue", [None, "relu_bias"])
def test_c_alpha_beta_on_the_host(host_kernel, c_shape, epilogue):
    rng = np.random.default_rng(11)
    a, b, c = rand(rng, (3, 7, 4), "complex128"), rand(rng, (4, 5), "complex128"), rand(rng, c_shape, "complex128")
    if epilogue is not None:
        a, b, c = a.real.copy(), b.real.copy(), c.real.copy()
    inputs = {"bias": rand(rng, (7, 1), "float64")} if epilogue else None
    got, ref = run_both(host_kernel, a, b, c, epilogue=epilogue, inputs=inputs, alpha=0.5 if epilogue else 0.5 + 2j,
                        beta=-1.5)
    check(got, ref, "float64" if epilogue else "complex128")


@pytest.mark.parametrize("name", ["bgrada", "bgradb"])
def test_bias_gradients_in_both_orders(host_kernel, name):
    rng = np.random.default_rng(12)
    a, b = rand(rng, (2, 7, 4), "float64"), operand(rng, (2, 4, 5), "float64", "T")
    for order in ("C", "F"):
        got, ref = run_both(host_kernel, a, b, epilogue=name, order=order)
        check(got, ref, "float64")


def test_misaligned_pointers_take_a_relaxed_algorithm(host_kernel):
    rng = np.random.default_rng(13)
    a, b = rand(rng, (6, 4), "float64"), rand(rng, (4, 5), "float64")
    problem, _ = problem_of(a, b)
    kernel = host_kernel(problem)
    d = kernel(host(a), host(b), None, {}, None)
    assert rel_err(d, up(a) @ up(b)) < 1e-12
    alignments = host_kernel.relaxed_calls[-1]
    pointers = (b.ctypes.data, a.ctypes.data, d.ctypes.data, d.ctypes.data)
    assert alignments == tuple(min(256, p & -p) for p in pointers)


# -- 3. the engine through the public plan, on the host -------------------------------------------------


@pytest.fixture
def host_engine(monkeypatch, host_kernel):
    """The CUDA engine behind ``Matmul(..., execution="cuda")`` on the host (see cuda_emulation);
    returns the list of algorithms ``cublasLtMatmulAlgoCheck`` was asked about."""
    from nvmathpy.execution import ExecutionCUDA
    from nvmathpy.linalg.gemm import matmul_plan

    checked = install(monkeypatch.setattr, monkeypatch.setitem)
    monkeypatch.setattr(matmul_plan, "resolve_execution", lambda value, device, device_id: ExecutionCUDA(0))
    return checked


def test_plan_autotune_and_wisdom_hit_through_the_engine(host_engine):
    rng = np.random.default_rng(14)
    a, b = host(rand(rng, (2, 9, 7), "float64")), host(operand(rng, (7, 5), "float64", "F"))
    bias = host(rand(rng, (5,), "float64"))
    expected = np.maximum(up(a) @ up(b) + up(bias), 0)
    with Matmul(a, b, epilogue="relu_bias", epilogue_inputs={"bias": bias}, execution="cuda") as first:
        first.plan()
        assert first.chosen_by == "heuristic" and first.candidate.label == "cublaslt"
        assert rel_err(first.execute(), expected) < 1e-12
        timings = first.autotune(effort="exhaustive", repeats=2)
        assert len(timings) == 3 and first.chosen_by == "autotune"
        winner = first.candidate
        assert rel_err(first.execute(), expected) < 1e-12
    with Matmul(a, b, epilogue="relu_bias", epilogue_inputs={"bias": bias}, execution="cuda") as second:
        second.plan()
        assert second.chosen_by == "wisdom" and second.candidate == winner
        assert host_engine[-1] == bytes(lt_algo.algo_from_hex(winner.params["algo"]))
        assert rel_err(second.execute(), expected) < 1e-12


def test_one_call_matmul_and_out_through_the_engine(host_engine):
    import nvmathpy.linalg as la

    rng = np.random.default_rng(15)
    a, b = host(rand(rng, (6, 4), "complex128")), host(rand(rng, (4, 3), "complex128"))
    for _ in range(2):  # the second call reuses the cached plan
        assert rel_err(la.matmul(a, b, execution="cuda"), up(a) @ up(b)) < 1e-12
    out = host(np.full((6, 3), np.nan, np.complex128))
    with Matmul(a, b, execution="cuda") as mm:
        mm.plan()
        assert mm.execute(out=out) is out
    assert rel_err(out, up(a) @ up(b)) < 1e-12


# -- 4. candidates and wisdom ---------------------------------------------------------------------


def test_algorithm_survives_the_wisdom_round_trip():
    algo = lt.MatmulAlgo()
    for i in range(8):
        algo.data[i] = (0x0123456789ABCDEF * (i + 1)) & (2**64 - 1)
    lt.set_attribute(algo, lt.AlgoConfigAttribute.TILE_ID, 7)
    lt.set_attribute(algo, lt.AlgoConfigAttribute.SPLITK_NUM, 3)
    candidate = candidate_for("F", algo, 4096)
    restored = Candidate.from_dict(json.loads(json.dumps(candidate.to_dict())))
    assert restored == candidate
    again = lt_algo.algo_from_hex(restored.params["algo"])
    assert bytes(again) == bytes(algo)
    assert "tile_id=7 " in restored.params["config"] and "splitk_num=3 " in restored.params["config"]
    assert (restored.params["order"], restored.params["workspace"]) == ("F", 4096)
    with pytest.raises(ValueError, match="64 bytes"):
        lt_algo.algo_from_hex("00" * 63)


def test_algo_init_needs_a_handle_so_host_tests_fill_bytes():
    # cublasLtMatmulAlgoInit takes a handle, and handles need a device: without one it fails, which
    # is why the round trip above fills the bytes itself.
    init = lt.LIB.loaded.cdll.cublasLtMatmulAlgoInit
    init.restype = ctypes.c_int
    algo = lt.MatmulAlgo()
    assert init(None, 68, 0, 0, 0, 0, 0, 1, ctypes.byref(algo)) == lt.Status.CUBLAS_STATUS_NOT_INITIALIZED


def test_device_description():
    props = {"name": b"NVIDIA H200", "major": 9, "minor": 0, "multiProcessorCount": 132, "l2CacheSize": 60 << 20}
    description = runtime.describe_device(props, (13, 1, 2), 13010)
    assert description == {"space": "cuda", "gpu": "NVIDIA H200", "compute_capability": "9.0",
                           "multiprocessors": 132, "l2_bytes": 60 << 20, "cublaslt": "13.1.2",
                           "cuda_runtime": "13.1"}
    assert json.loads(json.dumps(description)) == description


def test_stream_arguments():
    class Torchish:
        cuda_stream = 77

    class Cupyish:
        ptr = 55

    assert [runtime.stream_pointer(s) for s in (0, 9, Torchish(), Cupyish())] == [0, 9, 77, 55]
    for bad in (-1, True, "default", 1.5):
        with pytest.raises(Exception, match="stream"):
            runtime.stream_pointer(bad)


# -- 5. no driver ----------------------------------------------------------------------------------


def test_cuda_execution_without_a_driver_raises_one_clear_error():
    from nvmathpy.cuda.driver import cuda_status

    if cuda_status().available:
        pytest.skip("a CUDA device is usable here")
    a = np.ones((3, 4))
    with pytest.raises(ExecutionSpaceUnavailableError, match="CUDA is not available"):
        Matmul(a, a.T, execution="cuda")
    import nvmathpy.linalg as la

    with pytest.raises(ExecutionSpaceUnavailableError, match="CUDA is not available"):
        la.matmul(a, a.T, execution="cuda")


def test_engine_modules_do_not_import_cupy():
    code = ("import sys, nvmathpy.linalg.gemm.cuda._engine, nvmathpy.cuda.runtime, nvmathpy.cuda.lt_algo; "
            "print(any(m in sys.modules for m in ('cupy', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_gpu_tests_pass_under_the_host_emulation():
    """tests/gpu run with the host emulation plugin: the GPU tests' own logic (operand builders,
    references, tolerances, the plan and engine glue) is checked here; only the stream, torch and
    device-description tests, which need a real device, are left out."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/gpu", "-p", "cuda_emulation", "-q", "-p", "no:cacheprovider",
         "-k", "not stream and not torch and not device_description"],
        cwd=root, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": f"{root}:{root / 'tests'}"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout
