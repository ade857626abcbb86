"""Pure arithmetic of the cuSOLVER engine: how a row-major stack of matrices is handed to a
column-major library, and how the requested operation maps onto what was factored.

A C-ordered ``(m, n)`` matrix is, read column-major, the ``(n, m)`` matrix ``A^T`` with leading
dimension ``n``. The engine never makes a transposing copy of such a matrix where the
transposed problem answers the question (LU and Cholesky solves, Hermitian eigenproblems, SVD);
it factors ``A^T`` and maps the operation: :func:`getrs_operation`, :func:`cholesky_fill`,
:func:`eigh_fill`, :func:`svd_outputs`. QR alone needs ``A`` itself.

Nothing here touches a device: every function is checked against hand-computed cases in
``tests/test_cusolver_layout.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = [
    "ColumnMajor",
    "SvdOutputs",
    "cholesky_fill",
    "column_major",
    "copy_order",
    "eigh_fill",
    "getrs_operation",
    "pointer_offsets",
    "svd_outputs",
    "trsm_arguments",
]

# cublasOperation_t / cublasFillMode_t / cublasSideMode_t values (cublas_api.h), repeated here
# so this module imports no binding.
_N, _T = 0, 1
_LOWER, _UPPER = 0, 1
_LEFT, _RIGHT = 0, 1


@dataclass(frozen=True)
class ColumnMajor:
    """How the library sees one matrix of a stack.

    Attributes
    ----------
    rows, cols
        The column-major matrix handed to cuSOLVER (``A``'s shape, or its reverse when
        ``transposed``).
    ld
        Leading dimension in elements (at least ``max(1, rows)``).
    transposed
        True when the library matrix is ``A^T`` (``A`` was row-major).
    """

    rows: int
    cols: int
    ld: int
    transposed: bool


def column_major(shape: Sequence[int], strides: Sequence[int], allow_transpose: bool = True) -> ColumnMajor | None:
    """The column-major reading of the last two axes of an array, or None when a copy is needed.

    Parameters
    ----------
    shape
        The array's shape (at least two axes); only the last two matter.
    strides
        Element strides (not bytes) of the same axes.
    allow_transpose
        Accept a row-major matrix as its transpose (False for QR, which needs ``A`` itself).

    Examples
    --------
    >>> column_major((5, 3), (1, 5))          # Fortran order
    ColumnMajor(rows=5, cols=3, ld=5, transposed=False)
    >>> column_major((5, 3), (3, 1))          # C order: A^T, 3 x 5, ld 3
    ColumnMajor(rows=3, cols=5, ld=3, transposed=True)
    >>> column_major((5, 3), (3, 1), allow_transpose=False) is None
    True
    """
    m, n = int(shape[-2]), int(shape[-1])
    sr, sc = int(strides[-2]), int(strides[-1])
    if (sr == 1 or m <= 1) and (sc >= max(1, m) or n <= 1):
        return ColumnMajor(m, n, max(1, m, sc if n > 1 else 1), False)
    if allow_transpose and (sc == 1 or n <= 1) and (sr >= max(1, n) or m <= 1):
        return ColumnMajor(n, m, max(1, n, sr if m > 1 else 1), True)
    return None


def pointer_offsets(count: int, stride: int, itemsize: int) -> np.ndarray:
    """Byte offsets of ``count`` matrices ``stride`` elements apart (the pointer arrays of the
    batched routines are ``base + offsets``).

    Examples
    --------
    >>> pointer_offsets(3, 64, 8).tolist()
    [0, 512, 1024]
    """
    return np.arange(count, dtype=np.uint64) * np.uint64(stride * itemsize)


def copy_order(m: int, n: int, need_tall: bool = False) -> str:
    """The order of a private copy that the library reads without further transposes.

    Factorizations copy into ``"F"`` (the library sees ``A``); a route that needs a tall
    matrix (``gesvd`` requires ``rows >= cols``) copies a wide ``A`` in ``"C"`` so that the
    library sees the tall ``A^T``.

    Examples
    --------
    >>> copy_order(7, 3, need_tall=True), copy_order(3, 7, need_tall=True), copy_order(3, 7)
    ('F', 'C', 'F')
    """
    return "C" if need_tall and m < n else "F"


def getrs_operation(trans: int, transposed: bool, complex_: bool) -> tuple[int, bool]:
    """``(operation, conjugate)`` that solves ``op_trans(A) x = b`` with LU factors of ``M``.

    ``M`` is ``A`` (``transposed`` False) or ``A^T``. ``trans`` is 0 (``A x = b``), 1
    (``A^T x = b``) or 2 (``A^H x = b``). With factors of ``A^T``: ``A = M^T``, ``A^T = M``,
    and ``A^H = conj(M)``, which is solved as ``M conj(x) = conj(b)`` (``conjugate`` True:
    conjugate ``b`` before and ``x`` after).

    Examples
    --------
    >>> getrs_operation(0, True, False), getrs_operation(1, True, False), getrs_operation(2, True, True)
    ((1, False), (0, False), (0, True))
    >>> getrs_operation(2, False, True)
    (2, False)
    """
    if not transposed:
        return trans, False
    if trans == 0:
        return _T, False
    if trans == 2 and complex_:
        return _N, True
    return _N, False


def cholesky_fill(lower: bool, transposed: bool, complex_: bool) -> tuple[int, bool]:
    """``(fill mode, conjugate)`` of the Cholesky factorization of ``M``.

    The caller's ``lower`` names a triangle of ``A``. ``M = A^T = conj(A)`` (Hermitian ``A``)
    has that triangle as its opposite one; solving ``A x = b`` with the factor of ``conj(A)``
    is ``conj(A) conj(x) = conj(b)``.

    Examples
    --------
    >>> cholesky_fill(True, False, True), cholesky_fill(True, True, False), cholesky_fill(False, True, True)
    ((0, False), (1, False), (0, True))
    """
    fill = _LOWER if lower != transposed else _UPPER
    return fill, transposed and complex_


def eigh_fill(lower: bool, transposed: bool, complex_: bool) -> tuple[int, bool]:
    """``(fill mode, conjugate vectors)`` of the Hermitian eigenproblem of ``M``.

    ``eigh(conj(A)) = (w, conj(V))``: with ``M = A^T`` the eigenvalues are ``A``'s and the
    eigenvectors are conjugated back (nothing to do for real data).

    Examples
    --------
    >>> eigh_fill(True, True, True), eigh_fill(False, False, True)
    ((1, True), (1, False))
    """
    return cholesky_fill(lower, transposed, complex_)


@dataclass(frozen=True)
class SvdOutputs:
    """Shapes (as C-ordered arrays) of the buffers ``gesvd`` writes for ``M = U S V^H``, and
    how ``A``'s factors are read from them.

    Attributes
    ----------
    u_rows, u_cols
        The column-major ``U`` of ``M`` (``ldu = u_rows``).
    vt_rows, vt_cols
        The column-major ``V^H`` of ``M`` (``ldvt = vt_rows``).
    u_from
        ``"u"``: ``A``'s ``U`` is ``M``'s ``U`` read column-major (the swapped axes of the
        C-ordered buffer); ``"vt"``: it is the ``V^H`` buffer read row-major (``A = M^T``:
        ``U_A = (V_M^H)^T``).
    """

    u_rows: int
    u_cols: int
    vt_rows: int
    vt_cols: int
    u_from: str


def svd_outputs(m: int, n: int, transposed: bool, full_matrices: bool) -> SvdOutputs:
    """The ``gesvd`` outputs for ``A`` (``m x n``) factored as ``M`` (``A`` or the tall ``A^T``).

    With ``M = A^T = U' S V'^H``: ``A = conj(V') S U'^T``, so ``U_A = (V'^H)^T`` is the
    ``V^H`` buffer read row-major and ``Vh_A = U'^T`` is the ``U`` buffer read row-major: no
    conjugation and no copy.

    Examples
    --------
    >>> svd_outputs(7, 3, False, False)
    SvdOutputs(u_rows=7, u_cols=3, vt_rows=3, vt_cols=3, u_from='u')
    >>> svd_outputs(3, 7, True, True)
    SvdOutputs(u_rows=7, u_cols=7, vt_rows=3, vt_cols=3, u_from='vt')
    """
    rows, cols = (n, m) if transposed else (m, n)
    k = min(rows, cols)
    u_cols = rows if full_matrices else k
    vt_rows = cols if full_matrices else k
    return SvdOutputs(rows, u_cols, vt_rows, cols, "vt" if transposed else "u")


@dataclass(frozen=True)
class TrsmArguments:
    """How ``trsm`` solves ``op(A) X = B`` for one triangular ``A`` as the caller holds it.

    Attributes
    ----------
    side
        ``cublasSideMode_t``: LEFT (``op(M) X = B``, ``X`` column-major) or RIGHT
        (``X^T op(M) = B^T`` on the row-major ``X``, read column-major as ``X^T``).
    fill
        ``cublasFillMode_t`` of the library matrix ``M``.
    operation
        ``cublasOperation_t`` applied to ``M``.
    ld
        ``M``'s leading dimension in elements.
    x_order
        ``"F"`` (each solution matrix column-major, LEFT) or ``"C"`` (row-major, RIGHT).
    """

    side: int
    fill: int
    operation: int
    ld: int
    x_order: str


def trsm_arguments(n: int, strides: Sequence[int], lower: bool, trans: int) -> TrsmArguments | None:
    """The ``trsm`` call for the ``n x n`` matrix with element ``strides`` (last two axes), or
    None when neither reading is column-major (a copy is needed).

    A column-major ``A`` is the library matrix: LEFT, ``A``'s triangle, ``op = trans``, ``X``
    column-major. A row-major ``A`` is read as ``M = A^T`` (the other triangle) and solved from
    the right on the row-major ``X``: ``op(A) X = B`` is ``X^T op(A)^T = B^T``, and
    ``op(A)^T`` is ``M`` for ``trans`` 0, ``M^T`` for 1 and ``M^H`` (``= conj(A)``) for 2: the
    operation stays ``trans``. Neither copies ``A`` nor transposes ``X``.

    Examples
    --------
    >>> trsm_arguments(5, (5, 1), True, 2)       # C order, lower: M = A^T is upper, from the right
    TrsmArguments(side=1, fill=1, operation=2, ld=5, x_order='C')
    >>> trsm_arguments(5, (1, 6), True, 0)       # column-major with ld 6
    TrsmArguments(side=0, fill=0, operation=0, ld=6, x_order='F')
    >>> trsm_arguments(5, (10, 2), True, 0) is None
    True
    """
    view = column_major((n, n), strides)
    if view is None:
        return None
    if view.transposed:
        return TrsmArguments(_RIGHT, _UPPER if lower else _LOWER, trans, view.ld, "C")
    return TrsmArguments(_LEFT, _LOWER if lower else _UPPER, trans, view.ld, "F")
