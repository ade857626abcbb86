"""Kernel numerics on the CPU: the generated CUDA C compiled by g++ under the emulation header,
launched through the same argument packing as the GPU, compared with float64 NumPy."""

from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np
import pytest

import kernels_emulator as emu
from kernels_cases import OP_CASES, case_inputs, needs_gxx, traced
from nvmathpy.kernels.cpu_eval import evaluate_reference
from nvmathpy.kernels.elementwise import elementwise_kernel
from nvmathpy.kernels.gemm_tiled import MMA_CONFIGS, SIMT_CONFIGS, gemm_kernel
from nvmathpy.kernels.launch import epilogue_values, pack_arguments
from nvmathpy.kernels.trace import gelu, trace

pytestmark = needs_gxx

NUMPY_DTYPE = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float64": np.float64}
TOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-5, "float64": 1e-12}
SHAPE = (2, 37, 29)  # batch, m, n
K = 41
SIMT_CASES = [(dt, cfg) for dt in ("float32", "float64") for cfg in SIMT_CONFIGS]
MMA_CASES = [(dt, cfg) for dt in ("float16", "bfloat16") for cfg in MMA_CONFIGS]
TRANS_CASES = [("simt", "float32", True, False), ("simt", "float64", False, True), ("simt", "float32", True, True),
               ("twin", "float16", True, False), ("twin", "bfloat16", False, True), ("twin", "float16", True, True)]
SUBSET = ("mul_matrix", "index_batch", "erf")
GEMM_OP_CASES = ([("simt", "float32", case) for case in sorted(OP_CASES)]
                 + [(variant, dtype, case) for variant, dtype in (("simt", "float64"), ("twin", "float16"))
                    for case in SUBSET])


def rel_error(got, ref):
    got = np.asarray(got, dtype=np.float64)
    assert np.isfinite(got).all(), "non-finite values in the kernel's result"
    return np.linalg.norm(got - ref) / np.linalg.norm(ref)


def elementwise_op_kernel(case):
    return elementwise_kernel(traced(case)[0], "float32")


def config_kernel(dtype, config):
    variant = "simt" if dtype in ("float32", "float64") else "twin"
    expr = trace(lambda x, bias: np.maximum(x + bias, 0), {"bias": "col"})
    return gemm_kernel(dtype, config=config, variant=variant, with_c=True, epilogue=expr)


def trans_kernel(variant, dtype, trans_a, trans_b):
    return gemm_kernel(dtype, variant=variant, trans_a=trans_a, trans_b=trans_b)


def gemm_op_kernel(variant, dtype, case):
    config = SIMT_CONFIGS[4] if variant == "simt" else MMA_CONFIGS[0]
    return gemm_kernel(dtype, variant=variant, config=config, epilogue=traced(case)[0])


@pytest.fixture(scope="module", autouse=True)
def prebuilt():
    """Compile every kernel of this module in parallel before the tests run them."""
    emu.prebuild([elementwise_op_kernel(case) for case in sorted(OP_CASES)]
                 + [config_kernel(dtype, config) for dtype, config in SIMT_CASES + MMA_CASES]
                 + [trans_kernel(*case) for case in TRANS_CASES]
                 + [gemm_op_kernel(*case) for case in GEMM_OP_CASES])


def run_elementwise(kernel, d, inputs):
    refs = {name: emu.epilogue_ref(inputs[name], kind) for name, kind in kernel.inputs if kind != "value"}
    batch, m, n = d.shape
    step = d.dtype.itemsize
    values = {("d", None): d.ctypes.data, ("batch", None): batch, ("m", None): m, ("n", None): n,
              ("ldd", None): d.strides[1] // step, ("stride_d", None): d.strides[0] // step,
              **epilogue_values(kernel.inputs, refs)}
    emu.launch(kernel.source, kernel.name, (3, 1, 1), (64, 1, 1), pack_arguments(kernel.params, values))


@pytest.mark.parametrize("case", sorted(OP_CASES))
def test_elementwise_kernel_every_op(case):
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    expr, kinds = traced(case)
    value = rng.standard_normal(SHAPE).astype(np.float32)
    inputs = case_inputs(kinds, SHAPE, np.float32, rng)
    kernel = elementwise_op_kernel(case)
    d = value.copy()
    run_elementwise(kernel, d, inputs)
    ref = evaluate_reference(expr, value.astype(np.float64), inputs)
    assert rel_error(d, ref) < 2e-6


@pytest.mark.parametrize("storage,vector", [("float16", 2), ("bfloat16", 4), ("float32", 4), ("float64", 1)])
def test_elementwise_kernel_storage_dtypes(storage, vector):
    rng = np.random.default_rng(7)
    dtype = NUMPY_DTYPE[storage]
    expr = trace(lambda x, bias, s: gelu(x + bias) * s, {"bias": "col", "s": "scalar"})
    shape = (3, 5, 12)
    value = rng.standard_normal(shape).astype(dtype)
    inputs = {"bias": rng.standard_normal(12).astype(dtype), "s": 1.5}
    d = value.copy()
    run_elementwise(elementwise_kernel(expr, storage, vector), d, inputs)
    ref = evaluate_reference(expr, value.astype(np.float64), {"bias": inputs["bias"].astype(np.float64), "s": 1.5})
    assert rel_error(d, ref) < TOL[storage]


