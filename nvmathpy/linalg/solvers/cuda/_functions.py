"""The one-call solver functions on CUDA operands (``nvmathpy.linalg.solve`` etc. route here
when an operand lives on a GPU or ``execution="cuda"``).

Same signatures and NumPy / Array-API semantics as :mod:`..functions`; each call checks out a
cached CUDA plan (keyed by function, shape, strides, dtype, device, package and options),
points it at the new operands, runs it, and checks the ``info`` codes once (one
synchronisation; singular / non-positive-definite matrices raise ``LinAlgError`` naming the
batch element), as NumPy's functions raise; within ``cuda_checks("deferred")`` the codes are
copied asynchronously instead and reported later (:mod:`._checks`). Plans used directly never
synchronise unless asked (``plan.check()``).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Hashable

import numpy as np

from ....cuda.runtime import import_cupy
from ....errors import InvalidOptionError
from ....plan import PlanCache
from .._cached import EighResult, SlogdetResult, checkout
from .._dispatch import CUDA_FUNCTIONS
from ._plans import (
    CudaCholesky,
    CudaEigh,
    CudaLstsq,
    CudaLU,
    CudaQR,
    CudaSolve,
    CudaSVD,
)
from ._checks import settle
from . import _prepared
from ._operands import as_device_stack, device_arrays, on_device
from ._triangular import solve_triangular
from .._operands import solve_operands

__all__ = ["plan_cache"]


class _FunctionCache(PlanCache):
    """The functions' plan cache; clearing it frees the prepared calls too (:mod:`._prepared`)."""

    def clear(self) -> None:
        super().clear()
        _prepared.clear()


_CACHE = _FunctionCache(maxsize=32)


def plan_cache() -> PlanCache:
    """The plan cache of the CUDA one-call functions."""
    return _CACHE


def _key(name: str, a: Any, *extra: Hashable) -> tuple:
    return (name, a.shape, a.strides, a.dtype.str, a.device.id, *extra)  # dtype.str: no Python-level naming


def _run(key: tuple, build: Callable[[], Any], swap: Callable[[Any], None], use: Callable[[Any], Any]) -> Any:
    """:func:`~.._cached.checkout` on the CUDA functions' cache."""
    return checkout(_CACHE, key, build, swap, use)


def _stack(x: Any, execution: Any, name: str = "a", square: bool = True) -> tuple[Any, Callable[[Any], Any], str]:
    stack, to_caller, package, _ = _stack_with(x, execution, name, square)
    return stack, to_caller, package


def _stack_with(x: Any, execution: Any, name: str = "a", square: bool = True,
                **others: Any) -> tuple[Any, Callable[[Any], Any], str, dict[str, Any]]:
    """``x`` as a device stack, and the ``others`` (right-hand sides, pivots) as device arrays
    taken the same way (NumPy operands with ``execution="cuda"`` are copied over together)."""
    native, to_caller, _, package = device_arrays(execution, **{name: x}, **others)
    return as_device_stack(native[name], name, square=square), to_caller, package, native


def solve(a: Any, b: Any, /, *, execution: Any = None) -> Any:
    native, to_caller, _, package = device_arrays(execution, a=a, b=b)
    cupy = import_cupy()
    a1, b2, dtype, vector = solve_operands(as_device_stack(native["a"], "a"), native["b"], cupy.broadcast_to)
    if a1.size == 0 or b2.size == 0:
        x = cupy.empty(b2.shape, dtype)
    else:
        def use(plan: CudaSolve) -> Any:
            out = plan._run()
            plan._checked()
            return out

        x = _run(_key("solve", a1, b2.shape, package), lambda: CudaSolve(a1, b2, execution=execution),
                 lambda p: p._set(a1, b2), use)
    return to_caller(x[..., 0] if vector else x)


