"""Batched matrix products with fused epilogues over dask arrays.

``matmul(a, b)`` is one ``blockwise`` over the result's blocks: batch axes and the rows of
``a`` / columns of ``b`` may be chunked freely; a chunked inner axis ``K`` is not
concatenated: the task adds up the products of its K-blocks through nvmathpy's ``c``/``beta``
and fuses the epilogue into the last one, so the activation sees the whole sum.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidOperandError, InvalidOptionError
from ..execution import ExecutionCPU
from ._common import as_dask, batch_index, broadcast_batches, da, empty_meta

__all__ = ["matmul", "ELEMENTWISE_EPILOGUES"]


def _elementwise_epilogues() -> dict[str, tuple[str, ...]]:
    """Built-in epilogues with one result and no aux outputs, with their inputs (``bias`` at most)."""
    from ..linalg.epilogues import DEFINITIONS

    return {name: d.inputs for name, d in DEFINITIONS.items() if not d.aux_names and set(d.inputs) <= {"bias"}}


#: The epilogues :func:`matmul` takes (their inputs: ``("bias",)`` or none).
ELEMENTWISE_EPILOGUES: dict[str, tuple[str, ...]] = _elementwise_epilogues()


def _product_blocks(a_blocks: Any, b_blocks: Any, bias: Any, *, epilogue: str | None, threads: int | None) -> np.ndarray:
    """One result block: the sum over the K-blocks of ``a_i @ b_i``, with the epilogue fused
    into the last product (earlier partial sums come in as ``c`` with ``beta=1``)."""
    from ..linalg import matmul as nv_matmul

    pairs = list(zip(a_blocks, b_blocks)) if isinstance(a_blocks, list) else [(a_blocks, b_blocks)]
    execution = ExecutionCPU(threads)
    partial = None
    for a_i, b_i in pairs[:-1]:
        partial = nv_matmul(a_i, b_i, partial, beta=None if partial is None else 1.0, execution=execution)
    a_last, b_last = pairs[-1]
    return nv_matmul(a_last, b_last, partial, beta=None if partial is None else 1.0, epilogue=epilogue,
                     epilogue_inputs=None if bias is None else {"bias": bias}, execution=execution)


def matmul(a: Any, b: Any, /, *, bias: Any = None, epilogue: str | None = None, num_threads: int | None = 1) -> "da.Array":
    """``epilogue(a @ b + bias)`` over dask arrays, block by block on nvmathpy's fused matmul.

    Parameters
    ----------
    a, b
        ``(..., M, K)`` and ``(..., K, N)`` dask (or NumPy) arrays of one dtype; batch axes
        broadcast (NumPy ``matmul`` rules) and may be chunked, as may ``M`` and ``N``.
        A chunked ``K`` is summed inside each task (no concatenation).
    bias
        Broadcastable to the result (``(N,)``: one value per column); required by the
        ``*_bias`` epilogues, refused by the others.
    epilogue
        ``None`` or one of :data:`ELEMENTWISE_EPILOGUES` (``"relu"``, ``"gelu"``, ``"bias"``,
        ``"relu_bias"``, ``"gelu_bias"``).
    num_threads
        BLAS threads per task (default 1: dask runs the chunks in parallel); ``None`` leaves
        the library's setting.

    Returns
    -------
    dask.array.Array
        The lazy result, chunked like ``a``'s batch and row axes and ``b``'s columns.

    Examples
    --------
    >>> import dask.array as da, numpy as np
    >>> from nvmathpy.dask import matmul
    >>> a = da.from_array(np.arange(24.0).reshape(4, 2, 3), chunks=(2, 2, 3))
    >>> c = matmul(a, np.ones((3, 2)), bias=np.array([-4.0, 0.0]), epilogue="relu_bias")
    >>> c.chunks
    ((2, 2), (2,), (2,))
    >>> c.compute(scheduler="sync")[1]
    array([[17., 21.],
           [26., 30.]])
    """
    a, b = as_dask(a, "a"), as_dask(b, "b")
    if a.ndim < 2 or b.ndim < 2:
        raise InvalidOperandError(f"matmul: a and b need at least 2 dimensions; got a.shape={a.shape}, b.shape={b.shape}")
    if a.shape[-1] != b.shape[-2]:
        raise InvalidOperandError(f"matmul: a.shape={a.shape} and b.shape={b.shape} do not match in K")
    if epilogue is not None and epilogue not in ELEMENTWISE_EPILOGUES:
        raise InvalidOptionError(
            f"matmul: epilogue={epilogue!r} is not allowed over dask arrays; allowed: None or {sorted(ELEMENTWISE_EPILOGUES)}"
        )
    needs_bias = epilogue is not None and "bias" in ELEMENTWISE_EPILOGUES[epilogue]
    if needs_bias != (bias is not None):
        raise InvalidOperandError(
            f"matmul: epilogue={epilogue!r} " + ("needs bias=" if needs_bias else "takes no bias; use a *_bias epilogue")
        )
    for name, x in (("b", b), ("bias", bias)):
        if x is not None and np.dtype(x.dtype) != a.dtype:
            raise InvalidOperandError(f"matmul: {name} has dtype {x.dtype} but a has {a.dtype}; convert them to one dtype")
    a, b, batch = broadcast_batches(a, b, 2, 2)
    nb = len(batch)
    i, j, k = nb, nb + 1, nb + 2
    out_ind = (*range(nb), i, j)
    args: list[Any] = [a, batch_index(nb, a.ndim, (i, k)), b, batch_index(nb, b.ndim, (k, j))]
    if bias is not None:
        result_shape = (*batch, a.shape[-2], b.shape[-1])
        bias = as_dask(bias, "bias")
        if bias.ndim > len(result_shape) or np.broadcast_shapes(bias.shape, result_shape) != result_shape:
            raise InvalidOperandError(f"matmul: bias of shape {bias.shape} does not broadcast to the result {result_shape}")
        bias_ind = out_ind[len(out_ind) - bias.ndim:]
        chunks = {**dict(zip(args[3], b.chunks)), **dict(zip(args[1], a.chunks))}  # follow the operands' chunks
        bias = da.broadcast_to(bias, result_shape[len(result_shape) - bias.ndim:])
        args += [bias.rechunk(tuple(chunks[index] for index in bias_ind)), bias_ind]
    else:
        args += [None, None]
    return da.blockwise(
        _product_blocks, out_ind, *args, concatenate=False, dtype=a.dtype, meta=empty_meta(len(out_ind), a.dtype),
        epilogue=epilogue, threads=num_threads, token="nvmathpy-matmul",
    )

