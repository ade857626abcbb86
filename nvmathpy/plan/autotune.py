"""Timing candidates: warm-up, repeats, medians, and a time budget.

The timer is pluggable: the CPU uses ``time.perf_counter`` around a batch of calls sized so
one sample lasts about a millisecond; CUDA engines pass a timer built on CUDA events.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Callable, Sequence

from .._logging import logger

__all__ = ["CONFIRM_MOST", "CONFIRM_ROUNDS", "CONFIRM_SAMPLE_SECONDS", "CONFIRM_WITHIN", "EFFORTS", "KEEP_MARGIN",
           "MEASURE_TOP", "contenders", "pick_winner", "time_candidates", "perf_counter_timer", "progress_reporter"]

#: Autotune effort levels: no timing (heuristic order), time the top few, time all.
EFFORTS = ("estimate", "measure", "exhaustive")
#: How many of the heuristic's top candidates effort "measure" times.
MEASURE_TOP = 4

#: The heuristic's first choice is kept unless another candidate is faster by more than this
#: fraction: on a shared machine a few percent is noise, and a noise-driven pick (say a
#: single-threaded variant timed while another process held a core) is the worse bet later.
KEEP_MARGIN = 0.02

#: Candidates whose first median lies within this fraction of the fastest are timed again
#: (:func:`contenders`): a first pass of short samples cannot separate them on a shared
#: machine, and one noisy sample there decides which library a problem runs on for good.
CONFIRM_WITHIN = 0.25
#: At most this many contenders are timed again.
CONFIRM_MOST = 3
#: The fewest rounds, and the length of each sample, of that second timing.
CONFIRM_ROUNDS = 7
CONFIRM_SAMPLE_SECONDS = 5e-3

Timer = Callable[[Callable[[], object], int], float]


def contenders(timings: dict[str, float], within: float = CONFIRM_WITHIN, most: int = CONFIRM_MOST) -> list[str]:
    """The labels to time again before a winner is picked: the fastest and those within
    ``within`` of it, fastest first, at most ``most`` (none when fewer than two qualify).

    Examples
    --------
    >>> contenders({"a": 1.0, "b": 1.2, "c": 2.0})
    ['a', 'b']
    >>> contenders({"a": 1.0, "c": 2.0})
    []
    """
    if not timings:
        return []
    best = min(timings.values())
    close = sorted((seconds, label) for label, seconds in timings.items() if seconds <= best * (1 + within))
    return [label for _, label in close[:most]] if len(close) > 1 else []


def pick_winner(timings: dict[str, float], first: str | None, margin: float = KEEP_MARGIN) -> str:
    """The label to install: the fastest, unless ``first`` (the heuristic's choice) is within
    ``margin`` of it.

    Examples
    --------
    >>> pick_winner({"a": 1.00, "b": 0.99}, "a"), pick_winner({"a": 1.00, "b": 0.90}, "a")
    ('a', 'b')
    """
    fastest = min(timings, key=timings.__getitem__)
    if first in timings and timings[first] <= timings[fastest] * (1 + margin):
        return first
    return fastest


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
    progress: Callable[[str], None] | None = None,
    failures: dict[str, Exception] | None = None,
) -> dict[str, float]:
    """Median seconds per call of each runner.

    Each runner is called once to warm up and to size its sample (enough back-to-back calls
    to last ``sample_seconds``). Then the runners are timed in interleaved rounds - one
    sample of each per round, ``repeats`` rounds - so that load from elsewhere on a shared
    machine hits every candidate alike, and the median per runner is reported. Runners are
    warmed in the order given; once ``budget_seconds`` is spent the remaining ones are
    skipped (the first is always timed). ``progress`` is called after each timed round.

    With a ``failures`` dict, a runner that raises (when warmed up or timed) is dropped from the
    result and its exception recorded there under its label (and logged); without one, the
    exception propagates.

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

    def failed(label: str, exc: Exception) -> None:
        if failures is None:
            raise exc
        failures[label] = exc
        logger.warning("autotune: candidate %s failed when run (%s: %s); skipped", label, type(exc).__name__, exc)

    for label, fn in runners:
        if calls and budget_seconds is not None and time.perf_counter() - start > budget_seconds:
            break
        try:
            first = timer(fn, 1)
        except Exception as exc:  # noqa: BLE001 - one failing candidate must not stop the others
            failed(label, exc)
            continue
        calls[label] = (fn, max(1, min(10_000, int(sample_seconds / max(first, 1e-9)))))
    samples: dict[str, list[float]] = {label: [] for label in calls}
    for round_index in range(repeats):
        for label, (fn, count) in list(calls.items()):
            try:
                samples[label].append(timer(fn, count))
            except Exception as exc:  # noqa: BLE001
                del calls[label], samples[label]
                failed(label, exc)
        if progress is not None:
            progress(f"round {round_index + 1}/{repeats}")
    return {label: statistics.median(values) for label, values in samples.items()}


def progress_reporter(title: str, total: int) -> tuple[Callable[[str], None] | None, Callable[[], None]]:
    """How a long autotune shows progress: a tqdm bar on a terminal when tqdm is installed,
    else INFO log lines on the ``nvmathpy`` logger when INFO is enabled, else nothing.

    Returns ``(step, close)``: call ``step(what)`` after each unit of work (``total`` in all)
    and ``close()`` at the end. ``step`` is ``None`` when nothing is shown.

    Examples
    --------
    >>> step, close = progress_reporter("Matmul autotune", 3)
    >>> step is None or callable(step)
    True
    >>> close()
    """
    if sys.stderr is not None and sys.stderr.isatty():
        try:
            from tqdm import tqdm
        except ImportError:
            pass
        else:
            bar = tqdm(total=total, desc=title, leave=False)

            def step(what: str) -> None:
                bar.set_postfix_str(what, refresh=False)
                bar.update(1)

            return step, bar.close
    if logger.isEnabledFor(20):
        done = [0]

        def log_step(what: str) -> None:
            done[0] += 1
            logger.info("%s: %d/%d %s", title, done[0], total, what)

        return log_step, lambda: None
    return None, lambda: None
