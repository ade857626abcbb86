"""numpy.fft-compatible one-call functions, each running a cached, heuristically planned FFT.

Signatures, defaults, result dtypes (NumPy 2: float32 in, complex64 out) and shapes follow
:mod:`numpy.fft`. A repeated call with the same problem reuses its plan from the cache
(:func:`nvmathpy.fft._driver.plan_cache`) instead of planning again. NumPy arrays, array-likes
and PyTorch CPU tensors are accepted; results come back in the caller's package.
Transforms use every core (``ExecutionCPU()``); the plan's heuristic picks the thread count.

Examples
--------
>>> import numpy as np
>>> x = np.random.default_rng(1).standard_normal(12)
>>> bool(np.allclose(rfft(x), np.fft.rfft(x)))
True
>>> bool(np.allclose(irfft(rfft(x), n=12), x))
True
"""

from __future__ import annotations

import operator
import warnings
from typing import Any

import numpy as np

from ..errors import InvalidOperandError
from ._driver import transform, wrap_input

__all__ = [
    "fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
    "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift",
]  # fmt: skip

def _one(n: Any) -> Any:
    """``n`` as NumPy takes it: ``None``, or an integer >= 1 (non-integers raise ``TypeError``,
    smaller values ``ValueError``). Booleans are refused (``TypeError``), also where NumPy's
    ``rfft``/``ihfft`` take ``True`` as 1 (its other transforms refuse it)."""
    if n is None:
        return None
    if isinstance(n, (bool, np.bool_)):
        raise TypeError(f"n must be an integer, not a boolean (booleans are refused): n={n!r}")
    n = operator.index(n)
    if n < 1:
        raise InvalidOperandError(f"Invalid number of FFT data points ({n}) specified; n must be >= 1")
    return (n,)


def _n_d(s: Any, axes: Any) -> None:
    """NumPy's checks of an N-D transform's ``s`` and ``axes``: sequences (not single integers)
    of integers (``TypeError`` otherwise); and NumPy 2's ``DeprecationWarning`` where ``s`` is
    given without ``axes`` or holds ``None``, pointing at the caller of the public function."""
    for name, value in (("s", s), ("axes", axes)):
        if value is None:
            continue
        if isinstance(value, (int, np.integer)) or not hasattr(value, "__iter__"):
            raise TypeError(f"{name} must be a sequence of integers, got {value!r}")
        for entry in value:
            if not (name == "s" and entry is None):
                operator.index(entry)
    if s is None:
        return
    if axes is None:
        warnings.warn(_S_WITHOUT_AXES, DeprecationWarning, stacklevel=3)
    if any(entry is None for entry in s):
        warnings.warn(_NONE_IN_S, DeprecationWarning, stacklevel=3)


_S_WITHOUT_AXES = (
    "`axes` should not be `None` if `s` is not `None` (Deprecated in NumPy 2.0). In a future version of NumPy, "
    "this will raise an error and `s[i]` will correspond to the size along the transformed axis specified by "
    "`axes[i]`. To retain current behaviour, pass a sequence [0, ..., k-1] to `axes` for an array of dimension k."
)
_NONE_IN_S = (
    "Passing an array containing `None` values to `s` is deprecated in NumPy 2.0 and will raise an error in a "
    "future version of NumPy. To use the default behaviour of the corresponding 1-D transform, pass the value "
    "matching the default for its `n` parameter. To use the default behaviour for every axis, the `s` argument "
    "can be omitted."
)


def _repeats(axes: Any) -> bool:
    """Whether ``axes`` names an axis twice (NumPy then transforms along it once per mention)."""
    if axes is None:
        return False
    entries = [operator.index(v) for v in axes]
    return len(set(entries)) != len(entries) and all(isinstance(v, int) for v in entries)


def _one_axis_at_a_time(a: Any, s: Any, axes: Any, norm: Any, kind: str, inverse: bool) -> Any:
    """NumPy's N-D transform as its sequence of 1-D transforms (for axes named more than once):
    complex transforms over the axes last to first; a real-to-complex one over the last axis
    first, a complex-to-real one over it last."""
    a = wrap_input(a).array
    axes = [operator.index(v) for v in axes]
    if s is None:
        s = [a.shape[ax] for ax in axes]
        if kind == "c2r":
            s[-1] = 2 * (a.shape[axes[-1]] - 1)
    s = [a.shape[ax] if v is None or v == -1 else v for v, ax in zip(s, axes)]
    complex_step = ifft if inverse else fft
    if kind == "r2c":
        a = rfft(a, s[-1], axes[-1], norm)
        for n, ax in zip(s[-2::-1], axes[-2::-1]):
            a = fft(a, n, ax, norm)
        return a
    if kind == "c2r":
        for n, ax in zip(s[:-1], axes[:-1]):
            a = ifft(a, n, ax, norm)
        return irfft(a, s[-1], axes[-1], norm)
    for n, ax in zip(s[::-1], axes[::-1]):
        a = complex_step(a, n, ax, norm)
    return a


