"""Fused tiled GEMM + epilogue kernels: ``D = epilogue(alpha * A @ B + beta * C)``, generated as CUDA C.

Operands are batched row-major matrices, ``A`` ``(batch, M, K)``, ``B`` ``(batch, K, N)``, ``C``
and ``D`` ``(batch, M, N)``, with run-time leading dimensions and batch strides (a batch stride
of 0 broadcasts); ``trans_a`` / ``trans_b`` say that ``A`` / ``B`` are stored transposed (unit
stride along ``M`` / ``N``). The epilogue IR is applied in registers before the one store of
``D``, whose dtype is the input dtype. Tile sizes are compile-time parameters
(:class:`TileConfig`).

Three variants share the structure (shared-memory tiles, ``__syncthreads`` around each k-tile):

``"simt"``
    float32/float64: each thread accumulates a ``thread_m x thread_n`` register tile.
``"wmma"``
    float16/bfloat16 inputs, float32 accumulation on tensor cores (``nvcuda::wmma`` 16x16x16);
    each warp owns a ``(block_m / warps_m) x (block_n / warps_n)`` tile of fragments, staged
    through shared memory for the epilogue.
``"mma"``
    The ``"wmma"`` structure with the fragments multiplied by ``mma.sync.m16n8k16`` in inline PTX
    (sm_80+): needs no header beyond ``cuda_fp16.h``/``cuda_bf16.h``, for machines where
    ``mma.h``'s ``crt/`` headers are missing.
``"twin"``
    The ``"wmma"`` source with the three fragment operations (zero, multiply-accumulate,
    store) done by scalar code on the same shared-memory tiles and pointers: it compiles
    without tensor cores (and with g++ under the tests' emulation), so the tiling, indexing
    and epilogue of the tensor-core kernel are verified on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import InvalidOperandError, InvalidOptionError
from .emit_cuda import PRELUDE, STORAGE_TYPES
from .fused_epilogue import EpiloguePart, epilogue_part
from .gemm_config import MMA_CONFIGS, SIMT_CONFIGS, TileConfig
from .gemm_mainloop import TWIN_OPS, WMMA_OPS, mma_body, mma_ptx_ops, simt_body
from .ir import Expr
from .launch import ArrayRef, KernelParam, epilogue_values

__all__ = ["TileConfig", "GemmKernel", "gemm_kernel", "gemm_layout", "SIMT_CONFIGS", "MMA_CONFIGS", "VARIANTS",
           "VARIANT_HEADERS", "variant_compilable"]

VARIANTS = ("simt", "wmma", "mma", "twin")
#: Headers beyond the prelude's ``cuda_fp16.h``/``cuda_bf16.h`` that a variant's source needs
#: (``mma.h`` includes ``crt/mma.h``, which the CUDA wheels ship only in ``nvidia-cuda-crt``).
VARIANT_HEADERS = {"simt": (), "wmma": ("mma.h", "crt/mma.h"), "mma": (), "twin": ()}
_MAX_STATIC_SMEM = 48 * 1024
_MAX_GRID_Z = 65535
#: CUDA's limit of gridDim.y (and z); row blocks beyond it are looped over in the kernel.
_MAX_GRID_Y = 65535


@dataclass(frozen=True)
class GemmKernel:
    """A generated GEMM kernel.

    Attributes
    ----------
    name : str
        The ``extern "C"`` entry point.
    source : str
        Complete CUDA C source.
    params : tuple[KernelParam, ...]
        Parameters in signature order (see :meth:`values`).
    threads : int
        Threads per block (1-D blocks).
    smem_bytes : int
        Static shared memory per block.
    """

    name: str
    source: str
    params: tuple[KernelParam, ...]
    dtype: str
    variant: str
    config: TileConfig
    trans_a: bool
    trans_b: bool
    with_c: bool
    epilogue: EpiloguePart
    threads: int
    smem_bytes: int

    def launch_dims(self, batch: int, m: int, n: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """``(grid, block)`` for a ``(batch, m, n)`` result: one block per ``block_m x block_n``
        tile, with row blocks beyond 65535 (``gridDim.y``) and batches beyond 65535 (``gridDim.z``)
        looped over in the kernel.

        Examples
        --------
        >>> k = gemm_kernel("float32")
        >>> k.launch_dims(1, 64 * 70000, 100)[0]
        (2, 65535, 1)
        """
        cfg = self.config
        grid = (max(1, -(-n // cfg.block_n)), max(1, min(-(-m // cfg.block_m), _MAX_GRID_Y)),
                max(1, min(batch, _MAX_GRID_Z)))
        return grid, (self.threads, 1, 1)

    def values(self, a: ArrayRef, b: ArrayRef, d: ArrayRef, *, alpha: float = 1.0, beta: float = 0.0,
               c: ArrayRef | None = None, epilogue_inputs: Mapping[str, Any] | None = None) -> dict:
        """Argument values keyed like :attr:`params`, from 3-D ``(batch, rows, cols)`` operand views.

        Raises
        ------
        InvalidOperandError
            If shapes disagree, or an operand's layout does not match the kernel's transposition
            flags (``D`` and ``C`` must have unit column stride).
        """
        batch, m, k = a.shape
        n = b.shape[2]
        if b.shape[1] != k or d.shape != (batch, m, n) or b.shape[0] != batch:
            raise InvalidOperandError(f"gemm shapes do not agree: a {a.shape}, b {b.shape}, d {d.shape}")
        values: dict = {("a", None): a.pointer, ("b", None): b.pointer, ("d", None): d.pointer,
                        ("batch", None): batch, ("m", None): m, ("n", None): n, ("k", None): k,
                        ("lda", None): _leading(a, self.trans_a, "a"), ("ldb", None): _leading(b, self.trans_b, "b"),
                        ("ldd", None): _leading(d, False, "d"), ("stride_a", None): a.strides[0],
                        ("stride_b", None): b.strides[0], ("stride_d", None): d.strides[0], ("alpha", None): alpha}
        if self.with_c:
            if c is None or c.shape != d.shape:
                raise InvalidOperandError(f"this kernel reads c of shape {d.shape}, got {c and c.shape}")
            values.update({("c", None): c.pointer, ("ldc", None): _leading(c, False, "c"),
                           ("stride_c", None): c.strides[0], ("beta", None): beta})
        values.update(epilogue_values(self.epilogue.inputs, epilogue_inputs or {}))
        return values


def variant_compilable(variant: str) -> bool:
    """Whether NVRTC finds every header ``variant``'s source includes on this machine.

    Examples
    --------
    >>> variant_compilable("twin")
    True
    """
    from ..cuda.nvrtc import header_available

    return all(header_available(h) for h in VARIANT_HEADERS[variant])


def _leading(ref: ArrayRef, trans: bool, name: str) -> int:
    unit, lead = (1, 2) if trans else (2, 1)
    if ref.strides[unit] != 1 and ref.shape[unit] != 1:
        raise InvalidOperandError(f"{name} needs a unit stride along axis {unit} for this kernel "
                                  f"(trans_{name}={trans}), got strides {ref.strides}")
    return ref.strides[lead]


def gemm_layout(ref: ArrayRef) -> bool:
    """Whether a ``(batch, rows, cols)`` operand is stored transposed (unit stride along rows).

    Raises
    ------
    InvalidOperandError
        If neither of the last two axes has unit stride (the caller copies first).

    Examples
    --------
    >>> import numpy as np
    >>> gemm_layout(ArrayRef.of_numpy(np.zeros((2, 5, 3), dtype=np.float32).transpose(0, 2, 1)))
    True
    """
    if ref.strides[2] == 1 or ref.shape[2] == 1:
        return False
    if ref.strides[1] == 1 or ref.shape[1] == 1:
        return True
    raise InvalidOperandError(f"a gemm operand needs unit stride in one of its last two axes, got {ref.strides}")


def _check(dtype: str, variant: str, cfg: TileConfig) -> int:
    """Validate the combination; return threads per block."""
    if variant not in VARIANTS:
        raise InvalidOptionError(f"variant must be one of {VARIANTS}, got {variant!r}")
    allowed = ("float32", "float64") if variant == "simt" else ("float16", "bfloat16")
    if dtype not in allowed:
        raise InvalidOptionError(f"the {variant!r} gemm takes dtype in {allowed}, got {dtype!r}")
    if variant == "simt":
        if cfg.block_m % cfg.thread_m or cfg.block_n % cfg.thread_n:
            raise InvalidOptionError(f"block tile {cfg.block_m}x{cfg.block_n} is not a multiple of the thread "
                                     f"tile {cfg.thread_m}x{cfg.thread_n}")
        threads = cfg.block_m * cfg.block_n // (cfg.thread_m * cfg.thread_n)
    else:
        if cfg.block_m % (16 * cfg.warps_m) or cfg.block_n % (16 * cfg.warps_n) or cfg.block_k % 16:
            raise InvalidOptionError(f"tile {cfg.block_m}x{cfg.block_n}x{cfg.block_k} with warps "
                                     f"{cfg.warps_m}x{cfg.warps_n} does not split into 16x16x16 fragments")
        threads = 32 * cfg.warps_m * cfg.warps_n
    if not 32 <= threads <= 1024:
        raise InvalidOptionError(f"tile config {cfg} gives {threads} threads per block; allowed 32..1024")
    return threads


def _signature(ctype: str, compute: str, with_c: bool) -> tuple[list[str], list[KernelParam]]:
    scalar = "f64" if compute == "double" else "f32"
    entries = [("a", f"const {ctype}* __restrict__ a", "ptr"), ("b", f"const {ctype}* __restrict__ b", "ptr"),
               ("c", f"const {ctype}* __restrict__ c", "ptr"), ("d", f"{ctype}* __restrict__ d", "ptr")]
    entries += [(role, f"long long {role}", "i64") for role in
                ("batch", "m", "n", "k", "lda", "ldb", "ldc", "ldd", "stride_a", "stride_b", "stride_c", "stride_d")]
    entries += [("alpha", f"{compute} alpha", scalar), ("beta", f"{compute} beta", scalar)]
    kept = [e for e in entries if with_c or e[0] not in ("c", "ldc", "stride_c", "beta")]
    return [decl for _, decl, _ in kept], [KernelParam((role, None), kind) for role, _, kind in kept]


def _store(epilogue: EpiloguePart, compute: str, acc: str, with_c: bool) -> list[str]:
    """Statements finishing one element at ``(bz, row, col)`` (in bounds) from accumulator ``acc``."""
    value = f"alpha * {acc}" + (" + beta * nvm_load(c[bz * stride_c + row * ldc + col])" if with_c else "")
    lines, result = epilogue.apply(f"({compute})({value})", "row", "col", "bz")
    return [*lines, f"nvm_store(&d[bz * stride_d + row * ldd + col], ({compute}){result});"]


def gemm_kernel(dtype: str, *, config: TileConfig | None = None, variant: str = "simt", trans_a: bool = False,
                trans_b: bool = False, with_c: bool = False, epilogue: Expr | None = None,
                name: str = "nvm_gemm") -> GemmKernel:
    """Generate ``D = epilogue(alpha * op(A) @ op(B) [+ beta * C])``.

    Parameters
    ----------
    dtype : str
        Storage dtype of A, B, C and D: float32/float64 (``"simt"``) or float16/bfloat16
        (``"wmma"``, ``"twin"``; accumulation in float32).
    config : TileConfig, optional
        Tile sizes; by default the first of :data:`SIMT_CONFIGS` or :data:`MMA_CONFIGS`.
    variant : {"simt", "wmma", "mma", "twin"}
    trans_a, trans_b : bool
        A stored as ``(batch, K, M)`` / B as ``(batch, N, K)`` row-major.
    with_c : bool
        Whether ``beta * C`` is added (the kernel then takes ``c``, ``ldc``, ``stride_c``, ``beta``).
    epilogue : Expr, optional
        Applied to each element of ``alpha * A @ B + beta * C`` before the store.

    Raises
    ------
    InvalidOptionError
        For an unknown variant, a dtype the variant does not take, or a tile configuration that
        does not divide or exceeds the limits (1024 threads, 48 KiB static shared memory).

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.kernels.trace import trace
    >>> k = gemm_kernel("float32", epilogue=trace(lambda x, bias: np.maximum(x + bias, 0), {"bias": "col"}))
    >>> k.threads, k.smem_bytes, k.launch_dims(3, 100, 70)
    (256, 8704, ((2, 2, 3), (256, 1, 1)))
    >>> [p.key for p in k.params][-4:]
    [('ptr', 'bias'), ('batch_stride', 'bias'), ('row_stride', 'bias'), ('col_stride', 'bias')]
    """
    cfg = config or (SIMT_CONFIGS[0] if variant == "simt" else MMA_CONFIGS[0])
    threads = _check(dtype, variant, cfg)
    ctype, compute = STORAGE_TYPES[dtype]
    part = epilogue_part(epilogue, dtype)
    signature, params = _signature(ctype, compute, with_c)
    if variant == "simt":
        body, smem = simt_body(cfg, ctype, trans_a, trans_b, _store(part, compute, "acc[i][j]", with_c))
        ops = ""
    else:
        body, smem = mma_body(cfg, ctype, trans_a, trans_b, _store(part, compute, "cv", with_c))
        ops = f"typedef {ctype} T;\n#define nvm_zero __float2{'half' if dtype == 'float16' else 'bfloat16'}_rn(0.0f)\n"
        ops += {"wmma": WMMA_OPS, "twin": TWIN_OPS}.get(variant) or mma_ptx_ops(dtype)
    if smem > _MAX_STATIC_SMEM:
        raise InvalidOptionError(f"tile config {cfg} needs {smem} bytes of shared memory; at most "
                                 f"{_MAX_STATIC_SMEM} allowed")
    source = "\n".join([
        PRELUDE,
        ops,
        f"#define NVM_THREADS {threads}",
        f'extern "C" __global__ void __launch_bounds__({threads}, 1) {name}(',
        "    " + ",\n    ".join(signature + list(part.signature)) + ") {",
        *("  " + line for line in body),
        "}",
        "",
    ])
    return GemmKernel(name, source, tuple(params) + part.params, dtype, variant, cfg, trans_a, trans_b, with_c, part,
                      threads, smem)

