"""Stacks of small matrices through NumPy's own gufuncs: the batched one-call functions' direct paths.

A plan factors a batch one matrix at a time, a LAPACK call from Python each: for a stack of
small matrices that loop is the whole cost, many times the arithmetic. NumPy's ``numpy.linalg``
gufuncs run the same LAPACK routines in one C loop over the stack. For stacks of matrices of up
to :data:`~.plans.eigh.DIRECT_UP_TO` rows and columns (:func:`._one_matrix.takes`), the
one-call functions call them here - :func:`cholesky`, :func:`qr`, :func:`svd`, :func:`eigh` -
through :data:`~.cpu._numpy_lapack.numpy_linalg`, never the public ``numpy.linalg`` (which
:func:`nvmathpy.patch` may have replaced by nvmathpy's); results are nvmathpy's types. NumPy computes float32 and complex64 stacks in double precision and
rounds the results (more accurate than a single-precision plan). Where NumPy raises
``LinAlgError`` (a matrix not positive definite, a decomposition that does not converge, NaN)
each returns ``None``: the caller's plan then runs and names the failing batch element.

The callers pass what they checked: a non-empty NumPy array (exactly ``ndarray``) of more than
two dimensions, of a LAPACK dtype in native byte order.

Examples
--------
>>> import numpy as np
>>> c = cholesky(np.stack([np.eye(2) * 4, np.eye(2)]), upper=False)
>>> c is None or c[0].tolist() == [[2.0, 0.0], [0.0, 2.0]]
True
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...errors import LinAlgError
from .cpu._numpy_lapack import numpy_linalg
from .plans.qr import QRResult
from .plans.svd import SVDResult

__all__ = ["cholesky", "eigh", "qr", "svd"]


def _numpys(call: Callable[[], Any]) -> Any:
    """``call()``, or ``None`` where NumPy raises ``LinAlgError``."""
    try:
        return call()
    except LinAlgError:
        return None


def _adjoint(a: np.ndarray) -> np.ndarray:
    """The conjugate transpose of each matrix of ``a``."""
    t = np.swapaxes(a, -1, -2)
    return t.conj() if a.dtype.kind == "c" else t


def cholesky(a: np.ndarray, upper: bool) -> np.ndarray | None:
    """The lower (``upper``: upper) Cholesky factor of each matrix of ``a``, read from that
    triangle, the other one zero."""
    if not upper:
        return _numpys(lambda: numpy_linalg.cholesky(a))
    # U = L^H, where L is the lower factor of A^H, whose lower triangle is A's upper one mirrored
    lower = _numpys(lambda: numpy_linalg.cholesky(_adjoint(a)))
    return None if lower is None else _adjoint(lower)


def qr(a: np.ndarray, mode: str) -> QRResult | None:
    """``QRResult(Q, R)`` of each matrix of ``a`` for ``mode`` ``"reduced"`` or ``"complete"``
    (other modes: ``None``)."""
    if mode not in ("reduced", "complete"):
        return None
    out = _numpys(lambda: numpy_linalg.qr(a, mode=mode))
    return None if out is None else QRResult(*out)


def svd(a: np.ndarray, full_matrices: bool, compute_uv: bool) -> Any:
    """``SVDResult`` of each matrix of ``a`` (the singular values alone without ``compute_uv``)."""
    out = _numpys(lambda: numpy_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv))
    if out is None:
        return None
    return SVDResult(*out) if compute_uv else out


def eigh(a: np.ndarray, lower: bool, vectors: bool) -> Any:
    """The eigenvalues (ascending) of each Hermitian matrix of ``a``, read from triangle
    ``lower``, and with ``vectors`` the eigenvectors: ``(w, v)`` or ``w``."""
    uplo = "L" if lower else "U"
    if vectors:
        return _numpys(lambda: tuple(numpy_linalg.eigh(a, UPLO=uplo)))
    return _numpys(lambda: numpy_linalg.eigvalsh(a, UPLO=uplo))
