"""The tiled GEMM's launch geometry (issue 20): ``gridDim.y`` and ``gridDim.z`` are clamped to
CUDA's 65535 and the kernel loops over the row blocks and batches beyond them. The arithmetic is
checked in pure Python (a model of the kernel's loops covers every tile exactly once), the
numerics under the CPU emulation with grids deliberately smaller than the problem."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from kernels_cases import needs_gxx
from nvmathpy.kernels.gemm_tiled import MMA_CONFIGS, SIMT_CONFIGS, gemm_kernel
from nvmathpy.kernels.launch import ArrayRef, pack_arguments
from nvmathpy.kernels.trace import trace

LIMIT = 65535


def covered_tiles(grid, batch, m, n, bm, bn):
    """The (batch, row block, column block) tiles the kernel's loops visit, as a list (the model
    of ``for bz = blockIdx.z; bz < batch; bz += gridDim.z`` and ``for row0 = blockIdx.y * bm;
    row0 < m; row0 += gridDim.y * bm`` in each block ``(x, y, z)`` of ``grid``)."""
    gx, gy, gz = grid
    tiles = []
    for x in range(gx):
        if x * bn >= n:  # a column block beyond n stores nothing (the kernel's col < n guard)
            continue
        for y in range(gy):
            for z in range(gz):
                for bz in range(z, batch, gz):
                    tiles += [(bz, row0 // bm, x) for row0 in range(y * bm, m, gy * bm)]
    return tiles


@pytest.mark.parametrize("variant,dtype,config", [("simt", "float32", SIMT_CONFIGS[0]),
                                                  ("simt", "float64", SIMT_CONFIGS[3]),
                                                  ("twin", "float16", MMA_CONFIGS[1])])
@pytest.mark.parametrize("batch,m,n", [(1, 64 * LIMIT + 1, 70), (3, 128 * LIMIT * 2 + 5, 1), (70000, 5, 3),
                                       (2, 37, 29), (1, 1, 1)])
def test_grid_is_within_cudas_limits(variant, dtype, config, batch, m, n):
    kernel = gemm_kernel(dtype, variant=variant, config=config)
    (gx, gy, gz), block = kernel.launch_dims(batch, m, n)
    assert 1 <= gy <= LIMIT and 1 <= gz <= LIMIT and 1 <= gx < 2**31 and block == (kernel.threads, 1, 1)
    assert gx * config.block_n >= n
    assert gy == min(-(-m // config.block_m), LIMIT) and gz == min(batch, LIMIT)


@pytest.mark.parametrize("grid,batch,m,n,bm,bn", [((2, 3, 1), 1, 700, 100, 64, 64), ((1, 2, 2), 5, 257, 64, 64, 64),
                                                  ((3, 65535, 1), 1, 64 * 65535 + 130, 150, 64, 64),
                                                  ((1, 4, 3), 3, 64 * 4, 10, 64, 64)])
def test_the_kernels_loops_cover_every_tile_once(grid, batch, m, n, bm, bn):
    tiles = covered_tiles(grid, batch, m, n, bm, bn)
    expected = {(b, r, c) for b in range(batch) for r in range(-(-m // bm)) for c in range(-(-n // bn))}
    assert len(tiles) == len(set(tiles)) and set(tiles) == expected


def test_launch_dims_cover_a_tall_product_once():
    kernel = gemm_kernel("float32", config=SIMT_CONFIGS[4])
    batch, m, n = 2, 32 * LIMIT + 40, 33
    grid, _ = kernel.launch_dims(batch, m, n)
    assert grid[1] == LIMIT
    tiles = covered_tiles(grid, batch, m, n, 32, 32)
    assert len(tiles) == len(set(tiles)) == batch * (LIMIT + 2) * 2


NP = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


@needs_gxx
@pytest.mark.parametrize("variant,dtype,config", [("simt", "float32", SIMT_CONFIGS[4]),
                                                  ("simt", "float64", SIMT_CONFIGS[4]),
                                                  ("twin", "bfloat16", MMA_CONFIGS[4])])
def test_row_blocks_and_batches_beyond_the_grid_are_computed(variant, dtype, config):
    """The emulated kernel launched on a grid with fewer row blocks and batches than the product
    (as the clamped grid of a very tall or very batched product): every element is written."""
    import kernels_emulator as emu

    rng = np.random.default_rng(60)
    batch, m, n, k = 3, 5 * config.block_m + 7, config.block_n + 3, 19
    a = rng.standard_normal((batch, m, k)).astype(NP[dtype])
    b = rng.standard_normal((batch, k, n)).astype(NP[dtype])
    bias = rng.standard_normal(n).astype(NP[dtype])
    d = np.full((batch, m, n), np.nan, dtype=NP[dtype])
    kernel = gemm_kernel(dtype, variant=variant, config=config,
                         epilogue=trace(lambda x, bias: np.maximum(x + bias, 0), {"bias": "col"}))
    bias_ref = ArrayRef.of_numpy(bias)
    values = kernel.values(ArrayRef.of_numpy(a), ArrayRef.of_numpy(b), ArrayRef.of_numpy(d), alpha=0.5,
                           epilogue_inputs={"bias": ArrayRef(bias_ref.pointer, (1, 1, n), (0, 0, 1))})
    full, block = kernel.launch_dims(batch, m, n)
    assert full[1] == 6 and full[2] == 3
    emu.launch(kernel.source, kernel.name, (full[0], 2, 2), block, pack_arguments(kernel.params, values))
    z = 0.5 * np.matmul(a.astype(np.float64), b.astype(np.float64)) + bias.astype(np.float64)
    ref = np.maximum(z, 0)
    got = d.astype(np.float64)
    assert np.isfinite(got).all()
    tol = {"float32": 1e-5, "float64": 1e-12, "bfloat16": 1.6e-2}[dtype]
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < tol