def test_emulated_half_conversions_round_like_numpy():
    """The emulation's float16/bfloat16 conversions (used by every 16-bit kernel) round to nearest
    even exactly as NumPy/ml_dtypes do, subnormals, overflow, infinities and NaN included."""
    rng = np.random.default_rng(3)
    bits = rng.integers(0, 2**32, size=6000, dtype=np.uint64).astype(np.uint32)
    specials = np.array([0.0, -0.0, 65504.0, 65519.99, 65520.0, 6e-8, 3e-8, 2.9e-8, 1e-40, np.inf, -np.inf],
                        dtype=np.float32)
    x = np.concatenate([bits.view(np.float32), specials, (rng.standard_normal(3000) * 1e-5).astype(np.float32)])
    x = x[~np.isnan(x)].reshape(1, 1, -1)  # NaN payloads differ; NaN itself is checked below
    for dtype in (np.float16, ml_dtypes.bfloat16):
        kernel = elementwise_kernel(trace(lambda v: v.astype(dtype), {}), "float32")
        d = x.copy()
        run_elementwise(kernel, d, {})
        with np.errstate(over="ignore"):
            expected = x.astype(dtype).astype(np.float32)
        np.testing.assert_array_equal(d, expected)
        nan = np.full((1, 1, 4), np.nan, dtype=np.float32)
        run_elementwise(kernel, nan, {})
        assert np.isnan(nan).all()


def gemm_operands(dtype, rng, trans_a=False, trans_b=False, batch=SHAPE[0]):
    _, m, n = SHAPE
    a = rng.standard_normal((batch, K, m) if trans_a else (batch, m, K)).astype(dtype)
    b = rng.standard_normal((batch, n, K) if trans_b else (batch, K, n)).astype(dtype)
    av = a.transpose(0, 2, 1) if trans_a else a
    bv = b.transpose(0, 2, 1) if trans_b else b
    return av, bv


def gemm_reference(a, b, alpha, beta=0.0, c=None):
    out = alpha * np.matmul(a.astype(np.float64), b.astype(np.float64))
    return out if c is None else out + beta * c.astype(np.float64)




@pytest.mark.parametrize("dtype,config", SIMT_CASES + MMA_CASES,
                         ids=[f"{d}-{c.label('simt' if d in ('float32', 'float64') else 'twin')}"
                              for d, c in SIMT_CASES + MMA_CASES])
def test_gemm_tile_configs_bias_relu_with_c(dtype, config):
    rng = np.random.default_rng(11)
    np_dtype = NUMPY_DTYPE[dtype]
    a, b = gemm_operands(np_dtype, rng)
    c = rng.standard_normal(SHAPE).astype(np_dtype)
    bias = rng.standard_normal(SHAPE[2]).astype(np_dtype)
    kernel = config_kernel(dtype, config)
    d = np.full(SHAPE, np.nan, dtype=np_dtype)
    a_before, c_before = a.copy(), c.copy()
    emu.run_gemm(kernel, a, b, d, alpha=0.75, beta=-1.25, c=c, inputs={"bias": bias})
    ref = np.maximum(gemm_reference(a, b, 0.75, -1.25, c) + bias.astype(np.float64), 0)
    assert rel_error(d, ref) < TOL[dtype] * (1 if dtype in ("float16", "bfloat16") else np.sqrt(K))
    np.testing.assert_array_equal(a, a_before)
    np.testing.assert_array_equal(c, c_before)


@pytest.mark.parametrize("variant,dtype,trans_a,trans_b", TRANS_CASES)
def test_gemm_transposed_and_strided_operands(variant, dtype, trans_a, trans_b):
    rng = np.random.default_rng(5)
    np_dtype = NUMPY_DTYPE[dtype]
    a, b = gemm_operands(np_dtype, rng, trans_a, trans_b)
    # a result with padded leading dimension and batch stride, written inside a larger buffer
    big = np.full((SHAPE[0], SHAPE[1] + 3, SHAPE[2] + 5), 9.0, dtype=np_dtype)
    d = big[:, 1:-2, 2:-3]
    kernel = trans_kernel(variant, dtype, trans_a, trans_b)
    emu.run_gemm(kernel, a, b, d, alpha=1.5)
    assert rel_error(d, gemm_reference(a, b, 1.5)) < TOL[dtype] * 3
    untouched = np.ones(big.shape, dtype=bool)
    untouched[:, 1:-2, 2:-3] = False
    assert (big[untouched] == 9.0).all()


def test_gemm_broadcast_batch_of_b():
    """A batch stride of 0 shares one B across the batch."""
    rng = np.random.default_rng(2)
    a, _ = gemm_operands(np.float32, rng)
    b0 = rng.standard_normal((1, K, SHAPE[2])).astype(np.float32)
    b = np.broadcast_to(b0, (SHAPE[0], K, SHAPE[2]))
    d = np.empty(SHAPE, dtype=np.float32)
    emu.run_gemm(gemm_kernel("float32", config=SIMT_CONFIGS[4]), a, b, d)
    assert rel_error(d, gemm_reference(a, b, 1.0)) < 1e-5


@pytest.mark.parametrize("variant,dtype,case", GEMM_OP_CASES)
def test_gemm_every_epilogue_op(variant, dtype, case):
    rng = np.random.default_rng(zlib.crc32(f"{variant}-{dtype}-{case}".encode()))
    np_dtype = NUMPY_DTYPE[dtype]
    expr, kinds = traced(case)
    a, b = gemm_operands(np_dtype, rng)
    inputs = case_inputs(kinds, SHAPE, np_dtype, rng)
    kernel = gemm_op_kernel(variant, dtype, case)
    d = np.empty(SHAPE, dtype=np_dtype)
    emu.run_gemm(kernel, a, b, d, alpha=0.2, inputs=inputs)
    value = gemm_reference(a, b, 0.2)
    ref = evaluate_reference(expr, value, {k: np.asarray(v, dtype=np.float64) for k, v in inputs.items()})
    assert rel_error(d, ref) < {"float32": 1e-5, "float64": 1e-12, "float16": 2e-3}[dtype]