def inv(a: Any, /, *, execution: Any = None) -> Any:
    a1, to_caller, package = _stack(a, execution)
    if a1.size == 0:
        return to_caller(a1.copy())

    def use(plan: CudaSolve) -> Any:
        out = plan._run()
        plan._checked()
        return out

    return to_caller(_run(_key("inv", a1, package), lambda: CudaSolve(a1, execution=execution),
                          lambda p: p._set(a1, None), use))


def _lu(a1: Any, to_caller: Callable[[Any], Any], package: str, use: Callable[[CudaLU], Any]) -> Any:
    return to_caller(_run(_key("lu", a1, package), lambda: CudaLU(a1), lambda p: p._take(a1), use))


def det(a: Any, /, *, execution: Any = None) -> Any:
    a1, to_caller, package = _stack(a, execution)
    if a1.shape[-1] == 0:  # the determinant of a 0 x 0 matrix is 1
        return to_caller(import_cupy().ones(a1.shape[:-2], a1.dtype)[()])
    return _lu(a1, to_caller, package, lambda p: p.execute().det())


def slogdet(a: Any, /, *, execution: Any = None) -> Any:
    a1, to_caller, package = _stack(a, execution)
    if a1.shape[-1] == 0:
        cupy = import_cupy()
        real = np.finfo(a1.dtype).dtype
        return SlogdetResult(to_caller(cupy.ones(a1.shape[:-2], a1.dtype)[()]),
                             to_caller(cupy.zeros(a1.shape[:-2], real)[()]))
    return SlogdetResult(*_lu(a1, to_caller, package, lambda p: p.execute().slogdet()))


def cholesky(a: Any, /, *, upper: bool = False, execution: Any = None) -> Any:
    a1, to_caller, package = _stack(a, execution)
    return to_caller(_run(_key("cholesky", a1, package, bool(upper)), lambda: CudaCholesky(a1, lower=not upper),
                          lambda p: p._take(a1), lambda p: p.execute()._checked().factor))


def qr(a: Any, /, *, mode: str = "reduced", execution: Any = None) -> Any:
    a1, to_caller, package = _stack(a, execution, square=False)
    return to_caller(_run(_key("qr", a1, package, mode), lambda: CudaQR(a1, mode=mode),
                          lambda p: p._take(a1), lambda p: p._run()))


def _eigh(a: Any, uplo: str, vectors: bool, execution: Any) -> Any:
    if uplo not in ("L", "U"):
        raise InvalidOptionError(f"UPLO={uplo!r} is not allowed; allowed: 'L', 'U'")
    a1, to_caller, package = _stack(a, execution)

    def use(plan: CudaEigh) -> Any:
        out = plan._run()
        plan._checked()
        return out

    out = _run(_key("eigh", a1, package, uplo, vectors), lambda: CudaEigh(a1, eigvals_only=not vectors,
                                                                          lower=uplo == "L"),
               lambda p: p._take(a1), use)
    return to_caller(EighResult(*out) if vectors else out)


def _cpu_only(name: str, **options: Any) -> None:
    """Refuse, by name, an option the CPU functions take and these do not."""
    for option, value in options.items():
        if value is not None:
            raise InvalidOptionError(f"{name}: {option}= is not supported on CUDA operands yet")


def eigh(a: Any, /, UPLO: str = "L", *, b: Any = None, itype: int = 1, subset_by_index: Any = None,
         subset_by_value: Any = None, driver: str | None = None, execution: Any = None) -> Any:
    _cpu_only("eigh", b=b, itype=None if itype == 1 else itype, subset_by_index=subset_by_index,
              subset_by_value=subset_by_value, driver=driver)
    return _eigh(a, UPLO, True, execution)


def eigvalsh(a: Any, /, UPLO: str = "L", *, b: Any = None, itype: int = 1, subset_by_index: Any = None,
             subset_by_value: Any = None, driver: str | None = None, execution: Any = None) -> Any:
    _cpu_only("eigvalsh", b=b, itype=None if itype == 1 else itype, subset_by_index=subset_by_index,
              subset_by_value=subset_by_value, driver=driver)
    return _eigh(a, UPLO, False, execution)


