"""One small NumPy matrix in one compiled call: the direct paths of the one-call functions.

For a single matrix of a small order, a one-call function's time goes to its layers - the plan
cache's look-up, the plan's closures, the operand checks - several times over the LAPACK work.
Up to :data:`~.plans.eigh.DIRECT_UP_TO` rows and columns (:func:`cholesky`, :func:`qr`,
:func:`solve_triangular` and the factored pairs below the order from which their plans leave
SciPy's routines: :func:`takes`), :func:`solve`, :func:`inv`, :func:`cholesky`, :func:`qr`,
:func:`svd`, :func:`lstsq`, :func:`solve_triangular` and the factored pairs
(:func:`lu_factor` and :func:`lu_solve`, :func:`cho_factor` and :func:`cho_solve`) here make
the compiled extension's whole call instead
(:mod:`.cpu._fast_lapack`: the operand copied, the same LAPACK routines the plans' heuristics
run first called, the results allocated, all in C; :func:`lu_factor` is SciPy's ``getrf``
wrapper), with the one-call functions' results and errors. Each returns ``None`` where it does
not apply - the extension is still being built or cannot be, or it declines the operand (a
layout or value its C does not take, a singular factor) - and the caller then runs its plan,
which also reports what LAPACK refuses. From order
:data:`~.cpu._pool_threads.PLAN_FREE_CORES_FROM` on, a call runs on the cores free at its
start, as the plans do (:func:`~.cpu._pool_threads.on_free_cores_of`: in a program of NumPy
products, NumPy's threads still spin then).

The callers pass what they checked: one non-empty 2-D NumPy array (exactly ``ndarray``) of a
LAPACK dtype in native byte order.

Examples
--------
>>> import numpy as np
>>> x = solve(np.array([[3.0, 1.0], [1.0, 2.0]]), np.array([9.0, 8.0]))
>>> x is None or x.tolist() == [2.0, 3.0]
True
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

import numpy as np

from ...errors import LinAlgError
from .cpu._fast_lapack import fast_module
from .cpu._lapack import routine
from .cpu._numpy_lapack import FROM_ORDER
from .cpu._pool_threads import PLAN_FREE_CORES_FROM, POOLS, stepped_down
from .plans.cholesky import not_positive_definite
from .plans.eigh import DIRECT_UP_TO
from .plans.lstsq import cutoff
from .plans.qr import QRResult
from .plans.svd import SVDResult

__all__ = ["cho_factor", "cho_solve", "cholesky", "inv", "lstsq", "lu_factor", "lu_solve", "qr", "solve",
           "solve_triangular", "svd", "takes"]

#: NumPy's ``qr`` modes the compiled ``qr`` computes, by its mode number (0 full, 1 economic).
_QR_MODES = {"reduced": 1, "complete": 0}


def takes(a: np.ndarray, factor: bool = False) -> bool:
    """Whether the matrices of ``a`` (one, or a stack: :mod:`._small_stacks`) are small enough
    for the direct paths: both dimensions at most :data:`~.plans.eigh.DIRECT_UP_TO`, or with
    ``factor`` (one matrix, for :func:`cholesky`, :func:`qr`, :func:`solve_triangular` and the
    factored pairs) below :data:`~.cpu._numpy_lapack.FROM_ORDER`: there the plans run the same
    SciPy routines, and their layers (the plan cache, the closures, the other triangle zeroed
    by NumPy) cost more than the compiled call's."""
    bound = FROM_ORDER - 1 if factor else DIRECT_UP_TO
    return a.shape[-2] <= bound and a.shape[-1] <= bound


F = TypeVar("F", bound=Callable[..., Any])


def _on_free_cores(fn: F) -> F:
    """``fn`` (whose first argument is its matrix), from order
    :data:`~.cpu._pool_threads.PLAN_FREE_CORES_FROM` on run on the cores free at the call's
    start, as the plans' calls of such orders (:func:`~.cpu._pool_threads.on_free_cores_of`)."""

    @functools.wraps(fn)
    def call(a: np.ndarray, *args: Any) -> Any:
        if max(a.shape[-2:]) >= PLAN_FREE_CORES_FROM:
            return stepped_down(lambda: fn(a, *args), POOLS)
        return fn(a, *args)

    return call  # type: ignore[return-value]


def _dense(a: np.ndarray) -> np.ndarray:
    """``a``, or a Fortran-ordered copy where it is neither C- nor Fortran-contiguous (the
    compiled LU factors a copy either way)."""
    return a if a.flags.c_contiguous or a.flags.f_contiguous else np.asfortranarray(a)


