"""Prepared calls of the scipy.linalg drop-in on one CuPy matrix (``_prepared``), on the host
emulation (tests/cuda_emulation_solvers.py).

A repeated call of the same function, layout, dtype, options, ``check_finite``, device and
stream runs a prepared call built by the first one: its results must be those of the general
way (compared with SciPy in float64, on fresh data at every call), its key must separate what
changes the work, a freed entry must not run again, the errors must keep SciPy's semantics in
both check modes, and its host work per call is bounded here by counts (Python calls, CuPy
array makers, host reads), never by timings.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import scipy.linalg as sla

pytest.importorskip("cuda.pathfinder", reason="CUDA wheels not installed (pip install 'nvmathpy[cu13]')")

from nvmathpy.cuda.bindings import cublas, cusolver  # noqa: E402
from nvmathpy.errors import InvalidOperandError, LinAlgError, MissingDependencyError  # noqa: E402

try:
    cusolver.LIB.loaded
except MissingDependencyError as exc:  # pragma: no cover - depends on the installation
    pytest.skip(f"cuSOLVER not installed: {exc}", allow_module_level=True)

import nvmathpy.linalg as nl  # noqa: E402
from nvmathpy.linalg.solvers.cuda import _functions as cuda_functions  # noqa: E402
from nvmathpy.linalg.solvers.cuda import _prepared as prepared  # noqa: E402
from nvmathpy.scipy import linalg as nsla  # noqa: E402
from cuda_emulation_solvers import HostArray, dev, install, matrix  # noqa: E402
from numerics import rel, up  # noqa: E402

TOL = {"float32": 2e-4, "complex64": 2e-4, "float64": 1e-11, "complex128": 1e-11}


@pytest.fixture
def em(monkeypatch):
    emulation = install(monkeypatch.setattr, monkeypatch.setitem)
    cuda_functions.plan_cache().clear()
    yield emulation
    emulation.ready = True
    nl.check_cuda_errors()
    cuda_functions.plan_cache().clear()


def rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def laid_out(x, layout):
    """``x`` row-major ("C") or column-major ("F"), the same values."""
    return np.asfortranarray(x) if layout == "F" else np.ascontiguousarray(x)


def data(rng, dtype, layout, n=7):
    a = rand(rng, (n, n), dtype) + n * np.eye(n, dtype=dtype)
    g = rand(rng, (n, n), dtype)
    spd = (g @ g.conj().T + n * np.eye(n)).astype(dtype)
    return laid_out(a, layout), laid_out(spd, layout), laid_out(rand(rng, (n, 3), dtype), layout), rand(rng, n, dtype)


def check_all(dtype, a, spd, b, v):
    """Each prepared function on device copies, checked against SciPy."""
    tol = TOL[dtype]
    d = {name: dev(x) for name, x in (("a", a), ("spd", spd), ("b", b), ("v", v))}
    for rhs, dr in ((b, d["b"]), (v, d["v"])):
        assert rel(nsla.solve(d["a"], dr), sla.solve(a, rhs)) < tol
        assert rel(nsla.solve(d["a"], dr, transposed=True), sla.solve(a.T, rhs)) < tol
        c = nsla.cho_factor(d["spd"], lower=True)
        assert c[1] is True and rel(nsla.cho_solve(c, dr), sla.cho_solve(sla.cho_factor(spd, lower=True), rhs)) < tol
        for trans in (0, 1, 2):
            lu, piv = nsla.lu_factor(d["a"])
            ref = sla.lu_solve(sla.lu_factor(a), rhs, trans=trans)
            assert rel(nsla.lu_solve((lu, piv), dr, trans=trans), ref) < tol
        for lower in (True, False):
            assert rel(nsla.solve_triangular(d["a"], dr, lower=lower, trans=1),
                       sla.solve_triangular(a, rhs, lower=lower, trans=1)) < tol
        x, residues, rank, s = nsla.lstsq(d["a"][:, :4], dr)
        ref = sla.lstsq(a[:, :4], rhs)
        assert rel(x, ref[0]) < tol and rel(residues, ref[1]) < 50 * tol and rank == ref[2] and rel(s, ref[3]) < tol
    lu, piv = nsla.lu_factor(d["a"])
    ref_lu, ref_piv = sla.lu_factor(a)
    assert rel(lu, ref_lu) < tol and np.array_equal(np.asarray(piv), ref_piv) and piv.dtype == np.int32
    assert rel(nsla.inv(d["a"]), sla.inv(a)) < tol
    assert rel(nsla.det(d["a"]), sla.det(a)) < tol
    for lower in (True, False):
        assert rel(nsla.cholesky(d["spd"], lower=lower), sla.cholesky(spd, lower=lower)) < tol
        w, vecs = nsla.eigh(d["spd"], lower=lower)
        assert rel(w, sla.eigh(spd, eigvals_only=True)) < tol
        assert rel(up(vecs) @ np.diag(up(w)) @ up(vecs).conj().T, spd) < tol
    assert rel(nsla.eigh(d["spd"], eigvals_only=True), sla.eigvalsh(spd)) < tol
    for full in (True, False):
        u, s, vh = nsla.svd(d["a"][:, :4], full_matrices=full)
        assert rel(s, sla.svdvals(a[:, :4])) < tol
        assert rel(up(u)[:, :4] * up(s) @ up(vh)[:4], a[:, :4]) < tol
    assert rel(nsla.svd(d["a"], compute_uv=False), sla.svdvals(a)) < tol
    for mode in ("full", "economic"):
        q, r = nsla.qr(d["a"][:, :4], mode=mode)
        assert up(q).shape == sla.qr(a[:, :4], mode=mode)[0].shape and rel(up(q) @ up(r), a[:, :4]) < tol
        assert np.array_equal(up(r), np.triu(up(r)))
    (r,) = nsla.qr(d["a"][:, :4], mode="r")
    assert rel(np.abs(up(r)), np.abs(sla.qr(a[:, :4], mode="r")[0])) < tol
    return d


@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_hits_match_scipy_on_fresh_data(em, dtype, layout):
    rng = np.random.default_rng(1)
    first = data(rng, dtype, layout)
    check_all(dtype, *first)  # misses: prepared calls built
    built = prepared.prepared_count()
    assert built > 0
    for _ in range(2):  # hits, each on new values of the same layout
        operands = data(rng, dtype, layout)
        copies = [x.copy() for x in operands]
        d = check_all(dtype, *operands)
        for x, kept in zip(d.values(), copies):  # the caller's arrays are never written
            assert np.array_equal(np.asarray(x), kept)
    assert prepared.prepared_count() == built  # the same keys: nothing new built


def test_results_are_device_arrays(em):
    a, spd, b, _ = (dev(x) for x in data(np.random.default_rng(2), "float64", "C"))
    for _ in range(2):
        outs = [nsla.solve(a, b), nsla.inv(a), nsla.cholesky(spd), *nsla.lu_factor(a), *nsla.eigh(spd),
                *nsla.svd(a), *nsla.qr(a), nsla.solve_triangular(a, b), nsla.det(a)]
        assert all(isinstance(x, HostArray) for x in outs)


def test_what_changes_the_work_is_a_new_entry(em, monkeypatch):
    rng = np.random.default_rng(3)
    a = rand(rng, (6, 6), "float64") + 6 * np.eye(6)
    b = rand(rng, (6, 2), "float64")
    nsla.solve(dev(a), dev(b))
    count = prepared.prepared_count()
    nsla.solve(dev(a.copy()), dev(b.copy()))  # the same key
    assert prepared.prepared_count() == count
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    variants = [  # (call, reference, tolerance)
        (lambda: nsla.solve(dev(a32), dev(b32)), sla.solve(a32, b32), 2e-4),  # dtype
        (lambda: nsla.solve(dev(a[:5, :5]), dev(b[:5])), sla.solve(a[:5, :5], b[:5]), 1e-11),  # shape
        (lambda: nsla.solve(dev(np.asfortranarray(a)), dev(b)), sla.solve(a, b), 1e-11),  # strides of a
        (lambda: nsla.solve(dev(a), dev(np.asfortranarray(b))), sla.solve(a, b), 1e-11),  # strides of b
        (lambda: nsla.solve(dev(a), dev(b), check_finite=False), sla.solve(a, b), 1e-11),  # a flag
        (lambda: nsla.solve(dev(a), dev(b[:, 0])), sla.solve(a, b[:, 0]), 1e-11),  # a vector right-hand side
    ]
    for variant, reference, tol in variants:
        assert rel(variant(), reference) < tol
        count += 1
        assert prepared.prepared_count() == count
    cupy = sys.modules["cupy"]
    stream = type("Stream", (), {"ptr": 77})()
    monkeypatch.setattr(cupy.cuda, "get_current_stream", lambda *args: stream)
    x = nsla.solve(dev(a), dev(b))  # another stream: its own entry, run on that stream
    assert prepared.prepared_count() == count + 1 and rel(x, sla.solve(a, b)) < 1e-11
    assert em.of("cusolverDnSetStream")[-1] == (77,)


def test_each_call_runs_on_the_current_stream(em, monkeypatch):
    cupy = sys.modules["cupy"]
    a, spd, b, _ = (dev(x) for x in data(np.random.default_rng(4), "float64", "C"))
    for ptr in (5, 6, 5):
        stream = type("Stream", (), {"ptr": ptr})()
        monkeypatch.setattr(cupy.cuda, "get_current_stream", lambda *args, s=stream: s)
        em.calls.clear()
        nsla.cholesky(spd)
        nsla.solve_triangular(a, b)
        assert set(em.of("cusolverDnSetStream")) == {(ptr,)} and set(em.of("cublasSetStream_v2")) == {(ptr,)}


def test_a_freed_entry_is_not_reused(em):
    a, spd, b, _ = (dev(x) for x in data(np.random.default_rng(5), "float64", "C"))
    nsla.cholesky(spd)
    (entry,) = [e for e in prepared._CALLS.values() if isinstance(e, prepared.Prepared)]
    entry.free()
    assert entry.plan is None and entry.freed
    assert rel(nsla.cholesky(spd), sla.cholesky(np.asarray(spd))) < 1e-11  # rebuilt
    (again,) = [e for e in prepared._CALLS.values() if isinstance(e, prepared.Prepared)]
    assert again is not entry and not again.freed
    cuda_functions.plan_cache().clear()  # the functions' cache clears the prepared calls with itself
    assert prepared.prepared_count() == 0 and again.freed


def test_the_registry_is_bounded(em, monkeypatch):
    monkeypatch.setattr(prepared, "MAXSIZE", 3)
    rng = np.random.default_rng(6)
    entries = []
    for n in range(3, 8):
        nsla.cholesky(dev(data(rng, "float64", "C", n)[1]))
        entries.append(prepared._CALLS[next(reversed(prepared._CALLS))])
    assert prepared.prepared_count() == 3
    assert [e.freed for e in entries] == [True, True, False, False, False]


def test_putting_back_survives_entries_taken_or_replaced_by_other_threads(em):
    """The races of threads sharing a key, played in order: another thread's entry put back
    meanwhile gives way (freed), and one another thread has taken out again is left alone."""
    class Entry:
        freed = False

        def free(self):
            self.freed = True

    mine, theirs = Entry(), Entry()
    key = ("race",)
    prepared._CALLS[key] = theirs  # built and put back by another thread while mine ran
    prepared._put_back(key, mine)
    assert prepared._CALLS[key] is mine and theirs.freed and not mine.freed
    del prepared._CALLS[key]  # taken out again by a third thread: nothing there to give way
    prepared._put_back(key, mine)
    assert prepared._CALLS.pop(key) is mine and not mine.freed


def test_what_is_not_prepared_takes_the_general_way(em):
    rng = np.random.default_rng(7)
    stack = rand(rng, (2, 4, 4), "float64") + 4 * np.eye(4)
    assert rel(nsla.inv(dev(stack)), np.linalg.inv(stack)) < 1e-11  # a stack
    a, b = stack[0], rand(rng, (4, 1), "float32")
    assert rel(nsla.solve(dev(a), dev(b)), sla.solve(a, b)) < 1e-6  # mixed dtypes
    assert prepared.call("solve", dev(a), (dev(b),), (), True) is prepared.UNPREPARED
    assert prepared.call("solve", a, (), (), True) is prepared.UNPREPARED  # NumPy operands
    assert prepared.call("lstsq", dev(a), (dev(a),), ([1e-3],), True) is prepared.UNPREPARED  # not hashable
    with pytest.raises(InvalidOperandError, match=r"b: shape \(3,\) does not match"):
        nsla.solve(dev(a), dev(np.ones(3)))  # bad input: the general way names it


# -- errors: SciPy's, per call or deferred --------------------------------------------------------


def failing():
    """Per function: a call on non-finite input and one on a singular / not positive definite one."""
    nan = np.eye(4)
    nan[1, 2] = np.nan
    singular, b = np.ones((4, 4)), np.ones((4, 2))
    tri = np.triu(np.ones((4, 4)))
    tri[2, 2] = 0
    piv = np.zeros(4, np.int32)
    return {
        "solve": (lambda x: nsla.solve(dev(x), dev(b)), singular, "Singular matrix"),
        "inv": (lambda x: nsla.inv(dev(x)), singular, "Singular matrix"),
        "cholesky": (lambda x: nsla.cholesky(dev(x)), -np.eye(4), "not positive definite"),
        "cho_factor": (lambda x: nsla.cho_factor(dev(x)), -np.eye(4), "not positive definite"),
        # SciPy's lu_solve checks b only, and raises nothing for a singular factor
        "lu_solve": (lambda x: nsla.lu_solve((dev(np.eye(4) * 2), dev(piv)), dev(x)), None, None),
        "solve_triangular": (lambda x: nsla.solve_triangular(dev(x), dev(b)), tri, "diagonal"),
        "eigh": (lambda x: nsla.eigh(dev(x)), None, None), "svd": (lambda x: nsla.svd(dev(x)), None, None),
        "qr": (lambda x: nsla.qr(dev(x)), None, None), "det": (lambda x: nsla.det(dev(x)), None, None),
        "lu_factor": (lambda x: nsla.lu_factor(dev(x)), None, None),
        "lstsq": (lambda x: nsla.lstsq(dev(x), dev(b)), None, None),
    }, nan


#: The routines that iterate (LAPACK's on the host emulation need not stop on NaNs).
ITERATIVE = ("eigh", "svd", "lstsq")


@pytest.mark.parametrize("name", sorted(failing()[0]))
def test_errors_raise_at_the_call_by_default(em, name):
    (fn, bad, message), nan = failing()[0][name], failing()[1]
    good = np.eye(4) * 2
    fn(good), fn(good)  # prepared
    with pytest.raises(ValueError, match="infs or NaNs"):
        fn(nan)
    if bad is not None:
        with pytest.raises(LinAlgError, match=message):
            fn(bad)
    fn(good)  # nothing left over


@pytest.mark.parametrize("name", sorted(failing()[0]))
def test_deferred_errors_are_reported_late(em, name):
    (fn, bad, message), nan = failing()[0][name], failing()[1]
    good = np.eye(4) * 2
    if name in ITERATIVE:
        nan = np.eye(4)  # non-finite input reaches these routines when checks are deferred
        nan[1, 1] = np.inf
    with nl.cuda_checks("deferred"):
        fn(good), fn(good)
        fn(nan)  # returns
        with pytest.raises(ValueError, match="infs or NaNs.*reported late"):
            fn(good)
        fn(good)  # reported once
        if bad is not None:
            fn(bad)
            with pytest.raises(LinAlgError, match=f"{message}.*reported late"):
                nl.check_cuda_errors()
    nl.check_cuda_errors()


@pytest.mark.parametrize("name", ITERATIVE)
def test_iterative_routines_run_on_finite_values_when_errors_raise(em, monkeypatch, name):
    """SciPy refuses non-finite input before computing: an iterative routine must not see it, even
    after a deferred call left non-finite values in the private buffer; the call still raises
    SciPy's error, and a good call after it is right."""
    seen = []  # per routine call: whether its matrix was all finite
    for routine, at in (("cusolverDnXsyevd", (6, 4, 4, 7)), ("cusolverDnXgesvd", (7, 4, 5, 8))):
        original = getattr(cusolver.LIB, routine)

        def watched(*args, _original=original, _at=at):
            pointer, rows, cols, ld = (args[i] for i in _at)
            seen.append(bool(np.isfinite(matrix(pointer, np.float64, rows, cols, ld)).all()))
            return _original(*args)

        monkeypatch.setattr(cusolver.LIB, routine, watched)
    fn = failing()[0][name][0]
    good, inf, nan = np.eye(4) * 2, np.eye(4), np.eye(4)
    inf[1, 2] = inf[2, 1] = np.inf  # the routines leave NaNs where the NaN below is
    nan[1, 2] = np.nan
    fn(good), fn(good)  # prepared
    with nl.cuda_checks("deferred"):
        fn(inf)  # reaches the routine: deferred checks run it as CuPy does
        with pytest.raises(ValueError, match="infs or NaNs.*reported late"):
            nl.check_cuda_errors()
    seen.clear()
    with pytest.raises(ValueError, match="^array must not contain infs or NaNs$"):
        fn(nan)
    assert seen and all(seen)
    out = fn(good)
    values = out[3] if name == "lstsq" else (out[1] if name == "svd" else out[0])
    assert rel(values, np.full(4, 2.0)) < 1e-12


