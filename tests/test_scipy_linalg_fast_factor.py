"""The compiled one-call paths of ``cholesky``/``cho_factor``, ``solve_triangular``, ``qr``, ``svd``
(and ``pinv``/``orth``/``null_space`` through :func:`nvmathpy.scipy.linalg._decomp.svd_matrix`) and
general ``solve`` beyond order 64 (``linalg/solvers/cpu/_fast_c_factor.py``, ``_fast_c_svd.py``):
results agree with SciPy's by relative error and with the Python fallback, SciPy's errors and
messages, inputs left alone unless ``overwrite_*`` asks (and then in place exactly where SciPy's
is), and what the C side declines still works."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
from test_scipy_linalg_fast import FAST, _fallback, needs_fast
from test_solvers_helpers import DTYPES, rand, relerr, spd, tol, well, wide

import nvmathpy.scipy.linalg as nla
from nvmathpy.errors import LinAlgError

SIZES = (1, 2, 5, 13, 67)
LAYOUTS = ("C", "F", "strided", "T")


def _layout(a, layout):
    if layout == "F":
        return np.asfortranarray(a)
    if layout == "T":  # a transposed view of a C-ordered array: Fortran-ordered, not owning its data
        return np.ascontiguousarray(a.T).T
    if layout == "strided":
        big = np.zeros((2 * a.shape[0], 3 * a.shape[1]), a.dtype)
        big[::2, ::3] = a
        return big[::2, ::3]
    return np.ascontiguousarray(a)


def _close(ours, ref, dtype, n, factor=10):
    assert ours.shape == ref.shape and ours.dtype == ref.dtype, (ours.shape, ref.shape, ours.dtype, ref.dtype)
    assert relerr(ours, ref) < tol(dtype, n) * factor


@needs_fast
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cholesky(dtype, n, layout, monkeypatch):
    a = _layout(spd(np.random.default_rng(n), n, dtype), layout)
    keep = a.copy()
    for lower in (False, True):
        c = nla.cholesky(a, lower=lower)
        _close(c, sla.cholesky(a, lower=lower), dtype, n)
        assert c.dtype == np.dtype(dtype)
        cf, low = nla.cho_factor(a, lower=lower)
        tri = np.tril if lower else np.triu
        assert low == lower
        _close(tri(cf), tri(sla.cho_factor(wide(a), lower=lower)[0]).astype(dtype), dtype, n)
        np.testing.assert_array_equal(a, keep)
        with monkeypatch.context() as m:
            _fallback(m)
            _close(nla.cholesky(a, lower=lower), c, dtype, n, 1)
    assert FAST.cholesky(a, False, True, False, True) is not NotImplemented


@needs_fast
@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_errors(dtype):
    bad = np.array([[1.0, 2.0], [2.0, 1.0]], dtype)
    for fn in (sla.cholesky, nla.cholesky, sla.cho_factor, nla.cho_factor):
        with pytest.raises(LinAlgError, match="^2-th leading minor of the array is not positive definite$"):
            fn(bad)
    for value in (np.nan, np.inf):
        a = spd(np.random.default_rng(1), 4, dtype)
        a[2, 1] = value
        with pytest.raises(ValueError, match="array must not contain infs or NaNs"):
            nla.cholesky(a)
        outcomes = []  # no check: LAPACK's answer, SciPy's error where it gives one
        for fn in (sla.cho_factor, nla.cho_factor):
            try:
                outcomes.append(np.isnan(fn(a, check_finite=False, lower=True)[0]).any())
            except LinAlgError as exc:
                outcomes.append(str(exc))
        assert outcomes[0] == outcomes[1]
    with pytest.raises(ValueError, match="expected to be square"):
        nla.cholesky(np.ones((2, 3), dtype))


@needs_fast
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", (1, 3, 13))
@pytest.mark.parametrize("b_layout", ("1d", "C", "F", "strided"))
@pytest.mark.parametrize("layout", ("C", "F", "strided"))
def test_solve_triangular(dtype, n, b_layout, layout, monkeypatch):
    rng = np.random.default_rng(n + 7)
    full = well(rng, n, dtype)
    b = rand(rng, (n,) if b_layout == "1d" else (n, 3), dtype)
    b = b if b_layout == "1d" else _layout(b, b_layout)
    b_keep = b.copy()
    for lower in (False, True):
        a = _layout(np.tril(full) if lower else np.triu(full), layout)
        for trans in (0, 1, 2, "N", "T", "C"):
            for unit in (False, True):
                x = nla.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit)
                ref = sla.solve_triangular(wide(a), wide(b), trans=trans, lower=lower, unit_diagonal=unit)
                _close(x, ref.astype(dtype), dtype, n, 100)
                np.testing.assert_array_equal(b, b_keep)
                with monkeypatch.context() as m:
                    _fallback(m)
                    y = nla.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit)
                _close(x, y, dtype, n, 100)


@needs_fast
def test_solve_triangular_errors_and_declines():
    a = np.array([[1.0, 0.0], [1.0, 0.0]])
    for fn in (sla.solve_triangular, nla.solve_triangular):
        with pytest.raises(LinAlgError, match="^singular matrix: resolution failed at diagonal 1$"):
            fn(a, np.ones(2), lower=True)
    with pytest.raises(ValueError, match="array must not contain infs or NaNs"):
        nla.solve_triangular(np.eye(2), np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="trans must be"):
        nla.solve_triangular(np.eye(2), np.ones(2), trans="X")
    # declined by the C side (mixed dtypes, numpy integer trans, a batch): the Python path's result
    mixed = nla.solve_triangular(np.eye(3, dtype=np.float32) * 2, np.ones(3), trans=np.int64(1))
    assert mixed.dtype == np.float64 and np.allclose(mixed, 0.5)
    assert FAST.solve_triangular(np.eye(3, dtype=np.float32), np.ones(3), 0, False, False, False, True) \
        is NotImplemented
    batch = nla.solve_triangular(np.stack([np.eye(2) * 2] * 3), np.ones((3, 2, 1)))
    assert batch.shape == (3, 2, 1) and np.allclose(batch, 0.5)


def test_solve_triangular_overwrite_b_as_scipy():
    """The repro of issue 21: SciPy's in-place update of a row of L (b a contiguous 1-D view)."""
    rows = []
    for fn in (sla.solve_triangular, nla.solve_triangular):
        low = np.zeros((3, 3))
        low[0, 0], low[1, :2], low[2, :2] = 2, [1, 3], [4, 5]
        fn(low[:2, :2], low[2, :2], trans=0, lower=1, overwrite_b=True, check_finite=False)
        rows.append(low[2, :2].copy())
    np.testing.assert_allclose(rows[1], rows[0])
    np.testing.assert_allclose(rows[1], [2.0, 1.0])


