"""The shared validation of bad input (nvmathpy/linalg/validation.py) and where the
solvers use it: factor tuples, byte order, array-likes, unsupported dtypes, result sizes,
NaN in least squares, freed plans. (Crash- and hang-prone cases run isolated in
test_bad_input_linalg.py; these are the in-process unit checks.)"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

import nvmathpy.linalg as nl
import nvmathpy.scipy.linalg as sl
from nvmathpy.errors import InvalidOperandError, LinAlgError, PlanStateError
from nvmathpy.linalg.validation import (
    check_dtype, check_result_size, factor_pair, host_array, lu_factors, native,
)


def _spd(n: int, seed: int, batch: tuple[int, ...] = ()) -> np.ndarray:
    m = np.random.default_rng(seed).standard_normal(batch + (n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def _rel(x: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("n", [1, 5, 67])
def test_lu_factors_accepts_lapack_pivots_and_returns_int32(n):
    lu, piv = scipy.linalg.lu_factor(_spd(n, n))
    out = lu_factors(lu, piv.astype(np.int64))
    assert out.dtype == np.int32 and np.array_equal(out, piv)


@pytest.mark.parametrize("piv, match", [
    (lambda p: p[:-1], "piv: shape"),
    (lambda p: p.astype(np.int64) + 2 ** 33, "out of range"),
    (lambda p: -p - 1, "out of range"),
    (lambda p: np.full_like(p, 7), "out of range"),
    (lambda p: p.astype(float), "integers"),
    (lambda p: np.stack([p, p]), "batch shape"),
])
def test_lu_factors_refuses_bad_pivots(piv, match):
    lu, p = scipy.linalg.lu_factor(_spd(7, 1))
    with pytest.raises(InvalidOperandError, match=match):
        lu_factors(lu, piv(p))


def test_lu_factors_refuses_non_square_factors():
    with pytest.raises(InvalidOperandError, match="lu: LU factors must be square"):
        lu_factors(np.ones((9, 4)), np.arange(9))
    with pytest.raises(LinAlgError, match="lu: 1-dimensional"):
        lu_factors(np.ones(4), np.arange(4))


def test_factor_pair():
    assert factor_pair((1, 2), "x", "(a, b)") == (1, 2)
    with pytest.raises(InvalidOperandError, match="lu_and_piv: expected the pair"):
        factor_pair(np.eye(2), "lu_and_piv", "(lu, piv)")
    with pytest.raises(InvalidOperandError, match="length 3"):
        factor_pair((1, 2, 3), "lu_and_piv", "(lu, piv)")


def test_host_array_native_byte_order_and_array_likes():
    be = np.arange(6.0).reshape(2, 3).astype(">f8")
    out = host_array(be)
    assert out.dtype.isnative and np.array_equal(out, be)
    assert be.dtype.byteorder == ">"  # the caller's array is untouched
    assert host_array([[1, 2], [3, 4]]).shape == (2, 2)
    a = np.ones(3)
    assert host_array(a) is a and native(a) is a


@pytest.mark.parametrize("dtype", ["g", "G", "O", "S3", "U3", "m8[s]", "M8[s]", "V8"])
def test_check_dtype_refuses_with_type_error_naming_the_argument(dtype):
    with pytest.raises(TypeError, match=r"b: dtype .* is not supported; allowed: bool, integer"):
        check_dtype(np.dtype(dtype), "b")


def test_check_result_size_raises_as_numpy():
    check_result_size((1000, 3, 3), np.float64)  # small: arithmetic only
    with pytest.raises(MemoryError):
        check_result_size((2 ** 40, 4), np.float64)
    with pytest.raises(ValueError, match="too big"):
        check_result_size((2 ** 62, 4), np.float64)


@pytest.mark.parametrize("n", [3, 8, 16, 41])
@pytest.mark.parametrize("order", ["<", ">"])
def test_every_byte_order_and_layout_gives_numpys_answer(n, order):
    a = _spd(n, n, (5,))
    b = np.random.default_rng(n).standard_normal((5, n, 2))
    ref_x, ref_inv = np.linalg.solve(a, b), np.linalg.inv(a)
    for layout in (lambda m: m, np.asfortranarray, lambda m: np.swapaxes(np.swapaxes(m, -1, -2).copy(), -1, -2)):
        a1 = layout(a.astype(order + "f8"))
        b1 = b.astype(order + "f8")
        x, inv = nl.solve(a1, b1), nl.inv(a1)
        assert x.dtype.isnative and inv.dtype.isnative
        assert _rel(x, ref_x) < 1e-12 and _rel(inv, ref_inv) < 1e-12
        assert _rel(nl.LU(a1).solve(b1), ref_x) < 1e-12
        assert _rel(nl.det(a1), np.linalg.det(a)) < 1e-12
    assert _rel(sl.solve(a[0].astype(order + "f8"), b[0].astype(order + "f8")), ref_x[0]) < 1e-12


def test_array_likes_and_0d_as_numpy():
    assert np.allclose(nl.solve([[2.0, 0.0], [0.0, 4.0]], [2.0, 4.0]), [1.0, 1.0])
    assert np.allclose(nl.inv([[2.0, 0.0], [0.0, 4.0]]), [[0.5, 0.0], [0.0, 0.25]])
    with pytest.raises(np.linalg.LinAlgError, match="a: 0-dimensional array given"):
        nl.inv(np.float64(3.0))
    with pytest.raises(TypeError, match="a: dtype float128 is not supported"):
        nl.inv(np.eye(3, dtype=np.longdouble))


@pytest.mark.parametrize("api", [nl, sl])
def test_lu_solve_validates_factors_before_lapack(api):
    lu, piv = scipy.linalg.lu_factor(_spd(300, 3))
    for bad, match in (((lu, piv[:2]), "piv"), ((lu, piv.astype(np.int64) + 2 ** 33), "piv"),
                       ((lu, np.full(300, 10 ** 6, np.int32)), "piv"),
                       ((np.asfortranarray(np.ones((300, 299))), np.arange(300, dtype=np.int32)), "lu")):
        with pytest.raises(ValueError, match=match):
            api.lu_solve(bad, np.ones(300))


def test_lu_plan_from_factors_validates_pivots():
    lu, piv = scipy.linalg.lu_factor(_spd(6, 4))
    with pytest.raises(InvalidOperandError, match="piv: pivot index 6 is out of range"):
        nl.LU.from_factors(lu, np.full(6, 6, np.int32))
    plan = nl.LU.from_factors(lu, piv.astype(np.int64))
    b = np.arange(1.0, 7.0)
    assert _rel(plan.solve(b), scipy.linalg.lu_solve((lu, piv), b)) < 1e-12


@pytest.mark.parametrize("fn", [nl.cholesky, nl.qr, nl.eigh, nl.svd, nl.cho_factor, nl.det,
                                lambda a: nl.lstsq(a, np.ones(4)), lambda a: nl.cho_solve((a, False), np.ones(4))])
def test_huge_broadcast_batch_raises_before_work(fn):
    with pytest.raises((MemoryError, ValueError)):
        fn(np.broadcast_to(_spd(4, 5), (2 ** 40, 4, 4)))


def test_unflattenable_broadcast_batch_is_solved_without_a_full_copy():
    m = _spd(4, 6, (16,))
    wide = np.broadcast_to(m, (300, 16, 4, 4))  # does not reshape to (4800, 4, 4) as a view
    assert _rel(nl.solve(wide, np.ones(4)), np.linalg.solve(wide, np.ones(4))) < 1e-12
    assert _rel(nl.inv(wide), np.linalg.inv(wide)) < 1e-12


def test_lstsq_nan_raises_in_function_plan_and_batch():
    m = np.random.default_rng(7).standard_normal((2, 6, 3))
    m[1, 1, 1] = np.nan
    with pytest.raises(LinAlgError, match="NaN"):
        nl.lstsq(m[1], np.ones(6))
    with pytest.raises(LinAlgError, match="batch element 1"):
        nl.Lstsq(m).solve(np.ones((2, 6, 1)))
    m[1, 1, 1] = np.inf
    with pytest.raises(LinAlgError):
        nl.lstsq(m, np.ones((2, 6, 1)))
    with pytest.raises(ValueError, match="infs or NaNs"):
        sl.lstsq(m[1], np.ones(6))


@pytest.mark.parametrize("make, use, name", [
    (lambda: nl.LU(_spd(5, 1)), lambda p: p.solve(np.ones(5)), "LU.solve()"),
    (lambda: nl.LU(_spd(5, 1)), lambda p: p.det(), "LU.det()"),
    (lambda: nl.LU(_spd(5, 1)), lambda p: p.factors, "LU.factors()"),
    (lambda: nl.Cholesky(_spd(5, 1)), lambda p: p.solve(np.ones(5)), "Cholesky.solve()"),
    (lambda: nl.QR(_spd(5, 1)), lambda p: p.solve(np.ones(5)), "QR.solve()"),
    (lambda: nl.Lstsq(_spd(5, 1)), lambda p: p.solve(np.ones(5)), "Lstsq.solve()"),
    (lambda: nl.LU(_spd(5, 1)), lambda p: p.execute(), "LU.execute()"),
    (lambda: nl.Eigh(_spd(5, 1)), lambda p: p.execute(), "Eigh.execute()"),
    (lambda: nl.SVD(_spd(5, 1)), lambda p: p.execute(), "SVD.execute()"),
    (lambda: nl.QR(_spd(5, 1)), lambda p: p.plan(), "QR.plan()"),
    (lambda: nl.Cholesky(_spd(5, 1)), lambda p: p.autotune(), "Cholesky.autotune()"),
])
def test_freed_plan_names_the_method_called(make, use, name):
    with make() as plan:
        plan.plan()
        use(plan)
    with pytest.raises(PlanStateError, match=rf"{name.replace('(', '[(]').replace(')', '[)]')} called on a freed plan"):
        use(plan)


def test_scipy_empty_batches_and_scalars_as_scipy():
    for p_indices, permute_l in ((False, False), (True, False), (False, True)):
        ours = sl.lu(np.empty((2, 0, 3, 5)), p_indices=p_indices, permute_l=permute_l)
        ref = scipy.linalg.lu(np.empty((2, 0, 3, 5)), p_indices=p_indices, permute_l=permute_l)
        assert [(x.shape, x.dtype) for x in ours] == [(x.shape, x.dtype) for x in ref]
    lu, piv = sl.lu_factor(np.float64(3.0))
    ref_lu, ref_piv = scipy.linalg.lu_factor(np.float64(3.0))
    assert lu.shape == ref_lu.shape and np.array_equal(piv, ref_piv)
    for fn in ("lu_factor", "cholesky", "qr", "eigh", "svd"):
        with pytest.raises(ValueError, match=f"`{fn}` does not support zero-size batches"):
            getattr(sl, fn)(np.empty((0, 3, 3)))


@pytest.mark.parametrize("fn, ref", [
    (nl.cholesky, np.linalg.cholesky),
    (nl.eigvalsh, np.linalg.eigvalsh),
    (nl.svdvals, lambda x: np.linalg.svd(x, compute_uv=False)),
    (lambda x: np.abs(nl.qr(x)[1]), lambda x: np.abs(np.linalg.qr(x)[1])),
    (lambda x: nl.lu_solve(nl.lu_factor(x), np.ones(5)), lambda x: np.linalg.solve(x, np.ones(5))),
    (lambda x: nl.cho_solve(nl.cho_factor(x), np.ones(5)), lambda x: np.linalg.solve(x, np.ones(5))),
    (lambda x: sl.inv(x), np.linalg.inv),
])
def test_unflattenable_broadcast_batch_in_the_looping_plans(fn, ref):
    """Batches that do not flatten to a view are read matrix by matrix (a LazyStack), with
    the same results as NumPy's."""
    wide = np.broadcast_to(_spd(5, 8, (7,)), (3, 7, 5, 5))
    assert _rel(fn(wide), ref(wide)) < 1e-12


def test_lazy_stack_indexing():
    from nvmathpy.linalg.solvers._operands import LazyStack, stack_of

    m = np.arange(6 * 4.0).reshape(6, 2, 2)
    wide = np.broadcast_to(m, (3, 6, 2, 2))
    flat = stack_of(wide)
    assert isinstance(flat, LazyStack) and flat.shape == (18, 2, 2) and len(flat) == 18
    assert np.array_equal(flat[7], m[1]) and np.array_equal(flat[-1], m[5])
    assert np.array_equal(flat[5:8], np.stack([m[5], m[0], m[1]]))
    assert np.array_equal(np.stack(list(flat)), np.broadcast_to(m, (3, 6, 2, 2)).reshape(18, 2, 2))
    assert type(stack_of(np.ones((2, 3, 4, 4)))) is np.ndarray  # flattens to a view
    with pytest.raises(IndexError):
        flat[18]


def test_svd_nan_says_so_and_names_the_batch_element():
    m = np.random.default_rng(9).standard_normal((2, 5, 3))
    m[1, 1, 1] = np.nan
    with pytest.raises(LinAlgError, match=r"batch element 1\): a holds NaN or infinity"):
        nl.svd(m)
