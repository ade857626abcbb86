"""Tiny batched GEMM and LU / Cholesky solvers, run under the CPU emulation, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import kernels_emulator as emu
from kernels_cases import needs_gxx
from nvmathpy.errors import InvalidOptionError
from nvmathpy.kernels.tiny_batched import tiny_gemm_kernel, tiny_solve_kernel

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
