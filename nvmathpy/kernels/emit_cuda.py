"""Emitting CUDA C from the expression IR: expression bodies and the elementwise epilogue kernel.

Generated names come only from positions (``in0``, ``s1``, ``t7``) and constants are printed
as exact hexadecimal floats, so no user-supplied string ever reaches the source. The same
source compiles with NVRTC for the GPU and with g++ under the tests' emulation header.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .ir import Expr, inputs_of

__all__ = ["STORAGE_TYPES", "EmittedExpression", "emit_expression", "elementwise_kernel", "ElementwiseKernel"]

#: Storage dtype name -> (C type, compute C type).
STORAGE_TYPES = {
    "float16": ("__half", "float"),
    "bfloat16": ("__nv_bfloat16", "float"),
    "float32": ("float", "float"),
    "float64": ("double", "double"),
}

_FLOAT_FUNCS = {"exp": "exp", "log": "log", "tanh": "tanh", "erf": "erf", "sqrt": "sqrt", "abs": "fabs"}
_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
          "eq": "==", "ne": "!=", "and": "&&", "or": "||"}


def _literal(value: float | int | bool, ctype: str) -> str:
    """An exact C literal of ``value`` in ``ctype`` (hex float; inf/nan through builtins)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    x = float(value)
    if math.isnan(x):
        return f"(({ctype})NAN)"
    if math.isinf(x):
        return f"(({ctype})({'-' if x < 0 else ''}INFINITY))"
    return f"(({ctype}){x.hex()})"


@dataclass(frozen=True)
class EmittedExpression:
    """C statements computing an expression, and the variable holding its value."""

    statements: tuple[str, ...]
    result: str


def emit_expression(expr: Expr, ctype: str, leaves: dict[tuple[str, str | None], str]) -> EmittedExpression:
    """Emit ``expr`` as SSA-style C statements in ``ctype`` (``float`` or ``double``).

    Parameters
    ----------
    leaves
        C expressions for the leaves: ``("value", None)`` for the product value,
        ``("input", name)`` for each input, ``("index", "row"|"col"|"batch")``.

    Examples
    --------
    >>> from nvmathpy.kernels.trace import trace
    >>> import numpy as np
    >>> e = trace(lambda x: np.maximum(x, 0), {})
    >>> out = emit_expression(e, "float", {("value", None): "v"})
    >>> out.statements[-1], out.result
    ('const float t0 = fmaxf(v, ((float)0x0.0p+0));', 't0')
    """
    suffix = "f" if ctype == "float" else ""
    statements: list[str] = []
    names: dict[int, str] = {}

    def leaf(node: Expr) -> str:
        if node.op == "input":
            return leaves[("value", None) if node.kind == "value" else ("input", node.name)]
        if node.op == "index":
            return f"(({ctype}){leaves[('index', node.name)]})"
        return _literal(node.value, ctype)

    def visit(node: Expr) -> str:
        if id(node) in names:
            return names[id(node)]
        if node.op in ("input", "index", "const"):
            text = leaf(node)
            names[id(node)] = text
            return text
        args = [visit(a) for a in node.args]
        op = node.op
        boolean = op in ("lt", "le", "gt", "ge", "eq", "ne", "and", "or", "not") or (op == "cast" and node.kind == "bool")
        if op in _INFIX:
            value = f"({args[0]} {_INFIX[op]} {args[1]})"
        elif op in _FLOAT_FUNCS:
            value = f"{_FLOAT_FUNCS[op]}{suffix}({args[0]})"
        elif op in ("maximum", "minimum"):
            value = f"f{'max' if op == 'maximum' else 'min'}{suffix}({args[0]}, {args[1]})"
        elif op == "neg":
            value = f"(-{args[0]})"
        elif op == "not":
            value = f"(!{args[0]})"
        elif op == "sigmoid":
            value = f"(({ctype})1 / (({ctype})1 + exp{suffix}(-{args[0]})))"
        elif op == "rsqrt":
            value = f"rsqrt{suffix}({args[0]})"
        elif op == "pow":
            value = f"pow{suffix}({args[0]}, {args[1]})"
        elif op == "where":
            value = f"({args[0]} ? {args[1]} : {args[2]})"
        elif op == "cast":
            value = _cast(args[0], node.kind, ctype)
        else:  # pragma: no cover - Expr validates op names
            raise ValueError(f"cannot emit {op!r}")
        name = f"t{len(statements)}"
        statements.append(f"const {'bool' if boolean else ctype} {name} = {value};")
        names[id(node)] = name
        return name

    result = visit(expr)
    return EmittedExpression(tuple(statements), result)


