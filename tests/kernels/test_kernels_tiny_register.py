"""The register-resident tiny LU solver, run under the CPU emulation, against float64 NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import kernels_emulator as emu
from kernels_cases import needs_gxx
from nvmathpy.errors import InvalidOptionError
from nvmathpy.kernels.tiny_register import register_solve_fits, tiny_register_solve_kernel

pytestmark = needs_gxx

TOL = {"float32": 5e-5, "float64": 1e-12}
CASES = [("float64", 1, 1), ("float64", 2, 3), ("float32", 3, 1), ("float64", 5, 2), ("float32", 7, 4),
         ("float64", 8, 1), ("float32", 8, 1), ("float32", 8, 4), ("float64", 7, 3), ("float64", 4, 4)]


def pivoting_systems(rng, batch, n, nrhs, dtype):
    """Well-conditioned systems that need row interchanges: a permuted diagonally heavy matrix
    whose leading entry is zero (where n > 1)."""
    a = rng.standard_normal((batch, n, n)) + 3 * np.sqrt(n) * np.eye(n)
    a = a[:, rng.permutation(n)]
    if n > 1:
        a[:, 0, 0] = 0.0
    return a.astype(dtype), rng.standard_normal((batch, n, nrhs)).astype(dtype)


def solve(kernel, a, b, epoch=1, flag=None):
    x = np.full_like(b, np.nan)
    info = np.full(a.shape[0], -1, dtype=np.int32)
    flag = np.zeros(1, np.uint64) if flag is None else flag
    emu.run_solve(kernel, a, b, x, info, flag=flag, epoch=epoch)
    return x, info, flag


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("dtype,n,nrhs", CASES)
def test_register_solve_matches_numpy(dtype, n, nrhs, trans_a):
    rng = np.random.default_rng(100 * n + nrhs)
    batch = 77  # not a multiple of the warp, nor of the systems per block
    a, b = pivoting_systems(rng, batch, n, nrhs, dtype)
    stored = np.ascontiguousarray(a.transpose(0, 2, 1)) if trans_a else a
    before = stored.copy(), b.copy()
    x, info, flag = solve(tiny_register_solve_kernel(dtype, n, nrhs, trans_a=trans_a), stored, b)
    ref = np.linalg.solve(a.astype(np.float64), b.astype(np.float64))
    assert (info == 0).all() and flag[0] == 0
    assert np.linalg.norm(x - ref) / np.linalg.norm(ref) < TOL[dtype]
    np.testing.assert_array_equal(stored, before[0])
    np.testing.assert_array_equal(b, before[1])


def test_register_solve_reads_and_writes_strided_stacks():
    """Leading dimensions and batch strides larger than the matrices (views into bigger arrays),
    and a broadcast right-hand side (batch stride 0)."""
    rng = np.random.default_rng(5)
    a_big, _ = pivoting_systems(rng, 41, 9, 1, np.float64)
    a = a_big[:, :6, :6]
    b_one = rng.standard_normal((1, 6, 2))
    b = np.broadcast_to(b_one, (41, 6, 2))
    x_big = np.full((41, 6, 5), np.nan)
    x = x_big[:, :, 1:3]
    info, flag = np.full(41, -1, np.int32), np.zeros(1, np.uint64)
    kernel = tiny_register_solve_kernel("float64", 6, 2)
    emu.run_solve(kernel, a, b, x, info, flag=flag, epoch=3)
    ref = np.linalg.solve(a, b)
    assert (info == 0).all()
    assert np.linalg.norm(x - ref) / np.linalg.norm(ref) < 1e-12
    assert np.isnan(x_big[:, :, [0, 3, 4]]).all()  # nothing written outside the view


def test_register_solve_reports_singular_systems_by_index_and_flag():
    rng = np.random.default_rng(1)
    a, b = pivoting_systems(rng, 70, 8, 1, np.float64)
    a[6, :, 3] = 0.0          # column 3 is zero: the pivot of column 3 (1-based 4) is zero
    a[45, 5] = a[45, 2]       # two equal rows: singular, found at a later pivot
    a[66] = 0.0               # all zero: the first pivot
    x, info, flag = solve(tiny_register_solve_kernel("float64", 8, 1), a, b, epoch=7)
    assert np.flatnonzero(info).tolist() == [6, 45, 66]
    assert info[6] == 4 and info[45] >= 1 and info[66] == 1
    assert int(flag[0]) >> 32 == 7 and 0xFFFFFFFF - (int(flag[0]) & 0xFFFFFFFF) == 6
    ok = info == 0
    ref = np.linalg.solve(a[ok], b[ok])
    assert np.linalg.norm(x[ok] - ref) / np.linalg.norm(ref) < 1e-12
    # a later launch with a newer epoch and no failures leaves the flag on the older epoch
    a_good, b_good = pivoting_systems(rng, 70, 8, 1, np.float64)
    _, info, flag = solve(tiny_register_solve_kernel("float64", 8, 1), a_good, b_good, epoch=8, flag=flag)
    assert (info == 0).all() and int(flag[0]) >> 32 == 7


def test_register_fit_rule_and_refusals():
    assert register_solve_fits("float64", 8, 1) and not register_solve_fits("float64", 8, 2)
    assert register_solve_fits("float32", 8, 4) and not register_solve_fits("float32", 8, 5)
    assert not register_solve_fits("float32", 12, 1) and not register_solve_fits("float64", 9, 1)
    with pytest.raises(InvalidOptionError, match="registers"):
        tiny_register_solve_kernel("float64", 9, 1)
    with pytest.raises(InvalidOptionError, match="dtype"):
        tiny_register_solve_kernel("complex64", 2, 1)
