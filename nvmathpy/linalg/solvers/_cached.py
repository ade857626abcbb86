"""What the one-call solver functions keep between calls: their plan cache, the cache keys,
checking a plan out and back in, and the named result tuples they return.

The CPU functions (:mod:`.functions`), the CUDA functions (:mod:`.cuda._functions`) and the
SciPy-compatible layer share these, so none of them imports another.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, NamedTuple

from ...execution import as_execution
from ...plan import PlanCache
from ..gemm.cpu._threads import limit_threads

__all__ = ["CACHE", "EighResult", "SlogdetResult", "cache_key", "checkout", "plan_cache", "run_cached"]

#: The plan cache of the one-call CPU solver functions.
CACHE = PlanCache(maxsize=64)


class EighResult(NamedTuple):
    """``eigenvalues``, ``eigenvectors`` as :func:`numpy.linalg.eigh` names them."""

    eigenvalues: Any
    eigenvectors: Any


class SlogdetResult(NamedTuple):
    """``sign``, ``logabsdet`` as :func:`numpy.linalg.slogdet` names them."""

    sign: Any
    logabsdet: Any


def plan_cache() -> PlanCache:
    """The plan cache of the one-call solver functions (``resize(n)``, ``clear()``)."""
    return CACHE


def cache_key(name: str, x: Any, *extra: Hashable) -> tuple:
    """A cheap cache key: function, array type, shape, dtype, layout, options."""
    flags = getattr(x, "flags", None)
    layout = (flags.c_contiguous, flags.f_contiguous) if flags is not None else None
    return (name, type(x), tuple(x.shape), str(x.dtype), layout, *extra)


def run_cached(key: tuple, build: Callable[[], Any], swap: Callable[[Any], None], use: Callable[[Any], Any],
               execution: Any = None) -> Any:
    """Check out the cached plan of ``key`` (or ``build()`` and plan one), ``swap`` the new
    operands into it, return ``use(plan)``, and give the plan back to the cache. A plan
    whose planning or swap fails may be half-updated: it is freed, not given back.
    ``ExecutionCPU(num_threads=n)`` runs all of it with BLAS/LAPACK limited to ``n``
    threads (and keys the cache by ``n``)."""
    threads = None if execution is None else getattr(as_execution(execution), "num_threads", None)
    if threads is None:
        return checkout(CACHE, key, build, swap, use)
    return limit_threads(threads, checkout)(CACHE, (*key, threads), build, swap, use)


def checkout(cache: PlanCache, key: tuple, build: Callable[[], Any], swap: Callable[[Any], None],
             use: Callable[[Any], Any]) -> Any:
    """``use(plan)`` on ``cache``'s plan for ``key`` (built and planned, or with the new operands
    swapped in), given back afterwards; a plan whose planning or swap failed is freed instead."""
    plan = cache.take(key)
    try:
        if plan is None:
            plan = build()
            plan.plan()
        else:
            swap(plan)
    except BaseException:
        if plan is not None:
            plan.free()
        raise
    try:
        return use(plan)
    finally:
        plan._release()
        cache.give(key, plan)
