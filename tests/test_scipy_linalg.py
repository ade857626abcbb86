"""nvmathpy.scipy.linalg against scipy.linalg 1.17: signatures, results, return
conventions (types, shapes, dtypes, tuple arity), errors, warnings, check_finite,
untouched inputs, batches and layouts."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
import scipy.linalg as sla
from test_solvers_helpers import DTYPES, LAYOUTS, herm, in_layout, rand, relerr, spd, tol, well, wide

import nvmathpy.scipy.linalg as nla

NAMES = ["solve", "inv", "det", "lstsq", "lu", "lu_factor", "lu_solve", "cholesky", "cho_factor", "cho_solve", "qr",
         "eigh", "eigvalsh", "svd", "svdvals", "solve_triangular"]


@pytest.mark.parametrize("name", NAMES)
def test_signature_is_scipys(name):
    ours, theirs = inspect.signature(getattr(nla, name)), inspect.signature(getattr(sla, name))
    assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == \
        [(p.name, p.kind, p.default) for p in theirs.parameters.values()]


def _agree(call, dtype, n, factor=10.0):
    """Call with SciPy and with nvmathpy: same results, or the same exception type."""
    try:
        theirs = call(sla)
    except Exception as exc:  # noqa: BLE001 - whatever SciPy raises, we must raise too
        with pytest.raises(type(exc)):
            call(nla)
        return
    _same(call(nla), theirs, dtype, n, factor)


def _same(ours, theirs, dtype, n, factor=10.0):
    assert type(ours) is type(theirs)
    if isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _same(o, t, dtype, n, factor)
        return
    if theirs is None or isinstance(theirs, (int, np.integer)):
        assert ours == theirs
        return
    assert np.shape(ours) == np.shape(theirs) and np.asarray(ours).dtype == np.asarray(theirs).dtype
    if np.asarray(theirs).dtype == object:
        assert np.asarray(ours).tolist() == np.asarray(theirs).tolist()
    elif np.size(theirs):
        assert relerr(ours, theirs) < tol(dtype, n) * factor


STRUCTS = {
    None: lambda rng, n, dt: well(rng, n, dt),
    "gen": lambda rng, n, dt: well(rng, n, dt),
    "diagonal": lambda rng, n, dt: np.diag(np.diagonal(well(rng, n, dt))),
    "upper triangular": lambda rng, n, dt: np.triu(well(rng, n, dt)),
    "lower triangular": lambda rng, n, dt: np.tril(well(rng, n, dt)),
    "pos": lambda rng, n, dt: spd(rng, n, dt),
    "sym": lambda rng, n, dt: (lambda x: (x + x.T) / 2 + 3 * n * np.eye(n, dtype=dt))(well(rng, n, dt)),
    "her": lambda rng, n, dt: herm(rng, n, dt) + 3 * n * np.eye(n, dtype=dt),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("assume_a", list(STRUCTS))
@pytest.mark.parametrize("n", [1, 3, 8, 20])
@pytest.mark.parametrize("layout", ["C", "F"])
def test_solve_structures(dtype, assume_a, n, layout):
    rng = np.random.default_rng(n)
    a = in_layout(STRUCTS[assume_a](rng, n, dtype).astype(dtype), layout)
    b = rand(rng, (n,), dtype)
    keep = a.copy(), b.copy()
    for lower in (False, True):
        kw = {"assume_a": assume_a, "lower": lower}
        _same(nla.solve(a, b, **kw), sla.solve(a, b, **kw), dtype, n)
    if np.dtype(dtype).kind == "f":
        _same(nla.solve(a, b, transposed=True, assume_a=assume_a), sla.solve(a, b, transposed=True, assume_a=assume_a),
              dtype, n)
    np.testing.assert_array_equal(a, keep[0])
    np.testing.assert_array_equal(b, keep[1])


@pytest.mark.parametrize("assume_a", [None, "gen", "pos"])
def test_solve_batched_and_detection(assume_a):
    rng = np.random.default_rng(0)
    a = spd(rng, 4, np.float64, (3, 2))
    a[0, 1] = np.triu(a[0, 1])  # one triangular slice among SPD ones
    b = rand(rng, (3, 1, 4, 2), np.float64)
    if assume_a == "pos":
        a[0, 1] = spd(rng, 4, np.float64)
    _same(nla.solve(a, b, assume_a=assume_a), sla.solve(a, b, assume_a=assume_a), np.float64, 4)
    _same(nla.solve(a, np.ones(4)), sla.solve(a, np.ones(4)), np.float64, 4)


def test_solve_errors_and_warnings():
    a = well(np.random.default_rng(1), 4, np.float64, (3,))
    a[1] = 0
    with pytest.raises(np.linalg.LinAlgError, match=r"slice\(s\) \[1\] are singular"):
        nla.solve(a, np.ones(4))
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        nla.solve(np.zeros((3, 3)), np.ones(3))
    with pytest.warns(sla.LinAlgWarning, match="ill-conditioned"):
        nla.solve(np.array([[1.0, 1.0], [1.0, 1.0 + 1e-17 + 2e-16]]), np.ones(2))
    with pytest.warns(sla.LinAlgWarning):
        nla.solve(np.diag([1.0, 1e-20]), np.ones(2))
    with pytest.raises(ValueError, match="infs or NaNs"):
        nla.solve(np.array([[1.0, np.nan], [0, 1]]), np.ones(2))
    with pytest.raises(ValueError, match="infs or NaNs"):
        nla.solve(np.eye(2), np.array([1.0, np.inf]))
    nla.solve(np.eye(2), np.array([1e300, 1e300]))  # finite, though its squares overflow
    with pytest.raises(ValueError, match="square"):
        nla.solve(np.ones((2, 3)), np.ones(2))
    with pytest.raises(ValueError, match="incompatible shapes"):
        nla.solve(np.eye(3), np.ones(2))
    with pytest.raises(ValueError, match="not a recognized"):
        nla.solve(np.eye(3), np.ones(3), assume_a="foo")
    with pytest.raises(NotImplementedError):
        nla.solve(np.eye(2, dtype=complex), np.ones(2), transposed=True)


def test_solve_dtypes_empty_scalar():
    for a_dt, b_dt in [(np.float32, np.float16), (int, int), (np.float32, np.complex64), (np.float32, np.float64)]:
        a, b = np.eye(2, dtype=a_dt) * 2, np.ones(2, dtype=b_dt)
        _same(nla.solve(a, b), sla.solve(a, b), np.float32, 2)
    _same(nla.solve(np.empty((0, 0)), np.empty(0)), sla.solve(np.empty((0, 0)), np.empty(0)), np.float64, 1)
    _same(nla.solve(np.array([[2.0]]), np.array([3.0])), sla.solve(np.array([[2.0]]), np.array([3.0])), np.float64, 1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("assume_a", [None, "gen", "pos", "diagonal", "upper triangular", "lower triangular"])
def test_inv(dtype, assume_a):
    rng = np.random.default_rng(2)
    a = np.stack([STRUCTS[assume_a if assume_a != "gen" else None](rng, 6, dtype) for _ in range(2)]).astype(dtype)
    _same(nla.inv(a, assume_a=assume_a), sla.inv(a, assume_a=assume_a), dtype, 6)
    _same(nla.inv(a[0].T, assume_a=assume_a if assume_a in (None, "gen", "pos", "diagonal") else None),
          sla.inv(a[0].T, assume_a=assume_a if assume_a in (None, "gen", "pos", "diagonal") else None), dtype, 6)
    with pytest.raises(np.linalg.LinAlgError, match=r"\[0\]"):
        nla.inv(np.zeros((3, 3), dtype))


@pytest.mark.parametrize("dtype", DTYPES + [int])
def test_det(dtype):
    rng = np.random.default_rng(3)
    a = (well(rng, 5, np.float64, (2,)) * 3).astype(dtype)
    _same(nla.det(a), sla.det(a), np.float64, 5, factor=1e6 if np.dtype(dtype).itemsize <= 8 else 10)
    _same(nla.det(a[0]), sla.det(a[0]), np.float64, 5, factor=1e6)
    for shape in [(0, 0), (1, 1), (2, 0, 0)]:
        x = np.full(shape, 3.0, dtype)
        _same(nla.det(x), sla.det(x), np.float64, 1)


@pytest.mark.parametrize("driver", [None, "gelsd", "gelsy", "gelss"])
@pytest.mark.parametrize("shape,bshape", [((7, 4), (7,)), ((7, 4), (7, 2)), ((4, 7), (4,)), ((5, 5), (5, 3))])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_lstsq(driver, shape, bshape, dtype):
    rng = np.random.default_rng(4)
    a, b = rand(rng, shape, dtype), rand(rng, bshape, dtype)
    _same(nla.lstsq(a, b, lapack_driver=driver), sla.lstsq(a, b, lapack_driver=driver), dtype, 30, factor=100)
    ab, bb = rand(rng, (2,) + shape, dtype), rand(rng, (2,) + bshape, dtype)
    _agree(lambda m: m.lstsq(ab, bb, lapack_driver=driver), dtype, 30, factor=100)
    with pytest.raises(ValueError, match="not found"):
        nla.lstsq(a, b, lapack_driver="gels")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 5), (6, 3), (3, 6), (2, 4, 4)])
def test_lu(dtype, shape):
    a = rand(np.random.default_rng(5), shape, dtype)
    for kw in ({}, {"permute_l": True}, {"p_indices": True}):
        _same(nla.lu(a, **kw), sla.lu(a, **kw), dtype, 30)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_lu_factor_lu_solve(dtype, layout):
    rng = np.random.default_rng(6)
    a = in_layout(well(rng, 9, dtype), layout)
    keep = a.copy()
    f_ours, f_theirs = nla.lu_factor(a), sla.lu_factor(a)
    _same(f_ours, f_theirs, dtype, 9)
    np.testing.assert_array_equal(a, keep)
    for b in (rand(rng, (9,), dtype), rand(rng, (9, 2), dtype), rand(rng, (9,), np.float32)):
        for trans in (0, 1, 2):
            _same(nla.lu_solve(f_ours, b, trans=trans), sla.lu_solve(f_theirs, b, trans=trans), dtype, 9)
    ab = well(rng, 4, dtype, (3,))
    _same(nla.lu_factor(ab), sla.lu_factor(ab), dtype, 4)
    _same(nla.lu_solve(nla.lu_factor(ab), np.ones(4)), sla.lu_solve(sla.lu_factor(ab), np.ones(4)), dtype, 4)
    with pytest.warns(sla.LinAlgWarning, match="exactly zero"):
        nla.lu_factor(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="incompatible"):
        nla.lu_solve(f_ours, np.ones(3))
    with pytest.raises(ValueError, match="infs or NaNs"):
        nla.lu_solve(f_ours, np.full(9, np.nan))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("lower", [False, True])
def test_cholesky_cho_factor_cho_solve(dtype, layout, lower):
    rng = np.random.default_rng(7)
    a = in_layout(spd(rng, 8, dtype), layout)
    _same(nla.cholesky(a, lower=lower), sla.cholesky(a, lower=lower), dtype, 8)
    c_ours, c_theirs = nla.cho_factor(a, lower=lower), sla.cho_factor(a, lower=lower)
    tri = np.tril if lower else np.triu
    assert c_ours[1] == c_theirs[1] and relerr(tri(c_ours[0]), tri(c_theirs[0])) < tol(dtype, 8)
    b = rand(rng, (8, 3), dtype)
    _same(nla.cho_solve(c_ours, b), sla.cho_solve(c_theirs, b), dtype, 8)
    _same(nla.cho_solve((in_layout(c_theirs[0], "C"), lower), b), sla.cho_solve(c_theirs, b), dtype, 8)
    batch = spd(rng, 3, dtype, (2,))
    _same(nla.cholesky(batch, lower=lower), sla.cholesky(batch, lower=lower), dtype, 3)
    bad = batch.copy()
    bad[1] = -bad[1]
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite.*slice 1"):
        nla.cholesky(bad)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 5), (2, 5, 3)])
@pytest.mark.parametrize("mode", ["full", "r", "economic", "raw"])
@pytest.mark.parametrize("pivoting", [False, True])
def test_qr(dtype, shape, mode, pivoting):
    a = rand(np.random.default_rng(8), shape, dtype)
    _agree(lambda m: m.qr(a, mode=mode, pivoting=pivoting), dtype, 30)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("driver", [None, "ev", "evd", "evr", "evx"])
@pytest.mark.parametrize("layout", ["C", "F"])
def test_eigh_standard(dtype, driver, layout):
    rng = np.random.default_rng(9)
    a = in_layout(herm(rng, 10, dtype), layout)
    for lower in (True, False):
        w, v = nla.eigh(a, lower=lower, driver=driver)
        rw, rv = sla.eigh(a, lower=lower, driver=driver)
        _same(w, rw, dtype, 10, factor=100)
        assert v.dtype == rv.dtype and v.shape == rv.shape
        full = sla.eigh(a, lower=lower)[1] @ np.diag(rw) @ sla.eigh(a, lower=lower)[1].conj().T
        assert relerr(v @ np.diag(w) @ v.conj().T, full) < tol(dtype, 10) * 100
    _same(nla.eigvalsh(a, driver=driver), sla.eigvalsh(a, driver=driver), dtype, 10, factor=100)
    if driver in (None, "evr", "evx"):
        for kw in ({"subset_by_index": [2, 6]}, {"subset_by_value": [-0.5, 0.7]}):
            _same(nla.eigh(a, eigvals_only=True, driver=driver, **kw),
                  sla.eigh(a, eigvals_only=True, driver=driver, **kw), dtype, 10, factor=100)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 4, 37])
@pytest.mark.parametrize("layout", ["C", "F"])
def test_eigh_subsets_are_scipys_own_call(dtype, n, layout):
    """A subset of one matrix's eigenpairs (driver None or "evr") is SciPy's ``?syevr``/``?heevr``
    call with its workspace: the same bits as SciPy's, vectors included."""
    a = in_layout(herm(np.random.default_rng(n), n, dtype), layout)
    for lower in (True, False):
        for kw in ({"subset_by_index": [0, 0]}, {"subset_by_index": [n // 2, n - 1]},
                   {"subset_by_value": [-1.0, np.inf]}, {"subset_by_value": [-np.inf, -1e6]}):
            for driver in (None, "evr"):
                w, v = nla.eigh(a, lower=lower, driver=driver, **kw)
                rw, rv = sla.eigh(a, lower=lower, driver=driver, **kw)
                np.testing.assert_array_equal(w, rw)
                np.testing.assert_array_equal(v, rv)
                assert w.dtype == rw.dtype and v.dtype == rv.dtype
                np.testing.assert_array_equal(nla.eigvalsh(a, lower=lower, driver=driver, **kw), rw)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("driver", [None, "gv", "gvd", "gvx"])
@pytest.mark.parametrize("type_", [1, 2, 3])
def test_eigh_generalized(dtype, driver, type_):
    rng = np.random.default_rng(10)
    a, b = herm(rng, 7, dtype), spd(rng, 7, dtype)
    _same(nla.eigh(a, b, type=type_, driver=driver, eigvals_only=True),
          sla.eigh(a, b, type=type_, driver=driver, eigvals_only=True), dtype, 7, factor=100)
    w, v = nla.eigh(a, b, type=type_, driver=driver)
    lhs = {1: wide(a) @ v, 2: wide(a) @ wide(b) @ v, 3: wide(b) @ wide(a) @ v}[type_]
    rhs = {1: wide(b) @ v * w, 2: v * w, 3: v * w}[type_]
    assert relerr(lhs, rhs) < tol(dtype, 7) * 100


def test_eigh_errors():
    with pytest.raises(ValueError, match="unknown"):
        nla.eigh(np.eye(3), driver="foo")
    with pytest.raises(ValueError, match="requires input b"):
        nla.eigh(np.eye(3), driver="gvd")
    with pytest.raises(ValueError, match="does not accept input b"):
        nla.eigh(np.eye(3), np.eye(3), driver="evd")
    with pytest.raises(ValueError, match="cannot compute subsets"):
        nla.eigh(np.eye(3), driver="evd", subset_by_index=[0, 1])
    with pytest.raises(ValueError, match="indices are not valid"):
        nla.eigh(np.eye(3), subset_by_index=[5, 7])
    with pytest.raises(np.linalg.LinAlgError, match="leading minor of order 1 of B"):
        nla.eigh(np.eye(2), -np.eye(2))
    with pytest.raises(ValueError, match="infs or NaNs"):
        nla.eigh(np.full((2, 2), np.inf))
    _same(nla.eigh(np.empty((0, 0))), sla.eigh(np.empty((0, 0))), np.float64, 1)
    batch = herm(np.random.default_rng(0), 4, np.float64, (3,))
    _same(nla.eigvalsh(batch), sla.eigvalsh(batch), np.float64, 4, factor=100)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 5), (2, 3, 4)])
