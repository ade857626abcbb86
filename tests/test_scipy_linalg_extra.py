"""nvmathpy.scipy.linalg's norm, pinv, pinvh, and the compiled small-call paths of lu and
cho_solve and the plan-free svd: SciPy's results, types and errors, checked against SciPy and
a float64 reference on odd sizes, transposed and strided inputs, every LAPACK dtype."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

import nvmathpy.linalg as nl
import nvmathpy.scipy.linalg as nsl
from numerics import layouts, rand
from nvmathpy.linalg.lapack import LU_MAX_ORDER, fast_module
from nvmathpy.scipy.linalg._pseudo import EV_UP_TO

DTYPES = (np.float32, np.float64, np.complex64, np.complex128)
TOL = {np.dtype(np.float32): 2e-5, np.dtype(np.complex64): 2e-5, np.dtype(np.float64): 1e-12,
       np.dtype(np.complex128): 1e-12}


def _rel(got, want):
    want = np.asarray(want, np.complex128)
    return np.linalg.norm(np.asarray(got, np.complex128) - want) / max(np.linalg.norm(want), 1e-300)


def _same_kind(got, want):
    """The same Python type, shape and dtype (SciPy returns Python floats, NumPy scalars, arrays)."""
    assert type(got) is type(want)
    assert np.shape(got) == np.shape(want)
    assert getattr(got, "dtype", None) == getattr(want, "dtype", None)


@pytest.fixture(scope="module")
def fast():
    return fast_module(wait=True)


# -- norm -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (7,), (131,), (1, 1), (5, 3), (3, 11), (4, 3, 5)])
def test_norm_matches_scipy_and_the_float64_reference(dtype, shape):
    rng = np.random.default_rng(sum(shape) + 7 * len(shape))
    x = rand(rng, shape, dtype)
    ref64 = x.astype(np.complex128)
    cases = [{}, {"axis": 0}, {"axis": -1}, {"axis": 0, "keepdims": True}, {"keepdims": True}, {"ord": 1},
             {"ord": np.inf}, {"ord": 2}, {"ord": -1}]
    if len(shape) == 2:
        cases += [{"ord": "fro"}, {"ord": "nuc"}, {"ord": -2}, {"axis": (1, 0)}]
    for name, a in layouts(x).items():
        for kw in cases:
            if len(shape) > 2 and "axis" not in kw and kw.get("ord") is not None:
                continue  # SciPy refuses such an ord without an axis for 3-D arrays, as NumPy does
            got, want = nsl.norm(a, **kw), sla.norm(a, **kw)
            _same_kind(got, want)
            assert _rel(got, want) <= TOL[np.dtype(dtype)], (name, kw)
            assert _rel(got, np.linalg.norm(ref64, **kw)) <= 10 * TOL[np.dtype(dtype)], (name, kw)
            np.testing.assert_array_equal(a, layouts(x)[name])  # the caller's array is untouched


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (1, 6), (6, 1), (5, 3), (40, 41)])
@pytest.mark.parametrize("ord", [1, 1.0, -1, np.inf, -np.inf])
def test_matrix_sum_norms_are_scipys_bit_for_bit(dtype, shape, ord):
    """SciPy's LAPACK ``?lange`` (a float) for the 1- and infinity norms of a matrix that is, or
    whose transpose is, Fortran-ordered only; NumPy's sums (a NumPy scalar) otherwise."""
    x = rand(np.random.default_rng(shape[0] * 3 + shape[1]), shape, dtype)
    for name, a in layouts(x, transposed=True).items():
        got, want = nsl.norm(a, ord), sla.norm(a, ord)
        _same_kind(got, want)
        assert got == want, (name, got, want)
    poisoned = x.copy()
    poisoned[0, -1] = np.nan
    with pytest.raises(ValueError, match="infs or NaNs"):
        nsl.norm(poisoned, ord)


