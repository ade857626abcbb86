"""The CPU FFT libraries nvmathpy can run on: scipy.fft (always), SciPy's pocketfft binding called
directly, ducc0, pyFFTW and mkl_fft.

Each library is a :class:`~._library_base.Library` that says whether it is installed, what
version it is, whether it can compute a :class:`~nvmathpy.fft._layout.Layout`, and how to
``build`` a :class:`~._library_base.FFTPrepared` for it with a thread count (pyFFTW's, with
FFTW's wisdom, in :mod:`._pyfftw`): two callables ``forward(a, out=None)`` and
``inverse(a, out=None)`` that transform the staged input ``a`` (writing into ``out`` when
given) with the layout's normalisation already applied.

Hermitian transforms ride on the real kinds: an r2c run in the inverse direction is ``ihfft``
(positive exponent) and a c2r run in the forward direction is ``hfft``. Libraries without a
sign argument get them by conjugating (ihfft = conj(rfft), hfft = irfft(conj)).

Optional libraries are imported only when a candidate of theirs is built.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.machinery
import importlib.util
import os
import types
from typing import Any, Callable

import numpy as np

from .._fftw_binding import bind_pyfftw_first
from ._layout import Layout, scale_factor
from ._library_base import Call, FFTPrepared, Library, into
from ._pyfftw import (RECYCLED_BELOW, PyfftwLibrary, forget_fftw_wisdom, import_pyfftw, measured_fftw_wisdom,
                      plans_from_wisdom_only)

__all__ = ["LIBRARIES", "RECYCLED_BELOW", "FFTPrepared", "Library", "ducc0_call", "forget_fftw_wisdom", "import_pyfftw",
           "installed_libraries", "measured_fftw_wisdom", "plans_from_wisdom_only", "pocketfft_call"]

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
            candidate, lambda a, out=None: into(out, fwd(a)), lambda a, out=None: into(out, inv(a)), writes_out=False
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
    # MKL's FFTW3-compatible entry points, loaded with MKL's kernels on its first transform,
    # would otherwise take over the FFTW calls pyFFTW makes (failed plans, wrong c2r results)
    bind_pyfftw_first()
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


#: Every library nvmathpy knows, in a fixed order (the heuristic ranks them per problem).
LIBRARIES: dict[str, Library] = {
    lib.name: lib for lib in (ScipyLibrary(), PocketfftLibrary(), Ducc0Library(), PyfftwLibrary(), MklLibrary())
}


@functools.lru_cache(maxsize=1)
def installed_libraries() -> tuple[str, ...]:
    """Names of the libraries importable here (scipy always); looked up once a process (the
    look-up searches the import path, which cost a new call signature more than its transform)."""
    return tuple(name for name, lib in LIBRARIES.items() if lib.available())