@pytest.mark.parametrize("checks", ["raise", "deferred"])
def test_lu_solve_follows_scipy_on_singular_factors_and_non_finite_lu(em, checks):
    """SciPy's lu_solve solves with a singular factor (infinities, no error) and checks only b."""
    lu = np.triu(np.ones((4, 4)))
    lu[2, 2] = 0
    piv, b = np.arange(4, dtype=np.int32), np.ones(4)
    nan = np.eye(4) * 2
    nan[0, 3] = np.nan
    with nl.cuda_checks(checks):
        for _ in range(2):  # the first call and the prepared one
            with np.errstate(divide="ignore", invalid="ignore"):
                ref = sla.lu_solve((lu, piv), b)
                got = np.asarray(nsla.lu_solve((dev(lu), dev(piv)), dev(b)))
            assert np.array_equal(np.isfinite(got), np.isfinite(ref))
            with np.errstate(invalid="ignore"):
                nsla.lu_solve((dev(nan), dev(piv)), dev(b))  # SciPy does not check lu either
        nl.check_cuda_errors()


def test_check_finite_false_reads_nothing_for_it(em):
    nan = np.eye(3)
    nan[0, 1] = np.nan
    for _ in range(2):
        nsla.lu_factor(dev(nan), check_finite=False)  # no flag at all: nothing raised, nothing read
        nsla.qr(dev(nan), check_finite=False)


