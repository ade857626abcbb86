"""The pure arithmetic of the cuSOLVER engine (nvmathpy/linalg/solvers/cuda/_layout.py)
against hand-computed cases, and the operation mappings against NumPy/SciPy identities."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

from nvmathpy.cuda.bindings import cublas
from nvmathpy.linalg.solvers.cuda._layout import (
    ColumnMajor,
    SvdOutputs,
    cholesky_fill,
    column_major,
    copy_order,
    eigh_fill,
    getrs_operation,
    pointer_offsets,
    svd_outputs,
)


def element_strides(x: np.ndarray) -> tuple[int, ...]:
    return tuple(s // x.itemsize for s in x.strides)


@pytest.mark.parametrize("case, expected", [
    # F order: A itself, ld = rows
    (((5, 3), (1, 5)), ColumnMajor(5, 3, 5, False)),
    # C order: A^T (3 x 5), ld = 3
    (((5, 3), (3, 1)), ColumnMajor(3, 5, 3, True)),
    # a C matrix inside a wider one (columns 0..2 of a 5 x 8 array): A^T with ld 8
    (((5, 3), (8, 1)), ColumnMajor(3, 5, 8, True)),
    # an F matrix inside a taller one (rows 0..4 of an 11 x 3 F array): ld 11
    (((5, 3), (1, 11)), ColumnMajor(5, 3, 11, False)),
    # batched C: only the last two axes count
    (((4, 7, 7), (49, 7, 1)), ColumnMajor(7, 7, 7, True)),
    # a single column / single row: the library reads them column-major with ld = rows
    (((6, 1), (1, 1)), ColumnMajor(6, 1, 6, False)),
    (((1, 6), (6, 1)), ColumnMajor(1, 6, 1, False)),
    # 1 x 1
    (((1, 1), (1, 1)), ColumnMajor(1, 1, 1, False)),
])
def test_column_major_hand_computed(case, expected):
    assert column_major(*case) == expected


@pytest.mark.parametrize("case", [((5, 3), (2, 10)), ((5, 3), (6, 2)), ((5, 5), (1, 3)), ((5, 5), (3, 1))])
def test_column_major_refuses_what_needs_a_copy(case):
    """every other element, overlapping columns, or ld < rows: no column-major reading exists"""
    assert column_major(*case) is None


def test_column_major_of_c_input_needs_a_copy_for_qr():
    assert column_major((5, 3), (3, 1), allow_transpose=False) is None
    assert column_major((5, 3), (1, 5), allow_transpose=False) == ColumnMajor(5, 3, 5, False)


@pytest.mark.parametrize("make", [
    lambda: np.arange(35.0).reshape(7, 5),                                   # C
    lambda: np.asfortranarray(np.arange(35.0).reshape(7, 5)),               # F
    lambda: np.arange(35.0).reshape(7, 5).T,                                # transposed C
    lambda: np.arange(105.0).reshape(3, 7, 5),                              # batched C
    lambda: np.swapaxes(np.arange(105.0).reshape(3, 5, 7), -1, -2),         # batched, each matrix F
    lambda: np.arange(88.0).reshape(8, 11)[1:6, 2:5],                       # padded C (ld 11)
    lambda: np.asfortranarray(np.arange(88.0).reshape(8, 11))[1:6, 2:5],    # padded F (ld 8)
])
def test_column_major_reads_the_matrix_numpy_holds(make):
    """The column-major matrix the library would read at the array's address, rebuilt from
    (rows, cols, ld), is A (or A^T when ``transposed``)."""
    x = make()
    view = column_major(x.shape, element_strides(x))
    assert view is not None
    first = x[(0,) * (x.ndim - 2)]
    read = np.lib.stride_tricks.as_strided(first, (view.rows, view.cols), (8, 8 * view.ld))
    np.testing.assert_array_equal(read, first.T if view.transposed else first)


def test_pointer_offsets():
    assert pointer_offsets(4, 8 * 8, 8).tolist() == [0, 512, 1024, 1536]
    assert pointer_offsets(3, 5 * 2, 16).tolist() == [0, 160, 320]
    assert pointer_offsets(0, 9, 4).tolist() == []
    assert pointer_offsets(2, 9, 4).dtype == np.uint64


def test_copy_order():
    assert [copy_order(m, n, True) for m, n in ((7, 3), (3, 7), (4, 4))] == ["F", "C", "F"]
    assert copy_order(3, 7) == "F"


def test_operation_and_fill_constants_are_the_headers():
    assert (cublas.Operation.N, cublas.Operation.T, cublas.Operation.C) == (0, 1, 2)
    assert (cublas.FillMode.LOWER, cublas.FillMode.UPPER) == (0, 1)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("transposed", [False, True])
def test_getrs_operation_solves_the_requested_system(dtype, trans, transposed):
    """Factor M (A, or A^T as the library sees a C-ordered A), solve with the mapped operation,
    compare with op(A) x = b."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 6)).astype(dtype)
    b = rng.standard_normal((6, 2)).astype(dtype)
    if dtype == np.complex128:
        a = a + 1j * rng.standard_normal((6, 6))
        b = b + 1j * rng.standard_normal((6, 2))
    m = a.T if transposed else a
    operation, conjugate = getrs_operation(trans, transposed, np.dtype(dtype).kind == "c")
    factors = sla.lu_factor(m)
    x = sla.lu_solve(factors, b.conj() if conjugate else b, trans=operation)
    x = x.conj() if conjugate else x
    op = {0: a, 1: a.T, 2: a.conj().T}[trans]
    np.testing.assert_allclose(op @ x, b, atol=1e-12)


