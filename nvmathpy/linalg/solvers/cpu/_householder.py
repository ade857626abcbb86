"""Applying the Householder reflectors LAPACK's reductions leave behind, many at a time.

``?sytrd`` (tridiagonal), ``?gebrd`` (bidiagonal) and their kin store each reflector
``H = I - tau v v^H`` as the vector ``v`` below (or above) the reduced band and ``tau``
beside it; LAPACK's ``?ormtr`` / ``?ormbr`` apply them 32 at a time, so their products
have an inner dimension of 32 and run far below the machine's product speed. Here they are
applied :data:`BLOCK` at a time, each block as ``Z -= V (T (V^H Z))`` with ``T`` from
``?larft``: two products with an inner dimension of :data:`BLOCK` and one small triangular
one, which do the same work in less time.

The routines are the Fortran entry points of the OpenBLAS NumPy loaded
(:mod:`._numpy_lapack`), called through :mod:`ctypes`.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import numpy as np

from ._numpy_lapack import _PREFIX, _scipy_symbol, _symbol, scipy_exports

__all__ = ["BLOCK", "Reflectors", "reflectors", "reflectors_available"]

#: Reflectors applied per block (a smaller block times alike; a larger one is slower: its
#: triangular factor costs more than the wider products gain).
BLOCK = 128

_ROUTINES = ("larft", "gemm", "trmm")


def reflectors_available(dtype: Any, library: str = "numpy") -> bool:
    """Whether ``library``'s OpenBLAS (``"numpy"`` or ``"scipy"``) exports the routines
    :class:`Reflectors` calls for ``dtype``."""
    prefix = _PREFIX.get(np.dtype(dtype).name)
    if prefix is None:
        return False
    if library == "scipy":
        return scipy_exports(tuple(prefix + name for name in _ROUTINES))
    return all(_symbol(prefix + name) is not None for name in _ROUTINES)


@functools.lru_cache(maxsize=None)
def _reflectors(dtype_name: str, library: str) -> "Reflectors":
    return Reflectors(np.dtype(dtype_name), library)


def reflectors(dtype: Any, library: str = "numpy") -> "Reflectors":
    """The :class:`Reflectors` of ``dtype`` on ``library``'s OpenBLAS (``"numpy"``, or
    ``"scipy"`` once SciPy has loaded its own; one per dtype and library; check
    :func:`reflectors_available`)."""
    return _reflectors(np.dtype(dtype).name, library)


def _int(integer: type, value: int) -> Any:
    return ctypes.byref(integer(value))


class Reflectors:
    """``z <- Q z`` for the ``Q`` a reduction stored, on Fortran-ordered ``z`` of one dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.linalg import lapack
    >>> a = np.asfortranarray(np.random.default_rng(0).standard_normal((6, 4)))
    >>> qr, tau, _, _ = lapack.dgeqrf(a)
    >>> q = np.asfortranarray(np.eye(6))
    >>> if reflectors_available(q.dtype):
    ...     reflectors(q.dtype).forward(qr, tau, q, count=4, offset=0)
    ... else:
    ...     q = lapack.dorgqr(qr, tau, lwork=64)[0]
    >>> bool(np.allclose(q[:, :4] @ np.triu(qr[:4]), a))
    True
    """

    def __init__(self, dtype: np.dtype, library: str = "numpy"):
        prefix = _PREFIX[dtype.name]
        self.dtype = dtype
        symbol = _symbol if library == "numpy" else _scipy_symbol
        (self._larft, integer), (self._gemm, _), (self._trmm, _) = (symbol(prefix + r) for r in _ROUTINES)
        self._integer = integer
        complex_ = dtype.kind == "c"
        scalar = ({"c": ctypes.c_float, "z": ctypes.c_double}[prefix] * 2 if complex_
                  else {"s": ctypes.c_float, "d": ctypes.c_double}[prefix])
        self._one, self._minus_one, self._zero = (ctypes.byref(scalar(v, 0.0) if complex_ else scalar(v))
                                                  for v in (1.0, -1.0, 0.0))
        self._adjoint = ctypes.c_char_p(b"C" if complex_ else b"T")

    def forward(self, t: np.ndarray, tau: np.ndarray, z: np.ndarray, count: int, offset: int) -> None:
        """``z <- H(0) H(1) ... H(count-1) z`` where ``H(i)`` acts on rows ``i + offset`` on,
        its vector's unit entry at row ``i + offset`` and the rest stored in column ``i`` of
        ``t`` below it (``?geqrf``, ``?gebrd``'s ``Q``: offset 0; ``?sytrd`` ``'L'``: offset 1).
        ``t`` may be any strided view (``?gebrd``'s ``P`` is read through ``a.T``)."""
        for j in reversed(range(0, count, BLOCK)):
            k = min(BLOCK, count - j)
            v = np.array(t[j + offset:, j:j + k], order="F")
            head = v[:k]  # the unit lower triangle's square: what lies on and above it is not v's
            head[...] = np.tril(head, -1)
            np.fill_diagonal(head, 1)
            self._apply(b"F", v, tau, j, z, j + offset)

    def backward(self, t: np.ndarray, tau: np.ndarray, z: np.ndarray, count: int) -> None:
        """``z <- H(count-1) ... H(1) H(0) z`` where ``H(i)`` acts on rows ``0..i``, its
        vector's unit entry at row ``i`` and the rest stored above it in column ``i + 1`` of
        ``t`` (``?sytrd`` ``'U'``)."""
        for j in range(0, count, BLOCK):
            k = min(BLOCK, count - j)
            v = np.array(t[:j + k, j + 1:j + k + 1], order="F")
            head = v[j:]  # the unit upper triangle's square: what lies on and below it is not v's
            head[...] = np.triu(head, 1)
            np.fill_diagonal(head, 1)
            self._apply(b"B", v, tau, j, z, 0)

    def _apply(self, direct: bytes, v: np.ndarray, tau: np.ndarray, first: int, z: np.ndarray,
               first_row: int) -> None:
        """``z[first_row:] <- (I - V T V^H) z[first_row:]`` for the block ``v`` of reflectors
        ``first..`` (``T`` upper triangular for ``direct`` ``F``, lower for ``B``)."""
        integer, item = self._integer, self.dtype.itemsize
        rows, k = v.shape
        cols = z.shape[1]
        factor = np.zeros((k, k), self.dtype, order="F")
        work = np.empty((k, cols), self.dtype, order="F")
        no = ctypes.c_char_p(b"N")
        vp, fp, wp = (ctypes.c_void_p(x.ctypes.data) for x in (v, factor, work))
        ldv, ldk, ldz = _int(integer, rows), _int(integer, k), _int(integer, z.shape[0])
        self._larft(ctypes.c_char_p(direct), ctypes.c_char_p(b"C"), ldv, ldk, vp, ldv,
                    ctypes.c_void_p(tau.ctypes.data + first * item), fp, ldk)
        target = ctypes.c_void_p(z.ctypes.data + first_row * item)
        # work = V^H Z[rows]; work = T work; Z[rows] -= V work
        self._gemm(self._adjoint, no, ldk, _int(integer, cols), ldv, self._one, vp, ldv, target, ldz,
                   self._zero, wp, ldk)
        self._trmm(ctypes.c_char_p(b"L"), ctypes.c_char_p(b"U" if direct == b"F" else b"L"), no, no, ldk,
                   _int(integer, cols), self._one, fp, ldk, wp, ldk)
        self._gemm(no, no, ldv, _int(integer, cols), ldk, self._minus_one, vp, ldv, wp, ldk, self._one, target,
                   ldz)