def test_out_of_range_pivots_are_refused_in_both_modes(em):
    rng = np.random.default_rng(8)
    a = rand(rng, (5, 5), "float64") + 5 * np.eye(5)
    lu, piv = sla.lu_factor(a)
    nsla.lu_solve((dev(lu), dev(piv)), dev(np.ones(5)))
    bad = piv.copy()
    bad[1] = 7
    with pytest.raises(InvalidOperandError, match="out of range"):
        nsla.lu_solve((dev(lu), dev(bad)), dev(np.ones(5)))
    with nl.cuda_checks("deferred"):
        x = nsla.lu_solve((dev(lu), dev(bad)), dev(np.ones(5)))  # clipped into range: no stray index
        assert np.asarray(x).shape == (5,)
        with pytest.raises(InvalidOperandError, match="out of range.*reported late"):
            nl.check_cuda_errors()


def test_row_major_factors_are_copied_and_column_major_ones_read_in_place(em):
    rng = np.random.default_rng(10)
    a = rand(rng, (6, 6), "float64") + 6 * np.eye(6)
    b = rand(rng, (6, 2), "float64")
    lu, piv = sla.lu_factor(a)
    for factors in (np.asfortranarray(lu), np.ascontiguousarray(lu)):
        for _ in range(2):  # built, then a hit
            kept = factors.copy()
            x = nsla.lu_solve((dev(factors), dev(piv)), dev(b))
            assert rel(x, sla.lu_solve((lu, piv), b)) < 1e-11 and np.array_equal(factors, kept)


