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

import sys
from typing import Any, Callable

import numpy as np

from ....errors import LinAlgError
from .._dispatch import _load_cuda
from ._checks import LATE, MODE, NOT_FINITE, defer_copy, settle

__all__ = ["BUILDERS", "MAXSIZE", "UNPREPARED", "Flags", "Prepared", "call", "clear", "prepared_count"]

#: The most prepared calls kept (the least recently built is freed beyond it).
MAXSIZE = 32
#: What :func:`call` answers for a call it does not prepare.
UNPREPARED = object()
#: The dtypes prepared calls take (the operands' dtype is the one computed in).
DTYPES = frozenset("fdFD")

_CALLS: dict[tuple, Any] = {}
#: The builders by function name (:mod:`._prepared_calls` registers them).
BUILDERS: dict[str, Callable[..., "Prepared | None"]] = {}


class Flags:
    """A prepared call's device-side error flags in one buffer, copied to the host at once.

    ``checks`` bytes come first, each 1 when its check passed (written by a reduction's
    ``out=``: ``check_finite``'s ``isfinite().all()``, a triangular matrix's non-zero diagonal),
    then ``count`` ``int32`` ``info`` codes of the routine, 0 when it succeeded (the route
    writes them there). The host compares the bytes with the expected ones; only a mismatch
    is decoded.

    Parameters
    ----------
    cupy
        The CuPy module.
    checks
        Per check byte, ``fail(late, context) -> exception``: the error to raise when it is 0.
    count
        The number of ``info`` codes (0: none).
    failure
        The message of a positive ``info`` code (``LinAlgError``).
    """

    def __init__(self, cupy: Any, checks: list[Callable[[bool, Any], BaseException]], count: int = 0,
                 failure: str | None = None):
        self.head = head = (len(checks) + 3) // 4 * 4
        self.raw = cupy.zeros(head + 4 * count, np.uint8)
        self.pointer, self.nbytes = int(self.raw.data.ptr), head + 4 * count
        self.ok = bytes([1] * len(checks) + [0] * (head - len(checks) + 4 * count))
        self.checks, self.failure = checks, failure
        self.bytes = [self.raw[i:i + 1].view(np.bool_).reshape(()) for i in range(len(checks))]
        self.info = self.raw[head:].view(np.int32) if count else None

    def check(self, cupy: Any, stream: int, context: Any = None) -> None:
        """Read the flags now and raise (``"raise"``), or enqueue their copy (``"deferred"``)."""
        if MODE.get() == "deferred":
            defer_copy(cupy, self.pointer, self.nbytes, stream, self.late)
            return
        host = cupy.asnumpy(self.raw)
        if host.tobytes() != self.ok:
            found = self.decode(host, False, context)
            if found is not None:
                raise found

    def first(self, cupy: Any) -> None:
        """In ``"raise"``, read the check bytes written so far and raise before any routine
        runs (an iterative routine need not terminate on non-finite input: SciPy checks first)."""
        if MODE.get() != "deferred":
            host = cupy.asnumpy(self.raw)
            for i, fail in enumerate(self.checks):
                if not host[i]:
                    raise fail(False, None)

    def late(self, host: np.ndarray) -> BaseException | None:
        """The error a deferred copy reports (None: nothing failed)."""
        return None if host.tobytes() == self.ok else self.decode(host, True, None)

    def decode(self, host: np.ndarray, late: bool, context: Any) -> BaseException | None:
        for i, fail in enumerate(self.checks):
            if not host[i]:
                return fail(late, context)
        codes = host[self.head:self.nbytes].view(np.int32)
        if self.failure is not None and codes.size and codes.max() > 0:
            return LinAlgError(self.failure + (LATE if late else ""))
        return None


def not_finite(late: bool, context: Any) -> BaseException:
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
    for x in others:
        if type(x) is not kind:
            return UNPREPARED
    settle(cupy)
    stream = cupy.cuda.get_current_stream().ptr
    if not others:
        layouts: tuple = ()
    elif len(others) == 1:
        b = others[0]
        layouts = (b.shape, b.strides, b.dtype.char)
    else:
        layouts = tuple([(x.shape, x.strides, x.dtype.char) for x in others])
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
    finally:  # back in the registry (another thread's entry built meanwhile gives way)
        if _CALLS.setdefault(key, entry) is not entry:
            _CALLS.pop(key).free()
            _CALLS[key] = entry
        if len(_CALLS) > MAXSIZE:
            _CALLS.pop(next(iter(_CALLS))).free()


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
