"""The one-call functions' direct paths for small matrices: one matrix in one compiled call
(:mod:`nvmathpy.linalg.solvers._one_matrix`), a stack through NumPy's gufuncs
(:mod:`nvmathpy.linalg.solvers._small_stacks`): NumPy's results and errors, the caller's arrays
untouched, and no plan made or looked up."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nvmathpy.linalg as la
from nvmathpy.linalg.solvers.functions import plan_cache
from nvmathpy.linalg.solvers.cpu._fast_lapack import fast_module
from nvmathpy.linalg.solvers.cpu._numpy_lapack import FROM_ORDER
from nvmathpy.linalg.solvers.plans.eigh import DIRECT_UP_TO

from numerics import layouts, rand, rel, up

DTYPES = ["float32", "float64", "complex64", "complex128"]
#: Relative-norm tolerances per dtype, scaled by the order (backward-stable factorizations).
TOL = {"float32": 2e-6, "complex64": 2e-6, "float64": 4e-15, "complex128": 4e-15}
ORDERS = [1, 2, 3, 7, 17, DIRECT_UP_TO]
#: The orders of the factorizations' direct paths (:func:`~nvmathpy.linalg.solvers._one_matrix.takes`).
FACTOR_ORDERS = ORDERS + [101, FROM_ORDER - 1]

pytestmark = pytest.mark.skipif(fast_module(wait=True) is None, reason="no C compiler: the plans run every call")


def tol(dtype: str, n: int) -> float:
    return TOL[dtype] * 50 * max(n, 4)


def well_conditioned(rng: np.random.Generator, n: int, dtype: str) -> np.ndarray:
    return (rand(rng, (n, n), dtype) + 3 * np.sqrt(n) * np.eye(n)).astype(dtype)


def positive_definite(rng: np.random.Generator, n: int, dtype: str) -> np.ndarray:
    g = up(rand(rng, (n, n), dtype))
    return (g @ g.conj().T + n * np.eye(n)).astype(dtype)


@pytest.fixture
def no_plans():
    """Fails the test where the call made or looked up a plan (the direct path not taken)."""
    cache = plan_cache()
    before = (cache.hits, cache.misses)
    yield
    assert (cache.hits, cache.misses) == before, "a plan was looked up"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", ORDERS)
@pytest.mark.parametrize("rhs", ["vector", "one column", "five columns"])
def test_solve_matches_the_float64_reference(dtype, n, rhs, no_plans):
    rng = np.random.default_rng(n * 31 + len(rhs))
    a = well_conditioned(rng, n, dtype)
    b = rand(rng, {"vector": (n,), "one column": (n, 1), "five columns": (n, 5)}[rhs], dtype)
    for name, view in layouts(a, transposed=True).items():
        kept_a, kept_b = view.copy(), b.copy()
        x = la.solve(view, b)
        assert x.shape == b.shape and x.dtype == b.dtype, name
        assert rel(x, np.linalg.solve(up(view), up(b))) < tol(dtype, n), name
        np.testing.assert_array_equal(view, kept_a)
        np.testing.assert_array_equal(b, kept_b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", ORDERS)
def test_inverse_matches_the_float64_reference(dtype, n, no_plans):
    rng = np.random.default_rng(n * 37)
    a = well_conditioned(rng, n, dtype)
    for name, view in layouts(a, transposed=True).items():
        kept = view.copy()
        x = la.inv(view)
        assert x.shape == a.shape and x.dtype == a.dtype, name
        assert rel(x, np.linalg.inv(up(view))) < tol(dtype, n), name
        np.testing.assert_array_equal(view, kept)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", FACTOR_ORDERS)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_reads_one_triangle_and_zeroes_the_other(dtype, n, upper, no_plans):
    rng = np.random.default_rng(n * 41 + upper)
    a = positive_definite(rng, n, dtype)
    ref = np.linalg.cholesky(up(a), upper=upper)
    garbage = np.triu(rand(rng, (n, n), dtype), 1)  # in the triangle not read
    given_a = a + (garbage if not upper else garbage.conj().T)
    for name, view in layouts(given_a.astype(dtype), transposed=True).items():
        kept = view.copy()
        c = la.cholesky(view, upper=upper)
        assert c.dtype == a.dtype, name
        assert rel(c, ref) < tol(dtype, n), name
        assert not np.any(np.tril(c, -1) if upper else np.triu(c, 1)), name
        np.testing.assert_array_equal(view, kept)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (7, 3), (3, 7), (17, 17), (DIRECT_UP_TO, 31), (5, DIRECT_UP_TO),
                                   (FROM_ORDER - 1, 100)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_is_numpys(dtype, shape, mode, no_plans):
    rng = np.random.default_rng(shape[0] * 43 + shape[1])
    a = rand(rng, shape, dtype)
    m, n = shape
    k = min(m, n)
    for name, view in layouts(a).items():
        kept = view.copy()
        q, r = la.qr(view, mode=mode)
        assert q.shape == ((m, k) if mode == "reduced" else (m, m)), name
        assert r.shape == ((k, n) if mode == "reduced" else (m, n)), name
        assert q.dtype == r.dtype == a.dtype
        assert rel(q @ r, up(a)) < tol(dtype, max(shape)), name
        assert rel(up(q).conj().T @ up(q), np.eye(q.shape[1])) < tol(dtype, max(shape)), name
        assert not np.any(np.tril(r, -1)), name
        # the same factorization as NumPy's (LAPACK's Householder signs)
        want_q, want_r = np.linalg.qr(up(a), mode=mode)
        assert rel(r, want_r) < tol(dtype, max(shape)), name
        np.testing.assert_array_equal(view, kept)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (7, 3), (3, 7), (17, 17), (DIRECT_UP_TO, 31)])
@pytest.mark.parametrize("full", [True, False])
def test_svd_reconstructs_and_orders(dtype, shape, full, no_plans):
    rng = np.random.default_rng(shape[0] * 47 + shape[1] + full)
    a = rand(rng, shape, dtype)
    m, n = shape
    k = min(m, n)
    want = np.linalg.svd(up(a), compute_uv=False)
    for name, view in layouts(a).items():
        kept = view.copy()
        u, s, vh = la.svd(view, full_matrices=full)
        assert u.shape == ((m, m) if full else (m, k)) and vh.shape == ((n, n) if full else (k, n)), name
        assert s.dtype == np.finfo(a.dtype).dtype and u.dtype == a.dtype
        assert rel(s, want) < tol(dtype, max(shape)), name
        assert rel((u[:, :k] * s) @ vh[:k], up(a)) < tol(dtype, max(shape)), name
        assert rel(la.svd(view, compute_uv=False), want) < tol(dtype, max(shape)), name
        np.testing.assert_array_equal(view, kept)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (7, 3), (3, 7), (17, 17), (DIRECT_UP_TO, 31)])
@pytest.mark.parametrize("rhs", ["vector", "three columns"])
@pytest.mark.parametrize("deficient", [False, True])
def test_lstsq_is_numpys(dtype, shape, rhs, deficient, no_plans):
    rng = np.random.default_rng(shape[0] * 53 + shape[1] + deficient)
    m, n = shape
    a = rand(rng, shape, dtype)
    if deficient and min(shape) > 1:  # rank min(m, n) - 1: a repeated column (or row)
        if m >= n:
            a[:, -1] = a[:, 0]
        else:
            a[-1] = a[0]
    b = rand(rng, (m,) if rhs == "vector" else (m, 3), dtype)
    rcond = 10 * max(shape) * np.finfo(a.dtype).eps
    want_x, want_res, want_rank, want_s = np.linalg.lstsq(up(a), up(b), rcond=rcond)
    for name, view in layouts(a).items():
        kept = view.copy()
        x, res, rank, s = la.lstsq(view, b, rcond=rcond)
        assert x.shape == want_x.shape and x.dtype == a.dtype, name
        assert type(rank) is np.int32 and rank == want_rank, name
        assert res.shape == want_res.shape, name
        assert rel(s, want_s) < tol(dtype, max(shape)), name
        assert rel(x, want_x) < tol(dtype, max(shape)) * (10 if deficient else 1), name
        if res.size:
            assert rel(res, want_res) < tol(dtype, max(shape)) * 10, name
        np.testing.assert_array_equal(view, kept)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lstsq_of_a_zero_matrix_and_tall_vectors_is_numpys(dtype, no_plans):
    rng = np.random.default_rng(3)
    for a, b in ((np.zeros((5, 3), dtype), rand(rng, (5, 2), dtype)), (rand(rng, (9, 2), dtype), rand(rng, 9, dtype))):
        got, want = la.lstsq(a, b), np.linalg.lstsq(up(a), up(b))
        assert [np.shape(v) for v in got] == [np.shape(v) for v in want]
        assert got[2] == want[2] and type(got[2]) is np.int32
        for g, w in zip(got[:2] + got[3:], want[:2] + want[3:]):
            assert g.dtype.kind == ("c" if g is got[0] and a.dtype.kind == "c" else "f")
            assert np.allclose(up(g), w, atol=tol(dtype, 9))


def test_lstsq_of_nan_is_reported_as_the_plans_do():
    a = np.ones((5, 3))
    a[2, 1] = np.nan
    with pytest.raises(np.linalg.LinAlgError, match="SVD did not converge in linear least squares"):
        la.lstsq(a, np.ones(5))


@pytest.mark.parametrize("n", [2, 5, DIRECT_UP_TO])
def test_singular_and_indefinite_matrices_raise(n, no_plans):
    a = np.ones((n, n))
    a[0, 0] = 2.0  # rank 2: an exactly zero pivot
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        la.solve(a if n > 2 else np.zeros((2, 2)), np.ones(n))
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        la.inv(a if n > 2 else np.zeros((2, 2)))
    s = np.eye(n)
    s[-1, -1] = -1.0
    with pytest.raises(np.linalg.LinAlgError, match=f"leading minor of order {n} is not"):
        la.cholesky(s)


def test_nan_in_svd_is_reported_as_the_plans_do():
    a = np.ones((4, 4))
    a[1, 2] = np.nan
    with pytest.raises(np.linalg.LinAlgError, match="SVD did not converge"):
        la.svd(a)
    with pytest.raises(np.linalg.LinAlgError, match="SVD did not converge"):
        la.svd(a, compute_uv=False)


def test_orders_beyond_the_bound_and_batches_take_the_plans():
    rng = np.random.default_rng(5)
    cache = plan_cache()
    for a in (well_conditioned(rng, DIRECT_UP_TO + 1, "float64"), well_conditioned(rng, 3, "float64")[None]):
        calls = cache.hits + cache.misses
        x = la.solve(a, rand(rng, a.shape[:-1], "float64")[..., None])
        assert x.shape == a.shape[:-1] + (1,)
        assert cache.hits + cache.misses == calls + 1
    a = positive_definite(rng, FROM_ORDER, "float64")
    calls = cache.hits + cache.misses
    assert rel(la.cholesky(a), np.linalg.cholesky(a)) < tol("float64", FROM_ORDER)
    assert cache.hits + cache.misses == calls + 1


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, DIRECT_UP_TO), dtype=st.sampled_from(DTYPES), columns=st.integers(0, 4),
       seed=st.integers(0, 2**32 - 1))
def test_solve_property(n, dtype, columns, seed):
    rng = np.random.default_rng(seed)
    a = well_conditioned(rng, n, dtype)
    b = rand(rng, (n,) if columns == 0 else (n, columns), dtype)
    x = la.solve(a, b)
    assert x.shape == b.shape
    assert rel(up(a) @ up(x), up(b)) < tol(dtype, n)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (3, 7, 7), (0, 5, 5)])
def test_small_determinants_are_numpys_own(dtype, shape):
    """Below the plans' order the determinants are NumPy's gufunc's, exactly and of NumPy's types."""
    rng = np.random.default_rng(sum(shape))
    a = rand(rng, shape, dtype)
    for got, want in ((la.det(a), np.linalg.det(a)), (la.slogdet(a).sign, np.linalg.slogdet(a).sign),
                      (la.slogdet(a).logabsdet, np.linalg.slogdet(a).logabsdet)):
        assert type(got) is type(want) and np.shape(got) == np.shape(want)
        assert getattr(got, "dtype", None) == getattr(want, "dtype", None)
        np.testing.assert_array_equal(got, want)


STACKS = [(5, 1, 1), (4, 3, 3), (2, 3, 8, 8), (3, DIRECT_UP_TO, DIRECT_UP_TO)]


def per_matrix(fn, *stacks):
    """``fn`` of each matrix of the stacks (float64/complex128 copies), stacked back."""
    flat = [s.reshape((-1,) + s.shape[-2:]) for s in stacks]
    outs = [fn(*(up(f[i]) for f in flat)) for i in range(flat[0].shape[0])]
    if isinstance(outs[0], tuple):
        return tuple(np.stack(parts).reshape(stacks[0].shape[:-2] + parts[0].shape) for parts in zip(*outs))
    return np.stack(outs).reshape(stacks[0].shape[:-2] + outs[0].shape)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", STACKS)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_of_stacks(dtype, shape, upper, no_plans):
    rng = np.random.default_rng(shape[-1] * 59 + upper)
    n = shape[-1]
    g = rand(rng, shape, dtype)
    a = (up(g) @ np.swapaxes(up(g), -1, -2).conj() + n * np.eye(n)).astype(dtype)
    ref = per_matrix(lambda m: np.linalg.cholesky(m, upper=upper), a)
    garbage = np.triu(rand(rng, shape, dtype), 1)
    given_a = (a + (np.swapaxes(garbage, -1, -2).conj() if upper else garbage)).astype(dtype)
    kept = given_a.copy()
    c = la.cholesky(given_a, upper=upper)
    assert c.shape == shape and c.dtype == a.dtype
    assert rel(c, ref) < tol(dtype, n)
    np.testing.assert_array_equal(given_a, kept)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", STACKS + [(3, 7, 2), (2, 2, 9)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_of_stacks(dtype, shape, mode, no_plans):
    rng = np.random.default_rng(shape[-1] * 61 + shape[-2])
    a = rand(rng, shape, dtype)
    kept = a.copy()
    result = la.qr(a, mode=mode)
    q, r = result
    m, n = shape[-2:]
    k = min(m, n)
    assert type(result).__name__ == "QRResult"
    assert q.shape == shape[:-2] + ((m, k) if mode == "reduced" else (m, m)) and q.dtype == a.dtype
    assert rel(q @ r, up(a)) < tol(dtype, max(m, n))
    assert rel(r, per_matrix(lambda x: np.linalg.qr(x, mode=mode)[1], a)) < tol(dtype, max(m, n))
    np.testing.assert_array_equal(a, kept)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", STACKS + [(3, 7, 2)])
@pytest.mark.parametrize("full", [True, False])
def test_svd_of_stacks(dtype, shape, full, no_plans):
    rng = np.random.default_rng(shape[-1] * 67 + full)
    a = rand(rng, shape, dtype)
    m, n = shape[-2:]
    k = min(m, n)
    want = per_matrix(lambda x: np.linalg.svd(x, compute_uv=False), a)
    u, s, vh = la.svd(a, full_matrices=full)
    assert u.shape == shape[:-2] + ((m, m) if full else (m, k)) and u.dtype == a.dtype
    assert rel(s, want) < tol(dtype, max(m, n))
    assert rel((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], up(a)) < tol(dtype, max(m, n))
    assert rel(la.svdvals(a), want) < tol(dtype, max(m, n))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", STACKS)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_of_stacks(dtype, shape, uplo, no_plans):
    rng = np.random.default_rng(shape[-1] * 71 + len(uplo))
    g = up(rand(rng, shape, dtype))
    a = (g + np.swapaxes(g, -1, -2).conj()).astype(dtype)
    read = np.tril(a) if uplo == "L" else np.triu(a)  # the other triangle is never read
    given_a = (read + (np.triu(rand(rng, shape, dtype), 1) if uplo == "L" else np.tril(rand(rng, shape, dtype), -1)))
    given_a = given_a.astype(dtype)
    want = per_matrix(lambda x: np.linalg.eigvalsh(x, UPLO=uplo), a)
    w, v = la.eigh(given_a, UPLO=uplo)
    assert type(la.eigh(given_a, UPLO=uplo)).__name__ == "EighResult"
    assert rel(w, want) < tol(dtype, shape[-1]) * 10
    assert rel(up(a) @ up(v), up(v) * up(w)[..., None, :]) < tol(dtype, shape[-1]) * 10
    assert rel(la.eigvalsh(given_a, UPLO=uplo), want) < tol(dtype, shape[-1]) * 10


def test_a_failing_matrix_of_a_stack_is_named():
    s = np.stack([np.eye(3)] * 4).reshape(2, 2, 3, 3)
    s[1, 0, 2, 2] = -1.0
    with pytest.raises(np.linalg.LinAlgError, match=r"leading minor of order 3 is not\) \(batch element \(1, 0\)\)"):
        la.cholesky(s)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", FACTOR_ORDERS)
@pytest.mark.parametrize("trans", [0, 1, 2])
def test_lu_factor_and_solve(dtype, n, trans, no_plans):
    rng = np.random.default_rng(n * 73 + trans)
    a = well_conditioned(rng, n, dtype)
    b = rand(rng, (n, 3), dtype)
    op = {0: lambda m: m, 1: lambda m: m.T, 2: lambda m: m.conj().T}[trans]
    for name, view in layouts(a, transposed=True).items():
        kept = view.copy()
        lu, piv = la.lu_factor(view)
        assert lu.shape == a.shape and lu.dtype == a.dtype and piv.dtype == np.int32, name
        for rhs in (b, b[:, 0]):
            x = la.lu_solve((lu, piv), rhs, trans=trans)
            assert x.shape == rhs.shape and x.dtype == a.dtype, name
            assert rel(x, np.linalg.solve(op(up(a)), up(rhs))) < tol(dtype, n), name
        np.testing.assert_array_equal(view, kept)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", FACTOR_ORDERS)
@pytest.mark.parametrize("lower", [False, True])
def test_cho_factor_and_solve(dtype, n, lower, no_plans):
    rng = np.random.default_rng(n * 79 + lower)
    a = positive_definite(rng, n, dtype)
    b = rand(rng, (n, 2), dtype)
    for name, view in layouts(a, transposed=True).items():
        kept = view.copy()
        c, flag = la.cho_factor(view, lower=lower)
        assert flag is lower and c.dtype == a.dtype, name
        assert rel(c, np.linalg.cholesky(up(a), upper=not lower)) < tol(dtype, n), name
        for rhs in (b, b[:, 1]):
            x = la.cho_solve((c, lower), rhs)
            assert x.shape == rhs.shape, name
            assert rel(x, np.linalg.solve(up(a), up(rhs))) < tol(dtype, n) * 10, name
        np.testing.assert_array_equal(view, kept)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", FACTOR_ORDERS)
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("trans", [0, "T", 2])
def test_solve_triangular(dtype, n, lower, trans, no_plans):
    rng = np.random.default_rng(n * 83 + lower)
    full = (rand(rng, (n, n), dtype) / np.sqrt(n) + 2 * np.eye(n)).astype(dtype)  # unit diagonal too: well conditioned
    t = np.tril(full) if lower else np.triu(full)
    op = {0: lambda m: m, "T": lambda m: m.T, 2: lambda m: m.conj().T}[trans]
    b = rand(rng, (n, 4), dtype)
    for unit in (False, True):
        ref_t = up(t) - np.diag(np.diag(up(t))) + np.eye(n) if unit else up(t)
        for name, view in layouts(full, transposed=True).items():  # the other triangle is never read
            kept = view.copy()
            x = la.solve_triangular(view, b, lower=lower, trans=trans, unit_diagonal=unit)
            assert x.shape == b.shape and x.dtype == b.dtype, name
            assert rel(x, np.linalg.solve(op(ref_t), up(b))) < tol(dtype, n), name
            np.testing.assert_array_equal(view, kept)


def test_singular_factors_and_bad_pivots_take_the_plans_errors():
    t = np.triu(np.ones((4, 4)))
    t[2, 2] = 0.0
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        la.solve_triangular(t, np.ones(4))
    lu, piv = la.lu_factor(np.ones((4, 4)))  # exactly singular: factored
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        la.lu_solve((lu, piv), np.ones(4))
    lu, piv = la.lu_factor(np.eye(4) * 2)
    with pytest.raises(Exception, match="piv"):
        la.lu_solve((lu, np.array([0, 1, 7, 3], np.int32)), np.ones(4))
    lu, piv = la.lu_factor(np.eye(FROM_ORDER - 1) * 2)  # beyond the compiled getrs: checked in Python
    for bad in (np.full(FROM_ORDER - 1, FROM_ORDER + 5, np.int32), np.full(FROM_ORDER - 1, -1, np.int32), piv[:-1]):
        with pytest.raises(Exception, match="piv"):
            la.lu_solve((lu, bad), np.ones(FROM_ORDER - 1))
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        la.cho_factor(-np.eye(3))
