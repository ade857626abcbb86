"""Dense solvers over dask arrays: batched :func:`solve`, and tall-and-skinny :func:`qr` /
:func:`lstsq` (TSQR) with nvmathpy kernels in every block.

:func:`solve` is one ``blockwise`` over the batch chunks (the matrix axes are made single
chunks). :func:`qr` is the one-level TSQR: each row block ``A_i = Q_i R_i``; the stacked
``R_i`` are factored once more, ``[R_1; ...; R_p] = Q' R``; and ``Q = diag(Q_i) Q'`` block by
block. :func:`lstsq` runs the same reduction without forming ``Q``: each block contributes
``R_i`` and ``Q_i^H b_i``, and ``R x = Q'^H [Q_i^H b_i]`` is solved in one task.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidOperandError
from ..execution import ExecutionCPU
from ._common import as_dask, batch_index, broadcast_batches, da, empty_meta
from ._matmul import matmul

__all__ = ["solve", "qr", "lstsq"]


def _solve_block(a: np.ndarray, b: np.ndarray, *, threads: int | None) -> np.ndarray:
    from ..linalg import solve as nv_solve

    return nv_solve(a, b, execution=ExecutionCPU(threads))


def solve(a: Any, b: Any, /, *, num_threads: int | None = 1) -> "da.Array":
    """Solve ``a @ x = b`` for a batch of matrices held in dask arrays (NumPy 2 rules).

    Parameters
    ----------
    a
        ``(..., n, n)``; the batch axes may be chunked (the matrix axes are rechunked to one
        chunk each).
    b
        ``(n,)`` (one right-hand side for every matrix) or ``(..., n, k)``; batch axes
        broadcast against ``a``'s.
    num_threads
        LAPACK threads per task (default 1).

    Returns
    -------
    dask.array.Array
        ``x``, chunked like the batch. A singular matrix raises
        :class:`numpy.linalg.LinAlgError` when computed.

    Examples
    --------
    >>> import dask.array as da, numpy as np
    >>> from nvmathpy.dask import solve
    >>> a = da.from_array(np.array([[[3.0, 1.0], [1.0, 2.0]]] * 4), chunks=(2, 2, 2))
    >>> solve(a, np.array([9.0, 8.0])).compute(scheduler="sync")
    array([[2., 3.],
           [2., 3.],
           [2., 3.],
           [2., 3.]])
    """
    a, b = as_dask(a, "a"), as_dask(b, "b")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise InvalidOperandError(f"solve: a must be (..., n, n) square matrices, got shape {a.shape}")
    n, vector = a.shape[-1], b.ndim == 1
    if b.ndim == 0 or b.shape[0 if vector else -2] != n:
        raise InvalidOperandError(f"solve: b has shape {b.shape}; with a of shape {a.shape} it must be ({n},) or (..., {n}, k)")
    core = 1 if vector else 2
    a = a.rechunk({a.ndim - 2: -1, a.ndim - 1: -1})
    b = b.rechunk({axis: -1 for axis in range(b.ndim - core, b.ndim)})
    a, b, batch = broadcast_batches(a, b, 2, core)
    nb = len(batch)
    i, j, c = nb, nb + 1, nb + 2
    out_ind = (*range(nb), j) if vector else (*range(nb), j, c)
    dtype = _solve_block(np.eye(1, dtype=a.dtype), np.ones((1,) * core, b.dtype), threads=1).dtype
    return da.blockwise(
        _solve_block, out_ind, a, batch_index(nb, a.ndim, (i, j)), b, batch_index(nb, b.ndim, (i, c)[:core]),
        concatenate=True, dtype=dtype, meta=empty_meta(len(out_ind), dtype), threads=num_threads,
        token="nvmathpy-solve",
    )


# -- tall-and-skinny QR ----------------------------------------------------------------------------


def _block_qr(block: np.ndarray, threads: int | None) -> tuple[np.ndarray, np.ndarray]:
    from ..linalg import qr as nv_qr

    return tuple(nv_qr(block, execution=ExecutionCPU(threads)))


def _stacked_qr(rs: list[np.ndarray], threads: int | None) -> tuple[np.ndarray, np.ndarray]:
    return _block_qr(np.concatenate(rs), threads)


def _block_q(q1: np.ndarray, q2: np.ndarray, index: int, threads: int | None) -> np.ndarray:
    from ..linalg import matmul as nv_matmul

    n = q2.shape[1]
    return nv_matmul(q1, q2[index * n:(index + 1) * n], execution=ExecutionCPU(threads))


def _tall_chunks(rows: tuple[int, ...], n: int) -> tuple[int, ...]:
    """Row chunks of at least ``n`` rows each: too-short chunks are merged into the next one
    (the last into the previous one); chunks that are tall enough are kept."""
    merged: list[int] = []
    pending = 0
    for size in rows:
        pending += size
        if pending >= n:
            merged.append(pending)
            pending = 0
    if pending:
        if merged:
            merged[-1] += pending
        else:
            merged.append(pending)
    return tuple(merged)


def _tall(a: "da.Array", where: str) -> "da.Array":
    """``a`` checked to be a tall matrix and rechunked for TSQR (one column chunk, every row
    chunk at least ``n`` rows)."""
    if a.ndim != 2 or a.shape[0] < a.shape[1]:
        raise InvalidOperandError(f"{where}: a must be a tall (m >= n) 2-D dask array for TSQR, got shape {a.shape}")
    return a.rechunk({0: _tall_chunks(a.chunks[0], a.shape[1]), 1: -1})


def qr(a: Any, /, *, num_threads: int | None = 1) -> tuple["da.Array", "da.Array"]:
    """Reduced QR of a tall-and-skinny dask matrix by TSQR, with nvmathpy kernels per block.

    Parameters
    ----------
    a
        ``(m, n)``, ``m >= n``, a dask array chunked along the rows (the columns are made one
        chunk, and row chunks shorter than ``n`` are merged into a neighbour).
    num_threads
        LAPACK/BLAS threads per task (default 1).

    Returns
    -------
    q, r : dask.array.Array
        ``q`` ``(m, n)`` with orthonormal columns, chunked like ``a``'s rows; ``r`` ``(n, n)``
        upper triangular; ``a = q @ r``.

    Examples
    --------
    >>> import dask.array as da, numpy as np
    >>> from nvmathpy.dask import qr
    >>> a = da.random.default_rng(0).standard_normal((12, 3), chunks=(4, 3))
    >>> q, r = qr(a)
    >>> q.chunks, r.shape
    (((4, 4, 4), (3,)), (3, 3))
    >>> q_, r_, a_ = (x.compute(scheduler="sync") for x in (q, r, a))
    >>> bool(np.allclose(q_ @ r_, a_) and np.allclose(q_.T @ q_, np.eye(3)))
    True
    """
    from dask import delayed

    a = _tall(as_dask(a, "a"), "qr")
    n = a.shape[1]
    dtype = _block_qr(np.ones((1, 1), a.dtype), 1)[0].dtype
    block_qr = delayed(_block_qr, nout=2, pure=True)
    firsts = [block_qr(block, num_threads) for block in a.to_delayed()[:, 0]]
    q2, r = delayed(_stacked_qr, nout=2, pure=True)([r_i for _, r_i in firsts], num_threads)
    q_blocks = [
        da.from_delayed(delayed(_block_q, pure=True)(q1, q2, index, num_threads), shape=(rows, n), dtype=dtype,
                        meta=empty_meta(2, dtype))
        for index, ((q1, _), rows) in enumerate(zip(firsts, a.chunks[0]))
    ]
    return da.concatenate(q_blocks), da.from_delayed(r, shape=(n, n), dtype=dtype, meta=empty_meta(2, dtype))


# -- least squares -------------------------------------------------------------------------------


def _block_r_and_qtb(block: np.ndarray, rhs: np.ndarray, threads: int | None) -> tuple[np.ndarray, np.ndarray]:
    """``R_i`` and ``Q_i^H b_i`` of one row block (``Q_i`` is used here and dropped)."""
    from ..linalg import matmul as nv_matmul

    q, r = _block_qr(block, threads)
    return r, nv_matmul(q.conj().T, rhs, execution=ExecutionCPU(threads))


def _solve_stacked(rs: list[np.ndarray], qtbs: list[np.ndarray], m: int, threads: int | None) -> tuple:
    """From the blocks' ``R_i`` and ``Q_i^H b_i``: ``x`` from ``R x = Q'^H [Q_i^H b_i]``, the
    rank of ``R`` (NumPy's default tolerance) and its singular values."""
    from ..linalg import matmul as nv_matmul
    from ..linalg import solve_triangular, svdvals

    q2, r = _stacked_qr(rs, threads)
    qtb = nv_matmul(q2.conj().T, np.concatenate(qtbs), execution=ExecutionCPU(threads))
    s = svdvals(r)
    tolerance = s.max(initial=0.0) * max(m, r.shape[1]) * np.finfo(s.dtype).eps
    return solve_triangular(r, qtb), np.asarray(np.count_nonzero(s > tolerance)), s


def lstsq(a: Any, b: Any, /, *, num_threads: int | None = 1) -> tuple["da.Array", "da.Array", "da.Array", "da.Array"]:
    """Least squares ``min ||a x - b||`` for a tall-and-skinny dask ``a``, by TSQR.

    ``Q`` is never formed: each row block contributes ``R_i`` and ``Q_i^H b_i``, and one task
    factors the stacked ``R_i`` and solves the small triangular system.

    Parameters
    ----------
    a
        ``(m, n)``, ``m >= n``, chunked along the rows (see :func:`qr`).
    b
        ``(m,)`` or ``(m, k)``; its rows are rechunked like ``a``'s.
    num_threads
        Threads per task (default 1).

    Returns
    -------
    x, residuals, rank, s : dask.array.Array
        As :func:`dask.array.linalg.lstsq` returns them: the solution, the squared residual
        norms per column (always computed), the rank of ``R`` and its singular values.

    Examples
    --------
    >>> import dask.array as da, numpy as np
    >>> from nvmathpy.dask import lstsq
    >>> t = np.linspace(0.0, 1.0, 9)
    >>> a = da.from_array(np.stack([np.ones(9), t], axis=1), chunks=(3, 2))
    >>> x, res, rank, s = lstsq(a, da.from_array(1.0 + 2.0 * t, chunks=3))
    >>> np.round(x.compute(scheduler="sync"), 12), int(rank.compute(scheduler="sync"))
    (array([1., 2.]), 2)
    """
    from dask import delayed

    a, b = as_dask(a, "a"), as_dask(b, "b")
    if b.ndim not in (1, 2) or a.ndim != 2 or b.shape[0] != a.shape[0]:
        raise InvalidOperandError(f"lstsq: b has shape {b.shape}; with a of shape {a.shape} it must be (m,) or (m, k)")
    dtype = np.linalg.lstsq(np.ones((1, 1), a.dtype), np.ones(1, b.dtype), rcond=None)[0].dtype
    a = _tall(a.astype(dtype), "lstsq")
    b2 = (b if b.ndim == 2 else b[:, None]).astype(dtype).rechunk({0: a.chunks[0], 1: -1})
    (m, n), k = a.shape, b2.shape[1]
    blocks = [delayed(_block_r_and_qtb, nout=2, pure=True)(a_i, b_i, num_threads)
              for a_i, b_i in zip(a.to_delayed()[:, 0], b2.to_delayed()[:, 0])]
    parts = delayed(_solve_stacked, nout=3, pure=True)([r for r, _ in blocks], [c for _, c in blocks], m, num_threads)
    x = da.from_delayed(parts[0], shape=(n, k), dtype=dtype, meta=empty_meta(2, dtype))
    rank = da.from_delayed(parts[1], shape=(), dtype=np.intp, meta=empty_meta(0, np.intp))
    real = np.finfo(dtype).dtype
    s = da.from_delayed(parts[2], shape=(n,), dtype=real, meta=empty_meta(1, real))
    residuals = (abs(b2 - matmul(a, x, num_threads=num_threads)) ** 2).sum(axis=0)
    return (x[:, 0] if b.ndim == 1 else x), residuals, rank, s
