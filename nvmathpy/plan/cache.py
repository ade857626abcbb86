"""The plan cache: a bounded, thread-safe LRU of ready plans for the one-call functions.

A plan is *taken out* while a caller uses it and *given back* afterwards, so two threads never
share one plan's operands or workspace: a second thread asking for the same problem at the
same time builds its own, and both are kept (one key may hold several plans, so threads that
keep running the same problem each find one). The bound counts plans, not keys.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Hashable

__all__ = ["PlanCache"]

#: A key stays while its plans are out (taken, to be given back: cheaper than removing and adding
#: it on every call); beyond this many keys without plans, the next ``give`` drops them.
_EMPTY_KEYS = 64


class PlanCache:
    """A bounded LRU of plans keyed by a problem key.

    Parameters
    ----------
    maxsize
        The most plans kept; the least recently used is freed beyond it. ``0`` disables
        caching (every plan is freed when given back).

    Examples
    --------
    >>> class Dummy:
    ...     def free(self): pass
    >>> cache = PlanCache(maxsize=2)
    >>> cache.take("k") is None
    True
    >>> cache.give("k", Dummy()); len(cache)
    1
    >>> cache.take("k") is not None, len(cache)
    (True, 0)
    """

    def __init__(self, maxsize: int = 128):
        self._check_size(maxsize)
        self._maxsize = maxsize
        self._plans: OrderedDict[Hashable, list[Any]] = OrderedDict()  # least recently used first
        self._count = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def _check_size(maxsize: int) -> None:
        if not isinstance(maxsize, int) or isinstance(maxsize, bool) or maxsize < 0:
            raise ValueError(f"plan cache maxsize must be a non-negative int, got {maxsize!r}")

    @property
    def maxsize(self) -> int:
        return self._maxsize

    def __len__(self) -> int:
        return self._count

    def take(self, key: Hashable) -> Any | None:
        """Remove and return a plan for ``key``, or ``None`` on a miss."""
        with self._lock:
            plans = self._plans.get(key)
            if not plans:
                self.misses += 1
                return None
            self.hits += 1
            self._count -= 1
            return plans.pop()  # (an emptied key stays, for the plan's return: see _evict)

    def give(self, key: Hashable, plan: Any) -> None:
        """Return ``plan`` to the cache under ``key``, freeing whatever falls out."""
        with self._lock:
            plans = self._plans.get(key)
            if plans is None:
                self._plans[key] = [plan]
            else:
                plans.append(plan)
                self._plans.move_to_end(key)
            self._count += 1
            spare = self._evict(self._maxsize) if self._count > self._maxsize else ()
            if len(self._plans) > self._count + _EMPTY_KEYS:  # keys of plans taken and never given back
                for empty in [k for k, found in self._plans.items() if not found]:
                    del self._plans[empty]
        for extra in spare:
            extra.free()

    def _evict(self, bound: int) -> list[Any]:
        """Remove plans of the least recently used keys until at most ``bound`` remain (keys whose
        plans are all taken out go on the way)."""
        spare = []
        while self._count > bound:
            key, plans = next(iter(self._plans.items()))
            if plans:
                spare.append(plans.pop(0))
                self._count -= 1
            if not plans:
                del self._plans[key]
        return spare

    def resize(self, maxsize: int) -> None:
        """Change the bound, freeing the least recently used plans beyond it."""
        self._check_size(maxsize)
        with self._lock:
            self._maxsize = maxsize
            spare = self._evict(maxsize)
        for extra in spare:
            extra.free()

    def clear(self) -> None:
        """Free every cached plan and reset the hit/miss counters."""
        with self._lock:
            spare = self._evict(0)
            self._plans.clear()  # the keys whose plans are out (given back later, they come back)
            self.hits = self.misses = 0
        for plan in spare:
            plan.free()
