"""The one-call functions' quick path: small transforms of NumPy arrays run without a plan object.

A plan (:class:`~nvmathpy.fft.fft_plan.FFT`) is made for repeated use; a one-call function on a
small array pays for each layer above the library call (the plan-cache checkout, the operand
wrapper, the closure rebinding) every time, and on a new shape for the problem key, the wisdom
lookup and the candidate ranking. For the common call - a NumPy array in native float32/64 or
complex64/128, at most :data:`QUICK_ELEMENTS` elements in and out, no ``out`` - this module
builds a *runner* instead: the plan's candidate prepared exactly as a plan would
prepare it (:func:`~nvmathpy.fft._engines_cpu.prepare_candidate`; the same library, thread
count and layout handling, so the same bits), wrapped in a closure that crops or zero-pads the
operand and calls the library. Runners hold no buffers and no operands, so one is shared by
every thread; :class:`RunnerCache` keeps them per call signature (shape, strides, dtype and
the raw arguments).

A runner takes the wisdom store's choice when it holds an entry of the exact problem
(:func:`wisdom_may_know` screens cheaply, then :func:`~nvmathpy.fft._engines_cpu.wisdom_choice`
looks up as a plan does), else the heuristic's first library among those that keep no state
(:data:`_STATELESS`) - the plan's first candidate, unless that is pyFFTW: an FFTW plan, even at
FFTW_ESTIMATE, costs a new real-transform length milliseconds (``benchmarks/bench_fft_small.py``
measures first calls), many times the first call of the function a user would otherwise call,
which a one-call function must not pay on a shape it may never see again. The one-call
functions' plans (larger problems, other packages) rank the same libraries
(:func:`one_call_engines`). A plan made for repeated use, or a problem wisdom names pyFFTW for
(``autotune``), takes FFTW.

A first call on a new length of a known signature (a transform over the last axis, with or
without ``n``) would pay again for describing the call, ranking and preparing. Where the
heuristic's choice is one library and one thread for every length of a band
(:func:`~nvmathpy.fft._heuristic.small_band`) and that library's call depends on no length
(SciPy's pocketfft binding's and ducc0's), the signature's *family*, kept under the key without the length, gives the new
length's runner at once, after a set look-up of the problems wisdom holds.

Problems the quick path leaves to plans: those whose candidate keeps state between calls
(pyFFTW's aligned buffers), other dtypes and packages, and large ones (where a plan's reused
buffers and kept results save more than the call overhead costs).
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, Callable, Hashable

import numpy as np

from ..plan.wisdom import default_wisdom
from . import _engines_cpu
from ._heuristic import small_band, threads_guess
from ._libraries import ducc0_call, pocketfft_call
from ._layout import Layout, c2r_lengths, check_norm, describe, no_axes

__all__ = ["QUICK_ELEMENTS", "RunnerCache", "conjugate_mirror", "one_call_engines", "quick_runner", "wisdom_may_know"]

#: The most elements (input or output) a transform may have to run on the quick path.
QUICK_ELEMENTS = 1 << 16
#: Libraries whose prepared candidates keep no state between calls (safe to share).
_STATELESS = frozenset({"ducc0", "pocketfft", "scipy", "mkl_fft"})
#: Libraries whose call (``make(kind, axes, direction, norm, nthreads, lastsize)``, ``None``
#: where unusable) depends on no length but a c2r's output length, and whose c2c transform of
#: real input is their r2c transform followed by the conjugate mirror (SciPy's ``fft`` of real
#: input, bit for bit).
_CALLS = {"ducc0": ducc0_call, "pocketfft": pocketfft_call}
_DTYPES = frozenset(np.dtype(c) for c in "fdFD")

Runner = Callable[[np.ndarray], np.ndarray]
#: The runners of one call signature but for the transform's length: ``family(a, s)`` gives
#: the runner of the exact signature of ``a`` and ``s`` (the call's ``s``/``n``), or ``None``
#: when they fall outside the family (then :func:`quick_runner` decides). Its attributes
#: ``any_length`` (the runner of every length, or ``None``) and ``of_length(n)`` (a c2r's
#: runner of output length ``n``) let the driver answer a call without ``n`` inline.
Family = Callable[[np.ndarray, Any], "Runner | None"]


class RunnerCache:
    """A bounded cache of quick-path runners (``False`` marks a call signature left to plans).

    Runners are shared, not taken out: a hit is one dictionary lookup (:attr:`lookup`, the
    dictionary's own ``get``), so hits are not counted; :attr:`misses` counts the runners made.
    Beyond ``maxsize`` the oldest entries go first. Keeping an entry takes no lock (a first
    call on a new length pays for it: a dictionary store, and a removal beyond the bound, each
    safe between threads; threads racing past the bound may leave it exceeded by their number
    until the next store).

    Parameters
    ----------
    maxsize
        The most signatures kept (``0``: none).

    Examples
    --------
    >>> cache = RunnerCache(maxsize=2)
    >>> cache.lookup("k") is None
    True
    >>> cache.put("k", len); cache.lookup("k") is len, cache.misses, len(cache)
    (True, 1, 1)
    """

    def __init__(self, maxsize: int = 2048):
        self._check(maxsize)
        self._maxsize = maxsize
        self._runners: dict[Hashable, Runner | bool] = {}
        self._families: dict[Hashable, Family] = {}
        #: The runner for a key (``False``: left to plans), or ``None`` when none is kept.
        self.lookup: Callable[[Hashable], Runner | bool | None] = self._runners.get
        #: The :data:`Family` kept for a key without the transform's length, or ``None``.
        self.family: Callable[[Hashable], Family | None] = self._families.get
        self.misses = 0

    @staticmethod
    def _check(maxsize: int) -> None:
        if not isinstance(maxsize, int) or isinstance(maxsize, bool) or maxsize < 0:
            raise ValueError(f"runner cache maxsize must be a non-negative int, got {maxsize!r}")

    @property
    def maxsize(self) -> int:
        return self._maxsize

    def __len__(self) -> int:
        return len(self._runners)

    def put(self, key: Hashable, runner: Runner | bool) -> None:
        """Keep ``runner`` under ``key``, dropping the oldest entries beyond the bound."""
        self.misses += 1
        kept = self._runners
        kept[key] = runner
        if len(kept) > self._maxsize:
            _trim(kept, self._maxsize)

    def put_family(self, key: Hashable, family: Family) -> None:
        """Keep ``family`` under ``key`` (not counted in :attr:`misses` nor ``len``), within the bound."""
        kept = self._families
        kept[key] = family
        if len(kept) > self._maxsize:
            _trim(kept, self._maxsize)

    def resize(self, maxsize: int) -> None:
        """Change the bound, dropping the oldest runners (and families) beyond it."""
        self._check(maxsize)
        self._maxsize = maxsize
        for kept in (self._runners, self._families):
            _trim(kept, maxsize)

    def clear(self, families: bool = True) -> None:
        """Drop every runner and (``families``) every family, and reset the miss counter: the next
        call of a kept family's signature on any length is then a first call that finds its family."""
        self._runners.clear()
        if families:
            self._families.clear()
        self.misses = 0


def _trim(kept: dict, maxsize: int) -> None:
    """Drop the oldest entries of ``kept`` (insertion order) beyond ``maxsize``; an entry another
    thread has just removed is skipped."""
    while len(kept) > maxsize:
        try:
            kept.pop(next(iter(kept)), None)
        except (StopIteration, RuntimeError):  # emptied, or changed during the look, by another thread
            return


#: How often, in seconds, the quick path looks at the wisdom store again (its location, and its
#: FFT entries when the file changed): reading the environment and the file's status on every
#: new call signature would cost more than the transform.
WISDOM_RECHECK = 0.5
_WISDOM_MEMO: dict[str, Any] = {"checked": -math.inf, "stamp": None, "problems": frozenset()}


def wisdom_may_know(problem: tuple[str, str, tuple[int, ...], np.dtype]) -> bool:
    """Whether the wisdom store holds an entry of ``problem``: ``("fft", kind, input shape,
    input dtype)`` or ``("trig", "dct"/"dst", shape, dtype)`` (then a plan looks the exact
    problem up). The store's entries are read again when its file changed, looked at every
    :data:`WISDOM_RECHECK` seconds at most."""
    memo = _WISDOM_MEMO
    now = time.monotonic()
    if now - memo["checked"] >= WISDOM_RECHECK:
        _refresh(memo)
        memo["checked"] = now
    return problem in memo["problems"]


#: Per operation, the problem fields :func:`wisdom_may_know` compares.
_FIELDS = {"fft": ("kind", "in_shape", "in_dtype"), "trig": ("transform", "shape", "dtype")}


def _refresh(memo: dict[str, Any]) -> None:
    """Re-read the wisdom store's FFT problems into ``memo`` if its file changed (none: off or absent)."""
    wisdom = default_wisdom()
    stamp = None
    if wisdom.enabled:
        path = str(wisdom.path)
        try:
            st = os.stat(path)
            stamp = (path, st.st_mtime_ns, st.st_size)
        except OSError:
            pass
    if stamp == memo["stamp"]:
        return
    problems = set()
    for entry in wisdom.entries() if stamp is not None else ():
        problem = entry.get("problem") if isinstance(entry, dict) else None
        operation = problem.get("operation") if isinstance(problem, dict) else None
        if operation not in _FIELDS:
            continue
        name, shape, dtype = (problem.get("fields", {}).get(field) for field in _FIELDS[operation])
        try:
            problems.add((operation, name, tuple(shape), np.dtype(dtype)))
        except TypeError:
            continue
    memo.update(stamp=stamp, problems=frozenset(problems))


def one_call_engines(layout: Layout) -> tuple[str, ...] | None:
    """The libraries a one-call function's plan may rank for ``layout`` (``None``: all): those
    that plan nothing (:data:`_STATELESS`, installed), unless the wisdom store holds an entry of
    the problem, whose choice then counts as for any plan. The quick path's runners take the
    same first library (:func:`quick_runner`), so a one-call function gives one problem the
    same bits on either path."""
    if wisdom_may_know(("fft", layout.kind, layout.in_shape, layout.in_dtype)):
        return None
    return tuple(name for name in _engines_cpu.installed_libraries() if name in _STATELESS)


def quick_runner(a: np.ndarray, *, kind: str, direction: str, s: Any, axes: Any, norm: Any,
                 threads: int | None | Callable[[], int], full: bool = False) -> tuple[Runner | None, Family | None]:
    """A runner computing this call on ``a``'s signature, or ``None`` when plans must run it
    (see the module's notes; bad arguments also give ``None``: the plan path raises the error);
    and the :data:`Family` of its signature but for the length (``None``: none holds, see
    :func:`_length_family`).

    ``full`` (with an r2c ``kind``): the runner returns the full complex spectrum of real
    input, the r2c result followed by the conjugates of its mirror image, with SciPy's signs
    of zeros (see :func:`conjugate_mirror`), as :func:`~nvmathpy.fft._driver.real_forward`
    computes them.
    """
    if a.dtype not in _DTYPES or 0 in a.shape:
        return None, None
    lengths_given = s is not None  # (``n``: the one length along the one axis, else none)
    try:
        if no_axes(a.ndim, axes, s):
            return None, None
        norm = check_norm(norm)
        if kind == "c2r":
            s, axes = c2r_lengths(a.shape, s, axes)
        layout = describe(a.shape, a.dtype, axes=axes, s=s, kind=kind, norm=norm)
    except Exception:  # noqa: BLE001 - the plan path raises the caller's error
        return None, None
    if layout.in_dtype != a.dtype or max(math.prod(layout.in_shape), math.prod(layout.out_shape)) > QUICK_ELEMENTS:
        return None, None
    if callable(threads):  # a budget asked for each call (scipy's workers=None): the runner must not depend on it
        if threads_guess(layout, [1, 2]) != 1:
            return None, None
        threads = threads()
    budget = threads or _engines_cpu.cores()
    candidate = None
    if wisdom_may_know(("fft", layout.kind, layout.in_shape, layout.in_dtype)):  # then ask as a plan would
        candidate = _engines_cpu.wisdom_choice(layout, budget)
    family = None
    if candidate is None:  # the heuristic's first library that plans nothing (see the module's notes)
        candidate = _engines_cpu.first_candidate(layout, budget, _STATELESS)
        family = _length_family(layout, candidate, direction, full, lengths_given)
    if candidate.label not in _STATELESS:
        return None, None
    fill = _filler(layout.in_shape, layout.in_dtype, a.shape)
    make = _CALLS.get(candidate.label)
    call = None
    if make is not None and len(layout.axes) == 1:  # the very call the candidate's build makes, without the build
        # (full: the library's complex transform of real input is the full spectrum)
        call = make("c2c" if full else layout.kind, layout.axes, direction, layout.norm, candidate.params["threads"],
                    layout.lengths[-1])
    if call is None:
        prepared = _engines_cpu.prepare_candidate(layout, candidate)
        call = prepared.forward if direction == "forward" else prepared.inverse
        if full:
            return _full_spectrum(layout.axes[0], layout.lengths[0], layout.in_shape, layout.out_dtype, call,
                                  fill), family
    if fill is None:
        return call, family
    return lambda x: call(fill(x)), family


def _length_family(layout: Layout, candidate: Any, direction: str, full: bool, lengths_given: bool) -> Family | None:
    """The runners of ``layout``'s call signature for any length of its one transformed axis,
    the last (``None``: no such family holds): where the heuristic's choice is the same for
    every length of a band (:func:`~nvmathpy.fft._heuristic.small_band`: one library, one
    thread) and that library's call does not depend on the length (:data:`_CALLS`, but for a
    c2r's output length). With ``lengths_given``, members are called with the ``s`` of their call
    (the operand cropped or zero-padded to it); else with ``None``. A member is built only when
    the wisdom store holds no entry of its exact problem (:func:`wisdom_may_know`; else
    :func:`quick_runner` looks it up as a plan would); it makes the same library call the plan's
    candidate makes, so the same bits."""
    axis = len(layout.in_shape) - 1
    make = _CALLS.get(candidate.label)
    if (layout.axes != (axis,) or make is None or candidate.params["threads"] != 1
            or not small_band(layout.lengths[0], layout.batch * layout.size)):
        return None
    kind, norm, in_dtype = layout.kind, layout.norm, layout.in_dtype
    axes = (axis,)
    # c2r: the function of the output length giving the call; else the one call of every length
    # (full: the complex transform of real input)
    raw = make("c2c" if full else kind, axes, direction, norm, 1, None)
    if raw is None:  # the library's binding is not usable here
        return None
    shared, of_length = (None, raw) if kind == "c2r" else (raw, None)
    may_know = wisdom_may_know

    def member(x: np.ndarray, s: Any) -> Runner | None:
        m = x.shape[-1]
        if not x.size:
            return None
        if s is None:
            n, width = (2 * (m - 1) if kind == "c2r" else m), m
        else:
            n = s[0] if lengths_given and type(s) is tuple and len(s) == 1 else None
            if type(n) is not int:
                return None
            width = n // 2 + 1 if kind == "c2r" else n
        if n < 1 or not small_band(n, x.size // m * n):
            return None
        in_shape = x.shape if width == m else x.shape[:-1] + (width,)
        if may_know(("fft", kind, in_shape, in_dtype)):
            return None
        call = shared if of_length is None else of_length(n)
        if width == m:
            return call
        fill = _filler(in_shape, in_dtype, x.shape)
        return lambda y: call(fill(y))

    # for the driver's first call of a new length without ``n`` (the member's answer, no call)
    member.any_length, member.of_length = shared, of_length  # type: ignore[attr-defined]
    return member


def _filler(in_shape: tuple[int, ...], in_dtype: np.dtype, shape: tuple[int, ...]) -> Callable[[np.ndarray], np.ndarray] | None:
    """The crop/zero-pad of an operand of ``shape`` into the engine's input of ``in_shape`` and
    ``in_dtype`` (``None``: none needed): a view when cropping only, else a fresh zeroed array
    per call (runners are shared between threads, so they own no buffer)."""
    if shape == in_shape:
        return None
    region = tuple(slice(0, min(n, m)) for n, m in zip(shape, in_shape))
    if all(m <= n for n, m in zip(shape, in_shape)):
        return lambda x: x[region]

    def pad(x: np.ndarray) -> np.ndarray:
        buffer = np.zeros(in_shape, in_dtype)
        buffer[region] = x[region]
        return buffer

    return pad


def _full_spectrum(axis: int, length: int, in_shape: tuple[int, ...], dtype: np.dtype, call: Runner,
                   fill: Any) -> Runner:
    """The runner of a real input's full complex spectrum of ``length`` points over ``axis``
    from the r2c ``call`` (``in_shape``: its input, ``dtype``: its output; see :func:`quick_runner`)."""
    head = (slice(None),) * axis + (slice(0, length // 2 + 1),)

    def run(x: np.ndarray) -> np.ndarray:
        result = np.empty(in_shape, dtype)
        result[head] = call(x if fill is None else fill(x))
        return conjugate_mirror(result, axis)

    return run


def conjugate_mirror(result: np.ndarray, axis: int) -> np.ndarray:
    """Complete ``result``, whose first ``m // 2 + 1`` entries along ``axis`` hold the r2c
    transform of real input, into the full spectrum with SciPy's signs of zeros (pocketfft's
    and ducc0's complex transform of real input, :data:`_CALLS`, bit for bit): the others are
    the plain conjugates of their mirror image, ``X[k] = conj(X[m - k])``, and the zero
    frequency and the Nyquist term (even ``m``) are conjugated in place, so their imaginary
    parts are -0 where the r2c result has +0 (the values still equal the r2c result's,
    ``np.array_equal``)."""
    length = result.shape[axis]
    half = length // 2 + 1
    lead = (slice(None),) * axis
    np.conjugate(result[lead + (slice(length - half, 0, -1),)], out=result[lead + (slice(half, None),)])
    for k in (0, length // 2) if length % 2 == 0 else (0,):
        imag = result[lead + (slice(k, k + 1),)].imag
        imag[...] = -imag  # (not np.negative(imag, out=imag): NumPy 2.4 misses entries of strided views in place)
    return result
