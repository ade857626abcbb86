"""The thread counts of NumPy's and SciPy's OpenBLAS, and calls stepped down to the cores free now.

OpenBLAS's worker threads spin for a while (a tenth of a second or so) after each call. NumPy
and SciPy each load their own OpenBLAS, so a program that builds its matrices with NumPy
products and then factors them, or that alternates SciPy's and nvmathpy's calls, or that runs
beside another busy process, starts a factorization while a core is taken. A multi-threaded
OpenBLAS call then waits at every step for its thread on the taken core: on two cores a
Cholesky factorization of order 512 right after a SciPy call took many times as long as alone,
and SciPy's own ``cholesky`` of order 256 right after a NumPy product did too, while on one
thread each took about as long as alone. ``benchmarks/bench_linalg.py --only targets --mode
interleaved`` and ``benchmarks/bench_scipy_mix.py`` measure such programs.

:func:`stepped_down` therefore looks, just before a large call, at what holds the cores: the
running count of ``/proc/loadavg`` (one small read; when the caller is the only thread running
anywhere, that is all), else this process's running threads and, per pool, those that are not
its own workers, and sets each pool to the cores left for it (at least one) for the call,
restoring the counts after it. A pool's workers are learned once per process by a small
product on that pool (:data:`PROBE_ORDER`): the threads it leaves spinning, or, where the
pool's workers were spinning already (right after a SciPy call, in a program that alternates
SciPy's calls and nvmathpy's), the threads that ran before it and still run. Until then every
running thread counts as taking a core; from then on, where the load count shows nothing but
the known workers running, only their few files are read.

OpenBLAS's results can differ in the last bits between thread counts, so a stepped-down call
gives the bits the same routine gives on that many threads. ``NVMATHPY_FREE_CORES=off`` (read at
import; the test suite sets it) keeps every count as it is (:data:`ENABLED`).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import threading
from typing import Any, Callable, TypeVar

import numpy as np

from ....execution import _loaded_openblas_files, _package_dirs
from ....kernels.cpu_gemm import process_id, running_among, running_threads
from ...gemm.cpu._cblas import _numpy_blas

__all__ = ["BUSY_LEARN_FROM", "ENABLED", "NUMPY", "PLAN_FREE_CORES_FROM", "POOLS", "PROBES", "PROBE_ORDER", "Pool",
           "SCIPY", "THREAD_COUNT", "count_changed", "holds_counts", "on_counts", "on_free_cores_of", "only_hot",
           "runnable_elsewhere", "scipy_openblas", "stepped_down", "thread_count_functions"]

T = TypeVar("T")

#: Held while a call has changed an OpenBLAS thread count (a look-ahead driver that set NumPy's
#: to one, or a stepped-down call): each count is one process-wide number, so one changer at a time.
THREAD_COUNT = threading.Lock()

#: Whether calls look at the free cores at all (``NVMATHPY_FREE_CORES=off``: never).
ENABLED = os.environ.get("NVMATHPY_FREE_CORES", "on").strip().lower() not in ("off", "0", "false", "no")

#: The order of the product that shows a pool's workers: large enough that OpenBLAS runs it on
#: every thread, small enough to cost well under a millisecond.
PROBE_ORDER = 128
#: The most probes per pool and process: a pool whose workers a few probes do not show (a
#: build that runs the product on one thread, threads that come and go) stays unknown, and its
#: calls keep counting every running thread as taking a core.
PROBES = 4
#: From this many elements on, a call may learn every pool's workers beside running threads
#: (:func:`_learn`): a probe then may wait for its worker to get a core from a spinning thread (a
#: millisecond or more), which only a call this large hides; smaller calls learn one pool where
#: nothing runs, or SciPy's beside threads that may be its own spinning workers.
BUSY_LEARN_FROM = 1024 * 1024


def _count_functions(lib: Any) -> tuple[Any, Any] | None:
    """OpenBLAS's ``(get, set)`` of its thread count in ``lib``, whatever affixes the build uses."""
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