#: The complex dtype NumPy's ``fft`` computes real input in (others: complex128).
_COMPLEX_OF = {"e": np.complex64, "f": np.complex64, "g": np.clongdouble}


def fft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None, out: Any = None) -> Any:
    """1-D discrete Fourier transform (as :func:`numpy.fft.fft`).

    A real NumPy array (or list) is converted to complex and transformed by the complex
    transform, as :func:`numpy.fft.fft` does (its first ``n // 2 + 1`` entries equal
    :func:`rfft`'s to rounding, not bit for bit: NumPy's do not either). Where SciPy's
    pocketfft runs the transform (the small band's default), the result is NumPy's bit for
    bit in double precision (NumPy's kernel is pocketfft too).

    Examples
    --------
    >>> fft([1.0, 0.0, 0.0, 0.0]).tolist()
    [(1+0j), (1+0j), (1+0j), (1+0j)]
    """
    if type(a) is not np.ndarray and isinstance(a, (list, tuple)):
        a = np.asarray(a)
    if type(a) is np.ndarray and a.dtype.kind in "biuf":
        a = a.astype(_COMPLEX_OF.get(a.dtype.char, np.complex128))
    return transform(a, kind="c2c", direction="forward", s=_one(n), axes=(axis,), norm=norm, out=out)


def ifft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None, out: Any = None) -> Any:
    """1-D inverse discrete Fourier transform (as :func:`numpy.fft.ifft`)."""
    return transform(a, kind="c2c", direction="inverse", s=_one(n), axes=(axis,), norm=norm, out=out)


def fft2(a: Any, s: Any = None, axes: Any = (-2, -1), norm: str | None = None, out: Any = None) -> Any:
    """2-D discrete Fourier transform (as :func:`numpy.fft.fft2`)."""
    _n_d(s, axes)
    if _repeats(axes) and out is None:
        return _one_axis_at_a_time(a, s, axes, norm, "c2c", False)
    return transform(a, kind="c2c", direction="forward", s=s, axes=axes, norm=norm, out=out)


def ifft2(a: Any, s: Any = None, axes: Any = (-2, -1), norm: str | None = None, out: Any = None) -> Any:
    """2-D inverse discrete Fourier transform (as :func:`numpy.fft.ifft2`)."""
    _n_d(s, axes)
    if _repeats(axes) and out is None:
        return _one_axis_at_a_time(a, s, axes, norm, "c2c", True)
    return transform(a, kind="c2c", direction="inverse", s=s, axes=axes, norm=norm, out=out)


def fftn(a: Any, s: Any = None, axes: Any = None, norm: str | None = None, out: Any = None) -> Any:
    """N-D discrete Fourier transform (as :func:`numpy.fft.fftn`)."""
    _n_d(s, axes)
    if _repeats(axes) and out is None:
        return _one_axis_at_a_time(a, s, axes, norm, "c2c", False)
    return transform(a, kind="c2c", direction="forward", s=s, axes=axes, norm=norm, out=out)


def ifftn(a: Any, s: Any = None, axes: Any = None, norm: str | None = None, out: Any = None) -> Any:
    """N-D inverse discrete Fourier transform (as :func:`numpy.fft.ifftn`)."""
    _n_d(s, axes)
    if _repeats(axes) and out is None:
        return _one_axis_at_a_time(a, s, axes, norm, "c2c", True)
    return transform(a, kind="c2c", direction="inverse", s=s, axes=axes, norm=norm, out=out)


def rfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None, out: Any = None) -> Any:
    """1-D transform of real input, non-negative frequencies only (as :func:`numpy.fft.rfft`)."""
    return transform(a, kind="r2c", direction="forward", s=_one(n), axes=(axis,), norm=norm, out=out)


def irfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None, out: Any = None) -> Any:
    """Inverse of :func:`rfft`: ``n`` real outputs, default ``2*(m-1)`` (as :func:`numpy.fft.irfft`)."""
    return _half_like(a, transform(a, kind="c2r", direction="inverse", s=_one(n), axes=(axis,), norm=norm, out=out),
                      out)


def rfft2(a: Any, s: Any = None, axes: Any = (-2, -1), norm: str | None = None, out: Any = None) -> Any:
    """2-D transform of real input (as :func:`numpy.fft.rfft2`)."""
    _n_d(s, axes)
    if _repeats(axes) and out is None:
        return _one_axis_at_a_time(a, s, axes, norm, "r2c", False)
    return transform(a, kind="r2c", direction="forward", s=s, axes=axes, norm=norm, out=out)


