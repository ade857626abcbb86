"""The scipy.linalg drop-in on CUDA operands: SciPy's signatures and return conventions over
the cuSOLVER engine of :mod:`nvmathpy.linalg` (CuPy arrays, torch CUDA tensors).

:func:`routed` wraps each public function: a call whose first operand lives on a GPU goes to
the function of the same name here; NumPy calls pay one type check.

Errors found on the device - singular or non-positive-definite matrices, ``check_finite``'s
infs and NaNs - keep SciPy's semantics by default: each call reads its flags and raises there
(on one CuPy matrix: one elementwise verdict per checked array, one reduction and one
synchronisation for all of them: ``eigh``, ``svd`` and ``lstsq`` copy only the finite entries
into their private buffer, so that their iterative routines run on finite values, and raise
after it; on the general way one reduction per checked array and one synchronisation per kind
of flag). That read is most of a small call's
cost and stops the host from queueing the next call, so
``nvmathpy.linalg.cuda_checks("deferred")`` offers the other choice: the flags are copied
asynchronously to pinned memory behind an event and raised at a later call (once the GPU got
there) or at ``nvmathpy.linalg.check_cuda_errors()``, CuPy's behaviour plus a late report (see
:func:`nvmathpy.linalg.cuda_checks`). Deferred, no call reads the device except ``lstsq`` (its
rank is a Python int: its flags are read with the singular values, a failure still reported
late) and the diagonal ``solve``.

Calls on one CuPy matrix (and right-hand sides of its dtype) repeat through prepared calls
(:mod:`nvmathpy.linalg.prepared`): a key and a look-up, the copies into private buffers, the
vendor calls, the results and one check; stacks, torch tensors and mixed dtypes take the
general way. ``solve_triangular`` (and ``solve`` with a triangular ``assume_a``) is one cuBLAS
``trsm`` on the caller's ``A``. ``overwrite_*`` are accepted and ignored; ill-conditioned
solves do not warn (no condition estimate is computed); ``solve(assume_a=...)`` uses Cholesky
for ``'pos'``, the named triangle for the triangular structures, the diagonal for
``'diagonal'`` and the general LU otherwise (``None``, ``'gen'``, ``'sym'``, ``'her'``,
banded); ``lapack_driver`` / ``driver`` choices are LAPACK's and are ignored (autotune picks
cuSOLVER's routines). Generalized and subset eigenproblems, ``qr(pivoting=True)``,
``qr(mode='raw')`` and ``lu`` are refused by name.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

from numpy import ndarray

from ... import linalg as nl
from ...errors import InvalidOptionError, LinAlgError
from ...operands import on_cuda, to_package, wrap_all

__all__ = ["ROUTED", "routed"]


def _on_cuda(x: Any) -> bool:
    if type(x) is tuple and x:  # (c, lower) / (lu, piv) factors
        x = x[0]
    return type(x) is not ndarray and on_cuda(x)


def routed(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with calls on CUDA operands sent to this module's function of the same name."""
    name = fn.__name__

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        first = args[0] if args else next(iter(kwargs.values()), None)
        kind = type(first)
        if kind is tuple and first:  # (c, lower) / (lu, piv) factors
            kind = type(first[0])
        if kind is not ndarray and (kind is getattr(sys.modules.get("cupy"), "ndarray", None) or _on_cuda(first)):
            return ROUTED[name](*args, **kwargs)
        return fn(*args, **kwargs)

    return call


def _finite(check: bool, *arrays: Any) -> None:
    if check:
        nl.cuda_check_finite(*arrays)


def solve(a: Any, b: Any, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          check_finite: bool = True, assume_a: str | None = None, transposed: bool = False) -> Any:
    structure = _STRUCTURES.get(assume_a, assume_a)
    if structure not in ("pos", "upper", "lower", "diagonal"):
        out = nl.prepared.call("solve", a.swapaxes(-1, -2) if transposed else a, (b,), (), bool(check_finite))
        if out is not nl.prepared.UNPREPARED:
            return out
    _finite(check_finite, a, b)
    if structure in ("pos", "upper", "lower"):
        if structure == "pos":
            if transposed:  # A^T x = b with A Hermitian positive definite: conj(A) x = b
                return nl.cho_solve(nl.cho_factor(a.conj(), lower=lower), b)
            return nl.cho_solve(nl.cho_factor(a, lower=lower), b)
        return nl.solve_triangular(a, b, lower=structure == "lower", trans=1 if transposed else 0)
    if structure == "diagonal":
        return _solve_diagonal(a, b)
    return nl.solve(a.swapaxes(-1, -2) if transposed else a, b)  # A^T: a free view, factored as is


