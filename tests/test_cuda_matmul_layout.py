"""cuBLASLt layout arithmetic for NumPy-rule products, checked against a NumPy emulation of
cuBLASLt's column-major semantics (no GPU needed)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from nvmathpy.linalg.gemm.cuda.cublaslt_layout import (
    LtMatrix,
    collapse_batch,
    emulate_lt_matmul,
    lt_problem,
)


def _embedded(rng, shape, order, pad):
    """A random ``shape`` array inside a larger flat buffer: a C-ordered stack of matrices,
    each matrix C- or F-ordered with its leading dimension padded by ``pad``."""
    *batch, rows, cols = shape
    inner = (rows, cols + pad) if order == "C" else (cols, rows + pad)
    base = rng.standard_normal(int(np.prod(batch, dtype=int)) * inner[0] * inner[1] + 3)
    stack = base[3:].reshape(*batch, *inner)
    arr = stack[..., :rows, :cols] if order == "C" else np.swapaxes(stack[..., :cols, :rows], -1, -2)
    return arr, base


def _elem_strides(x):
    return tuple(s // x.itemsize for s in x.strides)


def _first_offset(arr, base):
    return (arr.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // base.itemsize


@given(
    m=st.integers(1, 7), n=st.integers(1, 7), k=st.integers(1, 7),
    batch=st.sampled_from([(), (3,), (2, 3)]),
    a_batched=st.booleans(), b_batched=st.booleans(),
    a_order=st.sampled_from("CF"), b_order=st.sampled_from("CF"), pad=st.integers(0, 2),
    result_order=st.sampled_from("CF"),
)
@settings(max_examples=200, deadline=None)
def test_layouts_reproduce_numpy_matmul(m, n, k, batch, a_batched, b_batched, a_order, b_order, pad, result_order):
    rng = np.random.default_rng(m * 100 + n * 10 + k)
    a_shape = (batch if a_batched else ()) + (m, k)
    b_shape = (batch if b_batched else ()) + (k, n)
    a, a_base = _embedded(rng, a_shape, a_order, pad)
    b, b_base = _embedded(rng, b_shape, b_order, pad)
    batch_shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    problem = lt_problem(m, n, k, batch_shape, (a.shape, _elem_strides(a)), (b.shape, _elem_strides(b)),
                         result_order=result_order)
    assert problem is not None  # stacks of C- or F-ordered matrices never need a copy
    expected = np.matmul(a, b)
    first, second = (b, a) if problem.swapped else (a, b)
    first_base = b_base if problem.swapped else a_base
    second_base = a_base if problem.swapped else b_base
    d = emulate_lt_matmul(problem, first_base[_first_offset(first, first_base):],
                          second_base[_first_offset(second, second_base):])
    count = max(1, int(np.prod(batch_shape)))
    if problem.swapped:  # D^T column-major (n x m) per batch == C-ordered (m, n)
        got = d.reshape(count, m, n)
    else:  # D column-major (m x n) per batch == F-ordered (m, n)
        got = d.reshape(count, n, m).transpose(0, 2, 1)
    np.testing.assert_allclose(got, expected.reshape(count, m, n), rtol=1e-12, atol=1e-12)
    for lay in (problem.first, problem.second, problem.d):
        assert lay.ld >= lay.rows


def test_hand_computed_cases():
    # C-ordered a (3x4) @ C-ordered b (4x5), C result: D^T(5x3) = B^T(5x4, stored, op N) @ A^T(4x3, op N)
    p = lt_problem(3, 5, 4, (), ((3, 4), (4, 1)), ((4, 5), (5, 1)))
    assert p.swapped and p.bias_per == "col"
    assert p.first == LtMatrix(5, 4, 5, False, 0) and p.second == LtMatrix(4, 3, 4, False, 0)
    assert p.d == LtMatrix(5, 3, 5, False, 15)
    # a given as the transpose of a C-ordered (4x3): F-ordered a with ld 3 -> op T in the swapped problem
    p = lt_problem(3, 5, 4, (), ((3, 4), (1, 3)), ((4, 5), (5, 1)))
    assert p.second == LtMatrix(3, 4, 3, True, 0)
    # F result (bias per row): D (3x5) = A (C-ordered -> stored transposed, op T) @ B (op T)
    p = lt_problem(3, 5, 4, (), ((3, 4), (4, 1)), ((4, 5), (5, 1)), result_order="F")
    assert not p.swapped and p.bias_per == "row"
    assert p.first == LtMatrix(4, 3, 4, True, 0) and p.second == LtMatrix(5, 4, 5, True, 0)
    # batched a (2, 3, 4) contiguous, broadcast b
    p = lt_problem(3, 5, 4, (2,), ((2, 3, 4), (12, 4, 1)), ((4, 5), (5, 1)))
    assert p.batch == 2 and p.second.batch_stride == 12 and p.first.batch_stride == 0
    # padded leading dimension (a slice of a wider array)
    p = lt_problem(3, 5, 4, (), ((3, 4), (7, 1)), ((4, 5), (5, 1)))
    assert p.second.ld == 7


def test_layouts_that_need_a_copy():
    # neither matrix stride is 1 (every other element)
    assert lt_problem(3, 5, 4, (), ((3, 4), (8, 2)), ((4, 5), (5, 1))) is None
    # batch dims that do not collapse into one stride
    assert lt_problem(3, 5, 4, (2, 3), ((3, 3, 4), (100, 12, 1)), ((4, 5), (5, 1))) is None
    # negative strides
    assert lt_problem(3, 5, 4, (), ((3, 4), (-4, 1)), ((4, 5), (5, 1))) is None


def test_collapse_batch():
    assert collapse_batch((2, 3), (30, 10), (2, 3)) == 10
    assert collapse_batch((1, 3), (0, 10), (1, 3)) == 10
    assert collapse_batch((2, 1), (7, 0), (2, 1)) == 7
    assert collapse_batch((2, 3), (40, 10), (2, 3)) is None
    assert collapse_batch((), (), ()) == 0
    assert collapse_batch((1,), (5,), (4,)) == 0
