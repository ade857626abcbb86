"""The numpy.fft family over dask arrays: each chunk transformed by a cached nvmathpy FFT plan.

As :func:`dask.array.fft.fft_wrap` does, a transform runs only along axes that are a single
chunk (anything else raises, saying how to rechunk); the other axes keep their chunks, so a
batch of signals chunked along the batch axis becomes one task per chunk. The output shape
and dtype come from the same description the FFT plan uses, so nothing is computed before
asked.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..execution import ExecutionCPU
from ._common import as_dask, da, empty_meta, require_single_chunks

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
           "fftn", "ifftn", "rfftn", "irfftn"]

#: function name -> (kind, direction), as nvmathpy.fft.functions calls its driver.
_KINDS = {
    "fft": ("c2c", "forward"), "ifft": ("c2c", "inverse"), "rfft": ("r2c", "forward"),
    "irfft": ("c2r", "inverse"), "hfft": ("c2r", "forward"), "ihfft": ("r2c", "inverse"),
}  # fmt: skip


def _transform_block(x: np.ndarray, *, kind: str, direction: str, s: Any, axes: Any, norm: str,
                     threads: int | None) -> np.ndarray:
    from ..fft._driver import transform

    return transform(x, kind=kind, direction=direction, s=s, axes=axes, norm=norm, threads=threads)


def _lazy_transform(name: str, x: Any, s: Any, axes: Any, norm: Any, num_threads: int | None) -> "da.Array":
    from ..fft._driver import c2r_lengths
    from ..fft._layout import check_norm, describe

    x = as_dask(x, "x")
    ExecutionCPU(num_threads)  # validates num_threads
    kind, direction = _KINDS[name.rstrip("2n")]
    norm = check_norm(norm)
    if kind == "c2r":
        s, axes = c2r_lengths(x.shape, s, axes)
    layout = describe(x.shape, x.dtype, axes=axes, s=s, kind=kind, norm=norm)
    require_single_chunks(x, layout.axes, f"nvmathpy.dask.{name}")
    chunks = tuple((layout.out_shape[ax],) if ax in layout.axes else c for ax, c in enumerate(x.chunks))
    return x.map_blocks(
        _transform_block, kind=kind, direction=direction, s=None if s is None else tuple(s), axes=layout.axes,
        norm=norm, threads=num_threads, chunks=chunks, dtype=layout.out_dtype,
        meta=empty_meta(x.ndim, layout.out_dtype), token=f"nvmathpy-{name}",
    )


_DOC = """{summary} of a dask array (as :func:`numpy.fft.{name}`), lazily, chunk by chunk.

Parameters
----------
x
    A dask (or NumPy) array; every transformed axis must be a single chunk.
{size}
norm
    ``None``/``"backward"``, ``"ortho"`` or ``"forward"``.
num_threads
    Threads per task (default 1: dask runs the chunks in parallel).

Returns
-------
dask.array.Array
    The lazy transform; untransformed axes keep their chunks.

Examples
--------
>>> import dask.array as da, numpy as np
>>> from nvmathpy.dask import {name}
>>> x = da.random.default_rng(0).standard_normal((4, 10), chunks={chunks})
>>> y = {name}(x)
>>> y.chunks == ({out_chunks}) and bool(np.allclose(y.compute(scheduler="sync"), np.fft.{name}(x.compute())))
True
"""
#: The output length of a 10-point input along the last axis (for the examples).
_LENGTHS = {"fft": 10, "ifft": 10, "rfft": 6, "irfft": 18, "hfft": 18, "ihfft": 6}
_SIZE_1D = "n, axis\n    Transform length and axis, as in NumPy."
_SIZE_ND = "s, axes\n    Transform lengths and axes, as in NumPy."


def _one_d(name: str, summary: str) -> Callable[..., "da.Array"]:
    def function(x: Any, n: int | None = None, axis: int = -1, norm: str | None = None, *,
                 num_threads: int | None = 1) -> "da.Array":
        return _lazy_transform(name, x, None if n is None else (n,), (axis,), norm, num_threads)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = _DOC.format(summary=summary, name=name, size=_SIZE_1D, chunks="(2, 10)",
                                   out_chunks=f"(2, 2), ({_LENGTHS[name]},)")
    return function


def _n_d(name: str, summary: str, default_axes: Any) -> Callable[..., "da.Array"]:
    def function(x: Any, s: Any = None, axes: Any = default_axes, norm: str | None = None, *,
                 num_threads: int | None = 1) -> "da.Array":
        return _lazy_transform(name, x, s, axes, norm, num_threads)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = _DOC.format(summary=summary, name=name, size=_SIZE_ND, chunks="(4, 10)",
                                   out_chunks=f"(4,), ({_LENGTHS[name.rstrip('2n')]},)")
    return function


fft = _one_d("fft", "1-D discrete Fourier transform")
ifft = _one_d("ifft", "1-D inverse discrete Fourier transform")
rfft = _one_d("rfft", "1-D transform of real input")
irfft = _one_d("irfft", "Inverse of rfft")
hfft = _one_d("hfft", "Transform of a Hermitian-symmetric signal")
ihfft = _one_d("ihfft", "Inverse of hfft")
fft2 = _n_d("fft2", "2-D discrete Fourier transform", (-2, -1))
ifft2 = _n_d("ifft2", "2-D inverse discrete Fourier transform", (-2, -1))
rfft2 = _n_d("rfft2", "2-D transform of real input", (-2, -1))
irfft2 = _n_d("irfft2", "Inverse of rfft2", (-2, -1))
fftn = _n_d("fftn", "N-D discrete Fourier transform", None)
ifftn = _n_d("ifftn", "N-D inverse discrete Fourier transform", None)
rfftn = _n_d("rfftn", "N-D transform of real input", None)
irfftn = _n_d("irfftn", "Inverse of rfftn", None)
