"""The fused tiled GEMM on a GPU (issue 20): the inline-PTX tensor-core variant (``"mma"``, what
machines without ``mma.h``'s ``crt/`` headers run) on every tile configuration, the ``"wmma"``
variant where NVRTC finds its headers (the system toolkit completing a wheel without
``nvidia-cuda-crt``), and a product taller than 65535 row blocks (the clamped ``gridDim.y`` and
the kernel's loop over row blocks), against float64 NumPy references.

Under the host emulation (``-p cuda_emulation``) the ``"wmma"`` case is left out (g++ has no
``nvcuda::wmma``) and the row-block limit is lowered to 3, so the same loop runs at a small size.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")
pytest.importorskip("ml_dtypes")

from nvmathpy.kernels import gemm_tiled  # noqa: E402
from nvmathpy.kernels.gemm_config import MMA_CONFIGS, SIMT_CONFIGS  # noqa: E402
from nvmathpy.kernels.gemm_tiled import variant_compilable  # noqa: E402
from nvmathpy.linalg import Matmul  # noqa: E402
from nvmathpy.linalg.gemm.cuda import _custom as custom_cuda  # noqa: E402

from numerics import TOL, rand, up  # noqa: E402

EMULATED = "cuda_emulation" in sys.modules  # the host emulation plugin is loaded


def scaled_bias_relu(x, bias, s):
    return np.maximum(x + bias, 0) * s


def rel_err(x, ref):
    x = up(cupy.asnumpy(x))
    assert x.shape == ref.shape and np.isfinite(x).all()
    return np.linalg.norm((x - ref).ravel()) / np.linalg.norm(ref.ravel())


def run_tiled(mm, config):
    """Install the fused tiled candidate with tile configuration ``config`` and run it."""
    candidate = next(c for c in mm._engine.candidates(mm.problem)
                     if c.label == custom_cuda.TILED and c.params["config"] == config)
    mm._install(mm._engine.prepare(mm.problem, candidate), "heuristic")
    return candidate, mm.execute()


def reference(a, b, bias, s):
    return np.maximum(up(a) @ up(b) + up(bias), 0) * s


@pytest.mark.parametrize("variant", ["mma"] if EMULATED else ["mma", "wmma"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tensor_core_variants_on_every_tile_config(monkeypatch, variant, dtype):
    if variant == "wmma":
        # the lent H200 has a CUDA 13 toolkit beside the wheels: wmma must be offered there
        assert variant_compilable("wmma"), "NVRTC finds no mma.h / crt/mma.h: set CUDA_HOME or install nvidia-cuda-crt"
    monkeypatch.setattr(custom_cuda, "HALF_VARIANT", variant)
    rng = np.random.default_rng(80)
    m, k, n = 203, 77, 131
    a, b, bias = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype), rand(rng, (n,), dtype)
    inputs = {"bias": cupy.asarray(bias), "s": 0.5}
    ref = reference(a, b, bias, 0.5)
    with Matmul(cupy.asarray(a), cupy.asarray(b), epilogue=scaled_bias_relu, epilogue_inputs=inputs) as mm:
        for config in range(len(MMA_CONFIGS)):
            candidate, got = run_tiled(mm, config)
            assert candidate.params["variant"] == variant
            assert rel_err(got, ref) < TOL[dtype], (variant, config)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_product_taller_than_65535_row_blocks(monkeypatch, dtype):
    limit = 65535
    if EMULATED:
        limit = 3
        monkeypatch.setattr(gemm_tiled, "_MAX_GRID_Y", limit)
    rng = np.random.default_rng(81)
    config = 4  # the 32-row SIMT tile (float32), the 64-row tensor-core tile (float16)
    block_m = (SIMT_CONFIGS if dtype == "float32" else MMA_CONFIGS)[config].block_m
    m, k, n = block_m * limit + 77, 16, 8
    a, b, bias = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype), rand(rng, (n,), dtype)
    with Matmul(cupy.asarray(a), cupy.asarray(b), epilogue=scaled_bias_relu,
                epilogue_inputs={"bias": cupy.asarray(bias), "s": 2.0}) as mm:
        _, got = run_tiled(mm, config)
    assert rel_err(got, reference(a, b, bias, 2.0)) < TOL[dtype]