def test_norm_takes_what_scipy_takes():
    for a, kw in ((np.arange(5), {}), ([[1, 2], [3, 4]], {}), (np.float16([3, 4]), {}), (np.array(3.0), {}),
                  (np.empty((0, 3)), {}), (np.arange(6.0).reshape(2, 3), {"ord": 2, "axis": 1}),
                  (np.arange(6.0).reshape(2, 3), {"axis": np.int64(1)}),
                  (np.arange(6.0).reshape(2, 3).astype(">f8"), {})):
        got, want = nsl.norm(a, **kw), sla.norm(a, **kw)
        _same_kind(got, want)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    with pytest.raises(np.exceptions.AxisError):
        nsl.norm(np.ones((2, 3)), axis=2)
    with pytest.raises(ValueError):
        nsl.norm(np.ones((2, 3)), ord="nuc", axis=0)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("shape", [(5,), (100,), (3, 4), (40, 41)])
def test_norm_check_finite(bad, shape):
    a = np.random.default_rng(len(shape)).standard_normal(shape)
    a.flat[a.size // 2] = bad
    for kw in ({}, {"axis": 0}, {"axis": -1}, {"ord": "fro"} if a.ndim == 2 else {"ord": 2}):
        with pytest.raises(ValueError, match="infs or NaNs"):
            nsl.norm(a, **kw)
        with pytest.raises(ValueError, match="infs or NaNs"):
            sla.norm(a, **kw)
        with np.errstate(invalid="ignore"):
            got = nsl.norm(a, check_finite=False, **kw)
        assert not np.isfinite(got).all()


def test_norm_overflow_is_not_an_error():
    a = np.full((3, 3), 1e200)
    with np.errstate(over="ignore"):
        for kw in ({}, {"axis": 1}):
            got, want = nsl.norm(a, **kw), sla.norm(a, **kw)
            np.testing.assert_array_equal(got, want)


# -- pinv / pinvh -----------------------------------------------------------------------------------


def _penrose(a, b, tol):
    """The four Moore-Penrose conditions, in float64/complex128."""
    a, b = a.astype(np.complex128), b.astype(np.complex128)
    scale = np.linalg.norm(a) * np.linalg.norm(b)
    for lhs, rhs in ((a @ b @ a, a), (b @ a @ b, b), ((a @ b).conj().T, a @ b), ((b @ a).conj().T, b @ a)):
        assert np.linalg.norm(lhs - rhs) <= tol * max(scale, 1.0) * max(np.linalg.norm(rhs), 1.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (7, 3), (3, 7), (13, 13)])
def test_pinv_matches_scipy(dtype, shape):
    rng = np.random.default_rng(shape[0] * 31 + shape[1])
    x = rand(rng, shape, dtype)
    if min(shape) > 2:  # rank-deficient: the last column repeats the first
        x[:, -1] = x[:, 0]
    ref = np.linalg.pinv(x.astype(np.complex128), rcond=max(shape) * np.finfo(np.dtype(dtype).char.lower()).eps)
    for name, a in layouts(x).items():
        for kw in ({}, {"return_rank": True}, {"atol": 0.25}, {"rtol": 0.1, "return_rank": True}):
            got, want = nsl.pinv(a, **kw), sla.pinv(a, **kw)
            if kw.get("return_rank"):
                _same_kind(got[1], want[1])
                assert got[1] == want[1]
                got, want = got[0], want[0]
            _same_kind(got, want)
            assert _rel(got, want) <= 50 * TOL[np.dtype(dtype)], (name, kw)
        b = nsl.pinv(a)
        assert _rel(b, ref) <= 100 * TOL[np.dtype(dtype)], name
        _penrose(a, b, 100 * TOL[np.dtype(dtype)])
        np.testing.assert_array_equal(a, layouts(x)[name])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 5, EV_UP_TO, EV_UP_TO + 5])
