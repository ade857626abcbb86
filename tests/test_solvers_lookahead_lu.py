"""The look-ahead LU on NumPy's OpenBLAS (nvmathpy/linalg/solvers/cpu/_lookahead_lu.py).

It must return what LAPACK's ``?getrf`` returns (factors up to rounding, the same pivots in
float64, ``info`` naming the first zero pivot) for every order, panel width, chunk width and
thread count, leave OpenBLAS's thread count as it found it, and be placed first where
:func:`getrf_order` says. Small panel and chunk widths (``NB``/``W`` patched down) make small
matrices take many steps, so every branch runs in milliseconds.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st
from lookahead_helpers import TOL, calibrated_first, no_other_threads, thread_count  # noqa: F401 (an autouse fixture)
from numerics import zero_pivot_cases

from nvmathpy.linalg import LU
from nvmathpy.linalg.solvers.cpu import _lookahead as lookahead
from nvmathpy.linalg.solvers.cpu import _lookahead_lu as lookahead_lu
from nvmathpy.linalg.solvers.cpu import _numpy_algorithms as numpy_algorithms, _numpy_lapack as numpy_lapack
from nvmathpy.linalg.solvers.cpu._lookahead_lu import (
    getrf_of,
    getrf_order,
    lookahead_available,
    lookahead_first,
    lookahead_getrf,
)
from nvmathpy.linalg.solvers.cpu._recursive_lu import recursive_getrf

DTYPES = ["float32", "float64"]

pytestmark = pytest.mark.skipif(not lookahead_available(np.float64),
                                reason="no C compiler, or NumPy's BLAS exports no LAPACK or thread count here")


def rand(rng, shape, dtype):
    return np.asfortranarray(rng.standard_normal(shape).astype(dtype))


def rebuilt(lu, piv):
    """``P L U`` from LAPACK-style factors (``piv`` 0-based row interchanges), in float64."""
    lu = lu.astype(np.float64)
    product = (np.tril(lu, -1) + np.eye(len(lu))) @ np.triu(lu)
    for i in reversed(range(len(piv))):  # undo the interchanges, last first
        product[[i, piv[i]]] = product[[piv[i], i]]
    return product


def check(a, dtype, nb=None, w=None, threads=None, exact_pivots=None):
    """Factor ``a`` with look-ahead (steps of ``nb`` columns, chunks of ``w``) and compare with
    SciPy's getrf: the same ``info``, ``P L U = A`` to rounding, and (float64) the same pivots."""
    with pytest.MonkeyPatch.context() as patch:
        if nb is not None:
            patch.setattr(lookahead_lu, "NB", nb)
        if w is not None:
            patch.setattr(lookahead_lu, "W", w)
        before, count = a.copy(), thread_count()
        lu, piv, info = lookahead_getrf(np.dtype(dtype))(a, threads=threads)
    np.testing.assert_array_equal(a, before)  # overwrite_a=0 leaves the input alone
    assert thread_count() == count
    assert lu.dtype == np.dtype(dtype) and lu.shape == a.shape and lu.flags.f_contiguous and piv.dtype == np.int32
    ref_lu, ref_piv, ref_info = sla.lapack.get_lapack_funcs("getrf", dtype=np.dtype(dtype))(a)
    assert info == ref_info
    scale = np.linalg.norm(a.astype(np.float64)) or 1.0
    n = max(a.shape[0], 1)
    assert np.linalg.norm(rebuilt(lu, piv) - a) / scale < TOL[dtype] * n * 4
    if exact_pivots if exact_pivots is not None else dtype == "float64":
        np.testing.assert_array_equal(piv, ref_piv)
        assert np.linalg.norm(lu - ref_lu) <= 1e-12 * n * np.linalg.norm(ref_lu)
    return lu, piv


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 7, 31, 37, 64, 65])
@pytest.mark.parametrize("nb, w", [(1, 1), (3, 5), (8, 2), (16, 16)])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_small_steps_give_lapacks_factors(dtype, n, nb, w, threads):
    rng = np.random.default_rng(n * 100 + nb * 10 + w + threads)
    check(rand(rng, (n, n), dtype), dtype, nb, w, threads)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [127, 128, 129, 389, 521])
