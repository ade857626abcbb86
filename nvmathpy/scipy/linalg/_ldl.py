"""``ldl`` with SciPy 1.17's semantics: Bunch-Kaufman ``?sytrf`` (``?hetrf`` for complex
Hermitian input) with SciPy's workspace size, and SciPy's reading of the factors into
``(lu, d, perm)``.

SciPy's post-processing walks the pivots with NumPy scalar indexing and swaps row pieces with
fancy indexing, one small NumPy call per entry; the same steps here read the pivots as Python
ints, place the 2x2 blocks of ``d`` in one indexed assignment and swap row pieces through
slices, so the outputs are SciPy's, element for element.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy as np

from ._banded import batched, lapack, validated
from ._validate import caller_stacklevel, lapack_common

__all__ = ["ldl"]


@functools.lru_cache(maxsize=1024)
def _lwork(name: str, char: str, n: int, lower: bool) -> int:
    """SciPy's workspace size for ``name`` (``sytrf``/``hetrf``) of order ``n`` (queried once)."""
    value, info = lapack(name + "_lwork", char)(n, lower=lower)
    if info != 0:
        raise ValueError(f"Internal work array size computation failed: {info}")
    value = value.real
    if char in "fF":  # LAPACK may round a single-precision size down: take the next float
        value = np.nextafter(value, np.inf, dtype=np.float32)
    return int(value)


def _swaps_and_blocks(piv: list[int], lower: bool) -> tuple[list[int], list[int]]:
    """The row each row is swapped with, and the block sizes (1 or 2, at each block's first
    row; 0 elsewhere), read from LAPACK's pivot indices as SciPy reads them."""
    n = len(piv)
    swap, blocks = list(range(n)), [0] * n
    x, y, rows = (1, 0, range(n)) if lower else (-1, -1, range(n - 1, -1, -1))
    skip = False
    for ind in rows:
        if skip:
            skip = False
            continue
        value = piv[ind]
        if value > 0:
            if value != ind + 1:
                swap[ind] = swap[value - 1]
            blocks[ind] = 1
        elif value < 0 and value == piv[ind + x]:
            if -value != ind + 2:
                swap[ind + x] = swap[-value - 1]
            blocks[ind + y] = 2
            skip = True
        else:
            raise ValueError('While parsing the permutation array in "scipy.linalg.ldl", invalid entries found. '
                             "The array syntax is invalid.")
    return swap, blocks


def _factors(ldu: np.ndarray, piv: np.ndarray, lower: bool, hermitian: bool) -> tuple:
    """``(lu, d, perm)`` from ``?sytrf``/``?hetrf``'s ``ldu`` and pivots, as SciPy builds them."""
    n = ldu.shape[0]
    swap, blocks = _swaps_and_blocks(piv.tolist(), lower)
    d = np.diag(np.diag(ldu))
    lu = np.tril(ldu, -1) if lower else np.triu(ldu, 1)
    np.fill_diagonal(lu, 1)
    starts = [i for i, size in enumerate(blocks) if size == 2]
    if starts:
        x, y = (1, 0) if lower else (0, 1)
        first = np.array(starts)
        off = ldu[first + x, first + y]
        d[first + x, first + y] = off
        d[first + y, first + x] = off.conj() if hermitian and ldu.dtype.kind == "c" else off
        lu[first + x, first + y] = 0
    perm = list(range(n))
    for ind in (range(n - 1, -1, -1) if lower else range(n)):
        s = swap[ind]
        if s == ind:
            continue
        start, end = (ind, n) if lower else (0, ind + 1)
        if blocks[ind] == (0 if lower else 2):  # a 2x2 block: both of its columns
            start, end = (start - 1, end) if lower else (start, end + 1)
        row = lu[s, start:end].copy()
        lu[s, start:end] = lu[ind, start:end]
        lu[ind, start:end] = row
        perm[s], perm[ind] = perm[ind], perm[s]
    return lu, d, np.argsort(np.array(perm, dtype=np.intp))


def _ldl(A: Any, lower: bool, hermitian: bool, overwrite_a: bool, check_finite: bool) -> tuple:
    """:func:`ldl` of one matrix."""
    a = np.atleast_2d(validated(A, check_finite))
    if a.shape[0] != a.shape[1]:
        raise ValueError('The input array "a" should be square.')
    if a.size == 0:
        return np.empty_like(a), np.empty_like(a), np.array([], dtype=int)
    n = a.shape[0]
    char = a.dtype.char if a.dtype.char in "fdFD" else lapack_common(a.dtype).char
    name = "sytrf"
    if hermitian and np.iscomplexobj(a):
        name = "hetrf"
        if np.any(np.imag(np.diag(a))):
            warnings.warn('scipy.linalg.ldl():\nThe imaginary parts of the diagonalare ignored. Use "hermitian=False" '
                          "for factorization ofcomplex symmetric arrays.", np.exceptions.ComplexWarning,
                          stacklevel=caller_stacklevel())
    ldu, piv, info = lapack(name, char)(a, lwork=_lwork(name, char, n, bool(lower)), lower=lower,
                                        overwrite_a=overwrite_a)
    if info < 0:
        raise ValueError(f'{name.upper()} exited with the internal error "illegal value in argument number {-info}". '
                         "See LAPACK documentation for the error codes.")
    return _factors(ldu, piv, bool(lower), hermitian)


def ldl(A: Any, lower: bool = True, hermitian: bool = True, overwrite_a: bool = False,
        check_finite: bool = True) -> Any:
    """LDL^T (``hermitian``: LDL^H) factorization of a symmetric/Hermitian matrix (batched),
    as :func:`scipy.linalg.ldl`: ``(lu, d, perm)`` with ``lu @ d @ lu.T == A`` (``.conj().T``
    when Hermitian), ``d`` block diagonal (1x1 and 2x2 blocks) and ``lu[perm]`` triangular.

    Only the ``lower`` (else upper) triangle of ``A`` is read; complex input with ``hermitian``
    warns with ``ComplexWarning`` when its diagonal has imaginary parts (they are ignored).

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import ldl
    >>> a = np.array([[2.0, -1.0, 3.0], [-1.0, 2.0, 0.0], [3.0, 0.0, 1.0]])
    >>> lu, d, perm = ldl(a, lower=False)
    >>> np.allclose(lu @ d @ lu.T, a), perm
    (True, array([2, 1, 0]))
    """
    if type(A) is np.ndarray and A.ndim <= 2:
        return _ldl(A, lower, hermitian, overwrite_a, check_finite)
    return batched(lambda a1: _ldl(a1, lower, hermitian, overwrite_a, check_finite), [A], [2], "ldl")
