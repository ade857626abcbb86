"""The CPU FFT libraries nvmathpy can run on: scipy.fft (always), SciPy's pocketfft binding called
directly, ducc0, pyFFTW and mkl_fft.

Each library is a :class:`Library` that says whether it is installed, what version it is,
whether it can compute a :class:`~nvmathpy.fft._layout.Layout`, and how to :meth:`build` a
:class:`FFTPrepared` for it with a thread count: two callables ``forward(a, out=None)`` and
``inverse(a, out=None)`` that transform the staged input ``a`` (writing into ``out`` when
given) with the layout's normalisation already applied.

Hermitian transforms ride on the real kinds: an r2c run in the inverse direction is ``ihfft``
(positive exponent) and a c2r run in the forward direction is ``hfft``. Libraries without a
sign argument get them by conjugating (ihfft = conj(rfft), hfft = irfft(conj)).

Optional libraries are imported only when a candidate of theirs is built.
"""

from __future__ import annotations

import base64
import ctypes
import functools
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import sys
import types
from typing import Any, Callable, Mapping

import numpy as np

from ..plan import Candidate, Prepared
from ._layout import Layout, scale_factor

__all__ = ["LIBRARIES", "RECYCLED_BELOW", "FFTPrepared", "Library", "ducc0_call", "forget_fftw_wisdom", "import_pyfftw",
           "installed_libraries", "measured_fftw_wisdom", "plans_from_wisdom_only", "pocketfft_call"]

Call = Callable[..., np.ndarray]


class FFTPrepared(Prepared):
    """A candidate ready to run: ``forward``/``inverse`` callables over the staged input.

    ``writes_out`` says whether the library writes straight into a given ``out`` (rather
    than computing elsewhere and copying), i.e. whether handing it a spare output pays.
    """

    def __init__(self, candidate: Candidate, forward: Call, inverse: Call, *, writes_out: bool = True, **state: Any):
        super().__init__(candidate, **state)
        self.forward = forward
        self.inverse = inverse
        self.writes_out = writes_out

    def free(self) -> None:
        super().free()
        self.forward = self.inverse = _freed


