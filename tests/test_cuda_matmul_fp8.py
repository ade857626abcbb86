"""FP8 (float8_e4m3fn / float8_e5m2 with per-tensor scales) on the cuBLASLt engine, without a GPU.

1. Descriptors and layouts read back: FP8 matrix types for A and B, the result type for C/D and
   the bias, FP32 compute and scale types, the TN layout cuBLASLt's FP8 kernels require (no
   copy for ``x @ w.T``; copies recorded otherwise), scale pointers left NULL for the hot path.
2. The rules, checked before any work: CUDA only, sm_89+, format pairs, result dtypes,
   epilogues, leading dimensions, scale and bias dtypes.
3. The hot path end to end on the host: NumPy FP8 operands with ``execution="cuda"`` through the
   engine (uploaded as raw bytes to the CuPy stand-in), ``cublasLtMatmul`` emulated from the
   descriptors (it applies the A/B scale pointers and refuses non-TN FP8 layouts), compared
   with a float64 reference of the same FP8 values.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("cuda.pathfinder", reason="CUDA wheels not installed (pip install 'nvmathpy[cu13]')")
ml_dtypes = pytest.importorskip("ml_dtypes")

from nvmathpy.cuda.bindings import cublaslt as lt  # noqa: E402
from nvmathpy.errors import InvalidOperandError, InvalidOptionError, MissingDependencyError  # noqa: E402
from nvmathpy.linalg import Matmul, MatmulOptions  # noqa: E402
from nvmathpy.linalg.gemm.cuda._lt_descriptors import LtDescriptors  # noqa: E402
from nvmathpy.linalg.gemm.cuda._lt_spec import build_spec  # noqa: E402
from nvmathpy.plan import Problem  # noqa: E402
from numerics import TOL, np_dtype, up  # noqa: E402

try:
    lt.LIB.loaded
except MissingDependencyError as exc:  # pragma: no cover - depends on the installation
    pytest.skip(f"cuBLASLt not installed: {exc}", allow_module_level=True)

import cuda_emulation  # noqa: E402

Desc, Layout = lt.MatmulDescAttribute, lt.MatrixLayoutAttribute
E4M3, E5M2 = "float8_e4m3fn", "float8_e5m2"
FP8_TYPE = {E4M3: lt.DataType.R_8F_E4M3, E5M2: lt.DataType.R_8F_E5M2}
RESULT_TYPE = {"bfloat16": lt.DataType.R_16BF, "float16": lt.DataType.R_16F, "float32": lt.DataType.R_32F}


def fp8(rng, shape, dtype=E4M3, layout="C"):
    """Random FP8 data (moderate values, fresh per call); ``layout`` "F": matrices column-major."""
    if layout == "F":
        return fp8(rng, shape[:-2] + (shape[-1], shape[-2]), dtype).swapaxes(-1, -2)
    return (rng.standard_normal(shape) * 2).astype(getattr(ml_dtypes, dtype))


def elem(x):
    return [s // x.itemsize for s in x.strides]


def problem(a, b, *, epilogue=None, inputs=None, result="bfloat16", c_shape=None):
    return Problem.of("matmul", a_shape=list(a.shape), b_shape=list(b.shape), c_shape=c_shape, a_strides=elem(a),
                      b_strides=elem(b), dtype=a.dtype.name, b_dtype=b.dtype.name, result_dtype=result,
                      epilogue=epilogue, inputs=inputs or {}, alpha=1.0, beta=None)


# -- 1. descriptors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("result", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("types", [(E4M3, E4M3), (E4M3, E5M2), (E5M2, E4M3)])
def test_linear_layer_layout_is_tn_without_copies(result, types):
    rng = np.random.default_rng(1)
    x, w = fp8(rng, (48, 32), types[0]), fp8(rng, (80, 32), types[1])  # x @ w.T
    spec = build_spec(problem(x, w.T, result=result))
    assert spec.fp8 and (spec.a_copy, spec.b_copy) == ("C", "F") and spec.a_strides == (32, 1)
    assert spec.b_strides == (1, 32)  # as given: no copy
    assert spec.lt.first.trans and not spec.lt.second.trans  # cuBLASLt's A (= w, C order) transposed
    with LtDescriptors(spec) as d:
        assert lt.get_attribute(d.desc, Desc.TRANSA) == 1 and lt.get_attribute(d.desc, Desc.TRANSB) == 0
        assert lt.get_attribute(d.desc, Desc.COMPUTE_TYPE) == lt.ComputeType.COMPUTE_32F
        assert lt.get_attribute(d.desc, Desc.SCALE_TYPE) == lt.DataType.R_32F
        # C-ordered result: cuBLASLt's A is the NumPy b (w.T), its B the NumPy a (x)
        assert lt.get_attribute(d.a, Layout.TYPE) == FP8_TYPE[types[1]]
        assert lt.get_attribute(d.b, Layout.TYPE) == FP8_TYPE[types[0]]
        assert lt.get_attribute(d.d, Layout.TYPE) == RESULT_TYPE[result]
        assert [lt.get_attribute(d.a, Layout.LD), lt.get_attribute(d.b, Layout.LD)] == [32, 32]
        for attr in (Desc.A_SCALE_POINTER, Desc.B_SCALE_POINTER, Desc.D_SCALE_POINTER):
            assert lt.get_attribute(d.desc, attr) == 0  # set per call by the hot path


def test_scale_attributes_follow_the_operand_swap():
    rng = np.random.default_rng(2)
    x, w = fp8(rng, (3, 16, 32)), fp8(rng, (64, 32))
    inputs = {"a_scale": [[], "float32"], "b_scale": [[], "float32"]}
    c_order = build_spec(problem(x, w.T, inputs=inputs))
    assert c_order.scales == (("A_SCALE_POINTER", "b_scale"), ("B_SCALE_POINTER", "a_scale"))
    f_order = build_spec(problem(x, w.T, inputs=inputs), "F")
    assert f_order.scales == (("A_SCALE_POINTER", "a_scale"), ("B_SCALE_POINTER", "b_scale"))
    assert f_order.lt.first.trans and not f_order.lt.second.trans  # TN in both orders
    assert build_spec(problem(x, w.T, inputs={"b_scale": [[], "float32"]})).scales == (("A_SCALE_POINTER",
                                                                                          "b_scale"),)


def test_bias_takes_the_result_type():
    rng = np.random.default_rng(3)
    x, w = fp8(rng, (16, 32)), fp8(rng, (48, 32))
    spec = build_spec(problem(x, w.T, epilogue="gelu_bias", inputs={"bias": [[48], "float16"]}, result="float16"))
    with LtDescriptors(spec) as d:
        assert lt.get_attribute(d.desc, Desc.EPILOGUE) == lt.Epilogue.GELU_BIAS
        assert lt.get_attribute(d.desc, Desc.BIAS_DATA_TYPE) == lt.DataType.R_16F


@pytest.mark.parametrize("a_layout, b_layout, copies", [("F", "F", "a"), ("C", "C", "b"), ("F", "C", "ab")])
def test_other_layouts_are_copied_into_tn(a_layout, b_layout, copies):
    rng = np.random.default_rng(4)
    a, b = fp8(rng, (2, 16, 32), layout=a_layout), fp8(rng, (32, 48), layout=b_layout)
    spec = build_spec(problem(a, b))
    assert spec.lt.first.trans and not spec.lt.second.trans
    assert (tuple(elem(a)) != spec.a_strides) == ("a" in copies)
    assert (tuple(elem(b)) != spec.b_strides) == ("b" in copies)


def test_fp8_rules_in_the_spec():
    rng = np.random.default_rng(5)
    x, w = fp8(rng, (16, 24)), fp8(rng, (32, 24))
    with pytest.raises(InvalidOperandError, match="multiples of 16"):
        build_spec(problem(x, w.T))
    x5, w5 = fp8(rng, (16, 32), E5M2), fp8(rng, (32, 32), E5M2)
    with pytest.raises(InvalidOperandError, match="not both float8_e5m2"):
        build_spec(problem(x5, w5.T))
    x, w = fp8(rng, (16, 32)), fp8(rng, (48, 32))
    with pytest.raises(InvalidOperandError, match="relu_aux"):
        build_spec(problem(x, w.T, epilogue="relu_aux"))
    with pytest.raises(InvalidOperandError, match="float32 result"):
        build_spec(problem(x, w.T, epilogue="bias", inputs={"bias": [[48], "float32"]}, result="float32"))


# -- 2. the plan's checks --------------------------------------------------------------------------------


@pytest.fixture
def emulated(monkeypatch):
    """The engine on the host (see cuda_emulation), with the real execution resolution."""
    cuda_emulation.install(monkeypatch.setattr, monkeypatch.setitem)
    return monkeypatch


def test_fp8_runs_on_cuda_only():
    rng = np.random.default_rng(6)
    x, w = fp8(rng, (16, 32)), fp8(rng, (48, 32))
    with pytest.raises(InvalidOperandError, match="CUDA only"):
        Matmul(x, w.T)


def test_result_dtype_option():
    assert MatmulOptions(result_dtype="float16").result_dtype == "float16"
    with pytest.raises(InvalidOptionError, match="result_dtype"):
        MatmulOptions(result_dtype="float64")
    with pytest.raises(InvalidOptionError, match="FP8 operands only"):
        Matmul(np.ones((2, 3)), np.ones((3, 2)), options={"result_dtype": "float16"})


def test_plan_checks_before_any_work(emulated):
    rng = np.random.default_rng(7)
    x, w = fp8(rng, (16, 32)), fp8(rng, (48, 32))
    with pytest.raises(InvalidOperandError, match="bias has dtype float32"):
        Matmul(x, w.T, epilogue="bias", epilogue_inputs={"bias": np.ones(48, np.float32)}, execution="cuda")
    with pytest.raises(InvalidOperandError, match="one value"):
        Matmul(x, w.T, epilogue_inputs={"a_scale": np.ones(2, np.float32)}, execution="cuda")
    with pytest.raises(InvalidOperandError, match="custom epilogue"):
        Matmul(x, w.T, epilogue=lambda v: v * 2, execution="cuda")
    with pytest.raises(InvalidOperandError, match="b float32"):
        Matmul(x, np.ones((32, 4), np.float32), execution="cuda")


def test_devices_below_sm89_are_refused(emulated):
    from nvmathpy.linalg.gemm.cuda import _custom as custom_cuda

    emulated.setattr(custom_cuda, "device_arch", lambda device_id: 80)
    rng = np.random.default_rng(8)
    x, w = fp8(rng, (16, 32)), fp8(rng, (48, 32))
    with Matmul(x, w.T, execution="cuda") as mm, pytest.raises(InvalidOperandError, match="8.9 or newer"):
        mm.plan()


# -- 3. the hot path on the host ------------------------------------------------------------------------


def check(got, ref, result):
    assert type(got) is np.ndarray and got.dtype == np_dtype(result)
    assert np.isfinite(up(got)).all()
    assert np.linalg.norm(up(got) - ref) / np.linalg.norm(ref) < TOL[result]


@pytest.mark.parametrize("result", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("types", [(E4M3, E4M3), (E5M2, E4M3)])
@pytest.mark.parametrize("batch", [(), (3,)])
def test_scaled_fp8_products(emulated, result, types, batch):
    rng = np.random.default_rng(9)
    x, w = fp8(rng, batch + (37, 48), types[0]), fp8(rng, (80, 48), types[1])
    keep = (x.copy(), w.copy())
    with Matmul(x, w.T, epilogue_inputs={"a_scale": 0.5, "b_scale": np.asarray(3.0, np.float32)},
                options={"result_dtype": result}, execution="cuda") as mm:
        mm.plan()
        assert mm.problem.get("result_dtype") == result
        got = mm.execute()
        check(got, 1.5 * (up(x) @ up(w).T), result)
        mm.reset_operands(epilogue_inputs={"a_scale": np.asarray(-2.0, np.float32),
                                           "b_scale": np.asarray(0.25, np.float32)})
        check(mm.execute(), -0.5 * (up(x) @ up(w).T), result)
        out = np.full(batch + (37, 80), np.nan, np_dtype(result))
        assert mm.execute(out=out) is out
        check(out, -0.5 * (up(x) @ up(w).T), result)
    assert np.array_equal(x.view(np.uint8), keep[0].view(np.uint8))
    assert np.array_equal(w.view(np.uint8), keep[1].view(np.uint8))


@pytest.mark.parametrize("a_layout, b_layout", [("F", "C"), ("C", "C")])
def test_layouts_that_need_a_copy_and_unscaled_products(emulated, a_layout, b_layout):
    rng = np.random.default_rng(10)
    a, b = fp8(rng, (21, 32), layout=a_layout), fp8(rng, (32, 16), layout=b_layout)
    with Matmul(a, b, execution="cuda") as mm:
        mm.plan()
        check(mm.execute(), up(a) @ up(b), "bfloat16")


@pytest.mark.parametrize("name, fn", [("gelu_bias", None), ("relu_bias", None), ("relu", None)])
def test_fp8_with_epilogues(emulated, name, fn):
    from nvmathpy.linalg.epilogues import gelu

    rng = np.random.default_rng(11)
    x, w = fp8(rng, (2, 19, 32)), fp8(rng, (40, 32))
    bias = rng.standard_normal(40).astype(np.float16)
    inputs = {"b_scale": 0.75, **({"bias": bias} if "bias" in name else {})}
    with Matmul(x, w.T, epilogue=name, epilogue_inputs=inputs, options={"result_dtype": "float16"},
                execution="cuda") as mm:
        mm.plan()
        got = mm.execute()
    z = 0.75 * (up(x) @ up(w).T) + (up(bias) if "bias" in name else 0)
    check(got, gelu(z) if name.startswith("gelu") else np.maximum(z, 0), "float16")


def test_one_call_matmul_with_fp8(emulated):
    import nvmathpy.linalg as la

    rng = np.random.default_rng(12)
    x, w = fp8(rng, (16, 32)), fp8(rng, (24, 32))
    for _ in range(2):
        got = la.matmul(x, w.T, epilogue_inputs={"a_scale": 2.0}, execution="cuda")
        check(got, 2.0 * (up(x) @ up(w).T), "bfloat16")