def test_default_steps(dtype, n):
    rng = np.random.default_rng(n)
    check(rand(rng, (n, n), dtype), dtype)


@pytest.mark.parametrize("threads", [1, 2, 4, 7])
def test_more_threads_than_chunks_or_cores(threads):
    rng = np.random.default_rng(threads)
    check(rand(rng, (97, 97), "float64"), "float64", nb=8, w=4, threads=threads)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 48), nb=st.integers(1, 12), w=st.integers(1, 12), threads=st.integers(1, 3),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16), layout=st.sampled_from(["F", "C", "strided"]))
def test_any_order_widths_threads_and_layout(n, nb, w, threads, dtype, seed, layout):
    a = rand(np.random.default_rng(seed), (n, 2 * n if layout == "strided" else n), dtype)
    a = {"F": a, "C": np.ascontiguousarray(a), "strided": a[:, ::2]}[layout]
    check(a, dtype, nb, w, threads)


@pytest.mark.parametrize("nb", [2, 4, 128])
def test_info_names_the_first_zero_pivot_as_lapack_does(nb):
    rng = np.random.default_rng(7)
    for name, a in zero_pivot_cases(rng, 300 if nb == 128 else 30).items():
        check(a, "float64", nb, nb)


def test_nan_input_returns_with_nan_factors():
    a = rand(np.random.default_rng(3), (200, 200), "float64")
    a[50, 60] = np.nan
    lu, piv, info = lookahead_getrf(np.float64)(a)
    assert np.isnan(lu).any() and piv.shape == (200,)


def test_overwrite_factors_in_place():
    a = rand(np.random.default_rng(8), (300, 300), "float64")
    keep = a.copy()
    lu, piv, info = lookahead_getrf(np.dtype(np.float64))(a, overwrite_a=1)
    assert lu is a and info == 0
    ref_lu, ref_piv = sla.lu_factor(keep)
    np.testing.assert_array_equal(piv, ref_piv)
    assert np.linalg.norm(lu - ref_lu) < 1e-12 * np.linalg.norm(ref_lu)


@pytest.mark.parametrize("shape", [(40, 25), (25, 40)])
def test_other_shapes_factor_recursively(shape):
    a = rand(np.random.default_rng(9), shape, "float64")
    lu, piv, info = lookahead_getrf(np.float64)(a)
    ref = recursive_getrf(np.float64)(a)
    np.testing.assert_array_equal(piv, ref[1])
    np.testing.assert_array_equal(lu, ref[0])


def test_another_running_thread_sends_the_call_to_the_recursive_lu(monkeypatch):
    a = rand(np.random.default_rng(11), (300, 300), "float64")
    calls = []
    monkeypatch.setattr(lookahead, "others_running", lambda: calls.append(1) or 1)
    lu, piv, info = lookahead_getrf(np.float64)(a)
    ref = recursive_getrf(np.float64)(a)
    assert calls and info == ref[2]
    np.testing.assert_array_equal(piv, ref[1])
    np.testing.assert_array_equal(lu, ref[0])


def test_concurrent_calls_all_correct_and_the_thread_count_restored():
    rng = np.random.default_rng(10)
    mats = [rand(rng, (400, 400), "float64") for _ in range(6)]
    refs = [sla.lu_factor(m) for m in mats]
    count, results, errors = thread_count(), {}, []

    def run(i):
        try:
            results[i] = lookahead_getrf(np.float64)(mats[i])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(len(mats))]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert not errors and thread_count() == count
    for (lu, piv, info), (ref_lu, ref_piv) in zip((results[i] for i in range(len(mats))), refs):
        np.testing.assert_array_equal(piv, ref_piv)
        assert np.linalg.norm(lu - ref_lu) < 1e-12 * np.linalg.norm(ref_lu)


