"""Emitting CUDA C from the expression IR: expression bodies, and the prelude every generated
kernel starts with (storage types, loads and stores in the compute type).

Generated names come only from positions (``in0``, ``s1``, ``t7``) and constants are printed
as exact hexadecimal floats, so no user-supplied string ever reaches the source. The same
source compiles with NVRTC for the GPU and with g++ under the tests' emulation header.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .ir import Expr

__all__ = ["STORAGE_TYPES", "PRELUDE", "EmittedExpression", "emit_expression"]

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


def emit_expression(expr: Expr, ctype: str, leaves: dict[tuple[str, str | None], str],
                    dialect: str = "cuda") -> EmittedExpression:
    """Emit ``expr`` as SSA-style C statements in ``ctype`` (``float`` or ``double``).

    Parameters
    ----------
    leaves
        C expressions for the leaves: ``("value", None)`` for the product value,
        ``("input", name)`` for each input, ``("index", "row"|"col"|"batch")``.
    dialect
        ``"cuda"`` (CUDA C: ``fmaxf``, ``rsqrtf``, half-precision casts) or ``"c"`` (host C99
        for :mod:`.emit_c`: maximum/minimum propagate NaN as NumPy's do, no half casts).

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
        elif op == "exp" and dialect == "c":  # vectorisable, no slow path (see emit_c.C_PRELUDE)
            value = f"nvm_exp{suffix}({args[0]})"
        elif op in _FLOAT_FUNCS:
            value = f"{_FLOAT_FUNCS[op]}{suffix}({args[0]})"
        elif op in ("maximum", "minimum") and dialect == "c":  # NaN in either argument gives NaN
            value = f"(({args[0]} != {args[0]} || {args[0]} {'>' if op == 'maximum' else '<'} {args[1]}) ? {args[0]} : {args[1]})"
        elif op in ("maximum", "minimum"):
            value = f"f{'max' if op == 'maximum' else 'min'}{suffix}({args[0]}, {args[1]})"
        elif op == "neg":
            value = f"(-{args[0]})"
        elif op == "not":
            value = f"(!{args[0]})"
        elif op == "sigmoid":
            exp = "nvm_exp" if dialect == "c" else "exp"
            value = f"(({ctype})1 / (({ctype})1 + {exp}{suffix}(-{args[0]})))"
        elif op == "rsqrt":
            value = f"rsqrt{suffix}({args[0]})" if dialect == "cuda" else f"(({ctype})1 / sqrt{suffix}({args[0]}))"
        elif op == "pow":
            value = f"pow{suffix}({args[0]}, {args[1]})"
        elif op == "where":
            value = f"({args[0]} ? {args[1]} : {args[2]})"
        elif op == "cast":
            if dialect == "c" and node.kind in ("float16", "bfloat16"):
                raise ValueError(f"host C kernels have no {node.kind} cast")
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


#: Helpers every generated kernel includes first (guarded, so two generators can share a source).
PRELUDE = r"""
#ifndef NVMATHPY_PRELUDE
#define NVMATHPY_PRELUDE
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
#endif
"""