@pytest.mark.parametrize("driver", ["gesdd", "gesvd"])
@pytest.mark.parametrize("layout", ["C", "F"])
def test_svd(dtype, shape, driver, layout):
    a = in_layout(rand(np.random.default_rng(11), shape, dtype), layout)
    for full in (True, False):
        u, s, vh = nla.svd(a, full_matrices=full, lapack_driver=driver)
        ru, rs, rvh = sla.svd(a, full_matrices=full, lapack_driver=driver)
        assert (u.shape, s.shape, vh.shape) == (ru.shape, rs.shape, rvh.shape)
        assert (u.dtype, s.dtype, vh.dtype) == (ru.dtype, rs.dtype, rvh.dtype)
        k = min(shape[-2:])
        assert relerr(s, rs) < tol(dtype, 30)
        assert relerr((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], a) < tol(dtype, 30)
    _same(nla.svd(a, compute_uv=False), sla.svd(a, compute_uv=False), dtype, 30)
    _same(nla.svdvals(a), sla.svdvals(a), dtype, 30)
    with pytest.raises(ValueError, match="lapack_driver"):
        nla.svd(a, lapack_driver="foo")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("trans", [0, 1, 2, "T"])
@pytest.mark.parametrize("lower", [False, True])
def test_solve_triangular(dtype, layout, trans, lower):
    rng = np.random.default_rng(12)
    t = well(rng, 7, dtype)
    a = in_layout(np.tril(t) if lower else np.triu(t), layout)
    b = rand(rng, (7, 2), dtype)
    for unit in (False, True):
        kw = {"trans": trans, "lower": lower, "unit_diagonal": unit}
        _same(nla.solve_triangular(a, b, **kw), sla.solve_triangular(a, b, **kw), dtype, 7)
    ab, bb = np.stack([a, a]), np.stack([b, b])
    _agree(lambda m: m.solve_triangular(ab, bb, trans=trans, lower=lower), dtype, 7)
    with pytest.raises(np.linalg.LinAlgError, match="diagonal 0"):
        nla.solve_triangular(np.zeros((2, 2), dtype), np.ones(2))