def test_pinvh_matches_scipy_and_reads_one_triangle(dtype, n):
    rng = np.random.default_rng(n)
    x = rand(rng, (n, n), dtype)
    h = x @ x.conj().T
    if n > 2:
        v = rand(rng, (n, n - 2), dtype)
        h = (v @ v.conj().T).astype(dtype)  # rank n - 2
    h = ((h + h.conj().T) / 2).astype(dtype)
    ref = np.linalg.pinv(h.astype(np.complex128), rcond=1e-4 if np.dtype(dtype).itemsize <= 8 and dtype != np.float64
                         else 1e-10, hermitian=True)
    for lower in (True, False):
        stored = np.tril(h) if lower else np.triu(h)
        garbage = np.triu(rand(rng, (n, n), dtype), 1)
        a_ = stored + (garbage if lower else garbage.conj().T)  # the other triangle must not be read
        for name, a in layouts(a_).items():
            for kw in ({}, {"return_rank": True}, {"atol": 0.5, "return_rank": True}):
                got, want = nsl.pinvh(a, lower=lower, **kw), sla.pinvh(a, lower=lower, **kw)
                if kw.get("return_rank"):
                    _same_kind(got[1], want[1])
                    assert got[1] == want[1]
                    got, want = got[0], want[0]
                _same_kind(got, want)
                assert _rel(got, want) <= 100 * TOL[np.dtype(dtype)] * max(n, 1), (name, kw, lower)
            assert _rel(nsl.pinvh(a, lower=lower), ref) <= 1000 * TOL[np.dtype(dtype)] * max(n, 1), name
            np.testing.assert_array_equal(a, layouts(a_)[name])


def test_pinv_and_pinvh_errors_and_fall_through():
    a = np.array([[2.0, 1.0], [1.0, 3.0]])
    for fn in (nsl.pinv, nsl.pinvh):
        with pytest.raises(ValueError, match="positive"):
            fn(a, atol=-1.0)
        with pytest.raises(ValueError, match="positive"):
            fn(a, rtol=-1e-3)
        with pytest.raises(ValueError, match="infs or NaNs"):
            fn(np.array([[1.0, np.nan], [np.nan, 1.0]]))
        # what the fast paths do not take is SciPy's own: batches, lists, integers, empty matrices
        batch = np.stack([a, 2 * a, 3 * a])
        for x in (batch, a.tolist(), a.astype(int), np.empty((0, 0)), a.astype(np.float16)):
            got, want = fn(x), getattr(sla, fn.__name__)(x)
            _same_kind(got, want)
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)
    with pytest.raises(ValueError):
        nsl.pinvh(np.ones((2, 3)))


# -- compiled paths: lu, cho_solve of cho_factor, plan-free svd --------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 1), (1, 3), (2, 2), (7, 4), (4, 7), (37, 37), (LU_MAX_ORDER, 5)])
def test_lu_matches_scipy(fast, dtype, shape):
    rng = np.random.default_rng(shape[0] * 7 + shape[1])
    x = rand(rng, shape, dtype)
    for name, a in layouts(x).items():
        for kw in ({}, {"permute_l": True}, {"p_indices": True}):
            if fast is not None:
                assert fast.lu(a, kw.get("permute_l", False), kw.get("p_indices", False), True) is not NotImplemented
            got, want = nsl.lu(a, **kw), sla.lu(a, **kw)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.shape == w.shape and g.flags.c_contiguous == w.flags.c_contiguous
                assert _rel(g, w) <= 10 * TOL[np.dtype(dtype)], (name, kw)
        p, low, up = nsl.lu(a)
        assert _rel(p @ low @ up, x) <= 10 * TOL[np.dtype(dtype)] * np.sqrt(max(shape))
        perm, low, up = nsl.lu(a, p_indices=True)
        assert _rel(low[perm] @ up, x) <= 10 * TOL[np.dtype(dtype)] * np.sqrt(max(shape))
        np.testing.assert_array_equal(a, layouts(x)[name])


