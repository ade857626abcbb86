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

from ._lazy import lazy_getattr
from ._version import __version__

_SUBMODULES = (
    "linalg", "fft", "scipy", "errors", "plan", "operands", "execution", "cuda", "kernels", "torch", "dask", "bench",
)
_NAMES = {
    **{name: name for name in _SUBMODULES},
    "ExecutionCPU": "execution",
    "ExecutionCUDA": "execution",
    **{name: "patching" for name in ("patch", "unpatch", "patched", "patched_namespaces")},
}

__all__ = ["__version__", *sorted(_NAMES)]
__getattr__ = lazy_getattr(__name__, _NAMES)


def __dir__() -> list[str]:
    return sorted(__all__)