def test_which_orders_and_dtypes_take_it_first(monkeypatch):
    for dtype, low in lookahead_lu.FIRST_FROM.items():
        high = lookahead_lu.UP_TO
        assert lookahead_first(low, dtype) and lookahead_first(high, dtype)
        assert not lookahead_first(low - 1, dtype) and not lookahead_first(high + 1, dtype)
    assert not lookahead_first(1024, "complex128")
    assert getrf_order(1024, "float64") == ["lookahead", "recursive", None]
    assert getrf_order(512, "float64") == ["recursive", None, "lookahead"]
    assert getrf_order(1024, "float32") == ["recursive", None, "lookahead"]
    assert getrf_order(2048, "float32") == ["lookahead", None, "recursive"]
    assert getrf_order(4096, "float64") == [None, "recursive", "lookahead"]
    assert getrf_order(1024, "complex128")[0] is None and "lookahead" not in getrf_order(1024, "complex128")
    # uncalibrated, SciPy's routine goes first at the orders calibration covers; calibrated, its choice
    assert numpy_algorithms.for_order(1024, "float64", "getrf", "getrs") is None
    calibrated_first("getrf", "float64", 1024, "lookahead")
    getrf, getrs = numpy_algorithms.for_order(1024, "float64", "getrf", "getrs")
    assert getrf is lookahead_getrf(np.float64) and getrs is numpy_lapack.routines("float64", "getrs")[0]
    assert getrf_of(None, "float64") is numpy_lapack.routines("float64", "getrf")[0]
    many = (lambda: lookahead.MAX_THREADS + 1, lambda count: None)
    monkeypatch.setattr(lookahead, "_thread_count_functions", lambda: many)
    assert not lookahead_first(1024, "float64") and getrf_order(1024, "float64")[-1] == "lookahead"


def test_unavailable_without_openblas_thread_count(monkeypatch):
    monkeypatch.setattr(lookahead, "_thread_count_functions", lambda: None)
    assert not lookahead_available("float64") and not lookahead_first(1024, "float64")
    assert "lookahead" not in getrf_order(1024, "float64")


def test_lu_plan_puts_it_first_and_solves_both_ways():
    n = 800
    rng = np.random.default_rng(n)
    a = rng.standard_normal((n, n)) + np.sqrt(n) * np.eye(n)  # C-ordered: factored through a.T
    b = rng.standard_normal((n, 3))
    calibrated_first("getrf", "float64", 768, "lookahead")  # the measured order nearest 800
    plan = LU(a)
    assert plan._engine.candidates(plan.problem)[0].params.get("algorithm") == "lookahead"
    for trans in (0, 1):
        x = plan.solve(b, trans=trans)
        op = a if trans == 0 else a.T
        assert np.linalg.norm(op @ x - b) / np.linalg.norm(b) < 1e-12
    assert plan.candidate.params.get("algorithm") == "lookahead"


@pytest.fixture
def eight_cores(monkeypatch):
    """A machine of 8 cores whose OpenBLAS runs 8 threads; returns a setter of how many
    threads of other processes are runnable."""
    monkeypatch.setattr(lookahead.os, "cpu_count", lambda: 8)
    monkeypatch.setattr(lookahead, "_thread_count_functions", lambda: (lambda: 8, lambda count: None))
    return lambda busy: monkeypatch.setattr(lookahead, "busy_elsewhere", lambda: busy)


@pytest.mark.parametrize("busy, expected", [(0, 8), (3, 5), (6, 2), (7, None), (20, None)])
def test_the_drivers_step_down_to_the_cores_other_processes_leave(eight_cores, busy, expected):
    eight_cores(busy)
    assert lookahead.run_alone(lambda count: count, None) == expected


def test_an_explicit_thread_count_is_kept_on_a_busy_machine(eight_cores):
    eight_cores(20)
    assert lookahead.run_alone(lambda count: count, 3) == 3


def test_busy_cores_send_the_call_to_the_recursive_lu(monkeypatch):
    monkeypatch.setattr(lookahead, "busy_elsewhere", lambda: os.cpu_count())
    a = rand(np.random.default_rng(12), (300, 300), "float64")
    lu, piv, info = lookahead_getrf(np.float64)(a)
    ref = recursive_getrf(np.float64)(a)
    np.testing.assert_array_equal(piv, ref[1])
    np.testing.assert_array_equal(lu, ref[0])
