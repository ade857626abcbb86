"""``eigh`` and ``eigvalsh`` with SciPy 1.17's signatures, results and errors: the standard and
generalized Hermitian eigenproblems through nvmathpy's plans (``driver=None`` uses the driver
that wisdom/autotune measured fastest), and a subset of one matrix's eigenpairs as SciPy's own
``?syevr``/``?heevr`` call (the same bits, without SciPy's per-call overhead).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ... import linalg as nl
from ._eig import lapack_lwork
from ._validate import LinAlgError, as_array, lapack_one, to_caller_of

__all__ = ["eigh", "eigvalsh"]

_EIGH_DRIVERS = (None, "ev", "evd", "evr", "evx", "gv", "gvd", "gvx")


def eigh(a: Any, b: Any = None, *, lower: bool = True, eigvals_only: bool = False, overwrite_a: bool = False,
         overwrite_b: bool = False, type: int = 1, check_finite: bool = True, subset_by_index: Any = None,
         subset_by_value: Any = None, driver: str | None = None) -> Any:
    """Hermitian eigenproblems as :func:`scipy.linalg.eigh` (standard or generalized, subsets).

    ``driver=None`` uses the driver wisdom/autotune measured fastest (heuristic: ``evd`` for
    n > 32, ``ev`` below; ``evr`` for subsets; ``gvd``/``gvx`` for generalized problems)
    instead of SciPy's fixed ``evr``; every driver returns the same eigenpairs to rounding.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import eigh
    >>> w, v = eigh(np.array([[2.0, 1.0], [1.0, 2.0]]))
    >>> w
    array([1., 3.])
    """
    if driver not in _EIGH_DRIVERS:
        known = '", "'.join(_EIGH_DRIVERS[1:])
        raise ValueError(f'"{driver}" is unknown. Possible values are "None", "{known}".')
    a1 = as_array(a, check_finite, "a")
    convert = to_caller_of(a)
    if a1.ndim < 2 or a1.shape[-1] != a1.shape[-2]:
        raise ValueError('expected square "a" matrix')
    b1 = None
    if b is not None:
        b1 = as_array(b, check_finite, "b")
        if b1.ndim < 2 or b1.shape[-1] != b1.shape[-2]:
            raise ValueError('expected square "b" matrix')
        if b1.shape[-2:] != a1.shape[-2:]:
            raise ValueError(f"wrong b dimensions {b1.shape}, should be {a1.shape}")
        if type not in (1, 2, 3):
            raise ValueError('"type" keyword only accepts 1, 2, and 3.')
    if a1.ndim > 2 and 0 in a1.shape[:-2]:
        raise ValueError(f"`{'eigvalsh' if eigvals_only else 'eigh'}` does not support zero-size batches.")
    n = a1.shape[-1]
    subset = subset_by_index is not None or subset_by_value is not None
    if subset_by_index is not None and subset_by_value is not None:
        raise ValueError("Either index or value subset can be requested.")
    if subset_by_index is not None:
        lo, hi = (int(x) for x in subset_by_index)
        if not 0 <= lo <= hi < n:
            raise ValueError("Requested eigenvalue indices are not valid. "
                             f"Valid range is [0, {n - 1}] and start <= end, but start={lo}, end={hi} is given")
    if subset_by_value is not None:
        lo, hi = subset_by_value
        if not -np.inf <= lo < hi <= np.inf:
            raise ValueError("Requested eigenvalue bounds are not valid. Valid range is (-inf, inf) and low < high, "
                             f"but low={lo}, high={hi} is given")
    if driver:
        if b is None and driver in ("gv", "gvd", "gvx"):
            raise ValueError(f"{driver} requires input b array to be supplied for generalized eigenvalue problems.")
        if b is not None and driver in ("ev", "evd", "evr", "evx"):
            raise ValueError(f'"{driver}" does not accept input b array for standard eigenvalue problems.')
        if subset and driver in ("ev", "evd", "gv", "gvd"):
            raise ValueError(f'"{driver}" cannot compute subsets of eigenvalues')
    dtype = lapack_one(a1.dtype if b1 is None else np.result_type(a1.dtype, b1.dtype))
    a1 = a1.astype(dtype, copy=False)
    if b1 is not None:
        b1 = b1.astype(dtype, copy=False)
        batch = np.broadcast_shapes(a1.shape[:-2], b1.shape[:-2])
        a1, b1 = np.broadcast_to(a1, batch + a1.shape[-2:]), np.broadcast_to(b1, batch + b1.shape[-2:])
    if n == 0:
        w = np.empty(a1.shape[:-1], np.finfo(dtype).dtype)
        return convert(w if eigvals_only else (w, np.empty(a1.shape, dtype)))
    if subset and b1 is None and a1.ndim == 2 and driver in (None, "evr"):
        return convert(_evr_subset(a1, lower, eigvals_only, subset_by_index, subset_by_value))
    sbi = None if subset_by_index is None else tuple(int(x) for x in subset_by_index)
    sbv = None if subset_by_value is None else tuple(float(x) for x in subset_by_value)
    solver = nl.eigvalsh if eigvals_only else nl.eigh
    try:  # SciPy ignores type without b
        out = solver(a1, "L" if lower else "U", b=b1, itype=type if b1 is not None else 1, subset_by_index=sbi,
                     subset_by_value=sbv, driver=driver)
    except LinAlgError as exc:
        raise LinAlgError(str(exc)) from None
    return convert(out if eigvals_only else list(out) if a1.ndim > 2 else tuple(out))  # SciPy: a list for a batch


@functools.lru_cache(maxsize=256)
def _evr(char: str, n: int, lower: bool) -> tuple[Any, dict[str, int]]:
    """SciPy's ``?syevr``/``?heevr`` of dtype ``char`` and the workspace sizes it asks LAPACK
    for at order ``n``, as keyword arguments."""
    from scipy.linalg.lapack import get_lapack_funcs

    prefix = "he" if char in "FD" else "sy"
    driver, query = get_lapack_funcs((prefix + "evr", prefix + "evr_lwork"), dtype=np.dtype(char))
    *sizes, info = query(n=n, lower=int(lower))
    if info != 0:
        raise ValueError(f"Internal work array size computation failed: {info}")
    names = ("lwork", "lrwork", "liwork") if prefix == "he" else ("lwork", "liwork")
    return driver, {name: lapack_lwork(size, char) for name, size in zip(names, sizes)}


def _evr_subset(a: np.ndarray, lower: bool, eigvals_only: bool, by_index: Any, by_value: Any) -> Any:
    """SciPy's own call for a subset of the eigenpairs of one Hermitian matrix ``a`` (a LAPACK
    dtype; the subset checked): ``?syevr``/``?heevr`` with its workspace, looked up once per
    dtype and order, so the result is SciPy's bit for bit, without its per-call overhead."""
    driver, workspace = _evr(a.dtype.char, a.shape[0], bool(lower))
    if by_index is not None:
        lo, hi = (int(x) for x in by_index)
        subset = {"range": "I", "il": lo + 1, "iu": hi + 1}
    else:
        lo, hi = by_value
        subset = {"range": "V", "vl": lo, "vu": hi}
    w, v, m, *_, info = driver(a=a, compute_v=0 if eigvals_only else 1, lower=int(lower), **subset, **workspace)
    if info < -1:
        routine = ("he" if a.dtype.char in "FD" else "sy") + "evr"
        raise LinAlgError(f"Illegal value in argument {-info} of internal {driver.typecode}{routine}")
    if info != 0:
        raise LinAlgError("Internal Error.")
    return w[:m] if eigvals_only else (w[:m], v[:, :m])


def eigvalsh(a: Any, b: Any = None, *, lower: bool = True, overwrite_a: bool = False, overwrite_b: bool = False,
             type: int = 1, check_finite: bool = True, subset_by_index: Any = None, subset_by_value: Any = None,
             driver: str | None = None) -> Any:
    """Eigenvalues only, as :func:`scipy.linalg.eigvalsh`.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import eigvalsh
    >>> eigvalsh(np.array([[2.0, 1.0], [1.0, 2.0]]))
    array([1., 3.])
    """
    return eigh(a, b, lower=lower, eigvals_only=True, overwrite_a=overwrite_a, overwrite_b=overwrite_b, type=type,
                check_finite=check_finite, subset_by_index=subset_by_index, subset_by_value=subset_by_value,
                driver=driver)