def _overwrite_inputs(dtype):
    base = np.array([[4.0, 2.0, 0.5], [2.0, 5.0, 1.0], [0.5, 1.0, 3.0]])
    readonly = np.asfortranarray(base.astype(dtype))
    readonly.flags.writeable = False
    return {"F": np.asfortranarray(base.astype(dtype)), "C": np.ascontiguousarray(base.astype(dtype)),
            "readonly": readonly, "float16": np.asfortranarray(base.astype(np.float16))}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["cholesky", "cho_factor", "lu_factor", "solve_triangular"])
def test_overwrite_shares_memory_as_scipy(name, dtype, monkeypatch):
    """``overwrite_a``/``overwrite_b``: the result is the input's memory exactly where SciPy's is
    (Fortran-ordered, of the LAPACK dtype: SciPy's f2py wrappers write read-only arrays too),
    on the compiled and the Python paths, with the values SciPy's leaves there."""

    def run(module, x):
        if name == "solve_triangular":  # x is b; a is triangular of x's dtype
            return module.solve_triangular(np.triu(x), x, overwrite_b=True), x
        out = getattr(module, name)(x, overwrite_a=True)
        return (out[0] if isinstance(out, tuple) else out), x

    for paths in ("fast", "fallback"):
        with monkeypatch.context() as m:
            if paths == "fallback":
                _fallback(m)
            for layout in ("F", "C", "readonly", "float16"):
                ours_in, ref_in = _overwrite_inputs(dtype)[layout], _overwrite_inputs(dtype)[layout]
                ours, ours_arg = run(nla, ours_in)
                ref, ref_arg = run(sla, ref_in)
                assert np.shares_memory(ours, ours_arg) == np.shares_memory(ref, ref_arg), (paths, layout)
                assert relerr(ours_arg, ref_arg) < tol(dtype, 3) * 10
                assert relerr(ours, ref) < tol(dtype, 3) * 10


@needs_fast
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (1, 3), (3, 1), (5, 5), (7, 4), (4, 7), (70, 67)])
@pytest.mark.parametrize("layout", ("C", "F", "strided", "T"))
def test_qr(dtype, shape, layout, monkeypatch):
    a = _layout(rand(np.random.default_rng(shape[0] * 31 + shape[1]), shape, dtype), layout)
    keep = a.copy()
    n = max(shape)
    for mode in ("full", "economic", "r", "raw"):
        ours, ref = nla.qr(a, mode=mode), sla.qr(a, mode=mode)
        assert type(ours) is type(ref) and len(ours) == len(ref)
        if mode == "raw":
            (h, tau), r = ours
            (h_ref, tau_ref), r_ref = ref
            pairs = [(h, h_ref), (tau, tau_ref), (r, r_ref)]
        else:
            pairs = list(zip(ours, ref))
        for o, s in pairs:
            _close(o, s, dtype, n, 100)
        if mode in ("full", "economic"):
            q, r = ours
            _close(q @ r, a.astype(dtype), dtype, n, 100)
        with monkeypatch.context() as m:
            _fallback(m)
            back = nla.qr(a, mode=mode)
        assert len(back) == len(ours)
    np.testing.assert_array_equal(a, keep)
    assert FAST.qr(a, 0, True) is not NotImplemented


