"""The RQ decomposition with SciPy 1.17's signature, results and errors: ``rq``.

SciPy's steps are kept (``?gerqf``, then ``?orgrq``/``?ungrq`` on the same rows, with the same
workspace), so the results are SciPy's bit for bit; the wrappers and the optimal workspace sizes
are looked up once per dtype and shape. NumPy arrays of a LAPACK dtype take this path, batches
matrix by matrix as SciPy does; every other input is SciPy's own function.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ...linalg.lapack import routines
from ._eig import lapack_input
from ._validate import all_finite, over_batch, refuse_cuda, scipy_own

__all__ = ["rq"]

_MODES = ("full", "r", "economic")


@functools.lru_cache(maxsize=256)
def _routine(name: str, char: str, m: int, n: int, k: int) -> tuple[Callable[..., Any], int]:
    """``?gerqf`` (``k`` 0) or ``?orgrq``/``?ungrq`` (``k`` reflectors; SciPy's lookup maps the name) of dtype ``char`` for an
    ``m x n`` matrix, and LAPACK's optimal workspace for it."""
    dtype = np.dtype(char)
    (fn,) = routines(dtype, max(m, n), name)
    a = np.zeros((m, n), dtype, order="F")
    query = fn(a, lwork=-1) if k == 0 else fn(a, np.zeros(k, dtype), lwork=-1)
    return fn, int(np.real(query[-2][0]))


def _call(name: str, label: str, a: np.ndarray, lwork: Any, *args: Any, overwrite_a: Any) -> tuple:
    """SciPy's ``safecall``: ``name`` on ``a`` with the optimal workspace (``lwork`` None or -1)
    or the given one; ``ValueError`` for an illegal argument."""
    k = args[0].shape[0] if args else 0
    fn, optimal = _routine(name, a.dtype.char, a.shape[0], a.shape[1], k)
    out = fn(a, *args, lwork=optimal if lwork in (None, -1) else lwork, overwrite_a=overwrite_a)
    if out[-1] < 0:
        raise ValueError(f"illegal value in {-out[-1]}th argument of internal {label}")
    return out[:-2]


def rq(a: Any, overwrite_a: bool = False, lwork: int | None = None, mode: str = "full",
       check_finite: bool = True) -> Any:
    """RQ decomposition ``a = R @ Q`` as :func:`scipy.linalg.rq`: ``R`` upper trapezoidal,
    ``Q`` unitary.

    Parameters
    ----------
    a
        ``(M, N)`` matrix (or a batch ``(..., M, N)``).
    overwrite_a
        Let LAPACK work in ``a`` where its layout and dtype allow it, as SciPy's.
    lwork
        LAPACK's workspace size (``None`` or -1: the optimal one).
    mode
        ``'full'`` (``R`` ``(M, N)``, ``Q`` ``(N, N)``), ``'r'`` (``R`` only) or ``'economic'``
        (``R`` ``(M, K)``, ``Q`` ``(K, N)``, ``K = min(M, N)``).
    check_finite
        Raise ``ValueError`` when ``a`` holds NaN or infinity.

    Returns
    -------
    R : numpy.ndarray
        The upper trapezoidal factor.
    Q : numpy.ndarray
        The unitary factor (not with ``mode='r'``).

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import rq
    >>> a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    >>> r, q = rq(a)
    >>> r.shape, q.shape, bool(np.allclose(r @ q, a))
    ((2, 3), (3, 3), True)
    """
    if not lapack_input(a):
        refuse_cuda("rq", a)
        return scipy_own("_decomp_qr", "rq")(a, overwrite_a, lwork, mode, check_finite)
    if a.ndim > 2:  # SciPy's batches: matrix by matrix
        return over_batch(lambda a2: rq(a2, overwrite_a, lwork, mode, check_finite), [a], [2], "rq")
    if mode not in _MODES:
        raise ValueError("Mode argument should be one of ['full', 'r', 'economic']")
    if check_finite and not all_finite(a):
        raise ValueError("array must not contain infs or NaNs")
    if a.ndim != 2:
        raise ValueError("expected matrix")
    m, n = a.shape
    if a.size == 0:
        k = min(m, n)
        if mode != "economic":
            r, q = np.empty_like(a), np.empty_like(a, shape=(n, n))
            q[...] = np.identity(n)
        else:
            r, q = np.empty_like(a, shape=(m, k)), np.empty_like(a, shape=(k, n))
        return r if mode == "r" else (r, q)
    factors, tau = _call("gerqf", "gerqf", a, lwork, overwrite_a=overwrite_a)
    r = np.triu(factors, n - m) if mode != "economic" or n < m else np.triu(factors[-m:, -m:])
    if mode == "r":
        return r
    if n < m:
        rows = factors[-n:]
    elif mode == "economic":
        rows = factors
    else:
        rows = np.empty((n, n), dtype=factors.dtype)
        rows[-m:] = factors
    (q,) = _call("orgrq", "gorgrq/gungrq", rows, lwork, tau, overwrite_a=1)
    return r, q
