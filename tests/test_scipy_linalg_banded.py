"""nvmathpy.scipy.linalg's banded solvers (``solve_banded``, ``solveh_banded``,
``cholesky_banded``, ``cho_solve_banded``), ``ldl`` and ``solve``'s banded structures
(tridiagonal detected or assumed, ``assume_a='banded'``) against SciPy 1.17 and a float64
dense reference: every LAPACK dtype, odd and prime orders, bands with zero sub- or
superdiagonals, C/Fortran/strided operands, vector and matrix right-hand sides, batches,
``overwrite_*`` (the inputs kept, or overwritten as SciPy overwrites them, sharing memory
where SciPy's result does), empty inputs, SciPy's errors and warnings, ``check_finite``, and
the refusal of CUDA operands."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg as sla

import nvmathpy.scipy.linalg as nsl
from numerics import layouts, rand

DTYPES = (np.float32, np.float64, np.complex64, np.complex128)
TOL = {np.dtype(np.float32): 1e-4, np.dtype(np.complex64): 1e-4, np.dtype(np.float64): 1e-12,
       np.dtype(np.complex128): 1e-12}
ORDERS = (1, 2, 5, 13, 31)
BANDS = ((0, 0), (1, 0), (0, 2), (1, 1), (2, 1), (3, 2))


def _rel(got, want):
    got, want = np.asarray(got, np.complex128), np.asarray(want, np.complex128)
    assert got.shape == want.shape and np.isfinite(got).all()
    return np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-300)


def _same(got, want, tol):
    """SciPy's type, shape and dtype, and its values to ``tol`` (relative norm)."""
    assert type(got) is type(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    assert _rel(got, want) <= tol


def _dense(ab, l_u):
    """The matrix ``a`` of ``solve_banded``'s storage ``ab[u + i - j, j] == a[i, j]``."""
    lower, upper = l_u
    n = ab.shape[1]
    a = np.zeros((n, n), np.complex128)
    for i in range(n):
        for j in range(max(0, i - lower), min(n, i + upper + 1)):
            a[i, j] = ab[upper + i - j, j]
    return a


def _dense_hermitian(ab, lower):
    """The Hermitian matrix of ``solveh_banded``'s storage (upper or lower form)."""
    upper = ab.shape[0] - 1
    n = ab.shape[1]
    a = np.zeros((n, n), np.complex128)
    for j in range(n):
        for k in range(upper + 1):
            i = j + k if lower else j - k
            if 0 <= i < n:
                v = ab[k, j] if lower else ab[upper - k, j]
                a[i, j] = v
                a[j, i] = np.conj(v)
    return a


def _band(rng, l_u, n, dtype):
    """A well-conditioned band in ``solve_banded``'s storage (dominant diagonal)."""
    ab = rand(rng, (l_u[0] + l_u[1] + 1, n), dtype)
    ab[l_u[1]] += np.asarray(3 * (l_u[0] + l_u[1] + 1), dtype)
    return ab


def _hermitian_band(rng, upper, n, dtype, lower):
    """A Hermitian positive definite band in ``solveh_banded``'s storage."""
    ab = rand(rng, (upper + 1, n), dtype)
    diagonal = 0 if lower else upper
    ab[diagonal] = np.abs(ab[diagonal]) + 3 * (upper + 1)
    return ab


def _tol(dtype, n=1):
    return TOL[np.dtype(dtype)] * max(1, n) ** 0.5


# -- solve_banded ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("l_u", BANDS)
def test_solve_banded_matches_scipy_and_the_dense_reference(dtype, l_u):
    rng = np.random.default_rng(7 * l_u[0] + l_u[1])
    for n in ORDERS:
        ab = _band(rng, l_u, n, dtype)
        a = _dense(ab, l_u)
        for layout, ab_in in layouts(ab).items():
            for b in (rand(rng, n, dtype), rand(rng, (n, 3), dtype), layouts(rand(rng, (n, 2), dtype))["F"]):
                keep = ab_in.copy(), b.copy()
                got = nsl.solve_banded(l_u, ab_in, b)
                _same(got, sla.solve_banded(l_u, ab_in, b), _tol(dtype, n))
                assert _rel(got, np.linalg.solve(a, b.astype(np.complex128))) <= _tol(dtype, n), (layout, n)
                np.testing.assert_array_equal(ab_in, keep[0])
                np.testing.assert_array_equal(b, keep[1])


@pytest.mark.parametrize("l_u", [(1, 1), (2, 1), (0, 0)])
def test_solve_banded_dtype_rules_and_batches(l_u):
    rng = np.random.default_rng(3)
    ab = _band(rng, l_u, 6, np.float64)
    for ab_dtype, b_dtype in ((np.int64, np.int64), (np.float32, np.float64), (np.float32, np.complex64),
                              (np.int8, np.float32), (np.float64, np.complex64)):
        b = (10 * rng.standard_normal(6)).astype(b_dtype)
        a_in = (ab * 10).astype(ab_dtype)
        _same(nsl.solve_banded(l_u, a_in, b), sla.solve_banded(l_u, a_in, b), 1e-5)
    lists = ab.tolist(), list(range(6))
    _same(nsl.solve_banded(l_u, *lists), sla.solve_banded(l_u, *lists), 1e-12)
    stack = np.stack([_band(rng, l_u, 6, np.float64) for _ in range(3)])
    for b in (rng.standard_normal(6), rng.standard_normal((3, 6, 1)), rng.standard_normal((2, 1, 6, 2))):
        _same(nsl.solve_banded(l_u, stack, b), sla.solve_banded(l_u, stack, b), 1e-12)
    lows, ups, b = np.array([l_u[0]] * 3), np.array([l_u[1]] * 3), rng.standard_normal(6)
    _same(nsl.solve_banded((lows, ups), stack, b), sla.solve_banded((lows, ups), stack, b), 1e-12)


# -- solveh_banded, cholesky_banded, cho_solve_banded ---------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [0, 1, 2, 4])
@pytest.mark.parametrize("lower", [False, True])
def test_hermitian_banded_functions_match_scipy_and_the_dense_reference(dtype, upper, lower):
    rng = np.random.default_rng(11 * upper + lower)
    for n in ORDERS:
        if upper == 1 and n == 1:  # SciPy's ?ptsv wrapper refuses order 1 (tested below)
            continue
        ab = _hermitian_band(rng, upper, n, dtype, lower)
        a = _dense_hermitian(ab, lower)
        for ab_in in layouts(ab).values():
            keep = ab_in.copy()
            c = nsl.cholesky_banded(ab_in, lower=lower)
            _same(c, sla.cholesky_banded(ab_in, lower=lower), _tol(dtype, n))
            for b in (rand(rng, n, dtype), rand(rng, (n, 3), dtype)):
                keep_b = b.copy()
                x = nsl.solveh_banded(ab_in, b, lower=lower)
                _same(x, sla.solveh_banded(ab_in, b, lower=lower), _tol(dtype, n))
                assert _rel(x, np.linalg.solve(a, b.astype(np.complex128))) <= _tol(dtype, n)
                y = nsl.cho_solve_banded((c, lower), b)
                _same(y, sla.cho_solve_banded((c, lower), b), _tol(dtype, n))
                assert _rel(y, np.linalg.solve(a, b.astype(np.complex128))) <= _tol(dtype, n)
                np.testing.assert_array_equal(b, keep_b)
            np.testing.assert_array_equal(ab_in, keep)


def test_hermitian_banded_batches_dtypes_and_order_one():
    rng = np.random.default_rng(5)
    stack = np.stack([_hermitian_band(rng, 2, 7, np.float64, True) for _ in range(3)])
    for b in (rng.standard_normal(7), rng.standard_normal((3, 7, 2))):
        _same(nsl.solveh_banded(stack, b, lower=True), sla.solveh_banded(stack, b, lower=True), 1e-12)
    c = nsl.cholesky_banded(stack, lower=True)
    _same(c, sla.cholesky_banded(stack, lower=True), 1e-12)
    b = rng.standard_normal((2, 1, 7, 2))
    _same(nsl.cho_solve_banded((c, True), b), sla.cho_solve_banded((c, True), b), 1e-12)
    ab = (_hermitian_band(rng, 1, 5, np.float64, False) * 4).astype(np.int32)
    b = np.arange(5)
    _same(nsl.solveh_banded(ab, b), sla.solveh_banded(ab, b), 1e-12)
    _same(nsl.cholesky_banded(ab), sla.cholesky_banded(ab), 1e-12)
    _same_error("solveh_banded", np.ones((2, 1)), np.ones(1))  # SciPy's ?ptsv wrapper refuses order 1


# -- ldl ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("hermitian", [True, False])
def test_ldl_matches_scipy_and_reconstructs(dtype, lower, hermitian):
    rng = np.random.default_rng(int(lower) + 2 * int(hermitian))
    conj = hermitian and np.dtype(dtype).kind == "c"
    for n in (1, 2, 3, 7, 13, 31):
        x = rand(rng, (n, n), dtype)
        a = x + (x.conj().T if conj else x.T)  # indefinite: 2x2 pivots occur
        for a_in in layouts(a).values():
            keep = a_in.copy()
            lu, d, perm = nsl.ldl(a_in, lower=lower, hermitian=hermitian)
            want = sla.ldl(a_in, lower=lower, hermitian=hermitian)
            _same(lu, want[0], _tol(dtype, n))
            _same(d, want[1], _tol(dtype, n))
            np.testing.assert_array_equal(perm, want[2])
            assert perm.dtype == want[2].dtype
            back = lu @ d @ (lu.conj().T if conj else lu.T)
            assert _rel(back, a) <= 10 * _tol(dtype, n)
            tri = lu[perm]
            assert np.array_equal(tri, np.tril(tri) if lower else np.triu(tri))
            np.testing.assert_array_equal(a_in, keep)


def test_ldl_batches_empty_other_dtypes_and_its_warning():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3, 5, 5))
    stack = x + x.swapaxes(-1, -2)
    for got, want in zip(nsl.ldl(stack), sla.ldl(stack)):
        _same(got, want, 1e-12)
    for a in (np.zeros((0, 0)), np.zeros((0, 0), np.float32), [[1, 2], [2, -3]], np.float64(4.0),
              np.array([[2, 1], [1, 2]], np.int8)):
        for got, want in zip(nsl.ldl(a), sla.ldl(a)):
            _same(got, want, 1e-6)
    with pytest.raises(ValueError, match='The input array "a" should be square.'):
        nsl.ldl(np.ones((2, 3)))
    herm = np.array([[2, 1 + 1j], [1 - 1j, 3 + 0.5j]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = nsl.ldl(herm)
    assert [w.category for w in caught] == [np.exceptions.ComplexWarning]
    assert caught[0].filename == __file__  # the caller's frame
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        want = sla.ldl(herm)
    for g, w in zip(got, want):
        _same(g, w, 1e-12)


# -- solve: tridiagonal (detected and assumed) and assume_a='banded' ------------------------------


def _tridiagonal(rng, n, dtype):
    a = np.diag(rand(rng, n, dtype) + 4)
    if n > 1:
        a = a + np.diag(rand(rng, n - 1, dtype), 1) + np.diag(rand(rng, n - 1, dtype), -1)
    return a.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("assume_a", [None, "tridiagonal", "banded"])
def test_solve_banded_structures_match_scipy(dtype, assume_a):
    rng = np.random.default_rng(len(str(assume_a)))
    for n in (1, 2, 3, 4, 5, 13, 31):
        mats = [_tridiagonal(rng, n, dtype)]
        if assume_a == "banded" and n > 3:  # a wider, lopsided band, and a full matrix
            mats += [mats[0] + np.diag(rand(rng, n - 3, dtype), -3), rand(rng, (n, n), dtype) + 2 * n]
        for a in mats:
            for a_in in layouts(a).values():
                for b in (rand(rng, n, dtype), rand(rng, (n, 3), dtype)):
                    keep = a_in.copy(), b.copy()
                    kinds = [False] + ([True] if np.dtype(dtype).kind == "f" else [])
                    for transposed in kinds:
                        kw = {"assume_a": assume_a, "transposed": transposed}
                        got = nsl.solve(a_in, b, **kw)
                        _same(got, sla.solve(a_in, b, **kw), _tol(dtype, n))
                        ref = np.linalg.solve(a.T if transposed else a, b.astype(np.complex128))
                        assert _rel(got, ref) <= 10 * _tol(dtype, n)
                    np.testing.assert_array_equal(a_in, keep[0])
                    np.testing.assert_array_equal(b, keep[1])


def test_solve_tridiagonal_reads_only_the_three_diagonals():
    rng = np.random.default_rng(2)
    for n in (2, 3, 6):
        a = rng.standard_normal((n, n)) + 6 * np.eye(n)
        b = rng.standard_normal((n, 2))
        band = np.triu(np.tril(a, 1), -1)
        _same(nsl.solve(a, b, assume_a="tridiagonal"), sla.solve(a, b, assume_a="tridiagonal"), 1e-12)
        assert _rel(nsl.solve(a, b, assume_a="tridiagonal"), np.linalg.solve(band, b)) < 1e-12


def test_solve_banded_assumption_batches_dtypes_and_empty():
    rng = np.random.default_rng(4)
    stack = np.stack([_tridiagonal(rng, 6, np.float64) for _ in range(3)])
    for b in (rng.standard_normal(6), rng.standard_normal((3, 6, 2))):
        _same(nsl.solve(stack, b, assume_a="banded"), sla.solve(stack, b, assume_a="banded"), 1e-12)
    a = _tridiagonal(rng, 5, np.float64)
    for a_in, b in (((a * 4).astype(np.int64), np.arange(5)), (a.astype(np.float32), np.ones(5)),
                    (a.astype(np.float32), np.ones(5, np.complex64)), (a, np.ones((5, 0))),
                    (np.zeros((0, 0)), np.zeros(0, np.float32)), ([[2.0]], [1.0, 2.0, 3.0])):
        _same(nsl.solve(a_in, b, assume_a="banded"), sla.solve(a_in, b, assume_a="banded"), 1e-6)
    with pytest.raises(ValueError, match="`solve0` does not support zero-size batches."):
        nsl.solve(np.zeros((0, 3, 3)), np.ones(3), assume_a="banded")


# -- overwrite_* ----------------------------------------------------------------------------------


def _effects(module, name, make, kwargs):
    """The call's result, the inputs afterwards and which inputs the result shares memory with."""
    args = make()
    arrays = [x for x in args if isinstance(x, np.ndarray)] + [y for x in args if isinstance(x, tuple)
                                                               for y in x if isinstance(y, np.ndarray)]
    out = getattr(module, name)(*args, **kwargs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return outs, [x.copy() for x in arrays], [[np.shares_memory(o, x) for x in arrays] for o in outs]


def _overwrite_cases(rng, dtype, n, order):
    ab = np.asarray(_band(rng, (1, 1), n, dtype), order=order)
    ab2 = np.asarray(_band(rng, (2, 1), n, dtype), order=order)
    hb = np.asarray(_hermitian_band(rng, 1, n, dtype, False), order=order)
    hb2 = np.asarray(_hermitian_band(rng, 2, n, dtype, True), order=order)
    c = sla.cholesky_banded(hb2, lower=True)
    tri = np.asarray(_tridiagonal(rng, n, dtype), order=order)
    sym = rand(rng, (n, n), dtype)
    sym = np.asarray(sym + sym.T, order=order)
    for b in (rand(rng, n, dtype), np.asfortranarray(rand(rng, (n, 2), dtype)), rand(rng, (n, 2), dtype),
              rng.standard_normal(n)):
        for flags in ({}, {"overwrite_b": True}, {"overwrite_ab": True}, {"overwrite_ab": True, "overwrite_b": True}):
            yield "solve_banded", ((1, 1), ab, b), flags
            yield "solve_banded", ((2, 1), ab2, b), flags
            yield "solveh_banded", (hb, b), flags
            yield "solveh_banded", (hb2, b), dict(flags, lower=True)
            yield "cho_solve_banded", ((c, True), b), {k: v for k, v in flags.items() if k == "overwrite_b"}
            solve_flags = {k.replace("ab", "a"): v for k, v in flags.items()}
            yield "solve", (tri, b), dict(solve_flags, assume_a="banded")
            yield "solve", (tri, b), dict(solve_flags, assume_a="tridiagonal")
            if n > 3:
                yield "solve", (tri, b), solve_flags
    for flag in (False, True):
        yield "cholesky_banded", (hb2,), {"overwrite_ab": flag, "lower": True}
        yield "ldl", (sym,), {"overwrite_a": flag}


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")  # ldl of complex symmetric input
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ["C", "F"])
def test_overwrite_effects_are_scipy_s(dtype, order):
    """Without ``overwrite_*`` the inputs are kept; with it they end as SciPy leaves them, and
    the result shares memory with the inputs SciPy's shares memory with."""
    rng = np.random.default_rng(1)
    for n in (2, 5, 12):
        for name, args, kwargs in _overwrite_cases(rng, dtype, n, order):
            def make(args=args):
                return [tuple(y.copy() if isinstance(y, np.ndarray) else y for y in x) if isinstance(x, tuple)
                        else x.copy(order="K") for x in args]

            ours = _effects(nsl, name, make, kwargs)
            theirs = _effects(sla, name, make, kwargs)
            assert ours[2] == theirs[2], (name, kwargs, n)
            for got, want in zip(ours[1], theirs[1]):  # the inputs afterwards
                assert got.dtype == want.dtype
                assert _rel(got, want) <= _tol(dtype, n), (name, kwargs, n)
            if not any(kwargs.get(k) for k in ("overwrite_a", "overwrite_b", "overwrite_ab")):
                for got, original in zip(ours[1], [x for x in make() if isinstance(x, np.ndarray)]):
                    np.testing.assert_array_equal(got, original)


# -- errors, check_finite, empty inputs, CUDA operands --------------------------------------------


def _same_error(call, *args, **kwargs):
    """``call`` raises SciPy's exception type with SciPy's message."""
    with pytest.raises(Exception) as theirs:
        getattr(sla, call)(*args, **kwargs)
    with pytest.raises(theirs.type) as ours:
        getattr(nsl, call)(*args, **kwargs)
    assert str(ours.value) == str(theirs.value)


def test_errors_are_scipy_s():
    nan_band = np.ones((3, 4))
    nan_band[1, 2] = np.nan
    inf_b = np.ones(4)
    inf_b[0] = np.inf
    singular = np.ones((3, 4))
    singular[:, 1] = 0  # a zero column of the matrix
    not_pd = np.ones((2, 4))
    not_pd[1, 2] = -1
    for args, kwargs in ((((1, 1), np.ones((3, 4)), np.ones(5)), {}), (((1, 2), np.ones((3, 4)), np.ones(4)), {}),
                         (((1, 1), nan_band, np.ones(4)), {}), (((1, 1), np.ones((3, 4)), inf_b), {}),
                         (((1, 1), singular, np.ones(4)), {}), (((2, 0), singular, np.ones(4)), {}),
                         (((1, 1), np.ones((3, 4), object), np.ones(4)), {})):
        _same_error("solve_banded", *args, **kwargs)
    for args in ((not_pd, np.ones(4)), (np.vstack([np.ones(4), not_pd]), np.ones(4)), (nan_band, np.ones(4)),
                 (np.ones((2, 4)), np.ones(3))):
        _same_error("solveh_banded", *args)
    _same_error("cholesky_banded", not_pd)
    _same_error("cholesky_banded", nan_band)
    _same_error("cho_solve_banded", (np.ones((2, 4)), False), np.ones(3))
    _same_error("cho_solve_banded", (np.ones((2, 4)), False), inf_b)
    _same_error("ldl", np.full((3, 3), np.nan))
    tri = _tridiagonal(np.random.default_rng(0), 5, np.float64)
    sing = tri.copy()
    sing[:, 2] = 0
    for kw in ({"assume_a": "banded"}, {"assume_a": "tridiagonal"}, {}):
        _same_error("solve", sing, np.ones(5), **kw)
        _same_error("solve", tri, np.ones(4), **kw)
        _same_error("solve", np.ones((3, 4)), np.ones(3), **kw)
    nan_tri = tri.copy()
    nan_tri[0, 4] = np.nan  # outside the tridiagonal band
    _same_error("solve", nan_tri, np.ones(5), assume_a="banded")
    _same_error("solve", nan_tri, np.ones(5), assume_a="tridiagonal")
    _same_error("solve", tri.astype(complex), np.ones(5), assume_a="banded", transposed=True)
    _same_error("solve", tri, np.ones(5), assume_a="bandd")


def test_check_finite_false_skips_the_scan():
    band = np.array([[0.0, 1, 1, 1], [4, 4, np.nan, 4], [1, 1, 1, 0]])
    with np.errstate(all="ignore"):
        for name, args in (("solve_banded", ((1, 1), band, np.ones(4))), ("solveh_banded", (band[:2], np.ones(4))),
                           ("cholesky_banded", (band[:2],)), ("cho_solve_banded", ((band[:2], False), np.ones(4)))):
            got = getattr(nsl, name)(*args, check_finite=False)
            want = getattr(sla, name)(*args, check_finite=False)
            assert got.shape == want.shape and np.isnan(got).any() and np.isnan(want).any()
            with pytest.raises(ValueError, match="array must not contain infs or NaNs"):
                getattr(nsl, name)(*args)


def test_empty_inputs_are_scipy_s():
    for args in (((1, 1), np.ones((3, 0)), np.ones(0)), ((1, 0), np.ones((2, 0), np.float32), np.ones((0, 2))),
                 ((0, 0), np.ones((1, 0), np.int64), np.ones(0, np.complex64))):
        _same(nsl.solve_banded(*args), sla.solve_banded(*args), 0)
    for args in ((np.ones((2, 0)), np.ones(0)), (np.ones((3, 0), np.float32), np.ones((0, 3), np.float32))):
        _same(nsl.solveh_banded(*args), sla.solveh_banded(*args), 0)
    for ab in (np.ones((2, 0)), np.ones((1, 0), np.complex64)):
        _same(nsl.cholesky_banded(ab), sla.cholesky_banded(ab), 0)
    _same(nsl.cho_solve_banded((np.ones((2, 0)), True), np.ones(0, np.float32)),
          sla.cho_solve_banded((np.ones((2, 0)), True), np.ones(0, np.float32)), 0)


def test_order_one_and_ill_conditioned_warnings():
    for l_u, ab in (((0, 0), np.array([[4.0]])), ((1, 2), np.array([[0.0], [0.0], [4.0], [0.0]]))):
        for b in (np.array([2.0]), np.array([[2.0, 6.0]]), np.array([2], np.int64)):
            _same(nsl.solve_banded(l_u, ab, b), sla.solve_banded(l_u, ab, b), 1e-15)
    ill = np.diag([1.0, 1.0, 1.0, 1e-17]) + np.diag([1.0, 1.0, 1.0], 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = nsl.solve(ill, np.ones(4), assume_a="banded")
    assert [w.category for w in caught] == [sla.LinAlgWarning]
    assert caught[0].filename == __file__  # the caller's frame
    assert "Ill-conditioned matrix" in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _same(got, sla.solve(ill, np.ones(4), assume_a="banded"), 1e-12)


class _CudaOperand:
    """An operand whose DLPack device is CUDA (what a CuPy array or a torch CUDA tensor reports)."""

    def __dlpack_device__(self):
        return (2, 0)


@pytest.mark.parametrize("name, call", [
    ("solve_banded", lambda x: nsl.solve_banded((1, 1), x, np.ones(3))),
    ("solve_banded", lambda x: nsl.solve_banded((1, 1), np.ones((3, 3)), x)),
    ("solveh_banded", lambda x: nsl.solveh_banded(x, np.ones(3))),
    ("cholesky_banded", lambda x: nsl.cholesky_banded(x)),
    ("cho_solve_banded", lambda x: nsl.cho_solve_banded((x, False), np.ones(3))),
    ("ldl", lambda x: nsl.ldl(x)),
])
def test_gpu_operands_are_refused_by_name(name, call):
    with pytest.raises(TypeError, match=rf"^{name}: CUDA operands .* {name} runs on the host only.*x\.get\(\)"):
        call(_CudaOperand())
