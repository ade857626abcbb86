"""Whole small ``cho_solve`` / ``lu_solve`` / ``solve`` / ``lu`` / ``cholesky`` /
``solve_triangular`` / ``qr`` / ``svd`` calls in one C function each.

For small matrices the cost of :func:`scipy.linalg.cho_solve` and friends is Python and f2py
overhead, not arithmetic (and for larger ones that overhead is still paid on every call, which
one C call per function avoids as well, calling the same LAPACK routines); the scipy.linalg drop-in and the factored solves of the
LU and Cholesky plans use this module to avoid it. This module holds the C source of a small CPython
extension (compiled at run time by :func:`nvmathpy.kernels.cpu_jit.compile_extension`, cached
on disk) whose functions validate the operands, scan them for NaN/Inf, allocate the result
and call SciPy's own LAPACK (the function pointers of :mod:`scipy.linalg.cython_lapack`)
in a single call. Operands the C side does not handle (other types, dtypes, layouts, sizes)
make it return ``NotImplemented`` so the callers fall back to their Python paths; without a
C compiler or Python's headers (or with ``NVMATHPY_CPU_JIT=off``) :func:`fast_module` is
``None`` and only the Python paths run.

All four LAPACK dtypes share one copy of each function: the element size and real type are
looked up per dtype (``s``, ``d``, ``c``, ``z``), and LAPACK is called through a table of
function pointers filled once by ``set_lapack``. The C source is kept by function group in
:mod:`._fast_c_base` (shared helpers, the pointer table), :mod:`._fast_c_solve`,
:mod:`._fast_c_inverse`, :mod:`._fast_c_factor`, :mod:`._fast_c_svd` and :mod:`._fast_c_expm`; this module
assembles and loads it (:class:`~nvmathpy.kernels.background_build.BackgroundExtension`).

Examples
--------
>>> import numpy as np
>>> fast = fast_module(wait=True)
>>> fast is None or fast.cho_solve(np.asfortranarray([[2.0]]), np.array([4.0]), False, True).tolist() == [1.0]
True
"""

from __future__ import annotations

import types

from ....kernels.background_build import BackgroundExtension

from . import _fast_c_base, _fast_c_expm, _fast_c_factor, _fast_c_inverse, _fast_c_solve, _fast_c_svd
from ._calibrate import COVERED_TO

__all__ = ["SOURCE", "MODULE_NAME", "MAX_ORDER", "LU_MAX_ORDER", "fast_module", "reset"]

MODULE_NAME = "_nvmathpy_fast_lapack"
#: The largest order the compiled ``lu_solve`` takes (larger ones are declined).
MAX_ORDER = 64
#: The largest row or column count the compiled ``lu``, ``solve_gen``, ``cholesky`` and
#: ``cho_solve`` take: the largest order calibration covers (:data:`._calibrate.COVERED_TO`;
#: beyond it the built-in choice is NumPy's pool). They run SciPy's own ``getrf``/``potrf``/
#: ``potrs``: the scipy.linalg drop-in calls them where its routine is SciPy's
#: (:func:`nvmathpy.linalg.lapack.scipys`).
LU_MAX_ORDER = COVERED_TO

_PARTS = (_fast_c_base, _fast_c_solve, _fast_c_inverse, _fast_c_factor, _fast_c_svd, _fast_c_expm)

#: The extension's C source: the shared part, then each function group, then the method table.
SOURCE = ("".join(part.SOURCE for part in _PARTS) + """
static PyMethodDef methods[] = {""" + "".join(part.METHODS for part in _PARTS) + r"""    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "@MODULE@", NULL, -1, methods};

PyMODINIT_FUNC PyInit_@MODULE@(void) {
    import_array();
    return PyModule_Create(&module);
}
""").replace("@MODULE@", MODULE_NAME).replace("@MAXN@", str(MAX_ORDER)).replace("@LU_MAXN@", str(LU_MAX_ORDER))


def _set_up(module: types.ModuleType) -> None:
    """Install SciPy's LAPACK and BLAS function pointers in the loaded extension."""
    from scipy.linalg import cython_blas, cython_lapack

    module.set_lapack(cython_lapack.__pyx_capi__)
    module.set_expm(cython_blas.__pyx_capi__, cython_lapack.__pyx_capi__)


_EXTENSION = BackgroundExtension(MODULE_NAME, SOURCE, _set_up)


#: ``fast_module(wait=False)``: the compiled extension with SciPy's LAPACK installed, or ``None``
#: (never raises) - while it is compiled on a background thread at first use (about a second;
#: callers take their Python paths meanwhile), and for good where it cannot be built (no C
#: compiler or ``Python.h``, ``NVMATHPY_CPU_JIT=off``); ``wait=True`` waits for a build in
#: progress. The bound method itself: small calls look it up on every call.
fast_module = _EXTENSION.get


def reset() -> None:
    """Forget the extension: the next :func:`fast_module` loads or builds it again (for tests
    that change the environment)."""
    _EXTENSION.reset()
