"""scipy.fft-compatible functions backed by nvmathpy FFT plans, and a uarray backend.

The functions take SciPy's signatures (``overwrite_x``, ``workers``, keyword-only ``plan``)
and give SciPy's results. ``workers`` is the thread budget, resolved as SciPy does (``None``:
:func:`scipy.fft.get_workers`, negative values count back from the CPU count). ``plan`` may
be an :class:`nvmathpy.fft.FFT` made for the same transform; it is then run on ``x``.
``overwrite_x`` is a permission SciPy's own functions also may ignore; inputs are never
modified.

This module is also a uarray backend for :mod:`scipy.fft`::

    with scipy.fft.set_backend(nvmathpy.scipy.fft):
        y = scipy.fft.fft(x)

The DCT/DST functions (``dct``, ``idct``, ``dst``, ``idst`` and their ``n`` forms) run on
:class:`nvmathpy.fft.DCT`/:class:`~nvmathpy.fft.DST` plans, choosing between scipy.fft and ducc0.

``fht``/``ifht`` run SciPy's own FFTLog code with its FFTs here; ``fhtoffset``, the helpers
(``next_fast_len``, ``fftfreq``...), the workers and backend controls are SciPy's own objects.

As a backend it declines (returns ``NotImplemented``, so SciPy falls back to its own backend)
any operand that is not a NumPy array or a plain array-like of numbers (CuPy, torch, dask,
object arrays, ndarray subclasses...), and any ``plan`` that is not an nvmathpy FFT plan.

Examples
--------
>>> import numpy as np, scipy.fft
>>> x = np.random.default_rng(0).standard_normal(16)
>>> bool(np.allclose(fft(x, workers=2), scipy.fft.fft(x)))
True
>>> import nvmathpy.scipy.fft as backend
>>> with scipy.fft.set_backend(backend):
...     y = scipy.fft.rfft(x)
>>> bool(np.allclose(y, np.fft.rfft(x)))
True
"""

from __future__ import annotations

import importlib
import operator
import os
import sys
from typing import Any, Callable

import numpy as np
import scipy.fft as scipy_fft
from scipy.fft import (
    fftfreq, fftshift, fhtoffset, get_workers, ifftshift, next_fast_len, prev_fast_len, register_backend, rfftfreq,
    set_backend, set_global_backend, set_workers, skip_backend,
)  # fmt: skip

from ..fft._driver import as_scipy_input, plan_cache, real_forward, transform
from ..fft.fft_plan import FFT
from ..fft.trig_plan import trig_transform

__all__ = [
    "fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
    "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift",
    "next_fast_len", "prev_fast_len", "get_workers", "set_workers", "plan_cache",
    "dct", "idct", "dst", "idst", "dctn", "idctn", "dstn", "idstn", "fht", "ifht", "fhtoffset",
    "set_backend", "skip_backend", "set_global_backend", "register_backend",
]  # fmt: skip



def _threads(workers: Any) -> Any:
    """SciPy's ``workers`` rule: None -> the context's default (:func:`scipy.fft.get_workers`
    itself, which the transform asks when it plans), negatives wrap around the CPU count."""
    if workers is None:
        return get_workers
    w = operator.index(workers)
    if w == 0:
        raise ValueError("workers must not be zero")
    if w < 0:
        w += (os.cpu_count() or 1) + 1
        if w <= 0:
            raise ValueError(f"workers value out of range; got {workers}, must not be less than {-(os.cpu_count() or 1)}")
    return w


def _n(n: Any) -> tuple[int] | None:
    """``n`` as SciPy takes it: ``None`` or an integer >= 1 (``TypeError`` for non-integers,
    ``ValueError`` below 1). Booleans are refused (``TypeError``), which SciPy takes as 1."""
    if n is None:
        return None
    if isinstance(n, (bool, np.bool_)):
        raise TypeError(f"n must be an integer, not a boolean (booleans are refused): n={n!r}")
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"Invalid number of data points ({n}) specified; n must be >= 1")
    return (n,)


