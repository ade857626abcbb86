"""The matrix exponential with SciPy 1.17's signature, results and errors: ``expm``.

SciPy's algorithm (Al-Mohy and Higham's scaling and squaring, Padé degrees 3 to 13 chosen as
SciPy chooses them, diagonal and triangular matrices as SciPy treats them) runs whole in one
call of the compiled extension (:func:`nvmathpy.linalg.lapack.fast_module`), batches
included, with SciPy's own BLAS and LAPACK: no per-matrix Python work. Square NumPy operands of
order 2 or more take it (integers as ``float64``, ``float16`` as ``float32``, as SciPy casts
them); everything else - scalars, 1 x 1 and empty matrices, non-square or 1-D input and its
errors, non-finite entries, other dtypes, or no compiled extension - is SciPy's own function.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...linalg.lapack import fast_module
from ._validate import refuse_cuda, scipy_own

__all__ = ["expm"]


def expm(A: Any) -> Any:
    """The matrix exponential of ``A`` as :func:`scipy.linalg.expm`.

    Parameters
    ----------
    A
        Square matrix ``(n, n)`` or a batch ``(..., n, n)``.

    Returns
    -------
    numpy.ndarray
        ``exp(A)``, of ``A``'s shape; ``float64`` for integer input, ``float32`` for
        ``float16``, else ``A``'s dtype.

    Raises
    ------
    numpy.linalg.LinAlgError
        ``A`` is 1-D (and not a single number) or its last two dimensions differ.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import expm
    >>> np.allclose(expm(np.array([[0.0, 1.0], [0.0, 0.0]])), [[1.0, 1.0], [0.0, 1.0]])
    True
    """
    if type(A) is not np.ndarray:
        refuse_cuda("expm", A)
    a = np.asarray(A)
    shape = a.shape
    if len(shape) >= 2 and shape[-1] == shape[-2] and shape[-1] >= 2 and a.size:
        kind = a.dtype.kind
        if kind in "biu":
            a = a.astype(np.float64)
        elif a.dtype == np.float16:
            a = a.astype(np.float32)
        fast = fast_module()
        if fast is not None:
            result = fast.expm(a)
            if result is not NotImplemented:
                return result
    return scipy_own("_matfuncs", "expm")(A)
