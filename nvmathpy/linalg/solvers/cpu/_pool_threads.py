"""The thread count of NumPy's OpenBLAS, and calls on it stepped down to the cores free now.

OpenBLAS's worker threads spin for a while (a tenth of a second or so) after each call, so a
program that calls SciPy (whose OpenBLAS is another thread pool) and then nvmathpy, or runs
beside another busy process, starts nvmathpy's factorization while a core is taken. A
multi-threaded OpenBLAS call then waits at every step for its thread on the taken core: on two
cores a Cholesky factorization of order 512 right after SciPy's took many times as long as
alone, while on one thread it took about as long as alone.
``benchmarks/bench_linalg.py --only targets --mode interleaved`` measures such alternation.

:func:`stepped_down` therefore counts, just before the call, the threads that hold a core: this
process's running threads that are not NumPy's OpenBLAS workers (those are learned once, as the
threads found running right after one of its multi-threaded calls that were not running before
it) and other processes' runnable threads (``/proc/loadavg``), and runs the call with OpenBLAS
set to the cores left (at least one), restoring the count after it. Looking costs a few small
``/proc`` reads, which is why only the large factorizations ask.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from typing import Any, Callable, TypeVar

from ....kernels.cpu_gemm import running_threads
from ...gemm.cpu._cblas import _numpy_blas

__all__ = ["THREAD_COUNT", "runnable_elsewhere", "stepped_down", "thread_count_functions"]

T = TypeVar("T")

#: Held while a call has changed NumPy's OpenBLAS thread count (a look-ahead driver that set it
#: to one, or a stepped-down call): the count is one process-wide number, so one changer at a time.
THREAD_COUNT = threading.Lock()

#: NumPy's OpenBLAS worker threads, learned from one of its calls, with the process they were
#: seen in (a forked child has other threads).
_workers: tuple[int, frozenset[str]] | None = None


@functools.lru_cache(maxsize=None)
def thread_count_functions() -> tuple[Any, Any] | None:
    """OpenBLAS's ``(get, set)`` of its thread count in NumPy's build, or ``None`` (looked up
    once: every candidate list and every factorization asks)."""
    lib = _numpy_blas()
    if lib is None:
        return None
    for suffix in ("64_", "_64_", ""):
        for prefix in ("scipy_", ""):
            get = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
            put = getattr(lib, f"{prefix}openblas_set_num_threads{suffix}", None)
            if get is not None and put is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                put.restype, put.argtypes = None, [ctypes.c_int]
                return get, put
    return None


def runnable_elsewhere(running_here: int) -> int:
    """How many threads outside this process are runnable now: the running count of
    ``/proc/loadavg`` less the caller and ``running_here`` other threads of this process
    (0 where it cannot be read).

    Examples
    --------
    >>> runnable_elsewhere(0) >= 0
    True
    """
    try:
        with open("/proc/loadavg", "rb") as fh:
            running = int(fh.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return 0
    return max(0, running - 1 - running_here)


def _known_workers() -> frozenset[str] | None:
    known = _workers
    return known[1] if known is not None and known[0] == os.getpid() else None


def stepped_down(call: Callable[[], T]) -> T:
    """``call()`` (a call into NumPy's OpenBLAS) with OpenBLAS's thread count lowered, for its
    duration, to the cores that no other thread holds now (at least one); unchanged where all
    its threads have a core, where its count is one, or while another caller has it changed.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.arange(4.0).reshape(2, 2)
    >>> stepped_down(lambda: a @ a).tolist()
    [[2.0, 3.0], [6.0, 11.0]]
    """
    global _workers
    functions = thread_count_functions()
    if functions is None:
        return call()
    get, put = functions
    before = get()
    if before < 2:
        return call()
    running = running_threads()
    workers = _known_workers()
    holding = len(running - workers) if workers is not None else len(running)
    count = min(before, (os.cpu_count() or 1) - holding - runnable_elsewhere(len(running)))
    if count >= before:
        result = call()
        if workers is None and not running:  # every thread seen running now is one of its workers
            after = running_threads()
            if len(after) == before - 1:
                _workers = (os.getpid(), after)
        return result
    if not THREAD_COUNT.acquire(blocking=False):
        return call()
    try:
        put(max(1, count))
        try:
            return call()
        finally:
            put(before)
    finally:
        THREAD_COUNT.release()
