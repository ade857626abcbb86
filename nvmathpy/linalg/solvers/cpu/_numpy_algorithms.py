"""NumPy's OpenBLAS routines for one matrix order: nvmathpy's own factorizations there
(recursive and look-ahead LU, look-ahead Cholesky) in their order of preference, and the
plain LAPACK routine of :mod:`._numpy_lapack` for everything else.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import _numpy_lapack as numpy_lapack
from ._lookahead_cholesky import potrf_of, potrf_order
from ._lookahead_lu import getrf_of, getrf_order

__all__ = ["ALGORITHMS", "for_order"]

#: The factorizations with algorithms of nvmathpy's own on NumPy's OpenBLAS: their orders
#: (first choice first) and the routine of each.
ALGORITHMS = {"getrf": (getrf_order, getrf_of), "potrf": (potrf_order, potrf_of)}


def for_order(n: int, dtype: np.dtype, *names: str) -> tuple[Callable[..., Any], ...] | None:
    """NumPy's routines ``names`` for matrices of order ``n`` when :func:`._numpy_lapack.suits`,
    else ``None`` (the caller keeps SciPy's). ``getrf`` and ``potrf`` are the first choices of
    :func:`._lookahead_lu.getrf_order` and :func:`._lookahead_cholesky.potrf_order`."""
    if not numpy_lapack.suits(n, dtype, *names):
        return None
    return tuple(ALGORITHMS[name][1](ALGORITHMS[name][0](n, dtype)[0], dtype) if name in ALGORITHMS
                 else numpy_lapack.routines(dtype, name)[0] for name in names)
