"""When the CUDA one-call functions read their error flags: per call (NumPy's and SciPy's
semantics, the default) or deferred (no host round trip on the hot path).

Errors found on the device (a singular matrix's zero pivot, a matrix not positive definite, an
eigensolver that did not converge; in :mod:`nvmathpy.scipy.linalg`, ``check_finite``'s
non-finite entries) are device-side flags. Reading one on the host waits for the stream to
reach it: at n = 8 that wait and the copy are most of a call's cost (a few tens of µs where
the arithmetic takes a few), and it stops the host from queueing the next call while the GPU
still runs this one.

``"raise"`` (default)
    Each call reads its flags before it returns and raises there, as NumPy and SciPy do: one
    synchronisation per call.
``"deferred"``
    Each call enqueues an asynchronous copy of its flags into pinned host memory and records a
    CUDA event after it; nothing waits. A later call (of any CUDA one-call function, in this
    thread) first looks at the copies whose event has completed (a non-blocking query) and raises
    the first failure found, naming the function whose result it was;
    :func:`check_cuda_errors` waits for all of them and raises. CuPy's own functions behave
    like this mode without the report (``cupyx.errstate(linalg="ignore")``, its default, returns
    NaNs silently): the results of a failed call are not finite, as there.

The cost of ``"deferred"``: one small device-to-host copy, one event record per call and one
event query per pending copy at the next call, and a report that arrives late (at a later call
or at :func:`check_cuda_errors`) instead of at the call that failed.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from typing import Any, Callable, Iterator

import numpy as np

from ....cuda.runtime import import_cupy
from ....errors import InvalidOptionError, LinAlgError

__all__ = ["LATE", "MODE", "MODES", "check_cuda_errors", "cuda_check_finite", "cuda_checks", "deferred", "defer",
           "defer_copy", "report_late", "settle"]

#: The check modes.
MODES = ("raise", "deferred")
MODE: contextvars.ContextVar[str] = contextvars.ContextVar("nvmathpy_cuda_checks", default="raise")
#: What a deferred report adds to its message.
LATE = " (reported late: checks are deferred)"
#: cudaMemcpyDeviceToHost, cudaEventDisableTiming, cudaErrorNotReady (driver_types.h).
_D2H, _NO_TIMING, _NOT_READY = 2, 2, 600


@contextlib.contextmanager
def cuda_checks(mode: str) -> Iterator[None]:
    """Within the block, CUDA one-call solver functions check device-side errors in ``mode``:
    ``"raise"`` (read per call, NumPy's and SciPy's semantics) or ``"deferred"`` (read at a
    later call or at :func:`check_cuda_errors`; no synchronisation per call). Leaving the block
    does not check what is still pending: call :func:`check_cuda_errors` for that.

    Examples
    --------
    >>> import nvmathpy.linalg as nl
    >>> with nl.cuda_checks("deferred"):
    ...     pass  # CUDA solves here return without waiting for the GPU
    >>> nl.check_cuda_errors()  # raises LinAlgError for a failure found since
    """
    if mode not in MODES:
        raise InvalidOptionError(f"cuda_checks: mode={mode!r} is not allowed; allowed: {list(MODES)}")
    token = MODE.set(mode)
    try:
        yield
    finally:
        MODE.reset(token)


def deferred() -> bool:
    """Whether the current mode is ``"deferred"``."""
    return MODE.get() == "deferred"


class _Slot:
    """One pinned host buffer and one event, reused once read."""

    def __init__(self, cupy: Any, nbytes: int):
        self.memory = cupy.cuda.alloc_pinned_memory(nbytes)
        self.host = np.frombuffer(self.memory, np.uint8, nbytes)
        self.address = self.host.ctypes.data
        self.event = cupy.cuda.runtime.eventCreateWithFlags(_NO_TIMING)
        self.nbytes = nbytes


class _Pending:
    """The copies not yet read, and the slots free for reuse (one list per thread)."""

    def __init__(self) -> None:
        #: ``(slot, nbytes, failure)``: ``failure(host bytes)`` is the error to raise, or None.
        self.entries: list[tuple[_Slot, int, Callable[[np.ndarray], BaseException | None]]] = []
        self.free: list[_Slot] = []
        #: Failures already read on the host (by a call that synchronised anyway), to report late.
        self.known: list[BaseException] = []


_STATE: contextvars.ContextVar[_Pending | None] = contextvars.ContextVar("nvmathpy_cuda_pending", default=None)


def _state() -> _Pending:
    state = _STATE.get()
    if state is None:
        state = _Pending()
        _STATE.set(state)
    return state


def defer(cupy: Any, flags: Any, count: int, kind: str, message: str, batch: tuple, stream: int,
          error: type = LinAlgError) -> None:
    """Enqueue the copy of ``flags`` (device, contiguous) on ``stream`` and an event after it.

    ``kind`` says what a failure is: ``"info"`` (element ``i`` failed where ``flags[i] > 0``)
    or ``"all"`` (where ``flags[i]`` is False: the answer of an ``all()`` reduction);
    ``error`` is raised for it."""
    defer_copy(cupy, int(flags.data.ptr), max(1, int(flags.nbytes)), stream,
               functools.partial(_failure, flags.dtype, count, kind, message, batch, error))


def defer_copy(cupy: Any, pointer: int, nbytes: int, stream: int,
               failure: Callable[[np.ndarray], BaseException | None]) -> None:
    """Enqueue the copy of the ``nbytes`` device bytes at ``pointer`` on ``stream`` and an event
    after it; once copied, ``failure(host bytes)`` says what to raise (None: nothing)."""
    state = _STATE.get() or _state()
    for slot in state.free:
        if slot.nbytes >= nbytes:
            state.free.remove(slot)
            break
    else:
        slot = _Slot(cupy, max(nbytes, 64))
    runtime = cupy.cuda.runtime
    runtime.memcpyAsync(slot.address, pointer, nbytes, _D2H, stream)
    runtime.eventRecord(slot.event, stream)
    state.entries.append((slot, nbytes, failure))


def report_late(error: BaseException) -> None:
    """Report ``error`` (found by a call that read its flags anyway) as a deferred check's: at a
    later call or at :func:`check_cuda_errors`."""
    _state().known.append(error)


def _failure(dtype: np.dtype, count: int, kind: str, message: str, batch: tuple, error: type,
             host: np.ndarray) -> BaseException | None:
    values = host[: count * dtype.itemsize].view(dtype)
    if kind == "all":
        if values.all():  # the common case: one reduction, nothing failed
            return None
        bad = np.flatnonzero(values == 0)
    else:
        if not count or values.max() <= 0:
            return None
        bad = np.flatnonzero(values > 0)
    where = f" (batch element {tuple(int(i) for i in np.unravel_index(int(bad[0]), batch))})" if batch else ""
    return error(f"{message}{where}{LATE}")


def _read(wait: bool, cupy: Any = None) -> None:
    state = _STATE.get()
    if state is None or not (state.entries or state.known):
        return
    runtime = (cupy or import_cupy()).cuda.runtime
    first = None
    if state.known:
        first, state.known = state.known[0], []
    kept = []
    for entry in state.entries:
        slot, nbytes, failure = entry
        if wait:
            runtime.eventSynchronize(slot.event)
        elif runtime.eventQuery(slot.event) == _NOT_READY:
            kept.append(entry)
            continue
        found = failure(slot.host)  # the slot's first nbytes are the copy's: failure reads no further
        state.free.append(slot)
        if first is None and found is not None:
            first = found
    state.entries = kept
    if first is not None:
        raise first


def settle(cupy: Any = None) -> None:
    """Read the pending copies whose event has completed (no waiting); raise the first failure.
    Nothing pending (always, in the ``"raise"`` mode): one context-variable look-up.
    ``cupy``: the CuPy module, when the caller has it at hand."""
    state = _STATE.get()
    if state is not None and (state.entries or state.known):
        _read(False, cupy)


def check_cuda_errors() -> None:
    """Wait for every pending deferred check of this thread and raise
    :class:`~numpy.linalg.LinAlgError` for the first failure (nothing pending: returns at once).

    Examples
    --------
    >>> import nvmathpy.linalg as nl
    >>> nl.check_cuda_errors()
    """
    _read(wait=True)


#: SciPy's message for ``check_finite``.
NOT_FINITE = "array must not contain infs or NaNs"


def cuda_check_finite(*arrays: Any) -> None:
    """SciPy's ``check_finite`` on CUDA arrays: :class:`ValueError` if one holds an inf or a NaN.

    One reduction per floating array and, in the ``"raise"`` mode of :func:`cuda_checks`, one
    synchronisation for all of them; in ``"deferred"`` the flag's asynchronous copy is enqueued
    instead and the error raised later (:func:`check_cuda_errors`). Integer arrays are finite.
    """
    cupy = import_cupy()
    ok = None
    for x in arrays:
        native = x if isinstance(x, cupy.ndarray) else cupy.from_dlpack(x)
        if native.dtype.kind in "fc":
            finite = cupy.isfinite(native).all()
            ok = finite if ok is None else ok & finite
    if ok is None:
        return
    if deferred():
        defer(cupy, ok, 1, "all", NOT_FINITE, (), cupy.cuda.get_current_stream().ptr, ValueError)
    elif not bool(ok):
        raise ValueError(NOT_FINITE)