def _s(s: Any) -> Any:
    """``s`` as SciPy takes it: ``None``, an integer, or integers (``ValueError`` otherwise)."""
    if s is None or isinstance(s, (int, np.integer)):
        return s
    try:
        return [operator.index(v) if v is not None else v for v in s]
    except TypeError:
        raise ValueError(f"shape must be a scalar or iterable of integers, got s={s!r}") from None


def _type(type: Any, inverse: bool) -> int:
    """A DCT/DST ``type`` as SciPy takes it: an integer (the inverse transforms, written in
    Python there, also take an integral float such as ``2.0``); ``TypeError`` otherwise."""
    if inverse and isinstance(type, float) and type.is_integer():
        return int(type)
    if isinstance(type, (bool, np.bool_)):  # refused by the plan, naming the allowed types
        return type
    return operator.index(type)


def _one_d(name: str, kind: str, direction: str, what: str, note: str = "") -> Callable[..., Any]:
    through_rfft = kind == "c2c" and direction == "forward"

    def function(x, n=None, axis=-1, norm=None, overwrite_x=False, workers=None, *, plan=None):
        s = None if n is None else _n(n)
        threads = get_workers if workers is None else _threads(workers)
        if type(x) is not np.ndarray or x.dtype not in _NATIVE:
            x = as_scipy_input(x)
        if through_rfft and plan is None and type(x) is np.ndarray and x.dtype.kind in "biuf" and x.ndim:
            return real_forward(x, n=s, axis=axis, norm=norm, threads=threads)
        return transform(x, kind=kind, direction=direction, s=s, axes=(axis,), norm=norm, threads=threads,
                         plan=plan)  # fmt: skip

    return _named(function, name, what, note + _FFT_NOTE)


#: Dtypes :func:`as_scipy_input` passes unchanged (checked first: it saves the call).
_NATIVE = frozenset(np.dtype(c) for c in "fdgFDG")


def _multi_d(name: str, kind: str, direction: str, axes_default: Any, what: str) -> Callable[..., Any]:
    def function(x, s=None, axes=axes_default, norm=None, overwrite_x=False, workers=None, *, plan=None):
        return transform(as_scipy_input(x), kind=kind, direction=direction, s=_s(s), axes=axes, norm=norm,
                         threads=_threads(workers), plan=plan)  # fmt: skip

    return _named(function, name, what)


def _scipy_orthogonalize(x: Any, orthogonalize: Any) -> Any:
    """The ``orthogonalize`` SciPy 1.17 applies: its complex branch transforms the real and
    imaginary parts with the default (``norm == "ortho"``) whatever was passed, and the drop-in
    gives SciPy's numbers (:class:`nvmathpy.fft.DCT` honours the argument for complex input)."""
    dtype = getattr(x, "dtype", None)
    if isinstance(dtype, np.dtype):
        is_complex = dtype.kind == "c"
    elif dtype is not None:  # a torch dtype
        is_complex = bool(getattr(dtype, "is_complex", False))
    else:
        is_complex = np.iscomplexobj(x)
    return None if is_complex and orthogonalize in (True, False) else orthogonalize


def _trig_one_d(name: str, transform: str, inverse: bool, what: str) -> Callable[..., Any]:
    def function(x, type=2, n=None, axis=-1, norm=None, overwrite_x=False, workers=None, orthogonalize=None):
        s, type = None if n is None else _n(n), _type(type, inverse)
        if x.__class__ is not np.ndarray or x.dtype not in _NATIVE:  # (``type`` is the DCT type here)
            x = as_scipy_input(x)
        return trig_transform(x, transform=transform, type=type, s=s, axes=(axis,), norm=norm,
                              orthogonalize=_scipy_orthogonalize(x, orthogonalize), threads=_threads(workers),
                              inverse=inverse)  # fmt: skip

    return _named(function, name, what, _TRIG_NOTE)


