"""The GPU matmul suite of ``python -m nvmathpy bench --space cuda``: planned, autotuned cuBLASLt
GEMMs beside ``torch.matmul`` and ``cupy.matmul`` (bf16/fp16/fp32), and the fused
``gelu_bias`` epilogue beside torch's ``mm + add + gelu`` and the same chain in CuPy.

Operands live on the device: CuPy arrays for float16/float32 (torch sees them through DLPack,
no copy), torch tensors for bfloat16 (CuPy has no bfloat16). CuPy and torch are imported only
when :func:`cases` runs; :func:`specs` is plain data.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from .harness import Case

__all__ = ["GEMM_DTYPES", "FUSED_DTYPES", "cases", "specs"]

GEMM_DTYPES = ("bfloat16", "float16", "float32")
FUSED_DTYPES = ("bfloat16", "float16")
_GELU = math.sqrt(2 / math.pi)


def specs(quick: bool) -> list[tuple[str, str, tuple[int, int, int]]]:
    """``(kind, dtype, (m, n, k))`` for every case: kind ``"gemm"`` or ``"gelu_bias"``."""
    sizes = (2048, 4096) if quick else (2048, 4096, 8192)
    out = [("gemm", dtype, (n, n, n)) for dtype in GEMM_DTYPES for n in sizes]
    tokens, features = (4096, 2048) if quick else (8192, 4096)
    return out + [("gelu_bias", dtype, (tokens, features, features)) for dtype in FUSED_DTYPES]


def _operands(space: Any, dtype: str, shapes: list[tuple[int, ...]], seed: int) -> list[Any] | None:
    """Device operands of ``dtype`` (standard normal; scaled by ``1/sqrt(k)`` for the 2-D second
    one): CuPy arrays, or torch tensors for bfloat16; ``None`` when bfloat16 has no torch."""
    rng = np.random.default_rng(seed)
    hosts = [rng.standard_normal(shape, dtype=np.float32) for shape in shapes]
    if len(shapes) > 1:
        hosts[1] /= np.float32(math.sqrt(shapes[1][0]))
    if dtype != "bfloat16":
        return [space.to_device(h.astype(dtype)) for h in hosts]
    torch = space.torch
    if torch is None:
        return None
    return [torch.from_numpy(h).to(device="cuda", dtype=torch.bfloat16) for h in hosts]


def _gemm_case(space: Any, dtype: str, m: int, n: int, k: int) -> Case | None:
    from ..linalg import Matmul

    operands = _operands(space, dtype, [(m, k), (k, n)], seed=m + k)
    if operands is None:
        return None
    a, b = operands
    mm = Matmul(a, b)
    mm.autotune(effort="measure", repeats=3)
    impls: dict[str, Callable[[], object]] = {}
    torch = space.torch
    if torch is not None:
        ta, tb = (torch.from_dlpack(a), torch.from_dlpack(b)) if dtype != "bfloat16" else (a, b)
        impls["torch.matmul"] = lambda: torch.matmul(ta, tb)
    if dtype != "bfloat16":
        impls["cupy.matmul"] = lambda: space.xp.matmul(a, b)
    impls["nvmathpy"] = mm.execute
    baseline = "torch.matmul" if torch is not None else "cupy.matmul"
    return Case("matmul", f"GEMM {dtype} {m}x{n}x{k}", baseline, impls, note=mm.candidate.label)


def _gelu_case(space: Any, dtype: str, m: int, n: int, k: int) -> Case | None:
    from ..linalg import Matmul

    operands = _operands(space, dtype, [(m, k), (k, n), (n,)], seed=7)
    if operands is None:
        return None
    x, w, bias = operands
    mm = Matmul(x, w, epilogue="gelu_bias", epilogue_inputs={"bias": bias})
    mm.autotune(effort="measure", repeats=3)
    impls: dict[str, Callable[[], object]] = {}
    torch = space.torch
    if torch is not None:
        tx, tw, tb = (torch.from_dlpack(v) for v in (x, w, bias)) if dtype != "bfloat16" else (x, w, bias)
        gelu = torch.nn.functional.gelu
        impls["torch mm+add+gelu"] = lambda: gelu(torch.mm(tx, tw) + tb, approximate="tanh")
    if dtype != "bfloat16":
        xp = space.xp
        c0, c1 = np.dtype(dtype).type(_GELU), np.dtype(dtype).type(0.044715)

        def cupy_chain() -> Any:
            h = xp.matmul(x, w)
            h += bias
            return 0.5 * h * (1 + xp.tanh(c0 * (h + c1 * h**3)))

        impls["cupy matmul+elementwise"] = cupy_chain
    impls["nvmathpy"] = mm.execute
    baseline = "torch mm+add+gelu" if torch is not None else "cupy matmul+elementwise"
    return Case("matmul", f"gelu_bias {dtype} ({m}x{k}) @ ({k}x{n})", baseline, impls, note=mm.candidate.label)


def cases(quick: bool, space: Any) -> list[Case]:
    """The GPU matmul cases on ``space`` (a CUDA :class:`~nvmathpy.demos._space.Space`); bfloat16
    cases need torch with CUDA and are left out without it."""
    build = {"gemm": _gemm_case, "gelu_bias": _gelu_case}
    out = [build[kind](space, dtype, *shape) for kind, dtype, shape in specs(quick)]
    return [case for case in out if case is not None]
