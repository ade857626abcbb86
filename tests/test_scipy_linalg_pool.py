"""The thread pool of the scipy.linalg drop-in's factorizations and solves (one policy per order).

Below the orders calibration covers (:data:`nvmathpy.linalg.lapack.SCIPY_BELOW`) every
factorization and solve of ``nvmathpy.scipy.linalg`` runs SciPy's own LAPACK routines (SciPy's
thread pool, the routine a SciPy user's call runs), in one compiled call where the extension
takes the operands; from there on the calibrated choice (uncalibrated, as in the tests: SciPy's
again). ``nvmathpy.linalg`` keeps NumPy's pool from ``FROM_ORDER``
(``tests/test_solvers_numpy_lapack.py``). The route is inspected, never timed.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.linalg as sla
from scipy.linalg.lapack import get_lapack_funcs
from test_scipy_linalg_fast import FAST, needs_fast
from test_solvers_helpers import rand, relerr, spd, tol, well, wide

import nvmathpy.scipy.linalg as nsl
from nvmathpy.linalg import lapack
from nvmathpy.linalg.solvers.cpu import _calibrate, _numpy_lapack as numpy_lapack
from nvmathpy.linalg.solvers.cpu._recursive_lu import UP_TO as RECURSIVE_UP_TO
from nvmathpy.linalg.solvers.cpu._recursive_lu import scipy_recursive_available, scipy_recursive_getrf
from nvmathpy.plan import calibration

NAMES = ("getrf", "getrs", "potrf", "potrs")
#: Orders between NumPy's-pool threshold of nvmathpy.linalg and the first calibrated order.
BETWEEN = (numpy_lapack.FROM_ORDER, 313, lapack.SCIPY_BELOW - 1)


@pytest.fixture(autouse=True)
def fresh_memo():
    """Each test reads its own calibration store (the per-test cache directory)."""
    calibration.forget()
    yield
    calibration.forget()


def test_the_thresholds_are_the_orders_calibration_covers():
    assert numpy_lapack.FROM_ORDER < lapack.SCIPY_BELOW < lapack.LU_MAX_ORDER
    for kind in ("getrf", "potrf"):  # the first and the last order calibration covers
        assert _calibrate.first_choice(kind, lapack.SCIPY_BELOW - 1, "float64") == (False, None)
        assert _calibrate.first_choice(kind, lapack.SCIPY_BELOW, "float64")[0]
        assert _calibrate.first_choice(kind, lapack.LU_MAX_ORDER, "float64")[0]
        assert _calibrate.first_choice(kind, lapack.LU_MAX_ORDER + 1, "float64") == (False, None)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("n", BETWEEN)
def test_below_the_calibrated_orders_the_routines_are_scipys(dtype, n):
    d = np.dtype(dtype)
    assert lapack.routines(d, n, *NAMES) == tuple(get_lapack_funcs(NAMES, dtype=d))


@pytest.mark.skipif(not numpy_lapack.available(np.float64, *NAMES), reason="NumPy's BLAS exports no LAPACK here")
def test_from_the_calibrated_orders_the_routines_follow_calibration(isolated_cache):
    d, n = np.dtype("float64"), lapack.SCIPY_BELOW
    scipys = tuple(get_lapack_funcs(NAMES, dtype=d))
    assert lapack.routines(d, n, *NAMES) == scipys  # uncalibrated: the plain call
    calibration.record("getrf.float64.512", {"first": None}, {}, 0.1)  # OpenBLAS's getrf on NumPy's pool
    calibration.record("potrf.float64.512", {"first": None}, {}, 0.1)
    assert lapack.routines(d, n, *NAMES) == numpy_lapack.routines(d, *NAMES)
    assert lapack.routines(d, n - 1, *NAMES) == scipys  # one order below: SciPy's, calibrated or not


@pytest.mark.skipif(not numpy_lapack.available(np.float64, *NAMES), reason="NumPy's BLAS exports no LAPACK here")
@pytest.mark.parametrize("factor, solve", [("getrf", "getrs"), ("potrf", "potrs")])
def test_a_solve_alone_runs_on_the_pool_of_its_factorization(isolated_cache, factor, solve):
    """``lu_solve``/``cho_solve`` ask for the solve alone: it goes where the factors were made."""
    d, n = np.dtype("float64"), 512
    scipys = tuple(get_lapack_funcs((factor, solve), dtype=d))
    assert lapack.routines(d, n, solve) == scipys[1:]  # uncalibrated: SciPy's, as the factorization
    calibration.record(f"{factor}.float64.512", {"first": "scipy"}, {}, 0.1)
    assert lapack.routines(d, n, factor, solve) == scipys and lapack.routines(d, n, solve) == scipys[1:]
    calibration.record(f"{factor}.float64.512", {"first": None}, {}, 0.1)
    assert lapack.routines(d, n, solve) == numpy_lapack.routines(d, solve)
    assert lapack.routines(d, n, factor) == numpy_lapack.routines(d, factor)


@pytest.mark.skipif(not numpy_lapack.available(np.float64, *NAMES), reason="NumPy's BLAS exports no LAPACK here")
def test_while_only_scipys_pool_spins_its_routines_run(isolated_cache, monkeypatch):
    """Right after a SciPy call (its pool's threads alone running) the calibrated orders take
    SciPy's routines on that hot pool; otherwise the calibrated choice."""
    d, n = np.dtype("float64"), 512
    scipys = tuple(get_lapack_funcs(NAMES, dtype=d))
    calibration.record("getrf.float64.512", {"first": None}, {}, 0.1)
    calibration.record("potrf.float64.512", {"first": None}, {}, 0.1)
    hot = []
    monkeypatch.setattr(lapack, "only_hot", lambda pool: bool(hot) and pool is lapack.SCIPY)
    assert lapack.routines(d, n, *NAMES) == numpy_lapack.routines(d, *NAMES)
    assert not lapack.scipys(d, n, "getrf")
    hot.append(1)
    hot_routines = lapack.routines(d, n, *NAMES)
    if scipy_recursive_available(d):  # getrf: the recursion on SciPy's pool (see below)
        assert hot_routines == (scipy_recursive_getrf(d), *scipys[1:])
        assert not lapack.scipys(d, n, "getrf")
    else:
        assert hot_routines == scipys and lapack.scipys(d, n, "getrf")
    assert lapack.scipys(d, n, "potrf")


needs_scipy_recursion = pytest.mark.skipif(not scipy_recursive_available(np.dtype("float64")),
                                           reason="SciPy's OpenBLAS exports no LAPACK here")


@needs_scipy_recursion
@pytest.mark.parametrize("choice", ["uncalibrated", "scipy", None])
def test_while_only_scipys_pool_spins_getrf_is_the_recursion_there(isolated_cache, monkeypatch, choice):
    """Hot SciPy pool: real ``getrf`` from the first calibrated order up to the recursion's last
    runs as the recursive LU on SciPy's OpenBLAS, whatever the calibrated choice; complex
    dtypes and larger orders keep SciPy's routine; a pool that is not hot, the calibrated one."""
    if choice != "uncalibrated":
        calibration.record("getrf.float64.512", {"first": choice}, {}, 0.1)
    hot = [1]
    monkeypatch.setattr(lapack, "only_hot", lambda pool: bool(hot) and pool is lapack.SCIPY)
    d = np.dtype("float64")
    for n in (lapack.SCIPY_BELOW, 613, RECURSIVE_UP_TO):
        getrs = get_lapack_funcs(("getrs",), dtype=d)[0]
        assert lapack.routines(d, n, "getrf", "getrs") == (scipy_recursive_getrf(d), getrs)
        assert not lapack.scipys(d, n, "getrf")
    assert lapack.routines(d, RECURSIVE_UP_TO + 1, "getrf")[0] is not scipy_recursive_getrf(d)
    assert lapack.routines(d, lapack.SCIPY_BELOW - 1, "getrf") == tuple(get_lapack_funcs(("getrf",), dtype=d))
    z = np.dtype("complex128")
    assert lapack.routines(z, 613, "getrf") == tuple(get_lapack_funcs(("getrf",), dtype=z))
    hot.clear()
    assert lapack.scipys(d, 613, "getrf") == (choice != None)  # noqa: E711  (None: NumPy's pool calibrated)
    assert lapack.routines(d, 613, "getrf")[0] is not scipy_recursive_getrf(d)


@needs_scipy_recursion
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("shape, order", [((263, 263), "F"), ((263, 263), "C"), ((300, 211), "F"), ((211, 300), "C")])
def test_the_recursion_on_scipys_pool_gives_getrfs_factors(dtype, shape, order):
    rng = np.random.default_rng(sum(shape))
    a = np.array(rand(rng, shape, dtype), order=order)
    before = a.copy()
    lu, piv, info = scipy_recursive_getrf(a.dtype)(a)
    ref_lu, ref_piv, ref_info = get_lapack_funcs(("getrf",), dtype=a.dtype)[0](a)
    assert np.array_equal(a, before)  # not overwritten unless asked
    assert piv.dtype == np.int32 and np.array_equal(piv, ref_piv) and info == ref_info == 0
    assert relerr(lu, ref_lu) < tol(dtype, max(shape)) * 10


@needs_scipy_recursion
def test_the_recursion_on_scipys_pool_reports_the_first_zero_pivot():
    a = np.asfortranarray(np.random.default_rng(3).standard_normal((300, 300)))
    a[:, 200] = 0.0  # stays exactly zero through the elimination: U's 201st pivot (1-based) is 0
    lu, piv, info = scipy_recursive_getrf(a.dtype)(a)
    assert info == get_lapack_funcs(("getrf",), dtype=a.dtype)[0](a)[2] == 201


@needs_scipy_recursion
def test_the_drop_in_factors_with_the_recursion_right_after_a_scipy_call(monkeypatch):
    """``lu_factor``, ``lu`` and ``solve`` of a 613 x 613 matrix while SciPy's pool is hot: the
    recursion on SciPy's pool runs, and the results are SciPy's."""
    import nvmathpy.linalg.solvers.cpu._recursive_lu as recursion

    monkeypatch.setattr(lapack, "only_hot", lambda pool: pool is lapack.SCIPY)
    ran = []
    real = recursion._recursive_getrf("float64", "scipy")
    monkeypatch.setattr(recursion, "_recursive_getrf",
                        lambda name, library: lambda *args, **kwargs: ran.append(1) or real(*args, **kwargs))
    n = 613
    rng = np.random.default_rng(n)
    a, b = well(rng, n, np.float64), rand(rng, (n, 3), np.float64)
    lu, piv = nsl.lu_factor(a)
    ref = sla.lu_factor(a)
    assert np.array_equal(piv, ref[1]) and relerr(lu, ref[0]) < tol(np.float64, n) * 10
    p, low, up = nsl.lu(a)
    assert relerr(p @ low @ up, a) < tol(np.float64, n) * 10
    assert relerr(nsl.solve(a, b), sla.solve(a, b)) < tol(np.float64, n) * 100
    assert len(ran) == 3


def test_only_hot_needs_the_pools_known_workers_running_alone(monkeypatch):
    from nvmathpy.linalg.solvers.cpu import _pool_threads

    pool = _pool_threads.Pool("test", lambda: None, lambda: None)
    threads, anywhere = [frozenset({"7"})], [2]
    monkeypatch.setattr(_pool_threads, "ENABLED", True)
    monkeypatch.setattr(_pool_threads, "_running_anywhere", lambda: anywhere[0])
    monkeypatch.setattr(_pool_threads, "running_threads", lambda: threads[0])
    monkeypatch.setattr(_pool_threads, "running_among", lambda names: names & threads[0])
    assert not _pool_threads.only_hot(pool)  # workers not known
    pool.workers = (os.getpid(), frozenset({"7"}))
    assert _pool_threads.only_hot(pool) and _pool_threads.only_hot(pool, scan=False)  # all that runs anywhere
    anywhere[0], threads[0] = 3, frozenset({"7", "8"})
    assert not _pool_threads.only_hot(pool)  # another thread runs too
    assert _pool_threads.only_hot(pool, scan=False)  # without the scan an unknown thread goes unseen
    threads[0] = frozenset({"7"})  # the third runnable thread is another process's
    assert _pool_threads.only_hot(pool) and _pool_threads.only_hot(pool, scan=False)
    other = _pool_threads.Pool("other", lambda: None, lambda: None)
    other.workers = (os.getpid(), frozenset({"9"}))
    monkeypatch.setattr(_pool_threads, "POOLS", (pool, other))
    threads[0] = frozenset({"7", "9"})  # the other pool's known worker runs too
    assert not _pool_threads.only_hot(pool) and not _pool_threads.only_hot(pool, scan=False)
    threads[0] = frozenset()
    assert not _pool_threads.only_hot(pool)  # its workers asleep


def _spy_numpy_pool(monkeypatch) -> list:
    """Record every request for NumPy's-pool routines the drop-in makes (its only way there)."""
    asked: list = []
    real = lapack.for_order

    def for_order(n, dtype, *names):
        asked.append((n, names))
        return real(n, dtype, *names)

    monkeypatch.setattr(lapack, "for_order", for_order)
    return asked


@pytest.mark.parametrize("dtype, layout", [("float64", "C"), ("complex64", "F")])
@pytest.mark.parametrize("compiled", [True, False])
def test_the_drop_in_runs_scipys_routines_below_the_calibrated_orders(monkeypatch, dtype, layout, compiled):
    """Every factorization and solve of the drop-in, through the compiled calls where they take
    the operands and through the Python paths (the extension off), never asks for NumPy's pool."""
    from nvmathpy.scipy.linalg import _decomp, _solve

    if not compiled:
        for module in (_decomp, _solve):
            monkeypatch.setattr(module, "fast_module", lambda *args, **kwargs: None)
    asked = _spy_numpy_pool(monkeypatch)
    n = 313  # prime, between the two thresholds
    rng = np.random.default_rng(n)
    order = "F" if layout == "F" else "C"
    a = np.array(well(rng, n, dtype), order=order)
    s = np.array(spd(rng, n, dtype), order=order)
    b = rand(rng, (n, 2), dtype)
    t = tol(dtype, n) * 100

    lu_piv = nsl.lu_factor(a)
    ref = sla.lu_factor(a)
    assert np.array_equal(lu_piv[1], ref[1]) and relerr(lu_piv[0], ref[0]) < t
    assert relerr(nsl.lu_solve(lu_piv, b), sla.lu_solve(ref, b)) < t
    p, low, up = nsl.lu(a)
    assert relerr(p @ low @ up, a) < t
    assert relerr(nsl.solve(a, b), sla.solve(wide(a), wide(b))) < t
    assert relerr(nsl.solve(s, b, assume_a="pos"), sla.solve(wide(s), wide(b), assume_a="pos")) < t
    c = nsl.cho_factor(s)
    assert relerr(nsl.cho_solve(c, b), sla.cho_solve(sla.cho_factor(wide(s)), wide(b))) < t
    assert relerr(nsl.cholesky(s, lower=True), sla.cholesky(wide(s), lower=True)) < t
    assert relerr(nsl.inv(a), sla.inv(wide(a))) < t
    scaled = a / np.exp(np.linalg.slogdet(wide(a))[1] / n)  # a determinant of modulus 1
    assert abs(nsl.det(scaled) - sla.det(wide(scaled))) < t
    sym = a + a.T
    assert relerr(nsl.solve(sym, b, assume_a="sym"), sla.solve(wide(sym), wide(b), assume_a="sym")) < t
    low = np.tril(a)
    assert relerr(nsl.solve_triangular(low, b, lower=True), sla.solve_triangular(wide(low), wide(b), lower=True)) < t
    assert relerr(nsl.pinvh(s), sla.pinvh(wide(s))) < t
    assert relerr(nsl.lstsq(a, b)[0], sla.lstsq(wide(a), wide(b))[0]) < t
    assert asked == []


@needs_fast
@pytest.mark.parametrize("n", [numpy_lapack.FROM_ORDER, lapack.SCIPY_BELOW - 1])
def test_below_the_calibrated_orders_lu_solve_and_cholesky_are_one_compiled_call(n):
    rng = np.random.default_rng(n)
    a, s, b = well(rng, n, np.float64), spd(rng, n, np.float64), rand(rng, (n, 2), np.float64)
    assert FAST.lu(a, False, False, True) is not NotImplemented
    assert FAST.solve_gen(a, b, False, True) is not NotImplemented
    assert FAST.cholesky(s, True, True, False, True) is not NotImplemented


def _spy_compiled(monkeypatch) -> list:
    """Record the names of the compiled calls the drop-in makes."""
    called: list = []
    for name in ("lu", "lu_unpack", "solve_gen", "cholesky"):
        real = getattr(FAST, name)
        monkeypatch.setattr(FAST, name, lambda *args, real=real, name=name: called.append(name) or real(*args))
    return called


@needs_fast
@pytest.mark.skipif(not numpy_lapack.available(np.float64, *NAMES), reason="NumPy's BLAS exports no LAPACK here")
@pytest.mark.parametrize("choice", ["uncalibrated", "scipy", None])
def test_from_the_calibrated_orders_the_compiled_calls_run_where_scipys_routine_does(monkeypatch, choice):
    """Where the order's routine is SciPy's (uncalibrated, or calibrated so), ``lu``, ``solve``
    and ``cholesky`` are still one compiled call; where it is NumPy's OpenBLAS, they run it."""
    if choice != "uncalibrated":
        for kind in ("getrf", "potrf"):
            calibration.record(f"{kind}.float64.512", {"first": choice}, {}, 0.1)
    called, asked = _spy_compiled(monkeypatch), _spy_numpy_pool(monkeypatch)
    looked = []  # looking for NumPy's library (threadpoolctl's scan: a first call's cost) only for its routines
    real_suits = numpy_lapack.suits
    monkeypatch.setattr(numpy_lapack, "suits", lambda *args: looked.append(args) or real_suits(*args))
    n = 479  # prime, covered by the calibration of order 512
    rng = np.random.default_rng(n)
    a, s, b = well(rng, n, np.float64), spd(rng, n, np.float64), rand(rng, (n, 2), np.float64)
    t = tol(np.float64, n) * 100
    p, low, up = nsl.lu(a)
    assert relerr(p @ low @ up, a) < t
    assert relerr(nsl.solve(a, b), sla.solve(a, b)) < t
    assert relerr(nsl.cholesky(s), sla.cholesky(s)) < t
    on_numpy = choice is None
    assert called == (["lu_unpack"] if on_numpy else ["lu", "solve_gen", "cholesky"])
    assert bool(looked) == on_numpy
    assert {names for _, names in asked} >= ({("getrf",), ("getrf", "getrs"), ("potrf",)} if on_numpy else set())


@needs_fast
@pytest.mark.skipif(not numpy_lapack.available(np.float64, *NAMES), reason="NumPy's BLAS exports no LAPACK here")
@pytest.mark.parametrize("choice", [None, "recursive", "lookahead"])
def test_lu_on_numpys_pool_is_scipys(monkeypatch, choice):
    """Where calibration chose a ``getrf`` on NumPy's pool, ``lu`` factors with it and unpacks
    the factors in one compiled call: SciPy's results, every option and layout, ``a`` unchanged."""
    from nvmathpy.linalg.solvers.cpu._lookahead_lu import getrf_order

    if choice not in getrf_order(512, "float64"):
        pytest.skip(f"getrf {choice!r} does not run here")
    calibration.record("getrf.float64.512", {"first": choice}, {}, 0.1)
    called = _spy_compiled(monkeypatch)
    n = 467  # prime, covered by the calibration of order 512
    rng = np.random.default_rng(n)
    x = well(rng, n, np.float64)
    t = tol(np.float64, n) * 100
    for layout, a in {"C": x, "F": np.asfortranarray(x), "strided": np.repeat(x, 2, axis=1)[:, ::2]}.items():
        kept = a.copy()
        for kw in ({}, {"permute_l": True}, {"p_indices": True}, {"overwrite_a": True}):
            got, want = nsl.lu(a, **kw), sla.lu(kept.copy(), **kw)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.shape == w.shape and g.flags.c_contiguous, (layout, kw)
                assert relerr(g, w) < t, (layout, kw)
        np.testing.assert_array_equal(a, kept)  # nvmathpy's lu never overwrites (SciPy's permission only)
    assert called == ["lu_unpack"] * 12


def test_large_matrices_run_on_the_free_cores_and_small_ones_do_not_ask(monkeypatch):
    """The drop-in's heavy functions look at the free cores (both pools) for NumPy matrices of
    FREE_CORES_FROM elements and more; smaller ones and the factors-taking solves go straight
    through. Those that make SciPy's own SVD, general eigenproblem and QR calls then run them
    through the thread count calibrated for the routine. Results are the unwrapped function's."""
    asked, calibrated = [], []
    real = lapack.stepped_down
    monkeypatch.setattr(lapack, "stepped_down",
                        lambda call, pools, **kwargs: asked.append(pools) or real(call, pools, **kwargs))
    on_threads = lapack.on_calibrated_threads
    monkeypatch.setattr(lapack, "on_calibrated_threads",
                        lambda routine, *args: calibrated.append(routine) or on_threads(routine, *args))
    rng = np.random.default_rng(11)
    side = int(np.ceil(np.sqrt(lapack.FREE_CORES_FROM)))
    big, small = spd(rng, side, np.float64), spd(rng, side - 1, np.float64)
    c = nsl.cholesky(big)
    assert asked == [lapack.POOLS]
    assert relerr(c, sla.cholesky(big)) < tol(np.float64, side)
    nsl.cholesky(small)
    nsl.cho_solve((c, False), np.ones(side))
    nsl.lu_solve(nsl.lu_factor(small), np.ones(side - 1))
    nsl.lu_factor(big)  # the LU family asks from LU_FREE_CORES_FROM elements
    nsl.solve(big + np.triu(np.ones_like(big), 1), np.ones(side))  # a general matrix: ?getrf
    assert len(asked) == 1
    nsl.solve(big, np.ones(side), assume_a="pos")  # ?potrf: the Cholesky family's threshold
    nsl.solve(big, np.ones(side))  # Hermitian without assume_a: Cholesky first, so the same
    nsl.inv(big)  # ?getri and ?potrf start their threads below LU_FREE_CORES_FROM
    assert len(asked) == 4
    side = int(np.ceil(np.sqrt(lapack.LU_FREE_CORES_FROM)))
    big = spd(rng, side, np.float64)
    calls = {"solve": lambda: nsl.solve(big, np.ones(side)), "inv": lambda: nsl.inv(big), "det": lambda: nsl.det(big),
             "lstsq": lambda: nsl.lstsq(big, np.ones(side)), "lu": lambda: nsl.lu(big),
             "lu_factor": lambda: nsl.lu_factor(big), "cho_factor": lambda: nsl.cho_factor(big),
             "qr": lambda: nsl.qr(big), "eigh": lambda: nsl.eigh(big), "eigvalsh": lambda: nsl.eigvalsh(big),
             "svd": lambda: nsl.svd(big), "svdvals": lambda: nsl.svdvals(big), "pinv": lambda: nsl.pinv(big),
             "pinvh": lambda: nsl.pinvh(big), "orth": lambda: nsl.orth(big), "null_space": lambda: nsl.null_space(big),
             "eig": lambda: nsl.eig(big), "eigvals": lambda: nsl.eigvals(big), "rq": lambda: nsl.rq(big),
             "expm": lambda: nsl.expm(big / side), "ldl": lambda: nsl.ldl(big)}
    routine = {"qr": "geqrf", "svd": "gesdd", "svdvals": "gesdd", "pinv": "gesdd", "orth": "gesdd",
               "null_space": "gesdd", "eig": "geev", "eigvals": "geev"}
    for name, call in calls.items():
        before = len(asked)
        calibrated.clear()
        call()
        assert len(asked) == before + 1, name
        assert calibrated == ([routine[name]] if name in routine else []), name


def test_a_warning_from_a_large_stepped_down_call_names_the_callers_frame(monkeypatch):
    """Between the caller and the warning lie the free-cores wrapper and the step-down: the
    ``LinAlgWarning`` still names the caller's file."""
    import warnings

    from scipy.linalg import LinAlgWarning

    from nvmathpy.linalg.solvers.cpu import _pool_threads

    monkeypatch.setattr(_pool_threads, "ENABLED", True)
    monkeypatch.setattr(_pool_threads, "_running_anywhere", lambda: 2)  # look at the threads, step down
    monkeypatch.setattr(_pool_threads, "running_threads", lambda: frozenset({"foreign"}))
    side = int(np.ceil(np.sqrt(lapack.FREE_CORES_FROM)))
    ill = np.diag(np.r_[np.ones(side - 1), 1e-20]) + np.triu(np.full((side, side), 1e-3), 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nsl.solve(ill, np.ones(side), assume_a="gen")
    ill_warnings = [w for w in caught if issubclass(w.category, LinAlgWarning)]
    assert ill_warnings and ill_warnings[0].filename == __file__


@needs_scipy_recursion
@pytest.mark.parametrize("hot", [True, False])
def test_an_lu_plan_on_scipys_getrf_factors_with_the_recursion_right_after_a_scipy_call(isolated_cache, monkeypatch,
                                                                                       hot):
    """``nvmathpy.linalg.LU`` planned on SciPy's ``getrf`` (calibrated so): a factorization that
    starts while SciPy's pool alone spins runs as the recursion on SciPy's OpenBLAS."""
    import nvmathpy.linalg as nl
    import nvmathpy.linalg.solvers.cpu._recursive_lu as recursion

    calibration.record("getrf.float64.512", {"first": "scipy"}, {}, 0.1)
    monkeypatch.setattr(recursion, "only_hot", lambda pool: hot and pool is recursion.SCIPY)
    ran = []
    real = recursion.scipy_recursive_getrf
    monkeypatch.setattr(recursion, "scipy_recursive_getrf",
                        lambda dtype: (lambda a, overwrite_a=0: ran.append(1) or real(dtype)(a, overwrite_a)))
    n = 613
    rng = np.random.default_rng(n)
    a, b = well(rng, n, np.float64), rand(rng, (n, 2), np.float64)
    x = nl.LU(a).solve(b)
    assert relerr(x, sla.solve(a, b)) < tol(np.float64, n) * 100
    assert len(ran) == (1 if hot else 0)
