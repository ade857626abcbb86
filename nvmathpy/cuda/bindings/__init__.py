"""ctypes bindings of the CUDA libraries, one module each, declared from the vendor headers.

Each module holds the library's enums (``IntEnum``, values from the header), any structs it
passes by value or pointer, one declaration table wrapped in a :class:`~nvmathpy.cuda.ffi.Library`
named ``LIB``, and ``version()``. Importing a module loads nothing; the library is loaded when
the first function is called.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["MODULES", "binding_modules"]

MODULES = ("cudart", "cublaslt", "cublas", "cufft", "cusolver", "nvrtc", "nvjitlink")
"""Names of the binding modules in this package."""


def binding_modules() -> dict[str, ModuleType]:
    """Import every binding module (loading no library); key: the module's library name."""
    modules = (importlib.import_module(f"{__name__}.{name}") for name in MODULES)
    return {module.LIB.libname: module for module in modules}