def svd(a: Any, /, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False, *,
        driver: str | None = None, execution: Any = None) -> Any:
    _cpu_only("svd", driver=driver)
    a1, to_caller, package = _stack(a, execution, square=False)

    def use(plan: CudaSVD) -> Any:
        out = plan._run()
        plan._checked()
        return out

    return to_caller(_run(_key("svd", a1, package, bool(full_matrices), bool(compute_uv)),
                          lambda: CudaSVD(a1, full_matrices=full_matrices, compute_uv=compute_uv),
                          lambda p: p._take(a1), use))


def svdvals(a: Any, /, *, execution: Any = None) -> Any:
    return svd(a, compute_uv=False, execution=execution)


def lstsq(a: Any, b: Any, /, rcond: float | None = None, *, execution: Any = None) -> tuple:
    a1, to_caller, package, native = _stack_with(a, execution, square=False, b=b)
    return to_caller(_run(_key("lstsq", a1, package, rcond), lambda: CudaLstsq(a1, rcond=rcond),
                          lambda p: p._take(a1), lambda p: p.execute()._checked().solve(native["b"])))


def lu_factor(a: Any, /, *, execution: Any = None) -> tuple[Any, Any]:
    a1, to_caller, package = _stack(a, execution)
    # factors of A itself: a column-major copy is factored directly (no second factorization)
    fortran = a1.swapaxes(-1, -2).copy().swapaxes(-1, -2)
    return to_caller(_run(_key("lu_factor", fortran, package), lambda: CudaLU(fortran),
                          lambda p: p._take(fortran), lambda p: p.execute().factors))


def lu_solve(lu_and_piv: tuple[Any, Any], b: Any, /, *, trans: Any = 0, execution: Any = None) -> Any:
    lu, piv = lu_and_piv
    lu1, to_caller, package, native = _stack_with(lu, execution, name="lu", piv=piv, b=b)
    piv1 = native["piv"]

    def use(plan: CudaLU) -> Any:
        plan._checked()
        return plan.solve(native["b"], trans)

    return to_caller(_run(_key("lu_solve", lu1, package), lambda: CudaLU.from_factors(lu1, piv1),
                          lambda p: p.use_factors(lu1, piv1), use))


def cho_factor(a: Any, /, *, lower: bool = False, execution: Any = None) -> tuple[Any, bool]:
    a1, to_caller, package = _stack(a, execution)
    c = _run(_key("cho_factor", a1, package, bool(lower)), lambda: CudaCholesky(a1, lower=lower),
             lambda p: p._take(a1), lambda p: p.execute()._checked().factor)
    return to_caller(c), bool(lower)


def cho_solve(c_and_lower: tuple[Any, bool], b: Any, /, *, execution: Any = None) -> Any:
    c, lower = c_and_lower
    c1, to_caller, package, native = _stack_with(c, execution, name="c", b=b)
    return to_caller(_run(_key("cho_solve", c1, package, bool(lower)), lambda: CudaCholesky.from_factor(c1, lower),
                          lambda p: p.use_factor(c1), lambda p: p.solve(native["b"])))


def _on_its_device(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run with the device ``execution=`` names current (NumPy operands are copied there,
    and every array the function makes must be made there too), after the deferred checks
    that have completed are read (:func:`._checks.settle`)."""

    @functools.wraps(fn)
    def run(*args: Any, execution: Any = None, **kwargs: Any) -> Any:
        settle()
        if execution is None:
            return fn(*args, **kwargs)
        with on_device(execution):
            return fn(*args, execution=execution, **kwargs)

    return run


#: The functions that :mod:`..functions` routes here for CUDA operands, by name.
CUDA_FUNCTIONS.update({
    fn.__name__: _on_its_device(fn)
    for fn in (solve, inv, det, slogdet, cholesky, qr, eigh, eigvalsh, svd, svdvals, lstsq, lu_factor, lu_solve,
               cho_factor, cho_solve, solve_triangular)
})