def test_lu_singular_non_finite_and_declined(fast):
    singular = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    for got, want in zip(nsl.lu(singular), sla.lu(singular)):
        np.testing.assert_allclose(got, want, atol=1e-15)
    with pytest.raises(ValueError, match="infs or NaNs"):
        nsl.lu(np.array([[1.0, np.inf], [0.0, 1.0]]))
    assert np.isnan(nsl.lu(np.array([[1.0, np.nan], [0.0, 1.0]]), check_finite=False)[2]).any()
    if fast is not None:  # SciPy gives 1 x 1 results other dtypes; larger orders are the Python path's
        for a in (np.ones((1, 1)), np.ones((LU_MAX_ORDER + 1, 2)), np.ones((2, 2), int), np.ones((2, 2, 2))):
            assert fast.lu(a, False, False, True) is NotImplemented


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 1), (1, 3), (2, 2), (7, 4), (4, 7), (37, 37), (LU_MAX_ORDER + 1, 3)])
def test_lu_unpack_of_getrf_factors_is_scipys_lu(fast, dtype, shape):
    """``lu_unpack`` (the unpacking of other ``getrf``s' factors, NumPy's pool) gives SciPy's
    ``lu`` tuple from LAPACK's factors, for any shape (orders past the compiled ``lu``'s too)."""
    if fast is None:
        pytest.skip("no compiled extension here")
    from scipy.linalg.lapack import get_lapack_funcs

    rng = np.random.default_rng(shape[0] + 3 * shape[1])
    x = rand(rng, shape, dtype)
    (getrf,) = get_lapack_funcs(("getrf",), dtype=x.dtype)
    factors, piv, info = getrf(x)
    assert info == 0 and factors.flags.f_contiguous and piv.dtype == np.int32
    kept = factors.copy(order="F"), piv.copy()
    for kw in ({}, {"permute_l": True}, {"p_indices": True}):
        got = fast.lu_unpack(factors, piv, kw.get("permute_l", False), kw.get("p_indices", False))
        want = sla.lu(x, **kw)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape and g.flags.c_contiguous
            assert _rel(g, w) <= 10 * TOL[np.dtype(dtype)], kw
    np.testing.assert_array_equal(factors, kept[0])  # the factors are read, never written
    np.testing.assert_array_equal(piv, kept[1])


def test_lu_unpack_declines_what_it_does_not_take(fast):
    if fast is None:
        pytest.skip("no compiled extension here")
    from scipy.linalg.lapack import dgetrf

    factors, piv, _ = dgetrf(np.arange(12.0).reshape(4, 3) ** 2)
    for lu_, p in ((np.ascontiguousarray(factors), piv), (factors, piv.astype(np.int64)), (factors, piv[:2]),
                   (factors, np.array([0, 4, 2], np.int32)), (factors, np.array([0, -1, 2], np.int32)),
                   (factors, piv.reshape(3, 1)), (factors.astype(int), piv), (factors.tolist(), piv),
                   (np.ones((1, 1), order="F"), np.zeros(1, np.int32)), (factors, piv.tolist())):
        assert fast.lu_unpack(lu_, p, False, False) is NotImplemented


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_lu_of_a_batch_is_scipys(dtype):
    """A batch goes matrix by matrix through ``getrf`` and the unpacking (compiled where available)."""
    rng = np.random.default_rng(5)
    for shape in ((3, 5, 4), (2, 2, 4, 6), (2, 6, 6)):
        x = rand(rng, shape, dtype)
        for name, a in layouts(x).items():
            for kw in ({}, {"permute_l": True}, {"p_indices": True}):
                got, want = nsl.lu(a, **kw), sla.lu(a, **kw)
                for g, w in zip(got, want):
                    assert g.dtype == w.dtype and g.shape == w.shape, (name, kw)
                    assert _rel(g, w) <= 10 * TOL[np.dtype(dtype)], (name, kw)
            np.testing.assert_array_equal(a, layouts(x)[name])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 9, 64])
def test_cho_solve_of_cho_factor(fast, dtype, n):
    rng = np.random.default_rng(n + 100)
    x = rand(rng, (n, n), dtype)
    a = (x @ x.conj().T + n * np.eye(n)).astype(dtype)
    for lower in (False, True):
        c = nsl.cho_factor(a, lower=lower)
        for b in (rand(rng, (n,), dtype), rand(rng, (n, 3), dtype)):
            if fast is not None:
                assert fast.cho_solve(c[0], b, lower, True) is not NotImplemented
            got = nsl.cho_solve(c, b)
            want = np.linalg.solve(a.astype(np.complex128), b.astype(np.complex128))
            assert _rel(got, want) <= 100 * TOL[np.dtype(dtype)], lower
            scipy_c = np.ascontiguousarray(sla.cho_factor(a, lower=lower)[0])  # C order, garbage triangle
            assert _rel(nsl.cho_solve((scipy_c, lower), b), want) <= 100 * TOL[np.dtype(dtype)], lower


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (7, 3), (3, 7), (17, 17)])
def test_svd_without_a_plan_matches_scipy(dtype, shape):
    x = rand(np.random.default_rng(shape[0] + 3 * shape[1]), shape, dtype)
    for name, a in layouts(x).items():
        for driver in ("gesdd", "gesvd"):
            for full in (True, False):
                u, s, vh = nsl.svd(a, full_matrices=full, lapack_driver=driver)
                su, ss, svh = sla.svd(a, full_matrices=full, lapack_driver=driver)
                assert (u.shape, s.shape, vh.shape, u.dtype, s.dtype) == (su.shape, ss.shape, svh.shape, su.dtype,
                                                                          ss.dtype)
                assert _rel(s, ss) <= 10 * TOL[np.dtype(dtype)]
                k = min(shape)
                assert _rel((u[:, :k] * s) @ vh[:k], x) <= 10 * TOL[np.dtype(dtype)] * np.sqrt(max(shape)), name
            assert _rel(nl.svd(a, compute_uv=False, driver=driver), ss) <= 10 * TOL[np.dtype(dtype)]
    with pytest.raises(np.linalg.LinAlgError):
        nl.svd(np.array([[1.0, np.nan], [0.0, 1.0]]), driver="gesdd")


