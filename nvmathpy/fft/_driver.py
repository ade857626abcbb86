"""The one-call path shared by :mod:`nvmathpy.fft` and :mod:`nvmathpy.scipy.fft`: plan cache and calls.

:func:`transform` runs one transform through a cached :class:`~nvmathpy.fft.fft_plan.FFT`:
the key is cheap (package, shape, strides, dtype, the raw axes/s/norm/kind and the thread
budget), a hit swaps the operand into the ready plan (no re-planning), and the plan goes back
to the cache - without references to the caller's arrays - when the call ends.
"""

from __future__ import annotations

import operator
import time
from typing import Any, Callable, Union

import numpy as np

from ..errors import InvalidOperandError, InvalidOptionError
from ..execution import ExecutionCPU
from ..operands import Operand, to_package, wrap
from ..plan import PlanCache
from . import _quick as quick_path
from ._heuristic import SMALL, THREADED_FROM
from ._layout import c2r_lengths, check_norm, describe, no_axes
from ._quick import _WISDOM_MEMO, RunnerCache, conjugate_mirror, one_call_engines, quick_runner
from .fft_plan import FFT

__all__ = ["plan_cache", "runner_cache", "lookup_runner", "Threads", "transform", "real_forward", "wrap_input", "as_scipy_input", "c2r_lengths"]

_CACHE = PlanCache(maxsize=256)
_RUNNERS = RunnerCache(maxsize=2048)
_monotonic = time.monotonic
#: The quick-path runner of a call signature (``False``: plans run it; ``None``: not seen yet).
lookup_runner = _RUNNERS.lookup
#: A thread budget: a count, ``None`` (every core) or a function returning the count.
Threads = Union[int, None, Callable[[], int]]


def plan_cache() -> PlanCache:
    """The plan cache of the one-call FFT functions (``resize``/``clear``/``hits``/``misses``):
    the plans of transforms the quick path (:func:`runner_cache`) leaves to plans.

    Examples
    --------
    >>> plan_cache().maxsize
    256
    """
    return _CACHE


def runner_cache() -> RunnerCache:
    """The quick path's cache of runners for small transforms of NumPy arrays, one per call
    signature (``resize``/``clear``/``hits``/``misses``; see :mod:`nvmathpy.fft._quick`).

    Examples
    --------
    >>> runner_cache().maxsize
    2048
    """
    return _RUNNERS


def wrap_input(a: Any, name: str = "a") -> Operand:
    """Wrap an array argument; other array-likes (lists, scalars) go through ``numpy.asarray``,
    and a NumPy array of non-native byte order (``>f8`` here) is converted to native order once,
    here at the boundary, as NumPy's own functions accept any byte order."""
    try:
        op = wrap(a, name)
    except InvalidOperandError:
        op = wrap(np.asarray(a), name)
    arr = op.array
    if op.package == "numpy" and not arr.dtype.isnative and arr.dtype.kind in "biufc":
        op = wrap(arr.astype(arr.dtype.newbyteorder("=")), name)
    return op


def as_scipy_input(x: Any) -> Any:
    """``x`` converted as :mod:`scipy.fft` converts its input: array-likes and arrays of kinds
    other than float and complex (bool, integers, objects holding numbers, strings of numbers)
    become float64 - raising SciPy's exception (``TypeError``, ``ValueError``) where that
    conversion fails - and non-native byte order becomes native. NumPy arrays of numbers,
    other packages' arrays and tensors pass unchanged."""
    if isinstance(x, np.ndarray):
        if x.dtype.kind in "biufc":
            return x if x.dtype.isnative else x.astype(x.dtype.newbyteorder("="))
        return np.asarray(x, np.float64)
    if isinstance(x, (list, tuple, int, float, complex, np.generic)):
        arr = np.asarray(x)
        return arr if arr.dtype.kind in "biufc" else np.asarray(arr, np.float64)
    return x


def _frozen(value: Any) -> Any:
    """A hashable stand-in for an ``axes``/``s`` argument (the FFT constructor validates it)."""
    if value is None or isinstance(value, (int, np.integer)):
        return value
    try:
        return tuple(value)
    except TypeError:
        return repr(value)


