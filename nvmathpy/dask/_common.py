"""What the nvmathpy.dask operations share: the dask import, operand intake, chunk checks,
batch broadcasting, and the per-process statistics of the plan caches the chunks run on.

Every task runs its chunk through an nvmathpy one-call function, and each of those keeps a
module-level plan cache in the process it runs in: a worker plans once per chunk shape and
reuses the plan for every later chunk and task of that shape. :func:`plan_cache_stats` reads
those caches (call it on the workers with ``client.run``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..errors import InvalidOperandError, MissingDependencyError

try:
    import dask.array as da
except ImportError as exc:  # pragma: no cover - exercised only without dask
    raise MissingDependencyError(
        "nvmathpy.dask needs dask: pip install 'nvmathpy[dask]' (or 'dask[array,distributed]')"
    ) from exc

__all__ = ["da", "as_dask", "require_single_chunks", "broadcast_batches", "batch_index", "plan_cache_stats",
           "empty_meta"]


def as_dask(x: Any, name: str) -> "da.Array":
    """``x`` as a dask array (NumPy arrays become one chunk); anything else is refused."""
    if isinstance(x, da.Array):
        return x
    if isinstance(x, np.ndarray):
        return da.from_array(x, chunks=x.shape or ())
    raise InvalidOperandError(
        f"{name}: expected a dask.array.Array or a numpy.ndarray, got {type(x).__module__}.{type(x).__qualname__}"
    )


def require_single_chunks(x: "da.Array", axes: Sequence[int], where: str, name: str = "x") -> None:
    """Raise, naming the axis and its chunks and saying how to rechunk, unless every axis in
    ``axes`` is one chunk."""
    for axis in axes:
        if len(x.chunks[axis]) != 1:
            raise InvalidOperandError(
                f"{where}: {name} must be a single chunk along axis {axis}, but its chunks there are "
                f"{x.chunks[axis]}; rechunk first, e.g. {name}.rechunk({{{axis}: -1}})"
            )


def broadcast_batches(a: "da.Array", b: "da.Array", a_core: int, b_core: int) -> tuple["da.Array", "da.Array", tuple]:
    """Broadcast the batch axes (all but the last ``a_core``/``b_core``) of two arrays to one
    shape when both have batch axes that differ; return them and the batch shape."""
    a_batch, b_batch = a.shape[: a.ndim - a_core], b.shape[: b.ndim - b_core]
    try:
        batch = np.broadcast_shapes(a_batch, b_batch)
    except ValueError:
        raise InvalidOperandError(
            f"the batch shapes {a_batch} (of {a.shape}) and {b_batch} (of {b.shape}) do not broadcast"
        ) from None
    if a_batch and b_batch and a_batch != b_batch:
        a = da.broadcast_to(a, batch + a.shape[a.ndim - a_core:])
        b = da.broadcast_to(b, batch + b.shape[b.ndim - b_core:])
    return a, b, tuple(batch)


def batch_index(nb: int, ndim: int, core: Sequence[int]) -> tuple[int, ...]:
    """The ``blockwise`` index of an operand with ``ndim`` axes, its last ones being ``core``,
    whose batch axes are the trailing ones of a ``nb``-axis batch (axes ``0 .. nb-1``)."""
    return (*range(nb - (ndim - len(core)), nb), *core)


def empty_meta(ndim: int, dtype: Any) -> np.ndarray:
    """The ``meta`` of a NumPy-backed dask result."""
    return np.empty((0,) * ndim, dtype)


def plan_cache_stats() -> dict[str, dict[str, int]]:
    """Hits and misses (misses = plans built) of the plan caches the chunk kernels use, in
    this process: ``{"matmul": {...}, "fft": {...}, "solvers": {...}}``.

    Examples
    --------
    >>> sorted(plan_cache_stats())
    ['fft', 'matmul', 'solvers']
    """
    from ..fft._driver import plan_cache as fft_cache
    from ..linalg.gemm.matmul_plan import plan_cache_info
    from ..linalg.solvers.functions import plan_cache as solver_cache

    matmul = plan_cache_info()
    return {
        "matmul": {"hits": matmul["hits"], "misses": matmul["misses"]},
        "fft": {"hits": fft_cache().hits, "misses": fft_cache().misses},
        "solvers": {"hits": solver_cache().hits, "misses": solver_cache().misses},
    }
