"""The compiled CPU epilogue backend: an epilogue's steps as one generated C loop.

Where a C compiler is available (:func:`nvmathpy.kernels.cpu_jit.available`), the steps of a
2-D real epilogue are emitted by :mod:`nvmathpy.kernels.emit_c`, compiled once (cached on
disk) and called through :mod:`ctypes` (which releases the GIL): every element is read once,
every step runs in SIMD registers (``exp``, ``tanh``, ``erf`` through libmvec), and the result
and aux outputs are written once, where the cache-blocked NumPy ufunc chain makes a pass per
step (``benchmarks/bench_matmul.py`` compares them).
"""

from __future__ import annotations

import ctypes
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping, Sequence

import numpy as np

from ....kernels import cpu_jit
from ....kernels.emit_c import C_TYPES, elementwise_source
from ....kernels.ir import COMPARE, LOGICAL, Expr, walk
from ._program import Program

__all__ = ["c_available", "c_supports", "compile_c_program", "input_pattern"]


def c_available() -> bool:
    """Whether compiled epilogues can be built here."""
    return cpu_jit.available()


def c_supports(steps: Sequence[tuple[str, Expr]]) -> bool:
    """Whether the C backend can run ``steps`` (no float16/bfloat16 casts inside)."""
    return not any(node.op == "cast" and node.kind in ("float16", "bfloat16")
                   for _, expr in steps for node in walk(expr))


def input_pattern(shape: Sequence[int], rows: int, cols: int) -> str:
    """How an input of ``shape`` broadcasts against a ``(rows, cols)`` result: ``"scalar"``,
    ``"col"`` (one value per column), ``"row"`` (one per row) or ``"matrix"``."""
    shape = tuple(shape)[-2:]
    shape = (1,) * (2 - len(shape)) + shape
    per_row = shape[0] == rows and rows != 1
    per_col = shape[1] == cols and cols != 1
    return {(False, False): "scalar", (False, True): "col", (True, False): "row"}.get((per_row, per_col), "matrix")


def _boolean(expr: Expr) -> bool:
    return expr.op in COMPARE + LOGICAL + ("not",) or (expr.op == "cast" and expr.kind == "bool")


def compile_c_program(
    steps: Sequence[tuple[str, Expr]],
    *,
    outputs: Sequence[str],
    compute_dtype: np.dtype,
    input_dtypes: Mapping[str, np.dtype],
    input_patterns: Mapping[str, str],
    workers: int = 1,
    pool: ThreadPoolExecutor | None = None,
) -> Any:
    """A :class:`~._program.Program` running ``steps`` (normalised: the
    last step writes ``d``, the working buffer) as one compiled loop, over ``workers`` row
    bands in ``pool`` when ``workers > 1``.

    Raises
    ------
    MissingDependencyError
        If the kernel cannot be compiled here.
    """
    compute = np.dtype(compute_dtype).name
    output_types = {target: ("bool" if _boolean(expr) else compute) for target, expr in steps
                    if target == "d" or target in outputs}
    inputs = {}
    for name, pattern in input_patterns.items():
        dtype = np.dtype(input_dtypes.get(name) or compute_dtype).name
        inputs[name] = (dtype if dtype in C_TYPES else compute, pattern)  # others are converted per call
    source, layout = elementwise_source(steps, outputs=outputs, compute=compute, inputs=inputs,
                                        output_types=output_types)
    kernel = cpu_jit.compile_c(source).nvm_elementwise
    kernel.restype = None
    kernel.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]
    arrays = layout.arrays
    dtypes = [np.dtype(_NP_OF[storage]) for _, _, storage, _ in arrays]
    count = len(arrays)

    def operands(env: Mapping[str, Any]) -> list[np.ndarray]:
        """The arrays in kernel order: 2-D, rows contiguous, in the compiled dtypes (inputs
        converted or made contiguous when they are not; the result and aux outputs always are)."""
        ready: list[np.ndarray] = []
        for (name, role, _, pattern), dtype in zip(arrays, dtypes):
            arr = env[name]
            if role == "in" and pattern in ("scalar", "col"):
                arr = np.ascontiguousarray(arr, dtype).reshape(-1)
            elif role == "in":
                arr = np.asarray(arr, dtype)
                arr = arr.reshape(arr.shape[-2:]) if arr.ndim > 2 else arr
                if arr.strides[0] % dtype.itemsize or (pattern == "matrix" and arr.strides[1] != dtype.itemsize):
                    arr = np.ascontiguousarray(arr)
            ready.append(arr)
        return ready

    def launch(ready: list[np.ndarray], lo: int, hi: int) -> None:
        pointers = (ctypes.c_void_p * count)()
        strides = (ctypes.c_int64 * count)()
        for k, ((_, role, _, pattern), arr) in enumerate(zip(arrays, ready)):
            banded = role != "in" or pattern in ("row", "matrix")
            step = arr.strides[0] // arr.itemsize if arr.ndim == 2 else 0
            strides[k] = step
            pointers[k] = arr.ctypes.data + (lo * step * arr.itemsize if banded else 0)
        kernel(hi - lo, ready[0].shape[1], lo, pointers, strides)

    def run(env: dict, scratch: Sequence[np.ndarray]) -> None:
        ready = operands(env)
        rows = ready[0].shape[0]
        if workers > 1 and pool is not None and rows >= 2 * workers:
            band = -(-rows // workers)
            futures = [pool.submit(launch, ready, lo, min(rows, lo + band)) for lo in range(0, rows, band)]
            for future in futures:
                future.result()
        elif rows:
            launch(ready, 0, rows)

    return Program(run, ())


_NP_OF = {"float": np.float32, "double": np.float64, "bool": np.bool_}