@pytest.mark.parametrize("mode", ["raise", "deferred"])
def test_lstsq_of_a_rank_deficient_matrix_is_the_minimum_norm_solution(em, mode):
    rng = np.random.default_rng(11)
    g = rand(rng, (7, 3), "float64")
    cases = [(np.hstack([g, g[:, :2]]), 3), (np.zeros((5, 4)), 0)]  # rank 3 of 5 columns; rank 0
    with nl.cuda_checks(mode):
        for a, rank in cases:
            b = rand(rng, (a.shape[0], 2), "float64")
            ref = sla.lstsq(a, b)
            for _ in range(2):  # built, then a hit
                x, residues, r, s = nsla.lstsq(dev(a), dev(b))
                assert r == rank == ref[2] and isinstance(r, int)
                assert np.abs(np.asarray(x) - ref[0]).max() < 1e-11 and rel(s, ref[3]) < 1e-11
                assert np.asarray(residues).shape == (0,)  # SciPy: none unless of full column rank


def test_the_first_failing_check_names_the_error(em):
    tri = np.triu(np.ones((4, 4)))
    tri[2, 2] = 0
    bad_b = np.ones((4, 2))
    bad_b[3, 1] = np.inf
    nsla.solve_triangular(dev(np.eye(4)), dev(np.ones((4, 2))))
    with pytest.raises(ValueError, match="infs or NaNs"):  # SciPy checks finiteness first
        nsla.solve_triangular(dev(tri), dev(bad_b))
    with pytest.raises(LinAlgError, match="resolution failed at diagonal 2"):
        nsla.solve_triangular(dev(tri), dev(np.ones((4, 2))))


