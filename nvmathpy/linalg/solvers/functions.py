"""One-call solver functions with NumPy / Array-API semantics, batched over leading
dimensions, each backed by a plan from the module's plan cache.

A call builds a key from the operands' shapes, dtypes, layout and options; a cached plan of
that key is checked out, pointed at the new operands and run, then given back (a miss builds
and plans a new one). ``plan_cache()`` returns the cache (``resize``, ``clear``, ``hits``).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ...errors import InvalidOperandError
from ._cached import CACHE, EighResult, SlogdetResult, cache_key, plan_cache, run_cached
from ._dispatch import cuda_function, wants_cuda
from . import _one_matrix as one_matrix, _small_stacks as small_stacks
from .cpu._factored import check_trans
from .cpu._lapack import lapack_dtype
from .cpu._numpy_lapack import FROM_ORDER, determinant
from ._operands import as_stack, host_arrays, solve_operands
from ..validation import check_dtype, factor_pair, lu_factors
from .plans.cholesky import Cholesky
from .plans.eigh import DIRECT_UP_TO, Eigh, eigh_matrix
from .plans.lstsq import Lstsq
from .plans.lu import LU
from .plans.qr import QR
from .plans.solve import Solve
from .plans.svd import SVD, svd_matrix
from .plans.triangular import TriangularSolve

__all__ = [
    "solve", "inv", "det", "slogdet", "cholesky", "qr", "eigh", "eigvalsh", "svd", "svdvals", "lstsq",
    "solve_triangular", "lu_factor", "lu_solve", "cho_factor", "cho_solve", "plan_cache",
    "EighResult", "SlogdetResult",
]

_LAPACK_CHARS = "fdFD"
_ndarray = np.ndarray


def _same(x: Any) -> Any:
    """The results of NumPy operands: NumPy arrays already."""
    return x


def _as_subclass(x: Any, like: Any) -> Any:
    """``x`` as the ndarray subclass of operand ``like`` (through its ``__array_wrap__``), as
    NumPy's linalg returns results; plain arrays and other packages' arrays pass unchanged."""
    if type(like) is not _ndarray and isinstance(like, _ndarray):
        return like.__array_wrap__(x)
    return x


def _cuda_route(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Route a call whose operand lives on a GPU (or ``execution="cuda"``) to the function of
    the same name in :mod:`.cuda._functions`; NumPy calls pay one type check."""
    name = fn.__name__
    factors = name in ("lu_solve", "cho_solve")

    @functools.wraps(fn)
    def routed(*args: Any, **kwargs: Any) -> Any:
        execution = kwargs.get("execution")
        operand = args[0] if args else None
        if factors and isinstance(operand, tuple) and operand:
            operand = operand[0]
        if execution is not None or (type(operand) is not _ndarray and operand is not None):
            if wants_cuda(operand, execution):
                return cuda_function(name)(*args, **kwargs)
        return fn(*args, **kwargs)

    return routed


# -- solve / inv ------------------------------------------------------------------------------


def solve(a: Any, b: Any, /, *, execution: Any = None) -> Any:
    """Solve ``a @ x = b`` (NumPy 2 rules: ``b`` is a vector only when 1-D; batches broadcast).

    Parameters
    ----------
    a
        ``(..., n, n)`` matrices.
    b
        ``(n,)`` or ``(..., n, k)``.
    execution
        ``None``, ``"cpu"`` or :class:`~nvmathpy.ExecutionCPU`.

    Raises
    ------
    numpy.linalg.LinAlgError
        If a matrix is singular (the message names the batch element).

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg import solve
    >>> solve(np.array([[3.0, 1.0], [1.0, 2.0]]), np.array([9.0, 8.0]))
    array([2., 3.])
    """
    # The common NumPy case (one dtype, a batch of b matching a's) skips wrapping, casting and
    # broadcasting: its key is built from attributes alone, a cache hit runs at once.
    if (execution is None and type(a) is _ndarray and type(b) is _ndarray and b.dtype == a.dtype
            and a.dtype.char in _LAPACK_CHARS and a.dtype.isnative and a.ndim > 1
            and (b.ndim == a.ndim and a.shape[:-2] == b.shape[:-2] or a.ndim == 2 and b.ndim == 1)):
        if a.shape[-1] == a.shape[-2] == b.shape[a.ndim - 2] > 0 and a.size and b.size:
            if a.ndim == 2 and one_matrix.takes(a) and (x := one_matrix.solve(a, b)) is not None:
                return x
            key = ("solve-nd", a.shape, b.shape, a.dtype.char, a.flags.c_contiguous, b.flags.c_contiguous)
            return _solve_cached(key, a, b)
    return _solve_general(a, b, execution)


