"""A CPython extension compiled on a background thread the first time it is asked for.

Compiled extensions (:func:`.cpu_jit.compile_extension`) speed up calls that have a pure
Python or NumPy route too, so no call should wait for the compiler: the first request loads
the extension from the disk cache (milliseconds) or, when it is not built yet, starts the
build on a daemon thread and answers ``None`` until the build is done. Where it cannot be
built (no C compiler or ``Python.h``, ``NVMATHPY_CPU_JIT=off``) or its set-up fails, the
answer stays ``None`` for good.
"""

from __future__ import annotations

import threading
import types
from typing import Callable

__all__ = ["BackgroundExtension"]


class BackgroundExtension:
    """The extension ``name`` built from the C ``source``, loaded once per process.

    ``setup(module)``, run once after loading, installs what the extension needs from Python
    (function pointers, tables); an exception there (or in the build) leaves the extension
    unavailable.

    Examples
    --------
    >>> src = (
    ...     "#include <Python.h>\\n"
    ...     "static PyObject *half(PyObject *self, PyObject *x) {\\n"
    ...     "    return PyFloat_FromDouble(PyFloat_AsDouble(x) / 2);\\n}\\n"
    ...     "static PyMethodDef methods[] = {{\\"half\\", half, METH_O, NULL}, {NULL, NULL, 0, NULL}};\\n"
    ...     "static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, \\"doc_half\\", NULL, -1, methods};\\n"
    ...     "PyMODINIT_FUNC PyInit_doc_half(void) { return PyModule_Create(&def); }\\n")
    >>> extension = BackgroundExtension("doc_half", src)
    >>> module = extension.get(wait=True)
    >>> module is None or module.half(3.0) == 1.5
    True
    """

    def __init__(self, name: str, source: str, setup: Callable[[types.ModuleType], None] | None = None) -> None:
        self.name, self.source, self.setup = name, source, setup
        self._lock = threading.Lock()
        self._module: types.ModuleType | None = None
        self._settled = False  # whether _module is final (loaded, or known to be unavailable)
        self._builder: threading.Thread | None = None

    def get(self, wait: bool = False) -> types.ModuleType | None:
        """The loaded extension, or ``None`` while it is being built (``wait=True``: wait for a
        build in progress) and for good where it cannot be built. Never raises."""
        if self._settled:
            return self._module
        with self._lock:
            if not self._settled and self._builder is None and not self._install(build=False):
                self._builder = threading.Thread(target=self._install, kwargs={"build": True},
                                                 name=f"nvmathpy-build-{self.name}", daemon=True)
                self._builder.start()
            builder = self._builder
        if wait and builder is not None:
            builder.join()
        return self._module

    def _install(self, build: bool) -> bool:
        """Load (``build=False``: only from the cache) or build the extension; ``False`` when it
        is not built yet, else settle the module (loaded, or ``None`` on any failure)."""
        try:
            from .cpu_jit import compile_extension

            module = compile_extension(self.name, self.source, build=build)
            if module is None:
                return False
            if self.setup is not None:
                self.setup(module)
        except Exception:  # noqa: BLE001 - a speed-up only: any failure means the other routes
            module = None
        self._module, self._settled = module, True
        return True

    def reset(self) -> None:
        """Forget the extension: the next :meth:`get` loads or builds it again (for tests that
        change the environment)."""
        with self._lock:
            if self._builder is not None:
                self._builder.join()
            self._module, self._settled, self._builder = None, False, None
