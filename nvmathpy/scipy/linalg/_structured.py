"""Per-matrix kernels of the scipy.linalg drop-in's ``solve`` and ``inv``: structure
detection (as ``scipy.linalg.solve`` does with ``assume_a=None``) and one LAPACK path per
structure, each returning the reciprocal condition number SciPy warns about.

Every path reads a C-ordered matrix through its free Fortran view (the transpose) and
adjusts triangle and operation instead of copying. ``overwrite_a``/``overwrite_b`` (given
only for Fortran-ordered, writeable arrays of the LAPACK dtype, as SciPy's in-place rule)
let LAPACK work in the caller's arrays: the factors then overwrite ``a`` and the solution
(inverse) is ``b`` (``a``) itself. A singular matrix raises :class:`Singular`, which the
callers collect per batch slice.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...linalg.lapack import fast_module, routines
from ._eig import lapack_lwork
from ._validate import all_finite

__all__ = ["cholesky_first", "Singular", "STRUCTURES", "detect", "solve_general", "solve_slice", "inv_slice"]

#: ``assume_a`` spellings -> the kernel used (``banded`` is solved apart, see ``._banded``).
STRUCTURES = {
    None: None, "general": "gen", "gen": "gen", "tridiagonal": "tri", "banded": "banded", "diagonal": "diagonal",
    "upper triangular": "upper", "lower triangular": "lower", "pos": "pos", "positive definite": "pos",
    "sym": "sym", "symmetric": "sym", "her": "her", "hermitian": "her",
}


class Singular(Exception):
    """The matrix is singular (or, for ``pos``, not positive definite)."""


@functools.lru_cache(maxsize=None)
def _lapack(dtype_char: str) -> dict[str, Any]:
    from scipy.linalg.lapack import get_lapack_funcs

    dtype = np.dtype(dtype_char)
    names = ("getrf", "getrs", "gecon", "lange", "getri", "potrf", "potrs", "pocon", "potri",
             "trtrs", "trcon", "trtri", "sysv", "sysv_lwork", "sycon", "gttrf", "gttrs", "gtcon", "gtsv")
    funcs = dict(zip(names, get_lapack_funcs(names, dtype=dtype)))
    if dtype.kind == "c":
        funcs["hesv"], funcs["hesv_lwork"], funcs["hecon"] = get_lapack_funcs(("hesv", "hesv_lwork", "hecon"),
                                                                              dtype=dtype)
    return funcs


@functools.lru_cache(maxsize=256)
def _sysv_lwork(dtype_char: str, n: int, lower: bool, hermitian: bool) -> int:
    """LAPACK's optimal workspace of ``?sysv``/``?hesv`` (the blocked ``?sytrf``), as SciPy asks
    for it: the wrappers' default, ``n``, runs the unblocked factorization."""
    query = _lapack(dtype_char)["hesv_lwork" if hermitian else "sysv_lwork"]
    work, info = query(n, lower=int(lower))
    return max(n, 1, lapack_lwork(work, dtype_char)) if info == 0 else max(n, 1)


def _view(a: np.ndarray) -> tuple[np.ndarray, bool]:
    if a.flags.f_contiguous:
        return a, False
    if a.flags.c_contiguous:
        return a.T, True
    return np.asfortranarray(a), False


#: Whether :func:`detect` reads a matrix that is not recognised as general from its first
#: entries in one call of the compiled extension (one walk over the lower triangle and its
#: mirror, in tiles: faster than the Python comparisons of a small matrix and than SciPy's
#: ``bandwidth`` and ``issymmetric``, two walks, of a large one) where it is built.
COMPILED_DETECT = True