def test_a_zero_diagonal_is_named_when_read_at_the_call(em):
    a = np.triu(np.ones((4, 4)))
    a[2, 2] = 0
    nsla.solve_triangular(dev(np.eye(4)), dev(np.ones(4)))
    with pytest.raises(LinAlgError, match="resolution failed at diagonal 2"):
        nsla.solve_triangular(dev(a), dev(np.ones(4)))


# -- the host work of a repeated call: counts ----------------------------------------------------


def repeated_calls(rng):
    a = dev(rand(rng, (8, 8), "float64") + 8 * np.eye(8))
    spd = dev(np.asarray(a) @ np.asarray(a).T + 8 * np.eye(8))
    b = dev(rand(rng, (8, 4), "float64"))
    lu, c = nsla.lu_factor(a), nsla.cho_factor(spd)
    return {"solve": lambda: nsla.solve(a, b), "lu_factor": lambda: nsla.lu_factor(a),
            "lu_solve": lambda: nsla.lu_solve(lu, b), "cho_factor": lambda: nsla.cho_factor(spd),
            "cho_solve": lambda: nsla.cho_solve(c, b), "cholesky": lambda: nsla.cholesky(spd),
            "eigh": lambda: nsla.eigh(spd), "svd": lambda: nsla.svd(a), "qr": lambda: nsla.qr(a),
            "lstsq": lambda: nsla.lstsq(a, b), "solve_triangular": lambda: nsla.solve_triangular(a, b),
            "inv": lambda: nsla.inv(a), "det": lambda: nsla.det(a)}


