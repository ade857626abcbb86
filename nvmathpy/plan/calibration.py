"""Calibration: the crossovers of the CPU heuristics, measured on this machine and kept in wisdom.

A heuristic that chooses among algorithms by order (which LU, Cholesky or eigh driver is
tried first) asks :func:`calibrated` for a named value. The value comes from the wisdom store
(:mod:`.wisdom`), keyed by the name and by this machine as every wisdom entry is
(:func:`nvmathpy.execution.cpu_description`: CPU model, core count, architecture, NumPy's and
SciPy's BLAS, their versions) and nvmathpy's version; an entry of another machine is never
read. Values are measured by ``python -m nvmathpy tune``, or, bounded in time
(:data:`AUTO_SECONDS`), the first time a heuristic asks for one it does not have. Without a value the heuristic takes its default, which is conservative: the
solvers' is the call a user would otherwise make (:mod:`nvmathpy.linalg.solvers.cpu._calibrate`).

Automatic calibration is controlled by ``NVMATHPY_CALIBRATE``: ``auto`` (the default) measures
a missing value on first need; ``off`` never measures (defaults and values stored by ``tune``
only). Measurements are timings, so the choice they lead to can differ between runs: the test
suite and CI set ``off``, which makes every choice there a function of the stored values alone.

Measurements alternate the candidate and the reference call a user would otherwise make, one
call each in turn and without pauses (:func:`alternating_rounds`; the benchmarks'
``--mode interleaved`` times the same way): the candidate then runs as
it would in a program that mixes nvmathpy with SciPy and NumPy, whose thread pools keep
spinning for a while after each call.
"""

from __future__ import annotations

import functools
import os
import random
import statistics
import threading
import time
from typing import Any, Callable, Iterable

from .._logging import logger
from .._version import __version__
from ..execution import cpu_description
from .problem import Problem
from .wisdom import default_wisdom

__all__ = ["AUTO_SECONDS", "RETRY_SECONDS", "OutOfTime", "alternating_rounds", "auto_enabled", "calibrated", "choose_first", "entries",
           "forget", "interleaved_ratios", "prefetch", "record", "stored_in"]

#: Seconds an automatic calibration of one value may take (``tune`` takes a bound of its own).
AUTO_SECONDS = 1.0
#: The wisdom operation name of calibration entries.
OPERATION = "calibration"

#: Seconds a measurement on first need that failed (out of time on a busy machine) is not tried
#: again, by any process on this machine (``tune`` measures regardless): a retry in every new
#: process would cost each one's first large factorization the whole measurement again.
RETRY_SECONDS = 24 * 3600.0

#: The stored choice (``{"label": ..., "params": ...}``; ``None``: none stored) looked up in
#: this process by (store file, name); a lookup costs a dict access.
_MEMO: dict[tuple[str, str], Any] = {}
#: Names whose measurement failed in this process, by (store file, name): not measured again.
_FAILED: set[tuple[str, str]] = set()
#: Held while a value is being measured (a heuristic asked meanwhile, by another thread or by
#: the measurement itself, gets its default).
_MEASURING = threading.Lock()


def auto_enabled() -> bool:
    """Whether a missing value is measured on first need (``NVMATHPY_CALIBRATE`` is not ``off``)."""
    return os.environ.get("NVMATHPY_CALIBRATE", "auto").strip().lower() not in ("off", "0", "false", "no")


def _problem(name: str) -> Problem:
    return Problem.of(OPERATION, name=name)


def _memo_key(name: str) -> tuple[str, str]:
    environ = os.environ
    return (_store(environ.get("NVMATHPY_CACHE_DIR"), environ.get("XDG_CACHE_HOME"), environ.get("HOME"),
                   environ.get("NVMATHPY_WISDOM")), name)


@functools.lru_cache(maxsize=16)
def _store(*settings: str | None) -> str:
    """The default store's file (``""``: wisdom off) under ``settings``, the environment
    variables it follows: a look-up by a heuristic costs a few dict accesses, not a path's
    construction (the FFT heuristic looks one up on the first call of each new signature)."""
    wisdom = default_wisdom()
    return str(wisdom.path) if wisdom.enabled else ""


