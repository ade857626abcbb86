"""The GPU stack: library loading and ctypes bindings for the CUDA libraries (loaded lazily).

Importing this package loads no CUDA library and imports neither CuPy nor any binding; each
name below is imported on first access, and each library is loaded when first called.

- :func:`cuda_status` / :func:`require_cuda`: whether CUDA can be used, and the one clear error
  raised when it cannot (``nvmathpy.cuda.driver``).
- :func:`load_library`: a CUDA library through cuda-pathfinder (``nvmathpy.cuda.loader``).
- :func:`library_info` / :func:`all_library_info`: where each library came from, and its version.
- :func:`compile_cuda` / :func:`link`: NVRTC and nvJitLink (``nvmathpy.cuda.nvrtc``,
  ``nvmathpy.cuda.jitlink``).
- ``nvmathpy.cuda.bindings``: one module per library (cuBLASLt, cuBLAS, cuFFT, cuSOLVER, NVRTC,
  nvJitLink, CUDA runtime), each declared from its header through ``nvmathpy.cuda.ffi``.
"""

from __future__ import annotations

import importlib
from typing import Any

_ATTRIBUTES = {
    "CudaStatus": "driver",
    "cuda_status": "driver",
    "require_cuda": "driver",
    "LoadedLibrary": "loader",
    "load_library": "loader",
    "LibraryInfo": "info",
    "library_info": "info",
    "all_library_info": "info",
    "Compiled": "nvrtc",
    "compile_cuda": "nvrtc",
    "ptxas_resources": "nvrtc",
    "link": "jitlink",
}

__all__ = sorted(_ATTRIBUTES)


def __getattr__(name: str) -> Any:
    if name in _ATTRIBUTES:
        module = importlib.import_module(f"{__name__}.{_ATTRIBUTES[name]}")
        return getattr(module, name)
    raise AttributeError(f"module 'nvmathpy.cuda' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