def detect(a: np.ndarray) -> str:
    """SciPy's structure detection: diagonal, triangular, tridiagonal (order 4 and more),
    Hermitian, symmetric or general."""
    n = a.shape[0]
    if n > 1:  # the usual general matrix is recognised from a few entries
        x10, x01 = a.item(1, 0), a.item(0, 1)
        if (x10 != 0 and x01 != 0 and x10 != x01 and (a.dtype.kind != "c" or x10 != x01.conjugate())
                and (n <= 3 or a.item(2, 0) != 0 or a.item(0, 2) != 0)):
            return "gen"
    if COMPILED_DETECT:
        fast = fast_module()
        found = fast.structure(a) if fast is not None else NotImplemented
        if found is not NotImplemented:
            return found
    if n <= 12:
        rows = a.tolist()
        below_zero = all(rows[i][j] == 0 for i in range(1, n) for j in range(i))
        above_zero = all(rows[i][j] == 0 for i in range(n - 1) for j in range(i + 1, n))
        if below_zero and above_zero:
            return "diagonal"
        if above_zero:
            return "lower"
        if below_zero:
            return "upper"
        if n > 3 and all(rows[i][j] == 0 for i in range(n) for j in range(n) if abs(i - j) > 1):
            return "tri"
        if a.dtype.kind == "c" and all(rows[i][j] == rows[j][i].conjugate() for i in range(n) for j in range(i + 1)):
            return "her"
        if all(rows[i][j] == rows[j][i] for i in range(1, n) for j in range(i)):
            return "sym"
        return "gen"
    from scipy.linalg import bandwidth, ishermitian, issymmetric

    below, above = bandwidth(a)
    if below == above == 0:
        return "diagonal"
    if above == 0:
        return "lower"
    if below == 0:
        return "upper"
    if below <= 1 and above <= 1:
        return "tri"
    if a.dtype.kind == "c" and ishermitian(a):
        return "her"
    if issymmetric(a):
        return "sym"
    return "gen"


def _hermitian_norm1(a: np.ndarray, lower: bool) -> float:
    """1-norm of the Hermitian/symmetric matrix stored in one triangle of ``a``."""
    tri = np.tril(a) if lower else np.triu(a)
    full = tri + tri.conj().T - np.diag(np.diag(tri))
    return float(np.abs(full).sum(axis=0).max())


def _symmetric_norm1(a: np.ndarray, lower: bool) -> float:
    tri = np.tril(a) if lower else np.triu(a)
    full = tri + tri.T - np.diag(np.diag(tri))
    return float(np.abs(full).sum(axis=0).max())


@functools.lru_cache(maxsize=None)
def _condition(dtype_char: str) -> tuple[Any, Any]:
    r = _lapack(dtype_char)
    return r["lange"], r["gecon"]


def solve_general(a: np.ndarray, b: np.ndarray, transposed: bool, overwrite_a: bool = False,
                  overwrite_b: bool = False) -> tuple[np.ndarray, float]:
    """:func:`solve_slice` of a general matrix (pivoted LU), the common case kept short."""
    lange, gecon = _condition(a.dtype.char)
    getrf, getrs = routines(a.dtype, a.shape[0], "getrf", "getrs")  # large orders: NumPy's thread pool
    if a.flags.f_contiguous:
        view, t, norm = a, 0, "1"
    elif a.flags.c_contiguous:
        view, t, norm, overwrite_a = a.T, 1, "I", False
    else:
        view, t, norm, overwrite_a = np.asfortranarray(a), 0, "1", True  # a copy of ours: LU in place
    anorm = lange(norm, view)
    lu, piv, info = getrf(view, overwrite_a)
    if info > 0:
        raise Singular
    rcond = gecon(lu, anorm, norm)[0]
    return getrs(lu, piv, b, t ^ transposed, overwrite_b)[0], rcond


