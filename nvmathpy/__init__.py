"""nvmathpy: one Python front for the fastest math libraries.

Matrix products with fused epilogues, FFTs and dense solvers, planned once (choosing and
tuning among algorithms, remembering the winner on disk) and executed many times with almost
no overhead, on the CPU (BLAS/LAPACK/FFT libraries) or on NVIDIA GPUs.

Importing this package is cheap: the subpackages and NumPy are loaded on first use, and SciPy,
CuPy and PyTorch only when an operation needs them.

Examples
--------
>>> import numpy as np
>>> import nvmathpy
>>> a = np.ones((3, 4), dtype=np.float32); b = np.ones((4, 2), dtype=np.float32)
>>> nvmathpy.linalg.matmul(a, b, epilogue="relu").tolist()
[[4.0, 4.0], [4.0, 4.0], [4.0, 4.0]]
"""

from __future__ import annotations

import importlib
from typing import Any

from ._version import __version__

_SUBMODULES = {
    "linalg", "fft", "scipy", "errors", "plan", "operands", "execution", "cuda", "kernels", "torch", "dask", "bench",
}
_ATTRIBUTES = {
    "ExecutionCPU": "execution",
    "ExecutionCUDA": "execution",
}

__all__ = ["__version__", "ExecutionCPU", "ExecutionCUDA", *sorted(_SUBMODULES)]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _ATTRIBUTES:
        module = importlib.import_module(f"{__name__}.{_ATTRIBUTES[name]}")
        return getattr(module, name)
    raise AttributeError(f"module 'nvmathpy' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
