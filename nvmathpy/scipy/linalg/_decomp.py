"""Decompositions with SciPy's signatures and return conventions: ``lu``, ``lu_factor``,
``lu_solve``, ``cholesky``, ``cho_factor``, ``cho_solve``, ``qr``, ``svd``, ``svdvals``
(``eigh`` and ``eigvalsh`` are in :mod:`._eigh`). Factorizations call LAPACK directly (C-ordered
inputs through their transposed views where the result allows it); ``svd`` runs nvmathpy plans.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy as np

from ... import linalg as nl
from ...linalg.lapack import SCIPY_BELOW, fast_module, routines, scipys, threaded
from ...linalg.validation import factor_pair, lu_factors
from ._validate import (
    LinAlgError, all_finite, as_array, caller_stacklevel, lapack_common, lapack_one, linalg_warning, over_batch,
    to_caller_of,
)

__all__ = ["lu", "lu_factor", "lu_solve", "cholesky", "cho_factor", "cho_solve", "qr", "svd", "svdvals",
           "svd_matrix"]


@functools.lru_cache(maxsize=None)
def _funcs(char: str) -> dict[str, Any]:
    from scipy.linalg.lapack import get_lapack_funcs

    names = ("geqrf", "geqp3", "orgqr")
    return dict(zip(names, get_lapack_funcs(names, dtype=np.dtype(char))))


def _square2(a1: np.ndarray, what: str = "expected square matrix") -> None:
    if a1.ndim < 2 or a1.shape[-1] != a1.shape[-2]:
        raise ValueError(what)


# -- LU ---------------------------------------------------------------------------------------


def _compiled_takes(a: Any, name: str) -> bool:
    """Whether the compiled call (SciPy's ``name``: ``getrf``, ``potrf``, or ``potrs`` of a factor
    ``a``) may take ``a``: yes, but for a NumPy matrix of an order from :data:`SCIPY_BELOW` on
    whose routine is not SciPy's."""
    return (type(a) is not np.ndarray or a.ndim != 2 or a.shape[-1] < SCIPY_BELOW
            or scipys(lapack_one(a.dtype), a.shape[-1], name))


def _getrf_fortran(a2: np.ndarray, overwrite: bool = False) -> tuple[np.ndarray, np.ndarray, int]:
    """``getrf`` of ``A`` itself (a Fortran copy where needed: the factors must be of ``A``);
    ``overwrite`` factors a Fortran-ordered ``a2`` of the LAPACK dtype in place (read-only too,
    as SciPy's f2py wrapper does)."""
    dtype = lapack_one(a2.dtype)
    return routines(dtype, a2.shape[-1], "getrf")[0](np.asarray(a2, dtype), overwrite_a=int(overwrite))


def lu_factor(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Any, Any]:
    """Pivoted LU factors ``(lu, piv)`` as :func:`scipy.linalg.lu_factor` (``piv`` 0-based
    int32); an exactly singular matrix warns with ``LinAlgWarning``. ``overwrite_a=True``
    factors in place, as SciPy does, one Fortran-ordered matrix of a LAPACK dtype (even a
    read-only one, as SciPy's f2py wrapper writes it; ``lu`` is then ``a`` itself).

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import lu_factor
    >>> lu, piv = lu_factor(np.array([[1.0, 2.0], [3.0, 4.0]]))
    >>> piv
    array([1, 1], dtype=int32)
    """
    a1 = as_array(a, check_finite, "a")
    convert = to_caller_of(a)

    def core(a2: np.ndarray) -> tuple:
        if a2.ndim < 2:  # as SciPy: a 1 x n matrix, lu in the input's shape
            lu_, piv_ = core(a2.reshape(1, -1))
            return lu_.reshape(a2.shape), piv_
        if a2.size == 0:
            return np.empty(a2.shape, lapack_one(a2.dtype)), np.arange(0, dtype=np.int32)
        lu, piv, info = _getrf_fortran(a2, overwrite_a and a2 is a)
        if info > 0:
            warnings.warn(f"Diagonal number {info} is exactly zero. Singular matrix.", linalg_warning(),
                          stacklevel=caller_stacklevel())
        return lu, piv

    return convert(over_batch(core, [a1], [2], "lu_factor") if a1.ndim > 2 else core(a1))