def test_solve_triangular_overwrite_b_in_place_as_scipy():
    """A client relies on it: the right-hand side, a row of a larger matrix, becomes x."""
    L = np.zeros((3, 3))
    L[0, 0], L[1, :2], L[2, :2] = 2, [1, 3], [4, 5]
    x = nla.solve_triangular(L[:2, :2], L[2, :2], trans=0, lower=1, overwrite_b=True, check_finite=False)
    np.testing.assert_array_equal(L[2, :2], [2, 1])
    assert np.shares_memory(x, L)


def _b_cases(n: int) -> dict:
    rng = np.random.default_rng(5)
    b2, wide_b = rng.standard_normal((n, 3)), rng.standard_normal((n, 6))
    return {
        "1-D": lambda: b2[:, 0].copy(),
        "1-D strided": lambda: b2.copy()[:, 0],
        "F": lambda: np.asfortranarray(b2),
        "C": lambda: np.ascontiguousarray(b2),
        "C one column": lambda: np.ascontiguousarray(b2[:, :1]),
        "F not contiguous": lambda: np.asfortranarray(wide_b)[:, ::2],
        "float32": lambda: b2[:, 0].astype(np.float32),
        "int": lambda: np.arange(1, n + 1),
        "complex": lambda: b2[:, 0] + 1j,
        "read-only": lambda: _read_only(b2[:, 0]),
        "batch": lambda: np.stack([b2[:, :1], b2[:, 1:2]]),
    }