def transform(
    a: Any,
    *,
    kind: str,
    direction: str,
    s: Any = None,
    axes: Any = None,
    norm: Any = None,
    threads: Threads = None,
    out: Any = None,
    plan: Any = None,
) -> Any:
    """Run one transform through the plan cache (or through ``plan`` when one is given); a
    small transform of a NumPy array runs on the quick path (:mod:`._quick`) instead.

    ``threads``: the thread budget; ``None`` is every core, and a function (such as
    :func:`scipy.fft.get_workers`) is asked for it when a plan or a runner is made."""
    if plan is None and type(a) is np.ndarray:
        if type(axes) is list:  # (as scipy.signal passes them) a key of the quick path, as a tuple
            axes = tuple(axes)
        if type(s) is list:
            s = tuple(s)
        key = (kind, direction, False, a.shape, a.strides, a.dtype, axes, s, norm, threads)
        try:
            run = lookup_runner(key)
        except TypeError:  # an unhashable entry: not a signature the quick path keeps
            run = False
        if run is None:
            run = _quick(key, a, kind, direction, s, axes, norm, threads, False)
        if run:
            return run(a) if out is None else _deliver(run(a), out)
    if callable(threads):
        threads = threads()
    op = wrap_input(a)
    if op.package == "numpy" and op.array is not a:  # converted (an array-like, byte order): use the copy
        a = op.array
    norm = check_norm(norm)
    if kind == "c2r":
        lengths, ax = c2r_lengths(op.shape, s, axes)
        s, axes = lengths, ax
    if plan is not None:
        return _with_plan(plan, op, a, kind=kind, direction=direction, s=s, axes=axes, norm=norm, out=out)
    if op.device == "cpu" and (0 in op.shape or no_axes(op.ndim, axes, s)):
        return _deliver(_degenerate(op, a, kind=kind, s=s, axes=axes, norm=norm), out)
    key = (kind, op.package, op.device_id, op.shape, op.strides, op.dtype.str, _frozen(axes), _frozen(s), norm, threads)
    fft = _CACHE.take(key)
    try:
        if fft is None:
            fft = FFT(
                a if op.package == "torch" else op.array,
                axes=axes,
                s=s,
                kind=kind,
                norm=norm,
                execution=ExecutionCPU(threads) if op.device == "cpu" else None,  # CUDA: the operand's device
                options=_one_call_options(op, kind, s, axes, norm),
            )
            fft.plan()
        else:
            fft._swap_operand(op, a)
        bad_out = None if out is None else _out_problem(out, fft._layout.out_shape, fft._layout.out_dtype)
        result = None if bad_out is not None else fft.execute(direction)
    except BaseException:
        if fft is not None:
            fft.free()
        raise
    fft._detach()
    _CACHE.give(key, fft)
    if bad_out is not None:  # refused before the transform ran; the plan stays cached
        raise bad_out
    return _deliver(result, out)


def _one_call_options(op: Operand, kind: str, s: Any, axes: Any, norm: str) -> dict[str, Any] | None:
    """The options of a one-call function's CPU plan: the libraries of
    :func:`~nvmathpy.fft._quick.one_call_engines` (``None``: no restriction, and for CUDA
    operands or arguments the plan will refuse)."""
    if op.device != "cpu":
        return None
    try:
        layout = describe(op.shape, op.dtype, axes=axes, s=s, kind=kind, norm=norm)
    except Exception:  # noqa: BLE001 - the plan raises the caller's error
        return None
    engines = one_call_engines(layout)
    return None if engines is None else {"engines": engines}


def real_forward(a: np.ndarray, *, n: tuple[int] | None, axis: Any, norm: Any, threads: Threads = None,
                 out: Any = None) -> Any:
    """SciPy's forward complex transform of real ``a`` along ``axis`` (``n``: ``None`` or the
    one-entry ``s``), computed through the real-to-complex one: its first ``m // 2 + 1``
    entries are the r2c transform's and the others follow from Hermitian symmetry,
    ``X[k] = conj(X[m - k])``, with SciPy's signs of zeros
    (:func:`~nvmathpy.fft._quick.conjugate_mirror`), on the quick path and on plans alike."""
    axes = (axis,)
    key = ("r2c", "forward", True, a.shape, a.strides, a.dtype, axes, n, norm, threads)
    run = lookup_runner(key)
    if run is None:
        run = _quick(key, a, "r2c", "forward", n, axes, norm, threads, True)
    if run:
        return run(a) if out is None else _deliver(run(a), out)
    half = transform(a, kind="r2c", direction="forward", s=n, axes=(axis,), norm=norm, threads=threads)
    axis = operator.index(axis) % a.ndim  # the transform has checked it
    length = a.shape[axis] if n is None else n[0]
    full = np.empty(half.shape[:axis] + (length,) + half.shape[axis + 1:], half.dtype)
    full[(slice(None),) * axis + (slice(0, half.shape[axis]),)] = half
    return _deliver(conjugate_mirror(full, axis), out)


