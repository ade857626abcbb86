"""Find and load the CUDA libraries from the NVIDIA wheels, once each, on first use.

Every library goes through ``cuda.pathfinder.load_nvidia_dynamic_lib`` (never a bare soname or
``LD_LIBRARY_PATH``), which looks in the installed NVIDIA wheels first, then conda, then the
system. CUDA 12 and CUDA 13 wheels use different sonames (and, for cuFFT and cuSOLVER, library
majors that differ from the toolkit's), so each loaded library records the CUDA major it belongs
to; bindings use it to pick the symbol names that changed between majors.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
from dataclasses import dataclass

from ..errors import MissingDependencyError

__all__ = ["INSTALL_HINT", "LIBRARIES", "LoadedLibrary", "load_library"]

INSTALL_HINT = "pip install 'nvmathpy[cu13]' (or 'nvmathpy[cu12]' for a CUDA 12 driver)"

# pathfinder name -> {soname major: CUDA toolkit major}
LIBRARIES: dict[str, dict[int, int]] = {
    "cudart": {12: 12, 13: 13},
    "cublasLt": {12: 12, 13: 13},
    "cublas": {12: 12, 13: 13},
    "cufft": {11: 12, 12: 13},
    "cusolver": {11: 12, 12: 13},
    "nvrtc": {12: 12, 13: 13},
    "nvJitLink": {12: 12, 13: 13},
}

_SONAME_MAJOR = re.compile(r"\.so\.(\d+)")


@dataclass(frozen=True)
class LoadedLibrary:
    """A CUDA library loaded into this process.

    Attributes
    ----------
    name : str
        The cuda-pathfinder name (``"cublasLt"``, ``"cufft"``, ...).
    path : str
        Absolute path of the shared object that was loaded.
    cuda_major : int
        The CUDA toolkit major version (12 or 13) the library belongs to.
    cdll : ctypes.CDLL
        The library, for resolving symbols.
    """

    name: str
    path: str
    cuda_major: int
    cdll: ctypes.CDLL


@functools.cache
def load_library(name: str) -> LoadedLibrary:
    """Load one CUDA library through cuda-pathfinder (cached: later calls return the same object).

    Parameters
    ----------
    name : str
        One of the keys of :data:`LIBRARIES`.

    Returns
    -------
    LoadedLibrary

    Raises
    ------
    MissingDependencyError
        If cuda-pathfinder or the library's wheel is not installed, or the library found belongs
        to a CUDA major other than 12 or 13. The message names the extra to install.
    """
    if name not in LIBRARIES:
        raise ValueError(f"unknown CUDA library {name!r}; known: {sorted(LIBRARIES)}")
    try:
        from cuda.pathfinder import DynamicLibNotFoundError, load_nvidia_dynamic_lib
    except ImportError as exc:
        raise MissingDependencyError(f"cuda-pathfinder is not installed: {INSTALL_HINT}") from exc
    try:
        found = load_nvidia_dynamic_lib(name)
    except (DynamicLibNotFoundError, RuntimeError) as exc:
        raise MissingDependencyError(f"CUDA library {name} not found ({exc}): {INSTALL_HINT}") from exc
    path = found.abs_path or name
    match = _SONAME_MAJOR.search(os.path.basename(path))
    cuda_major = LIBRARIES[name].get(int(match.group(1))) if match else None
    if cuda_major is None:
        raise MissingDependencyError(f"{path} is not a CUDA 12 or 13 build of {name}: {INSTALL_HINT}")
    return LoadedLibrary(name, path, cuda_major, ctypes.CDLL(path, handle=found._handle_uint))