def _read_only(v: np.ndarray) -> np.ndarray:
    out = v.copy()
    out.flags.writeable = False
    return out


@pytest.mark.parametrize("case", list(_b_cases(4)))
@pytest.mark.parametrize("a_layout", ["F", "C"])
@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("a_dtype", [np.float64, np.complex128])
def test_solve_triangular_overwrites_b_exactly_when_scipy_does(case, a_layout, trans, a_dtype):
    rng = np.random.default_rng(3)
    a = np.tril(rng.standard_normal((4, 4))) + 4 * np.eye(4)
    a = (a + 1j * np.tril(a, -1) if a_dtype is np.complex128 else a).astype(a_dtype)
    a = np.asfortranarray(a) if a_layout == "F" else np.ascontiguousarray(a)
    if case == "batch":
        a = np.stack([a, a])
    make = _b_cases(4)[case]
    ours_b, theirs_b = make(), make()
    kw = {"trans": trans, "lower": True, "overwrite_b": True}
    ours = nla.solve_triangular(a, ours_b, **kw)
    theirs = sla.solve_triangular(a, theirs_b, **kw)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours_b, theirs_b, rtol=1e-12, atol=1e-12)  # changed exactly where SciPy's was
    assert np.shares_memory(ours, ours_b) == np.shares_memory(theirs, theirs_b)


