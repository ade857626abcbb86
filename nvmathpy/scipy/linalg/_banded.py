"""Banded solvers with SciPy 1.17's semantics: ``solve_banded`` (``?gtsv`` for one sub- and
one superdiagonal, ``?gbsv`` otherwise), ``solveh_banded`` (``?ptsv`` / ``?pbsv``),
``cholesky_banded`` (``?pbtrf``), ``cho_solve_banded`` (``?pbtrs``) and ``solve``'s
``assume_a='banded'`` (``?gbsv`` and ``?gbcon`` on the band SciPy reads off the matrix).

Each function does what SciPy's does, in the same order (validation, shape checks, the
empty case, the LAPACK call, the error for its ``info``), with SciPy's f2py routines looked
up once per dtype and cached: the same LAPACK calls on the same arrays, so the same results,
the same in-place effects of ``overwrite_*`` and the same exceptions, without SciPy's
per-call lookups and batch decorator. Stacks of bands are solved slice by slice, as SciPy's.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

import numpy as np

from ._validate import (
    LinAlgError, all_finite, as_array, caller_stacklevel, lapack_common, lapack_pair, linalg_warning, over_batch,
    refuse_cuda, to_caller_of,
)

__all__ = ["solve_banded", "solveh_banded", "cholesky_banded", "cho_solve_banded", "solve_assumed_banded",
           "lapack", "validated", "copied", "batched"]


@functools.lru_cache(maxsize=None)
def lapack(name: str, char: str) -> Any:
    """SciPy's f2py wrapper of LAPACK's ``name`` for the dtype ``char`` (looked up once)."""
    from scipy.linalg.lapack import get_lapack_funcs

    return get_lapack_funcs(name, dtype=np.dtype(char))


def validated(x: Any, check_finite: bool, inexact: bool = False) -> np.ndarray:
    """SciPy's ``_asarray_validated``: an array of ``x``; object and masked arrays are refused,
    and with ``check_finite`` NaN or infinity (``ValueError``); ``inexact``: integers in float64."""
    if type(x) is np.ndarray and x.dtype.char in "fdFD":  # the common call
        if check_finite and not all_finite(x):
            raise ValueError("array must not contain infs or NaNs")
        return x
    if np.ma.isMaskedArray(x):
        raise ValueError("masked arrays are not supported")
    if getattr(x, "dtype", None) == object or type(x) is not np.ndarray and np.asarray(x).dtype == object:
        raise ValueError("object arrays are not supported")
    arr = as_array(x, check_finite, any_dtype=True)
    if inexact and not np.issubdtype(arr.dtype, np.inexact):
        arr = arr.astype(np.float64)
    return arr


def copied(arr: np.ndarray, original: Any) -> bool:
    """SciPy's ``_datacopied``: ``arr`` (made from ``original``) shares no memory with it."""
    if arr is original:
        return False
    if not isinstance(original, np.ndarray) and hasattr(original, "__array__"):
        return False
    return arr.base is None


def batched(core: Callable[..., Any], operands: list[Any], core_ndims: list[int], name: str) -> Any:
    """``core`` applied to SciPy's batch slices of ``operands`` (``core_ndims`` per operand;
    ``-1`` for a right-hand side: 2 when it has two or more dimensions, else 1), as SciPy's
    ``_apply_over_batch`` does: errors keep their messages; ``name`` is what its error for
    zero-size batches names. Results come back in the first operand's package."""
    refuse_cuda(name.lstrip("_"), *operands)
    convert = to_caller_of(operands[0])
    arrays = [as_array(x, False, any_dtype=True) if type(x) is not np.ndarray else x for x in operands]
    ndims = [(2 if a.ndim >= 2 else 1) if d == -1 else d for a, d in zip(arrays, core_ndims)]
    return convert(over_batch(core, arrays, ndims, name, name_slice=False))


def _char(a1: np.ndarray, b1: np.ndarray) -> str:
    """The type character of SciPy's LAPACK routine for ``a1`` and ``b1`` (``get_lapack_funcs``' rule)."""
    if a1.dtype == b1.dtype and a1.dtype.char in "fdFD":
        return a1.dtype.char
    return lapack_common(a1.dtype, b1.dtype).char


def _empty_solution(b1: np.ndarray, a_dtype: np.dtype) -> np.ndarray:
    """SciPy's result for an empty right-hand side: ``b``'s shape in ``solve``'s result dtype."""
    return np.empty_like(b1, dtype=lapack_pair(a_dtype, b1.dtype))


