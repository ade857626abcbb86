"""The main loops of the generated GEMM kernels, as CUDA C lines: shared-memory k-tiles, then the
per-element store (given as lines by the caller) for the scalar and the tensor-core variants.

The tensor-core loop calls three fragment operations (``nvm_acc_zero``, ``nvm_mma``,
``nvm_acc_store``) on 16x16x16 tiles in shared memory; :data:`WMMA_OPS` implements them with
``nvcuda::wmma`` (``mma.h``, which needs the ``crt/`` headers), :func:`mma_ptx_ops` with two
``mma.sync.aligned.m16n8k16`` instructions in inline PTX (no header beyond the prelude's), and
:data:`TWIN_OPS` with scalar code on the same pointers (the CPU-checkable twin).
"""

from __future__ import annotations

from .gemm_config import TileConfig

__all__ = ["WMMA_OPS", "TWIN_OPS", "mma_ptx_ops", "simt_body", "mma_body"]


def _tile_loads(cfg: TileConfig, trans_a: bool, trans_b: bool, a_dst: str, b_dst: str, zero: str) -> list[str]:
    """Statements copying one k-tile of A (as ``[i][kk]`` or ``[kk][i]``) and B (``[kk][j]``) into
    shared memory, zero-filled outside the matrices; consecutive threads read consecutive
    addresses of the operand's unit-stride axis."""
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    a_map = (f"const int i = e % {bm}, kk = e / {bm};" if trans_a else f"const int kk = e % {bk}, i = e / {bk};")
    a_src = "A[gk * lda + gi]" if trans_a else "A[gi * lda + gk]"
    b_map = (f"const int kk = e % {bk}, j = e / {bk};" if trans_b else f"const int j = e % {bn}, kk = e / {bn};")
    b_src = "B[gj * ldb + gk]" if trans_b else "B[gk * ldb + gj]"
    return [
        f"for (int e = threadIdx.x; e < {bm * bk}; e += NVM_THREADS) {{",
        f"  {a_map}",
        "  const long long gi = row0 + i, gk = k0 + kk;",
        f"  {a_dst} = (gi < m && gk < k) ? {a_src} : {zero};",
        "}",
        f"for (int e = threadIdx.x; e < {bk * bn}; e += NVM_THREADS) {{",
        f"  {b_map}",
        "  const long long gj = col0 + j, gk = k0 + kk;",
        f"  {b_dst} = (gj < n && gk < k) ? {b_src} : {zero};",
        "}",
    ]


def _block_loops(bm: int, bn: int) -> list[str]:
    """The column offset of this block, and the heads of its loops over batches (``gridDim.z``
    at most 65535) and row blocks (``gridDim.y`` at most 65535: a grid-stride loop covers any
    ``m``); each body closes both with ``}}``. Both loops' bounds are uniform over the block, so
    the ``__syncthreads`` inside them are reached by every thread."""
    return [
        f"const long long col0 = (long long)blockIdx.x * {bn};",
        "for (long long bz = blockIdx.z; bz < batch; bz += gridDim.z) {",
        f"for (long long row0 = (long long)blockIdx.y * {bm}; row0 < m; row0 += (long long)gridDim.y * {bm}) {{",
    ]


def simt_body(cfg: TileConfig, ctype: str, trans_a: bool, trans_b: bool, store: list[str]) -> tuple[list[str], int]:
    bm, bn, bk, tm, tn = cfg.block_m, cfg.block_n, cfg.block_k, cfg.thread_m, cfg.thread_n
    smem = bk * (bm + 4) * _size(ctype) + bk * (bn + 4) * _size(ctype)
    lines = [
        f"__shared__ {ctype} As[{bk}][{bm + 4}];",
        f"__shared__ {ctype} Bs[{bk}][{bn + 4}];",
        f"const int tx = threadIdx.x % {bn // tn}, ty = threadIdx.x / {bn // tn};",
        *_block_loops(bm, bn),
        "  const auto* A = a + bz * stride_a;",
        "  const auto* B = b + bz * stride_b;",
        f"  {ctype} acc[{tm}][{tn}];",
        f"  for (int i = 0; i < {tm}; ++i)",
        f"    for (int j = 0; j < {tn}; ++j) acc[i][j] = 0;",
        f"  for (long long k0 = 0; k0 < k; k0 += {bk}) {{",
        *("    " + s for s in _tile_loads(cfg, trans_a, trans_b, "As[kk][i]", "Bs[kk][j]", f"({ctype})0")),
        "    __syncthreads();",
        "#pragma unroll",
        f"    for (int kk = 0; kk < {bk}; ++kk) {{",
        f"      {ctype} ar[{tm}], br[{tn}];",
        "#pragma unroll",
        f"      for (int i = 0; i < {tm}; ++i) ar[i] = As[kk][ty + i * {bm // tm}];",
        "#pragma unroll",
        f"      for (int j = 0; j < {tn}; ++j) br[j] = Bs[kk][tx + j * {bn // tn}];",
        "#pragma unroll",
        f"      for (int i = 0; i < {tm}; ++i)",
        "#pragma unroll",
        f"        for (int j = 0; j < {tn}; ++j) acc[i][j] = fma(ar[i], br[j], acc[i][j]);",
        "    }",
        "    __syncthreads();",
        "  }",
        "#pragma unroll",
        f"  for (int i = 0; i < {tm}; ++i) {{",
        "#pragma unroll",
        f"    for (int j = 0; j < {tn}; ++j) {{",
        f"      const long long row = row0 + ty + i * {bm // tm}, col = col0 + tx + j * {bn // tn};",
        "      if (row < m && col < n) {",
        *("        " + s for s in store),
        "      }",
        "    }",
        "  }",
        "}}",  # the row-block and batch loops
    ]
    return lines, smem