def test_solve_triangular_keeps_b_without_overwrite_b():
    a = np.tril(np.ones((3, 3))) + np.eye(3)
    for b in (np.ones(3), np.asfortranarray(np.ones((3, 2)))):
        keep = b.copy()
        x = nla.solve_triangular(a, b, lower=True)
        np.testing.assert_array_equal(b, keep)
        assert not np.shares_memory(x, b)


def test_torch_round_trip():
    torch = pytest.importorskip("torch")
    a = spd(np.random.default_rng(0), 4, np.float64)
    ta, tb = torch.from_numpy(a), torch.ones(4, dtype=torch.float64)
    assert isinstance(nla.solve(ta, tb), torch.Tensor)
    assert isinstance(nla.cholesky(ta), torch.Tensor)
    w, v = nla.eigh(ta)
    assert isinstance(w, torch.Tensor) and isinstance(v, torch.Tensor)
    assert np.allclose(nla.solve(ta, tb).numpy(), sla.solve(a, np.ones(4)))


def test_no_warning_on_well_conditioned():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nla.solve(well(np.random.default_rng(0), 5, np.float64), np.ones(5))


CALLS = {
    "solve": lambda m, a, s: m.solve(a, np.ones(5)),
    "solve_pos": lambda m, a, s: m.solve(s, np.ones(5), assume_a="pos"),
    "inv": lambda m, a, s: m.inv(a),
    "det": lambda m, a, s: m.det(a),
    "lstsq": lambda m, a, s: m.lstsq(a, np.ones(5)),
    "lu": lambda m, a, s: m.lu(a),
    "lu_factor": lambda m, a, s: m.lu_factor(a),
    "cholesky": lambda m, a, s: m.cholesky(s),
    "cho_factor": lambda m, a, s: m.cho_factor(s),
    "qr": lambda m, a, s: m.qr(a),
    "eigh": lambda m, a, s: m.eigh(s),
    "eigh_b": lambda m, a, s: m.eigh(s + s.T, s),
    "svd": lambda m, a, s: m.svd(a),
    "solve_triangular": lambda m, a, s: m.solve_triangular(a, np.ones(5)),
}