@functools.lru_cache(maxsize=None)
def thread_count_functions() -> tuple[Any, Any] | None:
    """OpenBLAS's ``(get, set)`` of its thread count in NumPy's build, or ``None`` (looked up
    once: every candidate list and every factorization asks)."""
    return _count_functions(_numpy_blas())


_scipy_library: list[Any] = []
_scipy_functions: list[tuple[Any, Any] | None] = []


def scipy_openblas() -> ctypes.CDLL | None:
    """SciPy's OpenBLAS once SciPy has loaded it (``scipy.linalg``), else ``None``: not looked
    for, and asked again next time, while ``scipy.linalg`` is not imported (loading it is
    SciPy's business, not this module's; a look through the loaded libraries costs a fraction
    of a millisecond, and every look at the free cores asks), remembered once it is (also a
    SciPy linked to a BLAS outside its wheel, which has none of its own to find)."""
    if _scipy_library:
        return _scipy_library[0]
    loaded = "scipy.linalg" in sys.modules
    if not loaded:  # (SciPy loads its OpenBLAS with scipy.linalg's extension modules)
        return None
    found = _loaded_openblas_files(_package_dirs("scipy"))
    library = None
    if len(found) == 1:
        try:
            library = ctypes.CDLL(found[0])
        except OSError:
            pass
    if library is not None or loaded:
        _scipy_library.append(library)
    return library


def scipy_thread_count_functions() -> tuple[Any, Any] | None:
    """The count functions of :func:`scipy_openblas`, or ``None`` (remembered as it is)."""
    if _scipy_functions:
        return _scipy_functions[0]
    library = scipy_openblas()
    if library is None and not _scipy_library:
        return None  # not loaded yet
    functions = _count_functions(library)
    _scipy_functions.append(functions)
    return functions


def _numpy_probe() -> None:
    x = np.ones((PROBE_ORDER, PROBE_ORDER))
    x.dot(x)


def _scipy_probe() -> None:
    from scipy.linalg.blas import dgemm

    x = np.ones((PROBE_ORDER, PROBE_ORDER), order="F")
    dgemm(1.0, x, x)


class Pool:
    """One OpenBLAS's thread pool: its count functions, a product that wakes its workers, and
    the workers once learned (with the process they were seen in: a forked child has others)."""

    def __init__(self, name: str, functions: Callable[[], tuple[Any, Any] | None], probe: Callable[[], None]) -> None:
        self.name, self.functions, self.probe = name, functions, probe
        self.workers: tuple[int, frozenset[str]] | None = None
        self._probes: tuple[int, int] = (0, 0)  # (process, probes made there)

    def probes_left(self) -> int:
        """How many more probes this process may make to learn the workers (:data:`PROBES`)."""
        pid, made = self._probes
        return PROBES - (made if pid == process_id() else 0)

    def probed(self) -> None:
        """Count one probe of this process."""
        pid, made = self._probes
        self._probes = (process_id(), made + 1 if pid == process_id() else 1)

    def known_workers(self) -> frozenset[str] | None:
        known = self.workers
        return known[1] if known is not None and known[0] == process_id() else None

    def __repr__(self) -> str:
        return f"Pool({self.name!r}, workers={self.known_workers()})"


NUMPY = Pool("numpy", lambda: thread_count_functions(), _numpy_probe)
SCIPY = Pool("scipy", scipy_thread_count_functions, _scipy_probe)
#: Both pools, for calls that may run on either (the scipy.linalg drop-in's).
POOLS = (NUMPY, SCIPY)


def _workers_of(pools: tuple[Pool, ...]) -> frozenset[str]:
    """The known workers of ``pools``, together (kept per set of pools' workers: every look asks)."""
    key = (process_id(), *(pool.workers for pool in pools))
    together = _WORKERS_OF.get(key)
    if together is None:
        together = _WORKERS_OF[key] = frozenset().union(*(pool.known_workers() or () for pool in pools))
    return together


