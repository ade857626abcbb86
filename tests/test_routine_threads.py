"""Thread counts calibrated per routine (nvmathpy.linalg.solvers.cpu._routine_threads): what the
``scipy.linalg`` drop-in's SVD, general eigenproblem and QR read, and how they run with it.

No test depends on a timing: values are injected (``calibration.record``), the calls' thread
count is read inside them, and measurements, where they run, are only checked for their form.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.linalg as sla

import nvmathpy.scipy.linalg as nsl
from nvmathpy.linalg.lapack import fast_module
from nvmathpy.linalg.solvers.cpu import _routine_threads as rt
from nvmathpy.linalg.solvers.cpu._mkl_geev import geev
from nvmathpy.linalg.solvers.cpu._pool_threads import (THREAD_COUNT, count_changed, holds_counts, on_counts,
                                                       scipy_thread_count_functions, thread_count_functions)
from nvmathpy.plan import calibration

pytestmark = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: no thread count to choose")
#: The compiled extension, whose one-call SVD and QR the drop-in runs on the calibrated count.
FAST = fast_module(wait=True)


@pytest.fixture(autouse=True)
def scipy_pool_of_two():
    """SciPy's OpenBLAS on two threads for the test (its count as it was afterwards), and this
    test's own calibration memo (conftest gives each test its own cache directory)."""
    get, put = scipy_thread_count_functions()
    before = get()
    put(2)
    calibration.forget()
    yield get
    put(before)
    calibration.forget()


def record(routine, dtype, order, first):
    calibration.record(f"threads.{routine}.{dtype}.{order}", {"first": first}, {}, 0.1)


def thread_counts_seen(monkeypatch, get):
    """The SciPy pool's thread count inside each calibrated call, as run."""
    seen = []
    run = rt._on_threads

    def spy(count, call):
        return run(count, lambda: (seen.append(get()), call())[1])

    monkeypatch.setattr(rt, "_on_threads", spy)
    return seen


@pytest.mark.parametrize("m, n, order", [(100, 100, 100), (400, 25, 63), (25, 400, 63), (1, 7, 2), (0, 5, 0)])
def test_the_equivalent_order_does_the_same_work(m, n, order):
    assert rt.equivalent_order(m, n) == order


@pytest.mark.parametrize("n", [5, 64, 76, 961, 4000])
def test_orders_outside_the_measured_range_keep_the_library_count(n):
    record("gesdd", "float64", 96, 1)
    record("gesdd", "float64", 768, 1)
    assert rt.threads_for("gesdd", n, "float64") == (False, None)


@pytest.mark.parametrize("n, nearest", [(77, 96), (110, 96), (115, 128), (700, 768), (960, 768)])
def test_an_order_reads_the_nearest_measured_order(n, nearest):
    record("geev", "float32", nearest, 1)
    assert rt.threads_for("geev", n, np.float32) == (True, 1)
    assert rt.threads_for("geev", n, np.float64) == (False, None)  # another dtype's value
    assert rt.threads_for("geqrf", n, np.float32) == (False, None)  # another routine's


def test_the_library_count_is_a_known_value():
    record("geqrf", "float64", 256, rt.LIBRARY)
    assert rt.threads_for("geqrf", 250, "float64") == (True, None)


def test_complex_dtypes_are_not_calibrated():
    assert rt._name_for("gesdd", 128, np.complex128) is None


@pytest.mark.parametrize("name, routine, operand", [
    ("svd", "gesdd", (131, 127)), ("svdvals", "gesdd", (127, 127)), ("orth", "gesdd", (127, 131)),
    ("null_space", "gesdd", (61, 127)), ("pinv", "gesdd", (127, 127)), ("eig", "geev", (127, 127)),
    ("eigvals", "geev", (127, 127)), ("qr", "geqrf", (131, 127))])
@pytest.mark.skipif(FAST is None, reason="the compiled extension does not build here")
def test_a_calibrated_single_thread_runs_the_call_on_one_thread_with_scipys_result(monkeypatch, scipy_pool_of_two,
                                                                                 name, routine, operand):
    get = scipy_pool_of_two
    order = min(rt.ORDERS, key=lambda o: abs(np.log(rt.equivalent_order(*operand) / o)))
    record(routine, "float64", order, 1)
    seen = thread_counts_seen(monkeypatch, get)
    a = np.random.default_rng(7).standard_normal(operand)
    ours, theirs = getattr(nsl, name)(a), getattr(sla, name)(a)
    assert seen == [1] and get() == 2  # run on one thread, the count given back
    if name == "eigvals":
        assert np.allclose(np.sort_complex(ours), np.sort_complex(theirs), rtol=1e-10, atol=1e-10)
        return
    if name == "eig":  # the same eigenvalues; the vectors, each up to a phase, checked as such
        (w, v), (w_ref, _) = ours, theirs
        assert np.allclose(np.sort_complex(w), np.sort_complex(w_ref), rtol=1e-10, atol=1e-10)
        assert np.allclose(a @ v, v * w, atol=1e-9)
        return
    ours = ours if isinstance(ours, tuple) else (ours,)
    theirs = theirs if isinstance(theirs, tuple) else (theirs,)
    for x, y in zip(ours, theirs):
        if name in ("svd", "orth", "null_space", "qr"):  # singular vectors / Q columns: up to a sign
            x, y = np.abs(x), np.abs(y)
        assert x.shape == y.shape and np.allclose(x, y, rtol=1e-8, atol=1e-8)


@pytest.mark.skipif(FAST is None, reason="the compiled extension does not build here")
def test_the_library_count_runs_the_call_as_it_is(monkeypatch, scipy_pool_of_two):
    record("gesdd", "float64", 128, rt.LIBRARY)
    seen = thread_counts_seen(monkeypatch, scipy_pool_of_two)
    nsl.svd(np.random.default_rng(1).standard_normal((128, 128)))
    assert seen == []