def lu_solve(lu_and_piv: tuple[Any, Any], b: Any, trans: int = 0, overwrite_b: bool = False,
             check_finite: bool = True) -> Any:
    """Solve with factors from :func:`lu_factor`, as :func:`scipy.linalg.lu_solve`.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import lu_factor, lu_solve
    >>> lu_solve(lu_factor(np.array([[1.0, 2.0], [3.0, 4.0]])), np.array([5.0, 6.0]))
    array([-4. ,  4.5])
    """
    lu, piv = factor_pair(lu_and_piv, "lu_and_piv", "(lu, piv)")
    fast = fast_module()
    if fast is not None:  # the C extension declines (NotImplemented) what it does not handle
        x = fast.lu_solve(lu, piv, b, trans, check_finite)
        if x is not NotImplemented:
            return x
    if trans not in (0, 1, 2):
        raise ValueError(f"trans={trans!r} is not allowed; allowed: 0, 1, 2")
    lu = as_array(lu, False, "lu")
    if np.size(piv) == 0:  # as SciPy's: no pivots, of whatever dtype (np.array([]) is float64)
        piv = np.empty(0, np.int32)
    piv = lu_factors(lu, piv)  # square lu, pivots of its order in range: nothing out of bounds reaches getrs
    if type(lu) is np.ndarray and type(b) is np.ndarray and lu.ndim == 2 and b.ndim <= 2 and lu.dtype == b.dtype \
            and lu.dtype.char in "fdFD" and lu.dtype.isnative and lu.shape[0] == b.shape[0] and b.size \
            and type(piv) is np.ndarray:
        if check_finite:
            as_array(b, True, "b")
        x, info = routines(lu.dtype, lu.shape[0], "getrs")[0](lu, piv, b, trans)
        if info < 0:
            raise ValueError(f"illegal value in {-info}th argument of internal gesv|posv")
        return x
    lu1 = as_array(lu, False, "lu")
    piv1 = np.asarray(piv)
    b1 = as_array(b, check_finite, "b")
    convert = to_caller_of(b)

    def core(lu2: np.ndarray, piv2: np.ndarray, b2: np.ndarray) -> np.ndarray:
        if lu2.shape[0] != b2.shape[0]:
            raise ValueError(f"Shapes of lu {lu2.shape} and b {b2.shape} are incompatible")
        dtype = lapack_common(lu2.dtype, b2.dtype)
        if b2.size == 0:
            return np.empty(b2.shape, dtype)
        x, info = routines(dtype, lu2.shape[0], "getrs")[0](np.asarray(lu2, dtype), piv2, np.asarray(b2, dtype), trans)
        if info < 0:
            raise ValueError(f"illegal value in {-info}th argument of internal gesv|posv")
        return x

    return convert(over_batch(core, [lu1, piv1, b1], [2, 1, 2 if b1.ndim >= 2 else 1], "_lu_solve"))


