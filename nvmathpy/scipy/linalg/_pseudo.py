"""Pseudo-inverses and the orthonormal bases of the SVD: ``pinv``, ``pinvh``, ``orth`` and
``null_space`` with SciPy 1.17's signatures (``atol``/``rtol``, ``return_rank``), results and
errors.

SciPy's steps are kept (the same cutoffs, ``atol + rtol * max|s|`` or ``rcond * max(s)``, the
same products); what changes is the path to LAPACK on one NumPy matrix of a LAPACK dtype:
``pinv``, ``orth`` and ``null_space`` take the SVD from :func:`._decomp.svd_matrix` (SciPy's
LAPACK called directly, in one C call where the compiled extension is available; singular vectors are unique
only up to unit factors, so the bases may differ from SciPy's by such factors and span the same
subspaces), ``pinvh`` calls ``?syev``/``?heev`` (SciPy's driver) directly up to order
:data:`EV_UP_TO` and the divide-and-conquer ``?syevd``/``?heevd`` above it (the same eigenpairs
to rounding, several times faster on large matrices). A batch is taken matrix by matrix, as
SciPy does; other inputs (array-likes, other dtypes, empty matrices) are SciPy's own functions.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable

import numpy as np

from ...linalg.lapack import routines
from ._decomp import svd_matrix
from ._validate import LinAlgError, all_finite, over_batch, scipy_own

__all__ = ["pinv", "pinvh", "orth", "null_space", "EV_UP_TO"]

#: ``pinvh`` uses SciPy's ``?syev`` up to this order and ``?syevd`` above it.
EV_UP_TO = 32

_NOT_FINITE = "array must not contain infs or NaNs"  # SciPy's message
#: ``numpy.finfo(t).eps`` of the real type letter ``t`` (a NumPy scalar, as SciPy multiplies with).
_EPS = {c: np.finfo(c).eps for c in "fd"}
_intp = np.intp


def _one_matrix(a: Any) -> bool:
    """One non-empty NumPy matrix of a LAPACK dtype (what the fast paths take)."""
    return type(a) is np.ndarray and a.ndim == 2 and a.dtype.char in "fdFD" and a.dtype.isnative and a.size > 0


#: The SciPy module defining each function (``scipy.linalg.<name>`` may be this module's
#: function when nvmathpy patches SciPy).
_DEFINED_IN = {"pinv": "_basic", "pinvh": "_basic", "orth": "_decomp_svd", "null_space": "_decomp_svd"}


def _scipy(name: str) -> Callable[..., Any]:
    """SciPy's own function ``name``."""
    return scipy_own(_DEFINED_IN[name], name)


def _cutoff(a: np.ndarray, largest: Any, atol: Any, rtol: Any) -> Any:
    """SciPy's ``atol + largest * rtol`` with its defaults and its error for negative tolerances."""
    atol = 0.0 if atol is None else atol
    rtol = max(a.shape) * _EPS[a.dtype.char.lower()] if rtol is None else rtol
    if (atol < 0.0) or (rtol < 0.0):
        raise ValueError("atol and rtol values must be positive.")
    return atol + largest * rtol


