"""The inline-PTX tensor-core GEMM variant (``"mma"``: ``mma.sync.m16n8k16``, no ``mma.h``) under
the CPU emulation, whose ``nvm_emu_mma_m16n8k16`` computes the instruction from each lane's
registers as the PTX ISA lays out its fragments: every tile configuration, both half types,
transposed operands, ``c`` and an epilogue, against float64 NumPy. Whether the hardware agrees
with that reading of the layouts is checked on a GPU (tests/gpu/test_gpu_matmul_tiled.py)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import kernels_emulator as emu
from kernels_cases import needs_gxx
from nvmathpy.kernels.gemm_tiled import MMA_CONFIGS, gemm_kernel
from nvmathpy.kernels.trace import trace

pytestmark = needs_gxx

NP = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
TOL = {"float16": 2e-3, "bfloat16": 1.6e-2}
EPILOGUE = trace(lambda x, bias: np.maximum(x + bias, 0), {"bias": "col"})
CASES = [(dtype, i, (i + j) % 2 == 1, (i // 2 + j) % 2 == 1) for j, dtype in enumerate(NP)
         for i in range(len(MMA_CONFIGS))]


def kernel_of(dtype, i, trans_a, trans_b):
    return gemm_kernel(dtype, variant="mma", config=MMA_CONFIGS[i], with_c=True, epilogue=EPILOGUE,
                       trans_a=trans_a, trans_b=trans_b)


@pytest.fixture(scope="module", autouse=True)
def prebuilt():
    emu.prebuild([kernel_of(*case) for case in CASES])


@pytest.mark.parametrize("dtype,i,trans_a,trans_b", CASES)
def test_mma_variant_matches_numpy(dtype, i, trans_a, trans_b):
    rng = np.random.default_rng(70 + i)
    batch, m, n, k = 2, 37 + 16 * i, 29 + 8 * i, 41
    a = rng.standard_normal((batch, k, m) if trans_a else (batch, m, k)).astype(NP[dtype])
    b = rng.standard_normal((batch, n, k) if trans_b else (batch, k, n)).astype(NP[dtype])
    av, bv = (a.transpose(0, 2, 1) if trans_a else a), (b.transpose(0, 2, 1) if trans_b else b)
    c = rng.standard_normal((batch, m, n)).astype(NP[dtype])
    bias = rng.standard_normal(n).astype(NP[dtype])
    d = np.full((batch, m, n), np.nan, dtype=NP[dtype])
    emu.run_gemm(kernel_of(dtype, i, trans_a, trans_b), av, bv, d, alpha=0.75, beta=-1.25, c=c,
                 inputs={"bias": bias})
    up = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
    ref = np.maximum(0.75 * np.matmul(up(av), up(bv)) - 1.25 * up(c) + up(bias), 0)
    got = up(d)
    assert np.isfinite(got).all()
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < TOL[dtype]


def test_mma_variant_includes_no_mma_header():
    source = kernel_of("float16", 0, False, False).source
    assert "mma.h" not in source and "nvcuda" not in source and "mma.sync.aligned.m16n8k16" in source