def _usable(choice: Any) -> dict[str, Any] | None:
    """A stored entry's choice as memoised: itself where it has the expected form, else ``None``."""
    return choice if isinstance(choice, dict) and isinstance(choice.get("params"), dict) else None


def _choice(name: str) -> dict[str, Any] | None:
    key = _memo_key(name)
    if key not in _MEMO:
        entry = default_wisdom().lookup(_problem(name), cpu_description())
        _MEMO[key] = _usable(entry.get("choice") if entry else None)
    return _MEMO[key]


def _value(choice: dict[str, Any] | None) -> Any:
    """The calibrated value of a memoised choice (``None``: none, or only a failed measurement)."""
    return choice["params"].get("value") if choice and choice.get("label") == "calibrated" else None


def _stored(name: str) -> Any:
    """The value stored for ``name`` (``None``: none, or only a failed measurement)."""
    return _value(_choice(name))


def _failed_lately(name: str) -> bool:
    """Whether a measurement of ``name`` on first need failed here less than
    :data:`RETRY_SECONDS` ago (in this process, or in any other, as stored)."""
    if _memo_key(name) in _FAILED:
        return True
    choice = _choice(name)
    at = choice["params"].get("at") if choice and choice.get("label") == "failed" else None
    return isinstance(at, (int, float)) and 0 <= time.time() - at < RETRY_SECONDS


def record(name: str, value: Any, measured: dict[str, Any], seconds: float) -> None:
    """Store ``value`` for ``name`` on this machine, with the measurements it came from.

    Examples
    --------
    >>> record("example", {"first": "lookahead"}, {"lookahead": 1.4, "scipy": 1.0}, 0.5)
    >>> calibrated("example", None)
    {'first': 'lookahead'}
    """
    choice = {"label": "calibrated", "params": {"value": value}}
    default_wisdom().record(_problem(name), cpu_description(), choice,
                            extra={"measured": measured, "seconds": round(seconds, 3)})
    _MEMO[_memo_key(name)] = choice


def _record_failure(name: str, error: Exception) -> None:
    """Remember, here and in the store, that measuring ``name`` on first need failed now."""
    choice = {"label": "failed", "params": {"at": time.time()}}
    _FAILED.add(_memo_key(name))
    try:
        default_wisdom().record(_problem(name), cpu_description(), choice, extra={"error": str(error)[:200]})
    except Exception as exc:  # noqa: BLE001 - the process still remembers it
        logger.warning("could not store the failed calibration of %s (%s)", name, exc)
    _MEMO[_memo_key(name)] = choice


def forget() -> None:
    """Drop the values looked up in this process (the next lookups read the store again, and
    failed measurements may run again)."""
    _MEMO.clear()
    _FAILED.clear()
    _PREFETCHED.clear()


#: The families :func:`prefetch` has looked up, by (store file, family).
_PREFETCHED: set[tuple[str, str]] = set()


def prefetch(family: str, names: Iterable[str]) -> None:
    """Look every name of ``names`` (a ``family`` of values) up in one pass over the store, once
    per store and process: a family that calls of many shapes ask for (a thread count per routine
    and order) then costs each first lookup a dict access, not the hash of its wisdom key (about
    a hundred microseconds: a small call's first call on a new shape would show it).

    Examples
    --------
    >>> prefetch("example", ["example.a", "example.b"])
    >>> calibrated("example.a", None)
    """
    store = _memo_key(family)[0]
    done = (store, family)
    if done in _PREFETCHED:
        return
    wanted = set(names)
    found: dict[str, Any] = {}
    here = cpu_description()
    for entry in default_wisdom().entries():
        problem = entry.get("problem", {})
        name = problem.get("fields", {}).get("name") if problem.get("operation") == OPERATION else None
        if name in wanted and entry.get("device") == here and entry.get("nvmathpy") == __version__:
            found[name] = entry.get("choice")
    for name in wanted:  # as _choice would find each
        _MEMO.setdefault((store, name), _usable(found.get(name)))
    _PREFETCHED.add(done)


