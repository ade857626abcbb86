"""Tiny plain products: the direct calls of the CPU engine's ``"dot"`` candidate.

A product with at most :data:`~._layout.TINY_FLOPS` multiply-adds, no epilogue, ``alpha = 1``
and no ``c`` costs less than the Python around it, so its plan (and :func:`.matmul_plan.matmul`,
which skips the plan) makes one call and nothing else:

- float32/float64 matrices, and complex64/complex128 ones of at most ``16**3`` multiply-adds
  each (2-D or batched, any strides and broadcast batches): the compiled kernel of
  :mod:`.cpu._tiny_c` (from its first use, once built: until then, and where it cannot be
  built, the NumPy calls below). NumPy spends most of such a call in the ufunc
  machinery and in one BLAS call per matrix, each packing its operands: ``bench_matmul.py
  --only tiny`` shows the difference;
- otherwise, 1-D/2-D operands: ``a.dot(b)``;
- a batched ``a`` times a 1-D/2-D ``b``: one ``dot`` of ``a`` seen as ``(batch * m, k)``
  (a copy if ``a`` is not C-contiguous), its result reshaped: one BLAS call instead of one
  per matrix;
- any other batch or broadcast: ``numpy.matmul(order="C")`` (one BLAS call per matrix is the
  cheapest library call for a true batch of tiny matrices; ``einsum`` and a broadcast
  multiply-sum take 2-5 times as long; ``order`` keeps the result C-contiguous, as
  ``numpy.matmul`` would not for F-ordered operands).

The results are fresh C-contiguous, writeable arrays of ``numpy.matmul``'s shape and dtype,
with its values up to rounding (the one-``dot`` route's is a reshaped view of the array
``dot`` returned, which nothing else refers to). Operands are NumPy arrays of one dtype;
shapes that do not match raise NumPy's ``ValueError``.
"""

from __future__ import annotations

import functools
import math
from typing import Callable

import numpy as np

from ._layout import TINY_FLOPS
from .cpu._tiny_c import COMPLEX_TINY, TINY_EXTENSION

_matmul = np.matmul
#: The compiled kernel's ``matmul(a, b)`` once loaded (:func:`compiled_matmul`).
_compiled: Callable[[np.ndarray, np.ndarray], object] | None = None
#: Its ``bias_relu(d, bias, relu)`` once loaded (:func:`compiled_bias_relu`).
_bias_relu: Callable[[np.ndarray, np.ndarray | None, bool], object] | None = None

__all__ = ["BIAS_RELU_EPILOGUES", "batch_of_tiny", "compiled_bias_relu", "compiled_matmul", "direct_call",
           "per_matrix_bound", "tiny_bias_relu", "tiny_flops", "tiny_product"]


def compiled_matmul() -> Callable[[np.ndarray, np.ndarray], object] | None:
    """The compiled tiny kernel (``NotImplemented`` for operands it does not take), or ``None``
    while it is built (the first call starts the build) and where it cannot be built."""
    global _compiled
    if _compiled is None and (module := TINY_EXTENSION.get()) is not None:
        _compiled = module.matmul
    return _compiled


def compiled_bias_relu() -> Callable[[np.ndarray, np.ndarray | None, bool], object] | None:
    """The compiled kernel's ``bias_relu(d, bias, relu)`` (:mod:`.cpu._tiny_c`: ``d + bias``,
    then ``maximum(., 0)``, in place on a product of its ``matmul``), or ``None`` where
    :func:`compiled_matmul` is."""
    global _bias_relu
    if _bias_relu is None and compiled_matmul() is not None:
        _bias_relu = TINY_EXTENSION.get().bias_relu
    return _bias_relu


#: The built-in epilogues the compiled kernel's ``bias_relu`` applies: ``(bias input or None, relu)``.
BIAS_RELU_EPILOGUES = {"bias": ("bias", False), "relu": (None, True), "relu_bias": ("bias", True)}


def tiny_bias_relu(a: np.ndarray, b: np.ndarray, epilogue: object, inputs: object) -> np.ndarray | None:
    """``epilogue(a @ b)`` for one of :data:`BIAS_RELU_EPILOGUES` (a string) as its plan computes
    it on a tiny product (:func:`tiny_product`, then the kernel's ``bias_relu`` in place), or
    ``None`` where that plan's call is not this one: another epilogue, a product
    :func:`tiny_product` does not take (not tiny, nor a batch of tiny matrices), not the compiled
    kernel's, operands of fewer than two dimensions, ``inputs`` other than the epilogue's bias as
    one C-contiguous value per column in the operands' dtype (the caller then takes the planned
    route, which also reports what is wrong). ``a`` and ``b`` are NumPy arrays of one dtype."""
    if type(epilogue) is not str or epilogue not in BIAS_RELU_EPILOGUES or a.ndim < 2 or b.ndim < 2 or (
            bias_relu := _bias_relu or compiled_bias_relu()) is None:
        return None
    name, relu = BIAS_RELU_EPILOGUES[epilogue]
    if name is None:
        bias = None
        if inputs is not None:
            return None
    elif (type(inputs) is not dict or len(inputs) != 1 or type(bias := inputs.get(name)) is not np.ndarray
          or bias.dtype is not a.dtype or not bias.flags.c_contiguous or not bias.ndim
          or bias.shape[-1] != b.shape[-1]):
        return None
    try:
        product = tiny_product(a, b)
    except ValueError:  # shapes that do not match: the planned route's error
        return None
    if product is None or bias_relu(product, bias, relu) is NotImplemented:
        return None
    return product