def _freed(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("this prepared FFT candidate has been freed")


def _into(out: np.ndarray | None, result: np.ndarray) -> np.ndarray:
    if out is None:
        return result
    np.copyto(out, result)
    return out


class Library:
    """One CPU FFT library (base class)."""

    name = "library"
    module = ""

    def available(self) -> bool:
        return importlib.util.find_spec(self.module) is not None

    def version(self) -> str:
        """The installed distribution's version (read from metadata: nothing is imported)."""
        try:
            return importlib.metadata.version(self.module)
        except importlib.metadata.PackageNotFoundError:
            return "unknown"

    def supports(self, layout: Layout) -> bool:
        return layout.precision != "long"

    def build(self, layout: Layout, candidate: Candidate, extra: Mapping[str, Any] | None) -> FFTPrepared:
        raise NotImplementedError


_SCIPY_FUNCTIONS = ("fftn", "ifftn", "rfftn", "ihfftn", "hfftn", "irfftn", "dctn", "idctn", "dstn", "idstn")


def _scipy_fft_functions() -> Any:
    """scipy.fft's own pocketfft functions, which do not dispatch through uarray.

    The public ``scipy.fft.fftn`` & co. dispatch to the active backend; inside
    ``scipy.fft.set_backend(nvmathpy.scipy.fft)`` that is nvmathpy itself, so calling them
    from here would recurse. ``scipy.fft._pocketfft`` (checked in SciPy 1.17) is called
    directly - which also skips the dispatch cost; should that private module move, the
    public functions are called with SciPy's own backend pinned for the call.
    """
    import scipy.fft as sfft

    try:
        impl = importlib.import_module("scipy.fft._pocketfft")
        return types.SimpleNamespace(**{name: getattr(impl, name) for name in _SCIPY_FUNCTIONS})
    except (ImportError, AttributeError):
        return types.SimpleNamespace(**{name: _scipy_pinned(sfft, getattr(sfft, name)) for name in _SCIPY_FUNCTIONS})


def _scipy_pinned(sfft: Any, function: Call) -> Call:
    """``function`` run with SciPy's own backend only (no other backend is consulted)."""

    @functools.wraps(function)
    def pinned(*args: Any, **kwargs: Any) -> np.ndarray:
        with sfft.set_backend("scipy", only=True):
            return function(*args, **kwargs)

    return pinned


class ScipyLibrary(Library):
    """scipy.fft (pocketfft), threaded through ``workers``."""

    name = "scipy"
    module = "scipy"

    def supports(self, layout: Layout) -> bool:
        return True

    def build(self, layout, candidate, extra=None):
        sfft = _scipy_fft_functions()
        axes, norm, workers = layout.axes, layout.norm, candidate.params["threads"]
        common = {"axes": axes, "norm": norm, "workers": workers}
        if layout.kind == "c2c":
            fwd, inv = functools.partial(sfft.fftn, **common), functools.partial(sfft.ifftn, **common)
        elif layout.kind == "r2c":
            fwd, inv = functools.partial(sfft.rfftn, **common), functools.partial(sfft.ihfftn, **common)
        else:
            fwd = functools.partial(sfft.hfftn, s=layout.lengths, **common)
            inv = functools.partial(sfft.irfftn, s=layout.lengths, **common)
        return FFTPrepared(
            candidate, lambda a, out=None: _into(out, fwd(a)), lambda a, out=None: _into(out, inv(a)), writes_out=False
        )


#: ducc0's and pocketfft's ``inorm`` per direction for each ``norm``: 0 unscaled, 1 by 1/sqrt(n), 2 by 1/n.
_INORM = {"backward": {"forward": 0, "inverse": 2}, "forward": {"forward": 2, "inverse": 0},
          "ortho": {"forward": 1, "inverse": 1}}


class Ducc0Library(Library):
    """ducc0.fft: c2c/r2c/c2r with a sign argument, normalisation and ``nthreads``."""

    name = "ducc0"
    module = "ducc0"

    def build(self, layout, candidate, extra=None):
        axes, nthreads = tuple(layout.axes), candidate.params["threads"]
        lastsize = layout.lengths[-1]
        fwd, inv = (ducc0_call(layout.kind, axes, direction, layout.norm, nthreads, lastsize)
                    for direction in ("forward", "inverse"))
        return FFTPrepared(candidate, fwd, inv)


def ducc0_call(kind: str, axes: tuple[int, ...], direction: str, norm: str, nthreads: int,
               lastsize: int | None) -> Any:
    """ducc0's ``call(a, out=None)`` of a ``kind`` transform over ``axes`` (``lastsize``: the real
    length of a c2r, ``None`` for the function of that length giving the c2r's call; the others
    do not depend on any length, as ducc0 scales by ``inorm``)."""
    import ducc0

    return _positional_call(ducc0.fft, kind, axes, direction, norm, nthreads, lastsize)


def _positional_call(functions: Any, kind: str, axes: tuple[int, ...], direction: str, norm: str, nthreads: int,
                     lastsize: int | None) -> Any:
    """The ``call(a, out=None)`` of ``functions.c2c``/``r2c``/``c2r`` (ducc0's and SciPy's
    pocketfft binding share their signatures), given positional arguments: both parse
    keywords slowly. A c2r with ``lastsize=None``: the function of the real length giving the
    call (a new length's call costs one closure)."""
    forward, scale = direction == "forward", _INORM[norm][direction]
    if kind == "c2r":
        c2r = functions.c2r

        def of_length(lastsize: int) -> Call:
            def run(a, out=None):
                return c2r(a, axes, lastsize, forward, scale, out, nthreads)

            return run

        return of_length if lastsize is None else of_length(lastsize)
    transform = functions.c2c if kind == "c2c" else functions.r2c

    def run(a, out=None):
        return transform(a, axes, forward, scale, out, nthreads)

    return run


class PocketfftLibrary(Library):
    """SciPy's compiled pocketfft binding, ``scipy.fft._pocketfft.pypocketfft``, called directly.

    It is the kernel ``scipy.fft`` runs (same bits as the ``"scipy"`` library), without
    scipy.fft's argument handling and dispatch in Python, which on small transforms cost more
    than the transform. The binding is private to SciPy: the library is offered only where its
    extension file is installed (looked for without importing SciPy), and on its first use the
    binding is imported and checked by tiny calls of the positional signature used here; where
    that fails, candidates of this library run through scipy.fft's own functions instead (the
    same kernel) and :func:`pocketfft_call` gives ``None``.
    """

    name = "pocketfft"
    module = "scipy"

    def available(self) -> bool:
        spec = importlib.util.find_spec("scipy")
        if spec is None or not spec.submodule_search_locations:
            return False
        folder = os.path.join(spec.submodule_search_locations[0], "fft", "_pocketfft")
        names = {"pypocketfft" + suffix for suffix in importlib.machinery.EXTENSION_SUFFIXES}
        try:
            return any(entry in names for entry in os.listdir(folder))
        except OSError:
            return False

    def supports(self, layout: Layout) -> bool:
        return True

    def build(self, layout, candidate, extra=None):
        axes, nthreads = tuple(layout.axes), candidate.params["threads"]
        calls = [pocketfft_call(layout.kind, axes, direction, layout.norm, nthreads, layout.lengths[-1])
                 for direction in ("forward", "inverse")]
        if calls[0] is None:
            return ScipyLibrary().build(layout, candidate, extra)
        return FFTPrepared(candidate, *calls)


@functools.lru_cache(maxsize=1)
def _pypocketfft() -> Any:
    """SciPy's pocketfft binding, or ``None`` where it cannot be imported or its functions do not
    take the positional arguments :func:`pocketfft_call` passes (checked once by tiny calls)."""
    try:
        binding = importlib.import_module("scipy.fft._pocketfft.pypocketfft")
        signal = np.array([1.0, 2.0, 0.0, 0.0])
        spectrum = binding.c2c(signal.astype(np.complex128), (0,), True, 0, None, 1)
        half = binding.r2c(signal, (0,), True, 0, None, 1)
        back = binding.c2r(half, (0,), 4, False, 2, None, 1)
    except Exception:  # noqa: BLE001 - missing, moved or another signature: not used
        return None
    if np.allclose(spectrum, [3, 1 - 2j, -1, 1 + 2j]) and np.allclose(half, spectrum[:3]) and np.allclose(back, signal):
        return binding
    return None


def pocketfft_call(kind: str, axes: tuple[int, ...], direction: str, norm: str, nthreads: int,
                   lastsize: int | None) -> Any:
    """SciPy's pocketfft ``call(a, out=None)`` of a ``kind`` transform over ``axes``, as
    :func:`ducc0_call` (``lastsize``: the real length of a c2r, ``None`` for the function of
    that length giving the call; the others depend on no length);
    ``None`` where the binding is not usable (:class:`PocketfftLibrary`). Its c2c transform of
    real input is the r2c transform followed by the conjugate mirror (SciPy's ``fft`` of real
    input)."""
    binding = _pypocketfft()
    return None if binding is None else _positional_call(binding, kind, axes, direction, norm, nthreads, lastsize)


def _import_mkl_fft() -> Any:
    """Import mkl_fft with OpenMP's idle spin off (``KMP_BLOCKTIME=0`` unless the user set it).

    Intel OpenMP threads otherwise busy-wait for a while after each MKL call, which takes the cores
    away from whatever runs next - another FFT library being timed by autotune included.
    """
    os.environ.setdefault("KMP_BLOCKTIME", "0")
    if "mkl_fft" not in sys.modules and LIBRARIES["pyfftw"].available():
        # MKL's FFTW3-compatible entry points, loaded with MKL's kernels on its first transform,
        # would otherwise take over the FFTW symbols pyFFTW binds when it is imported later
        # (its c2r plans then compute wrong results): pyFFTW binds them first.
        import_pyfftw()
    import mkl_fft

    return mkl_fft


@functools.lru_cache(maxsize=1)
def _mkl_set_local_threads() -> Callable[[int], int] | None:
    """``MKL_Set_Num_Threads_Local`` of the MKL that mkl_fft loaded (found through threadpoolctl)."""
    from threadpoolctl import threadpool_info

    _import_mkl_fft()

    for info in threadpool_info():
        if info.get("internal_api") == "mkl":
            fn = ctypes.CDLL(info["filepath"]).MKL_Set_Num_Threads_Local
            fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
            return fn
    return None


class MklLibrary(Library):
    """mkl_fft (Intel MKL DFTI); threads set per call with ``MKL_Set_Num_Threads_Local``.

    mkl_fft 2.3 scales ``norm="ortho"``/``"forward"`` wrongly when not every axis is
    transformed (it counts the batch axes too), so it is always called unnormalised
    (``"backward"``, which it gets right) and the difference is applied afterwards.
    """

    name = "mkl_fft"
    module = "mkl_fft"

    def build(self, layout, candidate, extra=None):
        mkl_fft = _import_mkl_fft()
        axes, threads = layout.axes, candidate.params["threads"]
        set_threads = _mkl_set_local_threads()
        if layout.kind == "c2c":
            if len(axes) == 1:
                raw = {"forward": functools.partial(mkl_fft.fft, axis=axes[0]),
                       "inverse": functools.partial(mkl_fft.ifft, axis=axes[0])}  # fmt: skip
            else:
                raw = {"forward": functools.partial(mkl_fft.fftn, axes=axes),
                       "inverse": functools.partial(mkl_fft.ifftn, axes=axes)}  # fmt: skip
            raw_scale = {"forward": 1.0, "inverse": 1.0 / layout.size}
        elif layout.kind == "r2c":
            rfftn = functools.partial(mkl_fft.rfftn, axes=axes)
            raw = {"forward": rfftn, "inverse": lambda a, out=None: np.conjugate(rfftn(a), out=out)}
            raw_scale = {"forward": 1.0, "inverse": 1.0}
        else:
            irfftn = functools.partial(mkl_fft.irfftn, s=layout.lengths, axes=axes)
            raw = {"forward": lambda a, out=None: irfftn(np.conjugate(a), out=out), "inverse": irfftn}
            raw_scale = {"forward": 1.0 / layout.size, "inverse": 1.0 / layout.size}

        def wrapped(direction: str) -> Call:
            fn = raw[direction]
            fix = scale_factor(layout, direction) / raw_scale[direction]

            def call(a, out=None):
                previous = set_threads(threads) if set_threads is not None else 0
                try:
                    result = fn(a, out=out)
                finally:
                    if set_threads is not None:
                        set_threads(previous)
                if fix != 1.0:
                    np.multiply(result, fix, out=result)
                return result

            return call

        return FFTPrepared(candidate, wrapped("forward"), wrapped("inverse"))


def import_pyfftw() -> Any:
    """Import pyFFTW without its dask interface, unless dask.array is loaded already.

    ``import pyfftw`` imports ``pyfftw.interfaces``, which imports ``dask.array`` when dask is
    installed (a slow import, which loads scipy.fftpack too) for ``pyfftw.interfaces.dask_fft``, which
    nvmathpy never uses; the FFTW plans need only the core. ``dask.array.fft`` is hidden for
    the import (pyFFTW skips that interface when it cannot be imported), so the first FFT
    that runs on FFTW does not pay for it. ``import pyfftw.interfaces.dask_fft`` still
    works afterwards.
    """
    module = sys.modules.get("pyfftw")
    if module is not None:
        return module
    hide = "dask.array.fft" not in sys.modules
    if hide:
        sys.modules["dask.array.fft"] = None  # type: ignore[assignment]  # "not importable" to the import system
    try:
        import pyfftw
    finally:
        if hide and sys.modules.get("dask.array.fft", 0) is None:
            del sys.modules["dask.array.fft"]
    return pyfftw


#: FFTW wisdom texts this process has imported already, so a hit imports each once.
_IMPORTED_FFTW_WISDOM: set[tuple] = set()
#: Up to this many bytes per array, a plan on one thread copies through its own buffers: two
#: copies within the core's cache cost less than binding the caller's arrays (pyFFTW checks
#: each ``update_arrays``). Not calibrated per machine (a fraction of a microsecond either way).
_COPIED_UP_TO = 1 << 13
#: Arrays smaller than this many bytes come back from the allocator without page faults (glibc
#: recycles freed blocks of this size from its heap); larger ones are mapped afresh.
RECYCLED_BELOW = 1 << 20
_FFTW_FLAGS = {"estimate": "FFTW_ESTIMATE", "measure": "FFTW_MEASURE", "patient": "FFTW_PATIENT"}


#: The order of pyfftw.export_wisdom()'s tuple.
_FFTW_PRECISIONS = ("double", "single", "long")


def import_fftw_wisdom(extra: Mapping[str, Any] | None) -> None:
    """Import the FFTW wisdom stored in a wisdom entry's ``extra`` (once per process).

    Only the precision the problem runs in is stored and imported: FFTW's import has a cost
    per precision, which a wisdom hit pays once.
    """
    stored = (extra or {}).get("fftw_wisdom")
    if not stored:
        return
    key = tuple(sorted(stored.items()))
    if key in _IMPORTED_FFTW_WISDOM:
        return
    pyfftw = import_pyfftw()
    pyfftw.import_wisdom(tuple(base64.b64decode(stored.get(p, "")) for p in _FFTW_PRECISIONS))
    _IMPORTED_FFTW_WISDOM.add(key)


def forget_fftw_wisdom() -> None:
    """Forget FFTW's in-process wisdom, what nvmathpy imported included (a wisdom entry's hit
    then imports its wisdom again), as in a new process; nothing without pyFFTW.

    Examples
    --------
    >>> forget_fftw_wisdom() is None
    True
    """
    try:
        import_pyfftw().forget_wisdom()
    except ImportError:
        return
    _IMPORTED_FFTW_WISDOM.clear()


def measured_fftw_wisdom(layout: Layout, threads: int, time_limit: float) -> tuple[FFTPrepared, dict[str, Any]]:
    """The FFTW plan of ``layout`` at FFTW_MEASURE on ``threads`` threads (a complex transform's
    backward plan made too), planned under ``time_limit`` seconds per direction from no wisdom,
    and what a build needs to make it again from wisdom only: ``{"fftw_wisdom": {precision:
    text}, "fftw_time_limit": time_limit}`` (FFTW's wisdom of these plans alone: the process's
    FFTW wisdom is forgotten first)."""
    forget_fftw_wisdom()
    measured = Candidate.of("pyfftw", threads=threads, effort="measure")
    prepared = LIBRARIES["pyfftw"].build(layout, measured, time_limit=time_limit)
    if layout.kind == "c2c":
        prepared.inverse(np.zeros(layout.out_shape, layout.out_dtype))  # plans the backward transform
    return prepared, prepared.wisdom_extra()


def plans_from_wisdom_only(layout: Layout, threads: int, extra: Mapping[str, Any]) -> bool:
    """Whether FFTW plans ``layout`` at FFTW_MEASURE on ``threads`` threads from the wisdom of
    ``extra`` alone (the process's other FFTW wisdom forgotten first): FFTW does not reuse the
    wisdom of a search its time limit cut short."""
    forget_fftw_wisdom()
    try:
        only = Candidate.of("pyfftw", threads=threads, effort="measure", wisdom="only")
        LIBRARIES["pyfftw"].build(layout, only, extra)
    except RuntimeError:
        return False
    return True


class _FFTWPrepared(FFTPrepared):
    def wisdom_extra(self) -> dict[str, Any]:
        # Even an FFTW_ESTIMATE candidate is stored with the process's wisdom: FFTW plans an
        # ESTIMATE request from MEASURE wisdom when it has some (as after autotune timed the
        # MEASURE candidate), and without it the same candidate can be many times slower.
        pyfftw = import_pyfftw()
        precision = self.state["precision"]
        text = pyfftw.export_wisdom()[_FFTW_PRECISIONS.index(precision)]
        # FFTW does not reuse wisdom of a time-limited search when planning without the limit.
        return {"fftw_wisdom": {precision: base64.b64encode(text).decode("ascii")}, "fftw_time_limit": self.state["time_limit"]}


class PyfftwLibrary(Library):
    """pyFFTW (FFTW 3): plans made at a planner effort, on SIMD-aligned buffers.

    FFTW plans are bound to arrays of one alignment and strides: an input that is not
    C-contiguous and aligned as the plan needs is copied into the plan's aligned buffer first (as
    ``pyfftw.builders`` objects do), and so are c2r inputs (FFTW destroys them).
    ``inplace`` results are copied into the operand.
    The backward c2c plan is built on first use of the inverse direction. ``time_limit``
    bounds FFTW's planning (seconds; FFTW keeps the best plan found by then).
    """

    name = "pyfftw"
    module = "pyfftw"

    def build(self, layout, candidate, extra=None, time_limit: float | None = None):
        pyfftw = import_pyfftw()
        import_fftw_wisdom(extra)
        if extra and extra.get("fftw_time_limit") is not None:
            time_limit = extra["fftw_time_limit"]  # plan as the wisdom was made, so it applies
        params = candidate.params
        # a candidate of stored wisdom plans from it only: FFTW fails at once where it holds no plan
        flags = (_FFTW_FLAGS[params["effort"]],) + (("FFTW_WISDOM_ONLY",) if params.get("wisdom") else ())
        threads, axes = params["threads"], layout.axes
        align = pyfftw.simd_alignment
        in_buf = pyfftw.empty_aligned(layout.in_shape, layout.in_dtype, n=align)
        out_buf = pyfftw.empty_aligned(layout.out_shape, layout.out_dtype, n=align)

        def make(direction: str, flags: tuple[str, ...] = flags) -> Any:
            return pyfftw.FFTW(
                in_buf, out_buf, axes=axes, direction=direction, flags=flags, threads=threads,
                planning_timelimit=time_limit,
            )  # fmt: skip

        def make_inverse() -> Any:  # on first use; from wisdom only, FFTW_ESTIMATE where it holds none
            try:
                return make(sign[layout.kind][1])
            except RuntimeError:
                if "FFTW_WISDOM_ONLY" not in flags:
                    raise
                return make(sign[layout.kind][1], ("FFTW_ESTIMATE",))

        sign = {"c2c": ("FFTW_FORWARD", "FFTW_BACKWARD"), "r2c": ("FFTW_FORWARD",) * 2, "c2r": ("FFTW_BACKWARD",) * 2}
        plans: dict[str, Any] = {"forward": make(sign[layout.kind][0])}
        if layout.kind != "c2c":
            plans["inverse"] = plans["forward"]
        # FFTW runs on the caller's input where it is contiguous and aligned as the plan needs
        # (pyFFTW's ``input_alignment``: often less than the buffers' SIMD alignment, e.g.
        # NumPy's 16 bytes suffice where the buffers have 32), into a fresh output (see bound):
        # a copy in and out of the plan's buffers costs more, most of all where the plan's
        # threads read and write what another core's cache holds. A c2r input is copied first
        # (FFTW destroys it).
        copy_in = layout.kind == "c2r"
        copied = threads == 1 and max(in_buf.nbytes, out_buf.nbytes) <= _COPIED_UP_TO
        aligned, out_shape, out_dtype = pyfftw.empty_aligned, layout.out_shape, layout.out_dtype
        # A fresh output the allocator recycles is NumPy's own (pyFFTW's aligned allocation
        # costs more Python than the SIMD alignment beyond the plan's saves there); larger
        # outputs, mapped afresh anyway, get the buffers' alignment.
        empty = (lambda: np.empty(out_shape, out_dtype)) if out_buf.nbytes < RECYCLED_BELOW else (
            lambda: aligned(out_shape, out_dtype, n=align))

        def binds(fftw: Any, a: np.ndarray, result: np.ndarray) -> bool:
            """Whether the plan takes ``a`` and ``result`` (``update_arrays`` checks their
            strides and alignment), then bound to them."""
            try:
                fftw.update_arrays(a, result)
                return True
            except ValueError:
                return False

        def bound(fftw: Any, a: np.ndarray, out: np.ndarray | None) -> np.ndarray:
            """The array FFTW writes, bound to it with the input: ``a`` where the plan takes it,
            else a copy of it in the plan's input buffer; ``out`` where the plan takes it, else
            a fresh array (``empty``'s, or the buffers' alignment where the plan needs more)."""
            result = empty() if out is None else out
            if binds(fftw, a, result):
                return result
            if out is None and result.ctypes.data % fftw.output_alignment:  # NumPy's, less aligned than the plan's
                result = aligned(out_shape, out_dtype, n=align)
                if binds(fftw, a, result):
                    return result
            if a is not in_buf:
                np.copyto(in_buf, a)
            if not binds(fftw, in_buf, result):
                result = aligned(out_shape, out_dtype, n=align)
                fftw.update_arrays(in_buf, result)
            return result

        def runner(direction: str, conj_in: bool, conj_out: bool) -> Call:
            scale = scale_factor(layout, direction)

            def run(a, out=None):
                fftw = plans.get(direction)
                if fftw is None:
                    fftw = plans[direction] = make_inverse()
                if conj_in:
                    np.conjugate(a, out=in_buf)
                    a = in_buf
                elif copy_in or a is out:
                    np.copyto(in_buf, a)
                    a = in_buf
                result = bound(fftw, a, out)
                fftw.execute()
                fftw.update_arrays(in_buf, out_buf)  # keep no reference to the caller's arrays
                if out is not None and result is not out:
                    result = _into(out, result)
                if conj_out:
                    np.conjugate(result, out=result)
                if scale != 1.0:
                    np.multiply(result, scale, out=result)
                return result

            if conj_in or conj_out or scale != 1.0 or copy_in or direction not in plans:
                return run

            def run_copied(a, out=None):  # the common case of a tiny plan on one thread
                np.copyto(in_buf, a)
                plans[direction].execute()
                return out_buf.copy() if out is None else _into(out, out_buf)

            def run_plain(a, out=None):  # the common case: nothing to convert, a fresh output
                if out is not None:
                    return run(a, out)
                fftw, result = plans[direction], empty()
                try:
                    fftw.update_arrays(a, result)
                except ValueError:
                    result = bound(fftw, a, None)
                fftw.execute()
                fftw.update_arrays(in_buf, out_buf)
                return result

            return run_copied if copied else run_plain

        hermitian_in = layout.kind == "c2r"
        fwd = runner("forward", conj_in=hermitian_in, conj_out=False)
        inv = runner("inverse", conj_in=False, conj_out=layout.kind == "r2c")
        return _FFTWPrepared(candidate, fwd, inv, plans=plans, buffers=(in_buf, out_buf), precision=layout.precision, time_limit=time_limit)


#: Every library nvmathpy knows, in a fixed order (the heuristic ranks them per problem).
LIBRARIES: dict[str, Library] = {
    lib.name: lib for lib in (ScipyLibrary(), PocketfftLibrary(), Ducc0Library(), PyfftwLibrary(), MklLibrary())
}


@functools.lru_cache(maxsize=1)
def installed_libraries() -> tuple[str, ...]:
    """Names of the libraries importable here (scipy always); looked up once a process (the
    look-up searches the import path, which cost a new call signature more than its transform)."""
    return tuple(name for name, lib in LIBRARIES.items() if lib.available())