def _solve_banded(nlower: Any, nupper: Any, ab: Any, b: Any, overwrite_ab: bool, overwrite_b: bool,
                  check_finite: bool) -> np.ndarray:
    """:func:`solve_banded` of one band and one right-hand side (vector or matrix)."""
    a1 = validated(ab, check_finite, inexact=True)
    b1 = validated(b, check_finite, inexact=True)
    if a1.shape[-1] != b1.shape[0]:
        raise ValueError("shapes of ab and b are not compatible.")
    if nlower + nupper + 1 != a1.shape[0]:
        raise ValueError(f"invalid values for the number of lower and upper diagonals: l+u+1 "
                         f"({nlower + nupper + 1}) does not equal ab.shape[0] ({np.shape(ab)[0]})")
    if b1.size == 0:
        return _empty_solution(b1, a1.dtype)
    overwrite_b = overwrite_b or copied(b1, b)
    if a1.shape[-1] == 1:  # a 1x1 matrix: its entry is in row nupper, whatever the band's height
        b2 = np.array(b1, copy=not overwrite_b)
        b2 /= a1[nupper, 0]
        return b2
    char = _char(a1, b1)
    if nlower == nupper == 1:
        overwrite_ab = overwrite_ab or copied(a1, ab)
        _, _, _, x, info = lapack("gtsv", char)(a1[2, :-1], a1[1, :], a1[0, 1:], b1, overwrite_ab, overwrite_ab,
                                                overwrite_ab, overwrite_b)
    else:
        lu = np.zeros((2 * nlower + nupper + 1, a1.shape[1]), dtype=char, order="F")
        lu[nlower:, :] = a1
        _, _, x, info = lapack("gbsv", char)(nlower, nupper, lu, b1, overwrite_ab=True, overwrite_b=overwrite_b)
    if info == 0:
        return x
    if info > 0:
        raise LinAlgError("singular matrix")
    raise ValueError(f"illegal value in {-info}-th argument of internal gbsv/gtsv")


def solve_banded(l_and_u: Any, ab: Any, b: Any, overwrite_ab: bool = False, overwrite_b: bool = False,
                 check_finite: bool = True) -> Any:
    """Solve ``a @ x = b`` for the banded matrix ``a`` stored in ``ab``, as
    :func:`scipy.linalg.solve_banded` (``ab[u + i - j, j] == a[i, j]``; batched over leading
    dimensions): ``?gtsv`` for ``(l, u) == (1, 1)``, ``?gbsv`` otherwise.

    ``overwrite_ab``/``overwrite_b`` let LAPACK work in the caller's arrays as SciPy's do
    (``b``, when it is contiguous in LAPACK's order and of the computation dtype, holds ``x``;
    ``ab``'s rows are overwritten by the tridiagonal factors). A singular matrix raises
    ``LinAlgError``.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import solve_banded
    >>> ab = np.array([[0.0, 0, -1, -1, -1], [0, 2, 2, 2, 2], [5, 4, 3, 2, 1], [1, 1, 1, 1, 0]])
    >>> solve_banded((1, 2), ab, np.array([0.0, 1, 2, 2, 3]))
    array([-2.37288136,  3.93220339, -4.        ,  4.3559322 , -1.3559322 ])
    """
    nlower, nupper = l_and_u
    if (type(ab) is np.ndarray and type(b) is np.ndarray and ab.ndim == 2 and b.ndim <= 2
            and type(nlower) is int and type(nupper) is int):
        return _solve_banded(nlower, nupper, ab, b, overwrite_ab, overwrite_b, check_finite)
    return batched(lambda lo, up, a1, b1: _solve_banded(lo, up, a1, b1, overwrite_ab, overwrite_b, check_finite),
                   [np.asarray(nlower), np.asarray(nupper), ab, b], [0, 0, 2, -1], "_solve_banded")


def _solveh_banded(ab: Any, b: Any, overwrite_ab: bool, overwrite_b: bool, lower: bool,
                   check_finite: bool) -> np.ndarray:
    """:func:`solveh_banded` of one band and one right-hand side."""
    a1 = validated(ab, check_finite)
    b1 = validated(b, check_finite)
    if a1.shape[-1] != b1.shape[0]:
        raise ValueError("shapes of ab and b are not compatible.")
    if b1.size == 0:
        return _empty_solution(b1, a1.dtype)
    overwrite_b = overwrite_b or copied(b1, b)
    overwrite_ab = overwrite_ab or copied(a1, ab)
    char = _char(a1, b1)
    if a1.shape[0] == 2:
        d, e = (a1[0, :].real, a1[1, :-1]) if lower else (a1[1, :].real, a1[0, 1:].conj())
        _, _, x, info = lapack("ptsv", char)(d, e, b1, overwrite_ab, overwrite_ab, overwrite_b)
    else:
        _, x, info = lapack("pbsv", char)(a1, b1, lower=lower, overwrite_ab=overwrite_ab, overwrite_b=overwrite_b)
    if info > 0:
        raise LinAlgError(f"{info}th leading minor not positive definite")
    if info < 0:
        raise ValueError(f"illegal value in {-info}th argument of internal pbsv")
    return x


