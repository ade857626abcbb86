"""What the look-ahead factorizations (:mod:`._lookahead_lu`, :mod:`._lookahead_cholesky`)
share: steps of work spread over threads of their own, and OpenBLAS set to one thread meanwhile.

The drivers are generated C (compiled once by :mod:`nvmathpy.kernels.cpu_jit`) that call NumPy's
OpenBLAS. A factorization runs as numbered steps: the caller publishes a step, every thread
claims the step's chunks from one shared counter (so a thread on a busy core takes fewer and
none waits for a share it was given), and the caller, after its own work for the step (the
look-ahead: the next panel), waits until every chunk is done before it publishes the next.

OpenBLAS's thread count is one process-wide number: :func:`run_alone` sets it to one for the
driver's duration and restores it (a BLAS call from another Python thread meanwhile runs on
one thread). It declines - the caller then takes its other algorithm - while another thread of
the process runs: another driver holding the count, or OpenBLAS's worker, which keeps spinning
for a moment after a multi-threaded call; a helper sharing its core slows the whole
factorization down, while OpenBLAS's own multi-threaded calls put that worker to use. It steps
down likewise when other processes keep cores busy (:func:`busy_elsewhere`): the driver then
runs on the cores left free, and declines when fewer than two are (every step waits for its
slowest chunk, so a helper on a shared core makes the whole factorization wait, where
OpenBLAS's routine only loses that core's share).
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, Callable

import numpy as np

from ....kernels import cpu_jit
from ....kernels.cpu_gemm import others_running
from ._numpy_lapack import _PREFIX, _fortran, _symbol, dtype_name
from ._pool_threads import THREAD_COUNT as _THREAD_COUNT
from ._pool_threads import runnable_elsewhere
from ._pool_threads import thread_count_functions as _thread_count_functions

__all__ = ["C_STEPS", "MAX_THREADS", "busy_elsewhere", "compile_driver", "drivers_available", "few_threads",
           "run_alone", "run_driver"]

#: Beyond this many threads the serial panel factorizations weigh more, as the update is
#: shared among more threads; there the drivers are offered after the others, for autotuning
#: to time.
MAX_THREADS = 4

_TYPES = {"float32": "float", "float64": "double"}

#: C of the steps (after ``real`` and ``blasint`` are defined and :data:`cpu_jit.C_HELPER_THREADS`).
C_STEPS = r"""
#include <stdint.h>

typedef struct {
  int64_t ticket;  /* (step << 32) | the next chunk of that step to claim */
  int64_t done;    /* chunks of the current step finished */
  int quit;
  void *job;
  int64_t (*count)(const void *job, int64_t k);            /* chunks of step k */
  void (*run)(void *job, int64_t k, int64_t i, real *tmp);  /* chunk i of step k, with the thread's scratch */
} steps_t;

static void relax(unsigned spins) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
  if (spins % 256 == 0) sched_yield();
}

/* claim and run chunks of the published step until none is left; returns that step */
static int64_t steps_work(steps_t *s, real *tmp) {
  for (;;) {
    const int64_t t = __atomic_fetch_add(&s->ticket, 1, __ATOMIC_ACQ_REL), k = t >> 32, i = t & 0xffffffff;
    if (i >= s->count(s->job, k)) return k;
    s->run(s->job, k, i, tmp);
    __atomic_add_fetch(&s->done, 1, __ATOMIC_RELEASE);
  }
}

typedef struct { steps_t *s; real *tmp; } steps_helper_t;

static void *steps_helper(void *arg) {
  steps_helper_t *h = arg;
  steps_t *s = h->s;
  for (int64_t seen = INT64_MIN;;) {
    for (unsigned spins = 0; (__atomic_load_n(&s->ticket, __ATOMIC_ACQUIRE) >> 32) == seen &&
                             !__atomic_load_n(&s->quit, __ATOMIC_ACQUIRE);)
      relax(++spins);
    if (__atomic_load_n(&s->quit, __ATOMIC_ACQUIRE)) return 0;
    seen = steps_work(s, h->tmp);
  }
}

/* publish step k (the first one before steps_start) */
static void steps_publish(steps_t *s, int64_t k) {
  __atomic_store_n(&s->done, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&s->ticket, k << 32, __ATOMIC_RELEASE);
}

/* the caller's share of step k, then the wait for the others' */
static void steps_finish(steps_t *s, int64_t k, real *tmp) {
  steps_work(s, tmp);
  const int64_t count = s->count(s->job, k);
  for (unsigned spins = 0; __atomic_load_n(&s->done, __ATOMIC_ACQUIRE) < count;) relax(++spins);
}

/* start up to `helpers` threads (the t-th with scratch + t * per elements); returns how many
   started (with fewer the work is only shared less) */
