"""The generated elementwise epilogue kernel: one pass over a ``(batch, m, n)`` result in place.

This is the first of the two GEMM + custom-epilogue candidates (a vendor GEMM, then this
kernel); the epilogue's parameters and per-element statements come from the same
:func:`~nvmathpy.kernels.fused_epilogue.epilogue_part` the fused GEMM kernel uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from .emit_cuda import PRELUDE, STORAGE_TYPES
from .fused_epilogue import epilogue_part
from .ir import Expr
from .launch import KernelParam

__all__ = ["ElementwiseKernel", "elementwise_kernel"]

_FIXED_PARAMS = (KernelParam(("d", None), "ptr"),) + tuple(
    KernelParam((role, None), "i64") for role in ("batch", "m", "n", "ldd", "stride_d")
)


@dataclass(frozen=True)
class ElementwiseKernel:
    """A generated elementwise epilogue kernel.

    Attributes
    ----------
    name
        The ``extern "C"`` entry point.
    source
        Complete CUDA C source.
    params
        The typed parameters in signature order: the result pointer, ``batch, m, n, ldd,
        stride_d`` (64-bit), then the epilogue inputs' parameters (see
        :func:`~nvmathpy.kernels.launch.input_params`).
    inputs
        ``(name, kind)`` of every input the expression reads.
    """

    name: str
    source: str
    params: tuple[KernelParam, ...]
    inputs: tuple[tuple[str, str], ...]
    storage: str
    vector: int


def elementwise_kernel(expr: Expr, storage: str, vector: int = 1, name: str = "nvm_epilogue") -> ElementwiseKernel:
    """Generate the kernel applying ``expr`` in place to a ``(batch, m, n)`` result.

    Each thread handles ``vector`` consecutive columns of one row (``n`` and ``ldd`` must be
    multiples of ``vector`` for ``vector > 1``: the plan checks before choosing it), in a
    grid-stride loop over all ``batch * m * n / vector`` groups. Inputs are read through their
    own batch, row and column strides (0 broadcasts), so per-row, per-column and full matrix
    inputs take the same path.

    Examples
    --------
    >>> from nvmathpy.kernels.trace import trace
    >>> k = elementwise_kernel(trace(lambda x, b: x + b, {"b": "col"}), "float32", vector=4)
    >>> k.name, [p.key for p in k.params[:3]]
    ('nvm_epilogue', [('d', None), ('batch', None), ('m', None)])
    >>> 'NvmPack<float, 4>' in k.source
    True
    """
    if storage not in STORAGE_TYPES:
        raise ValueError(f"storage dtype must be one of {sorted(STORAGE_TYPES)}, got {storage!r}")
    if vector not in (1, 2, 4, 8):
        raise ValueError(f"vector must be 1, 2, 4 or 8, got {vector}")
    ctype, compute = STORAGE_TYPES[storage]
    part = epilogue_part(expr, storage)
    signature = [f"{ctype}* __restrict__ d", "long long batch", "long long m", "long long n", "long long ldd",
                 "long long stride_d", *part.signature]
    statements, result = part.apply("nvm_load(pack.v[j])", "row", "col", "b")
    lines = [
        PRELUDE,
        f'extern "C" __global__ void {name}({", ".join(signature)}) {{',
        f"  const long long groups_per_row = n / {vector};",
        "  const long long total = batch * m * groups_per_row;",
        "  for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x; g < total;",
        "       g += (long long)gridDim.x * blockDim.x) {",
        "    const long long b = g / (m * groups_per_row);",
        "    const long long rest = g - b * m * groups_per_row;",
        "    const long long row = rest / groups_per_row;",
        f"    const long long col0 = (rest - row * groups_per_row) * {vector};",
        f"    {ctype}* dst = d + b * stride_d + row * ldd + col0;",
        f"    NvmPack<{ctype}, {vector}> pack = *reinterpret_cast<NvmPack<{ctype}, {vector}>*>(dst);",
        "#pragma unroll",
        f"    for (int j = 0; j < {vector}; ++j) {{",
        "      const long long col = col0 + j;",
        *(f"      {line}" for line in statements),
        f"      nvm_store(&pack.v[j], ({compute}){result});",
        "    }",
        f"    *reinterpret_cast<NvmPack<{ctype}, {vector}>*>(dst) = pack;",
        "  }",
        "}",
    ]
    return ElementwiseKernel(name, "\n".join(lines) + "\n", _FIXED_PARAMS + part.params, part.inputs, storage, vector)