def stored_in(family: str, names: Iterable[str], name: str) -> Any:
    """The value stored for ``name``, one of ``names`` (a ``family`` read together by
    :func:`prefetch` on its first look), else ``None``: what ``calibrated(name, None)`` gives,
    at the cost of a few dict accesses (the calls of a small routine ask it each time).

    Examples
    --------
    >>> stored_in("example", ["example.a"], "example.a") is None
    True
    """
    store = _memo_key(name)[0]
    if (store, family) not in _PREFETCHED:
        prefetch(family, names)
    return _value(_MEMO[(store, name)] if (store, name) in _MEMO else _choice(name))


def calibrated(name: str, default: Any, measure: Callable[[float], tuple[Any, dict[str, Any]]] | None = None) -> Any:
    """The value calibrated for ``name`` on this machine, else ``default``.

    When none is stored, ``measure`` is given, and :func:`auto_enabled`, ``measure(AUTO_SECONDS)``
    runs once (``(value, measurements)``), and its value is stored and returned; a measurement
    that fails leaves ``default``, and is not tried again on first need for
    :data:`RETRY_SECONDS` (the failure is stored too; ``tune`` measures regardless).

    Examples
    --------
    >>> calibrated("an uncalibrated name", 768)
    768
    """
    value = _stored(name)
    if value is not None:
        return value
    if (measure is None or not auto_enabled() or _failed_lately(name)
            or not _MEASURING.acquire(blocking=False)):
        return default
    try:
        start = time.perf_counter()
        logger.info("calibrating %s on this machine (about %.1f s of timing; NVMATHPY_CALIBRATE=off disables)",
                    name, AUTO_SECONDS)
        try:
            value, measured = measure(AUTO_SECONDS)
        except Exception as exc:  # noqa: BLE001 - a measurement only ever replaces a default
            logger.warning("calibrating %s failed (%s); using the default (not measured again on first need for "
                           "%.0f h; python -m nvmathpy tune measures it)", name, exc, RETRY_SECONDS / 3600)
            _record_failure(name, exc)
            return default
        record(name, value, measured, time.perf_counter() - start)
        return value
    finally:
        _MEASURING.release()


def entries() -> list[dict[str, Any]]:
    """The values calibrated on this machine: ``name``, ``value``, ``recorded``, ``seconds``,
    ``measured``, each from the store (for ``python -m nvmathpy info``)."""
    here = cpu_description()
    found = []
    for entry in default_wisdom().entries():
        problem = entry.get("problem", {})
        if problem.get("operation") != OPERATION or entry.get("device") != here:
            continue
        extra = entry.get("extra", {})
        if entry["choice"].get("label") == "failed":
            continue
        found.append({"name": problem.get("fields", {}).get("name"), "value": entry["choice"].get("params", {}).get("value"),
                      "recorded": entry.get("recorded"), "seconds": extra.get("seconds"),
                      "measured": extra.get("measured", {})})
    return sorted(found, key=lambda e: str(e["name"]))


def alternating_rounds(contenders: dict[str, Callable[[], Any]], rounds: int, calls: int = 1) -> dict[str, list[float]]:
    """Seconds per call of each contender in each round.

    A round makes ``calls`` passes, each pass one call of every contender, with no pause: each
    call runs right after a call of another, as in a program that mixes them. Two contenders
    alternate (who goes first moves on each round); with more, each pass takes an order drawn
    afresh (seeded: runs repeat), never starting with the contender that ended the pass before,
    so that no contender always follows the same other one (a call leaves caches, spinning
    threads and freed memory behind, which the next call pays or profits from).

    Examples
    --------
    >>> times = alternating_rounds({"a": lambda: sum(range(10)), "b": lambda: sum(range(20))}, rounds=3)
    >>> [len(t) for t in times.values()]
    [3, 3]
    """
    names = list(contenders)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    draw = random.Random(len(names))
    order: list[str] = names
    last = None
    for r in range(rounds):
        if len(names) <= 2:
            k = r % len(names)
            order = names[k:] + names[:k]
        spent = dict.fromkeys(names, 0.0)
        for _ in range(calls):
            if len(names) > 2:
                order = names[:]
                draw.shuffle(order)
                while order[0] == last:
                    draw.shuffle(order)
                last = order[-1]
            for name in order:
                start = time.perf_counter()
                contenders[name]()
                spent[name] += time.perf_counter() - start
        for name in names:
            seconds[name].append(spent[name] / calls)
    return seconds


