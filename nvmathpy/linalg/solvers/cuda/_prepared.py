"""Prepared calls: the hot path of the SciPy-style solver functions on one CuPy matrix.

The first call of a function on a CuPy matrix of a given shape, strides and dtype (with given
right-hand side layout, options, ``check_finite``, device and current stream) builds a
*prepared call* (:mod:`._prepared_calls`): the plan and its route (handles, workspaces,
private buffers), the views the operands are copied into and the results are read from, and
one small device buffer of flags (:class:`Flags`). A repeated call is then: the key and one
dict look-up, the copy of the operands into the private buffers, the vendor calls, the result
arrays, and one check: the flags read on the host (``"raise"``, one synchronisation for all of
them) or their asynchronous copy (``"deferred"``, :mod:`._checks`).

What is not prepared (stacks, mixed dtypes, empty operands, torch tensors, options without a
prepared form) answers :data:`UNPREPARED` and takes the general way, which also gives the
errors for bad input. Prepared calls are kept per thread's use: one is taken out of the
registry while it runs (a second thread running the same key meanwhile builds its own), at
most :data:`MAXSIZE` are kept, and :func:`clear` frees them all (the CUDA functions' plan
cache clears them with itself).
"""

from __future__ import annotations

import bisect
import itertools
import math
import sys
import threading
from typing import Any, Callable

import numpy as np

from ....errors import LinAlgError
from .._dispatch import _load_cuda
from ._checks import _STATE, LATE, MODE, NOT_FINITE, defer_copy, report_late, settle

__all__ = ["BUILDERS", "MAXSIZE", "UNPREPARED", "Flags", "Prepared", "call", "clear", "prepared_count"]

#: The most prepared calls kept (the least recently built is freed beyond it).
MAXSIZE = 32
#: What :func:`call` answers for a call it does not prepare.
UNPREPARED = object()
#: The dtypes prepared calls take (the operands' dtype is the one computed in).
DTYPES = frozenset("fdFD")

_CALLS: dict[tuple, Any] = {}
_PUT_BACK = threading.Lock()  # entries are taken out with one atomic pop; put back under it
#: The builders by function name (:mod:`._prepared_calls` registers them).
BUILDERS: dict[str, Callable[..., "Prepared | None"]] = {}


class Flags:
    """A prepared call's device-side error flags in one buffer, copied to the host at once.

    Each check writes its elementwise verdicts (True: passed) into its own segment of one
    private bool buffer (``segments[i]``, of the shape given for it: ``check_finite``'s
    ``isfinite`` of an operand, a triangular matrix's non-zero diagonal, pivots in range);
    a False sentinel follows them. One ``argmin`` over that buffer writes the index of the
    first failing element (the sentinel's: nothing failed) into the first 8 bytes of
    :attr:`raw`: one reduction however many checks. ``count`` ``int32`` ``info`` codes of the
    routine follow, 0 when it succeeded (the route writes them there). The host compares the
    bytes with the expected ones; only a mismatch is decoded (the segment failed names the
    error, the index in it is the element). A ``tail`` of values a call reads with its flags
    (``lstsq``'s singular values) may follow, at :attr:`tail`.

    Parameters
    ----------
    cupy
        The CuPy module.
    checks
        Per check, ``(shape, fail)``: the shape of its verdicts and ``fail(late, index) ->
        exception``, the error to raise when the element at flat ``index`` failed.
    count
        The number of ``info`` codes (0: none).
    failure
        The message of a positive ``info`` code (``LinAlgError``).
    tail
        ``(size, dtype)`` of the values after the flags (none by default).
    """

    def __init__(self, cupy: Any, checks: list[tuple[tuple, Callable[[bool, int], BaseException]]], count: int = 0,
                 failure: str | None = None, tail: tuple[int, Any] = (0, np.uint8)):
        self.ends = list(itertools.accumulate(math.prod(shape) for shape, _ in checks))
        total = self.ends[-1] if checks else 0
        self.checked = 8 + 4 * count
        start = (self.checked + 7) // 8 * 8
        self.nbytes = start + tail[0] * np.dtype(tail[1]).itemsize if tail[0] else self.checked
        self.raw = cupy.zeros(self.nbytes, np.uint8)
        self.pointer = int(self.raw.data.ptr)
        self.tail = self.raw[start:].view(tail[1]) if tail[0] else None
        self.ok = np.int64(total).tobytes() + bytes(4 * count)
        self.fails, self.failure = [fail for _, fail in checks], failure
        self.verdicts = cupy.zeros(total + 1, np.bool_) if checks else None  # the sentinel stays False
        starts = [0, *self.ends[:-1]]
        self.segments = [self.verdicts[start:end].reshape(shape)
                         for start, end, (shape, _) in zip(starts, self.ends, checks)]
        self.first_bad = self.raw[:8].view(np.int64).reshape(())
        self.info = self.raw[8:].view(np.int32) if count else None
        #: Called before a failure read at the call is raised (None: nothing to do).
        self.on_failure: Callable[[], None] | None = None

    def check(self, cupy: Any, stream: int) -> None:
        """Judge the verdicts and read the flags now and raise (``"raise"``), or enqueue their
        copy (``"deferred"``)."""
        if self.verdicts is not None:
            self.verdicts.argmin(out=self.first_bad)
        if MODE.get() == "deferred":
            defer_copy(cupy, self.pointer, self.nbytes, stream, self.late)
            return
        self.read(cupy)

    def read(self, cupy: Any, judged: bool = True) -> np.ndarray:
        """Read the flags now (one synchronisation; the verdicts judged first unless ``judged``)
        and raise what failed (``"raise"``; :attr:`on_failure` called first) or report it late
        (``"deferred"``); the bytes read."""
        if not judged:
            self.verdicts.argmin(out=self.first_bad)
        host = cupy.asnumpy(self.raw)
        if host.tobytes()[:self.checked] != self.ok:
            late = MODE.get() == "deferred"
            found = self.decode(host, late)
            if found is not None:
                if not late:
                    if self.on_failure is not None:
                        self.on_failure()
                    raise found
                report_late(found)
        return host

    def late(self, host: np.ndarray) -> BaseException | None:
        """The error a deferred copy reports (None: nothing failed)."""
        return None if host.tobytes()[:self.checked] == self.ok else self.decode(host, True)

    def failed(self, host: np.ndarray, late: bool) -> BaseException | None:
        """The error of the first failing check element in the bytes read (None: none)."""
        bad = int(host[:8].view(np.int64)[0])
        if bad == len(self.verdicts) - 1:
            return None
        i = bisect.bisect_right(self.ends, bad)
        return self.fails[i](late, bad - (self.ends[i - 1] if i else 0))

    def decode(self, host: np.ndarray, late: bool) -> BaseException | None:
        found = None if self.verdicts is None else self.failed(host, late)
        if found is not None:
            return found
        codes = host[8:self.checked].view(np.int32)
        if self.failure is not None and codes.size and codes.max() > 0:
            return LinAlgError(self.failure + (LATE if late else ""))
        return None


