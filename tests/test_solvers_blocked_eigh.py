"""The Hermitian eigensolver with the blocked back-transformation
(nvmathpy/linalg/solvers/cpu/_blocked_eigh.py) and the Eigh plan's ``blocked_evd`` candidate.

Its eigenvalues must be LAPACK's and its eigenvectors an orthonormal basis with
``A V = V diag(w)``, for every dtype, both triangles (the other one holding garbage), and
block widths (``BLOCK`` patched down) that split small matrices into many blocks, including a
last, partial one.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st
from lookahead_helpers import calibrated_first

import nvmathpy.scipy.linalg as nsl
from nvmathpy.linalg import Eigh
from nvmathpy.linalg.solvers.cpu import _householder as householder
from nvmathpy.linalg.solvers.cpu._blocked_eigh import blocked_eigh, blocked_eigh_available
from nvmathpy.linalg.solvers.plans.eigh import BLOCKED_FROM

DTYPES = ["float32", "float64", "complex64", "complex128"]
TOL = {"float32": 2e-6, "complex64": 2e-6, "float64": 1e-14, "complex128": 1e-14}

pytestmark = pytest.mark.skipif(not blocked_eigh_available(np.float64), reason="NumPy's BLAS exports no LAPACK here")


def wide(x):
    return np.asarray(x).astype(np.complex128 if np.asarray(x).dtype.kind == "c" else np.float64)


def hermitian(rng, n, dtype):
    x = rng.standard_normal((n, n))
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal((n, n))
    return (x + x.conj().T).astype(dtype)


def with_garbage(h, lower):
    """``h`` with the triangle that must not be read overwritten (Fortran order)."""
    g = np.array(h, order="F")
    n = h.shape[0]
    rows, cols = np.triu_indices(n, 1) if lower else np.tril_indices(n, -1)
    g[rows, cols] = 1e3 * (1 + 1j) if g.dtype.kind == "c" else -7e2
    return g


def check(h, dtype, lower, block=None):
    """Decompose ``h`` (garbage in the unread triangle) and compare with float64 LAPACK."""
    g = with_garbage(h, lower)
    before = g.copy()
    with pytest.MonkeyPatch.context() as patch:
        if block is not None:
            patch.setattr(householder, "BLOCK", block)
        w, v, info = blocked_eigh(dtype)(g, lower, True)
        w_only, none, info_only = blocked_eigh(dtype)(g, lower, False)
    np.testing.assert_array_equal(g, before)  # the input is left alone
    n = h.shape[0]
    assert info == info_only == 0 and none is None
    assert w.dtype == np.finfo(dtype).dtype and v.dtype == np.dtype(dtype) and v.shape == (n, n)
    ref = np.linalg.eigvalsh(wide(h))
    scale = max(np.abs(ref).max(), 1.0)
    tol = TOL[np.dtype(dtype).name] * max(n, 10)
    assert np.abs(wide(w) - ref).max() / scale < tol
    assert np.abs(wide(w_only) - ref).max() / scale < tol
    assert np.all(np.diff(w) >= 0)
    assert np.linalg.norm(wide(h) @ wide(v) - wide(v) * wide(w)) / (scale * max(n, 1)) < tol
    assert np.abs(wide(v).conj().T @ wide(v) - np.eye(n)).max() < tol
    return w, v


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 3, 7, 31, 64])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("block", [1, 4, 9])
def test_small_blocks_every_dtype_and_triangle(dtype, n, lower, block):
    check(hermitian(np.random.default_rng(n + block), n, dtype), dtype, lower, block)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [True, False])
def test_default_block_on_an_order_with_a_partial_last_block(dtype, lower):
    n = 2 * householder.BLOCK + 37
    w, v = check(hermitian(np.random.default_rng(3), n, dtype), dtype, lower)
    if dtype == "float64":  # the same eigenvalues as LAPACK's own ?syevd, to rounding
        ref = sla.eigh(hermitian(np.random.default_rng(3), n, dtype), eigvals_only=True, driver="evd")
        assert np.abs(w - ref).max() < 1e-13 * np.abs(ref).max()


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 40), block=st.integers(1, 9), dtype=st.sampled_from(DTYPES), lower=st.booleans(),
       seed=st.integers(0, 2**16))
def test_any_order_and_block_width(n, block, dtype, lower, seed):
    check(hermitian(np.random.default_rng(seed), n, dtype), dtype, lower, block)


@pytest.mark.parametrize("factor", [1e-160, 1e160])
def test_tiny_and_huge_matrices_are_scaled_into_range(factor):
    h = hermitian(np.random.default_rng(4), 50, "float64")
    w, v, info = blocked_eigh(np.float64)(np.asfortranarray(h * factor), True, True)
    ref = np.linalg.eigvalsh(h)
    assert info == 0 and np.all(np.isfinite(w)) and np.all(np.isfinite(v))
    assert np.abs(w / factor - ref).max() < 1e-13 * np.abs(ref).max()
    assert np.linalg.norm(h @ v - v * (w / factor)) < 1e-12 * np.abs(ref).max()


def test_degenerate_and_diagonal_matrices():
    # Repeated eigenvalues and reflectors with tau = 0 (already tridiagonal columns).
    for h in (np.eye(40), np.diag(np.arange(40.0)), np.ones((40, 40)), np.zeros((40, 40))):
        check(h, "float64", True, 4)
        check(h, "float64", False, 4)


def test_overwrite_uses_the_callers_fortran_array():
    h = np.asfortranarray(hermitian(np.random.default_rng(5), 60, "float64"))
    keep = h.copy()
    w, v, info = blocked_eigh(np.float64)(h, True, True, overwrite_a=True)
    assert info == 0 and not np.array_equal(h, keep)  # the reduction was done in place
    assert np.abs(w - np.linalg.eigvalsh(keep)).max() < 1e-13 * np.abs(w).max()


@pytest.mark.parametrize("dtype", ["float64", "complex128", "float32"])
@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("lower", [True, False])
def test_the_plan_takes_it_first_from_its_order(dtype, layout, lower):
    n = BLOCKED_FROM + 3
    h = hermitian(np.random.default_rng(6), n, dtype)
    a = with_garbage(h, lower)
    a = np.ascontiguousarray(a) if layout == "C" else a
    keep = a.copy()
    if dtype != "complex128":  # calibrated dtypes: uncalibrated, SciPy's default driver goes first
        calibrated_first("eigh", dtype, 512, "blocked_evd")
    with Eigh(a, lower=lower) as plan:
        plan.plan()
        assert plan.candidate.label == "blocked_evd"
        w, v = plan.execute()
    np.testing.assert_array_equal(a, keep)
    ref = np.linalg.eigvalsh(wide(h))
    tol = TOL[dtype] * n
    assert np.abs(wide(w) - ref).max() < tol * np.abs(ref).max()
    assert np.linalg.norm(wide(h) @ wide(v) - wide(v) * wide(w)) < tol * np.abs(ref).max() * n
    with Eigh(a, lower=lower, eigvals_only=True) as plan:
        assert plan.plan().candidate.label == "blocked_evd"
        assert np.abs(wide(plan.execute()) - ref).max() < tol * np.abs(ref).max()


def test_below_its_order_it_is_a_later_candidate():
    h = hermitian(np.random.default_rng(7), BLOCKED_FROM - 1, "float64")
    labels = [c.label for c in Eigh(h)._engine.candidates(Eigh(h).problem)]
    assert labels[0] != "blocked_evd" and "blocked_evd" in labels
    assert "blocked_evd" not in [c.label for c in Eigh(h, subset_by_index=(0, 3))._engine.candidates(
        Eigh(h, subset_by_index=(0, 3)).problem)]


def test_batched_and_the_scipy_drop_in():
    rng = np.random.default_rng(8)
    n = BLOCKED_FROM
    a = np.stack([hermitian(rng, n, "float64") for _ in range(2)])
    w, v = Eigh(a).plan().execute()
    for i in range(2):
        assert np.abs(w[i] - np.linalg.eigvalsh(a[i])).max() < 1e-12 * np.abs(w[i]).max()
        assert np.linalg.norm(a[i] @ v[i] - v[i] * w[i]) < 1e-11 * np.abs(w[i]).max()
    w2, v2 = nsl.eigh(a[0])
    ref = sla.eigh(a[0])[0]
    assert np.abs(w2 - ref).max() < 1e-12 * np.abs(ref).max()
    assert np.linalg.norm(a[0] @ v2 - v2 * w2) < 1e-11 * np.abs(ref).max()


def test_evd_eigenvalues_only_with_a_blocked_workspace():
    # f2py's default workspace for ?syevd without vectors is too small for a blocked reduction;
    # the plan passes the optimal one (same values either way).
    h = hermitian(np.random.default_rng(9), 300, "float64")
    with Eigh(h, eigvals_only=True, driver="evd") as plan:
        plan.plan()
        assert plan._prepared.state["work"]["lwork"] >= 300 * 8
        w = plan.execute()
    assert np.abs(w - np.linalg.eigvalsh(h)).max() < 1e-13 * np.abs(w).max()


@pytest.mark.parametrize("library", ["numpy", "scipy"])
def test_a_later_lookup_of_its_routines_leaves_the_norms_result_type(library):
    """A symbol lookup sets the shared ctypes function's result type to none; the eigensolver's
    norm (a ``double`` result) has an object of its own, so a lookup after it was built (an
    availability check, another driver) does not break it."""
    from nvmathpy.linalg.solvers.cpu._blocked_eigh import _decomposer
    from nvmathpy.linalg.solvers.cpu._numpy_lapack import _scipy_symbol, _symbol

    sla.lapack.dgetrf(np.eye(3))  # SciPy's OpenBLAS loaded
    lookup = _symbol if library == "numpy" else _scipy_symbol
    if lookup("dlansy") is None:
        pytest.skip(f"{library}'s OpenBLAS exports no dlansy")
    h = hermitian(np.random.default_rng(5), 40, "float64")
    decompose = _decomposer("float64", library)
    first = decompose(np.asfortranarray(h), True, False, False)[0]
    lookup("dlansy")
    np.testing.assert_array_equal(decompose(np.asfortranarray(h), True, False, False)[0], first)
