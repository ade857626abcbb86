"""Argument packing, operand views, option validation, and what reaches the generated source."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvmathpy.errors import InvalidOperandError, InvalidOptionError
from nvmathpy.kernels.elementwise import elementwise_kernel
from nvmathpy.kernels.ir import Expr, input_
from nvmathpy.kernels.gemm_tiled import MMA_CONFIGS, TileConfig, gemm_kernel, gemm_layout
from nvmathpy.kernels.launch import ARG_CTYPES, ArrayRef, KernelParam, pack_arguments
from nvmathpy.kernels.trace import trace


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(ARG_CTYPES)), st.integers(-2**31, 2**31 - 1)), max_size=12))
def test_packed_pointers_address_each_value_in_its_c_type(entries):
    params = [KernelParam((f"p{i}", None), ctype) for i, (ctype, _) in enumerate(entries)]
    values = {p.key: (v if p.ctype not in ("ptr",) else abs(v)) for p, (_, v) in zip(params, entries)}
    packed = pack_arguments(params, values)
    assert len(packed) == len(params)
    for i, p in enumerate(params):
        ctype = ARG_CTYPES[p.ctype]
        got = ctypes.cast(packed.array[i], ctypes.POINTER(ctype)).contents.value
        expected = ctype(values[p.key]).value
        assert got == expected or (got is None and expected in (None, 0))


def test_packing_names_missing_and_unexpected_arguments():
    params = [KernelParam(("m", None), "i64"), KernelParam(("ptr", "bias"), "ptr")]
    with pytest.raises(InvalidOperandError, match=r"missing \[\('ptr', 'bias'\)\], unexpected \[\('k', None\)\]"):
        pack_arguments(params, {("m", None): 3, ("k", None): 4})


def test_gemm_params_match_the_signature_order():
    expr = trace(lambda x, bias, s: x * s + bias, {"bias": "row", "s": "scalar"})
    kernel = gemm_kernel("float64", with_c=True, epilogue=expr)
    keys = [p.key[0] for p in kernel.params]
    assert keys[:4] == ["a", "b", "c", "d"]
    assert [p.key for p in kernel.params][-5:] == [("scalar", "s"), ("ptr", "bias"), ("batch_stride", "bias"),
                                                   ("row_stride", "bias"), ("col_stride", "bias")]
    signature = kernel.source.split(f"{kernel.name}(", 1)[1].split(")", 1)[0]
    assert signature.count(",") + 1 == len(kernel.params)
    assert [p.ctype for p in kernel.params if p.key[0] in ("alpha", "beta")] == ["f64", "f64"]


def test_user_names_never_reach_the_source():
    name = 'evil"); system("rm -rf /'
    expr = Expr("add", (input_("x", "value"), input_(name, "col")))
    kernel = gemm_kernel("float32", epilogue=expr)
    for source in (kernel.source, elementwise_kernel(expr, "float32").source):
        assert "evil" not in source and "system" not in source
    assert ("ptr", name) in [p.key for p in kernel.params]


def test_elementwise_params_follow_the_kernel_description():
    kernel = elementwise_kernel(trace(lambda x, m, s: x * m + s, {"m": "matrix", "s": "scalar"}), "float64")
    params = kernel.params
    assert [p.key for p in params][:6] == [("d", None), ("batch", None), ("m", None), ("n", None), ("ldd", None),
                                           ("stride_d", None)]
    assert params[-1] == KernelParam(("scalar", "s"), "f64")
    signature = kernel.source.split("nvm_epilogue(", 1)[1].split(")", 1)[0]
    assert signature.count(",") + 1 == len(params)


def test_gemm_values_check_shapes_and_layouts():
    kernel = gemm_kernel("float32")
    a, b, d = (np.zeros(s, dtype=np.float32) for s in ((2, 5, 3), (2, 3, 4), (2, 5, 4)))
    ref = ArrayRef.of_numpy
    values = kernel.values(ref(a), ref(b), ref(d), alpha=2.0)
    assert values[("lda", None)] == 3 and values[("stride_b", None)] == 12 and values[("alpha", None)] == 2.0
    with pytest.raises(InvalidOperandError, match="shapes do not agree"):
        kernel.values(ref(a), ref(b[:, :2]), ref(d))
    with pytest.raises(InvalidOperandError, match="a needs a unit stride along axis 2"):
        kernel.values(ref(np.zeros((2, 3, 5), np.float32).transpose(0, 2, 1)), ref(b), ref(d))
    assert gemm_layout(ref(a)) is False
    with pytest.raises(InvalidOperandError, match="unit stride in one of its last two axes"):
        gemm_layout(ref(np.zeros((2, 6, 8), np.float32)[:, ::2, ::2]))


@pytest.mark.parametrize("kwargs,message", [
    ({"dtype": "float16", "variant": "simt"}, "'simt' gemm takes dtype in"),
    ({"dtype": "float32", "variant": "wmma"}, "'wmma' gemm takes dtype in"),
    ({"dtype": "float32", "variant": "tensor"}, "variant must be one of"),
    ({"dtype": "float32", "config": TileConfig(64, 64, 16, 5, 4)}, "not a multiple of the thread tile"),
    ({"dtype": "float16", "variant": "wmma", "config": TileConfig(48, 64, 32, warps_m=2)}, "16x16x16 fragments"),
    ({"dtype": "float64", "config": TileConfig(128, 128, 32, 8, 8)}, "bytes of shared memory"),
    ({"dtype": "float32", "config": TileConfig(256, 256, 8, 2, 2)}, "threads per block"),
])
def test_bad_gemm_options_are_named(kwargs, message):
    with pytest.raises(InvalidOptionError, match=message):
        gemm_kernel(**kwargs)


def test_mma_configs_fit_and_launch_dims_cover_the_result():
    for config in MMA_CONFIGS:
        kernel = gemm_kernel("bfloat16", variant="wmma", config=config)
        (gx, gy, gz), (threads, _, _) = kernel.launch_dims(70000, 1000, 333)
        assert gx * config.block_n >= 333 and gy * config.block_m >= 1000 and gz == 65535
        assert threads == 32 * config.warps_m * config.warps_n and kernel.smem_bytes <= 48 * 1024