def lu(a: Any, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True,
       p_indices: bool = False) -> tuple:
    """LU decomposition ``A = P L U`` as :func:`scipy.linalg.lu`: ``(p, l, u)``, or
    ``(pl, u)`` with ``permute_l``; ``p_indices`` gives ``p`` as row indices
    (``A = L[p] @ U``). Rectangular and batched inputs are accepted.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import lu
    >>> a = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> p, l, u = lu(a)
    >>> bool(np.allclose(p @ l @ u, a))
    True
    """
    fast = None if overwrite_a or not _compiled_takes(a, "getrf") else fast_module()
    if fast is not None:  # the C extension declines (NotImplemented) what it does not handle
        out = fast.lu(a, permute_l, p_indices, check_finite)
        if out is not NotImplemented:
            return out
    a1 = as_array(a, check_finite, "a")
    convert = to_caller_of(a)
    if a1.ndim < 2:
        raise ValueError("The input array must be at least two-dimensional.")
    dtype = lapack_one(a1.dtype)
    m, n = a1.shape[-2:]
    k = min(m, n)
    if a1.size == 0:  # SciPy's shapes: p (..., 0, 0) (indices (..., 0)), l (..., m, k), u (..., k, n)
        batch = a1.shape[:-2]
        low, up = np.empty(batch + (m, k), dtype), np.empty(batch + (k, n), dtype)
        if permute_l:
            return convert((low, up))
        p = np.empty(batch + (0,), np.int32) if p_indices else np.empty(batch + (0, 0), np.finfo(dtype).dtype)
        return convert((p, low, up))

    fast = fast_module()

    def core(a2: np.ndarray) -> tuple:
        lu_, piv, _ = _getrf_fortran(a2)
        out = NotImplemented if fast is None else fast.lu_unpack(lu_, piv, permute_l, p_indices)
        if out is not NotImplemented:  # the factors unpacked in one C call
            return out
        perm = np.arange(m)
        for i, j in enumerate(piv):
            perm[i], perm[j] = perm[j], perm[i]
        low = np.tril(lu_[:, :k], -1)
        low[np.arange(k), np.arange(k)] = 1
        up = np.triu(lu_[:k])
        inv_perm = np.argsort(perm)  # A = L[inv_perm] @ U
        if permute_l:
            return low[inv_perm], up
        if p_indices:
            return inv_perm.astype(np.int32), low, up
        p = np.zeros((m, m), np.finfo(dtype).dtype)
        p[perm, np.arange(m)] = 1
        return p, low, up

    return convert(tuple(over_batch(core, [a1], [2], "lu")) if a1.ndim > 2 else core(a1))


# -- Cholesky ------------------------------------------------------------------------------------


def _not_positive_definite(info: int) -> LinAlgError:
    return LinAlgError(f"{info}-th leading minor of the array is not positive definite")


def _potrf(a2: np.ndarray, lower: bool, clean: bool, overwrite: bool = False) -> np.ndarray:
    """Cholesky factor of one matrix in ``A``'s coordinates (transposed view for C order);
    ``overwrite`` factors a Fortran-ordered ``a2`` of the LAPACK dtype in place, as SciPy's."""
    dtype = lapack_one(a2.dtype)
    a2 = np.asarray(a2, dtype)
    potrf = routines(dtype, a2.shape[-1], "potrf")[0]
    if a2.flags.c_contiguous and not a2.flags.f_contiguous:
        c, info = potrf(a2.T, lower=int(not lower), clean=int(clean))
        c = c.T
    else:
        in_place = int(overwrite and a2.flags.f_contiguous)
        c, info = potrf(a2, lower=int(lower), clean=int(clean), overwrite_a=in_place)
    if info > 0:
        raise _not_positive_definite(info)
    if info < 0:
        raise ValueError(f"LAPACK reported an illegal value in {-info}-th argument on entry to \"POTRF\".")
    return c