#: The most Python-level calls of one repeated call, the emulation's own included (its CuPy
#: stand-ins and recorded vendor routines are Python functions; CuPy's are not).
PYTHON_CALLS = 29
#: The most CuPy array-making calls (``empty``, ``zeros``, ``isfinite``, ``where``, ...) of one
#: repeated call.
ARRAY_MAKERS = 3


@pytest.mark.parametrize("mode", ["raise", "deferred"])
def test_a_repeated_call_does_little_host_work(em, monkeypatch, mode):
    cupy = sys.modules["cupy"]
    made, reads, inside = [], [], [False]
    for name in ("empty", "zeros", "ones", "full", "eye", "arange", "ascontiguousarray", "asfortranarray", "tril",
                 "triu", "where", "abs", "isfinite"):
        if hasattr(cupy, name):
            monkeypatch.setattr(cupy, name, lambda *a, _f=getattr(cupy, name), **k: made.append(1) or _f(*a, **k))
    monkeypatch.setattr(cupy, "asnumpy", lambda x, _f=cupy.asnumpy: reads.append(1) or _f(x))
    for dunder in ("__bool__", "__int__", "__float__"):
        original = getattr(np.ndarray, dunder)
        monkeypatch.setattr(HostArray, dunder, lambda self, _o=original: reads.append(1) or _o(self), raising=False)
    for lib in (cusolver.LIB, cublas.LIB):  # the emulated routines' own Python is not the hot path's
        for routine in lib.functions:
            fn = lib.__dict__.get(routine)
            if fn is not None and not routine.endswith(("SetStream", "SetStream_v2")):
                monkeypatch.setattr(lib, routine, vendor(fn, inside))
    with nl.cuda_checks(mode):
        calls = repeated_calls(np.random.default_rng(9))
        for name, fn in calls.items():
            fn(), fn()  # built
            made.clear(), reads.clear()
            python = count_python_calls(fn, inside)
            assert python <= PYTHON_CALLS, (name, python)
            assert len(made) <= ARRAY_MAKERS, (name, len(made))
            rank_read = name == "lstsq"  # its rank is a Python int: read with the flags in either mode
            assert len(reads) == (mode == "raise" or rank_read), (name, reads)


def vendor(fn, inside):
    def run(*args):
        inside[0] = True
        try:
            return fn(*args)
        finally:
            inside[0] = False

    return run


def count_python_calls(fn, inside):
    seen = [0]

    def profile(frame, event, arg):
        if event == "call" and not inside[0]:
            seen[0] += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return seen[0]
