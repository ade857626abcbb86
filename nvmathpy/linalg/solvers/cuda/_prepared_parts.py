"""The parts the prepared-call builders (:mod:`._prepared_calls`) share: a plan planned for
its route, ``check_finite``'s checks, the shape test of a prepared operand, the arguments of
the ``cusolverDnX*`` calls and their enqueuers on a stream, and the loads of the operands into
a route's private buffers (factored or decomposed there).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ....cuda.bindings import cusolver
from ._checks import MODE
from ._engine import GetrfLoop, PotrfLoop, SvdRoute
from ._prepared import Flags, not_finite
from ._routes import pointer

__all__ = ["finite_checks", "gesvd", "getrf_args", "getrf_in_place", "getrs_args", "loaded_in_place",
           "masked_triangle", "planned", "potrf", "potrs", "solver", "solver_head", "solver_on", "square",
           "workspace"]


def planned(plan: Any, route_type: type) -> Any:
    """``plan`` planned, its route if of ``route_type`` (else the plan is freed: None)."""
    plan.plan()
    plan._release()  # the first call's operands are not kept alive
    route = plan._prepared
    if type(route) is not route_type:
        plan.free()
        return None
    return route


def finite_checks(finite: bool, *operands: Any) -> list[tuple[tuple, Callable[[bool, int], BaseException]]]:
    """``check_finite``'s checks of ``operands`` (none when ``finite`` is False)."""
    return [(x.shape, not_finite) for x in operands] if finite else []


def square(a: Any, b: Any = None) -> bool:
    """``a`` square, and ``b`` (if given) a vector or matrix of its rows and dtype."""
    n = a.shape[0]
    return a.shape[1] == n and (b is None or (b.ndim in (1, 2) and b.shape[0] == n and b.dtype == a.dtype))


def solver_head(route: Any) -> tuple:
    """The handle and parameters every ``cusolverDnX*`` call starts with."""
    return route.ctx.handle, route.ctx.params


def workspace(route: Any) -> tuple:
    """The route's device and host workspaces and their sizes, as ``cusolverDnX*`` calls take them."""
    w = route.work
    return w.device, w.device_bytes, w.host, w.host_bytes


def solver(name: str, handle: int, args: tuple) -> Callable[[int], None]:
    """``cusolverDn<name>(*args)`` on ``stream`` (``handle`` pointed at it first):
    ``enqueue(stream)``. The routine is looked up per call: a test may replace a binding's."""
    lib = cusolver.LIB

    def enqueue(stream: int) -> None:
        lib.cusolverDnSetStream(handle, stream)
        getattr(lib, name)(*args)

    return enqueue


def solver_on(name: str, handle: int, head: tuple, tail: tuple) -> Callable[[int, int], None]:
    """``cusolverDn<name>(*head, x, *tail)`` on ``stream``: ``enqueue(stream, x)``."""
    lib = cusolver.LIB

    def enqueue(stream: int, x: int) -> None:
        lib.cusolverDnSetStream(handle, stream)
        getattr(lib, name)(*head, x, *tail)

    return enqueue


def potrf(route: PotrfLoop, info: int) -> Callable[[int], None]:
    """``Xpotrf`` of the route's one matrix, codes to ``info``: ``factor(stream)``."""
    n, dt = route.n, route.data_type
    args = (*solver_head(route), route.fill, n, dt, pointer(route.a), max(1, n), dt, *workspace(route), info)
    return solver("cusolverDnXpotrf", route.ctx.handle, args)


def getrf_args(route: GetrfLoop, info: int) -> tuple:
    """The arguments of ``Xgetrf`` of the route's one matrix, codes to ``info``."""
    n, dt = route.n, route.data_type
    return (*solver_head(route), n, n, dt, pointer(route.a), max(1, n), pointer(route.piv), dt, *workspace(route), info)


def getrs_args(route: GetrfLoop, operation: int, k: int) -> tuple[tuple, tuple, tuple]:
    """``(head, middle, tail)`` of ``Xgetrs`` with the route's pivots on ``k`` columns: the call is
    ``cusolverDnXgetrs(*head, factors pointer, *middle, x pointer, *tail)``."""
    n, dt = route.n, route.data_type
    return ((*solver_head(route), operation, n, k, dt), (max(1, n), pointer(route.piv), dt),
            (max(1, n), pointer(route.solve_info)))


