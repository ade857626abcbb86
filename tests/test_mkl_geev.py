"""MKL's ``?geev`` as a calibrated contender of the ``eig``/``eigvals`` drop-in
(nvmathpy.linalg.solvers.cpu._mkl_geev): SciPy's wrapper's results to rounding, the caller's
matrix untouched unless overwriting is asked for and possible, MKL's thread setting of the
calling thread given back; the drop-in runs it only where a stored calibration chose it, and
SciPy's routine everywhere else. No test depends on a timing (values are injected).
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import scipy.linalg as sla
from numerics import rand
from peer_suites import Suite, installed_tests, not_passing, run_side_by_side
from test_peer_scipy_linalg import LINALG

import nvmathpy.scipy.linalg as nsl
from nvmathpy.linalg import lapack
from nvmathpy.linalg.solvers.cpu import _mkl_geev, _routine_threads as rt
from nvmathpy.plan import calibration

pytestmark = pytest.mark.skipif(_mkl_geev.runtime() is None, reason="MKL is not installed (nvmathpy[cpu])")
TOLERANCE = {"f": 2e-5, "d": 1e-12, "F": 2e-5, "D": 1e-12}


def matrix(n, char, seed):
    return rand(np.random.default_rng(seed), (n, n), np.dtype(char))


def check_decomposition(a, w, vl, vr, char, left, right):
    """Eigenvalues SciPy's to rounding; right vectors ``a v = v w``, left ``v^H a = w v^H``, unit norm."""
    tol = TOLERANCE[char] * len(a)
    ref = sla.eigvals(a.astype(np.complex128 if char in "FD" else np.float64))
    distance = np.abs(w[:, None] - ref[None, :])  # each eigenvalue near one of SciPy's, and back
    bound = tol * max(1, np.abs(ref).max())
    assert distance.min(axis=1).max() <= bound and distance.min(axis=0).max() <= bound
    scale = np.linalg.norm(a)
    for wanted, v, residual in ((right, vr, lambda v: a @ v - v * w),
                                (left, vl, lambda v: v.conj().T @ a - w[:, None] * v.conj().T)):
        if wanted:
            assert np.linalg.norm(residual(v)) <= tol * scale * 10
            assert np.allclose(np.linalg.norm(v, axis=0), 1, atol=tol * 10)


def complex_vectors(w, v):
    """Real ``?geev`` output's conjugate pairs as complex vectors (as SciPy makes them)."""
    out = v.astype(w.dtype)
    for i in np.flatnonzero(w.imag > 0):
        out[:, i] = v[:, i] + 1j * v[:, i + 1]
        out[:, i + 1] = out[:, i].conj()
    return out


@pytest.mark.parametrize("char", "fdFD")
@pytest.mark.parametrize("n", [1, 2, 7, 37])
@pytest.mark.parametrize("left, right", [(False, True), (True, True), (False, False), (True, False)])
def test_geev_gives_the_eigendecomposition(char, n, left, right):
    a = matrix(n, char, seed=n)
    before = a.copy()
    out = _mkl_geev.geev(char)(a, compute_vl=left, compute_vr=right)
    assert out[-1] == 0
    if char in "fd":
        wr, wi, vl, vr, _ = out
        w = wr + 1j * wi
        vl, vr = complex_vectors(w, vl) if left else vl, complex_vectors(w, vr) if right else vr
    else:
        w, vl, vr, _ = out
    assert w.shape == (n,) and vl.shape == ((n, n) if left else (1, 1)) and vr.shape == ((n, n) if right else (1, 1))
    check_decomposition(before, w, vl, vr, char, left, right)
    np.testing.assert_array_equal(a, before)


@pytest.mark.parametrize("layout, overwritten", [("F", True), ("C", False)])
def test_overwrite_a_works_in_a_fortran_matrix_of_its_dtype_only(layout, overwritten):
    a = np.asfortranarray(matrix(9, "d", 3)) if layout == "F" else matrix(9, "d", 3)
    before = a.copy()
    wr, wi, _, vr, info = _mkl_geev.geev("d")(a, compute_vl=0, compute_vr=1, overwrite_a=1)
    assert info == 0 and (not np.array_equal(a, before)) == overwritten
    check_decomposition(before, wr + 1j * wi, None, complex_vectors(wr + 1j * wi, vr), "d", False, True)


def test_the_calling_threads_mkl_setting_is_given_back():
    threads = _mkl_geev.runtime().MKL_Set_Num_Threads_Local
    threads.restype, threads.argtypes = ctypes.c_int, [ctypes.c_int]
    previous = threads(3)
    try:
        _mkl_geev.geev("d")(matrix(5, "d", 1))
        assert threads(3) == 3
    finally:
        threads(previous)


