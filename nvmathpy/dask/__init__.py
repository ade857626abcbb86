"""nvmathpy operations on dask arrays: lazy results whose chunks run on nvmathpy plans.

Each function takes dask arrays (NumPy arrays count as one chunk) and returns a dask array;
nothing is computed until asked (``.compute()``, ``dask.compute``, a distributed client).
Every chunk goes through an nvmathpy one-call function, whose module-level plan cache, in
each worker process, plans once per chunk shape and reuses the plan for later chunks and
tasks (:func:`plan_cache_stats` reports it; run it on workers with ``client.run``).

- :func:`matmul`: batched products with fused elementwise epilogues;
- the :mod:`numpy.fft` family (:func:`fft`, :func:`rfft`, :func:`fftn`, ...) along axes
  that are one chunk each;
- :func:`solve`: batched linear systems;
- :func:`qr` and :func:`lstsq`: tall-and-skinny QR (TSQR) and least squares over
  row-chunked matrices.

Importing this module needs dask (``pip install 'nvmathpy[dask]'``).
"""

from __future__ import annotations

from ._common import plan_cache_stats
from ._fft import (
    fft, fft2, fftn, hfft, ifft, ifft2, ifftn, ihfft, irfft, irfft2, irfftn, rfft, rfft2, rfftn,
)  # fmt: skip
from ._matmul import ELEMENTWISE_EPILOGUES, matmul
from ._solvers import lstsq, qr, solve

__all__ = [
    "matmul", "ELEMENTWISE_EPILOGUES", "solve", "qr", "lstsq", "plan_cache_stats",
    "fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
    "fftn", "ifftn", "rfftn", "irfftn",
]  # fmt: skip