def tiny_flops(a: np.ndarray, b: np.ndarray) -> int:
    """``m * k * n`` times the batch size of ``a @ b`` (``k`` read from ``a``) where a few
    attribute reads tell it, else ``TINY_FLOPS + 1`` (batches of different ranks, 0-d operands).

    Broadcasting batch axes count as the larger of each pair, an upper bound where one of them
    is 0. Examples: ``(4, 8, 8) @ (8, 8)`` and ``(4, 8, 8) @ (4, 8, 8)`` are 2048 each.
    """
    nda, ndb = a.ndim, b.ndim
    if nda == 0 or ndb == 0:
        return TINY_FLOPS + 1
    if ndb <= 2:
        return a.size * b.shape[1] if ndb == 2 else a.size
    if nda <= 2:
        return b.size * a.shape[0] if nda == 2 else b.size
    batch_a, batch_b = a.shape[:-2], b.shape[:-2]
    if batch_a == batch_b:
        return a.size * b.shape[-1]
    if len(batch_a) == len(batch_b):
        return math.prod(map(max, batch_a, batch_b)) * a.shape[-2] * a.shape[-1] * b.shape[-1]
    return TINY_FLOPS + 1


def tiny_product(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """``a @ b`` as the ``"dot"`` candidate computes it, or ``None`` when :func:`tiny_flops`
    is above :data:`~._layout.TINY_FLOPS` and :func:`batch_of_tiny` does not take it
    (``ValueError`` when the shapes do not match).

    This runs before every one-call product that is not 2-D times 2-D: the common cases are
    tested inline. A batched ``a`` that is not C-contiguous is copied to one that is by its reshape.
    """
    ndb = b.ndim
    if ndb > 2:  # a.size * b.size bounds the multiply-adds (batch * m * k * n * k; 0 when k = 0)
        if a.size * b.size > TINY_FLOPS and (a.size * b.shape[2] if a.ndim == 3 == ndb and len(a) == len(b)
                                             else tiny_flops(a, b)) > TINY_FLOPS:
            return batch_of_tiny(a, b)
        if (kernel := _compiled or compiled_matmul()) is not None and (result := kernel(a, b)) is not NotImplemented:
            return result
        return np.matmul(a, b, order="C")
    if ndb == 0 or (a.size * b.shape[1] if ndb == 2 else a.size) > TINY_FLOPS:
        return batch_of_tiny(a, b) if ndb == 2 and a.ndim > 2 else None
    if (kernel := _compiled or compiled_matmul()) is not None and (result := kernel(a, b)) is not NotImplemented:
        return result
    nda = a.ndim
    if nda < 3:
        return a.dot(b) if nda else None
    shape = a.shape
    k = shape[-1]  # a's K: a K of b's that differs makes dot raise
    return a.reshape(-1, k).dot(b).reshape(shape[:-1] + b.shape[1:]) if k else np.matmul(a, b, order="C")


def batch_of_tiny(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """``a @ b`` by the compiled kernel where it is a batch of products each within
    :data:`~._layout.TINY_FLOPS` (more of them than that bound takes in all), else ``None``.

    NumPy makes one BLAS call per matrix of such a batch, each packing its operands; the
    kernel does the batch in one loop (releasing the GIL for it)."""
    if (a.ndim < 2 or b.ndim < 2 or a.shape[-2] * a.shape[-1] * b.shape[-1] > per_matrix_bound(a.dtype)
            or (kernel := _compiled or compiled_matmul()) is None):
        return None
    result = kernel(a, b)
    return None if result is NotImplemented else result


def per_matrix_bound(dtype: np.dtype) -> int:
    """The most multiply-adds per matrix of ``dtype`` that :func:`batch_of_tiny` gives the
    compiled kernel (complex matrices: :data:`.cpu._tiny_c.COMPLEX_TINY`)."""
    return COMPLEX_TINY if dtype.kind == "c" else TINY_FLOPS


def direct_call(a: np.ndarray, b: np.ndarray) -> Callable[[], np.ndarray]:
    """The zero-argument call a plan binds for a tiny ``a @ b``: :func:`tiny_product`'s call,
    with a C-contiguous batched ``a`` reshaped once (a view: the call reads its current values).
    The compiled kernel is bound where one trial call shows it takes these operands (their
    dtype, layout and alignment are the plan's for good)."""
    kernel = _compiled or compiled_matmul()
    if kernel is not None and kernel(a, b) is not NotImplemented:
        return functools.partial(kernel, a, b)
    if a.ndim < 3 > b.ndim:
        return functools.partial(a.dot, b)
    k = a.shape[-1]
    if b.ndim > 2 or k == 0:  # C-contiguous operands give a C-contiguous result without order=
        if a.flags.c_contiguous and b.flags.c_contiguous:
            return functools.partial(_matmul, a, b)
        return lambda: _matmul(a, b, order="C")
    if not a.flags.c_contiguous:
        return functools.partial(tiny_product, a, b)
    a2, shape = a.reshape(-1, k), a.shape[:-1] + b.shape[1:]
    return lambda: a2.dot(b).reshape(shape)