@pytest.mark.parametrize("name", list(CALLS))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_inputs_are_not_modified(name, layout):
    rng = np.random.default_rng(13)
    a, s = in_layout(well(rng, 5, np.float64), layout), in_layout(spd(rng, 5, np.float64), layout)
    keep = a.copy(), s.copy()
    CALLS[name](nla, a, s)
    np.testing.assert_array_equal(a, keep[0])
    np.testing.assert_array_equal(s, keep[1])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("shape", [(4,), (4, 4), (3, 5), (100,)])
def test_all_finite_matches_isfinite(bad, shape):
    """The finiteness check behind ``check_finite``: exact for NaN/Inf anywhere, no false
    alarm (and no warning) when the entries are finite but their sum overflows."""
    from nvmathpy.scipy.linalg._validate import all_finite

    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64, np.complex128):
        x = rand(rng, shape, dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert all_finite(x) and all_finite(x.T)
            assert all_finite(np.full(shape, np.finfo(dtype).max, dtype))
            x.flat[rng.integers(x.size)] = bad
            assert not all_finite(x) and not all_finite(x.T)


@pytest.mark.parametrize("lower", [False, True])
def test_cho_solve_checks_the_whole_factor(lower):
    """SciPy checks every entry of ``c`` (the unused triangle too) and ``b``; so must we."""
    rng = np.random.default_rng(4)
    a, b = spd(rng, 4, np.float64), rand(rng, (4,), np.float64)
    c = sla.cho_factor(a, lower=lower)
    assert relerr(nla.cho_solve(c, b), np.linalg.solve(a, b)) < 1e-12
    spoiled = c[0].copy(order="F")
    spoiled[(0, 3) if lower else (3, 0)] = np.nan
    for call in (lambda m: m.cho_solve((spoiled, lower), b), lambda m: m.cho_solve(c, np.where(b > 0, np.inf, b))):
        with pytest.raises(ValueError, match="infs or NaNs"):
            call(sla)
        with pytest.raises(ValueError, match="infs or NaNs"):
            call(nla)
    assert relerr(nla.cho_solve((spoiled, lower), b, check_finite=False), np.linalg.solve(a, b)) < 1e-12


# -- dtypes and return conventions of SciPy 1.17 ---------------------------------------------------

_SMALL = ["bool", "int8", "int16", "uint8", "uint16", "float16", "int32", "int64"]


@pytest.mark.parametrize("dtype", _SMALL)
def test_one_array_functions_compute_small_integers_in_single_precision_as_scipy(dtype):
    a = (np.eye(3) if dtype == "bool" else np.array([[4, 1, 0], [1, 5, 2], [0, 2, 6]])).astype(dtype)
    for name, call in [("inv", lambda m, x: m.inv(x)), ("lu_factor", lambda m, x: m.lu_factor(x)[0]),
                       ("lu", lambda m, x: m.lu(x)[2]), ("cholesky", lambda m, x: m.cholesky(x)),
                       ("cho_factor", lambda m, x: m.cho_factor(x)[0]), ("qr", lambda m, x: m.qr(x)[1]),
                       ("eigh", lambda m, x: m.eigh(x)[0]), ("eigvalsh", lambda m, x: m.eigvalsh(x)),
                       ("svd", lambda m, x: m.svd(x)[1]), ("svdvals", lambda m, x: m.svdvals(x)),
                       ("det", lambda m, x: m.det(x))]:
        ours, theirs = call(nla, a), call(sla, a)
        assert np.asarray(ours).dtype == np.asarray(theirs).dtype, (name, ours.dtype, theirs.dtype)
        assert relerr(ours, theirs) < 1e-5, name


@pytest.mark.parametrize("a_dtype", ["int16", "uint8", "bool", "float16", "int32", "float32"])
@pytest.mark.parametrize("b_dtype", ["int16", "float32", "int64", "complex64"])
def test_two_array_functions_promote_as_scipy(a_dtype, b_dtype):
    a = (np.eye(2) if a_dtype == "bool" else np.array([[4, 1], [1, 5]])).astype(a_dtype)
    b = np.array([1, 2]).astype(b_dtype)
    piv = np.array([0, 1], np.int32)
    for name, call in [("solve", lambda m: m.solve(a, b)), ("solve_triangular", lambda m: m.solve_triangular(a, b)),
                       ("lstsq", lambda m: m.lstsq(a, b)[0]), ("cho_solve", lambda m: m.cho_solve((a, False), b)),
                       ("lu_solve", lambda m: m.lu_solve((a, piv), b))]:
        ours, theirs = call(nla), call(sla)
        assert ours.dtype == theirs.dtype, (name, ours.dtype, theirs.dtype)
        assert relerr(ours, theirs) < 1e-5, name


def test_det_of_single_precision_and_of_extreme_pivots_as_scipy():
    a = np.array([[4, 1, 0], [1, 5, 2], [0, 2, 6]], np.float32)
    assert nla.det(a) == sla.det(a)  # factored in single, the pivots multiplied in double
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow/invalid warnings, as SciPy
        assert nla.det(np.diag([1e200, 1e200, 0.0])) == 0.0 == sla.det(np.diag([1e200, 1e200, 0.0]))
        assert nla.det(np.diag([1e200, 1e200, 1.0])) == np.inf
        singular = np.random.default_rng(1).standard_normal((2, 40, 40)) * 1e20
        singular[1, :, 7] = 0
        got = nla.det(singular)
        assert got[1] == 0 and got[0] == sla.det(singular)[0]


def test_batched_containers_and_flags_as_scipy():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 3))
    a = x @ x.transpose(0, 2, 1) + 3 * np.eye(3)
    for lower in (False, True):
        c, flags = nla.cho_factor(a, lower=lower)
        ref_c, ref_flags = sla.cho_factor(a, lower=lower)
        assert isinstance(flags, np.ndarray) and flags.dtype == bool and np.array_equal(flags, ref_flags)
        b = rng.standard_normal(3)
        expected = sla.cho_solve((ref_c, ref_flags), b)
        assert relerr(nla.cho_solve((c, flags), b), expected) < 1e-12
        assert relerr(nla.cho_solve((ref_c, ref_flags), b), expected) < 1e-12  # SciPy's factors, taken as they are
    assert nla.cho_factor(a[0])[1] is False
    with pytest.raises(ValueError, match="lower"):
        nla.cho_solve((a, np.array([True, False])), np.ones(3))
    assert type(nla.eigh(a)) is type(sla.eigh(a)) is list and type(nla.svd(a)) is type(sla.svd(a)) is list
    assert type(nla.eigh(a[0])) is tuple and type(nla.svd(a[0])) is tuple