def _trig_multi_d(name: str, transform: str, inverse: bool, what: str) -> Callable[..., Any]:
    def run(x, type, s, axes, norm, workers, orthogonalize):
        x, s, type = as_scipy_input(x), _s(s), _type(type, inverse)
        if isinstance(x, np.ndarray) and x.ndim == 0:  # SciPy: nothing to transform, x as floats
            return x.astype(x.dtype if x.dtype.kind in "fc" and x.dtype.itemsize >= 4 else np.float64)
        return trig_transform(x, transform=transform, type=type, s=s, axes=axes, norm=norm,
                              orthogonalize=_scipy_orthogonalize(x, orthogonalize), threads=_threads(workers),
                              inverse=inverse)  # fmt: skip

    if name == "dctn":  # SciPy 1.17 makes orthogonalize keyword-only here alone
        def function(x, type=2, s=None, axes=None, norm=None, overwrite_x=False, workers=None, *, orthogonalize=None):
            return run(x, type, s, axes, norm, workers, orthogonalize)
    else:
        def function(x, type=2, s=None, axes=None, norm=None, overwrite_x=False, workers=None, orthogonalize=None):
            return run(x, type, s, axes, norm, workers, orthogonalize)

    return _named(function, name, what, _TRIG_NOTE)


_FFT_NOTE = ("``workers`` is the thread budget; ``plan`` may be an :class:`nvmathpy.fft.FFT` for this transform;\n"
             "``overwrite_x`` is accepted and the input is never modified.\n")
_TRIG_NOTE = ("``workers`` is the thread budget; ``overwrite_x`` is accepted and the input is never modified.\n"
              "A DCT-I over fewer than 2 points raises ``ValueError`` (SciPy raises ``RuntimeError``).\n")


def _named(function: Callable[..., Any], name: str, what: str, note: str = _FFT_NOTE) -> Callable[..., Any]:
    function.__name__ = function.__qualname__ = name
    function.__module__ = __name__
    function.__doc__ = f"{what} (as :func:`scipy.fft.{name}`, same signature and results).\n\n{note}"
    return function


fft = _one_d("fft", "c2c", "forward", "1-D discrete Fourier transform",
             "A real NumPy array (or array-like) is transformed through :func:`rfft`, with SciPy's signs of zeros:\n"
             "the first ``n // 2 + 1`` entries equal ``rfft``'s (``np.array_equal``; bit for bit but for the zero\n"
             "frequency and the Nyquist term, conjugated in place as SciPy's are, so an imaginary part +0 there\n"
             "comes out -0), the others are their complex conjugates.\n")
ifft = _one_d("ifft", "c2c", "inverse", "1-D inverse discrete Fourier transform")
rfft = _one_d("rfft", "r2c", "forward", "1-D transform of real input")
irfft = _one_d("irfft", "c2r", "inverse", "Inverse of rfft")
hfft = _one_d("hfft", "c2r", "forward", "Transform of a Hermitian-symmetric signal")
ihfft = _one_d("ihfft", "r2c", "inverse", "Inverse of hfft for real input")
fft2 = _multi_d("fft2", "c2c", "forward", (-2, -1), "2-D discrete Fourier transform")
ifft2 = _multi_d("ifft2", "c2c", "inverse", (-2, -1), "2-D inverse discrete Fourier transform")
fftn = _multi_d("fftn", "c2c", "forward", None, "N-D discrete Fourier transform")
ifftn = _multi_d("ifftn", "c2c", "inverse", None, "N-D inverse discrete Fourier transform")
rfft2 = _multi_d("rfft2", "r2c", "forward", (-2, -1), "2-D transform of real input")
irfft2 = _multi_d("irfft2", "c2r", "inverse", (-2, -1), "Inverse of rfft2")
rfftn = _multi_d("rfftn", "r2c", "forward", None, "N-D transform of real input")
irfftn = _multi_d("irfftn", "c2r", "inverse", None, "Inverse of rfftn")
hfft2 = _multi_d("hfft2", "c2r", "forward", (-2, -1), "2-D transform of a Hermitian-symmetric signal")
ihfft2 = _multi_d("ihfft2", "r2c", "inverse", (-2, -1), "Inverse of hfft2 for real input")
hfftn = _multi_d("hfftn", "c2r", "forward", None, "N-D transform of a Hermitian-symmetric signal")
ihfftn = _multi_d("ihfftn", "r2c", "inverse", None, "Inverse of hfftn for real input")
dct = _trig_one_d("dct", "dct", False, "1-D discrete cosine transform")
idct = _trig_one_d("idct", "dct", True, "1-D inverse discrete cosine transform")
dst = _trig_one_d("dst", "dst", False, "1-D discrete sine transform")
idst = _trig_one_d("idst", "dst", True, "1-D inverse discrete sine transform")
dctn = _trig_multi_d("dctn", "dct", False, "N-D discrete cosine transform")
idctn = _trig_multi_d("idctn", "dct", True, "N-D inverse discrete cosine transform")
dstn = _trig_multi_d("dstn", "dst", False, "N-D discrete sine transform")
idstn = _trig_multi_d("idstn", "dst", True, "N-D inverse discrete sine transform")

