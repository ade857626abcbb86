"""``orth`` and ``null_space`` with :func:`scipy.linalg.orth`'s and
:func:`scipy.linalg.null_space`'s signatures, results and errors.

SciPy's steps are kept (one SVD, singular values above ``rcond * max(s)`` counted as the
rank); the SVD of one NumPy matrix of a LAPACK dtype is :func:`nvmathpy.linalg.svd`'s (LAPACK
called directly, a C-ordered matrix through its transposed view). The bases are orthonormal
bases of the same subspaces as SciPy's (singular vectors are unique only up to a unit factor,
so the columns may differ from SciPy's by such factors). A batch is taken matrix by matrix, as
SciPy does; other inputs (array-likes, other dtypes, empty matrices) are SciPy's own functions.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ... import linalg as nl
from ._validate import all_finite, over_batch

__all__ = ["orth", "null_space"]

_NOT_FINITE = "array must not contain infs or NaNs"  # SciPy's message
#: ``numpy.finfo(s.dtype).eps`` by the type letter of the singular values.
_EPS = {c: np.finfo(c).eps for c in "fd"}


def _one_matrix(a: Any) -> bool:
    """One non-empty NumPy matrix of a LAPACK dtype (what the fast paths take)."""
    return type(a) is np.ndarray and a.ndim == 2 and a.dtype.char in "fdFD" and a.dtype.isnative and a.size > 0


def _scipy(name: str) -> Callable[..., Any]:
    """SciPy's own function ``name``, from the module defining it (``scipy.linalg.<name>`` may
    be this module's function when nvmathpy patches SciPy)."""
    from scipy.linalg import _decomp_svd

    return getattr(_decomp_svd, name)


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
    u, s, _ = nl.svd(A, full_matrices=False, driver="gesdd")
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
    _, s, vh = nl.svd(A, full_matrices=True, driver=lapack_driver)
    return vh[_rank(A, s, rcond):, :].T.conj()
