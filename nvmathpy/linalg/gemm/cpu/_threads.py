"""BLAS threads and worker threads of the CPU engines: the thread count of every loaded BLAS
set around a call (``ExecutionCPU(num_threads=n)``, the split and fused matmul kernels, the
solver plans), and the one worker pool the matmul kernels share.
"""

from __future__ import annotations

import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

__all__ = ["BLAS_THREADS", "limit_threads", "shared_pool"]

F = TypeVar("F", bound=Callable[..., Any])


class _BlasThreads:
    """Sets the thread count of every loaded BLAS (NumPy's and SciPy's) around a call.

    Only the main thread changes the setting: OpenBLAS does not reliably honour
    counts set from other threads, and a count changed there can stick. Calls from other
    threads therefore run with the library's own setting (same results, no limit).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._controllers: list[Any] | None = None

    def prepare(self) -> list[Any]:
        """Find the libraries (at planning time, not in the first timed call)."""
        with self._lock:
            if self._controllers is None:
                import scipy.linalg.blas  # noqa: F401  (load SciPy's BLAS so it is controlled too)
                from threadpoolctl import ThreadpoolController

                self._controllers = list(ThreadpoolController().select(user_api="blas").lib_controllers)
            return self._controllers

    def limit(self, threads: int) -> list[int] | None:
        """Set ``threads``; returns what to pass to :meth:`restore` (``None``: nothing changed)."""
        if threading.current_thread() is not threading.main_thread():
            return None
        libraries = self.prepare()
        before = [lib.get_num_threads() for lib in libraries]
        for lib in libraries:
            lib.set_num_threads(threads)
        return before

    def restore(self, before: list[int] | None) -> None:
        if before is not None:
            for lib, n in zip(self._controllers or [], before):
                lib.set_num_threads(n)


BLAS_THREADS = _BlasThreads()

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def shared_pool() -> ThreadPoolExecutor:
    """The one worker pool (``os.cpu_count()`` threads, made on first use) every kernel shares;
    a kernel asking for more workers than that queues its extra bands."""
    global _POOL
    if _POOL is None:
        with _POOL_LOCK:
            if _POOL is None:
                _POOL = ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="nvmathpy-matmul")
    return _POOL


def limit_threads(threads: int | None, fn: F) -> F:
    """``fn`` wrapped to run with BLAS/LAPACK limited to ``threads`` (``fn`` itself when
    ``threads`` is None). Calls from threads other than the main one run unlimited."""
    if threads is None:
        return fn
    BLAS_THREADS.prepare()

    @functools.wraps(fn)
    def limited(*args: Any, **kwargs: Any) -> Any:
        before = BLAS_THREADS.limit(threads)
        try:
            return fn(*args, **kwargs)
        finally:
            BLAS_THREADS.restore(before)

    return limited  # type: ignore[return-value]
