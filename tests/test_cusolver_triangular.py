"""``solve_triangular`` through cuBLAS ``trsm``, the deferred device checks, and the host work of
the scipy.linalg drop-in's hot path on CUDA operands, run on the host emulation
(tests/cuda_emulation_solvers.py: ``trsm`` done as cuBLAS documents it on host memory).

Results are compared with ``scipy.linalg.solve_triangular`` in float64; the recorded calls show
that ``trsm`` reads the caller's ``A`` where it lies (no factorization, no copy), and the
counted host reads / workspace queries show what the hot path does per call.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

pytest.importorskip("cuda.pathfinder", reason="CUDA wheels not installed (pip install 'nvmathpy[cu13]')")

from nvmathpy.cuda.bindings import cublas  # noqa: E402
from nvmathpy.errors import InvalidOperandError, InvalidOptionError, LinAlgError, MissingDependencyError  # noqa: E402

try:
    cublas.LIB.loaded
except MissingDependencyError as exc:  # pragma: no cover - depends on the installation
    pytest.skip(f"cuBLAS not installed: {exc}", allow_module_level=True)

import nvmathpy.linalg as nl  # noqa: E402
from nvmathpy.linalg.solvers.cuda import _functions as cuda_functions  # noqa: E402
from nvmathpy.scipy import linalg as nsla  # noqa: E402
from cuda_emulation_solvers import ALLOCATIONS, HostArray, dev, install  # noqa: E402
from numerics import rel, up  # noqa: E402

TOL = {"float32": 2e-4, "complex64": 2e-4, "float64": 1e-11, "complex128": 1e-11}


@pytest.fixture
def em(monkeypatch):
    emulation = install(monkeypatch.setattr, monkeypatch.setitem)
    cuda_functions.plan_cache().clear()
    yield emulation
    emulation.ready = True
    nl.check_cuda_errors()  # nothing left pending for the next test
    cuda_functions.plan_cache().clear()


def triangular(rng, n, dtype, layout):
    """A well-conditioned matrix (both triangles filled) in layout "C", "F" or "strided"."""
    a = rng.standard_normal((n, 2 * n))[:, :n] + 4 * np.eye(n)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((n, n))
    a = a.astype(dtype)
    if layout == "F":
        return np.asfortranarray(a)
    if layout == "strided":  # every other column of a wider matrix: neither reading is column-major
        wide = np.zeros((n, 2 * n), dtype)
        wide[:, ::2] = a
        return wide[:, ::2]
    return a


def rhs(rng, n, dtype, kind):
    b = rng.standard_normal((n, 6)).astype(dtype)
    return {"vector": b[:, 0], "matrix": b[:, :3], "strided": b[:, ::2]}[kind]


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular_matches_scipy(em, dtype, lower, trans, unit):
    rng = np.random.default_rng([7, lower, trans, unit])
    for n in (1, 5, 13):
        for layout in ("C", "F", "strided"):
            a = triangular(rng, n, dtype, layout)
            for kind in ("vector", "matrix", "strided"):
                b = rhs(rng, n, dtype, kind)
                a_before, b_before = a.copy(), b.copy()
                ref = sla.solve_triangular(up(a), up(b), lower=lower, trans=trans, unit_diagonal=unit)
                got = nsla.solve_triangular(dev(a), dev(b), lower=lower, trans=trans, unit_diagonal=unit)
                assert type(got) is HostArray and got.dtype == np.dtype(dtype)
                assert rel(got, ref) < TOL[dtype] * n, (n, layout, kind)
                assert np.array_equal(a, a_before) and np.array_equal(b, b_before)  # inputs untouched


def test_trsm_reads_a_where_it_lies(em):
    rng = np.random.default_rng(3)
    a, b = triangular(rng, 9, "float64", "C"), rng.standard_normal((9, 4))
    nl.solve_triangular(dev(a), dev(b), lower=True, trans=1)
    (call,) = em.of("cublasDtrsm_v2")
    side, uplo, op, diag, m, n, lda, ldb = call
    # row-major A is M = A^T (upper), solved from the right on the row-major X (B^T: 4 x 9)
    assert (side, uplo, op, diag, m, n, lda, ldb) == (1, 1, 1, 0, 4, 9, 9, 4)
    em.calls.clear()
    f = np.asfortranarray(a)
    nl.solve_triangular(dev(f), dev(b), lower=True, trans=2)
    assert em.of("cublasDtrsm_v2") == [(0, 0, 2, 0, 9, 4, 9, 9)]  # column-major: from the left
    assert not [name for name in em.names() if "getr" in name or "potr" in name]  # no factorization
    em.calls.clear()
    wide = np.zeros((9, 16))
    wide[:, :9] = a
    nl.solve_triangular(dev(wide[:, :9]), dev(b), lower=True)  # row-major with ld 16: read in place
    assert em.of("cublasDtrsm_v2")[0][6] == 16


def test_stacks_take_one_batched_call(em):
    rng = np.random.default_rng(4)
    a = np.stack([triangular(rng, 6, "complex128", "C") for _ in range(3)])
    b = rng.standard_normal((3, 6, 2)) + 1j * rng.standard_normal((3, 6, 2))
    got = nl.solve_triangular(dev(a), dev(b), lower=False, trans=2)
    ref = np.stack([sla.solve_triangular(a[i], b[i], lower=False, trans=2) for i in range(3)])
    assert rel(got, ref) < 1e-11
    assert [c[-1] for c in em.of("cublasZtrsmBatched")] == [3] and not em.of("cublasZtrsm_v2")
    shared = b[0]  # one right-hand side for every matrix: broadcast into the result
    got = nl.solve_triangular(dev(a), dev(shared), lower=True)
    assert rel(got, np.stack([sla.solve_triangular(a[i], shared, lower=True) for i in range(3)])) < 1e-11
    one = a[1]  # one matrix against a stack of right-hand sides: the pointer array repeats it
    got = nl.solve_triangular(dev(one), dev(b), lower=True, trans=1)
    assert rel(got, np.stack([sla.solve_triangular(one, b[i], lower=True, trans=1) for i in range(3)])) < 1e-11


def test_bad_operands_are_named(em):
    with pytest.raises(InvalidOperandError, match="b: has 4 rows"):
        nl.solve_triangular(dev(np.eye(3)), dev(np.ones(4)))
    with pytest.raises(InvalidOperandError, match="a: expected square"):
        nl.solve_triangular(dev(np.ones((3, 4))), dev(np.ones(3)))
    with pytest.raises(InvalidOptionError, match="trans="):
        nl.solve_triangular(dev(np.eye(3)), dev(np.ones(3)), trans=3)
    with pytest.raises(InvalidOperandError, match="does not broadcast"):
        nl.solve_triangular(dev(np.ones((2, 3, 3))), dev(np.ones((4, 3, 1))))


def test_a_zero_on_the_diagonal_raises_as_scipy_does(em):
    a = np.triu(np.ones((4, 4)))
    a[2, 2] = 0
    with pytest.raises(LinAlgError, match="resolution failed at diagonal 2"):
        nsla.solve_triangular(dev(a), dev(np.ones(4)))
    got = nsla.solve_triangular(dev(a), dev(np.ones(4)), unit_diagonal=True)  # the diagonal is not read
    assert rel(got, sla.solve_triangular(a, np.ones(4), unit_diagonal=True)) < 1e-14


# -- deferred checks ------------------------------------------------------------------------------


def test_deferred_checks_report_at_the_next_call(em):
    singular, b = np.ones((3, 3)), np.ones((3, 1))
    good = np.eye(3) * 2
    with nl.cuda_checks("deferred"):
        nsla.solve(dev(singular), dev(b))  # returns: the info codes are copied, not read
        assert em.of("memcpyAsync") and em.of("eventRecord")
        with pytest.raises(LinAlgError, match="Singular matrix .*reported late"):
            nsla.solve(dev(good), dev(b))
        nsla.solve(dev(good), dev(b))  # reported once
    with pytest.raises(LinAlgError, match="Singular matrix"):  # the default: raised by the failing call
        nsla.solve(dev(singular), dev(b))


def test_pending_checks_wait_for_their_event(em):
    bad = np.array([[1.0, np.nan], [0.0, 1.0]])
    with nl.cuda_checks("deferred"):
        em.ready = False  # the GPU has not reached the copy yet: later calls do not wait for it
        nsla.cholesky(dev(bad + bad.T))
        nsla.solve_triangular(dev(np.triu(np.ones((2, 2)))), dev(np.ones(2)))
        em.ready = True
        with pytest.raises(ValueError, match="infs or NaNs.*reported late"):
            nl.check_cuda_errors()
    assert em.of("eventSynchronize")
    nl.check_cuda_errors()  # nothing left


def test_deferred_singular_stack_names_the_batch_element(em):
    a = np.stack([np.eye(3), np.triu(np.ones((3, 3)))])
    a[1, 1, 1] = 0
    with nl.cuda_checks("deferred"):
        nl.solve_triangular(dev(a), dev(np.ones((2, 3, 1))))
    with pytest.raises(LinAlgError, match=r"zero on the diagonal \(batch element \(1,\)\)"):
        nl.check_cuda_errors()


def test_unknown_check_mode_is_refused():
    with pytest.raises(InvalidOptionError, match="mode='later'.*allowed"):
        with nl.cuda_checks("later"):
            pass


# -- the host work of the hot path ---------------------------------------------------------------


def operands(rng, n=8):
    a = rng.standard_normal((n, n)) + n * np.eye(n)
    return dev(a), dev(a @ a.T + n * np.eye(n)), dev(rng.standard_normal((n, 4)))


def drop_in_calls(a, spd, b):
    lu, c = nsla.lu_factor(a), nsla.cho_factor(spd)
    return {"solve": lambda: nsla.solve(a, b), "lu_factor": lambda: nsla.lu_factor(a),
            "lu_solve": lambda: nsla.lu_solve(lu, b), "cho_factor": lambda: nsla.cho_factor(spd),
            "cho_solve": lambda: nsla.cho_solve(c, b), "cholesky": lambda: nsla.cholesky(spd),
            "eigh": lambda: nsla.eigh(spd), "svd": lambda: nsla.svd(a), "qr": lambda: nsla.qr(a),
            "solve_triangular": lambda: nsla.solve_triangular(a, b), "inv": lambda: nsla.inv(a),
            "det": lambda: nsla.det(a), "lstsq": lambda: nsla.lstsq(a, b)}


#: Functions whose SciPy result itself is host data: lstsq's rank is a Python int.
READS_BY_DESIGN = {"lstsq"}


def test_deferred_hot_path_never_reads_the_device(em, monkeypatch):
    import sys

    cupy = sys.modules["cupy"]
    reads = []
    monkeypatch.setattr(cupy, "asnumpy", lambda x: reads.append("asnumpy") or np.asarray(x).view(np.ndarray))
    for dunder in ("__bool__", "__int__", "__float__"):
        original = getattr(np.ndarray, dunder)
        monkeypatch.setattr(HostArray, dunder, lambda self, _o=original: reads.append("scalar") or _o(self),
                            raising=False)
    calls = drop_in_calls(*operands(np.random.default_rng(5)))
    with nl.cuda_checks("deferred"):
        for name, call in calls.items():
            call()  # plans made
            reads.clear()
            call()
            assert bool(reads) == (name in READS_BY_DESIGN), (name, reads)
    for name in ("solve", "cholesky"):  # the default reads once per call (check_finite and info: one read each)
        reads.clear()
        calls[name]()
        assert reads, name


def test_workspaces_and_queries_are_taken_once_per_plan(em):
    calls = drop_in_calls(*operands(np.random.default_rng(6)))
    for call in calls.values():
        call()
    em.calls.clear()
    allocated = len(ALLOCATIONS)
    for call in calls.values():
        call()
        call()
    assert len(ALLOCATIONS) == allocated  # no workspace on the hot path
    assert not [name for name in em.names() if name.endswith("bufferSize")]  # no size query either


def test_deferred_pivot_range_check_clips_and_reports(em):
    rng = np.random.default_rng(8)
    a = rng.standard_normal((5, 5)) + 5 * np.eye(5)
    lu, piv = sla.lu_factor(a)
    bad = piv.copy()
    bad[1] = 7
    with pytest.raises(InvalidOperandError, match="out of range"):  # the default: before any work
        nsla.lu_solve((dev(lu), dev(bad)), dev(np.ones(5)))
    with nl.cuda_checks("deferred"):
        x = nsla.lu_solve((dev(lu), dev(bad)), dev(np.ones(5)))  # clipped into range: no stray index
        assert np.asarray(x).shape == (5,)
        with pytest.raises(InvalidOperandError, match="out of range.*reported late"):
            nl.check_cuda_errors()


def test_mixed_precision_computes_in_the_wider_dtype(em):
    rng = np.random.default_rng(9)
    a = triangular(rng, 7, "float32", "C")
    b = rng.standard_normal((7, 2))
    got = nl.solve_triangular(dev(a), dev(b), lower=True)
    assert got.dtype == np.float64 and rel(got, sla.solve_triangular(a.astype(np.float64), b, lower=True)) < 1e-12
    got = nl.solve_triangular(dev(a), dev(b.astype(np.complex64)), lower=True)
    assert got.dtype == np.complex64
