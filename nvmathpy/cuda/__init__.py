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

from .._lazy import lazy_getattr

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
__getattr__ = lazy_getattr(__name__, _ATTRIBUTES)


def __dir__() -> list[str]:
    return sorted(__all__)
