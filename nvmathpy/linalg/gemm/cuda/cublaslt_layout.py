"""Mapping NumPy-rule matrix products onto cuBLASLt's column-major layouts, without copies.

cuBLASLt computes ``D = op(A) @ op(B)`` on column-major matrices. A row-major NumPy matrix
with strides ``(ld, 1)`` *is* its transpose in column-major order with leading dimension
``ld``, and an F-ordered one (strides ``(1, ld)``) is itself. So a NumPy product
``(..., M, K) @ (..., K, N)`` becomes one of two cuBLASLt problems:

* result written C-ordered: ``D^T (N x M) = op(B^T) (N x K) @ op(A^T) (K x M)``: the operands
  swap places, and a bias of one value per *column* of the NumPy result (shape ``(N,)``) is
  cuBLASLt's per-row bias;
* result written F-ordered: ``D (M x N) = op(A) @ op(B)``: a bias of one value per *row*
  (shape ``(M, 1)``) is cuBLASLt's per-row bias.

Each operand's ``op`` (N or T) follows from which of its two strides is 1. Batch dimensions
must collapse into one stride per operand (0 for a broadcast operand); when they cannot, or
when neither matrix stride is 1, the operand needs a copy, and :func:`lt_problem` says so.

Everything here is pure arithmetic on shapes and element strides, checked in CI against a
NumPy emulation of cuBLASLt's column-major semantics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

__all__ = ["LtMatrix", "LtProblem", "collapse_batch", "lt_problem", "emulate_lt_matmul"]


@dataclass(frozen=True)
class LtMatrix:
    """One cuBLASLt matrix layout (column-major) and the op applied to it.

    Attributes
    ----------
    rows, cols, ld
        The stored matrix as cuBLASLt sees it (column-major, before ``op``).
    trans
        ``True`` when cuBLASLt must apply ``T`` to it.
    batch_stride
        Elements between consecutive batch matrices (0 broadcasts one matrix).
    """

    rows: int
    cols: int
    ld: int
    trans: bool
    batch_stride: int


@dataclass(frozen=True)
class LtProblem:
    """A product in cuBLASLt terms: ``D = op(first) @ op(second)`` over ``batch`` matrices.

    ``swapped`` is ``True`` when ``first`` is the NumPy ``b`` and ``second`` the NumPy ``a``
    (C-ordered result). ``bias_per`` names which NumPy bias shape maps to cuBLASLt's bias
    vector: ``"col"`` for ``(N,)``, ``"row"`` for ``(M, 1)``.
    """

    m: int
    n: int
    k: int
    batch: int
    first: LtMatrix
    second: LtMatrix
    d: LtMatrix
    swapped: bool

    @property
    def bias_per(self) -> str:
        return "col" if self.swapped else "row"


def collapse_batch(shape: Sequence[int], strides: Sequence[int], batch_shape: Sequence[int]) -> int | None:
    """One element stride walking an operand's batch dimensions in C order, or ``None``.

    ``shape``/``strides`` are the operand's batch dimensions (element strides), right-aligned
    against the broadcast ``batch_shape``; missing or size-1 dimensions broadcast (stride 0).

    Examples
    --------
    >>> collapse_batch((2, 3), (30, 10), (2, 3))
    10
    >>> collapse_batch((), (), (4,))
    0
    >>> collapse_batch((3,), (10,), (2, 3)) is None   # repeats every 3: not one stride
    True
    """
    full = len(batch_shape)
    dims = [1] * (full - len(shape)) + list(shape)
    steps = [0] * (full - len(strides)) + list(strides)
    steps = [0 if d == 1 else s for d, s in zip(dims, steps)]
    total = 1
    for size in batch_shape:
        total *= size
    if total <= 1:
        return 0
    # the walk in C order must be i * stride for a single stride
    live = [(size, step) for size, step in zip(batch_shape, steps) if size > 1]
    if all(step == 0 for _, step in live):
        return 0
    stride = live[-1][1]
    expected = stride
    for size, step in reversed(live):
        if step != expected:
            return None
        expected = step * size
    return stride


def _layout(rows_np: int, cols_np: int, row_step: int, col_step: int, batch_stride: int) -> LtMatrix | None:
    """The column-major description of a NumPy ``rows_np x cols_np`` matrix (element steps).

    Returns the layout of the matrix *as NumPy sees it* mapped to column-major: an F-ordered
    matrix is itself (no transpose), a C-ordered one is stored as its transpose.
    """
    if row_step < 0 or col_step < 0:
        return None
    if rows_np == 1 and cols_np == 1:
        return LtMatrix(1, 1, 1, False, batch_stride)
    if row_step == 1 or rows_np == 1:  # F-ordered: column-major as it is
        ld = col_step if cols_np > 1 else rows_np
        return LtMatrix(rows_np, cols_np, ld, False, batch_stride) if ld >= rows_np else None
    if col_step == 1 or cols_np == 1:  # C-ordered: column-major storage of the transpose
        ld = row_step if rows_np > 1 else cols_np
        return LtMatrix(cols_np, rows_np, ld, True, batch_stride) if ld >= cols_np else None
    return None


def lt_problem(
    m: int,
    n: int,
    k: int,
    batch_shape: Sequence[int],
    a: tuple[Sequence[int], Sequence[int]],
    b: tuple[Sequence[int], Sequence[int]],
    *,
    result_order: str = "C",
) -> LtProblem | None:
    """Describe ``a @ b`` (NumPy rules) as one strided-batched cuBLASLt matmul, or ``None``
    when an operand must be copied first.

    Parameters
    ----------
    m, n, k
        The product's sizes: ``a`` is ``(..., m, k)``, ``b`` is ``(..., k, n)``.
    batch_shape
        The broadcast batch shape of the result.
    a, b
        Each operand's ``(shape, element strides)`` including its batch dimensions.
    result_order
        ``"C"``: the result is written C-ordered (contiguous ``(..., m, n)``); ``"F"``: each
        result matrix is F-ordered (used when the bias is per row).

    Examples
    --------
    >>> p = lt_problem(3, 5, 4, (), ((3, 4), (4, 1)), ((4, 5), (5, 1)))
    >>> p.swapped, p.first, p.second.trans
    (True, LtMatrix(rows=5, cols=4, ld=5, trans=False, batch_stride=0), False)
    """
    a_shape, a_strides = a
    b_shape, b_strides = b
    a_batch = collapse_batch(a_shape[:-2], a_strides[:-2], batch_shape)
    b_batch = collapse_batch(b_shape[:-2], b_strides[:-2], batch_shape)
    if a_batch is None or b_batch is None:
        return None
    batch = 1
    for size in batch_shape:
        batch *= size
    a_layout = _layout(m, k, a_strides[-2], a_strides[-1], a_batch)
    b_layout = _layout(k, n, b_strides[-2], b_strides[-1], b_batch)
    if a_layout is None or b_layout is None:
        return None
    if result_order == "C":
        # D^T (n x m) = B^T @ A^T. The column-major view of a C-ordered NumPy X is X^T, so the
        # stored matrices are used as they are when they are C-ordered (op N) and transposed
        # when F-ordered.
        first = _flip(b_layout)
        second = _flip(a_layout)
        d = LtMatrix(n, m, max(n, 1), False, m * n)
        return LtProblem(m, n, k, batch, first, second, d, True)
    if result_order == "F":
        d = LtMatrix(m, n, max(m, 1), False, m * n)
        return LtProblem(m, n, k, batch, a_layout, b_layout, d, False)
    raise ValueError(f"result_order must be 'C' or 'F', got {result_order!r}")


def _flip(layout: LtMatrix) -> LtMatrix:
    """The same storage used for the transposed matrix: only ``op`` changes."""
    return LtMatrix(layout.rows, layout.cols, layout.ld, not layout.trans, layout.batch_stride)


def emulate_lt_matmul(problem: LtProblem, first: "object", second: "object", batch: int | None = None) -> "object":
    """What cuBLASLt would compute for ``problem`` on flat buffers, in NumPy (for tests).

    ``first``/``second`` are 1-D arrays holding the stored matrices at their offsets (the
    operands' memory from their first element). Returns the ``D`` buffer, flat, column-major.
    """
    import numpy as np

    def view(buf, lay: LtMatrix, index: int):
        item = buf.itemsize
        base = buf[index * lay.batch_stride:]
        mat = np.lib.stride_tricks.as_strided(base, shape=(lay.rows, lay.cols), strides=(item, lay.ld * item))
        return mat.T if lay.trans else mat

    count = problem.batch if batch is None else batch
    d = np.zeros(problem.d.batch_stride * count, dtype=np.result_type(first, second))
    for index in range(count):
        product = view(first, problem.first, index) @ view(second, problem.second, index)
        target = view(d, problem.d, index)
        target[...] = product
    return d
