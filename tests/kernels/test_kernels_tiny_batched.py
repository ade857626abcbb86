"""Tiny batched GEMM and LU / Cholesky solvers, run under the CPU emulation, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import kernels_emulator as emu
from kernels_cases import needs_gxx
from nvmathpy.errors import InvalidOptionError
from nvmathpy.kernels.tiny_batched import (tiny_factor_kernel, tiny_factored_solve_kernel, tiny_gemm_kernel,
                                          tiny_solve_kernel)

pytestmark = needs_gxx

TOL = {"float32": 5e-5, "float64": 1e-12}


def systems(rng, batch, n, nrhs, dtype, spd):
    a = rng.standard_normal((batch, n, n))
    a = a @ a.transpose(0, 2, 1) + n * np.eye(n) if spd else a + 2 * np.sqrt(n) * np.eye(n)
    return a.astype(dtype), rng.standard_normal((batch, n, nrhs)).astype(dtype)


@pytest.mark.parametrize("method", ["lu", "cholesky"])
@pytest.mark.parametrize("dtype,n,nrhs", [("float64", 8, 1), ("float32", 8, 3), ("float64", 5, 2),
                                          ("float32", 32, 1), ("float64", 1, 1)])
def test_solve_matches_numpy(method, dtype, n, nrhs):
    rng = np.random.default_rng(n * 10 + nrhs)
    batch = 37  # not a multiple of the problems per block
    a, b = systems(rng, batch, n, nrhs, dtype, spd=method == "cholesky")
    if method == "cholesky":  # only the lower triangle is read
        a = np.tril(a) + np.triu(rng.standard_normal((batch, n, n)), 1).astype(dtype)
    a_before, b_before = a.copy(), b.copy()
    x = np.full_like(b, np.nan)
    info = np.full(batch, -1, dtype=np.int32)
    emu.run_solve(tiny_solve_kernel(dtype, n, nrhs, method=method), a, b, x, info)
    full = np.tril(a) + np.tril(a, -1).transpose(0, 2, 1) if method == "cholesky" else a
    ref = np.linalg.solve(full.astype(np.float64), b.astype(np.float64))
    assert (info == 0).all()
    assert np.linalg.norm(x - ref) / np.linalg.norm(ref) < TOL[dtype]
    np.testing.assert_array_equal(a, a_before)
    np.testing.assert_array_equal(b, b_before)


def test_lu_reports_the_singular_problems_by_index():
    rng = np.random.default_rng(1)
    a, b = systems(rng, 40, 8, 2, np.float64, spd=False)
    a[6, :, 3] = 0.0          # column 3 is zero: the pivot of column 3 (1-based 4) is zero
    a[21, 5] = a[21, 2]       # two equal rows: singular, detected at the last pivot
    x = np.zeros_like(b)
    info = np.full(40, -1, dtype=np.int32)
    emu.run_solve(tiny_solve_kernel("float64", 8, 2), a, b, x, info)
    assert np.flatnonzero(info).tolist() == [6, 21]
    assert info[6] == 4 and info[21] >= 1
    ok = info == 0
    ref = np.linalg.solve(a[ok], b[ok])
    assert np.linalg.norm(x[ok] - ref) / np.linalg.norm(ref) < 1e-12


def test_cholesky_reports_the_non_positive_definite_problem():
    rng = np.random.default_rng(2)
    a, b = systems(rng, 19, 6, 1, np.float32, spd=True)
    a[11, 2, 2] = -50.0
    x = np.zeros_like(b)
    info = np.full(19, -1, dtype=np.int32)
    emu.run_solve(tiny_solve_kernel("float32", 6, 1, method="cholesky"), a, b, x, info)
    assert np.flatnonzero(info).tolist() == [11] and info[11] == 3


@pytest.mark.parametrize("dtype,m,n,k,trans_a,trans_b,with_c", [
    ("float64", 8, 8, 8, False, False, True), ("float32", 5, 7, 3, True, False, False),
    ("float64", 32, 17, 29, False, True, True), ("float32", 1, 32, 9, True, True, False)])
def test_tiny_gemm_matches_numpy(dtype, m, n, k, trans_a, trans_b, with_c):
    rng = np.random.default_rng(m + n + k)
    batch = 23
    a = rng.standard_normal((batch, k, m) if trans_a else (batch, m, k)).astype(dtype)
    b = rng.standard_normal((batch, n, k) if trans_b else (batch, k, n)).astype(dtype)
    c = rng.standard_normal((batch, m, n)).astype(dtype) if with_c else None
    d = np.full((batch, m, n), np.nan, dtype=dtype)
    emu.run_tiny_gemm(tiny_gemm_kernel(dtype, m, n, k, trans_a=trans_a, trans_b=trans_b, with_c=with_c),
                      a, b, d, alpha=0.5, beta=2.0, c=c)
    av = a.transpose(0, 2, 1) if trans_a else a
    bv = b.transpose(0, 2, 1) if trans_b else b
    ref = 0.5 * av.astype(np.float64) @ bv.astype(np.float64) + (2.0 * c if with_c else 0.0)
    assert np.linalg.norm(d - ref) / np.linalg.norm(ref) < TOL[dtype] * np.sqrt(k)


@pytest.mark.parametrize("call,message", [
    (lambda: tiny_solve_kernel("float64", 33, 1), "n must be between 1 and 32"),
    (lambda: tiny_solve_kernel("float64", 8, 0), "nrhs must be between 1 and 64"),
    (lambda: tiny_solve_kernel("float16", 8, 1), "float32 or float64, got 'float16'"),
    (lambda: tiny_solve_kernel("float64", 8, 1, method="qr"), "'lu' or 'cholesky', got 'qr'"),
    (lambda: tiny_gemm_kernel("float32", 8, 40, 8), "n must be between 1 and 32 .*, got 40"),
])
def test_bad_options_are_named(call, message):
    with pytest.raises(InvalidOptionError, match=message):
        call()


@pytest.mark.parametrize("method", ["lu", "cholesky"])
def test_solve_reads_a_transposed_stack(method):
    rng = np.random.default_rng(7)
    a, b = systems(rng, 21, 7, 2, np.float64, spd=method == "cholesky")
    stored = np.ascontiguousarray(a.transpose(0, 2, 1))  # each matrix column-major
    x = np.full_like(b, np.nan)
    info = np.full(21, -1, dtype=np.int32)
    emu.run_solve(tiny_solve_kernel("float64", 7, 2, method=method, trans_a=True), stored, b, x, info)
    assert (info == 0).all()
    ref = np.linalg.solve(a, b)
    assert np.linalg.norm(x - ref) / np.linalg.norm(ref) < 1e-12


@pytest.mark.parametrize("epilogue", ["bias", "relu", "gelu", "relu_bias", "gelu_bias"])
def test_tiny_gemm_epilogues(epilogue):
    from nvmathpy.kernels.launch import pack_arguments

    rng = np.random.default_rng(3)
    batch, m, n, k = 13, 5, 6, 4
    a, b = rng.standard_normal((batch, m, k)), rng.standard_normal((batch, k, n))
    bias = rng.standard_normal(n)  # one value per column, broadcast over rows and batch
    d = np.full((batch, m, n), np.nan)
    kernel = tiny_gemm_kernel("float64", m, n, k, epilogue=epilogue)
    values = {("batch", None): batch, ("alpha", None): 1.5}
    for name, array in (("a", a), ("b", b), ("d", d)):
        values.update(emu._matrix_values(name, array))
    if epilogue.endswith("bias"):
        values.update({("bias", None): bias.ctypes.data, ("bias_batch_stride", None): 0,
                       ("bias_row_stride", None): 0, ("bias_col_stride", None): 1})
    emu.launch(kernel.source, kernel.name, *kernel.launch_dims(batch), pack_arguments(kernel.params, values))
    x = 1.5 * a @ b + (bias if epilogue.endswith("bias") else 0)
    if epilogue.startswith("relu"):
        x = np.maximum(x, 0)
    elif epilogue.startswith("gelu"):
        x = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    assert np.linalg.norm(d - x) / np.linalg.norm(x) < 1e-13


def test_bad_gemm_epilogue_is_named():
    with pytest.raises(InvalidOptionError, match="got 'silu'"):
        tiny_gemm_kernel("float32", 4, 4, 4, epilogue="silu")


def _launch(kernel, batch, values):
    from nvmathpy.kernels.launch import pack_arguments

    emu.launch(kernel.source, kernel.name, *kernel.launch_dims(batch), pack_arguments(kernel.params, values))


def _ref3(name, array):
    """A C-contiguous (batch, rows, cols) stack: ``ld`` is the row stride (a column-major matrix is
    stored as its transpose, element ``(r, j)`` at ``j * ld + r``)."""
    step = array.dtype.itemsize
    return {(name, None): array.ctypes.data, (f"ld{name}", None): array.strides[1] // step,
            (f"stride_{name}", None): array.strides[0] // step}


@pytest.mark.parametrize("dtype,n,nrhs,column_major", [("float64", 7, 3, True), ("float32", 16, 1, False),
                                                       ("float64", 1, 2, True), ("float64", 29, 5, False)])
def test_lu_factor_matches_lapack_and_solves_both_ways(dtype, n, nrhs, column_major):
    import scipy.linalg as sla

    rng = np.random.default_rng(n)
    batch = 19
    a, b = systems(rng, batch, n, nrhs, dtype, spd=False)
    a = a + 0.9 * np.tril(rng.standard_normal((batch, n, n)), -1).astype(dtype)  # pivoting matters
    stored = a.transpose(0, 2, 1).copy() if column_major else a.copy()
    piv = np.zeros((batch, n), np.int32)
    info = np.full(batch, -1, np.int32)
    _launch(tiny_factor_kernel(dtype, n, trans_a=column_major), batch,
            {**_ref3("a", stored), ("piv", None): piv.ctypes.data, ("info", None): info.ctypes.data,
             ("batch", None): batch})
    assert (info == 0).all()
    lu = stored.transpose(0, 2, 1) if column_major else stored
    for i in (0, batch - 1):
        ref_lu, ref_piv = sla.lu_factor(a[i].astype(np.float64))
        np.testing.assert_array_equal(piv[i] - 1, ref_piv)
        assert np.linalg.norm(lu[i] - ref_lu) / np.linalg.norm(ref_lu) < TOL[dtype] * n
    for transpose in (False, True):
        x = b.transpose(0, 2, 1).copy() if column_major else b.copy()  # solved in place
        _launch(tiny_factored_solve_kernel(dtype, n, nrhs, transpose=transpose, trans_a=column_major,
                                           trans_x=column_major), batch,
                {**_ref3("a", stored), ("piv", None): piv.ctypes.data, **_ref3("x", x),
                 ("batch", None): batch})
        got = x.transpose(0, 2, 1) if column_major else x
        op = a.transpose(0, 2, 1) if transpose else a
        ref = np.linalg.solve(op.astype(np.float64), b.astype(np.float64))
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < TOL[dtype] * n


@pytest.mark.parametrize("column_major", [False, True])
def test_cholesky_factor_and_solve(column_major):
    rng = np.random.default_rng(5)
    batch, n, nrhs = 23, 9, 2
    a, b = systems(rng, batch, n, nrhs, np.float64, spd=True)
    a[4, 3, 3] = -1.0  # not positive definite at column 4
    stored = a.transpose(0, 2, 1).copy() if column_major else a.copy()
    upper_before = np.triu(stored if not column_major else stored.transpose(0, 2, 1), 1)
    info = np.full(batch, -1, np.int32)
    _launch(tiny_factor_kernel("float64", n, method="cholesky", trans_a=column_major), batch,
            {**_ref3("a", stored), ("info", None): info.ctypes.data, ("batch", None): batch})
    assert np.flatnonzero(info).tolist() == [4] and info[4] == 4
    factor = stored.transpose(0, 2, 1) if column_major else stored
    np.testing.assert_array_equal(np.triu(factor, 1), upper_before)  # the other triangle is untouched
    ok = info == 0
    np.testing.assert_allclose(np.tril(factor[ok]), np.linalg.cholesky(a[ok]), rtol=0, atol=1e-12)
    x = b.transpose(0, 2, 1).copy() if column_major else b.copy()
    _launch(tiny_factored_solve_kernel("float64", n, nrhs, method="cholesky", trans_a=column_major,
                                       trans_x=column_major), batch,
            {**_ref3("a", stored), **_ref3("x", x), ("batch", None): batch})
    got = (x.transpose(0, 2, 1) if column_major else x)[ok]
    ref = np.linalg.solve(a[ok], b[ok])
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-12