def _tridiagonal(a: np.ndarray, b: np.ndarray, transposed: bool, overwrite_b: bool) -> tuple[np.ndarray, float]:
    """:func:`solve_slice` of a tridiagonal matrix from its three diagonals, as SciPy's
    ``solve`` for this structure: ``?gttrf`` and ``?gttrs`` (``?gtsv`` for order 2, which
    SciPy's f2py ``?gttrf`` refuses; the same arithmetic), the condition from ``?gtcon``
    (from the general LU's ``?gecon`` for order 2)."""
    r = _lapack(a.dtype.char)
    dl, d, du = a.diagonal(-1), a.diagonal(), a.diagonal(1)
    if a.shape[0] == 2:
        x = r["gtsv"](*((du, d, dl) if transposed else (dl, d, du)), b, overwrite_b=int(overwrite_b))[3]
        norm = "I" if transposed else "1"
        lu, _, info = r["getrf"](a)
        if info > 0:
            raise Singular
        return x, r["gecon"](lu, r["lange"](norm, a), norm)[0]
    sums = np.abs(d)  # the 1-norm (the infinity norm when transposed): column j holds d[j], dl[j], du[j - 1]
    sums[:-1] += np.abs(du if transposed else dl)
    sums[1:] += np.abs(dl if transposed else du)
    dl, d, du, du2, ipiv, info = r["gttrf"](dl, d, du)
    if info > 0:
        raise Singular
    x, _ = r["gttrs"](dl, d, du, du2, ipiv, b, trans="T" if transposed else "N", overwrite_b=int(overwrite_b))
    return x, r["gtcon"](dl, d, du, du2, ipiv, float(sums.max()), norm="I" if transposed else "1")[0]


def _diagonal(a: np.ndarray) -> tuple[np.ndarray, float]:
    """The diagonal of a diagonal matrix and its reciprocal condition number (raises Singular)."""
    d = np.diagonal(a)
    if not d.all():
        raise Singular
    ad = np.abs(d)
    return d, float(ad.min() / ad.max())


def cholesky_first(kind: str, a: np.ndarray) -> bool:
    """Whether a matrix :func:`detect` found to be of structure ``kind`` is solved and inverted
    by Cholesky first, as SciPy 1.17 does: a real symmetric or complex Hermitian one (a complex
    symmetric one is not), falling back to ``?sytrf``/``?hetrf`` where it is not positive definite.

    Examples
    --------
    >>> import numpy as np
    >>> cholesky_first("sym", np.eye(2)), cholesky_first("sym", np.eye(2, dtype=complex))
    (True, False)
    """
    return kind == "her" or (kind == "sym" and a.dtype.kind != "c")