def interleaved_ratios(candidate: Callable[[], Any], reference: Callable[[], Any], rounds: int,
                       calls: int = 1) -> list[float]:
    """Per round of :func:`alternating_rounds`, the reference's time over the candidate's (> 1:
    the candidate is faster).

    Examples
    --------
    >>> ratios = interleaved_ratios(lambda: sum(range(10)), lambda: sum(range(10)), rounds=3)
    >>> len(ratios), all(r > 0 for r in ratios)
    (3, True)
    """
    times = alternating_rounds({"candidate": candidate, "reference": reference}, rounds, calls)
    return [r / max(c, 1e-12) for c, r in zip(times["candidate"], times["reference"])]


class OutOfTime(Exception):
    """A measurement that would not fit its time bound (nothing was timed)."""


def choose_first(contenders: dict[Any, Callable[[], Any]], reference: Callable[[], Any], keep: Any, seconds: float, *,
                 rounds: int, min_rounds: int, call_seconds: float, max_calls: int,
                 margin: float, every_round: bool = False) -> tuple[Any, dict[str, float]]:
    """``(first, {contender: median ratio})``: each contender timed against ``reference`` in
    :func:`interleaved_ratios` (the ratio: the reference's time over the contender's), and the
    contender to try first - ``keep`` unless another's median ratio beats it by ``margin``
    (and, with ``every_round``, it was faster than the reference in every round: a choice whose
    loss where noise misleads would cost more than its gain brings).

    The reference is timed first (twice where the first call would not fit): :class:`OutOfTime`,
    before any contender runs, when not even ``min_rounds`` rounds would fit ``seconds``. Then
    every contender is called once (compiled drivers, workspaces, plans), and up to ``rounds``
    rounds run, as many as ``seconds`` allow, each of passes lasting about ``call_seconds`` (at
    most ``max_calls`` calls).

    Examples
    --------
    >>> first, ratios = choose_first({"a": lambda: sum(range(10)), "b": lambda: sum(range(10))},
    ...                              lambda: sum(range(10)), "a", 5.0, rounds=3, min_rounds=3,
    ...                              call_seconds=1e-4, max_calls=10, margin=100.0)
    >>> first, sorted(ratios)
    ('a', ['a', 'b'])
    """
    for _ in range(2):  # the first call may carry one-time costs (imports, workspaces): a second look
        start = time.perf_counter()
        reference()
        once = max(time.perf_counter() - start, 1e-7)
        calls = max(1, min(max_calls, int(call_seconds / once)))
        fit = min(rounds, int(seconds / (2 * once * calls * len(contenders))))
        if fit >= min_rounds:
            break
    else:
        raise OutOfTime(f"{min_rounds} rounds take over {seconds:g} s here")
    rounds = fit
    for call in contenders.values():
        call()
    ratios = {name: interleaved_ratios(call, reference, rounds, calls) for name, call in contenders.items()}
    medians = {name: float(statistics.median(r)) for name, r in ratios.items()}
    eligible = [name for name in medians if name == keep or not every_round or min(ratios[name]) > 1.0]
    best = max(eligible, key=lambda name: medians[name] / (1.0 if name == keep else margin))
    return best, {str(name): round(r, 3) for name, r in medians.items()}