def pinv(a: Any, *, atol: Any = None, rtol: Any = None, return_rank: bool = False, check_finite: bool = True) -> Any:
    """Moore-Penrose pseudo-inverse by the SVD, as :func:`scipy.linalg.pinv`.

    Singular values at most ``atol + rtol * max(s)`` count as zero (defaults: ``atol=0``,
    ``rtol=max(M, N) * eps``).

    Parameters
    ----------
    a
        ``(M, N)`` matrix (or a batch ``(..., M, N)``).
    atol, rtol
        Absolute and relative thresholds (non-negative).
    return_rank
        Also return the effective rank.
    check_finite
        Raise ``ValueError`` when ``a`` holds NaN or infinity.

    Returns
    -------
    B : numpy.ndarray
        ``(N, M)`` pseudo-inverse.
    rank : numpy.intp
        Effective rank (only with ``return_rank``).

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import pinv
    >>> a = np.array([[1.0, 2.0], [2.0, 4.0], [0.0, 1.0]])
    >>> b, rank = pinv(a, return_rank=True)
    >>> bool(np.allclose(a @ b @ a, a)), int(rank)
    (True, 2)
    """
    if type(a) is np.ndarray and a.ndim > 2 and a.size:  # each matrix as one: batched results equal unbatched
        return over_batch(lambda m: pinv(m, atol=atol, rtol=rtol, return_rank=return_rank,
                                         check_finite=check_finite), [a], [2], "pinv")
    if not _one_matrix(a):
        return _scipy("pinv")(a, atol=atol, rtol=rtol, return_rank=return_rank, check_finite=check_finite)
    if check_finite and not all_finite(a):
        raise ValueError(_NOT_FINITE)
    u, s, vh = svd_matrix(a, False, "gesdd")
    val = _cutoff(a, s[0], atol, rtol)  # s descends: s[0] is SciPy's np.max(s, initial=0.)
    rank = _intp(np.count_nonzero(s > val))
    u = u[:, :rank]
    u /= s[:rank]
    b = (u @ vh[:rank]).conj().T
    return (b, rank) if return_rank else b


def _lwork(query: Any) -> int:
    return max(1, math.ceil(float(np.real(query[0])) * (1 + 1e-6)))


@functools.lru_cache(maxsize=256)
def _eig_routine(char: str, n: int) -> tuple[Callable[..., Any], dict[str, int]]:
    """The Hermitian eigen-driver ``pinvh`` runs on order-``n`` matrices of dtype ``char``, and
    its workspace keywords."""
    dtype = np.dtype(char)
    prefix = "he" if char in "FD" else "sy"
    if n > EV_UP_TO:
        return routines(dtype, n, prefix + "evd")[0], {}
    fn, query = routines(dtype, n, prefix + "ev", prefix + "ev_lwork")
    return fn, {"lwork": _lwork(query(n))}


def pinvh(a: Any, atol: Any = None, rtol: Any = None, lower: bool = True, return_rank: bool = False,
          check_finite: bool = True) -> Any:
    """Pseudo-inverse of a Hermitian matrix by its eigendecomposition, as
    :func:`scipy.linalg.pinvh`: eigenvalues of magnitude at most ``atol + rtol * max|w|``
    count as zero.

    Parameters
    ----------
    a
        ``(N, N)`` real symmetric or complex Hermitian matrix (or a batch); only the
        ``lower`` (else upper) triangle is read.
    atol, rtol
        Absolute and relative thresholds (non-negative; defaults ``0`` and ``N * eps``).
    lower
        Read the lower (default) or the upper triangle.
    return_rank
        Also return the effective rank.
    check_finite
        Raise ``ValueError`` when ``a`` holds NaN or infinity.

    Returns
    -------
    B : numpy.ndarray
        ``(N, N)`` pseudo-inverse.
    rank : int
        Effective rank (only with ``return_rank``).

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import pinvh
    >>> a = np.array([[2.0, 1.0], [1.0, 2.0]])
    >>> bool(np.allclose(pinvh(a), np.linalg.inv(a)))
    True
    >>> pinvh(np.array([[1.0, 1.0], [1.0, 1.0]]), return_rank=True)[1]
    1
    """
    if type(a) is np.ndarray and a.ndim > 2 and a.size:  # each matrix as one: batched results equal unbatched
        return over_batch(lambda m: pinvh(m, atol, rtol, lower, return_rank, check_finite), [a], [2], "pinvh")
    if not (_one_matrix(a) and a.shape[0] == a.shape[1]):
        return _scipy("pinvh")(a, atol=atol, rtol=rtol, lower=lower, return_rank=return_rank,
                               check_finite=check_finite)
    if check_finite and not all_finite(a):
        raise ValueError(_NOT_FINITE)
    n = a.shape[0]
    fn, work = _eig_routine(a.dtype.char, n)
    s, u, info = fn(a, compute_v=1, lower=int(bool(lower)), **work)
    if info > 0:
        raise LinAlgError(f"The algorithm failed to converge; {info} off-diagonal elements of an intermediate "
                          "tridiagonal form did not converge to zero.")
    if info < 0:
        raise LinAlgError(f"Illegal value in argument {-info} of internal eigh")
    largest = max(abs(s[0]), abs(s[-1]))  # s ascends: SciPy's np.max(np.abs(s), initial=0.)
    above = abs(s) > _cutoff(a, largest, atol, rtol)
    inverse = 1.0 / s[above]
    u = u[:, above]
    b = (u * inverse) @ u.conj().T
    return (b, len(inverse)) if return_rank else b


