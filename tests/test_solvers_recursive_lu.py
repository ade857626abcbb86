"""The recursive LU on NumPy's OpenBLAS (nvmathpy/linalg/solvers/cpu/_recursive_lu.py).

It must return what LAPACK's ``?getrf`` returns (factors up to rounding, the same pivots,
``info`` naming the first zero pivot) for every dtype and shape. Small panel widths
(``LEAF`` patched down) make small matrices recurse deeply, so every branch runs in
milliseconds; the default width runs on orders that split at least twice.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st
from numerics import zero_pivot_cases

from nvmathpy.linalg import LU
from nvmathpy.linalg.solvers.cpu import _numpy_algorithms as numpy_algorithms, _numpy_lapack as numpy_lapack
from nvmathpy.linalg.solvers.cpu import _recursive_lu as recursive_lu
from nvmathpy.linalg.solvers.cpu._lookahead_lu import getrf_order
from nvmathpy.linalg.solvers.cpu._recursive_lu import (
    recursive_available,
    recursive_first,
    recursive_getrf,
)

DTYPES = ["float32", "float64", "complex64", "complex128"]
TOL = {"float32": 1e-5, "complex64": 1e-5, "float64": 1e-13, "complex128": 1e-13}

pytestmark = pytest.mark.skipif(not recursive_available(np.float64), reason="NumPy's BLAS exports no LAPACK here")


def rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return np.asfortranarray(x.astype(dtype))


def wide(x):
    return np.asarray(x).astype(np.complex128 if np.asarray(x).dtype.kind == "c" else np.float64)


def rebuilt(lu, piv, m):
    """``P L U`` from LAPACK-style factors (``piv`` 0-based row interchanges)."""
    k = min(lu.shape)
    lower = np.tril(wide(lu)[:, :k], -1) + np.eye(m, k)
    product = lower @ np.triu(wide(lu)[:k])
    for i in reversed(range(k)):  # undo the interchanges, last first
        product[[i, piv[i]]] = product[[piv[i], i]]
    return product


def check(a, dtype, leaf=None):
    """Factor ``a`` recursively (with panels of ``leaf`` columns) and compare with SciPy's getrf."""
    with pytest.MonkeyPatch.context() as patch:
        if leaf is not None:
            patch.setattr(recursive_lu, "LEAF", leaf)
        before = a.copy()
        lu, piv, info = recursive_getrf(np.dtype(dtype))(a)
    np.testing.assert_array_equal(a, before)  # overwrite_a=0 leaves the input alone
    assert lu.dtype == np.dtype(dtype) and lu.shape == a.shape and piv.dtype == np.int32
    ref_lu, ref_piv, ref_info = sla.lapack.get_lapack_funcs("getrf", dtype=np.dtype(dtype))(a)
    assert info == ref_info
    scale = np.linalg.norm(wide(a)) or 1.0
    assert np.linalg.norm(rebuilt(lu, piv, a.shape[0]) - wide(a)) / scale < TOL[np.dtype(dtype).name] * max(a.shape)
    return lu, piv, ref_lu, ref_piv


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (7, 7), (31, 31), (37, 23), (23, 37), (64, 5), (5, 64)])
@pytest.mark.parametrize("leaf", [1, 3, 8])
def test_small_panels_give_lapacks_factors(dtype, shape, leaf):
    rng = np.random.default_rng(sum(shape) + leaf)
    a = rand(rng, shape, dtype)
    lu, piv, ref_lu, ref_piv = check(a, dtype, leaf)
    if np.dtype(dtype).itemsize >= 8 and dtype != "complex64":
        np.testing.assert_array_equal(piv, ref_piv)
        assert np.linalg.norm(wide(lu) - wide(ref_lu)) <= 1e-12 * np.linalg.norm(wide(ref_lu)) * max(shape)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(389, 389), (521, 263), (263, 521)])
def test_default_panels_on_orders_that_split_twice(dtype, shape):
    rng = np.random.default_rng(shape[0])
    a = rand(rng, shape, dtype)
    lu, piv, ref_lu, ref_piv = check(a, dtype)
    if dtype == "float64":
        np.testing.assert_array_equal(piv, ref_piv)


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 40), n=st.integers(1, 40), leaf=st.integers(1, 9),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_any_shape_and_panel_width(m, n, leaf, dtype, seed):
    check(rand(np.random.default_rng(seed), (m, n), dtype), dtype, leaf)


@pytest.mark.parametrize("leaf", [2, 4, 128])
def test_info_names_the_first_zero_pivot_as_lapack_does(leaf):
    rng = np.random.default_rng(7)
    for name, a in zero_pivot_cases(rng, 300 if leaf == 128 else 30).items():
        check(a, "float64", leaf)


def test_overwrite_factors_in_place():
    a = rand(np.random.default_rng(8), (300, 300), "float64")
    keep = a.copy()
    lu, piv, info = recursive_getrf(np.dtype(np.float64))(a, overwrite_a=1)
    assert lu is a and info == 0
    ref_lu, ref_piv = sla.lu_factor(keep)
    np.testing.assert_array_equal(piv, ref_piv)
    assert np.linalg.norm(lu - ref_lu) < 1e-12 * np.linalg.norm(ref_lu)


def test_which_orders_and_dtypes_take_the_recursion():
    low, high = numpy_lapack.FROM_ORDER, recursive_lu.UP_TO
    for dtype in ("float32", "float64"):
        assert recursive_first(low, dtype) and recursive_first(high, dtype)
        assert not recursive_first(low - 1, dtype) and not recursive_first(high + 1, dtype)
        getrf, getrs = numpy_algorithms.for_order(low, dtype, "getrf", "getrs")
        assert getrf is recursive_getrf(np.dtype(dtype)) and getrs is numpy_lapack.routines(dtype, "getrs")[0]
        assert getrf_order(high, dtype).index("recursive") == (0 if dtype == "float32" else 1)  # after the look-ahead LU
        assert getrf_order(high + 1, dtype).index("recursive") > getrf_order(high + 1, dtype).index(None)
    assert not recursive_first(512, "complex128")
    assert numpy_algorithms.for_order(512, "complex128", "getrf")[0] is numpy_lapack.routines("complex128", "getrf")[0]


@pytest.mark.parametrize("n, dtype, first", [(300, "float64", True), (300, "complex128", False),
                                             (recursive_lu.UP_TO + 1, "float32", False)])
def test_lu_plans_offer_it_and_every_candidate_solves(n, dtype, first):
    rng = np.random.default_rng(n)
    a = np.ascontiguousarray(rand(rng, (n, n), dtype)) + np.sqrt(n) * np.eye(n, dtype=dtype)
    b = rand(rng, (n, 2), dtype)
    plan = LU(a)
    candidates = plan._engine.candidates(plan.problem)
    recursive = [c for c in candidates if c.params.get("algorithm") == "recursive"]
    assert len(recursive) == 1 and (candidates[0] == recursive[0]) == first
    for cand in candidates:
        plan._install(plan._engine.prepare(plan.problem, cand), "test")
        plan.execute()
        for trans in (0, 1):
            op = wide(a) if trans == 0 else wide(a).T
            x = plan.solve(b, trans=trans)
            err = np.linalg.norm(op @ wide(x) - wide(b)) / np.linalg.norm(wide(b))
            assert err < TOL[dtype] * n * 10, (cand, trans, err)
