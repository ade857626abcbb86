"""The look-ahead Cholesky on NumPy's OpenBLAS (nvmathpy/linalg/solvers/cpu/_lookahead_cholesky.py).

It must return what LAPACK's ``?potrf`` returns for the lower triangle (the factor to
rounding, the strictly upper triangle untouched or zeroed as ``clean`` says, ``info`` the order
of the first leading minor that is not positive definite) for every order, panel width, chunk
width and thread count, hand the upper triangle and other calls to OpenBLAS, and be placed
first where :func:`potrf_order` says.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st
from lookahead_helpers import TOL, calibrated_first, no_other_threads, thread_count  # noqa: F401 (an autouse fixture)

from nvmathpy.linalg import Cholesky
from nvmathpy.linalg.solvers.cpu import _lookahead as lookahead
from nvmathpy.linalg.solvers.cpu import _lookahead_cholesky as lookahead_cholesky
from nvmathpy.linalg.solvers.cpu import _numpy_algorithms as numpy_algorithms, _numpy_lapack as numpy_lapack
from nvmathpy.linalg.solvers.cpu._lookahead_cholesky import (
    lookahead_available,
    lookahead_potrf,
    potrf_of,
    potrf_order,
)

DTYPES = ["float32", "float64"]

pytestmark = pytest.mark.skipif(not lookahead_available(np.float64),
                                reason="no C compiler, or NumPy's BLAS exports no LAPACK or thread count here")


def spd(rng, n, dtype):
    x = rng.standard_normal((n, n))
    return np.asfortranarray((x @ x.T + n * np.eye(n)).astype(dtype))


def check(a, dtype, nb=None, w=None, threads=None, clean=0):
    """Factor ``a``'s lower triangle with look-ahead and compare with SciPy's potrf."""
    with pytest.MonkeyPatch.context() as patch:
        if nb is not None:
            patch.setattr(lookahead_cholesky, "NB", nb)
        if w is not None:
            patch.setattr(lookahead_cholesky, "W", w)
        before, count = a.copy(), thread_count()
        c, info = lookahead_potrf(np.dtype(dtype))(a, lower=1, clean=clean, threads=threads)
    np.testing.assert_array_equal(a, before)  # overwrite_a=0 leaves the input alone
    assert thread_count() == count
    assert c.dtype == np.dtype(dtype) and c.shape == a.shape and c.flags.f_contiguous
    ref, ref_info = sla.lapack.get_lapack_funcs("potrf", dtype=np.dtype(dtype))(a, lower=1, clean=clean)
    assert info == ref_info
    upper = np.triu_indices(a.shape[0], 1)
    np.testing.assert_array_equal(c[upper], 0 if clean and info == 0 else a[upper])
    if info == 0:
        low = np.tril(c).astype(np.float64)
        scale = np.linalg.norm(a.astype(np.float64)) or 1.0
        n = max(a.shape[0], 1)
        assert np.linalg.norm(low @ low.T - np.tril(a) - np.tril(a, -1).T) / scale < TOL[dtype] * n * 4
        assert np.linalg.norm(low - np.tril(ref)) <= TOL[dtype] * 10 * n * np.linalg.norm(np.tril(ref))
    return c, info


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 7, 31, 64, 65])
@pytest.mark.parametrize("nb, w", [(1, 1), (3, 5), (8, 2), (16, 16)])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_small_steps_give_lapacks_factor(dtype, n, nb, w, threads):
    rng = np.random.default_rng(n * 100 + nb * 10 + w + threads)
    check(spd(rng, n, dtype), dtype, nb, w, threads)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [127, 128, 129, 389, 600])
@pytest.mark.parametrize("clean", [0, 1])
def test_default_steps(dtype, n, clean):
    check(spd(np.random.default_rng(n), n, dtype), dtype, clean=clean)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 48), nb=st.integers(1, 12), w=st.integers(1, 12), threads=st.integers(1, 3),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16), layout=st.sampled_from(["F", "C", "strided"]))
def test_any_order_widths_threads_and_layout(n, nb, w, threads, dtype, seed, layout):
    rng = np.random.default_rng(seed)
    a = spd(rng, n, dtype)
    a = {"F": a, "C": np.ascontiguousarray(a), "strided": np.asfortranarray(np.repeat(a, 2, axis=1))[:, ::2]}[layout]
    check(a, dtype, nb, w, threads)


@pytest.mark.parametrize("nb", [3, 16, 128])
@pytest.mark.parametrize("where", ["first", "inside a panel", "first of a panel", "last"])
def test_info_names_the_first_minor_that_is_not_positive_definite(nb, where):
    n = 300
    a = spd(np.random.default_rng(5), n, "float64")
    k = {"first": 0, "inside a panel": 2 * nb + 1, "first of a panel": 2 * nb, "last": n - 1}[where]
    a[k, k] = -1.0
    c, info = check(a, "float64", nb, nb)
    assert info == k + 1


def test_overwrite_factors_in_place():
    a = spd(np.random.default_rng(8), 300, "float64")
    keep = a.copy()
    c, info = lookahead_potrf(np.float64)(a, lower=1, overwrite_a=1)
    assert c is a and info == 0
    np.testing.assert_allclose(c, sla.cholesky(keep, lower=True), rtol=0, atol=1e-12 * np.abs(keep).max())


def test_upper_triangle_and_another_running_thread_go_to_openblas(monkeypatch):
    a = spd(np.random.default_rng(9), 300, "float64")
    openblas = numpy_lapack.routines(np.float64, "potrf")[0]
    c, info = lookahead_potrf(np.float64)(a, lower=0)
    np.testing.assert_array_equal(c, openblas(a, lower=0)[0])
    calls = []
    monkeypatch.setattr(lookahead, "others_running", lambda: calls.append(1) or 1)
    c, info = lookahead_potrf(np.float64)(a, lower=1)
    assert calls
    np.testing.assert_array_equal(c, openblas(a, lower=1)[0])


def test_placement(monkeypatch):
    first = lookahead_cholesky.FIRST_FROM
    assert potrf_order(first, "float64") == ["lookahead", None] == potrf_order(first, "float32")
    assert potrf_order(first - 1, "float64") == [None, "lookahead"]
    assert potrf_order(1024, "complex128") == [None]
    assert numpy_algorithms.for_order(1024, "float64", "potrf") is None  # uncalibrated: SciPy's routine
    calibrated_first("potrf", "float64", 1024, "lookahead")
    (potrf,) = numpy_algorithms.for_order(1024, "float64", "potrf")
    assert potrf is lookahead_potrf(np.float64) and potrf_of(None, "float64") is numpy_lapack.routines("float64",
                                                                                                        "potrf")[0]
    monkeypatch.setattr(lookahead, "_thread_count_functions", lambda: (lambda: lookahead.MAX_THREADS + 1, None))
    assert potrf_order(1024, "float64") == [None, "lookahead"]


def test_cholesky_plan_puts_it_first_and_solves():
    n = 800
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, n))
    a = x @ x.T + n * np.eye(n)  # C-ordered: SciPy's upper triangle is the Fortran view's lower one
    b = rng.standard_normal((n, 2))
    calibrated_first("potrf", "float64", 768, "lookahead")  # the measured order nearest 800
    plan = Cholesky(a, lower=False)
    assert plan._engine.candidates(plan.problem)[0].params.get("algorithm") == "lookahead"
    x_ = plan.solve(b)
    assert np.linalg.norm(a @ x_ - b) / np.linalg.norm(b) < 1e-12
    assert plan.candidate.params.get("algorithm") == "lookahead"
    np.testing.assert_allclose(plan.factor, sla.cholesky(a), rtol=0, atol=1e-10)