def not_finite(late: bool, index: int) -> BaseException:
    """``check_finite``'s error."""
    return ValueError(NOT_FINITE + (LATE if late else ""))


class Prepared:
    """One prepared call: ``run(stream, a, *others)`` and the plan that owns its buffers."""

    __slots__ = ("run", "plan", "freed")

    def __init__(self, run: Callable[..., Any], plan: Any = None):
        self.run, self.plan, self.freed = run, plan, False

    def free(self) -> None:
        """Release the plan's buffers; the call is not run again (idempotent)."""
        self.freed = True
        if self.plan is not None:
            self.plan.free()
            self.plan = None


class _Unprepared:
    """The registry's entry for a key without a prepared form."""

    freed = False

    @staticmethod
    def free() -> None:
        return None


def call(name: str, a: Any, others: tuple, options: tuple, finite: bool) -> Any:
    """``name`` on the CuPy matrix ``a`` and the CuPy arrays ``others`` (right-hand sides,
    pivots) through its prepared call, built on the first call of its key; :data:`UNPREPARED`
    where there is none (the caller takes the general way). Pending deferred checks are
    settled first, as every CUDA function does."""
    cupy = sys.modules.get("cupy")
    kind = getattr(cupy, "ndarray", None)
    if type(a) is not kind or a.ndim != 2:
        return UNPREPARED
    layouts: tuple = ()
    for x in others:
        if type(x) is not kind:
            return UNPREPARED
        layouts += (x.shape, x.strides, x.dtype.char)
    state = _STATE.get()  # settle(cupy), inlined: nothing pending is one look-up
    if state is not None and (state.entries or state.known):
        settle(cupy)
    stream = cupy.cuda.get_current_stream().ptr
    key = (name, options, finite, stream, a.device.id, a.shape, a.strides, a.dtype.char, layouts)
    try:
        entry = _CALLS.pop(key, None)
    except TypeError:  # an option that is no hashable value: the general way judges it
        return UNPREPARED
    if entry is None or entry.freed:
        entry = _build(name, cupy, a, others, options, finite)
    if entry is _Unprepared:
        _CALLS[key] = entry
        return UNPREPARED
    try:
        return entry.run(stream, a, *others)
    finally:  # the common case, one atomic insertion; else under the lock
        if _CALLS.setdefault(key, entry) is not entry or len(_CALLS) > MAXSIZE:
            _put_back(key, entry)


def _put_back(key: tuple, entry: Any) -> None:
    """Return ``entry`` to the registry: an entry another thread built meanwhile gives way (it
    is freed, unless a third thread has taken it out to run it), and beyond :data:`MAXSIZE`
    the least recently returned entry is freed. (:func:`call` inserts an entry whose key is
    free itself and comes here otherwise.)"""
    with _PUT_BACK:
        displaced = _CALLS.pop(key, None)
        if displaced is not None and displaced is not entry:
            displaced.free()
        _CALLS[key] = entry
        while len(_CALLS) > MAXSIZE:
            oldest = _CALLS.pop(next(iter(list(_CALLS))), None)
            if oldest is not None:
                oldest.free()


def _build(name: str, cupy: Any, a: Any, others: tuple, options: tuple, finite: bool) -> Any:
    _load_cuda()  # the builders are registered with the CUDA package
    if a.dtype.char not in DTYPES or a.size == 0 or any(x.size == 0 for x in others):
        return _Unprepared
    return BUILDERS[name](cupy, a, *others, options=options, finite=finite) or _Unprepared


def clear() -> None:
    """Free every prepared call."""
    entries = list(_CALLS.values())
    _CALLS.clear()
    for entry in entries:
        entry.free()


def prepared_count() -> int:
    """How many prepared calls (and keys known to have none) are kept."""
    return len(_CALLS)