def solve_slice(a: np.ndarray, b: np.ndarray, kind: str, lower: bool, transposed: bool,
                detected: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
                cholesky_tried: bool = False) -> tuple[np.ndarray, float]:
    """Solve one ``(n, n)`` system (``b`` is ``(n,)`` or ``(n, k)``); returns ``(x, rcond)``.

    ``detected``: ``kind`` came from :func:`detect`, so a ``"sym"``/``"her"`` matrix is exactly
    symmetric/Hermitian and its 1-norm is the whole matrix's (one LAPACK ``lange`` call, not
    the norm rebuilt from one triangle), and where :func:`cholesky_first` says so it is solved
    as ``"pos"`` first (unless ``cholesky_tried``: that attempt failed already); on failure
    ``a`` (when overwritten) is restored before the symmetric solver runs."""
    if detected and not cholesky_tried and cholesky_first(kind, a):
        saved = a.copy(order="K") if overwrite_a else None
        try:
            return solve_slice(a, b, "pos", lower, transposed, False, overwrite_a, overwrite_b)
        except Singular:  # not positive definite (b is untouched: potrs runs only after potrf)
            if saved is not None:
                np.copyto(a, saved)
    if kind == "gen":
        return solve_general(a, b, transposed, overwrite_a, overwrite_b)
    if kind == "tri":
        return _tridiagonal(a, b, transposed, overwrite_b)
    r = _lapack(a.dtype.char)
    view, t = _view(a)
    if kind == "diagonal":
        d, rcond = _diagonal(a)
        return np.divide(b, d if b.ndim == 1 else d[:, None], out=b if overwrite_b else None), rcond
    if kind in ("upper", "lower"):
        low = (kind == "lower") != t
        x, info = r["trtrs"](view, b, lower=int(low), trans=int(t != transposed), overwrite_b=int(overwrite_b))
        if info > 0:
            raise Singular
        rcond = r["trcon"](view, norm="I" if t else "1", uplo="L" if low else "U", diag="N")[0]
        return x, rcond
    flag = lower != t
    conj = t and a.dtype.kind == "c" and kind in ("pos", "her")
    rhs = b.conj() if conj else b
    into = {"overwrite_a": int(overwrite_a and not t), "overwrite_b": int(overwrite_b and not conj)}
    if kind == "pos":
        norm = _hermitian_norm1(a, lower)
        c, info = r["potrf"](view, lower=int(flag), clean=0, overwrite_a=into["overwrite_a"])
        if info > 0:
            raise Singular
        rcond = r["pocon"](c, norm, uplo="L" if flag else "U")[0]
        x = r["potrs"](c, rhs, lower=int(flag), overwrite_b=into["overwrite_b"])[0]
    else:
        solver, con = (r["hesv"], r["hecon"]) if kind == "her" and a.dtype.kind == "c" else (r["sysv"], r["sycon"])
        if detected:
            norm = r["lange"]("1", view)
        else:
            norm = _hermitian_norm1(a, lower) if kind == "her" else _symmetric_norm1(a, lower)
        lwork = _sysv_lwork(a.dtype.char, a.shape[0], flag, solver is r.get("hesv"))
        ldu, ipiv, x, info = solver(view, rhs, lwork=lwork, lower=int(flag), **into)
        if info > 0:
            raise Singular
        rcond = con(ldu, ipiv, norm, lower=int(flag))[0]
    if conj:
        return np.conjugate(x, out=b if overwrite_b else None), rcond
    return x, rcond


def inv_slice(a: np.ndarray, kind: str, lower: bool, overwrite_a: bool = False,
              check_finite: bool = False) -> tuple[np.ndarray, float]:
    """Invert one ``(n, n)`` matrix; returns ``(inverse, rcond)`` (with ``overwrite_a``, the
    general LU's inverse is computed in ``a`` itself). ``check_finite`` (general kind only)
    raises SciPy's ``ValueError`` for NaN or infinity before anything is overwritten: a finite
    norm of ``a`` proves every entry finite, so only a norm that is not looks at the entries."""
    r = _lapack(a.dtype.char)
    view, t = _view(a)
    if kind == "diagonal":
        d, rcond = _diagonal(a)
        return np.diag(1 / d), rcond
    if kind in ("upper", "lower"):
        low = (kind == "lower") != t
        inv, info = r["trtri"](view, lower=int(low))
        if info > 0:
            raise Singular
        rcond = r["trcon"](view, norm="I" if t else "1", uplo="L" if low else "U", diag="N")[0]
        inv = np.tril(inv) if low else np.triu(inv)
        return (inv.T if t else inv), rcond
    if kind == "pos":
        flag = lower != t
        c, info = r["potrf"](view, lower=int(flag), clean=0)
        if info > 0:
            raise Singular
        rcond = r["pocon"](c, _hermitian_norm1(a, lower), uplo="L" if flag else "U")[0]
        tri, _ = r["potri"](c, lower=int(flag))
        tri = np.tril(tri) if flag else np.triu(tri)
        full = tri + tri.conj().T - np.diag(np.diag(tri).real)
        return (full.T if t else full), rcond
    norm = "I" if t else "1"
    anorm = r["lange"](norm, view)
    if check_finite and not anorm - anorm == 0 and not all_finite(a):
        raise ValueError("array must not contain infs or NaNs")
    lu, piv, info = r["getrf"](view, int(overwrite_a and not t))
    if info > 0:
        raise Singular
    rcond = r["gecon"](lu, anorm, norm)[0]
    inv = r["getri"](lu, piv, overwrite_lu=1)[0]  # lu is a copy of ours, or a itself when overwriting is asked
    return (inv.T if t else inv), rcond