#: :func:`_workers_of` by the process and the pools' ``workers`` (learned a few times a process).
_WORKERS_OF: dict[tuple, frozenset[str]] = {}


def _learn(present: list[tuple[Pool, Any]], counts: list[int], running: frozenset[str], busy: bool) -> bool:
    """Learn the workers of the pools in ``present`` (with their thread ``counts``) not yet
    known, by a small product on each such pool: the threads it leaves running that did not run
    before are its workers, or, where it wakes none, the unknown threads that were already
    running are (that pool's workers still spinning after a call: a product on all its threads
    would have woken a sleeping one).

    A probe whose worker finds its core taken waits for it (a few milliseconds on two cores),
    so a ``busy`` call (long enough to hide that) probes every unknown pool where the unknown
    threads ``running`` now could all be their workers; any other call probes one pool, and
    only where that needs no taken core: where no thread of the process runs, or beside
    running threads that could all be its own workers: SciPy's pool beside threads none of
    which is a known worker (SciPy's spin right after every SciPy call, the usual state of a
    program that calls SciPy and the drop-in in turn), any pool beside as many unknown threads
    as it has workers, all other pools' workers being known (NumPy's spin beside SciPy's
    where calls use both pools, and would otherwise never be learned). The probe then wakes
    none and costs a tenth of a millisecond; where they were another's, it waits once and
    learns the worker it woke. Under :data:`THREAD_COUNT` (no count changes
    meanwhile), at most :data:`PROBES` times per pool and process; a pool beside more unknown
    running threads than its workers is not probed (nor the probe counted): where both pools
    spin, a probe wakes no new thread and cannot tell whose they are. Returns whether it
    probed (the probed pools' workers then spin)."""
    unknown = [(pool, count) for (pool, _), count in zip(present, counts)
               if count >= 2 and pool.known_workers() is None and pool.probes_left() > 0]
    known = _workers_of(POOLS)
    strangers = running - known
    if not busy:
        fitting = [(pool, count) for pool, count in unknown if not running
                   or pool is SCIPY and running == strangers and len(strangers) <= count - 1
                   or len(strangers) == count - 1 and _others_known(pool)]
        unknown = sorted(fitting, key=lambda pool_count: pool_count[0] is not SCIPY)[:1]
    if not unknown or len(strangers) > sum(count - 1 for _, count in unknown):
        return False
    if not THREAD_COUNT.acquire(blocking=False):
        return False
    probed = False
    try:
        for pool, count in unknown:
            before = running_threads() - known
            if len(before) > count - 1:  # not all the pool's: were its own among them, it would wake
                continue  # none and tell nothing (both pools spinning); not spent, left for a clearer look
            probed = True
            pool.probed()
            pool.probe()
            after = running_threads()
            seen = after - before - known
            if not seen and len(before) == count - 1 and before <= after:
                seen = before  # the pool's workers were the threads spinning already
            if len(seen) == count - 1:
                pool.workers = (process_id(), seen)
                known |= seen
    finally:
        THREAD_COUNT.release()
    return probed


def _others_known(pool: Pool) -> bool:
    """Whether every loaded pool but ``pool`` has its workers known (a thread running beside
    them then is no other pool's worker: it may be ``pool``'s own, spinning after its call)."""
    return _all_known(tuple(other for other in POOLS if other is not pool))


def only_hot(pool: Pool, scan: bool = True) -> bool:
    """Whether ``pool``'s (known) workers are running now and no other thread of the process
    is: right after a call on that pool, whose next call starts on every core at once. Without
    ``scan`` (for short calls), where something else runs too, only the other pools' known
    workers are looked at, not every thread of the process.

    Examples
    --------
    >>> only_hot(SCIPY) in (True, False)
    True
    """
    workers = pool.known_workers()
    anywhere = _running_anywhere() if ENABLED and workers else 1
    if anywhere <= 1 or running_among(workers) != workers:
        return False  # (its workers looked at first: a few reads, where the scan reads every thread)
    if anywhere - 1 == len(workers):  # they are all that runs on the machine
        return True
    if scan:
        return running_threads() <= workers
    others = _workers_of(tuple(other for other in POOLS if other is not pool))
    return not running_among(others)


