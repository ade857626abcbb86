"""Shared by the kernel tests: one epilogue case per IR operation (with its inputs), and the
marks that skip tests whose tools (NVRTC, g++) are missing."""

from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest

from nvmathpy.kernels.trace import erf, sigmoid, trace

# name -> (function, {input: kind}); together they use every IR operation, leaf kind and index.
OP_CASES = {
    "neg": (lambda x: -x, {}),
    "abs": (lambda x: abs(x), {}),
    "exp": (lambda x: np.exp(x * 0.5), {}),
    "log": (lambda x: np.log(abs(x) + 0.5), {}),
    "tanh": (lambda x: np.tanh(x), {}),
    "erf": (lambda x: erf(x), {}),
    "sigmoid": (lambda x: sigmoid(x), {}),
    "sqrt": (lambda x: np.sqrt(abs(x)), {}),
    "rsqrt": (lambda x: (abs(x) + 0.5) ** -0.5, {}),
    "not": (lambda x: np.where(~(x > 0), x, 2 * x), {}),
    "add_col": (lambda x, bias: x + bias, {"bias": "col"}),
    "sub_row": (lambda x, r: x - r, {"r": "row"}),
    "mul_matrix": (lambda x, m: x * m, {"m": "matrix"}),
    "div_scalar": (lambda x, s: x / s, {"s": "scalar"}),
    "maximum": (lambda x, bias: np.maximum(x, bias), {"bias": "col"}),
    "minimum": (lambda x, r: np.minimum(x, r), {"r": "row"}),
    "pow": (lambda x: x ** 3, {}),
    "lt": (lambda x, bias: np.where(x < bias, x, bias), {"bias": "col"}),
    "le": (lambda x, r: np.where(x <= r, 1.0, x), {"r": "row"}),
    "gt": (lambda x: np.where(x > 0.25, x, 0.0), {}),
    "ge": (lambda x, m: np.where(x >= m, m, -x), {"m": "matrix"}),
    "eq": (lambda x, row, col: np.where(row == col, x, 0.5 * x), {}),
    "ne": (lambda x, row, col: np.where(row != col, x, 3.0), {}),
    "and_or": (lambda x, bias: np.where(((x > 0) & (bias > 0)) | (x < -1), x, 0.0), {"bias": "col"}),
    "cast_float16": (lambda x: x.astype(np.float16) * 3, {}),
    "cast_bfloat16": (lambda x: x.astype(ml_dtypes.bfloat16) * 3, {}),
    "cast_float64_bool": (lambda x: np.where(x.astype(bool), x.astype(np.float64), 7.0), {}),
    "index_batch": (lambda x, batch, row: x + batch + 0.01 * row, {}),
}


def case_inputs(kinds, shape, dtype, rng):
    """Fresh random inputs of the given kinds for a (batch, m, n) result."""
    batch, m, n = shape
    made = {}
    for name, kind in kinds.items():
        if kind == "scalar":
            made[name] = float(rng.uniform(0.5, 2.0))
        elif kind == "col":
            made[name] = rng.standard_normal(n).astype(dtype)
        elif kind == "row":
            made[name] = rng.standard_normal((m, 1)).astype(dtype)
        else:
            made[name] = rng.standard_normal((batch, m, n)).astype(dtype)
    return made


def traced(case):
    fn, kinds = OP_CASES[case]
    return trace(fn, kinds), kinds


def _nvrtc_missing() -> str | None:
    from nvmathpy.errors import MissingDependencyError

    try:
        from nvmathpy.cuda.bindings.nvrtc import version

        version()
    except (MissingDependencyError, OSError) as exc:
        return f"NVRTC is not installed ({exc})"
    return None


#: Marks tests that compile with NVRTC (the CUDA 13 wheels, extra ``cu13-libs``).
needs_nvrtc = pytest.mark.skipif(_nvrtc_missing() is not None, reason=str(_nvrtc_missing()))
#: Marks tests that build the CPU emulation with g++.
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed to run kernels under emulation")
