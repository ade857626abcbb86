"""The cuBLASLt matmul engine on a GPU, against float64 NumPy references.

Every dtype x layout (C, F, transposed, padded, strided, batched, broadcast, 1-D), every epilogue,
``c``/alpha/beta, CuPy and torch CUDA operands (results on the caller's device and package),
streams (a non-default stream, with a delayed writer proving the engine's call is ordered after
it), misaligned operands, autotune and a wisdom hit in a fresh plan.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")

from nvmathpy.linalg import Matmul  # noqa: E402
from nvmathpy.linalg.epilogues import DEFINITIONS  # noqa: E402
from nvmathpy.plan import Candidate, Problem  # noqa: E402

ml_dtypes = pytest.importorskip("ml_dtypes")

from numerics import TOL, np_dtype, rand  # noqa: E402

DTYPES = ["float32", "float64", "complex64", "complex128", "float16"]
LAYOUTS = [
    ((7, 5), "C", (5, 3), "C"), ((127, 65), "F", (65, 33), "F"), ((31, 17), "T", (17, 29), "pad"),
    ((4, 37, 19), "C", (19, 23), "F"), ((2, 1, 13, 11), "pad", (3, 11, 7), "T"), ((11,), "C", (2, 11, 5), "F"),
    ((13, 9), "step", (9,), "C"), ((3, 17, 9), "F", (3, 9, 19), "step"), ((257,), "C", (257,), "C"),
    ((2, 3, 64, 48), "C", (3, 48, 80), "pad"),
]

#: Float64 bound for what cuBLASLt's GELU-family epilogues compute (``gelu*``, ``dgelu*`` and the
#: ``dgelu_bgrad`` bias gradient). cuBLASLt documents these epilogues only as "apply the GELU
#: point-wise transform" (and its gradient): no formula, no accuracy. What it computes is the tanh
#: approximation - the form the CPU reference uses (an erf-based GELU would differ at the 1e-4
#: level) - but in float64 its tanh is not evaluated to double (libm) accuracy: the results sit
#: far above double rounding and far below float32 rounding. So the float64 GELU family is checked
#: against the tanh-form reference with this bound instead of TOL["float64"]: still tight enough
#: to catch a float32 evaluation, the erf form, or a wrong bias/aux broadcast, while the GEMM
#: itself and the GELU-free outputs (the pre-activation ``gelu_aux``) keep the float64 bound.
GELU_FLOAT64_TOL = 2e-9






def up(x):
    x = cupy.asnumpy(x) if isinstance(x, cupy.ndarray) else np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def rel_err(x, ref):
    x, ref = up(x), up(ref)
    assert x.shape == ref.shape
    assert np.isfinite(x).all()
    return np.linalg.norm((x - ref).ravel()) / max(np.linalg.norm(ref.ravel()), 1e-300)


def pair(rng, shape, dtype, layout):
    """The same operand on the host and on the device, built by the same view operations."""
    def build(xp, base):
        if layout == "C" or len(shape) < 2:
            return base
        if layout == "F":
            return xp.swapaxes(base, -1, -2)
        if layout == "T":
            return base.T
        if layout == "pad":
            return base[..., : shape[-1]]
        return base[..., ::2]

    base_shape = {
        "F": shape[:-2] + shape[:-3:-1] if len(shape) >= 2 else shape, "T": tuple(reversed(shape)),
        "pad": shape[:-1] + (shape[-1] + 3,), "step": shape[:-1] + (2 * shape[-1],),
    }.get(layout if len(shape) >= 2 else "C", shape)
    host = rand(rng, base_shape, dtype)
    return build(np, host), build(cupy, cupy.asarray(host))


def reference(a, b, c=None, **kwargs):
    """The CPU engine in float64 (result, or (result, aux))."""
    inputs = kwargs.pop("epilogue_inputs", None)
    ups = {k: (v if v.dtype == bool else up(v)) for k, v in (inputs or {}).items()} or None
    with Matmul(up(a), up(b), None if c is None else up(c), epilogue_inputs=ups, **kwargs) as mm:
        mm.plan()
        return mm.execute()


def on_device(result):
    if isinstance(result, tuple):
        return result[0], {k: cupy.asnumpy(v) for k, v in result[1].items()}
    return result


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", LAYOUTS)
def test_every_dtype_and_layout(dtype, case):
    rng = np.random.default_rng(1)
    a_shape, a_layout, b_shape, b_layout = case
    (ha, da), (hb, db) = pair(rng, a_shape, dtype, a_layout), pair(rng, b_shape, dtype, b_layout)
    keep = (da.copy(), db.copy())
    with Matmul(da, db, execution="cuda") as mm:
        mm.plan()
        got = mm.execute()
    assert isinstance(got, cupy.ndarray) and got.device.id == da.device.id
    assert got.dtype == np_dtype(dtype)
    assert rel_err(got, reference(ha, hb)) < TOL[dtype]
    assert bool((da == keep[0]).all()) and bool((db == keep[1]).all())


def _inputs(rng, name, batch, m, n, dtype, per):
    inputs = {}
    for needed in DEFINITIONS[name].inputs:
        if needed == "bias":
            inputs["bias"] = rand(rng, batch + (((1, n) if batch else (n,)) if per == "col" else (m, 1)), dtype)
        elif needed == "relu_aux":
            inputs["relu_aux"] = rng.standard_normal(batch + (m, n)) > 0
        else:
            inputs["gelu_aux"] = rand(rng, batch + (m, n), dtype)
    return inputs


EPILOGUE_CASES = [
    (name, batch, per) for name in sorted(DEFINITIONS)
    for batch, per in [((), "col"), ((3,), "col")] + ([((), "row")] if "bias" in DEFINITIONS[name].inputs else [])
]


@pytest.mark.parametrize("name,batch,per", EPILOGUE_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_every_epilogue(name, dtype, batch, per):
    rng = np.random.default_rng(2)
    m, n, k = 67, 45, 33
    (ha, da), (hb, db) = pair(rng, batch + (m, k), dtype, "F"), pair(rng, (k, n), dtype, "C")
    inputs = _inputs(rng, name, batch, m, n, dtype, per)
    with Matmul(da, db, epilogue=name, epilogue_inputs={k: cupy.asarray(v) for k, v in inputs.items()}) as mm:
        mm.plan()
        got = on_device(mm.execute())
    ref = reference(ha, hb, epilogue=name, epilogue_inputs=inputs)
    tol = TOL[dtype] * (10 if dtype == "float16" else 1)
    gelu_tol = max(tol, GELU_FLOAT64_TOL) if dtype == "float64" and "gelu" in name else tol
    if isinstance(ref, tuple):
        assert set(got[1]) == set(ref[1])
        for key, value in ref[1].items():
            if value.dtype == bool:  # masks may differ only where the pre-activation is ~0
                x = up(ha) @ up(hb) + (up(inputs["bias"]) if "bias" in inputs else 0)
                assert got[1][key].dtype == bool
                near_zero = 1e-2 if dtype == "float16" else 1e-5
                assert np.all(np.abs(x[got[1][key] != value]) < near_zero)
            elif key == "gelu_aux":  # the pre-activation: GEMM (+ bias) only
                assert rel_err(got[1][key], value) < tol * 10, key
            else:  # dgelu_bgrad's bias gradient: column sums of the GELU gradient
                assert rel_err(got[1][key], value) < gelu_tol * 10, key
        got, ref = got[0], ref[0]
    assert rel_err(got, ref) < gelu_tol


@pytest.mark.parametrize("c_shape", [(37, 21), (21,), (3, 37, 21), (37, 1)])
@pytest.mark.parametrize("dtype", ["float64", "complex64"])
def test_c_alpha_beta(c_shape, dtype):
    rng = np.random.default_rng(3)
    (ha, da), (hb, db) = pair(rng, (3, 37, 19), dtype, "C"), pair(rng, (19, 21), dtype, "T")
    hc = rand(rng, c_shape, dtype)
    alpha = 0.75 - 0.5j if dtype.startswith("complex") else 0.75
    with Matmul(da, db, cupy.asarray(hc), alpha=alpha, beta=-1.25) as mm:
        mm.plan()
        got = mm.execute()
    assert rel_err(got, reference(ha, hb, hc, alpha=alpha, beta=-1.25)) < TOL[dtype]


def test_misaligned_operands_are_computed_correctly():
    rng = np.random.default_rng(4)
    host = rand(rng, (4099,), "float32")
    flat = cupy.asarray(host)
    da, db = flat[1:1 + 33 * 17].reshape(33, 17), flat[3:3 + 17 * 9].reshape(17, 9)  # 4- and 12-byte offsets
    ha, hb = host[1:1 + 33 * 17].reshape(33, 17), host[3:3 + 17 * 9].reshape(17, 9)
    with Matmul(da, db) as mm:
        mm.plan()
        assert rel_err(mm.execute(), reference(ha, hb)) < TOL["float32"]


def test_out_and_reset_operands():
    rng = np.random.default_rng(5)
    (ha, da), (hb, db) = pair(rng, (65, 33), "float64", "C"), pair(rng, (33, 17), "float64", "C")
    out = cupy.full((65, 17), cupy.nan)
    with Matmul(da, db) as mm:
        mm.plan()
        assert mm.execute(out=out) is out
        assert rel_err(out, reference(ha, hb)) < 1e-12
        ha2 = rand(rng, (65, 33), "float64")
        mm.reset_operands(a=cupy.asarray(ha2))
        assert rel_err(mm.execute(), reference(ha2, hb)) < 1e-12


# -- streams ------------------------------------------------------------------------------------------

_LATE_FILL = r"""
extern "C" __global__ void late_fill(double* x, double value, long long n, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
    for (long long i = threadIdx.x; i < n; i += blockDim.x) x[i] = value;
}
"""


def _late_fill(x, value, stream):
    """On ``stream``: spin ~50 ms, then fill ``x`` (a call on another stream would read old data)."""
    kernel = cupy.RawKernel(_LATE_FILL, "late_fill")
    with stream:
        kernel((1,), (256,), (x, np.float64(value), np.int64(x.size), np.int64(100_000_000)))


def test_explicit_stream_orders_the_call_after_earlier_work():
    rng = np.random.default_rng(6)
    hb = rand(rng, (64, 48), "float64")
    a, b = cupy.zeros((96, 64)), cupy.asarray(hb)
    cupy.cuda.Device().synchronize()  # inputs ready before work on the non-blocking stream
    stream = cupy.cuda.Stream(non_blocking=True)
    with Matmul(a, b, stream=stream) as mm:
        mm.plan()
        _late_fill(a, 2.0, stream)
        got = mm.execute()
        stream.synchronize()
    assert rel_err(got, 2.0 * np.ones((96, 64)) @ hb) < 1e-12


def test_engine_follows_the_current_cupy_stream():
    from nvmathpy.linalg.gemm.cuda._engine import CudaMatmulEngine

    rng = np.random.default_rng(7)
    hb = rand(rng, (64, 48), "float64")
    a, b = cupy.zeros((96, 64)), cupy.asarray(hb)
    cupy.cuda.Device().synchronize()
    stream = cupy.cuda.Stream(non_blocking=True)
    engine = CudaMatmulEngine(package="cupy")
    with stream:
        assert engine.stream() == stream.ptr
        with Matmul(a, b) as mm:
            mm.plan()
            _late_fill(a, 3.0, stream)
            got = mm.execute()
    stream.synchronize()
    assert rel_err(got, 3.0 * np.ones((96, 64)) @ hb) < 1e-12


# -- torch ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_torch_cuda_tensors_come_back_as_torch_on_their_stream(dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    ha, hb = rand(rng, (3, 65, 33), "float32"), rand(rng, (33, 47), "float32")
    tdtype = getattr(torch, dtype)
    ta, tb = (torch.from_numpy(x).to("cuda").to(tdtype) for x in (ha, hb))
    bias = torch.from_numpy(rand(rng, (47,), "float32")).to("cuda").to(tdtype)
    torch.cuda.synchronize()  # inputs ready before work on another stream
    stream = torch.cuda.Stream()
    # bfloat16 tensors reach CuPy as their raw int16 storage (nvmathpy.operands): no skip here
    with torch.cuda.stream(stream), Matmul(ta, tb, epilogue="gelu_bias", epilogue_inputs={"bias": bias}) as mm:
        mm.plan()
        got = mm.execute()
    stream.synchronize()
    assert isinstance(got, torch.Tensor) and got.device == ta.device and got.dtype == tdtype
    ref = reference(ta.float().cpu().numpy(), tb.float().cpu().numpy(), epilogue="gelu_bias",
                    epilogue_inputs={"bias": bias.float().cpu().numpy()})
    assert rel_err(got.float().cpu().numpy(), ref) < TOL[dtype] * 10


# -- autotune and wisdom --------------------------------------------------------------------------------


def test_autotune_then_wisdom_hit_in_a_fresh_plan():
    rng = np.random.default_rng(9)
    (ha, da), (hb, db) = pair(rng, (512, 384), "float32", "C"), pair(rng, (384, 640), "float32", "F")
    with Matmul(da, db, epilogue="relu") as first:
        first.plan()
        timings = first.autotune(effort="exhaustive", repeats=3)
        assert first.chosen_by == "autotune" and all(t > 0 and math.isfinite(t) for t in timings.values())
        winner = first.candidate
        assert rel_err(first.execute(), np.maximum(up(ha) @ up(hb), 0)) < 3e-5
    assert winner.label == "cublaslt" and len(winner.params["algo"]) == 128
    with Matmul(da, db, epilogue="relu") as second:
        second.plan()
        assert second.chosen_by == "wisdom" and second.candidate == winner
        assert rel_err(second.execute(), np.maximum(up(ha) @ up(hb), 0)) < 3e-5


def test_candidates_restore_from_json_and_pass_algo_check():
    from nvmathpy.linalg.gemm.cuda._engine import CudaMatmulEngine

    rng = np.random.default_rng(10)
    (ha, da), (hb, db) = pair(rng, (300, 200), "float64", "C"), pair(rng, (200, 100), "float64", "C")
    plan = Matmul(da, db)
    engine = CudaMatmulEngine()
    problem = Problem.from_json(plan.problem.to_json())
    candidates = engine.candidates(problem)
    assert 1 <= len(candidates) <= 8
    for candidate in candidates:
        restored = Candidate.from_dict(json.loads(json.dumps(candidate.to_dict())))
        prepared = engine.prepare(problem, restored)
        try:
            got = prepared.kernel(da, db, None, {}, None)
            assert rel_err(got, up(ha) @ up(hb)) < 1e-12
        finally:
            prepared.free()
    plan.free()


def test_device_description_names_the_gpu():
    from nvmathpy.cuda.runtime import device_description

    description = device_description(0)
    assert description["gpu"] and description["compute_capability"].count(".") == 1
    assert description["cublaslt"].startswith(("12.", "13."))


# -- NumPy operands asked to run on CUDA ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "complex128"])
def test_numpy_operands_with_cuda_execution_come_back_as_numpy(dtype):
    rng = np.random.default_rng(11)
    a, b = rand(rng, (3, 41, 29), dtype), rand(rng, (37, 29), dtype).T  # b travels as a transposed view
    keep = (a.copy(), b.copy())
    with Matmul(a, b, execution="cuda") as mm:
        mm.plan()
        got = mm.execute()
        out = np.full((3, 41, 37), np.nan, dtype=got.dtype)
        assert mm.execute(out=out) is out
    assert type(got) is np.ndarray and got.dtype == np_dtype(dtype)
    assert rel_err(got, reference(a, b)) < TOL[dtype] and rel_err(out, reference(a, b)) < TOL[dtype]
    assert np.array_equal(a, keep[0]) and np.array_equal(b, keep[1])
    bias = rand(rng, (37,), "float32")
    if dtype == "float32":
        import nvmathpy.linalg as la

        got = la.matmul(a, b, epilogue="relu_bias", epilogue_inputs={"bias": bias}, execution="cuda")
        assert type(got) is np.ndarray
        assert rel_err(got, reference(a, b, epilogue="relu_bias", epilogue_inputs={"bias": bias})) < TOL[dtype]


# -- FP8 -------------------------------------------------------------------------------------------------


def _fp8_ready():
    if int(cupy.cuda.Device().compute_capability) < 89:
        pytest.skip("FP8 needs compute capability 8.9+")


#: Bound for an FP8 GEMM's float32 result on random data. cuBLASLt's FP8 matmul multiplies
#: the accumulated A@B by scale_a * scale_b (and alpha) in float32; the accumulation itself runs in
#: the tensor cores' FP8 accumulator, which cuBLASLt promotes to full float32 only periodically
#: along k (CUBLASLT_MATMUL_DESC_FAST_ACCUM, off by default, documents that with it on the
#: intermediate results are *not* periodically promoted to higher precision - i.e. between
#: promotions they are held in a lower one, whose width is not documented). A float32 result of an
#: FP8 GEMM is therefore not float32-accurate: the random-data check allows that accumulation
#: (well below bfloat16's rounding, so a bfloat16 or float16 intermediate would still fail), and
#: ``test_fp8_scales_exactly`` checks the scale semantics exactly on data whose every partial sum
#: is an integer any such accumulator holds exactly.
FP8_FLOAT32_TOL = 1e-3


@pytest.mark.parametrize("result", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("types", [("float8_e4m3fn", "float8_e4m3fn"), ("float8_e4m3fn", "float8_e5m2")])
def test_fp8_numpy_operands_with_scales(result, types):
    _fp8_ready()
    rng = np.random.default_rng(12)
    x = (rng.standard_normal((3, 96, 128)) * 2).astype(getattr(ml_dtypes, types[0]))
    w = (rng.standard_normal((80, 128)) * 2).astype(getattr(ml_dtypes, types[1]))
    ref = 0.5 * 3.0 * (x.astype(np.float64) @ w.astype(np.float64).T)
    with Matmul(x, w.T, epilogue_inputs={"a_scale": 0.5, "b_scale": 3.0}, options={"result_dtype": result},
                execution="cuda") as mm:
        mm.plan()
        got = mm.execute()
    assert type(got) is np.ndarray and got.dtype == np_dtype(result)
    assert rel_err(got, ref) < max(TOL[result], FP8_FLOAT32_TOL)


@pytest.mark.parametrize("types", [("float8_e4m3fn", "float8_e4m3fn"), ("float8_e4m3fn", "float8_e5m2")])
def test_fp8_scales_exactly(types):
    """Small-integer FP8 data: every product and partial sum is an integer below 2^11, exact in
    any accumulator cuBLASLt may use, so the float32 result must be (scale_a * scale_b) * A@B to
    float32 rounding - this pins the scale semantics (both scales, applied once, to the product)."""
    _fp8_ready()
    rng = np.random.default_rng(13)
    x = rng.integers(-3, 4, (2, 64, 96)).astype(getattr(ml_dtypes, types[0]))
    w = rng.integers(-3, 4, (48, 96)).astype(getattr(ml_dtypes, types[1]))
    exact = x.astype(np.float64) @ w.astype(np.float64).T
    assert np.abs(exact).max() < 2 ** 11
    with Matmul(x, w.T, epilogue_inputs={"a_scale": 0.5, "b_scale": 0.25}, options={"result_dtype": "float32"},
                execution="cuda") as mm:
        mm.plan()
        got = mm.execute()
    assert got.dtype == np.float32
    assert rel_err(got, 0.125 * exact) < 1e-7


def test_fp8_layout_copy_and_gelu_bias():
    _fp8_ready()
    rng = np.random.default_rng(13)
    a = (rng.standard_normal((64, 32)) * 2).astype(ml_dtypes.float8_e4m3fn)
    b = (rng.standard_normal((32, 48)) * 2).astype(ml_dtypes.float8_e4m3fn)  # C-contiguous b: copied to TN
    bias = rng.standard_normal(48).astype(np.float16)
    with Matmul(a, b, epilogue="gelu_bias", epilogue_inputs={"bias": bias}, options={"result_dtype": "float16"},
                execution="cuda") as mm:
        mm.plan()
        got = mm.execute()
    ref = reference(a.astype(np.float64), b.astype(np.float64), epilogue="gelu_bias",
                    epilogue_inputs={"bias": bias.astype(np.float64)})
    assert rel_err(got, ref) < TOL["float16"] * 3


def test_fp8_torch_tensors():
    torch = pytest.importorskip("torch")
    _fp8_ready()
    gen = torch.Generator(device="cuda").manual_seed(14)
    x = torch.randn(64, 64, device="cuda", generator=gen).to(torch.float8_e4m3fn)
    w = torch.randn(96, 64, device="cuda", generator=gen).to(torch.float8_e4m3fn)
    # FP8 tensors reach CuPy as their raw uint8 storage (nvmathpy.operands): no skip here
    with Matmul(x, w.T, epilogue_inputs={"a_scale": 2.0}) as mm:
        mm.plan()
        got = mm.execute()
    assert isinstance(got, torch.Tensor) and got.dtype == torch.bfloat16
    ref = 2.0 * (x.float() @ w.float().T)
    assert float((got.float() - ref).norm() / ref.norm()) < TOL["bfloat16"]


def test_numpy_operands_on_an_explicit_stream():
    rng = np.random.default_rng(15)
    a, b = rand(rng, (130, 70), "float64"), rand(rng, (70, 90), "float64")
    stream = cupy.cuda.Stream(non_blocking=True)
    with Matmul(a, b, execution="cuda", stream=stream) as mm:
        mm.plan()
        got = mm.execute()  # uploads, product and download all on ``stream``; the result is complete
    assert type(got) is np.ndarray and rel_err(got, reference(a, b)) < 1e-12
