"""Operands that need a copy (no unit stride) are copied on the plan's stream (issue 20).

The plan runs on a non-blocking side stream (``stream=``, or torch's current stream); work queued
on that stream before the call fills the operand's memory late (a spinning kernel). A copy made
on CuPy's current stream instead would not wait for it and would read the old zeros: the result
would be wrong. Each GEMM path that copies is checked: cuBLASLt (built-in epilogue and a plain
product) and both custom-epilogue candidates (cuBLASLt + elementwise kernel, fused tiled GEMM).
"""

from __future__ import annotations

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")
pytest.importorskip("ml_dtypes")

from nvmathpy.cuda.runtime import cupy_stream  # noqa: E402
from nvmathpy.linalg import Matmul  # noqa: E402
from nvmathpy.linalg.gemm.cuda import _custom as custom_cuda  # noqa: E402

from numerics import rand, up  # noqa: E402

_LATE_FILL = r"""
extern "C" __global__ void late_fill_f32(float* x, float value, long long n, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
    for (long long i = threadIdx.x; i < n; i += blockDim.x) x[i] = value;
}
"""


def late_fill(x, value, stream):
    """On ``stream``: spin, then fill the float32 array ``x`` with ``value``."""
    kernel = cupy.RawKernel(_LATE_FILL, "late_fill_f32")
    with stream:
        kernel((1,), (256,), (x, np.float32(value), np.int64(x.size), np.int64(100_000_000)))


def rel_err(x, ref):
    x = up(cupy.asnumpy(x))
    assert x.shape == ref.shape and np.isfinite(x).all()
    return np.linalg.norm((x - ref).ravel()) / np.linalg.norm(ref.ravel())


def scaled_relu(x, s):
    return np.maximum(x, 0) * s


CASES = {  # name -> (epilogue, candidate label to install or None for the plan's own choice)
    "plain": (None, None),
    "relu_bias": ("relu_bias", None),
    "custom-elementwise": (scaled_relu, custom_cuda.ELEMENTWISE),
    "custom-tiled": (scaled_relu, custom_cuda.TILED),
}


def install(mm, label):
    candidate = next(c for c in mm._engine.candidates(mm.problem) if c.label == label)
    mm._install(mm._engine.prepare(mm.problem, candidate), "heuristic")


@pytest.mark.parametrize("case", sorted(CASES))
def test_copies_of_strided_operands_are_made_on_the_explicit_stream(case):
    epilogue, label = CASES[case]
    rng = np.random.default_rng(50)
    m, k, n = 97, 61, 45
    hb = rand(rng, (k, n), "float32")
    base = cupy.zeros((m, 2 * k), dtype=cupy.float32)
    a, b = base[:, ::2], cupy.asarray(hb)  # a has no unit stride: every path copies it
    inputs = {"bias": cupy.asarray(rand(rng, (n,), "float32"))} if epilogue == "relu_bias" else None
    if callable(epilogue):
        inputs = {"s": 0.5}
    cupy.cuda.Device().synchronize()  # inputs ready before work on the non-blocking stream
    stream = cupy.cuda.Stream(non_blocking=True)
    with Matmul(a, b, epilogue=epilogue, epilogue_inputs=inputs, stream=stream) as mm:
        mm.plan()
        if label is not None:
            install(mm, label)
        late_fill(base, 2.0, stream)
        got = mm.execute()
        stream.synchronize()
    z = 2.0 * np.ones((m, k)) @ up(hb)
    if epilogue == "relu_bias":
        z = np.maximum(z + up(cupy.asnumpy(inputs["bias"])), 0)
    elif callable(epilogue):
        z = np.maximum(z, 0) * 0.5
    assert rel_err(got, z) < 1e-5


def test_copies_of_strided_torch_operands_are_made_on_torchs_current_stream():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(51)
    m, k, n = 97, 61, 45
    hb = rand(rng, (k, n), "float32")
    base = torch.zeros((m, 2 * k), dtype=torch.float32, device="cuda")
    a, b = base[:, ::2], torch.from_numpy(hb).cuda()
    torch.cuda.synchronize()
    side = torch.cuda.Stream()  # torch's streams do not synchronise with the legacy default stream
    with torch.cuda.stream(side):
        with Matmul(a, b, epilogue="relu") as mm:
            mm.plan()
            late_fill(cupy.from_dlpack(base), 2.0, cupy_stream(side.cuda_stream))
            got = mm.execute()
    side.synchronize()
    ref = np.maximum(2.0 * np.ones((m, k)) @ up(hb), 0)
    x = got.double().cpu().numpy()
    assert np.isfinite(x).all() and np.linalg.norm(x - ref) / np.linalg.norm(ref) < 1e-5