def test_a_lowered_count_held_by_another_caller_is_left_as_it_is(scipy_pool_of_two):
    get = scipy_pool_of_two
    record("gesdd", "float64", 128, 1)
    seen = []
    with THREAD_COUNT:  # another caller has changed a count
        rt.on_calibrated_threads("gesdd", 128, 128, "float64", lambda: seen.append(get()))
    assert seen == [2]


def test_inside_a_stepped_down_call_the_calibrated_count_nests(scipy_pool_of_two):
    """A call stepped down to the free cores (here: NumPy's pool lowered, as beside a spinning
    SciPy worker) holds the count lock; the calibrated count of the SciPy routine it runs still
    applies, and each count is given back in turn."""
    get = scipy_pool_of_two
    numpy_get, numpy_put = thread_count_functions()
    numpy_before = numpy_get()
    record("gesdd", "float64", 128, 1)
    seen = []

    def inner():
        seen.append((holds_counts(), get(), numpy_get()))
        rt.on_calibrated_threads("gesdd", 128, 128, "float64", lambda: seen.append((get(), numpy_get())))
        seen.append((get(), numpy_get()))

    on_counts([(numpy_put, 1, numpy_before)], inner)
    assert seen == [(True, 2, 1), (1, 1), (2, 1)]
    assert get() == 2 and numpy_get() == numpy_before and not holds_counts()


def test_a_pool_lowered_by_the_outer_call_is_not_calibrated_there(monkeypatch, scipy_pool_of_two):
    """Measuring SciPy's pool while the call it runs in has lowered its count would time the
    lowered count as SciPy's own."""
    monkeypatch.setenv("NVMATHPY_CALIBRATE", "auto")
    monkeypatch.setitem(rt.CALIBRATIONS, "threads.geev.float64.128", lambda s: pytest.fail("measured"))
    get, put = scipy_thread_count_functions()

    def inner():
        assert count_changed(put) and not count_changed(print)
        return rt.on_calibrated_threads("geev", 128, 128, "float64", lambda: "done")

    assert on_counts([(put, 1, get())], inner) == "done" and calibration.entries() == []


def test_without_a_value_and_with_automatic_calibration_off_nothing_is_measured(monkeypatch):
    monkeypatch.setattr(rt, "CALIBRATIONS", {name: (lambda s: pytest.fail("measured")) for name in rt.CALIBRATIONS})
    assert nsl.svd(np.eye(128), compute_uv=False).tolist() == [1.0] * 128
    assert calibration.entries() == []


def test_automatic_calibration_measures_after_a_call_that_fits_the_bound(monkeypatch):
    monkeypatch.setenv("NVMATHPY_CALIBRATE", "auto")
    bounds = []

    def measure(seconds):
        bounds.append(seconds)
        return {"first": 1}, {"1": 1.5, "library": 1.0}

    monkeypatch.setitem(rt.CALIBRATIONS, "threads.geev.float64.128", measure)
    calls = []
    assert rt.on_calibrated_threads("geev", 128, 128, "float64", lambda: calls.append(1) or "done") == "done"
    assert calls == [1] and bounds == [calibration.AUTO_SECONDS]  # the call first, then the measurement
    assert rt.threads_for("geev", 128, "float64") == (True, 1)


def test_a_call_too_long_for_the_bound_is_not_measured(monkeypatch):
    monkeypatch.setenv("NVMATHPY_CALIBRATE", "auto")
    monkeypatch.setattr(calibration, "AUTO_SECONDS", 0.0)  # any call is then too long to measure in time
    monkeypatch.setitem(rt.CALIBRATIONS, "threads.geev.float64.128", lambda s: pytest.fail("measured"))
    assert rt.on_calibrated_threads("geev", 128, 128, "float64", lambda: "done") == "done"
    assert calibration.entries() == []


@pytest.mark.parametrize("routine", rt.ROUTINES)
def test_measure_times_one_thread_against_scipys_own_call(routine):
    value, measured = rt.measure(routine, "float64", 64, seconds=30.0)
    mkl = {rt.MKL} if routine == "geev" and geev("d") is not None else set()  # (tests/test_mkl_geev.py)
    assert value["first"] in {1, rt.LIBRARY} | mkl
    assert set(measured) == {"1", rt.LIBRARY} | mkl and all(r > 0 for r in measured.values())


def test_measure_refuses_a_bound_it_cannot_keep_before_trying_one_thread(monkeypatch):
    tried = []
    monkeypatch.setattr(rt, "_on_threads", lambda count, call: tried.append(count))
    with pytest.raises(rt.OutOfTime, match="threads of gesdd float64 n=64"):
        rt.measure("gesdd", "float64", 64, seconds=0.0)
    assert tried == []


def test_measure_refuses_a_pool_of_one_thread(scipy_pool_of_two):
    get, put = scipy_thread_count_functions()
    put(1)
    with pytest.raises(rt.OutOfTime, match="one thread"):
        rt.measure("gesdd", "float64", 64, seconds=30.0)
    if geev("d") is None:
        with pytest.raises(rt.OutOfTime, match="one thread"):
            rt.measure("geev", "float64", 64, seconds=30.0)
    else:  # MKL's routine still is a contender
        value, measured = rt.measure("geev", "float64", 64, seconds=30.0)
        assert set(measured) == {rt.MKL, rt.LIBRARY}


def test_tune_knows_the_thread_counts():
    assert {"threads.gesdd.float64.128", "threads.geev.float32.768", "threads.geqrf.float64.96"} <= set(rt.CALIBRATIONS)