def solve(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """``numpy.linalg.solve(a, b)`` for square ``a`` and ``b`` of ``a``'s dtype (``(n,)`` or
    ``(n, k)``): ``getrf`` and ``getrs``; raises ``LinAlgError`` when ``a`` is singular."""
    fast = fast_module()
    if fast is None:
        return None
    x = fast.solve_plain(_dense(a), b)
    if x is None:
        raise LinAlgError("Singular matrix")
    return None if x is NotImplemented else x


def inv(a: np.ndarray) -> np.ndarray | None:
    """``numpy.linalg.inv(a)`` of square ``a``: ``getrf`` and ``getri`` (the compiled call
    estimates the condition too, which costs less than the layers it replaces); raises
    ``LinAlgError`` when ``a`` is singular."""
    fast = fast_module()
    if fast is None:
        return None
    out = fast.inv_gen(_dense(a), False)
    if out is NotImplemented:
        return None
    if out[0] is None:
        raise LinAlgError("Singular matrix")
    return out[0]


@_on_free_cores
def cholesky(a: np.ndarray, upper: bool) -> np.ndarray | None:
    """The lower (``upper``: upper) Cholesky factor of square ``a`` from that triangle, the
    other one zero: ``potrf``; raises ``LinAlgError`` when ``a`` is not positive definite."""
    fast = fast_module()
    if fast is None:
        return None
    c = fast.cholesky(a, not upper, True, False, False)
    if type(c) is int:
        raise not_positive_definite(c)
    return None if c is NotImplemented else c


@_on_free_cores
def cho_factor(a: np.ndarray, lower: bool) -> np.ndarray | None:
    """The factor :func:`~nvmathpy.linalg.cho_factor` returns for square ``a`` (the other
    triangle zero); ``None`` also where ``a`` is not positive definite (the plan reports it)."""
    fast = fast_module()
    c = None if fast is None else fast.cholesky(a, bool(lower), True, False, False)
    return c if isinstance(c, np.ndarray) else None


@_on_free_cores
def cho_solve(c: np.ndarray, lower: bool, b: Any) -> np.ndarray | None:
    """``A x = b`` with the Cholesky factor ``c`` of ``A`` (triangle ``lower``; ``b`` a NumPy
    array of ``c``'s dtype, ``(n,)`` or ``(n, k)``): ``potrs``."""
    fast = fast_module()
    if fast is None or type(b) is not np.ndarray:
        return None
    x = fast.cho_solve(_dense(c), b, bool(lower), False)
    return None if x is NotImplemented else x


@_on_free_cores
def lu_factor(a: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(lu, piv)`` of square ``a`` (Fortran-ordered ``lu``, 0-based int32 ``piv``): SciPy's
    ``getrf`` wrapper on a Fortran-ordered copy; an exactly singular matrix is factored too."""
    lu, piv, info = routine("getrf", a.dtype.name)(a)
    return None if info < 0 else (lu, piv)


@_on_free_cores
def lu_solve(lu: np.ndarray, piv: Any, b: Any, trans: int) -> np.ndarray | None:
    """``op(A) x = b`` (``trans`` 0, 1, 2) with ``lu_factor``'s factors of ``A`` (``b`` of
    ``lu``'s dtype, ``(n,)`` or ``(n, k)``): ``getrs``, in the compiled call up to
    :data:`~.plans.eigh.DIRECT_UP_TO`, beyond through SciPy's wrapper; ``None`` where ``U``
    has a zero pivot or the pivots are not ``n`` int32 in ``[0, n)`` (the plan checks them and
    reports either)."""
    n = lu.shape[0]
    if (type(b) is not np.ndarray or type(piv) is not np.ndarray or piv.dtype != np.int32 or piv.shape != (n,)
            or np.count_nonzero(piv.view(np.uint32) < n) != n or np.count_nonzero(lu.diagonal()) != n):
        return None  # (a negative pivot is a large unsigned one)
    if takes(lu):
        fast = fast_module()
        x = NotImplemented if fast is None else fast.lu_solve(lu, piv, b, trans, False)
        return None if x is NotImplemented else x
    if b.dtype != lu.dtype or b.ndim not in (1, 2) or b.shape[0] != n:
        return None
    x, info = routine("getrs", lu.dtype.name)(lu, piv, b, trans=trans)
    return x if info == 0 else None


@_on_free_cores
def solve_triangular(a: np.ndarray, b: Any, trans: int, lower: bool, unit_diagonal: bool) -> np.ndarray | None:
    """``op(a) x = b`` for triangular ``a`` (``b`` of ``a``'s dtype, ``(n,)`` or ``(n, k)``):
    ``trtrs``; ``None`` also where ``a`` has a zero on its diagonal (the plan reports it)."""
    fast = fast_module()
    if fast is None or type(b) is not np.ndarray:
        return None
    x = fast.solve_triangular(_dense(a), b, trans, bool(lower), bool(unit_diagonal), False, False)
    return x if isinstance(x, np.ndarray) else None


@_on_free_cores
def qr(a: np.ndarray, mode: str) -> QRResult | None:
    """``numpy.linalg.qr(a, mode)`` for ``mode`` ``"reduced"`` or ``"complete"`` (other modes:
    ``None``): ``geqrf`` and ``orgqr``/``ungqr``."""
    fast = fast_module()
    number = _QR_MODES.get(mode)
    if fast is None or number is None:
        return None
    out = fast.qr(a, number, False)
    return None if out is NotImplemented else QRResult(*out)


def svd(a: np.ndarray, full_matrices: bool, compute_uv: bool) -> Any:
    """``numpy.linalg.svd(a, full_matrices, compute_uv)``: ``SVDResult`` (the singular values
    alone without ``compute_uv``) by ``gesdd``; ``None`` also where ``a`` holds NaN or
    infinity or ``gesdd`` fails (the caller's path reports it)."""
    fast = fast_module()
    if fast is None:
        return None
    out = fast.svd(a, bool(full_matrices), bool(compute_uv), False, False)
    if out is NotImplemented:
        return None
    return SVDResult(*out) if compute_uv else out


def lstsq(a: np.ndarray, b: Any, rcond: float | None) -> tuple | None:
    """``numpy.linalg.lstsq(a, b, rcond)`` for ``b`` a NumPy array of ``a``'s dtype, ``(m,)``
    or ``(m, k)`` (else ``None``): ``(x, residuals, rank, s)`` by ``gelsd``, NumPy's driver,
    with the plan's cutoff (:func:`~.plans.lstsq.cutoff`); ``None`` also where ``a`` holds NaN
    or infinity or ``gelsd`` fails (the plan reports it)."""
    fast = fast_module()
    if fast is None or type(b) is not np.ndarray:
        return None
    out = fast.lstsq(a, b, cutoff(rcond, a.dtype, *a.shape))
    if out is NotImplemented:
        return None
    x, residuals, rank, s = out
    return x, residuals, np.int32(rank), s
