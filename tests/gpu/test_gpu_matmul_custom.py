"""Custom (traced Python) epilogues on a GPU, against float64 NumPy references.

Both GEMM + custom-epilogue candidates (cuBLASLt then the generated elementwise kernel; the
fused tiled GEMM, tensor cores for float16/bfloat16) on a SwiGLU-like tail and a residual add,
batched, transposed and broadcast inputs, ``c``/alpha/beta; a custom epilogue equal to a
cuBLASLt epilogue runs natively; autotune and a wisdom hit; torch CUDA tensors (bfloat16
included) come back as torch tensors.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")
pytest.importorskip("ml_dtypes")

from nvmathpy.linalg import Matmul  # noqa: E402
from nvmathpy.linalg.gemm.cuda import _custom as custom_cuda  # noqa: E402
from nvmathpy.linalg.epilogues import gelu  # noqa: E402

from numerics import TOL, np_dtype, rand, up  # noqa: E402

BOTH = (custom_cuda.ELEMENTWISE, custom_cuda.TILED)


def swiglu_tail(x, gate, scale):
    return x * (gate / (1 + np.exp(-gate))) * scale


def residual(x, r, bias):
    return np.maximum(x + bias, 0) + r


def rel_err(x, ref):
    x = up(cupy.asnumpy(x) if isinstance(x, cupy.ndarray) else x)
    assert x.shape == ref.shape and np.isfinite(x).all()
    return np.linalg.norm((x - ref).ravel()) / np.linalg.norm(ref.ravel())


def reference(a, b, fn, inputs, c=None, **kwargs):
    ups = {k: up(v) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
    with Matmul(up(a), up(b), None if c is None else up(c), epilogue=fn, epilogue_inputs=ups, **kwargs) as mm:
        mm.plan()
        return mm.execute()


def each_candidate(mm, labels=BOTH):
    """Install and run the first candidate of each label; ``{label: result on the host}``."""
    results = {}
    for candidate in mm._engine.candidates(mm.problem):
        if candidate.label in labels and candidate.label not in results:
            mm._install(mm._engine.prepare(mm.problem, candidate), "heuristic")
            results[candidate.label] = mm.execute()
    return results


def device(inputs):
    return {k: cupy.asarray(v) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("shape", [(37, 29, 41), (130, 67, 96)])
def test_swiglu_tail_on_both_candidates(dtype, shape):
    rng = np.random.default_rng(1)
    m, k, n = shape
    a, b = rand(rng, (m, k), dtype), rand(rng, (n, k), dtype).T
    inputs = {"gate": rand(rng, (m, n), dtype), "scale": 0.5}
    with Matmul(cupy.asarray(a), cupy.asarray(b.T).T, epilogue=swiglu_tail, epilogue_inputs=device(inputs)) as mm:
        results = each_candidate(mm)
    assert set(results) == set(BOTH)
    ref = reference(a, b, swiglu_tail, inputs)
    for label, got in results.items():
        assert isinstance(got, cupy.ndarray) and got.dtype == np_dtype(dtype)
        assert rel_err(got, ref) < TOL[dtype] * (3 if label == custom_cuda.ELEMENTWISE else 1), label


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_residual_add_batched_and_broadcast(dtype):
    rng = np.random.default_rng(2)
    a, b = rand(rng, (3, 45, 33), dtype), rand(rng, (33, 52), dtype)
    inputs = {"r": rand(rng, (3, 45, 52), dtype), "bias": rand(rng, (52,), dtype)}
    with Matmul(cupy.asarray(a), cupy.asarray(b), epilogue=residual, epilogue_inputs=device(inputs)) as mm:
        results = each_candidate(mm)
    ref = reference(a, b, residual, inputs)
    for label, got in results.items():
        assert rel_err(got, ref) < TOL[dtype] * 3, label


def test_c_alpha_beta_then_the_custom_epilogue():
    rng = np.random.default_rng(3)
    a, b, c = rand(rng, (61, 40), "float64"), rand(rng, (40, 35), "float64"), rand(rng, (35,), "float64")
    inputs = {"r": rand(rng, (61, 35), "float64")}

    def fn(x, r):
        return np.tanh(x) - r

    with Matmul(cupy.asarray(a), cupy.asarray(b), cupy.asarray(c), alpha=0.5, beta=2.0, epilogue=fn,
                epilogue_inputs=device(inputs)) as mm:
        results = each_candidate(mm)
    ref = reference(a, b, fn, inputs, c=c, alpha=0.5, beta=2.0)
    assert set(results) == set(BOTH)
    for label, got in results.items():
        assert rel_err(got, ref) < 1e-12, label


def test_an_epilogue_equal_to_cublaslt_gelu_bias_runs_natively():
    rng = np.random.default_rng(4)
    a, b, bias = rand(rng, (64, 48), "float32"), rand(rng, (48, 80), "float32"), rand(rng, (80,), "float32")
    with Matmul(cupy.asarray(a), cupy.asarray(b), epilogue=lambda x, b0: gelu(x + b0),
                epilogue_inputs={"b0": cupy.asarray(bias)}) as mm:
        mm.plan()
        assert mm.candidate.label == "cublaslt" and mm.candidate.params["native"] == "gelu_bias"
        got = mm.execute()
    assert rel_err(got, gelu(up(a) @ up(b) + up(bias))) < TOL["float32"]


def test_custom_autotune_then_wisdom_hit():
    rng = np.random.default_rng(5)
    a, b = rand(rng, (256, 128), "float32"), rand(rng, (128, 192), "float32")
    inputs = {"gate": rand(rng, (256, 192), "float32"), "scale": 2.0}
    ref = reference(a, b, swiglu_tail, inputs)
    da, db, dinputs = cupy.asarray(a), cupy.asarray(b), device(inputs)
    with Matmul(da, db, epilogue=swiglu_tail, epilogue_inputs=dinputs) as first:
        timings = first.autotune(effort="measure", repeats=2)
        assert {label.split("(")[0] for label in timings} == set(BOTH)
        winner = first.candidate
        assert rel_err(first.execute(), ref) < TOL["float32"]
    with Matmul(da, db, epilogue=swiglu_tail, epilogue_inputs=dinputs) as second:
        second.plan()
        assert second.chosen_by == "wisdom" and second.candidate == winner
        assert rel_err(second.execute(), ref) < TOL["float32"]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_torch_tensors_with_a_custom_epilogue(dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    a, b, gate = rand(rng, (96, 64), "float32"), rand(rng, (64, 72), "float32"), rand(rng, (96, 72), "float32")
    tdtype = getattr(torch, dtype)
    ta, tb, tg = (torch.from_numpy(x).to("cuda").to(tdtype) for x in (a, b, gate))
    # bfloat16 tensors reach CuPy as their raw int16 storage (nvmathpy.operands): no skip here
    with Matmul(ta, tb, epilogue=swiglu_tail, epilogue_inputs={"gate": tg, "scale": 0.5}) as mm:
        results = each_candidate(mm)
    ref = reference(ta.float().cpu().numpy(), tb.float().cpu().numpy(), swiglu_tail,
                    {"gate": tg.float().cpu().numpy(), "scale": 0.5})
    for label, got in results.items():
        assert isinstance(got, torch.Tensor) and got.dtype == tdtype and got.device == ta.device
        assert rel_err(got.float().cpu().numpy(), ref) < TOL[dtype] * 3, label