def irfft2(a: Any, s: Any = None, axes: Any = (-2, -1), norm: str | None = None, out: Any = None) -> Any:
    """Inverse of :func:`rfft2` (as :func:`numpy.fft.irfft2`)."""
    _n_d(s, axes)
    if _repeats(axes) and out is None:
        return _one_axis_at_a_time(a, s, axes, norm, "c2r", True)
    return _half_like(a, transform(a, kind="c2r", direction="inverse", s=s, axes=axes, norm=norm, out=out), out,
                      _count_axes(a, s, axes))


def rfftn(a: Any, s: Any = None, axes: Any = None, norm: str | None = None, out: Any = None) -> Any:
    """N-D transform of real input (as :func:`numpy.fft.rfftn`)."""
    _n_d(s, axes)
    if _repeats(axes) and out is None:
        return _one_axis_at_a_time(a, s, axes, norm, "r2c", False)
    return transform(a, kind="r2c", direction="forward", s=s, axes=axes, norm=norm, out=out)


def irfftn(a: Any, s: Any = None, axes: Any = None, norm: str | None = None, out: Any = None) -> Any:
    """Inverse of :func:`rfftn` (as :func:`numpy.fft.irfftn`)."""
    _n_d(s, axes)
    if _repeats(axes) and out is None:
        return _one_axis_at_a_time(a, s, axes, norm, "c2r", True)
    return _half_like(a, transform(a, kind="c2r", direction="inverse", s=s, axes=axes, norm=norm, out=out), out,
                      _count_axes(a, s, axes))


def hfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None, out: Any = None) -> Any:
    """Transform of a Hermitian-symmetric signal: real spectrum (as :func:`numpy.fft.hfft`).

    Examples
    --------
    >>> import numpy as np
    >>> a = np.array([1.0, 2.0 - 1j, 3.0])
    >>> bool(np.allclose(hfft(a), np.fft.hfft(a)))
    True
    """
    return _half_like(a, transform(a, kind="c2r", direction="forward", s=_one(n), axes=(axis,), norm=norm, out=out),
                      out)


def _half_like(a: Any, result: Any, out: Any, axes: int = 1) -> Any:
    """NumPy 2's answer for float16 input to a complex-to-real transform over one axis: float16
    (its last step, ``irfft``, keeps the input's precision; over more axes the complex
    transforms before it have made the data complex64, and the result is float32)."""
    if (out is None and axes == 1 and isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.dtype.itemsize == 2
            and isinstance(result, np.ndarray) and result.dtype == np.float32):
        return result.astype(np.float16)
    return result


def _count_axes(a: Any, s: Any, axes: Any) -> int:
    """How many axes an N-D transform of ``a`` runs over (NumPy's defaults)."""
    if axes is not None:
        return len(axes) if not isinstance(axes, (int, np.integer)) else 1
    if s is not None:
        return len(s) if not isinstance(s, (int, np.integer)) else 1
    return int(np.ndim(a))


def ihfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None, out: Any = None) -> Any:
    """Inverse of :func:`hfft` for real input (as :func:`numpy.fft.ihfft`)."""
    return transform(a, kind="r2c", direction="inverse", s=_one(n), axes=(axis,), norm=norm, out=out)


def fftfreq(n: int, d: float = 1.0, device: Any = None) -> np.ndarray:
    """Sample frequencies of an ``n``-point FFT (as :func:`numpy.fft.fftfreq`).

    Examples
    --------
    >>> fftfreq(4, d=0.5).tolist()
    [0.0, 0.5, -1.0, -0.5]
    """
    return np.fft.fftfreq(n, d, device=device)


def rfftfreq(n: int, d: float = 1.0, device: Any = None) -> np.ndarray:
    """Sample frequencies of an ``n``-point :func:`rfft` (as :func:`numpy.fft.rfftfreq`)."""
    return np.fft.rfftfreq(n, d, device=device)


def _shifted(fn: Any, x: Any, axes: Any) -> Any:
    if isinstance(x, np.ndarray):  # a shift moves elements: any dtype and byte order, as NumPy's
        return fn(x, axes=axes)
    op = wrap_input(x, "x")
    result = fn(op.array, axes=axes)
    if op.package == "torch":
        from ..operands import to_package

        return to_package(np.ascontiguousarray(result), op)
    return result


def fftshift(x: Any, axes: Any = None) -> Any:
    """Move the zero-frequency term to the centre (as :func:`numpy.fft.fftshift`).

    Examples
    --------
    >>> fftshift(fftfreq(4)).tolist()
    [-0.5, -0.25, 0.0, 0.25]
    """
    return _shifted(np.fft.fftshift, x, axes)


def ifftshift(x: Any, axes: Any = None) -> Any:
    """Undo :func:`fftshift` (as :func:`numpy.fft.ifftshift`)."""
    return _shifted(np.fft.ifftshift, x, axes)