@pytest.fixture
def mkl_calls(monkeypatch):
    """Record the MKL calls the drop-in makes (which still run), and a fresh calibration memo."""
    calibration.forget()
    seen = []
    find = lapack.geev

    def spy(char):
        call = find(char)
        return None if call is None else (lambda *args, **kwargs: (seen.append(char), call(*args, **kwargs))[1])

    monkeypatch.setattr(lapack, "geev", spy)
    yield seen
    calibration.forget()


def record(dtype, order, first):
    calibration.record(f"threads.geev.{dtype}.{order}", {"first": first}, {}, 0.1)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name, left", [("eig", False), ("eig", True), ("eigvals", False)])
def test_the_drop_in_runs_mkl_where_calibration_chose_it(mkl_calls, dtype, name, left):
    record(dtype, 128, rt.MKL)
    a = matrix(127, np.dtype(dtype).char, seed=11)
    before = a.copy()
    kwargs = {"left": True} if left else {}
    ours, theirs = getattr(nsl, name)(a, **kwargs), getattr(sla, name)(a, **kwargs)
    assert mkl_calls == [np.dtype(dtype).char]
    np.testing.assert_array_equal(a, before)
    if name == "eigvals":
        ours, theirs = (ours,), (theirs,)
    assert [(x.dtype, x.shape) for x in ours] == [(y.dtype, y.shape) for y in theirs]  # SciPy's dtypes and shapes
    w = ours[0]
    vl, vr = (ours[1], ours[2]) if left else (None, ours[1] if name == "eig" else None)
    check_decomposition(a.astype(np.float64), w.astype(np.complex128), vl, vr, np.dtype(dtype).char, left,
                        vr is not None)


@pytest.mark.parametrize("first", [1, rt.LIBRARY, None])
def test_elsewhere_the_drop_in_runs_scipys_routine(mkl_calls, first):
    if first is not None:
        record("float64", 128, first)
    nsl.eig(matrix(127, "d", 5))
    nsl.eig(matrix(40, "d", 5))  # not calibrated
    nsl.eig(matrix(127, "D", 5))  # complex: not calibrated
    assert mkl_calls == []


def test_a_stored_choice_without_mkl_runs_scipys_routine(monkeypatch):
    calibration.forget()
    record("float64", 128, rt.MKL)  # e.g. wisdom from before MKL was uninstalled
    monkeypatch.setattr(lapack, "geev", lambda char: None)
    a = matrix(127, "d", 8)
    w, v = nsl.eig(a)
    check_decomposition(a, w, None, v, "d", False, True)
    calibration.forget()


def test_calibrated_mkl_takes_numpy_matrices_of_covered_orders_only(mkl_calls):
    record("float64", 128, rt.MKL)
    assert lapack.calibrated_mkl("geev", matrix(127, "d", 1)) is not None
    assert lapack.calibrated_mkl("gesdd", matrix(127, "d", 1)) is None
    assert lapack.calibrated_mkl("geev", matrix(127, "d", 1).tolist()) is None
    assert lapack.calibrated_mkl("geev", matrix(20, "d", 1)) is None


def test_measure_times_mkl_against_scipys_own_call():
    value, measured = rt.measure("geev", "float64", 64, seconds=30.0)
    assert value["first"] in (1, rt.MKL, rt.LIBRARY)
    assert set(measured) == {"1", rt.MKL, rt.LIBRARY} and all(r > 0 for r in measured.values())


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_matrices_never_reach_mkl(mkl_calls, bad):
    # MKL's ?geev crashes the process on NaN; SciPy's routine returns
    record("float64", 128, rt.MKL)
    a = matrix(127, "d", 9)
    a[5, 7] = bad
    assert lapack.calibrated_mkl("geev", a) is None

    def outcome(fn):
        try:
            return np.isnan(fn(a, check_finite=False)).any()
        except ValueError as exc:  # SciPy's ?geev refuses NaN ("illegal value in argument 4")
            return str(exc)

    assert outcome(nsl.eigvals) == outcome(sla.eigvals)
    assert mkl_calls == []


#: SciPy's own ``eig``/``eigvals`` tests with MKL's ``?geev`` forced at every order (a
#: calibration would choose it at some orders only) and every finite matrix.
_FORCE_MKL = "import nvmathpy.linalg.lapack as _lapack\n_lapack.mkl_chosen = lambda *args: True\n"
EIG_SUITE = Suite(LINALG.package, {"test_decomp.py": LINALG.rewrites["test_decomp.py"]}, leftover=LINALG.leftover,
                  conftest=LINALG.conftest, peer_conftest=LINALG.peer_conftest + _FORCE_MKL)


def test_scipys_eig_tests_pass_on_mkls_geev(tmp_path):
    source = installed_tests(EIG_SUITE)
    if source is None:
        pytest.skip(f"{EIG_SUITE.package} is not installed")
    options = ("-k", "TestEigVals or TestEig and not TestEigh and not Banded and not Tridiagonal or TestOverwrite")
    expected, got = run_side_by_side(EIG_SUITE, source, tmp_path, ("test_decomp.py",), options)
    assert len(got) > 50
    assert not not_passing(expected, got)