def potrs(route: PotrfLoop, k: int) -> Callable[[int, int], None]:
    """``Xpotrs`` with the route's factor on ``k`` columns: ``solve(stream, x pointer)``."""
    n, dt = route.n, route.data_type
    head = (*solver_head(route), route.fill, n, k, dt, pointer(route.a), max(1, n), dt)
    tail = (max(1, n), pointer(route.solve_info))
    return solver_on("cusolverDnXpotrs", route.ctx.handle, head, tail)


def masked_triangle(cupy: Any, rows: int, cols: int, lower: bool) -> Callable[[Any], Any]:
    """``tril`` / ``triu`` of a ``rows x cols`` matrix as one ``where`` over a mask made once."""
    keep = cupy.asarray((np.tril if lower else np.triu)(np.ones((rows, cols), np.bool_)))
    return lambda x: cupy.where(keep, x, x.dtype.type(0))


def getrf_in_place(cupy: Any, route: Any, target: Any, a: Any, finite: bool) -> tuple[Callable[[int, Any], None], Any]:
    """``(load_and_factor(stream, a), flags)``: ``a`` checked for finiteness (when ``finite``;
    ``flags`` is ``None`` otherwise), copied into ``target`` (a view of the route's matrix) and
    factored there by ``getrf``; ``flags.check`` is the caller's, after its own work."""
    flags = Flags(cupy, finite_checks(True, a)) if finite else None
    verdict = flags.segments[0] if finite else None
    factor = solver("cusolverDnXgetrf", route.ctx.handle, getrf_args(route, pointer(route.info)))

    def load_and_factor(stream: int, a: Any) -> None:
        if finite:
            cupy.isfinite(a, out=verdict)
        target[...] = a
        factor(stream)

    return load_and_factor, flags


def loaded_in_place(cupy: Any, flags: Any, finite: bool, target: Any,
                     decompose: Callable[[int], None]) -> Callable[[int, Any], None]:
    """``load_and_decompose(stream, a)`` of the iterative routines (eigh, SVD, lstsq's SVD):
    ``a``'s finiteness judged when ``finite`` (``flags.segments[0]``), ``a`` copied into
    ``target`` (a view of the route's matrix) and decomposed there.

    SciPy refuses non-finite input before computing, and an iterative routine need not stop on
    it. Rather than read the verdict before the routine runs (a second synchronisation), the
    ``"raise"`` mode copies only the finite entries (one masked copy, one kernel as a plain
    copy) over a ``target`` that holds only finite values (zeroed before the first such copy
    and again after a deferred call or a failed one), so the routine runs on finite values; the
    call raises on the one read of its flags and its results are dropped. ``"deferred"``
    copies ``a`` as it is: a failed call's results are not finite, as CuPy's are, and the
    error is reported late."""
    if not finite:
        def load_and_decompose(stream: int, a: Any) -> None:
            target[...] = a
            decompose(stream)

        return load_and_decompose
    segment, clean = flags.segments[0], [False]
    flags.on_failure = lambda: clean.__setitem__(0, False)  # the failed routine's output may not be finite

    def load_and_decompose(stream: int, a: Any) -> None:
        cupy.isfinite(a, out=segment)
        if MODE.get() == "deferred":
            target[...] = a
            clean[0] = False
        else:
            if not clean[0]:
                target.fill(0)
                clean[0] = True
            cupy.copyto(target, a, where=segment)
        decompose(stream)

    return load_and_decompose


def gesvd(route: SvdRoute, info: int) -> Callable[[int], None]:
    """``Xgesvd`` of the route's one matrix, codes to ``info``: ``decompose(stream)`` (the
    route's own ``run`` for its other labels)."""
    if route.label != "gesvd":
        return lambda stream: route.run()
    args = (*solver_head(route), *route._jobs(), *route._args(0), *workspace(route), info)
    return solver("cusolverDnXgesvd", route.ctx.handle, args)