def test_svd_refuses_factors_beyond_lapack_indexing():
    huge = np.broadcast_to(np.ones(1), (50_000, 50_000))  # no memory behind it: refused before any copy
    for full in (True, False):
        with pytest.raises(ValueError, match="32-bit"):
            nl.svd(huge, full_matrices=full, driver="gesdd")
        with pytest.raises(ValueError, match="32-bit"):
            nsl.svd(huge, full_matrices=full, check_finite=False)


# -- orth / null_space ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (7, 3), (3, 7), (11, 11)])
def test_orth_and_null_space_span_scipys_subspaces(dtype, shape):
    rng = np.random.default_rng(shape[0] * 13 + shape[1])
    x = rand(rng, shape, dtype)
    if min(shape) > 2:  # rank-deficient: the last column repeats the first
        x[:, -1] = x[:, 0]
    tol = 100 * TOL[np.dtype(dtype)]
    for name, a in layouts(x).items():
        for rcond in (None, 1e-3):
            q, want = nsl.orth(a, rcond), sla.orth(a, rcond)
            assert q.shape == want.shape and q.dtype == want.dtype, name
            eye = np.eye(q.shape[1])
            assert _rel(q.conj().T @ q, eye) <= tol  # orthonormal ...
            assert _rel(q @ (q.conj().T @ want), want) <= tol  # ... spanning SciPy's range
            for driver in ("gesdd", "gesvd"):
                z, want = nsl.null_space(a, rcond, lapack_driver=driver), sla.null_space(a, rcond, lapack_driver=driver)
                assert z.shape == want.shape and z.dtype == want.dtype, (name, driver)
                assert _rel(z.conj().T @ z, np.eye(z.shape[1])) <= tol
                assert np.linalg.norm(x.astype(np.complex128) @ z) <= tol * max(np.linalg.norm(x), 1.0)
                assert _rel(z @ (z.conj().T @ want), want) <= tol
        np.testing.assert_array_equal(a, layouts(x)[name])


def test_orth_and_null_space_errors_batches_and_fall_through():
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]])
    for fn in (nsl.orth, nsl.null_space):
        with pytest.raises(ValueError, match="infs or NaNs"):
            fn(np.array([[1.0, np.nan], [0.0, 1.0]]))
        batch = np.stack([a, -a, 2 * a])
        got, want = fn(batch), getattr(sla, fn.__name__)(batch)
        assert got.shape == want.shape
        for i in range(3):
            np.testing.assert_allclose(got[i], fn(batch[i]), rtol=0, atol=0)  # batched equals unbatched
        for x in (a.tolist(), a.astype(int), np.empty((0, 0)), a.astype(np.float16)):
            got, want = fn(x), getattr(sla, fn.__name__)(x)
            assert got.shape == want.shape and got.dtype == want.dtype
    with pytest.raises(ValueError, match="lapack_driver"):
        nsl.null_space(a, lapack_driver="gesvj")
    with pytest.raises((ValueError, np.linalg.LinAlgError)):
        nsl.null_space(np.array([[1.0, np.nan], [0.0, 1.0]]), check_finite=False)