def solveh_banded(ab: Any, b: Any, overwrite_ab: bool = False, overwrite_b: bool = False, lower: bool = False,
                  check_finite: bool = True) -> Any:
    """Solve ``a @ x = b`` for the Hermitian positive definite banded ``a`` stored in ``ab``, as
    :func:`scipy.linalg.solveh_banded` (upper form ``ab[u + i - j, j] == a[i, j]``, or with
    ``lower`` ``ab[i - j, j] == a[i, j]``; batched): ``?ptsv`` for two rows, ``?pbsv`` otherwise.

    ``overwrite_ab``/``overwrite_b`` work in place as SciPy's; a matrix that is not positive
    definite raises ``LinAlgError``.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import solveh_banded
    >>> ab = np.array([[4.0, 5, 6, 7, 8, 9], [2, 2, 2, 2, 2, 0], [-1, -1, -1, -1, 0, 0]])
    >>> solveh_banded(ab, np.array([1.0, 2, 2, 3, 3, 3]), lower=True)
    array([0.03431373, 0.45938375, 0.05602241, 0.47759104, 0.17577031,
           0.34733894])
    """
    if type(ab) is np.ndarray and type(b) is np.ndarray and ab.ndim == 2 and b.ndim <= 2:
        return _solveh_banded(ab, b, overwrite_ab, overwrite_b, lower, check_finite)
    return batched(lambda a1, b1: _solveh_banded(a1, b1, overwrite_ab, overwrite_b, lower, check_finite),
                   [ab, b], [2, -1], "solveh_banded")


def _cholesky_banded(ab: Any, overwrite_ab: bool, lower: bool, check_finite: bool) -> np.ndarray:
    """:func:`cholesky_banded` of one band."""
    a1 = validated(ab, check_finite)
    if a1.size == 0:
        return np.empty_like(a1, dtype=lapack_common(a1.dtype))
    char = a1.dtype.char if a1.dtype.char in "fdFD" else lapack_common(a1.dtype).char
    c, info = lapack("pbtrf", char)(a1, lower=lower, overwrite_ab=overwrite_ab)
    if info > 0:
        raise LinAlgError(f"{info}-th leading minor not positive definite")
    if info < 0:
        raise ValueError(f"illegal value in {info}-th argument of internal pbtrf")
    return c


def cholesky_banded(ab: Any, overwrite_ab: bool = False, lower: bool = False, check_finite: bool = True) -> Any:
    """Cholesky factor of the Hermitian positive definite banded matrix stored in ``ab`` (in
    the same banded form), as :func:`scipy.linalg.cholesky_banded` (``?pbtrf``; batched).

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import cholesky_banded
    >>> cholesky_banded(np.array([[4.0, 5.0, 6.0], [1.0, 1.0, 0.0]]), lower=True)
    array([[2.        , 2.17944947, 2.40613252],
           [0.5       , 0.45883147, 0.        ]])
    """
    if type(ab) is np.ndarray and ab.ndim == 2:
        return _cholesky_banded(ab, overwrite_ab, lower, check_finite)
    return batched(lambda a1: _cholesky_banded(a1, overwrite_ab, lower, check_finite), [ab], [2], "cholesky_banded")


def _cho_solve_banded(cb: Any, b: Any, lower: bool, overwrite_b: bool, check_finite: bool) -> np.ndarray:
    """:func:`cho_solve_banded` of one factor and one right-hand side."""
    c1 = validated(cb, check_finite)
    b1 = validated(b, check_finite)
    if c1.shape[-1] != b1.shape[0]:
        raise ValueError("shapes of cb and b are not compatible.")
    if b1.size == 0:
        return np.empty_like(b1, dtype=lapack_common(lapack_common(c1.dtype), b1.dtype))
    char = _char(c1, b1)
    x, info = lapack("pbtrs", char)(c1, b1, lower=lower, overwrite_b=overwrite_b)
    if info > 0:
        raise LinAlgError(f"{info}th leading minor not positive definite")
    if info < 0:
        raise ValueError(f"illegal value in {-info}th argument of internal pbtrs")
    return x