def cholesky(a: Any, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """Cholesky factor as :func:`scipy.linalg.cholesky` (upper ``U`` by default, zeros in
    the other triangle). ``overwrite_a=True`` factors in place, as SciPy does, one
    Fortran-ordered matrix of a LAPACK dtype (even a read-only one, as SciPy's f2py wrapper
    writes it; the result is then ``a`` itself).

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import cholesky
    >>> cholesky(np.array([[4.0, 2.0], [2.0, 5.0]]))
    array([[2., 1.],
           [0., 2.]])
    """
    return _cholesky_factor(a, lower, overwrite_a, check_finite, clean=True, name="cholesky")


def _cholesky_factor(a: Any, lower: bool, overwrite_a: bool, check_finite: bool, clean: bool,
                     name: str = "cholesky") -> Any:
    fast = fast_module() if _compiled_takes(a, "potrf") else None
    if fast is not None:  # the C extension declines (NotImplemented) what it does not handle
        c = fast.cholesky(a, lower, clean, overwrite_a, check_finite)
        if type(c) is int:
            raise _not_positive_definite(c)
        if c is not NotImplemented:
            return c
    a1 = as_array(a, check_finite, "a")
    convert = to_caller_of(a)
    if a1.ndim == 0:  # as SciPy: a scalar is a 1 x 1 matrix
        a1 = a1.reshape(1, 1)
    _square2(a1, f"Input array is expected to be square but has the shape: {a1.shape}.")

    def core(a2: np.ndarray) -> np.ndarray:
        if a2.size == 0:
            return np.empty(a2.shape, lapack_one(a2.dtype))
        return _potrf(a2, lower, clean, overwrite_a and a2 is a)

    return convert(over_batch(core, [a1], [2], name) if a1.ndim > 2 else core(a1))


def cho_factor(a: Any, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> tuple:
    """``(c, lower)`` for :func:`cho_solve`, as :func:`scipy.linalg.cho_factor` (the other
    triangle of ``c`` holds arbitrary data); ``overwrite_a`` as in :func:`cholesky`.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import cho_factor, cho_solve
    >>> c = cho_factor(np.array([[4.0, 2.0], [2.0, 5.0]]))
    >>> cho_solve(c, np.array([6.0, 7.0]))
    array([1., 1.])
    """
    c = _cholesky_factor(a, lower, overwrite_a, check_finite, clean=False, name="cho_factor")
    batch = tuple(c.shape[:-2])
    return c, (np.full(batch, bool(lower)) if batch else lower)  # a batch: one flag per matrix, as SciPy's


def _one_flag(lower: Any) -> bool:
    """``cho_solve``'s ``lower``: a bool, or a batch of equal flags (``ValueError`` otherwise)."""
    flags = np.asarray(lower, dtype=bool)
    if flags.size and flags.min() != flags.max():
        raise ValueError("cho_solve: lower must be the same for every matrix of the batch")
    return bool(flags.flat[0]) if flags.size else False


def cho_solve(c_and_lower: tuple[Any, bool], b: Any, overwrite_b: bool = False, check_finite: bool = True) -> Any:
    """Solve ``A x = b`` with :func:`cho_factor`'s result, as :func:`scipy.linalg.cho_solve`
    (``lower`` may be a batch of flags, as SciPy's batched ``cho_factor`` returns, all alike)."""
    c, lower = factor_pair(c_and_lower, "c_and_lower", "(c, lower)")
    lower = _one_flag(lower)
    fast = fast_module() if _compiled_takes(c, "potrs") else None
    if fast is not None:  # the C extension declines (NotImplemented) what it does not handle
        x = fast.cho_solve(c, b, lower, check_finite)
        if x is not NotImplemented:
            return x
    if type(c) is np.ndarray and type(b) is np.ndarray and c.ndim == 2 and b.ndim <= 2 and c.dtype == b.dtype \
            and c.dtype.char in "fdFD" and c.dtype.isnative and c.flags.f_contiguous \
            and c.shape[0] == c.shape[1] == b.shape[0] and b.size:
        if check_finite and not (all_finite(c) and all_finite(b)):
            raise ValueError("array must not contain infs or NaNs")
        x, info = routines(c.dtype, c.shape[0], "potrs")[0](c, b, int(lower))
        if info != 0:
            raise ValueError(f"illegal value in {-info}th argument of internal potrs")
        return x
    c1 = as_array(c, check_finite, "c")
    b1 = as_array(b, check_finite, "b")
    convert = to_caller_of(b)

    def core(c2: np.ndarray, b2: np.ndarray) -> np.ndarray:
        if c2.ndim != 2 or c2.shape[0] != c2.shape[1]:
            raise ValueError("The factored matrix c is not square.")
        if c2.shape[1] != b2.shape[0]:
            raise ValueError(f"incompatible dimensions ({c2.shape} and {b2.shape})")
        dtype = lapack_common(c2.dtype, b2.dtype)
        if b2.size == 0:
            return np.empty(b2.shape, dtype)
        c2, b2 = np.asarray(c2, dtype), np.asarray(b2, dtype)
        potrs = routines(dtype, c2.shape[0], "potrs")[0]
        if c2.flags.c_contiguous and not c2.flags.f_contiguous:
            if dtype.kind == "c":  # c.T is the factor of conj(A)
                return potrs(c2.T, b2.conj(), int(not lower))[0].conj()
            return potrs(c2.T, b2, int(not lower))[0]
        return potrs(c2, b2, int(lower))[0]

    return convert(over_batch(core, [c1, b1], [2, 2 if b1.ndim >= 2 else 1], "_cho_solve"))


# -- QR ------------------------------------------------------------------------------------------


def qr(a: Any, overwrite_a: bool = False, lwork: int | None = None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True) -> tuple:
    """QR decomposition as :func:`scipy.linalg.qr`: modes ``'full'`` ``(Q, R)``, ``'economic'``
    ``(Q, R)`` reduced, ``'r'`` ``(R,)``, ``'raw'`` ``((qr, tau), R)``; ``P`` appended when
    ``pivoting``. ``lwork=None`` (or -1) uses the optimal workspace (queried once per shape);
    another ``lwork`` is LAPACK's, checked as SciPy's is. ``overwrite_a=True`` lets the
    factorization work in ``a`` where it is Fortran-ordered of the computation dtype, as SciPy's.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import qr
    >>> a = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> q, r = qr(a)
    >>> q.shape, r.shape, bool(np.allclose(q @ r, a))
    ((3, 3), (3, 2), True)
    >>> len(qr(a, mode="r"))
    1
    """
    code = _QR_MODES.get(mode) if isinstance(mode, str) else None
    if code is None:
        raise ValueError(f"Mode argument should be one of ['full', 'r', 'economic', 'raw'], not {mode!r}")
    if not (pivoting or overwrite_a) and lwork is None:
        fast = fast_module()
        if fast is not None:  # the C extension declines (NotImplemented) what it does not handle
            out = threaded("geqrf", a, lambda: fast.qr(a, code, check_finite))
            if out is not NotImplemented:
                return out
    a1 = as_array(a, check_finite, "a")
    convert = to_caller_of(a)
    if a1.ndim < 2:
        raise ValueError("expected a 2-D array")
    dtype = lapack_one(a1.dtype)
    m, n = a1.shape[-2:]
    k = min(m, n)
    funcs = _funcs(dtype.char)

    def core(a2: np.ndarray) -> tuple:
        if a2.size == 0:
            if mode not in ("economic", "raw"):
                q, r = np.eye(m, dtype=dtype), np.empty((m, n), dtype)
            else:
                q, r = np.empty((m, k), dtype), np.empty((k, n), dtype)
            rj = (r, np.arange(n, dtype=np.int32)) if pivoting else (r,)
            if mode == "r":
                return rj
            if mode == "raw":
                return ((np.empty((m, n), dtype), np.zeros(k, dtype)),) + rj
            return (q,) + rj
        a2 = np.asarray(a2, dtype)
        if pivoting:
            work = _qr_lwork("geqp3", dtype.char, m, n) if lwork in (None, -1) else lwork
            qr_, jpvt, tau, _, info = funcs["geqp3"](a2, lwork=work, overwrite_a=overwrite_a)
            jpvt -= 1
        else:
            work = _qr_lwork("geqrf", dtype.char, m, n) if lwork in (None, -1) else lwork
            qr_, tau, _, info = funcs["geqrf"](a2, lwork=work, overwrite_a=overwrite_a)
        if info < 0:
            raise ValueError(f"illegal value in {-info}th argument of internal geqrf")
        r = np.triu(qr_) if mode not in ("economic", "raw") or m < n else np.triu(qr_[:n, :])
        rj = (r, jpvt) if pivoting else (r,)
        if mode == "r":
            return rj
        if mode == "raw":
            return ((qr_, tau),) + rj
        orgqr = funcs["orgqr"]
        if m < n:
            q = qr_[:, :m]
        elif mode == "economic":
            q = qr_
        else:
            q = np.empty((m, m), dtype, order="F")
            q[:, :n] = qr_
        work = _qr_lwork("orgqr", dtype.char, m, q.shape[1], k) if lwork in (None, -1) else lwork
        q = orgqr(q, tau, lwork=work, overwrite_a=int(m >= n))[0]
        return (q,) + rj

    if a1.ndim == 2:
        return convert(core(a1))
    return convert(over_batch(core, [a1], [2], "qr"))


#: ``qr``'s modes and the compiled extension's code for each.
_QR_MODES = {"full": 0, "economic": 1, "r": 2, "raw": 3}


@functools.lru_cache(maxsize=256)
def _qr_lwork(name: str, char: str, m: int, n: int, k: int = 0) -> int:
    """LAPACK's optimal workspace of ``name`` (``geqrf``, ``geqp3``, ``orgqr``: ``k`` reflectors)."""
    a = np.empty((m, n), np.dtype(char), order="F")
    out = _funcs(char)[name](a, np.zeros(k, a.dtype), lwork=-1) if name == "orgqr" else _funcs(char)[name](a, lwork=-1)
    return max(1, int(np.real(out[-2][0])))


# -- svd through plans -----------------------------------------------------------------------------

def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd") -> Any:
    """Singular value decomposition as :func:`scipy.linalg.svd`: ``(U, s, Vh)`` or ``s``.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import svd
    >>> u, s, vh = svd(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> s
    array([2., 1.])
    """
    if not isinstance(lapack_driver, str):
        raise TypeError(f"lapack_driver must be a string, not {type(lapack_driver).__name__}")
    if lapack_driver not in ("gesdd", "gesvd"):
        raise ValueError(f'lapack_driver must be "gesdd" or "gesvd", not "{lapack_driver}"')
    fast = fast_module()
    if fast is not None:  # the C extension declines (NotImplemented) what it does not handle
        out = threaded("gesdd", a, lambda: fast.svd(a, full_matrices, compute_uv, lapack_driver == "gesvd",
                                                     check_finite))
        if out is not NotImplemented:
            return out
    a1 = as_array(a, check_finite, "a")
    convert = to_caller_of(a)
    if a1.ndim < 2:
        raise ValueError("expected matrix")
    if compute_uv:  # as SciPy's: U or Vh with more entries than LAPACK's 32-bit indices reach
        m, n = a1.shape[-2:]
        entries = max(m, n) ** 2 if full_matrices else max(m, n) * min(m, n)
        if entries > np.iinfo(np.int32).max:
            raise ValueError(f"svd: U or Vh of {entries} entries would overflow LAPACK's 32-bit indexing; "
                             "use numpy.linalg.svd, or full_matrices=False where it is smaller")
    if a1.ndim > 2 and 0 in a1.shape[:-2]:
        raise ValueError(f"`{'svd' if compute_uv else 'svdvals'}` does not support zero-size batches.")
    a1 = a1.astype(lapack_one(a1.dtype), copy=False)
    out = nl.svd(a1, full_matrices=full_matrices, compute_uv=compute_uv, driver=lapack_driver)
    return convert((list(out) if a1.ndim > 2 else tuple(out)) if compute_uv else out)  # SciPy: a list for a batch


def svd_matrix(a: np.ndarray, full_matrices: bool, driver: str) -> tuple:
    """``(u, s, vh)`` of one non-empty NumPy matrix of a LAPACK dtype holding no NaN or
    infinity, by ``driver`` (``"gesdd"`` or ``"gesvd"``): the compiled extension's one C call
    where it is available, else :func:`nvmathpy.linalg.svd`."""
    fast = fast_module()
    out = NotImplemented if fast is None else threaded("gesdd", a, lambda: fast.svd(a, full_matrices, True,
                                                                                   driver == "gesvd", False))
    return tuple(nl.svd(a, full_matrices=full_matrices, driver=driver)) if out is NotImplemented else out


def svdvals(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """Singular values (descending), as :func:`scipy.linalg.svdvals`.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import svdvals
    >>> svdvals(np.array([[0.0, 2.0], [1.0, 0.0]]))
    array([2., 1.])
    """
    return svd(a, compute_uv=False, overwrite_a=overwrite_a, check_finite=check_finite)