def test_getrs_operation_hand_computed():
    assert getrs_operation(0, False, False) == (0, False)
    assert getrs_operation(1, False, True) == (1, False)
    assert getrs_operation(0, True, True) == (1, False)
    assert getrs_operation(1, True, True) == (0, False)
    assert getrs_operation(2, True, False) == (0, False)  # real: A^H = A^T
    assert getrs_operation(2, True, True) == (0, True)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transposed", [False, True])
def test_cholesky_fill_factors_and_solves(dtype, lower, transposed):
    """The triangle named for M holds the caller's triangle of A, and the conjugation flag
    turns M's solve into A's."""
    rng = np.random.default_rng(5)
    g = rng.standard_normal((5, 5)) + (1j * rng.standard_normal((5, 5)) if dtype == np.complex128 else 0)
    a = (g @ g.conj().T + 5 * np.eye(5)).astype(dtype)
    fill, conjugate = cholesky_fill(lower, transposed, np.dtype(dtype).kind == "c")
    m = a.T if transposed else a
    # only the caller's triangle of A is valid: poison the other one and read M's fill triangle
    poisoned = np.tril(a) + np.triu(np.full_like(a, np.nan), 1) if lower else np.triu(a) + np.tril(
        np.full_like(a, np.nan), -1)
    mp = poisoned.T if transposed else poisoned
    c = sla.cholesky(m, lower=fill == 0)
    triangle = np.tril(mp) if fill == 0 else np.triu(mp)
    assert np.isfinite(triangle).all(), "the fill triangle of M lies in the caller's triangle of A"
    b = rng.standard_normal(5).astype(dtype)
    x = sla.cho_solve((c, fill == 0), b.conj() if conjugate else b)
    x = x.conj() if conjugate else x
    np.testing.assert_allclose(a @ x, b, atol=1e-12)


def test_eigh_fill_conjugates_vectors_of_the_transposed_problem():
    rng = np.random.default_rng(7)
    g = rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4))
    a = g + g.conj().T
    fill, conjugate = eigh_fill(True, True, True)
    assert (fill, conjugate) == (1, True)
    w, v = np.linalg.eigh(a.T, UPLO="U" if fill else "L")
    v = v.conj() if conjugate else v
    np.testing.assert_allclose(a @ v, v * w, atol=1e-12)
    assert eigh_fill(False, False, True) == (1, False)
    assert eigh_fill(True, True, False) == (1, False)


@pytest.mark.parametrize("m, n, transposed, full, expected", [
    (7, 3, False, False, SvdOutputs(7, 3, 3, 3, "u")),
    (7, 3, False, True, SvdOutputs(7, 7, 3, 3, "u")),
    (3, 7, True, False, SvdOutputs(7, 3, 3, 3, "vt")),
    (3, 7, True, True, SvdOutputs(7, 7, 3, 3, "vt")),
    (4, 4, False, True, SvdOutputs(4, 4, 4, 4, "u")),
])
def test_svd_outputs_hand_computed(m, n, transposed, full, expected):
    assert svd_outputs(m, n, transposed, full) == expected


@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_svd_of_the_transpose_reads_a_factors_without_copies(full, dtype):
    """For a wide A, gesvd of the tall M = A^T; A's U is M's V^H buffer read row-major and A's
    Vh is M's U buffer read row-major."""
    rng = np.random.default_rng(11)
    a = rng.standard_normal((3, 7)) + (1j * rng.standard_normal((3, 7)) if dtype == np.complex128 else 0)
    out = svd_outputs(3, 7, True, full)
    u_m, s, vt_m = np.linalg.svd(a.T, full_matrices=full)
    assert u_m.shape == (out.u_rows, out.u_cols) and vt_m.shape == (out.vt_rows, out.vt_cols)
    # the column-major buffers, as cuSOLVER leaves them, read as C arrays of the reversed shapes
    u_buffer = np.asfortranarray(u_m).ravel(order="K").reshape(out.u_cols, out.u_rows)
    vt_buffer = np.asfortranarray(vt_m).ravel(order="K").reshape(out.vt_cols, out.vt_rows)
    u_a, vh_a = vt_buffer, u_buffer
    np.testing.assert_allclose((u_a[:, :3] * s) @ vh_a[:3], a, atol=1e-12)