def _quick(key: tuple, a: np.ndarray, kind: str, direction: str, s: Any, axes: Any, norm: Any, threads: Threads,
           full: bool) -> Any:
    """Make and keep, under ``key``, the quick-path runner of a call signature seen the first
    time (``False``: plans run it); ``key`` is the one :func:`transform` and :func:`real_forward`
    look up. A
    signature differing from a known one in the transform's length only gets its runner from
    that one's family (:func:`~nvmathpy.fft._quick.quick_runner`) without describing the call."""
    family_key = (kind, direction, full, a.ndim, a.dtype, axes, norm, threads, s is None)
    family = _RUNNERS.family(family_key)
    if family is not None and s is None and a.ndim and a.size:
        # the member's answer for a call without ``n`` (the common first call of a new length),
        # with its checks inline and no call made: small band, no wisdom entry to look up
        m = a.shape[-1]
        n = 2 * (m - 1) if kind == "c2r" else m
        memo = _WISDOM_MEMO
        if (0 < n <= SMALL and a.size // m * n < THREADED_FROM and not memo["problems"]
                and _monotonic() - memo["checked"] < quick_path.WISDOM_RECHECK):
            run = family.any_length or family.of_length(n)
            _RUNNERS.put(key, run)
            return run
    run = None if family is None else family(a, s)
    if run is None:
        run, family = quick_runner(a, kind=kind, direction=direction, s=s, axes=axes, norm=norm, threads=threads,
                                   full=full)
        if family is not None:
            _RUNNERS.put_family(family_key, family)
    _RUNNERS.put(key, run or False)
    return run or False


def _degenerate(op: Operand, a: Any, *, kind: str, s: Any, axes: Any, norm: Any) -> Any:
    """NumPy's answers where there is nothing to transform: no axes (a 0-d operand, ``axes=()``,
    ``s=()``) give the operand back as NumPy does (a real-to-complex transform still needs an
    axis); an operand with an empty dimension gives zeros of the result's shape (empty, unless
    ``s`` pads an empty transformed axis), or NumPy's error for zero data points."""
    if no_axes(op.ndim, axes, s) and kind == "c2c":
        return a
    probe = tuple(d or 1 for d in op.shape)  # describe() checks everything but the empty dimensions
    layout = describe(probe, op.dtype, axes=axes, s=s, kind=kind, norm=norm)
    requested = [None] * len(layout.axes) if s is None else list(s if not isinstance(s, (int, np.integer)) else [s])
    for axis, given in zip(layout.axes, requested):
        if op.shape[axis] == 0 and (given is None or given == -1):
            raise InvalidOperandError(f"Invalid number of FFT data points (0) along axis {axis}; s/n must be >= 1")
    shape = tuple(0 if op.shape[i] == 0 and i not in layout.axes else n for i, n in enumerate(layout.out_shape))
    return to_package(np.zeros(shape, layout.out_dtype), op)


def _out_problem(out: Any, shape: tuple[int, ...], dtype: np.dtype) -> Exception | None:
    """What is wrong with ``out`` for a result of ``shape`` and ``dtype``, as NumPy says it
    (``None``: nothing): ``TypeError`` for a non-array or a dtype the result cannot be cast to
    (``same_kind``), ``ValueError`` for another shape."""
    try:
        target = wrap(out, "out")
    except InvalidOperandError:
        return TypeError(f"out must be of ArrayType (a NumPy, CuPy or PyTorch array), got {type(out).__name__}")
    if target.shape != tuple(shape):
        return InvalidOperandError(f"output array has wrong shape: out has shape {target.shape}, "
                                   f"the result has shape {tuple(shape)}")
    if not np.can_cast(dtype, target.dtype, casting="same_kind"):
        return TypeError(f"Cannot cast the result's dtype {dtype} to out's dtype {target.dtype} "
                         "according to the rule 'same_kind'")
    return None


def _deliver(result: Any, out: Any) -> Any:
    """``result``, or ``out`` after copying ``result`` into it."""
    if out is None:
        return result
    native = wrap(result, "result").array
    problem = _out_problem(out, native.shape, native.dtype)
    if problem is not None:
        raise problem
    wrapped = wrap(out, "out")
    target = wrapped.array
    if wrapped.device == "cuda":
        import cupy

        cupy.copyto(target, native, casting="same_kind")
    else:
        np.copyto(target, native, casting="same_kind")
    return out


def _with_plan(plan: Any, op: Operand, a: Any, *, kind, direction, s, axes, norm, out) -> Any:
    if not isinstance(plan, FFT):
        raise NotImplementedError(
            f"plan must be an nvmathpy.fft.FFT plan (or None), got {type(plan).__name__}"
        )
    layout = describe(op.shape, op.dtype, axes=axes, s=s, kind=kind, norm=norm)
    if plan._layout != layout:
        raise InvalidOptionError(
            f"plan computes {plan._layout.kind} over axes {plan._layout.axes} with lengths {plan._layout.lengths} "
            f"and norm {plan._layout.norm!r}; this call needs {layout.kind} over axes {layout.axes} with lengths "
            f"{layout.lengths} and norm {layout.norm!r}"
        )
    plan.reset_operand(a if op.package == "torch" else op.array)
    if not plan.is_planned:
        plan.plan()
    return _deliver(plan.execute(direction), out)