def _rank(a: np.ndarray, s: np.ndarray, rcond: Any) -> int:
    """SciPy's count of the singular values ``s`` (descending) of ``a`` above ``rcond * max(s)``."""
    if rcond is None:
        rcond = _EPS[s.dtype.char] * max(a.shape)
    return int(np.count_nonzero(s > s[0] * rcond))


def orth(A: Any, rcond: Any = None) -> Any:
    """An orthonormal basis of the range of ``A`` by the SVD, as :func:`scipy.linalg.orth`.

    Parameters
    ----------
    A
        ``(M, N)`` matrix (or a batch).
    rcond
        Singular values at most ``rcond * max(s)`` count as zero (default ``eps * max(M, N)``).

    Returns
    -------
    numpy.ndarray
        ``(M, K)`` orthonormal columns, ``K`` the effective rank.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import orth
    >>> q = orth(np.array([[1.0, 2.0], [2.0, 4.0], [0.0, 0.0]]))
    >>> q.shape, bool(np.allclose(q.T @ q, np.eye(1)))
    ((3, 1), True)
    """
    if type(A) is np.ndarray and A.ndim > 2 and A.size:  # each matrix as one: batched results equal unbatched
        return over_batch(lambda m: orth(m, rcond), [A], [2], "orth")
    if not _one_matrix(A):
        return _scipy("orth")(A, rcond)
    if not all_finite(A):  # SciPy's svd checks
        raise ValueError(_NOT_FINITE)
    u, s, _ = svd_matrix(A, False, "gesdd")
    return u[:, : _rank(A, s, rcond)]


def null_space(A: Any, rcond: Any = None, *, overwrite_a: bool = False, check_finite: bool = True,
               lapack_driver: str = "gesdd") -> Any:
    """An orthonormal basis of the null space of ``A`` by the SVD, as
    :func:`scipy.linalg.null_space`.

    Parameters
    ----------
    A
        ``(M, N)`` matrix (or a batch).
    rcond
        Singular values at most ``rcond * max(s)`` count as zero (default ``eps * max(M, N)``).
    overwrite_a
        Accepted; ``A`` is never overwritten on the fast path.
    check_finite
        Raise ``ValueError`` when ``A`` holds NaN or infinity.
    lapack_driver
        ``'gesdd'`` (default) or ``'gesvd'``.

    Returns
    -------
    numpy.ndarray
        ``(N, K)`` orthonormal columns, ``K = N - rank``.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import null_space
    >>> z = null_space(np.array([[1.0, 1.0], [1.0, 1.0]]))
    >>> z.shape, bool(np.allclose(np.array([[1.0, 1.0]]) @ z, 0))
    ((2, 1), True)
    """
    if type(A) is np.ndarray and A.ndim > 2 and A.size:  # each matrix as one: batched results equal unbatched
        return over_batch(lambda m: null_space(m, rcond, overwrite_a=overwrite_a, check_finite=check_finite,
                                               lapack_driver=lapack_driver), [A], [2], "null_space")
    if not (_one_matrix(A) and type(lapack_driver) is str and lapack_driver in ("gesdd", "gesvd")):
        return _scipy("null_space")(A, rcond, overwrite_a=overwrite_a, check_finite=check_finite,
                                    lapack_driver=lapack_driver)
    if not all_finite(A):  # SciPy's errors: its check, or its driver's answer to NaN
        if check_finite:
            raise ValueError(_NOT_FINITE)
        return _scipy("null_space")(A, rcond, check_finite=False, lapack_driver=lapack_driver)
    _, s, vh = svd_matrix(A, True, lapack_driver)
    return vh[_rank(A, s, rcond):, :].T.conj()