def _cast(value: str, dtype: str, ctype: str) -> str:
    if dtype == "bool":
        return f"({value} != ({ctype})0)"
    if dtype == "float16":
        return f"(({ctype})__half2float(__float2half_rn((float){value})))"
    if dtype == "bfloat16":
        return f"(({ctype})__bfloat162float(__float2bfloat16_rn((float){value})))"
    return f"(({ctype})(({'float' if dtype == 'float32' else 'double'}){value}))"


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
        The kernel's parameters in order, as ``(kind, input name or None)``: ``("d", None)``
        the result pointer, ``("shape", None)`` the four 64-bit ints ``batch, m, n, ldd`` and
        ``("stride_d", None)``, then per input ``("scalar", name)``, or ``("ptr", name)``
        followed by its element strides ``("batch_stride", name)``, ``("row_stride", name)``
        and ``("col_stride", name)`` (0 where the input broadcasts).
    """

    name: str
    source: str
    params: tuple[tuple[str, str | None], ...]
    inputs: tuple[tuple[str, str], ...]
    storage: str
    vector: int


_PRELUDE = r"""
#ifndef NVMATHPY_EMULATION
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#endif
template <typename T, int V> struct alignas(sizeof(T) * V) NvmPack { T v[V]; };
__device__ __forceinline__ float nvm_load(const __half x) { return __half2float(x); }
__device__ __forceinline__ float nvm_load(const __nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float nvm_load(const float x) { return x; }
__device__ __forceinline__ double nvm_load(const double x) { return x; }
__device__ __forceinline__ void nvm_store(__half* p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void nvm_store(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }
__device__ __forceinline__ void nvm_store(float* p, float x) { *p = x; }
__device__ __forceinline__ void nvm_store(double* p, double x) { *p = x; }
"""


def elementwise_kernel(expr: Expr, storage: str, vector: int = 1, name: str = "nvm_epilogue") -> ElementwiseKernel:
    """Generate the elementwise kernel applying ``expr`` in place to a ``(batch, m, n)`` result.

    Each thread handles ``vector`` consecutive columns of one row (``n`` and ``ldd`` must be
    multiples of ``vector`` for ``vector > 1``: the plan checks before choosing it), in a
    grid-stride loop over all ``batch * m * n / vector`` groups. Inputs are read with their
    own batch, row and column strides (0 broadcasts), so per-row, per-column and full matrix
    inputs all take the same path.

    Examples
    --------
    >>> from nvmathpy.kernels.trace import trace
    >>> k = elementwise_kernel(trace(lambda x, b: x + b, {"b": "col"}), "float32", vector=4)
    >>> k.name, k.params[:3]
    ('nvm_epilogue', (('d', None), ('shape', None), ('stride_d', None)))
    >>> 'NvmPack<float, 4>' in k.source
    True
    """
    if storage not in STORAGE_TYPES:
        raise ValueError(f"storage dtype must be one of {sorted(STORAGE_TYPES)}, got {storage!r}")
    if vector not in (1, 2, 4, 8):
        raise ValueError(f"vector must be 1, 2, 4 or 8, got {vector}")
    ctype, compute = STORAGE_TYPES[storage]
    inputs = tuple(inputs_of(expr).items())
    value_inputs = [(n, k) for n, k in inputs if k != "value"]
    params: list[tuple[str, str | None]] = [("d", None), ("shape", None), ("stride_d", None)]
    signature = [f"{ctype}* __restrict__ d", "long long batch", "long long m", "long long n", "long long ldd",
                 "long long stride_d"]
    leaves: dict[tuple[str, str | None], str] = {("value", None): "v",
                                                  ("index", "row"): "row", ("index", "batch"): "b"}
    loads: list[str] = []
    for position, (input_name, kind) in enumerate(value_inputs):
        if kind == "scalar":
            signature.append(f"{compute} s{position}")
            params.append(("scalar", input_name))
            leaves[("input", input_name)] = f"s{position}"
            continue
        signature += [f"const {ctype}* __restrict__ in{position}", f"long long bs{position}",
                      f"long long rs{position}", f"long long cs{position}"]
        params += [("ptr", input_name), ("batch_stride", input_name), ("row_stride", input_name),
                   ("col_stride", input_name)]
        leaves[("input", input_name)] = f"a{position}"
        loads.append(
            f"const {compute} a{position} = "
            f"nvm_load(in{position}[b * bs{position} + row * rs{position} + col * cs{position}]);"
        )
    body = emit_expression(expr, compute, {**leaves, ("index", "col"): "col"})
    lines = [
        _PRELUDE,
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
        f"      const {compute} v = nvm_load(pack.v[j]);",
        *(f"      {line}" for line in loads),
        *(f"      {line}" for line in body.statements),
        f"      nvm_store(&pack.v[j], ({compute}){body.result});",
        "    }",
        f"    *reinterpret_cast<NvmPack<{ctype}, {vector}>*>(dst) = pack;",
        "  }",
        "}",
    ]
    return ElementwiseKernel(name, "\n".join(lines) + "\n", tuple(params), inputs, storage, vector)