def test_eigh_ignores_type_without_b_as_scipy():
    a = spd(np.random.default_rng(3), 4, "float64")
    for itype in (0, 2, 4):
        assert relerr(nla.eigh(a, type=itype)[0], sla.eigh(a, type=itype)[0]) < 1e-13


@pytest.mark.parametrize("dtype, kind", [(d, "sym") for d in DTYPES] + [(d, "her") for d in DTYPES if np.dtype(d).kind == "c"])
@pytest.mark.parametrize("lower", [False, True])
def test_inv_of_a_symmetric_matrix_reads_one_triangle(dtype, kind, lower):
    a = rand(np.random.default_rng(4), (6, 6), dtype)  # the other triangle is unrelated data
    keep = a.copy()
    assert relerr(nla.inv(a, assume_a=kind, lower=lower), sla.inv(a, assume_a=kind, lower=lower)) < tol(dtype, 6)
    np.testing.assert_array_equal(a, keep)


@pytest.mark.parametrize("assume_a", ["tridiagonal", "banded"])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_solve_with_a_band_assumption_reads_what_scipy_reads(assume_a, batch):
    rng = np.random.default_rng(5)
    a = rng.standard_normal(batch + (7, 7)) + 7 * np.eye(7)  # entries outside the band too
    b = rng.standard_normal(batch + (7, 2))
    keep = a.copy()
    assert relerr(nla.solve(a, b, assume_a=assume_a), sla.solve(a, b, assume_a=assume_a)) < 1e-13
    np.testing.assert_array_equal(a, keep)


def test_linalg_warning_names_the_callers_frame():
    """``LinAlgWarning`` is raised with the caller's frame, so filters keyed on ``module=`` work."""
    import warnings

    from scipy.linalg import LinAlgWarning

    from nvmathpy.scipy.linalg import inv, lu_factor, solve

    ill = np.array([[1.0, 1.0], [1.0, 1.0 + 4.5e-16 * float(np.random.default_rng().integers(1, 3))]])
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.filterwarnings("error", category=LinAlgWarning, module=__name__)
        for call in (lambda: solve(ill, np.ones(2), assume_a="gen"), lambda: inv(ill), lambda: inv(np.stack([ill] * 3)),
                     lambda: lu_factor(np.zeros((3, 3)))):
            with pytest.raises(LinAlgWarning):
                call()
