"""NumPy's OpenBLAS routines for one matrix order: nvmathpy's own factorizations there
(recursive and look-ahead LU, look-ahead Cholesky) in their order of preference - the
calibrated first choice of this machine (:mod:`._calibrate`) where there is one, else the
built-in order - and the plain LAPACK routine of :mod:`._numpy_lapack` for everything else.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import _numpy_lapack as numpy_lapack
from ._calibrate import first_choice, reorder
from ._lookahead_cholesky import potrf_of, potrf_order
from ._lookahead_lu import getrf_of, getrf_order

__all__ = ["ALGORITHMS", "FACTOR_OF", "SCIPY", "for_order"]

#: The first choice that keeps SciPy's own routine (where this machine's calibration says it is
#: the fastest).
SCIPY = "scipy"


def _calibrated(kind: str, built_in: Callable[[int, Any], list]) -> Callable[[int, Any], list]:
    def order(n: int, dtype: Any) -> list:
        return reorder(kind, n, dtype, built_in(n, dtype))

    order.__doc__ = f"{built_in.__name__}'s algorithms, the calibrated first choice first."
    return order


#: The factorizations with algorithms of nvmathpy's own on NumPy's OpenBLAS: their orders
#: (first choice first) and the routine of each.
ALGORITHMS = {"getrf": (_calibrated("getrf", getrf_order), getrf_of),
              "potrf": (_calibrated("potrf", potrf_order), potrf_of)}


#: The factorization whose choice each solve follows: the factors' solve runs on the pool
#: that made them (a ``getrs`` alone, as ``lu_solve`` asks for it, goes where ``getrf`` goes).
FACTOR_OF = {"getrs": "getrf", "potrs": "potrf"}


def for_order(n: int, dtype: np.dtype, *names: str) -> tuple[Callable[..., Any], ...] | None:
    """NumPy's routines ``names`` for matrices of order ``n`` when :func:`._numpy_lapack.suits`,
    else ``None`` (the caller keeps SciPy's; so too when the first choice of a factorization
    named, or of the one a solve named follows (:data:`FACTOR_OF`), is :data:`SCIPY`).
    ``getrf`` and ``potrf`` are the first choices of :data:`ALGORITHMS`' orders."""
    kinds = {FACTOR_OF.get(name, name) for name in names} & ALGORITHMS.keys()
    calibrated = {}
    for kind in kinds:
        calibrated[kind] = first_choice(kind, n, dtype)
        if calibrated[kind] == (True, SCIPY):
            return None  # SciPy's, known without looking for NumPy's library (a first call's cost)
    if not numpy_lapack.suits(n, dtype, *names):
        return None
    # OpenBLAS's own routine (None) calibrated first is in every built-in order: taken without
    # building that order, which asks which of nvmathpy's drivers run here (a first call's cost)
    first = {kind: None if calibrated[kind] == (True, None) else ALGORITHMS[kind][0](n, dtype)[0] for kind in kinds}
    if SCIPY in first.values():
        return None
    return tuple(ALGORITHMS[name][1](first[name], dtype) if name in first
                 else numpy_lapack.routines(dtype, name)[0] for name in names)