def _fftlog(name: str) -> Callable[..., Any] | None:
    """SciPy's own FHT computation (``scipy.fft._fftlog_backend``, checked in SciPy 1.17), whose
    ``rfft``/``irfft`` dispatch to the active backend; ``None`` should that private module move."""
    try:
        return getattr(importlib.import_module("scipy.fft._fftlog_backend"), name)
    except (ImportError, AttributeError):
        return None


def fht(a, dln, mu, offset=0.0, bias=0.0):
    """Fast Hankel transform (as :func:`scipy.fft.fht`, same signature and results).

    SciPy's FFTLog algorithm, with its ``rfft`` and ``irfft`` run here (this module as the
    :mod:`scipy.fft` backend for the call, SciPy's own behind it).

    Examples
    --------
    >>> import numpy as np, scipy.fft
    >>> r = np.logspace(-2, 2, 32)
    >>> a = r * np.exp(-r**2 / 2)
    >>> bool(np.allclose(fht(a, np.log(r[1] / r[0]), mu=0.0), scipy.fft.fht(a, np.log(r[1] / r[0]), mu=0.0)))
    True
    """
    with set_backend(sys.modules[__name__]):
        return scipy_fft.fht(a, dln, mu, offset=offset, bias=bias)


def ifht(A, dln, mu, offset=0.0, bias=0.0):
    """Inverse fast Hankel transform (as :func:`scipy.fft.ifht`); its FFTs run here, as :func:`fht`'s."""
    with set_backend(sys.modules[__name__]):
        return scipy_fft.ifht(A, dln, mu, offset=offset, bias=bias)


# -- the uarray backend ------------------------------------------------------------------------

__ua_domain__ = "numpy.scipy.fft"

_TRANSFORMS = {
    f.__name__: f
    for f in (fft, ifft, rfft, irfft, hfft, ihfft, fft2, ifft2, fftn, ifftn, rfft2, irfft2, rfftn, irfftn,
              hfft2, ihfft2, hfftn, ihfftn, dct, idct, dst, idst, dctn, idctn, dstn, idstn)
}  # fmt: skip
_PLAIN = (list, tuple, int, float, complex, np.generic)


def _handled(x: Any) -> bool:
    """NumPy arrays and plain array-likes of numbers; anything else is left to other backends."""
    if type(x) is np.ndarray:
        return x.dtype.kind in "biufc"
    if isinstance(x, _PLAIN):
        try:
            return np.asarray(x).dtype.kind in "biufc"
        except (ValueError, TypeError):
            return False
    return False


def __ua_function__(method: Any, args: tuple, kwargs: dict) -> Any:
    """Run ``method`` (a scipy.fft multimethod) here, or return ``NotImplemented`` to decline.

    ``fht``/``ifht`` run SciPy's own FFTLog computation, whose FFTs come back here."""
    name = getattr(method, "__name__", "")
    if name in ("fht", "ifht"):
        computation = _fftlog(name)
        return NotImplemented if computation is None else computation(*args, **kwargs)
    function = _TRANSFORMS.get(name)
    if function is None:
        return NotImplemented
    x = args[0] if args else kwargs.get("x")
    if not _handled(x):
        return NotImplemented
    plan = kwargs.get("plan")
    if plan is not None and not isinstance(plan, FFT):
        return NotImplemented
    return function(*args, **kwargs)

