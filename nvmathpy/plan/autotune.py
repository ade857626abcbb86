"""Timing candidates: warm-up, repeats, medians, and a time budget.

The timer is pluggable: the CPU uses ``time.perf_counter`` around a batch of calls sized so
one sample lasts about a millisecond; CUDA engines pass a timer built on CUDA events.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, Sequence

__all__ = ["EFFORTS", "MEASURE_TOP", "time_candidates", "perf_counter_timer"]

#: Autotune effort levels: no timing (heuristic order), time the top few, time all.
EFFORTS = ("estimate", "measure", "exhaustive")
#: How many of the heuristic's top candidates effort "measure" times.
MEASURE_TOP = 4

Timer = Callable[[Callable[[], object], int], float]


def perf_counter_timer(fn: Callable[[], object], calls: int) -> float:
    """Seconds per call of ``fn`` over ``calls`` back-to-back calls, on the host clock."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def time_candidates(
    runners: Sequence[tuple[str, Callable[[], object]]],
    *,
    repeats: int = 5,
    sample_seconds: float = 1e-3,
    budget_seconds: float | None = None,
    timer: Timer = perf_counter_timer,
) -> dict[str, float]:
    """Median seconds per call of each runner.

    Each runner is called once to warm up and to size its sample (enough back-to-back calls
    to last ``sample_seconds``). Then the runners are timed in interleaved rounds - one
    sample of each per round, ``repeats`` rounds - so that load from elsewhere on a shared
    machine hits every candidate alike, and the median per runner is reported. Runners are
    warmed in the order given; once ``budget_seconds`` is spent the remaining ones are
    skipped (the first is always timed).

    Examples
    --------
    >>> times = time_candidates([("sum", lambda: sum(range(100))), ("noop", lambda: None)], repeats=3)
    >>> sorted(times)
    ['noop', 'sum']
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    start = time.perf_counter()
    calls: dict[str, tuple[Callable[[], object], int]] = {}
    for label, fn in runners:
        if calls and budget_seconds is not None and time.perf_counter() - start > budget_seconds:
            break
        first = timer(fn, 1)
        calls[label] = (fn, max(1, min(10_000, int(sample_seconds / max(first, 1e-9)))))
    samples: dict[str, list[float]] = {label: [] for label in calls}
    for _ in range(repeats):
        for label, (fn, count) in calls.items():
            samples[label].append(timer(fn, count))
    return {label: statistics.median(values) for label, values in samples.items()}