@needs_fast
def test_qr_errors_and_declines():
    with pytest.raises(ValueError, match="array must not contain infs or NaNs"):
        nla.qr(np.array([[1.0, np.inf], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="Mode argument should be one of"):
        nla.qr(np.eye(2), mode="x")
    with pytest.raises(ValueError, match="Mode argument should be one of"):
        nla.qr(np.eye(2), mode=["full"])
    a = rand(np.random.default_rng(3), (6, 4), np.float64)
    q, r, p = nla.qr(a, pivoting=True)  # the Python path
    assert np.allclose(q @ r, a[:, p])
    q, r = nla.qr(a, lwork=64)
    assert np.allclose(q @ r, a)


@needs_fast
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (5, 3), (3, 5), (13, 13), (67, 61)])
@pytest.mark.parametrize("layout", ("C", "F", "strided"))
def test_svd(dtype, shape, layout, monkeypatch):
    a = _layout(rand(np.random.default_rng(shape[0] + 5 * shape[1]), shape, dtype), layout)
    keep = a.copy()
    k, n = min(shape), max(shape)
    real = np.float32 if np.dtype(dtype) in (np.float32, np.complex64) else np.float64
    for driver in ("gesdd", "gesvd"):
        for full in (True, False):
            u, s, vh = nla.svd(a, full_matrices=full, lapack_driver=driver)
            u_ref, s_ref, vh_ref = sla.svd(a, full_matrices=full, lapack_driver=driver)
            assert (u.shape, s.shape, vh.shape) == (u_ref.shape, s_ref.shape, vh_ref.shape)
            assert u.dtype == np.dtype(dtype) and s.dtype == real and vh.dtype == np.dtype(dtype)
            _close(s, s_ref, dtype, n, 100)
            _close((u[:, :k] * s) @ vh[:k], a.astype(dtype), dtype, n, 100)
            _close(u.conj().T @ u, np.eye(u.shape[1], dtype=dtype), dtype, n, 100)
        _close(nla.svd(a, compute_uv=False, lapack_driver=driver), s_ref, dtype, n, 100)
    _close(nla.pinv(a), sla.pinv(a), dtype, n, 1000)
    assert nla.orth(a).shape == sla.orth(a).shape
    assert nla.null_space(a).shape == sla.null_space(a).shape
    with monkeypatch.context() as m:
        _fallback(m)
        _close(nla.svd(a, compute_uv=False), s_ref, dtype, n, 100)
        _close(nla.pinv(a), sla.pinv(a), dtype, n, 1000)
    np.testing.assert_array_equal(a, keep)
    assert FAST.svd(a, True, True, False, True) is not NotImplemented


@needs_fast
def test_svd_non_finite():
    bad = np.array([[1.0, np.nan], [0.0, 1.0]])
    for fn in (nla.svd, nla.pinv):
        with pytest.raises(ValueError, match="array must not contain infs or NaNs"):
            fn(bad)
    assert FAST.svd(bad, True, True, False, False) is NotImplemented  # the Python path reports it
    with pytest.raises((ValueError, LinAlgError)):
        nla.svd(bad, check_finite=False)
    with pytest.raises(ValueError, match="lapack_driver"):
        nla.svd(np.eye(2), lapack_driver="gesvx")


@needs_fast
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", (65, 131))
def test_solve_general_beyond_small_orders(dtype, n, monkeypatch):
    rng = np.random.default_rng(n)
    a, b = well(rng, n, dtype), rand(rng, (n, 2), dtype)
    for layout in ("C", "F"):
        x = nla.solve(_layout(a, layout), b)
        _close(x, sla.solve(wide(a), wide(b)).astype(dtype), dtype, n, 100)
        assert FAST.solve_gen(_layout(a, layout), b, False, True) is not NotImplemented
        with monkeypatch.context() as m:
            _fallback(m)
            _close(nla.solve(_layout(a, layout), b), x, dtype, n, 100)
    singular = np.ones((n, n), dtype)
    with pytest.raises(LinAlgError, match="singular"):
        nla.solve(singular, b)