static int steps_start(steps_t *s, pthread_t *ids, steps_helper_t *hs, int helpers, real *scratch, size_t per) {
  for (int t = 0; t < helpers; ++t) hs[t] = (steps_helper_t){s, scratch + t * per};
  return start_helpers(ids, helpers, steps_helper, hs, sizeof hs[0]);
}

static void steps_stop(steps_t *s, pthread_t *ids, int started) {
  __atomic_store_n(&s->quit, 1, __ATOMIC_RELEASE);
  for (int t = 0; t < started; ++t) pthread_join(ids[t], 0);
}
"""


def drivers_available(dtype: Any, *names: str) -> bool:
    """Whether a driver calling OpenBLAS's routines ``names`` runs here for ``dtype``:
    float32/float64, a C compiler, and NumPy's OpenBLAS exporting them and its thread count."""
    name = dtype_name(dtype)
    return (name in _TYPES and cpu_jit.available() and _thread_count_functions() is not None
            and all(_symbol(_PREFIX[name] + r) is not None for r in names))


def few_threads() -> bool:
    """Whether OpenBLAS runs on at most :data:`MAX_THREADS` threads (the regime the drivers are built for)."""
    get_threads, _ = _thread_count_functions()
    return get_threads() <= MAX_THREADS


def compile_driver(dtype_name: str, source: str, function: str,
                   names: tuple[str, ...]) -> tuple[Any, type, list[int]]:
    """``(function, integer type, addresses of OpenBLAS's routines names)`` of the driver C
    ``source`` built for ``dtype_name`` (``real``, ``blasint`` and :data:`C_STEPS` in scope)."""
    routines = [_symbol(_PREFIX[dtype_name] + r) for r in names]
    integer = routines[0][1]
    head = (f"#define _GNU_SOURCE\n#include <stdint.h>\ntypedef {_TYPES[dtype_name]} real;\n"
            f"typedef {'int64_t' if integer is ctypes.c_int64 else 'int32_t'} blasint;\n")
    kernel = getattr(cpu_jit.compile_c(head + cpu_jit.C_HELPER_THREADS + C_STEPS + source), function)
    kernel.restype = integer
    return kernel, integer, [ctypes.cast(fn, ctypes.c_void_p).value for fn, _ in routines]


def busy_elsewhere() -> int:
    """How many threads outside this process are runnable now
    (:func:`~._pool_threads.runnable_elsewhere` of this process's running threads).

    Examples
    --------
    >>> busy_elsewhere() >= 0
    True
    """
    return runnable_elsewhere(others_running())


def run_alone(call: Callable[[int], int], threads: int | None) -> int | None:
    """``call(count)`` with OpenBLAS set to one thread, ``count`` being ``threads`` or by default
    OpenBLAS's thread count, stepped down to the cores not busy with other processes; ``None``
    without calling when another thread of the process runs, another driver runs, or (by
    default) fewer than two cores are free."""
    if others_running() or not _THREAD_COUNT.acquire(blocking=False):
        return None
    try:
        get_threads, set_threads = _thread_count_functions()
        before = get_threads()
        count = threads or min(before, (os.cpu_count() or 1) - busy_elsewhere())
        if threads is None and count < 2:
            return None
        set_threads(1)
        try:
            return call(count)
        finally:
            set_threads(before)
    finally:
        _THREAD_COUNT.release()


def run_driver(driver: Callable[[np.ndarray, int | None, int, int], int], a: np.ndarray, dtype: np.dtype,
               overwrite: bool, threads: int | None) -> tuple[np.ndarray, int | None]:
    """Factor the square ``a`` with ``driver(out, source, lds, threads)`` under :func:`run_alone`.

    ``out`` is what the driver factors in place: ``a`` converted by ``_fortran`` (``a`` itself
    when ``overwrite`` allows), or, for a Fortran-ordered ``dtype`` array not to be overwritten,
    a fresh array that the driver's threads fill from ``source`` (``a``'s address, columns
    ``lds`` apart) while the first panel is factored. Returns ``(out, info)``, or, when
    :func:`run_alone` declines, ``(x, None)`` with ``x`` the array the caller's other algorithm
    should factor (``a`` itself, or a copy made here that it may overwrite).

    Raises
    ------
    MemoryError
        If the driver cannot allocate its workspace.
    """
    n = a.shape[0]
    copied_by_driver = not overwrite and a.dtype == dtype and a.flags.f_contiguous and n > 0
    out = np.empty((n, n), dtype, order="F") if copied_by_driver else _fortran(a, dtype, overwrite)
    source, lds = (a.ctypes.data, max(1, a.strides[1] // a.itemsize, n)) if copied_by_driver else (None, 0)
    info = run_alone(lambda count: driver(out, source, lds, count), threads)
    if info is None:
        return (a if copied_by_driver else out), None
    if info < 0:
        raise MemoryError("a look-ahead factorization could not allocate its workspace")
    return out, int(info)
