"""The plan cache: LRU bound, checkout semantics, freeing spares, thread safety."""

from __future__ import annotations

import threading

import pytest

from nvmathpy.plan import PlanCache


class FakePlan:
    def __init__(self, name):
        self.name = name
        self.freed = 0

    def free(self):
        self.freed += 1


def test_lru_evicts_and_frees_oldest():
    cache = PlanCache(maxsize=2)
    plans = {k: FakePlan(k) for k in "abc"}
    for k in "abc":
        cache.give(k, plans[k])
    assert len(cache) == 2 and plans["a"].freed == 1
    assert cache.take("a") is None
    assert cache.take("b") is plans["b"] and cache.hits == 1 and cache.misses == 1


def test_one_key_keeps_several_plans_within_the_bound():
    cache = PlanCache(maxsize=3)
    first, second = FakePlan(1), FakePlan(2)
    cache.give("k", first)
    cache.give("k", second)
    assert len(cache) == 2 and first.freed == second.freed == 0
    assert {id(cache.take("k")), id(cache.take("k"))} == {id(first), id(second)}
    assert cache.take("k") is None
    plans = [FakePlan(i) for i in range(4)]
    for p in plans:
        cache.give("k", p)
    assert len(cache) == 3 and plans[0].freed == 1


def test_resize_clear_and_zero():
    cache = PlanCache(maxsize=4)
    plans = [FakePlan(i) for i in range(4)]
    for i, p in enumerate(plans):
        cache.give(i, p)
    cache.resize(1)
    assert len(cache) == 1 and [p.freed for p in plans] == [1, 1, 1, 0]
    cache.clear()
    assert len(cache) == 0 and plans[3].freed == 1
    cache.resize(0)
    spare = FakePlan("x")
    cache.give("x", spare)
    assert spare.freed == 1 and len(cache) == 0
    with pytest.raises(ValueError, match="non-negative"):
        PlanCache(-1)


def test_eight_threads_never_share_a_plan():
    cache = PlanCache(maxsize=4)
    in_use: set[int] = set()
    guard = threading.Lock()
    errors: list[str] = []

    def worker(seed):
        for i in range(300):
            key = (seed + i) % 3
            plan = cache.take(key) or FakePlan(key)
            with guard:
                if id(plan) in in_use:
                    errors.append("shared")
                in_use.add(id(plan))
            with guard:
                in_use.discard(id(plan))
            cache.give(key, plan)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(cache) <= 4


def test_keys_of_plans_taken_and_never_given_back_do_not_pile_up():
    # a caller whose run failed frees the plan it took instead of giving it back: its key,
    # kept while the plan was out, must not stay for good
    cache = PlanCache(maxsize=8)
    for i in range(500):
        cache.give(("lost", i), FakePlan(i))
        assert cache.take(("lost", i)) is not None  # taken, never given back
    kept = FakePlan("kept")
    cache.give("kept", kept)
    assert len(cache) == 1 and len(cache._plans) <= 1 + 64 + 1
    assert cache.take("kept") is kept and cache.take("kept") is None
    # a plan taken out and given back after an eviction pass is cached again, under its key
    cache.give("back", kept)
    out = cache.take("back")
    for i in range(20):
        cache.give(i, FakePlan(i))
    cache.give("back", out)
    assert len(cache) == 8 and cache.take("back") is out
    cache.clear()
    assert len(cache) == 0 and not cache._plans