def runnable_elsewhere(running_here: int) -> int:
    """How many threads outside this process are runnable now: the running count of
    ``/proc/loadavg`` less the caller and ``running_here`` other threads of this process
    (0 where it cannot be read).

    Examples
    --------
    >>> runnable_elsewhere(0) >= 0
    True
    """
    return max(0, _running_anywhere() - 1 - running_here)


_loadavg: list[int] = []


def _running_anywhere() -> int:
    """The running count of ``/proc/loadavg`` (the caller included; 1 where it cannot be read),
    read from a descriptor kept open (one system call a look)."""
    try:
        if not _loadavg:
            _loadavg.append(os.open("/proc/loadavg", os.O_RDONLY))
        return int(os.pread(_loadavg[0], 128, 0).split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return 1


@functools.lru_cache(maxsize=1)
def _cores() -> int:
    return os.cpu_count() or 1


def _all_known(pools: tuple[Pool, ...]) -> bool:
    """Whether every pool of ``pools`` that is loaded has its workers known."""
    pid = process_id()
    return all(pool.workers is not None and pool.workers[0] == pid or pool.functions() is None for pool in pools)


def stepped_down(call: Callable[[], T], pools: tuple[Pool, ...] = (NUMPY,), learn: bool = True,
                 instead: Callable[[], T] | None = None, busy_learn: bool = False) -> T:
    """``call()`` (a call into the OpenBLAS of ``pools``) with each pool's thread count lowered,
    for its duration, to the cores that no thread other than its own workers holds now (at
    least one); unchanged where all its threads have a core, where its count is one, or while
    another caller has a count changed. ``learn``: whether this call may learn the pools'
    workers first (a small product on one pool, a tenth of a millisecond or so, where it needs
    no core that another thread holds: :func:`_learn`), ``busy_learn`` on every pool and also
    beside a thread it cannot place yet (calls of :data:`BUSY_LEARN_FROM` elements and more).
    ``instead``: the same call on SciPy's OpenBLAS, run in its place while SciPy's pool alone
    spins (right after a SciPy call: its threads start on every core at once, where the call
    on ``pools`` would be stepped down to the cores they leave).

    Examples
    --------
    >>> import numpy as np
    >>> a = np.arange(4.0).reshape(2, 2)
    >>> stepped_down(lambda: a @ a).tolist()
    [[2.0, 3.0], [6.0, 11.0]]
    """
    if not ENABLED:
        return call()
    twin = instead if instead is not None and SCIPY not in pools else None
    watched = pools + (SCIPY,) if twin is not None else pools  # the pools whose workers are learned
    anywhere = _running_anywhere()
    if anywhere <= 1 and _all_known(watched):  # nothing else runs: all cores are free
        return call()
    present = [(pool, functions) for pool in watched if (functions := pool.functions()) is not None]
    counts = [functions[0]() for _, functions in present]
    if max(counts, default=1) < 2:
        return call()
    # where all that runs besides the caller is the pools' known workers, only they are read, not
    # every thread (a busy call that may still learn a pool reads all, to probe beside them)
    known = _workers_of(watched) if anywhere > 1 and (not busy_learn or _all_known(watched)) else frozenset()
    hot = running_among(known) if known else frozenset()
    if known and len(hot) >= anywhere - 1:
        running = hot
    else:
        running = running_threads() if anywhere > 1 else frozenset()
        if learn and _learn(present, counts, running, busy_learn):
            anywhere, running = _running_anywhere(), running_threads()
        elif anywhere > 1:  # read again after the look at the threads: what ran a moment only (the
            # kernel's own short work, a thread ending) is not load that a whole call should yield to
            anywhere = min(anywhere, _running_anywhere())
    if anywhere <= 1:
        return call()
    scipys, called = SCIPY.known_workers(), pools
    if twin is not None and running and scipys and running <= scipys:
        call, called = twin, (SCIPY,)
    cores = _cores()
    elsewhere = max(0, anywhere - 1 - len(running))
    changes = []
    for (pool, (_, put)), count in zip(present, counts):
        if pool not in called:
            continue
        workers = pool.known_workers()
        holding = len(running - workers) if workers is not None else len(running)
        free = max(1, min(count, cores - holding - elsewhere))
        if free < count:
            changes.append((put, free, count))
    return on_counts(changes, call)


#: The smallest matrix order whose plans (and direct one-call paths) run
#: :func:`on_free_cores_of`: below it OpenBLAS runs their routines on one thread, and the look
#: (a few microseconds) would only cost.
PLAN_FREE_CORES_FROM = 65


def on_free_cores_of(run: Callable[..., T]) -> Callable[..., T]:
    """``run`` (a plan's computation on CPU matrices, which calls SciPy's or NumPy's OpenBLAS)
    with each call :func:`stepped_down` on both pools: in a program that alternates NumPy's
    products (or SciPy's calls) and nvmathpy's, the other pool's threads still spin on a core
    at the call's start; an OpenBLAS call on every core then waits for its thread on that core
    (a scheduler tick, milliseconds, at each step), and its own pool's threads, woken, spin
    after it and slow the program's next call of the other pool alike. Stepped down to the
    free cores, it wakes no thread on a taken core.

    Examples
    --------
    >>> on_free_cores_of(lambda x: x + 1)(1)
    2
    """

    @functools.wraps(run)
    def stepped(*args: Any, **kwargs: Any) -> T:
        return stepped_down(lambda: run(*args, **kwargs), POOLS)

    return stepped


def on_counts(changes: list[tuple[Callable[[int], None], int, int]], call: Callable[[], T]) -> T:
    """``call()`` with each ``(put, count, before)`` of ``changes`` applied (``put(count)``) for its
    duration and undone after (``put(before)``), under :data:`THREAD_COUNT`; as it is where
    there is nothing to change or another thread holds a changed count. Inside a call of this
    thread that holds it already (a calibrated thread count within a stepped-down call), the
    changes nest: applied, and undone to the outer call's counts.

    Examples
    --------
    >>> on_counts([], lambda: "called")
    'called'
    """
    if not changes:
        return call()
    held = getattr(_HELD, "changes", None)
    if held is not None:
        return _changed(changes, call, held)
    if not THREAD_COUNT.acquire(blocking=False):
        return call()
    _HELD.changes = []
    try:
        return _changed(changes, call, _HELD.changes)
    finally:
        _HELD.changes = None
        THREAD_COUNT.release()


def holds_counts() -> bool:
    """Whether this thread runs inside a call that holds :data:`THREAD_COUNT`.

    Examples
    --------
    >>> holds_counts(), on_counts([(lambda count: None, 1, 2)], holds_counts)
    (False, True)
    """
    return getattr(_HELD, "changes", None) is not None


def count_changed(put: Callable[[int], None]) -> bool:
    """Whether this thread runs inside a call that changed the count ``put`` sets (the pool's
    count is not its own there).

    Examples
    --------
    >>> count_changed(print)
    False
    """
    return any(changed is put for changed, _, _ in getattr(_HELD, "changes", None) or ())


#: Per thread, the count changes in force of the calls it runs under :data:`THREAD_COUNT`.
_HELD = threading.local()


def _changed(changes: list[tuple[Callable[[int], None], int, int]], call: Callable[[], T],
             held: list[tuple[Callable[[int], None], int, int]]) -> T:
    for put, count, _ in changes:
        put(count)
    held.extend(changes)
    try:
        return call()
    finally:
        del held[len(held) - len(changes):]
        for put, _, before in reversed(changes):
            put(before)
