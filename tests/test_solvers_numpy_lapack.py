"""LU and Cholesky on NumPy's own OpenBLAS (``lapack="numpy"`` candidates, n >= 256).

The wrappers (nvmathpy/linalg/solvers/cpu/_numpy_lapack.py) call the Fortran entry points of the
OpenBLAS NumPy loaded, with SciPy's f2py calling conventions; here they are compared with
SciPy's wrappers and float64 references, through the plans, on odd orders, every LAPACK dtype,
C / F / strided layouts and batches, with singular and non-positive-definite members.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

from nvmathpy.errors import LinAlgError
from nvmathpy.linalg import LU, Cholesky
from nvmathpy.linalg.solvers.cpu import _numpy_algorithms as numpy_algorithms, _numpy_lapack as numpy_lapack

DTYPES = ["float32", "float64", "complex64", "complex128"]
TOL = {"float32": 2e-4, "complex64": 2e-4, "float64": 1e-11, "complex128": 1e-11}
N = numpy_lapack.FROM_ORDER + 1  # odd, just above the threshold

pytestmark = pytest.mark.skipif(not numpy_lapack.available(np.float64, "getrf", "getrs", "potrf", "potrs"),
                                reason="NumPy's BLAS exports no LAPACK here")


def rand(rng, shape, dtype, layout="C"):
    full = shape[:-1] + (2 * shape[-1],) if layout == "strided" else shape
    x = rng.standard_normal(full)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(full)
    x = x.astype(dtype)
    if layout == "F":
        return np.asfortranarray(x) if x.ndim == 2 else np.swapaxes(np.ascontiguousarray(np.swapaxes(x, -1, -2)), -1, -2)
    return x[..., ::2] if layout == "strided" else x


def wide(x):
    x = np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def rel(x, ref):
    x, ref = wide(x), wide(ref)
    assert x.shape == ref.shape and np.isfinite(x).all()
    return np.linalg.norm(x - ref) / np.linalg.norm(ref)


def hpd(rng, shape, dtype, layout="C"):
    g = wide(rand(rng, shape, dtype))
    a = g @ np.swapaxes(g.conj(), -1, -2) + shape[-1] * np.eye(shape[-1])
    a = a.astype(dtype)
    if layout == "F":
        return np.swapaxes(np.ascontiguousarray(np.swapaxes(a, -1, -2)), -1, -2)
    return a


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_lu_on_numpy_openblas(dtype, layout, batch):
    rng = np.random.default_rng(1)
    a = rand(rng, batch + (N, N), dtype, layout) + 4 * np.sqrt(N) * np.eye(N, dtype=dtype)
    before = a.copy()
    with LU(a) as lu:
        lu.plan()
        assert lu.candidate.params.get("lapack") == "numpy"
        for trans in (0, 1, 2):
            b = rand(rng, batch + (N, 3), dtype)
            op = {0: a, 1: np.swapaxes(a, -1, -2), 2: np.swapaxes(a.conj(), -1, -2)}[trans]
            assert rel(wide(op) @ wide(lu.solve(b, trans=trans)), b) < TOL[dtype]
        if not batch:
            vector = rand(rng, (N,), dtype)
            assert rel(wide(a) @ wide(lu.solve(vector)), vector) < TOL[dtype]
            factors, piv = lu.factors
            ref_lu, ref_piv = sla.lu_factor(wide(a))
            assert np.array_equal(piv, ref_piv)  # the same pivots as LAPACK's getrf through SciPy
            assert rel(factors, ref_lu) < TOL[dtype]
            sign, logdet = lu.slogdet()  # the determinant itself overflows at this order
            ref_sign, ref_logdet = np.linalg.slogdet(wide(a))
            assert abs(sign - ref_sign) < 1e2 * TOL[dtype] and abs(logdet - ref_logdet) < 1e2 * TOL[dtype] * abs(ref_logdet)
    np.testing.assert_array_equal(a, before)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_on_numpy_openblas(dtype, layout, lower):
    rng = np.random.default_rng(2)
    a = hpd(rng, (2, N, N), dtype, layout)
    before = a.copy()
    with Cholesky(a, lower=lower) as ch:
        ch.plan()
        assert ch.candidate.params.get("lapack") == "numpy"
        b = rand(rng, (2, N, 2), dtype)
        assert rel(wide(a) @ wide(ch.solve(b)), b) < TOL[dtype]
        ref = np.linalg.cholesky(wide(a))
        assert rel(ch.factor, ref if lower else np.swapaxes(ref.conj(), -1, -2)) < TOL[dtype]
    np.testing.assert_array_equal(a, before)


def test_small_orders_stay_on_scipy():
    a = np.eye(numpy_lapack.FROM_ORDER - 1) * 2
    assert LU(a).plan().candidate.params.get("lapack") is None
    assert Cholesky(a).plan().candidate.params.get("lapack") is None


def test_singular_and_not_positive_definite_members_are_named():
    rng = np.random.default_rng(3)
    a = rand(rng, (3, N, N), "float64") + 4 * np.sqrt(N) * np.eye(N)
    a[1, :, 5] = 0  # a zero column: exactly singular
    lu = LU(a)
    lu.plan()
    with pytest.raises(LinAlgError, match=r"batch element 1"):
        lu.solve(np.ones((3, N, 1)))
    s = hpd(rng, (3, N, N), "float64")
    s[2, 7, 7] = -1.0
    with pytest.raises(LinAlgError, match=r"batch element 2"):
        Cholesky(s).plan().execute()


def test_the_wrappers_keep_scipys_conventions():
    rng = np.random.default_rng(4)
    a = np.asfortranarray(rng.standard_normal((N, N)))  # not diagonally dominant: rows are swapped
    keep = a.copy()
    getrf, getrs, potrf, potrs = numpy_lapack.routines(a.dtype, "getrf", "getrs", "potrf", "potrs")
    lu, piv, info = getrf(a)
    ref_lu, ref_piv, _ = sla.lapack.dgetrf(a)
    assert info == 0 and piv.dtype == np.int32 and np.array_equal(piv, ref_piv) and np.allclose(lu, ref_lu)
    assert not np.array_equal(piv, np.arange(N))
    np.testing.assert_array_equal(a, keep)  # overwrite_a=0: the input is untouched
    for b in (rng.standard_normal(N), rng.standard_normal((N, 2))):
        for trans in (0, 1):
            x, info = getrs(lu, piv, b, trans=trans)
            assert info == 0 and x.shape == b.shape
            assert np.allclose(x, sla.lapack.dgetrs(ref_lu, ref_piv, b, trans=trans)[0])
    mine = a.copy(order="F")
    assert getrf(mine, overwrite_a=1)[0] is mine  # allowed: factored in place
    s = a @ a.T + N * np.eye(N)
    for lower in (0, 1):
        c, info = potrf(s, lower=lower)
        ref, _ = sla.lapack.dpotrf(s, lower=lower)
        assert info == 0 and np.allclose(c, ref)  # clean=1: the other triangle zeroed as SciPy does
        x, info = potrs(c, np.ones(N), lower=lower)
        assert np.allclose(s @ x, 1.0)
    assert potrf(-s)[1] > 0  # not positive definite: info names the minor


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("nrhs", [None, 1, 2, numpy_lapack.POTRS_BY_COLUMN, numpy_lapack.POTRS_BY_COLUMN + 1, 0])
def test_potrs_column_by_column_and_through_trsm_agree_with_scipy(dtype, lower, nrhs):
    rng = np.random.default_rng(5)
    s = hpd(rng, (N, N), dtype)
    potrf, potrs = numpy_lapack.routines(dtype, "potrf", "potrs")
    c, info = potrf(s, lower=lower)
    b = rand(rng, (N,) if nrhs is None else (N, nrhs), dtype)
    keep = b.copy()
    x, info = potrs(c, b, lower=lower)
    ref, _ = sla.get_lapack_funcs("potrs", dtype=np.dtype(dtype))(c, b, lower=lower)
    np.testing.assert_array_equal(b, keep)
    assert info == 0 and x.shape == b.shape and x.dtype == np.dtype(dtype)
    if nrhs != 0:
        assert rel(x, ref) < TOL[dtype]
        assert rel(wide(s) @ wide(x), b) < TOL[dtype]


@pytest.mark.parametrize("dtype", ["float64", "complex64"])
@pytest.mark.parametrize("layout", ["C", "F"])
def test_the_numpy_flavoured_functions_factor_large_matrices_on_numpy_openblas(monkeypatch, dtype, layout):
    """``nvmathpy.linalg``'s factorizations and their solves run on NumPy's pool from
    ``FROM_ORDER`` (with NumPy's products); the scipy.linalg drop-in's stay on SciPy's up to the
    calibrated orders (``tests/test_scipy_linalg_pool.py``)."""
    import nvmathpy.linalg as nl
    from nvmathpy.linalg.solvers._cached import CACHE

    used = []
    real = numpy_lapack.routines

    def counted(dtype_, *names):
        used.extend(names)
        return real(dtype_, *names)

    monkeypatch.setattr(numpy_lapack, "routines", counted)  # the plans' way to NumPy's routines
    CACHE.clear()  # plans built by earlier tests would not look their routines up again
    rng = np.random.default_rng(5)
    a = rand(rng, (N, N), dtype, layout) + 4 * np.sqrt(N) * np.eye(N, dtype=dtype)
    s = hpd(rng, (N, N), dtype, layout)
    b = rand(rng, (N, 2), dtype)
    lu_piv = nl.lu_factor(a)
    ref = sla.lu_factor(a)
    assert np.array_equal(lu_piv[1], ref[1]) and rel(lu_piv[0], ref[0]) < TOL[dtype]
    assert rel(nl.lu_solve(lu_piv, b), sla.lu_solve(ref, b)) < TOL[dtype]
    c = nl.cho_factor(s)
    assert rel(nl.cho_solve(c, b), sla.cho_solve(sla.cho_factor(s), b)) < TOL[dtype]
    assert rel(nl.cholesky(s), sla.cholesky(s, lower=True)) < TOL[dtype]
    assert {"getrf", "getrs", "potrf", "potrs"} <= set(used)
    CACHE.clear()


@pytest.mark.parametrize("dtype", ["float64", "complex128", "float32"])
@pytest.mark.parametrize("lower", [True, False])
def test_large_eigh_runs_numpys_syevd(dtype, lower):
    import nvmathpy.scipy.linalg as nsl
    from nvmathpy.linalg import Eigh

    rng = np.random.default_rng(6)
    a = hpd(rng, (N, N), dtype) - N * np.eye(N, dtype=dtype)  # indefinite
    triangle = np.tril(a) if lower else np.triu(a)  # only the named triangle may be read
    with Eigh(triangle, lower=lower) as plan:
        plan.plan()
        assert plan.candidate.label == "numpy"
        w, v = plan.execute()
    ref = np.linalg.eigvalsh(wide(a))
    assert rel(w, ref) < TOL[dtype] * 10
    assert rel(wide(a) @ wide(v), wide(v) * wide(w)) < TOL[dtype] * 100
    w2 = nsl.eigh(a, lower=lower, eigvals_only=True)
    assert rel(w2, sla.eigh(a, lower=lower, eigvals_only=True)) < TOL[dtype] * 10