def _size(ctype: str) -> int:
    return {"float": 4, "double": 8, "__half": 2, "__nv_bfloat16": 2}[ctype]


WMMA_OPS = r"""
#ifndef NVMATHPY_EMULATION
#include <mma.h>
#endif
typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> nvm_acc;
__device__ __forceinline__ void nvm_acc_zero(nvm_acc& acc) { nvcuda::wmma::fill_fragment(acc, 0.0f); }
__device__ __forceinline__ void nvm_mma(nvm_acc& acc, const T* a, unsigned lda, const T* b, unsigned ldb) {
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, T, nvcuda::wmma::row_major> fa;
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, T, nvcuda::wmma::row_major> fb;
  nvcuda::wmma::load_matrix_sync(fa, a, lda);
  nvcuda::wmma::load_matrix_sync(fb, b, ldb);
  nvcuda::wmma::mma_sync(acc, fa, fb, acc);
}
__device__ __forceinline__ void nvm_acc_store(float* c, const nvm_acc& acc, unsigned ldc) {
  nvcuda::wmma::store_matrix_sync(c, acc, ldc, nvcuda::wmma::mem_row_major);
}
"""

_MMA_PTX_OPS = r"""
// 16x16x16 as two mma.sync.m16n8k16 (sm_80+): A row-major, B "col" (k-pairs per column), float
// accumulators. Lane l (g = l / 4, t = l % 4) holds, per the PTX ISA's fragment layouts:
// A: {(g, 2t..2t+1), (g+8, 2t..2t+1), (g, 2t+8..2t+9), (g+8, 2t+8..2t+9)}, the lower index in
// the lower 16 bits; B (per 8-column half h): {(2t..2t+1, 8h+g), (2t+8..2t+9, 8h+g)};
// C/D: x[4h..4h+3] = (g, 8h+2t), (g, 8h+2t+1), (g+8, 8h+2t), (g+8, 8h+2t+1).
struct nvm_acc { float x[8]; };
__device__ __forceinline__ unsigned nvm_pack2(const T lo, const T hi) {
  return (unsigned)NVM_AS_USHORT(lo) | ((unsigned)NVM_AS_USHORT(hi) << 16);
}
__device__ __forceinline__ void nvm_acc_zero(nvm_acc& acc) {
  for (int e = 0; e < 8; ++e) acc.x[e] = 0.0f;
}
__device__ __forceinline__ void nvm_mma(nvm_acc& acc, const T* a, unsigned lda, const T* b, unsigned ldb) {
  const int lane = threadIdx.x % 32, g = lane / 4, t2 = 2 * (lane % 4);
  const unsigned a0 = nvm_pack2(a[g * lda + t2], a[g * lda + t2 + 1]);
  const unsigned a1 = nvm_pack2(a[(g + 8) * lda + t2], a[(g + 8) * lda + t2 + 1]);
  const unsigned a2 = nvm_pack2(a[g * lda + t2 + 8], a[g * lda + t2 + 9]);
  const unsigned a3 = nvm_pack2(a[(g + 8) * lda + t2 + 8], a[(g + 8) * lda + t2 + 9]);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int col = 8 * h + g;
    const unsigned b0 = nvm_pack2(b[t2 * ldb + col], b[(t2 + 1) * ldb + col]);
    const unsigned b1 = nvm_pack2(b[(t2 + 8) * ldb + col], b[(t2 + 9) * ldb + col]);
    float* d = acc.x + 4 * h;
#ifdef NVMATHPY_EMULATION
    nvm_emu_mma_m16n8k16(d, a0, a1, a2, a3, b0, b1, NVM_EMU_BF16);
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.NVM_PTX_TYPE.NVM_PTX_TYPE.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
  }
}
__device__ __forceinline__ void nvm_acc_store(float* c, const nvm_acc& acc, unsigned ldc) {
  const int lane = threadIdx.x % 32, g = lane / 4, t2 = 2 * (lane % 4);
  for (int h = 0; h < 2; ++h) {
    c[g * ldc + 8 * h + t2] = acc.x[4 * h];
    c[g * ldc + 8 * h + t2 + 1] = acc.x[4 * h + 1];
    c[(g + 8) * ldc + 8 * h + t2] = acc.x[4 * h + 2];
    c[(g + 8) * ldc + 8 * h + t2 + 1] = acc.x[4 * h + 3];
  }
}
"""