#: SciPy's long names of ``assume_a``.
_STRUCTURES = {"positive definite": "pos", "upper triangular": "upper", "lower triangular": "lower",
               "diagonal": "diagonal"}


def _solve_diagonal(a: Any, b: Any) -> Any:
    """``b / diag(a)`` (the transposed system is the same one)."""
    from ...cuda.runtime import import_cupy

    cupy = import_cupy()
    operands = wrap_all(a=a, b=b)
    d = cupy.diagonal(operands["a"].array, axis1=-2, axis2=-1)
    if bool((d == 0).any()):
        raise LinAlgError("Singular matrix: a diagonal entry is zero")
    rhs = operands["b"].array
    return to_package(rhs / (d if rhs.ndim == d.ndim else d[..., None]), operands["b"])


def inv(a: Any, overwrite_a: bool = False, check_finite: bool = True, *, assume_a: str | None = None,
        lower: bool = False) -> Any:
    out = nl.prepared.call("inv", a, (), (), bool(check_finite))
    if out is not nl.prepared.UNPREPARED:
        return out
    _finite(check_finite, a)
    return nl.inv(a)


def det(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    out = nl.prepared.call("det", a, (), (), bool(check_finite))
    if out is not nl.prepared.UNPREPARED:
        return out
    _finite(check_finite, a)
    return nl.det(a)


def solve_triangular(a: Any, b: Any, trans: Any = 0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, check_finite: bool = True) -> Any:
    out = nl.prepared.call("solve_triangular", a, (b,), (bool(lower), trans, bool(unit_diagonal)), bool(check_finite))
    if out is not nl.prepared.UNPREPARED:
        return out
    _finite(check_finite, a, b)
    return nl.solve_triangular(a, b, lower=lower, trans=trans, unit_diagonal=unit_diagonal)


def lstsq(a: Any, b: Any, cond: float | None = None, overwrite_a: bool = False, overwrite_b: bool = False,
          check_finite: bool = True, lapack_driver: str | None = None) -> tuple:
    out = nl.prepared.call("lstsq", a, (b,), (cond,), bool(check_finite))
    if out is not nl.prepared.UNPREPARED:
        x, residues, rank, s = out
    else:
        _finite(check_finite, a, b)
        x, residues, rank, s = nl.lstsq(a, b, rcond=cond)
    if getattr(b, "ndim", 2) == 1 and residues.shape[-1:] == (1,):
        residues = residues[..., 0]  # SciPy: a scalar for a 1-D b
    return x, residues, rank, s


def lu_factor(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Any, Any]:
    out = nl.prepared.call("lu_factor", a, (), (), bool(check_finite))
    if out is not nl.prepared.UNPREPARED:
        return out
    _finite(check_finite, a)
    return nl.lu_factor(a)


def lu_solve(lu_and_piv: tuple[Any, Any], b: Any, trans: int = 0, overwrite_b: bool = False,
             check_finite: bool = True) -> Any:
    lu, piv = lu_and_piv
    out = nl.prepared.call("lu_solve", lu, (piv, b), (trans,), bool(check_finite))
    if out is not nl.prepared.UNPREPARED:
        return out
    _finite(check_finite, b)  # SciPy checks b only
    return nl.lu_solve(lu_and_piv, b, trans=trans)


def lu(a: Any, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True,
       p_indices: bool = False) -> tuple:
    raise InvalidOptionError("scipy.linalg.lu is not supported on CUDA operands yet; use lu_factor")


def cholesky(a: Any, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    out = nl.prepared.call("cholesky", a, (), (bool(lower),), bool(check_finite))
    if out is not nl.prepared.UNPREPARED:
        return out
    _finite(check_finite, a)
    return nl.cholesky(a, upper=not lower)


def cho_factor(a: Any, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> tuple:
    out = nl.prepared.call("cholesky", a, (), (bool(lower),), bool(check_finite))
    if out is not nl.prepared.UNPREPARED:
        return out, bool(lower)
    _finite(check_finite, a)
    return nl.cho_factor(a, lower=lower)


def cho_solve(c_and_lower: tuple[Any, bool], b: Any, overwrite_b: bool = False, check_finite: bool = True) -> Any:
    c, lower = c_and_lower
    out = nl.prepared.call("cho_solve", c, (b,), (bool(lower),), bool(check_finite))
    if out is not nl.prepared.UNPREPARED:
        return out
    _finite(check_finite, c, b)
    return nl.cho_solve(c_and_lower, b)


def qr(a: Any, overwrite_a: bool = False, lwork: int | None = None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True) -> tuple:
    modes = {"full": "complete", "economic": "reduced", "r": "r"}
    if mode not in modes:
        raise InvalidOptionError(f"qr: mode={mode!r} is not supported on CUDA operands; allowed: {list(modes)}")
    if pivoting:
        raise InvalidOptionError("qr: pivoting=True is not supported on CUDA operands yet")
    out = nl.prepared.call("qr", a, (), (mode,), bool(check_finite))
    if out is not nl.prepared.UNPREPARED:
        return out
    _finite(check_finite, a)
    out = nl.qr(a, mode=modes[mode])
    if mode != "r":
        return tuple(out)
    return (_full_r(out, a.shape[-2]),)


def _full_r(r: Any, m: int) -> Any:
    """SciPy's ``mode='r'`` R, ``(m, n)``: the ``(k, n)`` R padded with zero rows."""
    from ...cuda.runtime import import_cupy

    operand = wrap_all(r=r)["r"]
    native = operand.array
    if native.shape[-2] == m:
        return r
    full = import_cupy().zeros(native.shape[:-2] + (m, native.shape[-1]), native.dtype)
    full[..., : native.shape[-2], :] = native
    return to_package(full, operand)


def _eigh_options(b: Any, type: int, subset_by_index: Any, subset_by_value: Any) -> None:
    for name, value in (("b", b), ("subset_by_index", subset_by_index), ("subset_by_value", subset_by_value)):
        if value is not None:
            raise InvalidOptionError(f"eigh: {name}= is not supported on CUDA operands yet")
    if type != 1:
        raise InvalidOptionError(f"eigh: type={type!r} needs b, which is not supported on CUDA operands yet")


def eigh(a: Any, b: Any = None, *, lower: bool = True, eigvals_only: bool = False, overwrite_a: bool = False,
         overwrite_b: bool = False, type: int = 1, check_finite: bool = True, subset_by_index: Any = None,
         subset_by_value: Any = None, driver: str | None = None) -> Any:
    _eigh_options(b, type, subset_by_index, subset_by_value)
    out = nl.prepared.call("eigh", a, (), (bool(lower), not eigvals_only), bool(check_finite))
    if out is not nl.prepared.UNPREPARED:
        return out
    _finite(check_finite, a)
    uplo = "L" if lower else "U"
    if eigvals_only:
        return nl.eigvalsh(a, UPLO=uplo)
    return tuple(nl.eigh(a, UPLO=uplo))


def eigvalsh(a: Any, b: Any = None, *, lower: bool = True, overwrite_a: bool = False, overwrite_b: bool = False,
             type: int = 1, check_finite: bool = True, subset_by_index: Any = None, subset_by_value: Any = None,
             driver: str | None = None) -> Any:
    _eigh_options(b, type, subset_by_index, subset_by_value)
    _finite(check_finite, a)
    return nl.eigvalsh(a, UPLO="L" if lower else "U")


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd") -> Any:
    out = nl.prepared.call("svd", a, (), (bool(full_matrices), bool(compute_uv)), bool(check_finite))
    if out is not nl.prepared.UNPREPARED:
        return out
    _finite(check_finite, a)
    out = nl.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(out) if compute_uv else out


def svdvals(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    _finite(check_finite, a)
    return nl.svdvals(a)


#: The CUDA variants by name.
ROUTED = {fn.__name__: fn for fn in (solve, inv, det, solve_triangular, lstsq, lu_factor, lu_solve, lu, cholesky,
                                      cho_factor, cho_solve, qr, eigh, eigvalsh, svd, svdvals)}
