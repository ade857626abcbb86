"""The plan cache: a bounded, thread-safe LRU of ready plans for the one-call functions.

A plan is *taken out* while a caller uses it and *given back* afterwards, so two threads never
share one plan's operands or workspace: a second thread asking for the same problem at the
same time simply builds its own, and the spare one is freed when it is given back.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Hashable

__all__ = ["PlanCache"]


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
        self._plans: OrderedDict[Hashable, Any] = OrderedDict()
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
        return len(self._plans)

    def take(self, key: Hashable) -> Any | None:
        """Remove and return the plan for ``key``, or ``None`` on a miss."""
        with self._lock:
            plan = self._plans.pop(key, None)
            if plan is None:
                self.misses += 1
            else:
                self.hits += 1
            return plan

    def give(self, key: Hashable, plan: Any) -> None:
        """Return ``plan`` to the cache under ``key``, freeing whatever falls out."""
        spare = []
        with self._lock:
            if key in self._plans or self._maxsize == 0:
                spare.append(plan)
            else:
                self._plans[key] = plan
                while len(self._plans) > self._maxsize:
                    spare.append(self._plans.popitem(last=False)[1])
        for extra in spare:
            extra.free()

    def resize(self, maxsize: int) -> None:
        """Change the bound, freeing the least recently used plans beyond it."""
        self._check_size(maxsize)
        spare = []
        with self._lock:
            self._maxsize = maxsize
            while len(self._plans) > maxsize:
                spare.append(self._plans.popitem(last=False)[1])
        for extra in spare:
            extra.free()

    def clear(self) -> None:
        """Free every cached plan and reset the hit/miss counters."""
        with self._lock:
            plans = list(self._plans.values())
            self._plans.clear()
            self.hits = self.misses = 0
        for plan in plans:
            plan.free()