def _solve_cached(key: tuple, a: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """Run the cached :class:`Solve` plan of ``key`` on ``a`` and ``b`` (NumPy arrays the key
    describes: the plan reads them at run time, no wrapping or validation), building it on a miss."""
    plan = CACHE.take(key) or Solve(a, b).plan()
    plan._a, plan._b = a, b
    try:
        return plan._run()
    finally:
        plan._a = plan._b = None  # do not keep the caller's arrays alive in the cache
        CACHE.give(key, plan)


def _solve_general(a: Any, b: Any, execution: Any) -> Any:
    if (execution is not None or type(a) is not _ndarray) and wants_cuda(a, execution):
        return cuda_function("solve")(a, b, execution=execution)
    arrays, to_caller, _ = host_arrays(execution, a=a, b=b)
    a1, b1 = arrays["a"], arrays["b"]
    a1, b2, dtype, vector = solve_operands(as_stack(a1, "a"), b1, np.broadcast_to)
    if a1.size == 0 or b2.size == 0:
        x = np.empty(b2.shape, dtype)
    else:
        key = cache_key("solve", a1, b2.shape, execution is None)
        x = run_cached(key, lambda: Solve(a1, b2, execution=execution), lambda p: p._set(a1, b2), lambda p: p._run(),
                       execution=execution)
    return _as_subclass(to_caller(x[..., 0] if vector else x), b)


@_cuda_route
def inv(a: Any, /, *, execution: Any = None) -> Any:
    """The inverse of each matrix of ``(..., n, n)`` ``a``.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg import inv
    >>> inv(np.array([[1.0, 2.0], [3.0, 4.0]]))
    array([[-2. ,  1. ],
           [ 1.5, -0.5]])
    """
    if execution is None and _plain_square(a):  # the common NumPy case: no wrapping, a key from attributes
        if a.ndim == 2 and one_matrix.takes(a) and (x := one_matrix.inv(a)) is not None:
            return x
        return _solve_cached(("inv-nd", a.shape, a.dtype.char, a.flags.c_contiguous), a, None)
    arrays, to_caller, _ = host_arrays(execution, a=a)
    a1 = as_stack(arrays["a"], "a")
    if a1.size == 0:
        return _as_subclass(to_caller(np.empty(a1.shape, a1.dtype)), a)
    key = cache_key("inv", a1)
    out = run_cached(key, lambda: Solve(a1, execution=execution), lambda p: p._set(a1, None), lambda p: p._run(),
                     execution=execution)
    return _as_subclass(to_caller(out), a)


# -- determinants -------------------------------------------------------------------------------


def _plain_square(a: Any) -> bool:
    """A non-empty NumPy array of square matrices in a LAPACK dtype (the one-call fast paths)."""
    return _plain(a) and a.shape[-1] == a.shape[-2]


def _plain(a: Any) -> bool:
    """A non-empty NumPy array of matrices in a LAPACK dtype, native byte order: what the
    one-call fast paths take as it is, without wrapping or validation."""
    return (type(a) is _ndarray and a.dtype.char in _LAPACK_CHARS and a.dtype.isnative and a.ndim > 1
            and a.size > 0)


def _one_small(a: Any, execution: Any) -> bool:
    """One small square NumPy matrix of a LAPACK dtype on the CPU: what :mod:`._one_matrix`'s
    direct paths of the factorizations take."""
    return execution is None and _plain_square(a) and a.ndim == 2 and one_matrix.takes(a, factor=True)


def _numpy_determinant(a: Any, execution: Any) -> bool:
    """Whether :func:`det`/:func:`slogdet` of ``a`` are NumPy's own: its gufuncs factor every
    matrix with LAPACK's ``getrf`` in one C loop, which a plan (one LAPACK call per matrix from
    Python) cannot beat below :data:`~.cpu._numpy_lapack.FROM_ORDER`, one matrix or a batch;
    from there on the plan's LU (recursive or with look-ahead
    for real orders up to 2048, see :func:`.cpu._lookahead_lu.getrf_order`) is the faster one."""
    return execution is None and _plain_square(a) and a.shape[-1] < FROM_ORDER


def _lu_plan(a: Any, execution: Any) -> tuple[Any, Callable[[Any], Any], tuple]:
    arrays, to_caller, _ = host_arrays(execution, a=a)
    a1 = as_stack(arrays["a"], "a")
    return a1, to_caller, cache_key("lu", a1)


@_cuda_route
def det(a: Any, /, *, execution: Any = None) -> Any:
    """Determinant(s) of ``(..., n, n)`` ``a`` (from an LU factorization).

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg import det
    >>> round(float(det(np.array([[1.0, 2.0], [3.0, 4.0]]))), 12)
    -2.0
    """
    if _numpy_determinant(a, execution):
        return determinant(a, False)
    a1, to_caller, key = _lu_plan(a, execution)
    if a1.size == 0:  # order 0 (determinant 1) or an empty batch
        return to_caller(np.ones(a1.shape[:-2], a1.dtype)[()])
    return to_caller(run_cached(key, lambda: LU(a1), lambda p: p.reset_operands(a1), lambda p: p.execute().det(),
                                execution=execution))


@_cuda_route
def slogdet(a: Any, /, *, execution: Any = None) -> SlogdetResult:
    """``(sign, logabsdet)`` of the determinant(s) of ``a``; robust to overflow.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg import slogdet
    >>> sign, logdet = slogdet(np.diag([1e200, -1e200]))
    >>> float(sign), round(float(logdet), 6)
    (-1.0, 921.034037)
    """
    if _numpy_determinant(a, execution):
        return SlogdetResult(*determinant(a, True))
    a1, to_caller, key = _lu_plan(a, execution)
    if a1.size == 0:  # order 0 (sign 1, log 0) or an empty batch
        ones = np.ones(a1.shape[:-2], a1.dtype)[()]
        return SlogdetResult(to_caller(ones), to_caller(np.zeros(a1.shape[:-2], np.finfo(a1.dtype).dtype)[()]))
    sign, logabs = run_cached(key, lambda: LU(a1), lambda p: p.reset_operands(a1), lambda p: p.execute().slogdet(),
                              execution=execution)
    return SlogdetResult(to_caller(sign), to_caller(logabs))


# -- factorizations -------------------------------------------------------------------------------


@_cuda_route
def cholesky(a: Any, /, *, upper: bool = False, execution: Any = None) -> Any:
    """Cholesky factor of Hermitian positive definite ``a``: lower ``L`` with ``a = L L^H``
    (``upper=True``: ``U`` with ``a = U^H U``). Only that triangle of ``a`` is read.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg import cholesky
    >>> cholesky(np.array([[4.0, 2.0], [2.0, 5.0]]))
    array([[2., 0.],
           [1., 2.]])
    """
    if execution is None and _plain_square(a) and one_matrix.takes(a, factor=a.ndim == 2):  # small: no plan
        c = one_matrix.cholesky(a, upper) if a.ndim == 2 else small_stacks.cholesky(a, upper)
        if c is not None:
            return c
    arrays, to_caller, _ = host_arrays(execution, a=a)
    a1 = as_stack(arrays["a"], "a")
    if a1.shape[-1] == 0:
        return to_caller(np.empty(a1.shape, a1.dtype))
    key = cache_key("cholesky", a1, bool(upper))
    return to_caller(run_cached(key, lambda: Cholesky(a1, lower=not upper), lambda p: p.reset_operands(a1),
                                lambda p: p.execute().factor, execution=execution))


@_cuda_route
def qr(a: Any, /, *, mode: str = "reduced", execution: Any = None) -> Any:
    """QR decomposition (``mode`` ``"reduced"``, ``"complete"``, ``"r"`` or ``"raw"``) of
    ``(..., m, n)`` ``a``. ``"raw"`` returns NumPy's ``(h, tau)``: LAPACK's Householder
    reflectors, ``h`` ``(..., n, m)`` (transposed, as LAPACK leaves it), ``tau`` ``(..., k)``.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg import qr
    >>> q, r = qr(np.array([[3.0, 1.0], [4.0, 2.0]]))
    >>> bool(np.allclose(q @ r, [[3, 1], [4, 2]]))
    True
    >>> h, tau = qr(np.array([[3.0, 1.0], [4.0, 2.0], [0.0, 1.0]]), mode="raw")
    >>> h.shape, tau.shape
    ((2, 3), (2,))
    """
    if execution is None and _plain(a) and one_matrix.takes(a, factor=a.ndim == 2):  # small: no plan
        result = one_matrix.qr(a, mode) if a.ndim == 2 else small_stacks.qr(a, mode)
        if result is not None:
            return result
    arrays, to_caller, _ = host_arrays(execution, a=a)
    a1 = as_stack(arrays["a"], "a", square=False)
    if mode == "raw":  # the factors of mode "r"'s plan, which it keeps per matrix
        key = cache_key("qr", a1, "r")
        return to_caller(run_cached(key, lambda: QR(a1, mode="r"), lambda p: p.reset_operands(a1),
                                    lambda p: _householder(p, a1), execution=execution))
    key = cache_key("qr", a1, mode)
    return to_caller(run_cached(key, lambda: QR(a1, mode=mode), lambda p: p.reset_operands(a1), lambda p: p._run(),
                                execution=execution))


def _householder(plan: QR, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(h, tau)`` of ``a`` by ``plan`` (mode ``"r"``): each matrix's ``geqrf`` output transposed
    (Fortran order read as C order) and its reflector scales, stacked in ``a``'s batch shape."""
    plan._run()
    m, n = a.shape[-2:]
    parts = plan._state  # (qr, tau, ...) per matrix, qr Fortran-ordered (m, n)
    h = np.empty((len(parts), n, m), a.dtype)
    tau = np.empty((len(parts), min(m, n)), a.dtype)
    for i, part in enumerate(parts):
        h[i], tau[i] = part[0].T, part[1]
    return h.reshape(a.shape[:-2] + (n, m)), tau.reshape(a.shape[:-2] + (min(m, n),))


def _eigh(a: Any, uplo: str, vectors: bool, execution: Any, b: Any, itype: int, subset_by_index: Any,
          subset_by_value: Any, driver: str | None) -> Any:
    if uplo not in ("L", "U"):
        if uplo not in ("l", "u"):
            raise InvalidOperandError(f"UPLO={uplo!r} is not allowed; allowed: 'L', 'U' (either case)")
        uplo = uplo.upper()
    sbi = None if subset_by_index is None else tuple(subset_by_index)
    sbv = None if subset_by_value is None else tuple(subset_by_value)
    options = (uplo, vectors, itype, sbi, sbv, driver)
    if (execution is None and b is None and sbi is None and sbv is None and driver is None and itype == 1
            and _plain_square(a) and a.shape[-1] <= DIRECT_UP_TO):  # small matrices: no plan
        out = eigh_matrix(a, uplo == "L", vectors) if a.ndim == 2 else small_stacks.eigh(a, uplo == "L", vectors)
        if out is not None:
            return EighResult(*out) if vectors else out
    if execution is None and _plain_square(a) and (b is None or type(b) is _ndarray and b.dtype == a.dtype):
        # the common NumPy case: no wrapping, a key from attributes
        a1, b1, to_caller = a, b, _same
        key = ("eigh-nd", a.shape, a.dtype.char, a.flags.c_contiguous, a.flags.f_contiguous,
               None if b is None else b.shape, *options)
    else:
        arrays, to_caller, _ = host_arrays(execution, a=a) if b is None else host_arrays(execution, a=a, b=b)
        a1, b1 = as_stack(arrays["a"], "a"), arrays.get("b")
        key = cache_key("eigh", a1, None if b1 is None else (b1.shape, str(b1.dtype)), *options)
    out = run_cached(key, lambda: Eigh(a1, b1, eigvals_only=not vectors, lower=uplo == "L", itype=itype,
                                       subset_by_index=sbi, subset_by_value=sbv, driver=driver),
                     lambda p: p.reset_operands(a1, b1), lambda p: p._run(), execution=execution)
    return to_caller(EighResult(*out) if vectors else out)


@_cuda_route
def eigh(a: Any, /, UPLO: str = "L", *, b: Any = None, itype: int = 1, subset_by_index: Any = None,
         subset_by_value: Any = None, driver: str | None = None, execution: Any = None) -> EighResult:
    """Eigenvalues (ascending) and eigenvectors of Hermitian ``a`` (``(..., n, n)``).

    Parameters
    ----------
    a
        ``(..., n, n)`` Hermitian matrices; only the triangle ``UPLO`` names is read.
    UPLO
        ``"L"`` (default) or ``"U"``, in either case (as NumPy).
    b
        ``(..., n, n)`` Hermitian positive definite matrices of ``a``'s shape: the generalized
        problem (as :class:`~nvmathpy.linalg.Eigh`; CPU operands only).
    itype
        Generalized problem type: 1 ``A v = w B v``, 2 ``A B v = w v``, 3 ``B A v = w v``.
    subset_by_index
        ``(lo, hi)``: only eigenvalues ``lo..hi`` (inclusive, 0-based; CPU operands only).
    subset_by_value
        ``(lo, hi)``: only eigenvalues in ``(lo, hi]`` (CPU operands only).
    driver
        Force one LAPACK driver (see :class:`~nvmathpy.linalg.Eigh`); ``None`` lets
        wisdom/autotune/heuristic choose (CPU operands only).
    execution
        ``None``, ``"cpu"``, ``"cuda"`` or an execution space.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg import eigh
    >>> w, v = eigh(np.array([[2.0, 1.0], [1.0, 2.0]]))
    >>> w
    array([1., 3.])
    >>> eigh(np.diag([1.0, 2.0, 3.0]), subset_by_index=(1, 2)).eigenvalues
    array([2., 3.])
    """
    return _eigh(a, UPLO, True, execution, b, itype, subset_by_index, subset_by_value, driver)


@_cuda_route
def eigvalsh(a: Any, /, UPLO: str = "L", *, b: Any = None, itype: int = 1, subset_by_index: Any = None,
             subset_by_value: Any = None, driver: str | None = None, execution: Any = None) -> Any:
    """Eigenvalues (ascending) of Hermitian ``a``; the parameters are :func:`eigh`'s.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg import eigvalsh
    >>> eigvalsh(np.array([[2.0, 1.0], [1.0, 2.0]]))
    array([1., 3.])
    """
    return _eigh(a, UPLO, False, execution, b, itype, subset_by_index, subset_by_value, driver)


@_cuda_route
def svd(a: Any, /, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False, *,
        driver: str | None = None, execution: Any = None) -> Any:
    """Singular value decomposition ``a = U diag(S) Vh`` of ``(..., m, n)`` ``a``
    (``hermitian`` is accepted for NumPy compatibility; the general algorithm is used).
    ``driver``: ``"gesdd"`` or ``"gesvd"`` forces that LAPACK driver (CPU operands only);
    ``None`` lets wisdom/autotune/heuristic choose.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg import svd
    >>> svd(np.array([[0.0, 2.0], [1.0, 0.0]])).S
    array([2., 1.])
    """
    options = (bool(full_matrices), bool(compute_uv), driver)
    if execution is None and _plain(a) and a.ndim == 2:  # one matrix: no plan
        if driver in ("gesdd", "gesvd"):
            return svd_matrix(a, full_matrices, compute_uv, driver)
        if driver is None and one_matrix.takes(a):  # small: a plan costs more than the call
            result = one_matrix.svd(a, full_matrices, compute_uv)
            return result if result is not None else svd_matrix(a, full_matrices, compute_uv, "gesdd")
    if (execution is None and driver is None and _plain(a) and one_matrix.takes(a)
            and (result := small_stacks.svd(a, full_matrices, compute_uv)) is not None):
        return result
    if execution is None and _plain(a):  # the common NumPy case: no wrapping, a key from attributes
        a1, to_caller = a, _same
        key = ("svd-nd", a.shape, a.dtype.char, a.flags.c_contiguous, a.flags.f_contiguous, *options)
    else:
        arrays, to_caller, _ = host_arrays(execution, a=a)
        a1 = as_stack(arrays["a"], "a", square=False)
        key = cache_key("svd", a1, *options)
    return to_caller(run_cached(key, lambda: SVD(a1, full_matrices=full_matrices, compute_uv=compute_uv,
                                                 driver=driver),
                                lambda p: p.reset_operands(a1), lambda p: p._run(), execution=execution))


@_cuda_route
def svdvals(a: Any, /, *, execution: Any = None) -> Any:
    """Singular values (descending) of ``(..., m, n)`` ``a``.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg import svdvals
    >>> svdvals(np.array([[0.0, 2.0], [1.0, 0.0]]))
    array([2., 1.])
    """
    return svd(a, compute_uv=False, execution=execution)


@_cuda_route
def lstsq(a: Any, b: Any, /, rcond: float | None = None, *, execution: Any = None) -> tuple:
    """Least-squares solution: ``(x, residuals, rank, s)`` with NumPy's conventions.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg import lstsq
    >>> x, res, rank, s = lstsq(np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]]), np.array([1.0, 3.0, 5.0]))
    >>> np.round(x, 12), int(rank)
    (array([1., 2.]), 2)
    """
    if (execution is None and _plain(a) and a.ndim == 2 and one_matrix.takes(a)
            and (result := one_matrix.lstsq(a, b, rcond)) is not None):
        return result
    arrays, to_caller, _ = host_arrays(execution, a=a, b=b)
    a1 = as_stack(arrays["a"], "a", square=False, dtype=_common_dtype(arrays))
    key = cache_key("lstsq", a1, rcond)
    return run_cached(key, lambda: Lstsq(a1, rcond=rcond, execution=execution),
                      lambda p: p.reset_operands(a1), lambda p: to_caller(p.solve(arrays["b"])),
                      execution=execution)


def _common_dtype(arrays: dict[str, np.ndarray]) -> np.dtype:
    """The LAPACK dtype the operands compute in together, by NumPy's promotion (float32 with
    float64 in float64, a real matrix with a complex right-hand side in complex)."""
    for name, x in arrays.items():
        check_dtype(x.dtype, name)
    return lapack_dtype(np.result_type(*(x.dtype for x in arrays.values())))


@_cuda_route
def solve_triangular(a: Any, b: Any, /, *, lower: bool = False, trans: Any = 0, unit_diagonal: bool = False,
                     execution: Any = None) -> Any:
    """Solve ``op(a) x = b`` for triangular ``a`` (``trans`` 0/'N', 1/'T', 2/'C').

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg import solve_triangular
    >>> solve_triangular(np.array([[2.0, 0.0], [1.0, 1.0]]), np.array([2.0, 3.0]), lower=True)
    array([1., 2.])
    """
    trans = check_trans(trans)
    if _one_small(a, execution) and (x := one_matrix.solve_triangular(a, b, trans, lower, unit_diagonal)) is not None:
        return x
    arrays, to_caller, _ = host_arrays(execution, a=a, b=b)
    a1 = as_stack(arrays["a"], "a", dtype=_common_dtype(arrays))
    key = cache_key("trsv", a1, bool(lower), bool(unit_diagonal))
    out = run_cached(key, lambda: TriangularSolve(a1, lower=lower, unit_diagonal=unit_diagonal),
                     lambda p: p.reset_operands(a1), lambda p: p.solve(arrays["b"], trans), execution=execution)
    return to_caller(out)


def _per_matrix_fortran(a: np.ndarray) -> np.ndarray:
    """A copy (when needed) whose every matrix is Fortran-contiguous."""
    if a.ndim == 2:
        return np.asfortranarray(a)
    return np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2)


@_cuda_route
def lu_factor(a: Any, /, *, execution: Any = None) -> tuple[Any, Any]:
    """LU factors ``(lu, piv)`` of ``(..., n, n)`` ``a`` in LAPACK's form (as
    ``scipy.linalg.lu_factor``: ``piv`` 0-based int32; ``P A = L U``). Exactly singular
    matrices are factored too (their ``U`` has a zero pivot; solving with them raises).

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg import lu_factor, lu_solve
    >>> lu, piv = lu_factor(np.array([[1.0, 2.0], [3.0, 4.0]]))
    >>> piv
    array([1, 1], dtype=int32)
    >>> lu_solve((lu, piv), np.array([5.0, 6.0]))
    array([-4. ,  4.5])
    """
    if _one_small(a, execution) and (factors := one_matrix.lu_factor(a)) is not None:
        return factors
    arrays, to_caller, _ = host_arrays(execution, a=a)
    given = as_stack(arrays["a"], "a")
    a1 = _per_matrix_fortran(given)
    private = not np.may_share_memory(a1, arrays["a"])  # a copy of ours: factor it in place
    key = cache_key("lu_factor", a1, private)
    return to_caller(run_cached(key, lambda: LU(a1, overwrite_a=private), lambda p: p.reset_operands(a1),
                                lambda p: p.execute().factors, execution=execution))


@_cuda_route
def lu_solve(lu_and_piv: tuple[Any, Any], b: Any, /, *, trans: Any = 0, execution: Any = None) -> Any:
    """Solve ``op(A) x = b`` with factors from :func:`lu_factor` (``trans`` 0, 1 or 2)."""
    lu, piv = factor_pair(lu_and_piv, "lu_and_piv", "(lu, piv)")
    if _one_small(lu, execution) and (x := one_matrix.lu_solve(lu, piv, b, check_trans(trans))) is not None:
        return x
    arrays, to_caller, _ = host_arrays(execution, lu=lu, b=b)
    lu1 = as_stack(arrays["lu"], "lu", dtype=_common_dtype(arrays))
    piv = lu_factors(lu1, piv)  # shape, dtype and range, before any native call
    return run_cached(cache_key("lu_solve", lu1), lambda: LU.from_factors(lu1, piv, execution=execution),
                      lambda p: p.use_factors(lu1, piv), lambda p: to_caller(p.solve(arrays["b"], trans)),
                      execution=execution)


@_cuda_route
def cho_factor(a: Any, /, *, lower: bool = False, execution: Any = None) -> tuple[Any, bool]:
    """Cholesky factor ``(c, lower)`` for :func:`cho_solve` (``lower=False``: ``U``, like SciPy).

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg import cho_factor, cho_solve
    >>> c = cho_factor(np.array([[4.0, 2.0], [2.0, 5.0]]))
    >>> cho_solve(c, np.array([6.0, 7.0]))
    array([1., 1.])
    """
    if _one_small(a, execution) and (c := one_matrix.cho_factor(a, lower)) is not None:
        return c, bool(lower)
    arrays, to_caller, _ = host_arrays(execution, a=a)
    a1 = as_stack(arrays["a"], "a")
    key = cache_key("cho_factor", a1, bool(lower))
    c = run_cached(key, lambda: Cholesky(a1, lower=lower), lambda p: p.reset_operands(a1),
                   lambda p: p.execute().factor, execution=execution)
    return to_caller(c), bool(lower)


@_cuda_route
def cho_solve(c_and_lower: tuple[Any, bool], b: Any, /, *, execution: Any = None) -> Any:
    """Solve ``A x = b`` with a factor from :func:`cho_factor`."""
    c, lower = factor_pair(c_and_lower, "c_and_lower", "(c, lower)")
    if _one_small(c, execution) and (x := one_matrix.cho_solve(c, lower, b)) is not None:
        return x
    arrays, to_caller, _ = host_arrays(execution, c=c, b=b)
    c1 = as_stack(arrays["c"], "c", dtype=_common_dtype(arrays))
    return run_cached(cache_key("cho_solve", c1, bool(lower)),
                      lambda: Cholesky.from_factor(c1, lower, execution=execution),
                      lambda p: p.use_factor(c1), lambda p: to_caller(p.solve(arrays["b"])), execution=execution)
