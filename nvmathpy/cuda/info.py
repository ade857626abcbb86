"""Which CUDA libraries this process uses: where each was loaded from, and its version.

For ``nvmathpy info`` and bug reports. Calling these loads the libraries.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import MissingDependencyError
from .bindings import binding_modules

__all__ = ["LibraryInfo", "all_library_info", "library_info"]


@dataclass(frozen=True)
class LibraryInfo:
    """One loaded library.

    Attributes
    ----------
    name : str
        cuda-pathfinder name, e.g. ``"cufft"``.
    path : str
        The shared object loaded.
    cuda_major : int
        CUDA toolkit major it belongs to.
    version : tuple[int, int, int]
        The library's own version (cuFFT and cuSOLVER count differently from the toolkit).
    """

    name: str
    path: str
    cuda_major: int
    version: tuple[int, int, int]


def library_info(name: str) -> LibraryInfo:
    """Load library ``name`` (e.g. ``"cublasLt"``) and report it.

    Raises
    ------
    MissingDependencyError
        If it is not installed.
    KeyError
        If nvmathpy has no binding named ``name``.
    """
    module = binding_modules()[name]
    loaded = module.LIB.loaded
    return LibraryInfo(name, loaded.path, loaded.cuda_major, module.version())


def all_library_info() -> dict[str, LibraryInfo | str]:
    """Report every library nvmathpy binds; a library that cannot be loaded maps to the reason."""
    report: dict[str, LibraryInfo | str] = {}
    for name in binding_modules():
        try:
            report[name] = library_info(name)
        except MissingDependencyError as exc:
            report[name] = str(exc)
    return report
