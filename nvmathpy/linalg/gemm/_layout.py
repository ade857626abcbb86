"""Shapes and layouts of matmul operands: NumPy ``matmul`` promotion and broadcasting rules,
and the layout class of each operand (which decides whether BLAS can take it without a copy).

Layout classes of an operand's last two axes (1-D operands are a single axis):

- ``"C"`` / ``"F"``: row- / column-major and contiguous;
- ``"C-ld"`` / ``"F-ld"``: row- / column-major with a leading dimension larger than the
  matrix (a slice of a wider array); BLAS takes these as they are;
- ``"strided"``: anything else (steps in both axes, negative strides): copied before BLAS.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import InvalidOperandError

__all__ = ["MatmulShape", "TINY_FLOPS", "analyse_shapes", "layout_class", "broadcast_check"]

#: Products with at most this many multiply-adds count as tiny: planned, they are the bound
#: ``ndarray.dot`` call (see :mod:`.cpu._engine`).
TINY_FLOPS = 64**3


@dataclass(frozen=True)
class MatmulShape:
    """The geometry of ``a @ b``.

    Attributes
    ----------
    m, n, k
        The matrix sizes (``m = 1`` for a 1-D ``a``, ``n = 1`` for a 1-D ``b``).
    batch
        The broadcast batch shape.
    result
        The result shape as ``numpy.matmul`` returns it (1-D axes dropped).
    """

    m: int
    n: int
    k: int
    batch: tuple[int, ...]
    result: tuple[int, ...]


def analyse_shapes(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> MatmulShape:
    """Apply NumPy's matmul rules to two shapes.

    Raises
    ------
    InvalidOperandError
        For 0-d operands, mismatched inner dimensions or batch shapes that do not broadcast
        (the message names both shapes).

    Examples
    --------
    >>> analyse_shapes((5, 1, 3, 4), (2, 4, 6))
    MatmulShape(m=3, n=6, k=4, batch=(5, 2), result=(5, 2, 3, 6))
    >>> analyse_shapes((4,), (4, 6)).result
    (6,)
    """
    if len(a_shape) == 0 or len(b_shape) == 0:
        raise InvalidOperandError(
            f"matmul: operands must have at least one dimension; got a.shape={a_shape}, b.shape={b_shape}"
        )
    m, ka = (1, a_shape[0]) if len(a_shape) == 1 else a_shape[-2:]
    kb, n = (b_shape[0], 1) if len(b_shape) == 1 else b_shape[-2:]
    if ka != kb:
        raise InvalidOperandError(
            f"matmul: inner dimensions differ: a.shape={a_shape} has K={ka}, b.shape={b_shape} has K={kb}"
        )
    batch = broadcast_check(a_shape[:-2], b_shape[:-2], f"matmul: batch dimensions of a.shape={a_shape} "
                            f"and b.shape={b_shape} do not broadcast")
    result = batch + ((m,) if len(a_shape) > 1 else ()) + ((n,) if len(b_shape) > 1 else ())
    return MatmulShape(m, n, ka, batch, result)


def broadcast_check(x: tuple[int, ...], y: tuple[int, ...], message: str) -> tuple[int, ...]:
    """The broadcast of two shapes, or :class:`InvalidOperandError` with ``message``."""
    out = []
    for i in range(1, max(len(x), len(y)) + 1):
        p = x[-i] if i <= len(x) else 1
        q = y[-i] if i <= len(y) else 1
        if p != q and 1 not in (p, q):
            raise InvalidOperandError(message)
        out.append(q if p == 1 else p)
    return tuple(reversed(out))


def layout_class(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> str:
    """The layout class (see the module docstring) of an operand's matrix axes.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.ones((6, 8), np.float32)
    >>> [layout_class(v.shape, v.strides, 4) for v in (x, x.T, x[:, :5], x[::2, ::2])]
    ['C', 'F', 'C-ld', 'strided']
    """
    if len(shape) == 1:
        return "C" if shape[0] <= 1 or strides[0] == itemsize else "strided"
    rows, cols = shape[-2:]
    s_row, s_col = strides[-2:]
    if (cols == 1 or s_col == itemsize) and (rows == 1 or (s_row >= cols * itemsize and s_row % itemsize == 0)):
        return "C" if rows == 1 or s_row == cols * itemsize else "C-ld"
    if (rows == 1 or s_row == itemsize) and (cols == 1 or (s_col >= rows * itemsize and s_col % itemsize == 0)):
        return "F" if cols == 1 or s_col == rows * itemsize else "F-ld"
    return "strided"