def mma_ptx_ops(dtype: str) -> str:
    """The fragment operations in inline PTX for ``dtype`` (``"float16"`` or ``"bfloat16"``)."""
    ptx, as_ushort = {"float16": ("f16", "__half_as_ushort"), "bfloat16": ("bf16", "__bfloat16_as_ushort")}[dtype]
    return (_MMA_PTX_OPS.replace("NVM_PTX_TYPE", ptx).replace("NVM_AS_USHORT", as_ushort)
            .replace("NVM_EMU_BF16", "true" if dtype == "bfloat16" else "false"))


TWIN_OPS = r"""
// Scalar twin of the 16x16x16 fragment operations: lane l owns elements 8l..8l+7 of the
// row-major 16x16 accumulator tile.
struct nvm_acc { float x[8]; };
__device__ __forceinline__ void nvm_acc_zero(nvm_acc& acc) {
  for (int e = 0; e < 8; ++e) acc.x[e] = 0.0f;
}
__device__ __forceinline__ void nvm_mma(nvm_acc& acc, const T* a, unsigned lda, const T* b, unsigned ldb) {
  const int lane = threadIdx.x % 32;
#pragma unroll 1
  for (int e = 0; e < 8; ++e) {
    const int r = (lane * 8 + e) / 16, c = (lane * 8 + e) % 16;
    for (int kk = 0; kk < 16; ++kk) acc.x[e] = fmaf(nvm_load(a[r * lda + kk]), nvm_load(b[kk * ldb + c]), acc.x[e]);
  }
}
__device__ __forceinline__ void nvm_acc_store(float* c, const nvm_acc& acc, unsigned ldc) {
  const int lane = threadIdx.x % 32;
  for (int e = 0; e < 8; ++e) c[((lane * 8 + e) / 16) * ldc + (lane * 8 + e) % 16] = acc.x[e];
}
"""


def _align(offset: int) -> int:
    return -(-offset // 128) * 128


def mma_body(cfg: TileConfig, ctype: str, trans_a: bool, trans_b: bool, store: list[str]) -> tuple[list[str], int]:
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    fm, fn = bm // (16 * cfg.warps_m), bn // (16 * cfg.warps_n)
    lda_s, ldb_s, ldc_s = bk + 8, bn + 8, bn + 4
    b_offset = _align(bm * lda_s * 2)
    tiles = b_offset + _align(bk * ldb_s * 2)
    smem = max(tiles, bm * ldc_s * 4)  # the float staging tile of the epilogue reuses the A/B tiles
    lines = [
        f"__shared__ __align__(128) unsigned char smem[{smem}];",
        "T* As = reinterpret_cast<T*>(smem);",
        f"T* Bs = reinterpret_cast<T*>(smem + {b_offset});",
        "float* Cs = reinterpret_cast<float*>(smem);",
        f"const int warp = threadIdx.x / 32, wm = warp / {cfg.warps_n}, wn = warp % {cfg.warps_n};",
        *_block_loops(bm, bn),
        "  const T* A = a + bz * stride_a;",
        "  const T* B = b + bz * stride_b;",
        f"  nvm_acc acc[{fm}][{fn}];",
        f"  for (int i = 0; i < {fm}; ++i)",
        f"    for (int j = 0; j < {fn}; ++j) nvm_acc_zero(acc[i][j]);",
        f"  for (long long k0 = 0; k0 < k; k0 += {bk}) {{",
        *("    " + s for s in _tile_loads(cfg, trans_a, trans_b, f"As[i * {lda_s} + kk]", f"Bs[kk * {ldb_s} + j]",
                                          "nvm_zero")),
        "    __syncthreads();",
        "#pragma unroll",
        f"    for (int kk = 0; kk < {bk}; kk += 16)",
        "#pragma unroll",
        f"      for (int i = 0; i < {fm}; ++i)",
        "#pragma unroll",
        f"        for (int j = 0; j < {fn}; ++j)",
        f"          nvm_mma(acc[i][j], As + ((wm * {fm} + i) * 16) * {lda_s} + kk, {lda_s},",
        f"                  Bs + kk * {ldb_s} + (wn * {fn} + j) * 16, {ldb_s});",
        "    __syncthreads();",
        "  }",
        f"  for (int i = 0; i < {fm}; ++i)",
        f"    for (int j = 0; j < {fn}; ++j)",
        f"      nvm_acc_store(Cs + ((wm * {fm} + i) * 16) * {ldc_s} + (wn * {fn} + j) * 16, acc[i][j], {ldc_s});",
        "  __syncthreads();",
        f"  for (int e = threadIdx.x; e < {bm * bn}; e += NVM_THREADS) {{",
        f"    const long long row = row0 + e / {bn}, col = col0 + e % {bn};",
        "    if (row < m && col < n) {",
        f"      const float cv = Cs[(e / {bn}) * {ldc_s} + e % {bn}];",
        *("      " + s for s in store),
        "    }",
        "  }",
        "  __syncthreads();",
        "}}",  # the row-block and batch loops
    ]
    return lines, smem
