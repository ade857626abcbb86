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

from typing import Any

import numpy as np

from ._driver import transform, wrap_input

__all__ = [
    "fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
    "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift",
]  # fmt: skip

def _one(n: Any) -> Any:
    return None if n is None else (n,)


def fft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None, out: Any = None) -> Any:
    """1-D discrete Fourier transform (as :func:`numpy.fft.fft`).

    Examples
    --------
    >>> fft([1.0, 0.0, 0.0, 0.0]).tolist()
    [(1+0j), (1+0j), (1+0j), (1+0j)]
    """
    return transform(a, kind="c2c", direction="forward", s=_one(n), axes=(axis,), norm=norm, out=out)


def ifft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None, out: Any = None) -> Any:
    """1-D inverse discrete Fourier transform (as :func:`numpy.fft.ifft`)."""
    return transform(a, kind="c2c", direction="inverse", s=_one(n), axes=(axis,), norm=norm, out=out)


def fft2(a: Any, s: Any = None, axes: Any = (-2, -1), norm: str | None = None, out: Any = None) -> Any:
    """2-D discrete Fourier transform (as :func:`numpy.fft.fft2`)."""
    return transform(a, kind="c2c", direction="forward", s=s, axes=axes, norm=norm, out=out)


def ifft2(a: Any, s: Any = None, axes: Any = (-2, -1), norm: str | None = None, out: Any = None) -> Any:
    """2-D inverse discrete Fourier transform (as :func:`numpy.fft.ifft2`)."""
    return transform(a, kind="c2c", direction="inverse", s=s, axes=axes, norm=norm, out=out)


def fftn(a: Any, s: Any = None, axes: Any = None, norm: str | None = None, out: Any = None) -> Any:
    """N-D discrete Fourier transform (as :func:`numpy.fft.fftn`)."""
    return transform(a, kind="c2c", direction="forward", s=s, axes=axes, norm=norm, out=out)


def ifftn(a: Any, s: Any = None, axes: Any = None, norm: str | None = None, out: Any = None) -> Any:
    """N-D inverse discrete Fourier transform (as :func:`numpy.fft.ifftn`)."""
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
    return transform(a, kind="r2c", direction="forward", s=s, axes=axes, norm=norm, out=out)


def irfft2(a: Any, s: Any = None, axes: Any = (-2, -1), norm: str | None = None, out: Any = None) -> Any:
    """Inverse of :func:`rfft2` (as :func:`numpy.fft.irfft2`)."""
    return _half_like(a, transform(a, kind="c2r", direction="inverse", s=s, axes=axes, norm=norm, out=out), out,
                      _count_axes(a, s, axes))


def rfftn(a: Any, s: Any = None, axes: Any = None, norm: str | None = None, out: Any = None) -> Any:
    """N-D transform of real input (as :func:`numpy.fft.rfftn`)."""
    return transform(a, kind="r2c", direction="forward", s=s, axes=axes, norm=norm, out=out)


def irfftn(a: Any, s: Any = None, axes: Any = None, norm: str | None = None, out: Any = None) -> Any:
    """Inverse of :func:`rfftn` (as :func:`numpy.fft.irfftn`)."""
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
    if (out is None and axes == 1 and isinstance(a, np.ndarray) and a.dtype == np.float16
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