def cho_solve_banded(cb_and_lower: Any, b: Any, overwrite_b: bool = False, check_finite: bool = True) -> Any:
    """Solve ``a @ x = b`` from the banded Cholesky factor ``(cb, lower)`` of
    :func:`cholesky_banded`, as :func:`scipy.linalg.cho_solve_banded` (``?pbtrs``; batched).

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import cho_solve_banded, cholesky_banded
    >>> c = cholesky_banded(np.array([[4.0, 5.0, 6.0], [1.0, 1.0, 0.0]]), lower=True)
    >>> np.round(cho_solve_banded((c, True), np.array([5.0, 7.0, 7.0])), 12)
    array([1., 1., 1.])
    """
    cb, lower = cb_and_lower
    if type(cb) is np.ndarray and type(b) is np.ndarray and cb.ndim == 2 and b.ndim <= 2:
        return _cho_solve_banded(cb, b, lower, overwrite_b, check_finite)
    return batched(lambda c1, b1: _cho_solve_banded(c1, b1, lower, overwrite_b, check_finite),
                   [cb, b], [2, -1], "_cho_solve_banded")


@functools.lru_cache(maxsize=None)
def _lamch_eps(char: str) -> float:
    """LAPACK's relative machine precision (``?lamch('E')``) of single or double precision."""
    return float(lapack("lamch", "f" if char in "fF" else "d")("E"))


def _solve_assumed_banded(a: Any, b: Any, overwrite_b: bool, check_finite: bool, transposed: bool) -> np.ndarray:
    """:func:`solve_assumed_banded` of one matrix and one right-hand side, in SciPy's order of steps."""
    a1 = np.atleast_2d(validated(a, False))
    b1 = np.atleast_1d(validated(b, False))
    dtype = lapack_pair(a1.dtype, b1.dtype)
    a1, b1 = a1.astype(dtype, copy=False), b1.astype(dtype, copy=False)
    n = a1.shape[0]
    overwrite_b = overwrite_b or copied(b1, b)
    if a1.shape[0] != a1.shape[1]:
        raise ValueError("Input a needs to be a square matrix.")
    if n != b1.shape[0] and not (n == 1 and b1.size != 0):
        raise ValueError("Input b has to have same number of rows as input a")
    if b1.size == 0:
        return np.empty_like(b1, dtype=dtype)
    b_is_1d = b1.ndim == 1
    if b_is_1d:
        b1 = b1[None, :] if n == 1 else b1[:, None]
    if transposed and dtype.kind == "c":
        raise NotImplementedError("scipy.linalg.solve can currently not solve a^T x = b or a^H x = b "
                                  "for complex matrices.")
    from scipy.linalg import bandwidth

    below, above = bandwidth(a1)
    m, below, above = (a1.T, above, below) if transposed else (a1, below, above)
    lu = np.zeros((2 * below + above + 1, n), dtype, order="F")
    for k in range(-below, above + 1):  # lu[below + above + i - j, j] = m[i, j]
        row = below + above - k
        lu[row, max(k, 0):n + min(k, 0)] = m.diagonal(k)
    # SciPy checks the band it reads; NaN and infinity are nonzero, so inside the measured band
    if check_finite and not all_finite(lu[below:]):
        raise ValueError("array must not contain infs or NaNs")
    anorm = lapack("langb", dtype.char)("I" if transposed else "1", below, above, lu[below:])
    lu, piv, x, info = lapack("gbsv", dtype.char)(below, above, lu, b1, overwrite_ab=True, overwrite_b=overwrite_b)
    if info < 0:
        raise ValueError(f"LAPACK reported an illegal value in {-info}-th argument.")
    if info > 0:
        raise LinAlgError("Matrix is singular.")
    rcond, info = lapack("gbcon", dtype.char)(below, above, lu, piv, anorm)
    if info < 0:
        raise ValueError(f"LAPACK reported an illegal value in {-info}-th argument.")
    if rcond == 0:
        raise LinAlgError("Matrix is singular.")
    if not rcond >= _lamch_eps(dtype.char):  # NaN too
        warnings.warn(f"Ill-conditioned matrix (rcond={rcond:.6g}): result may not be accurate.", linalg_warning(),
                      stacklevel=caller_stacklevel())
    return x.ravel() if b_is_1d else x


def solve_assumed_banded(a: Any, b: Any, overwrite_b: bool, check_finite: bool, transposed: bool) -> Any:
    """``scipy.linalg.solve(a, b, assume_a='banded')``, as SciPy 1.17 solves it: the band of
    ``a`` (its bandwidth measured) in LAPACK's banded storage, ``?gbsv``, ``?gbcon`` and
    SciPy's messages for this structure ("Matrix is singular.", "Ill-conditioned matrix ...")."""
    if type(a) is np.ndarray and type(b) is np.ndarray and a.ndim <= 2 and b.ndim <= 2:
        return _solve_assumed_banded(a, b, overwrite_b, check_finite, transposed)
    return batched(lambda a1, b1: _solve_assumed_banded(a1, b1, overwrite_b, check_finite, transposed),
                   [a, b], [2, -1], "solve0")
