"""nvmathpy.scipy.linalg's eig, eigvals and rq: SciPy 1.17's results (bit for bit: the same
LAPACK calls), dtypes, errors and overwrite semantics, on odd and prime sizes, C/F/strided/
transposed inputs, the four LAPACK dtypes, generalized problems, batches and edge cases; the
eigenpairs and factors also checked against their defining equations in float64."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

import nvmathpy.scipy.linalg as nsl
from numerics import layouts, rand

DTYPES = (np.float32, np.float64, np.complex64, np.complex128)
TOL = {"f": 1e-4, "F": 1e-4, "d": 1e-11, "D": 1e-11}  # residuals of eigenpairs, relative to ||A|| ||v||
SIZES = (1, 2, 3, 5, 8, 17, 31)


def _as_tuple(r):
    return r if isinstance(r, (tuple, list)) else (r,)


def _same(got, want):
    """The same container, and arrays equal bit for bit (NaN where SciPy's is) in dtype and shape."""
    assert type(got) is type(want)
    for g, w in zip(_as_tuple(got), _as_tuple(want)):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.array_equal(g, w, equal_nan=True)


def _outcome(fn, *args, **kwargs):
    """``fn``'s result, or its exception's type and message."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 (compared with SciPy's)
        return type(exc), str(exc)


def _same_outcome(name, *args, **kwargs):
    want = _outcome(getattr(sla, name), *args, **kwargs)
    got = _outcome(getattr(nsl, name), *args, **kwargs)
    if isinstance(want, tuple) and len(want) == 2 and isinstance(want[0], type):
        assert got == want
    else:
        _same(got, want)


def _residual(a, b, w, v):
    """``||A V - B V diag(w)|| / (||A|| ||V||)`` in float64/complex128."""
    a = np.asarray(a, np.complex128)
    b = np.eye(len(a)) if b is None else np.asarray(b, np.complex128)
    v = np.asarray(v, np.complex128)
    return np.linalg.norm(a @ v - (b @ v) * w) / (np.linalg.norm(a) * np.linalg.norm(v) * max(1.0, np.abs(w).max()))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("layout", ("C", "F", "strided", "transposed"))
def test_eig_matches_scipy_and_the_eigen_equations(dtype, n, layout):
    rng = np.random.default_rng(n)
    a = layouts(rand(rng, (n, n), dtype), transposed=True)[layout]
    b = layouts(rand(rng, (n, n), dtype) + 3 * np.eye(n, dtype=dtype), transposed=True)[layout]
    before = a.copy(), b.copy()
    for other in (None, b):
        for left, right in ((False, True), (True, True), (True, False), (False, False)):
            got = nsl.eig(a, other, left=left, right=right)
            _same(got, sla.eig(a, other, left=left, right=right))
            got = _as_tuple(got)
            w = got[0]
            assert w.dtype == np.result_type(dtype, np.complex64)
            tol = TOL[np.dtype(dtype).char]
            if right:
                assert _residual(a, other, w, got[-1]) < tol
            if left and right:  # left vectors: a^H vl = conj(w) b^H vl
                ah = a.conj().T
                assert _residual(ah, None if other is None else other.conj().T, w.conj(), got[1]) < tol
        _same(nsl.eigvals(a, other), sla.eigvals(a, other))
        _same(nsl.eig(a, other, left=True, homogeneous_eigvals=True),
              sla.eig(a, other, left=True, homogeneous_eigvals=True))
        _same(nsl.eigvals(a, other, homogeneous_eigvals=True), sla.eigvals(a, other, homogeneous_eigvals=True))
    assert np.array_equal(a, before[0]) and np.array_equal(b, before[1])  # inputs untouched


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", (64, 131))
def test_eig_large_orders(dtype, n):
    rng = np.random.default_rng(n)
    a, b = rand(rng, (n, n), dtype), rand(rng, (n, n), dtype)
    _same(nsl.eig(a), sla.eig(a))
    _same(nsl.eig(a, b, left=True), sla.eig(a, b, left=True))
    _same(nsl.eigvals(a), sla.eigvals(a))
    w, v = nsl.eig(a)
    assert _residual(a, None, w, v) < TOL[np.dtype(dtype).char]


def test_eig_pairs_of_real_matrices():
    """Rotations have conjugate pairs only; block-diagonal ones several pairs (the whole-array path)."""
    rng = np.random.default_rng(7)
    blocks = [np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]) for t in rng.uniform(0.1, 3, 9)]
    a = sla.block_diag(*blocks, [[2.0]])
    q = np.linalg.qr(rng.standard_normal(a.shape))[0]
    for m in (a, q @ a @ q.T):
        for dtype in (np.float32, np.float64):
            _same(nsl.eig(m.astype(dtype), left=True), sla.eig(m.astype(dtype), left=True))
            _same(nsl.eig(m.astype(dtype), np.eye(len(m), dtype=dtype), left=True),
                  sla.eig(m.astype(dtype), np.eye(len(m), dtype=dtype), left=True))


def test_generalized_infinite_and_undetermined_eigenvalues():
    a = np.diag([1.0, 2.0, 0.0, 3.0])
    b = np.diag([1.0, 0.0, 0.0, 1.0])  # w: 1, inf, NaN (0/0), 3
    for dtype in DTYPES:
        for homogeneous in (False, True):
            _same_outcome("eig", a.astype(dtype), b.astype(dtype), homogeneous_eigvals=homogeneous)
            _same_outcome("eigvals", a.astype(dtype), b.astype(dtype), homogeneous_eigvals=homogeneous)
    w = nsl.eigvals(a, b)
    assert w[0] == 1 and np.isinf(w[1]) and np.isnan(w[2]) and w[3] == 3


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_matrices(dtype):
    a = np.empty((0, 0), dtype)
    for kwargs in ({}, {"left": True}, {"right": False}, {"homogeneous_eigvals": True, "left": True}):
        _same(nsl.eig(a, **kwargs), sla.eig(a, **kwargs))
        _same(nsl.eig(a, a, **kwargs), sla.eig(a, a, **kwargs))
    _same(nsl.eigvals(a), sla.eigvals(a))
    for mode in ("full", "r", "economic"):
        for shape in ((0, 0), (0, 3), (3, 0)):
            _same(nsl.rq(np.empty(shape, dtype), mode=mode), sla.rq(np.empty(shape, dtype), mode=mode))


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # SciPy's and ours alike
@pytest.mark.parametrize("bad", (np.nan, np.inf, -np.inf))
def test_non_finite_input(bad):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((5, 5)), rng.standard_normal((5, 5))
    a_bad = a.copy()
    a_bad[2, 3] = bad
    for check in (True, False):
        _same_outcome("eig", a_bad, check_finite=check)
        _same_outcome("eigvals", a_bad, check_finite=check)
        _same_outcome("eig", a_bad, b, check_finite=check)
        _same_outcome("eig", b, a_bad, left=True, check_finite=check)
        _same_outcome("rq", a_bad, check_finite=check)
    with pytest.raises(ValueError, match="must not contain infs or NaNs"):
        nsl.eig(a, a_bad)


def test_overwrite_semantics_are_scipys():
    """With ``overwrite_*`` the inputs end as SciPy leaves them (overwritten where its wrapper
    works in place: Fortran-ordered of the LAPACK dtype); without, they are untouched."""
    rng = np.random.default_rng(11)
    for dtype in DTYPES:
        for order in "CF":
            a0 = np.array(rand(rng, (6, 6), dtype), order=order)
            b0 = np.array(rand(rng, (6, 6), dtype), order=order)
            for name, args, kwargs in (("eig", 2, {"overwrite_a": True, "overwrite_b": True}),
                                       ("eigvals", 1, {"overwrite_a": True}), ("eig", 1, {"overwrite_a": True}),
                                       ("rq", 1, {"overwrite_a": True})):
                ours, theirs = [a0.copy(order="K"), b0.copy(order="K")], [a0.copy(order="K"), b0.copy(order="K")]
                _same(getattr(nsl, name)(*ours[:args], **kwargs), getattr(sla, name)(*theirs[:args], **kwargs))
                assert np.array_equal(ours[0], theirs[0]) and np.array_equal(ours[1], theirs[1])
                if order == "F" and name != "eigvals" and args == 1:
                    assert not np.array_equal(ours[0], a0)  # LAPACK worked in place, as in SciPy


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ((1, 1), (3, 3), (3, 7), (7, 3), (5, 13), (13, 5), (31, 31)))
@pytest.mark.parametrize("layout", ("C", "F", "strided", "transposed"))
def test_rq_matches_scipy_and_reconstructs(dtype, shape, layout):
    rng = np.random.default_rng(shape[0] * 100 + shape[1])
    a = layouts(rand(rng, shape, dtype), transposed=True)[layout]
    before = a.copy()
    for mode in ("full", "r", "economic"):
        got = nsl.rq(a, mode=mode)
        _same(got, sla.rq(a, mode=mode))
        if mode != "r":
            r, q = got
            tol = TOL[np.dtype(dtype).char]
            assert np.linalg.norm(r.astype(np.complex128) @ q - a) <= tol * np.linalg.norm(a)
            k = q.shape[0]
            assert np.linalg.norm(q @ q.conj().T - np.eye(k)) <= tol * k
    _same(nsl.rq(a, lwork=max(shape) * 2), sla.rq(a, lwork=max(shape) * 2))
    assert np.array_equal(a, before)


def test_batches():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 3, 4, 4)), rng.standard_normal((3, 4, 4))
    _same(nsl.eig(a), sla.eig(a))
    _same(nsl.eig(a, b, left=True), sla.eig(a, b, left=True))
    _same(nsl.eig(a[0, 0], b), sla.eig(a[0, 0], b))
    _same(nsl.eigvals(a, homogeneous_eigvals=True), sla.eigvals(a, homogeneous_eigvals=True))
    c = rng.standard_normal((3, 4, 6))
    for mode in ("full", "r", "economic"):
        _same(nsl.rq(c, mode=mode), sla.rq(c, mode=mode))
    for name in ("eig", "eigvals", "rq"):
        _same_outcome(name, np.empty((0, 3, 3)))


def test_errors_are_scipys():
    rng = np.random.default_rng(2)
    sq, wide = rng.standard_normal((3, 3)), rng.standard_normal((3, 4))
    cases = [("eig", (wide,), {}), ("eig", (np.ones(3),), {}), ("eig", (sq, wide), {}),
             ("eig", (sq, np.eye(4)), {}), ("eigvals", (wide,), {}), ("eigvals", (sq, np.eye(2)), {}),
             ("rq", (np.ones(3),), {}), ("rq", (sq,), {"mode": "raw"}), ("rq", (sq,), {"mode": "economy"}),
             ("rq", (sq,), {"lwork": 1}), ("eig", (np.empty((0, 2)),), {})]
    for name, args, kwargs in cases:
        want = _outcome(getattr(sla, name), *args, **kwargs)
        assert isinstance(want, tuple) and isinstance(want[0], type), (name, args, kwargs)
        assert _outcome(getattr(nsl, name), *args, **kwargs) == want


def test_other_inputs_are_scipys_own_path():
    """Lists, integer, float16 and object arrays: SciPy's own function, so SciPy's results and errors."""
    m = [[1, 2], [3, 4]]
    for x in (m, np.array(m), np.array(m, np.float16), np.array(m, np.int8), np.array(m, bool)):
        _same_outcome("eig", x)
        _same_outcome("eigvals", x, x)
        _same_outcome("rq", x)
    _same_outcome("eig", np.array(m, dtype=object))
    _same_outcome("eig", np.eye(2), [[1.0, 0.0], [0.0, 2.0]])


class _FakeCudaArray:
    """Stands for a CuPy array: a DLPack producer on a CUDA device."""

    def __dlpack_device__(self):
        return (2, 0)


@pytest.mark.parametrize("name", ("eig", "eigvals", "rq"))
def test_cuda_operands_are_refused_by_name(name):
    message = rf"^{name}: CUDA operands \(.*_FakeCudaArray\) .* {name} runs on the host only.*x\.get\(\)"
    with pytest.raises(TypeError, match=message):
        getattr(nsl, name)(_FakeCudaArray())
    with pytest.raises(TypeError, match=message):
        getattr(nsl, name)(a=_FakeCudaArray())


@pytest.mark.parametrize("name", ("eig", "eigvals"))
def test_a_cuda_b_is_refused_by_name(name):
    with pytest.raises(TypeError, match=rf"^{name}: CUDA operands .* runs on the host only"):
        getattr(nsl, name)(np.eye(2), _FakeCudaArray())


def test_names_and_import():
    assert {"eig", "eigvals", "rq"} <= set(nsl.__all__)
    assert nsl.eig is not sla.eig and nsl.eig.__module__ == "nvmathpy.scipy.linalg._eig"


def test_mixed_dtypes_and_keywords():
    """Two arrays of different LAPACK dtypes run in their common one, as SciPy's ``get_lapack_funcs``."""
    rng = np.random.default_rng(13)
    for da, db in ((np.float32, np.float64), (np.float64, np.complex64), (np.complex64, np.float32)):
        a, b = rand(rng, (5, 5), da), rand(rng, (5, 5), db)
        _same(nsl.eig(a, b, left=True), sla.eig(a, b, left=True))
        _same(nsl.eigvals(a, b), sla.eigvals(a, b))
    _same(nsl.eig(a=a, b=b, right=False, homogeneous_eigvals=True), sla.eig(a=a, b=b, right=False,
                                                                           homogeneous_eigvals=True))
    _same(nsl.rq(a=a, mode="economic"), sla.rq(a=a, mode="economic"))
