"""The cuSOLVER engine of the solver plans, its hot path run on the host.

The plans and one-call functions run on a NumPy-backed stand-in for CuPy (host addresses as
device pointers) with every cuSOLVER / cuBLAS routine the engine calls replaced by a host
emulation written from the cuSOLVER documentation (tests/cuda_emulation_solvers.py): it reads
the matrices at the pointers and leading dimensions the engine passed and writes results and
``info`` codes back. Results are compared with the CPU engine and float64 NumPy/SciPy references;
the recorded calls show the routes, the transposed operations used instead of transposing
copies, and the workspaces. What the GPU does with the calls is for tests/gpu.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

pytest.importorskip("cuda.pathfinder", reason="CUDA wheels not installed (pip install 'nvmathpy[cu13]')")

from nvmathpy.cuda.bindings import cusolver  # noqa: E402
from nvmathpy.errors import (  # noqa: E402
    ExecutionSpaceUnavailableError,
    InvalidOperandError,
    InvalidOptionError,
    LinAlgError,
    MissingDependencyError,
    OperandMismatchError,
)

try:
    cusolver.LIB.loaded
except MissingDependencyError as exc:  # pragma: no cover - depends on the installation
    pytest.skip(f"cuSOLVER not installed: {exc}", allow_module_level=True)

import nvmathpy.linalg as nl  # noqa: E402
from nvmathpy.linalg.solvers.cuda import _functions as _cusolver_functions  # noqa: E402
from nvmathpy.linalg.solvers.cuda._engine import candidates  # noqa: E402
from nvmathpy.plan import Problem  # noqa: E402
from cuda_emulation_solvers import HostArray, dev, install  # noqa: E402
from numerics import rel, up  # noqa: E402

DTYPES = ["float32", "float64", "complex64", "complex128"]
TOL = {"float32": 2e-4, "complex64": 2e-4, "float64": 1e-11, "complex128": 1e-11}


@pytest.fixture
def em(monkeypatch):
    emulation = install(monkeypatch.setattr, monkeypatch.setitem)
    _cusolver_functions.plan_cache().clear()
    yield emulation
    _cusolver_functions.plan_cache().clear()


def rand(rng, shape, dtype, layout="C"):
    """Fresh random data; layout "C", "F" (each matrix column-major) or "strided" (every other column)."""
    full = shape[:-1] + (2 * shape[-1],) if layout == "strided" else shape
    if layout == "F":
        full = shape[:-2] + (shape[-1], shape[-2])
    x = rng.standard_normal(full)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(full)
    x = x.astype(dtype)
    if layout == "F":
        return np.swapaxes(x, -1, -2)
    if layout == "strided":
        return x[..., ::2]
    return x


def hpd(rng, batch, n, dtype, layout="C"):
    g = rand(rng, batch + (n, n), dtype)
    a = g @ np.swapaxes(g.conj(), -1, -2) + n * np.eye(n)
    a = a.astype(dtype)
    return np.ascontiguousarray(np.swapaxes(a, -1, -2)).swapaxes(-1, -2) if layout == "F" else a


def with_route(plan, label):
    """``plan`` planned with the candidate ``label`` (as autotune would install it)."""
    plan.plan()
    candidate = next(c for c in plan._engine.candidates(plan.problem) if c.label == label)
    plan._install(plan._engine.prepare(plan.problem, candidate), "test")
    return plan


# -- candidates ----------------------------------------------------------------------------------


@pytest.mark.parametrize("operation, n, count, expected", [
    ("solve", 8, 100000, ["tiny", "getrfBatched", "getrf"]),  # the generated route: tests/test_cuda_tiny_batched.py
    ("solve", 200, 10, ["getrf", "getrfBatched"]),
    ("lu", 8, 1, ["getrf"]),
    ("cholesky", 16, 50, ["potrfBatched", "tiny", "potrf"]),
    ("cholesky", 64, 50, ["potrf", "potrfBatched"]),
    ("eigh", 16, 50, ["syevBatched", "syevjBatched", "syevd"]),
    ("eigh", 64, 50, ["syevd"]),
    ("eigh", 4096, 1, ["syevd"]),
    ("svd", 4096, 1, ["gesvd", "gesvdj", "gesvdp"]),
    ("qr", 9, 3, ["geqrf"]),
])
def test_candidates(operation, n, count, expected):
    problem = Problem.of(operation, n=n, count=count, dtype="float64")
    assert [c.label for c in candidates(problem)] == expected


# -- LU -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
@pytest.mark.parametrize("batch", [(), (3,), (2, 3)])
def test_lu_factor_once_solve_many(em, dtype, layout, batch):
    rng = np.random.default_rng(1)
    n = 7
    a = rand(rng, batch + (n, n), dtype, layout)
    before = a.copy()
    lu = nl.LU(dev(a))
    assert type(lu).__name__ == "CudaLU"
    for trans in (0, 1, 2):
        b = rand(rng, batch + (n, 3), dtype)
        x = lu.solve(dev(b), trans=trans)
        op = {0: a, 1: np.swapaxes(a, -1, -2), 2: np.swapaxes(a.conj(), -1, -2)}[trans]
        assert isinstance(x, HostArray)
        assert rel(up(op) @ up(x), b) < TOL[dtype]
    vector = rand(rng, (n,), dtype)
    if not batch:
        assert rel(up(a) @ up(lu.solve(dev(vector))), vector) < TOL[dtype]
    assert lu.factorizations == 1
    np.testing.assert_array_equal(a, before)
    assert rel(lu.det(), np.linalg.det(up(a))) < 1e3 * TOL[dtype]
    # no transposing copy: a C-ordered A is factored as A^T and solved with op = T
    transposed = layout == "C"
    route = "cublas" if batch else "cusolverDnX"
    solves = [args[0] for name, args in em.calls if name.endswith("getrs") or name.endswith("getrsBatched")]
    expected_ops = [1, 0, 0] if transposed else [0, 1, 2]
    assert solves[:3] == expected_ops
    assert any(name.startswith(route) for name in em.names())


@pytest.mark.parametrize("batch", [(), (4,)])
def test_lu_factors_match_scipy(em, batch):
    rng = np.random.default_rng(2)
    for layout in ("C", "F"):
        a = rand(rng, batch + (6, 6), "float64", layout)
        lu, piv = nl.LU(dev(a)).factors
        mats = a.reshape((-1, 6, 6))
        for i, m in enumerate(mats):
            ref_lu, ref_piv = sla.lu_factor(m)
            got_lu = np.asarray(lu).reshape((-1, 6, 6))[i]
            assert rel(got_lu, ref_lu) < 1e-12
            np.testing.assert_array_equal(np.asarray(piv).reshape((-1, 6))[i], ref_piv)
        assert np.asarray(piv).dtype == np.int32


def test_batched_and_looped_routes_agree_and_autotune_chooses(em):
    rng = np.random.default_rng(3)
    a = rand(rng, (64, 8, 8), "float64")
    b = rand(rng, (64, 8, 2), "float64")
    plan = nl.LU(dev(a))
    timings = plan.autotune(effort="exhaustive", repeats=2)
    assert set(timings) == {"getrf", "getrfBatched", "tiny"}
    x_tuned = plan.solve(dev(b))
    assert rel(x_tuned, np.linalg.solve(a, b)) < 1e-12
    fresh = nl.LU(dev(a)).plan()
    assert fresh.chosen_by == "wisdom" and fresh.candidate == plan.candidate
    assert "cusolverDnXgetrf" in em.names() and "cublasDgetrfBatched" in em.names()


def test_singular_in_a_batch_is_reported_by_index_without_a_sync_in_solve(em):
    a = np.stack([np.eye(3), np.eye(3), np.ones((3, 3)), np.eye(3)])
    lu = nl.LU(dev(a))
    lu.solve(dev(np.ones((4, 3, 1))))  # no sync, no error: info stays on the device
    assert lu.singular == [2]
    with pytest.raises(LinAlgError, match=r"batch element 2"):
        lu.check()
    with pytest.raises(LinAlgError, match=r"Singular matrix \(batch element 2\)"):
        nl.solve(dev(a), dev(np.ones((4, 3, 2))))
    with pytest.raises(LinAlgError, match=r"batch element \(1, 0\)"):
        nl.inv(dev(a.reshape(2, 2, 3, 3)))
    assert float(nl.det(dev(a))[2]) == 0.0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [((5, 5), (5,)), ((5, 5), (5, 3)), ((4, 5, 5), (4, 5, 2)), ((4, 5, 5), (5, 2)),
                                    ((2, 1, 9, 9), (3, 9, 1))])
def test_solve_and_inv_functions(em, dtype, shapes):
    rng = np.random.default_rng(4)
    a, b = rand(rng, shapes[0], dtype), rand(rng, shapes[1], dtype)
    x = nl.solve(dev(a), dev(b))
    assert rel(x, np.linalg.solve(up(a), up(b))) < TOL[dtype] * 10
    assert rel(nl.inv(dev(a)), np.linalg.inv(up(a))) < TOL[dtype] * 10
    sign, logdet = nl.slogdet(dev(a))
    ref_sign, ref_logdet = np.linalg.slogdet(up(a))
    assert rel(sign, ref_sign) < TOL[dtype] * 10 and rel(logdet, ref_logdet) < TOL[dtype] * 10


def test_batched_small_solves_take_one_batched_call(em):
    """100 x 8x8 (below the count where the generated tiny route leads, see
    tests/test_cuda_tiny_batched.py): one getrfBatched and one getrsBatched"""
    rng = np.random.default_rng(5)
    a, b = rand(rng, (100, 8, 8), "float64"), rand(rng, (100, 8, 1), "float64")
    x = nl.solve(dev(a), dev(b))
    assert rel(x, np.linalg.solve(a, b)) < 1e-11
    assert em.names().count("cublasDgetrfBatched") == 1 and em.names().count("cublasDgetrsBatched") == 1
    trans = em.of("cublasDgetrsBatched")[0][0]
    assert trans == 1  # C-ordered A: A^T factored, solved with op = T, no transposing copy
    em.calls.clear()
    nl.solve(dev(a), dev(b))  # cache hit: no new workspace queries or allocations
    assert [n for n in em.names() if "SetStream" not in n] == ["cublasDgetrfBatched", "cublasDgetrsBatched"]


def test_lu_factor_and_lu_solve_functions(em):
    rng = np.random.default_rng(6)
    a = rand(rng, (6, 6), "complex128")
    lu, piv = nl.lu_factor(dev(a))
    ref_lu, ref_piv = sla.lu_factor(a)
    assert rel(lu, ref_lu) < 1e-12
    np.testing.assert_array_equal(piv, ref_piv)
    b = rand(rng, (6, 2), "complex128")
    for trans in (0, 1, 2):
        assert rel(nl.lu_solve((lu, piv), dev(b), trans=trans), sla.lu_solve((ref_lu, ref_piv), b, trans=trans)) < 1e-12
    singular = dev(np.array([[1.0, 2.0], [2.0, 4.0]]))
    factors = nl.lu_factor(singular)
    with pytest.raises(LinAlgError, match="Singular"):
        nl.lu_solve(factors, dev(np.ones(2)))
    # pivots that cuSOLVER would index out of bounds with are refused before it runs
    for bad in (np.full(6, 6, np.int32), np.full(6, -1, np.int32), piv.astype(np.float64)):
        with pytest.raises(InvalidOperandError, match="piv"):
            nl.lu_solve((lu, dev(bad)), dev(b))


def test_reset_operands_refactors_and_checks_shapes(em):
    rng = np.random.default_rng(7)
    a1, a2 = rand(rng, (5, 5), "float64"), rand(rng, (5, 5), "float64")
    b = rand(rng, (5,), "float64")
    lu = nl.LU(dev(a1))
    assert rel(lu.solve(dev(b)), np.linalg.solve(a1, b)) < 1e-12
    lu.reset_operands(dev(a2))
    assert rel(lu.solve(dev(b)), np.linalg.solve(a2, b)) < 1e-12
    assert lu.factorizations == 2
    with pytest.raises(OperandMismatchError, match="shape"):
        lu.reset_operands(dev(np.eye(4)))


# -- Cholesky ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("batch", [(), (5,)])
def test_cholesky_factor_and_solve(em, dtype, layout, lower, batch):
    rng = np.random.default_rng(8)
    n = 6
    a = hpd(rng, batch, n, dtype, layout)
    # only the named triangle is read: poison the other one (it is a copy the plan must not need)
    poisoned = a.copy(order="K")
    other = np.triu_indices(n, 1) if lower else np.tril_indices(n, -1)
    poisoned[(...,) + other] = np.nan
    plan = nl.Cholesky(dev(poisoned), lower=lower)
    factor = plan.factor
    ref = np.linalg.cholesky(up(a))
    assert rel(factor, ref if lower else np.swapaxes(ref.conj(), -1, -2)) < TOL[dtype]
    b = rand(rng, batch + (n, 3), dtype)
    assert rel(plan.solve(dev(b)), np.linalg.solve(up(a), up(b))) < TOL[dtype] * 10
    fills = [args[0] for name, args in em.calls if name.endswith("potrf") or name.endswith("potrfBatched")]
    flipped = layout == "C"
    assert fills[-1] == (0 if lower != flipped else 1)


def test_not_positive_definite_in_a_batch_is_reported_by_index(em):
    a = np.stack([np.eye(4), np.eye(4), -np.eye(4)])
    for label in ("potrf", "potrfBatched"):
        plan = with_route(nl.Cholesky(dev(a)), label)
        plan.execute()  # no sync, no error
        with pytest.raises(LinAlgError, match=r"not positive definite \(batch element 2\)"):
            plan.check()
    with pytest.raises(LinAlgError, match=r"batch element 2"):
        nl.cholesky(dev(a))
    assert "cusolverDnDpotrfBatched" in em.names()


def test_cholesky_batched_route_with_several_right_hand_sides(em):
    rng = np.random.default_rng(9)
    a = hpd(rng, (20,), 5, "float64")
    b = rand(rng, (20, 5, 3), "float64")
    x = nl.cho_solve(nl.cho_factor(dev(a)), dev(b))
    assert rel(x, np.linalg.solve(a, b)) < 1e-11
    assert em.names().count("cusolverDnDpotrsBatched") == 3  # one right-hand side per call
    assert all(args[2] == 1 for args in em.of("cusolverDnDpotrsBatched"))


# -- eigh, SVD, QR, lstsq --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("batch", [(), (4,)])
def test_eigh(em, dtype, layout, uplo, batch):
    rng = np.random.default_rng(10)
    a = hpd(rng, batch, 7, dtype, layout) - 7 * np.eye(7, dtype=dtype)
    w, v = nl.eigh(dev(a), UPLO=uplo)
    ref_w = np.linalg.eigvalsh(up(a))
    assert rel(w, ref_w) < TOL[dtype] * 10
    av = up(a) @ up(v)
    assert rel(av, up(v) * up(w)[..., None, :]) < TOL[dtype] * 100
    assert rel(nl.eigvalsh(dev(a), UPLO=uplo), ref_w) < TOL[dtype] * 10
    expected = "cusolverDnXsyevBatched" if batch else "cusolverDnXsyevd"
    assert expected in em.names()
    if batch:  # the Jacobi route gives the same answer
        plan = with_route(nl.Eigh(dev(a), lower=uplo == "L"), "syevjBatched")
        w_jacobi, v_jacobi = plan.execute()
        assert rel(w_jacobi, ref_w) < TOL[dtype] * 10
        assert rel(up(a) @ up(v_jacobi), up(v_jacobi) * up(w_jacobi)[..., None, :]) < TOL[dtype] * 100
        plan.free()
        assert any(name.endswith("evjBatched") for name in em.names())


def test_svd_values_only_on_every_route(em):
    rng = np.random.default_rng(17)
    a = rand(rng, (3, 5, 8), "complex64")
    for label in ("gesvd", "gesvdj", "gesvdp"):
        with with_route(nl.SVD(dev(a), compute_uv=False), label) as plan:
            assert rel(plan.execute(), np.linalg.svd(up(a), compute_uv=False)) < TOL["complex64"] * 10


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7, 4), (4, 7), (5, 5), (3, 6, 4), (2, 4, 6)])
@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("layout", ["C", "F"])
def test_svd_routes(em, dtype, shape, full, layout):
    rng = np.random.default_rng(11)
    a = rand(rng, shape, dtype, layout)
    for label in ("gesvd", "gesvdj", "gesvdp"):
        with with_route(nl.SVD(dev(a), full_matrices=full), label) as plan:
            u, s, vh = plan.execute()
        k = min(shape[-2:])
        assert rel(s, np.linalg.svd(up(a), compute_uv=False)) < TOL[dtype] * 10
        assert rel((up(u)[..., :k] * up(s)[..., None, :]) @ up(vh)[..., :k, :], a) < TOL[dtype] * 10
        m, n = shape[-2:]
        assert up(u).shape[-2:] == ((m, m) if full else (m, k)) and up(vh).shape[-2:] == ((n, n) if full else (k, n))
    # gesvd was always handed a tall matrix (the emulation asserts it)
    assert all(args[2] >= args[3] for args in em.of("cusolverDnXgesvd"))
    assert nl.svdvals(dev(a)).shape == shape[:-2] + (min(shape[-2:]),)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7, 4), (4, 7), (3, 6, 4)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr(em, dtype, shape, mode):
    rng = np.random.default_rng(12)
    a = rand(rng, shape, dtype)
    out = nl.qr(dev(a), mode=mode)
    ref = np.linalg.qr(up(a), mode=mode)
    if mode == "r":
        assert rel(np.abs(up(out)), np.abs(ref)) < TOL[dtype] * 10
        return
    q, r = out
    assert up(q).shape == ref[0].shape and up(r).shape == ref[1].shape
    assert rel(up(q) @ up(r), a) < TOL[dtype] * 10
    eye = np.eye(up(q).shape[-1])
    assert rel(np.swapaxes(up(q).conj(), -1, -2) @ up(q), np.broadcast_to(eye, up(q).shape[:-2] + eye.shape)) < \
        TOL[dtype] * 10


def test_qr_plan_in_mode_r_refuses_q_as_the_cpu_plan_does(em):
    a = rand(np.random.default_rng(13), (7, 5), "float64")
    on_device, on_host = nl.QR(dev(a), mode="r"), nl.QR(a, mode="r")
    assert rel(np.abs(up(on_device.r)), np.abs(on_host.r)) < 1e-12
    for plan in (on_device, on_host):
        with pytest.raises(InvalidOptionError, match="q is not computed in mode 'r'"):
            plan.q


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("shape", [(9, 4), (4, 9), (6, 6)])
def test_lstsq(em, dtype, shape):
    rng = np.random.default_rng(13)
    a, b = rand(rng, shape, dtype), rand(rng, (shape[0], 2), dtype)
    x, res, rank, s = nl.lstsq(dev(a), dev(b))
    ref = np.linalg.lstsq(a, b, rcond=None)
    assert rel(x, ref[0]) < 1e-10 and rank == ref[2] and rel(s, ref[3]) < 1e-12
    assert up(res).shape == ref[1].shape
    if ref[1].size:
        assert rel(res, ref[1]) < 1e-10
    rank_deficient = np.outer(np.arange(1.0, 7.0), np.arange(1.0, 4.0))
    assert nl.lstsq(dev(rank_deficient), dev(np.ones(6)))[2] == 1


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular(em, lower, trans, unit):
    rng = np.random.default_rng(14)
    a = rand(rng, (3, 6, 6), "complex128") + 4 * np.eye(6)
    b = rand(rng, (3, 6, 2), "complex128")
    x = nl.solve_triangular(dev(a), dev(b), lower=lower, trans=trans, unit_diagonal=unit)
    for i in range(3):
        ref = sla.solve_triangular(a[i], b[i], lower=lower, trans=trans, unit_diagonal=unit)
        assert rel(np.asarray(x)[i], ref) < 1e-12


def test_an_explicit_stream_reaches_every_library_call(em):
    rng = np.random.default_rng(15)
    a, b = rand(rng, (4, 5, 5), "float64"), rand(rng, (4, 5, 1), "float64")
    from cuda_emulation_solvers import ALLOCATIONS

    for label in ("getrf", "getrfBatched"):
        em.calls.clear()
        ALLOCATIONS.clear()
        plan = with_route(nl.LU(dev(a), stream=1234), label)
        assert rel(plan.execute().solve(dev(b)), np.linalg.solve(a, b)) < 1e-12
        streams = [args[0] for name, args in em.calls if name in ("cusolverDnSetStream", "cublasSetStream_v2")]
        assert streams and set(streams) == {1234}
        # workspaces come from the pool of the stream they are used on (no reuse while in flight)
        assert all(stream == 1234 for _, stream in ALLOCATIONS)


# -- what CUDA cannot do yet, and bad input ---------------------------------------------------------------


def test_unsupported_options_are_refused_by_name(em):
    a = dev(np.eye(4))
    with pytest.raises(InvalidOptionError, match="subset_by_index"):
        nl.Eigh(a, subset_by_index=(0, 1))
    with pytest.raises(InvalidOptionError, match="b="):
        nl.Eigh(a, dev(np.eye(4)))
    with pytest.raises(InvalidOptionError, match="pivoting"):
        nl.QR(a, pivoting=True)


def test_bad_operands_raise_before_any_call(em):
    with pytest.raises(InvalidOperandError, match="square"):
        nl.LU(dev(np.ones((3, 4))))
    with pytest.raises(InvalidOperandError, match="rows"):
        nl.LU(dev(np.eye(3))).solve(dev(np.ones(4)))
    with pytest.raises(InvalidOperandError, match="execution='cuda'"):  # a device plan takes device operands
        nl.LU(dev(np.eye(3))).solve(np.ones(3))
    assert not [n for n in em.names() if not n.endswith("bufferSize")]


# -- NumPy operands with execution="cuda" ----------------------------------------------------------------


def host(x):
    """``x`` is a plain NumPy array (not the emulation's device stand-in)."""
    assert type(x) is np.ndarray, type(x)
    return x


def test_numpy_operands_run_on_cuda_and_come_back_as_numpy(em):
    rng = np.random.default_rng(18)
    a = rand(rng, (3, 7, 7), "float64") + 4 * np.eye(7)
    spd = hpd(rng, (3,), 7, "float64")
    b, b2 = rand(rng, (3, 7, 2), "float64"), rand(rng, (3, 7, 2), "float64")
    before = a.copy(), b.copy()
    with nl.LU(a, execution="cuda") as lu:
        assert type(lu).__name__ == "CudaLU"
        lu.plan().execute()
        assert rel(host(lu.solve(b)), np.linalg.solve(a, b)) < 1e-12
        assert rel(host(lu.solve(b2, trans=1)), np.linalg.solve(np.swapaxes(a, -1, -2), b2)) < 1e-12
        factors, pivots = lu.factors
        host(factors), host(pivots)
        a2 = rand(rng, (3, 7, 7), "float64") + 4 * np.eye(7)
        lu.reset_operands(a=a2)
        assert rel(host(lu.execute().solve(b)), np.linalg.solve(a2, b)) < 1e-12
        assert lu.factorizations == 2
    np.testing.assert_array_equal(a, before[0])
    np.testing.assert_array_equal(b, before[1])
    with nl.Cholesky(spd, execution="cuda") as chol:
        assert rel(host(chol.plan().execute().solve(b)), np.linalg.solve(spd, b)) < 1e-12
    w, v = nl.Eigh(spd, execution="cuda").plan().execute()
    assert rel(host(w), np.linalg.eigvalsh(spd)) < 1e-12 and host(v).shape == spd.shape
    u, s, vh = nl.SVD(a, execution="cuda").plan().execute()
    assert rel(host(u) * host(s)[..., None, :] @ host(vh), a) < 1e-12
    assert any(name.startswith("cusolverDn") for name in em.names())  # it ran on the (emulated) device


def test_numpy_operands_through_the_functions_on_cuda(em):
    rng = np.random.default_rng(19)
    a = rand(rng, (6, 6), "float64") + 3 * np.eye(6)
    b = rand(rng, (6,), "float64")
    assert rel(host(nl.solve(a, b, execution="cuda")), np.linalg.solve(a, b)) < 1e-12
    assert rel(host(nl.inv(a, execution="cuda")), np.linalg.inv(a)) < 1e-12
    det = nl.det(a, execution="cuda")
    assert isinstance(det, np.float64) and rel(det, np.linalg.det(a)) < 1e-12
    q, r = nl.qr(a, execution="cuda")
    assert rel(host(q) @ host(r), a) < 1e-12
    x, res, rank, s = nl.lstsq(a[:, :4], b, execution="cuda")
    assert rel(host(x), np.linalg.lstsq(a[:, :4], b, rcond=None)[0]) < 1e-10 and rank == 4
    lu, piv = nl.lu_factor(a, execution="cuda")
    assert rel(host(nl.lu_solve((host(lu), host(piv)), b, execution="cuda")), np.linalg.solve(a, b)) < 1e-12
    spd = hpd(rng, (), 6, "float64")
    c, lower = nl.cho_factor(spd, execution="cuda")
    assert rel(host(nl.cho_solve((host(c), lower), b, execution="cuda")), np.linalg.solve(spd, b)) < 1e-12
    x = nl.solve_triangular(a, b, lower=True, execution="cuda")
    assert rel(host(x), sla.solve_triangular(a, b, lower=True)) < 1e-12
    with pytest.raises(LinAlgError, match="batch element 1"):
        nl.solve(np.stack([a, np.zeros((6, 6))]), np.stack([b, b])[..., None], execution="cuda")


@pytest.mark.parametrize("dtype, computed", [("int32", "float64"), ("float16", "float32"), ("bfloat16", "float32")])
def test_numpy_operands_on_cuda_compute_in_the_dtype_the_cpu_uses(em, dtype, computed):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    kind = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    a = (np.arange(9).reshape(3, 3) % 4 + 5 * np.eye(3, dtype=int)).astype(kind)
    b = np.arange(1, 4).astype(kind)
    cpu = nl.LU(a).solve(b)
    for x in (nl.LU(a, execution="cuda").solve(b), nl.solve(a, b, execution="cuda")):
        assert host(x).dtype == np.dtype(computed) == cpu.dtype
        assert rel(x, np.linalg.solve(up(a), up(b))) < TOL[computed]


def test_torch_cpu_tensors_with_cuda_execution_are_refused_clearly(em):
    torch = pytest.importorskip("torch")
    with pytest.raises(InvalidOperandError, match=r"\.cuda\(\)"):
        nl.LU(torch.eye(3, dtype=torch.float64), execution="cuda")


def test_numpy_operands_run_on_the_device_execution_names_and_are_read_back_after_a_sync(em, monkeypatch):
    import sys

    from cuda_emulation import devices_of_calls, record_devices

    current, synchronized = record_devices(monkeypatch, sys.modules["cupy"])
    factored_on = devices_of_calls(monkeypatch, cusolver.LIB, "cusolverDnXgetrf", current)
    rng = np.random.default_rng(20)
    a, b = rand(rng, (5, 5), "float64") + 3 * np.eye(5), rand(rng, (5, 2), "float64")
    second = {"name": "cuda", "device_id": 1}
    assert rel(host(nl.solve(a, b, execution=second)), np.linalg.solve(a, b)) < 1e-12
    assert synchronized and set(synchronized) == {1}
    lu = nl.LU(a, execution=second)
    assert rel(host(lu.solve(b)), np.linalg.solve(a, b)) < 1e-12
    lu.reset_operands(a=a.T.copy())
    assert rel(host(lu.solve(b)), np.linalg.solve(a.T, b)) < 1e-12
    assert factored_on == [1, 1, 1]  # the function's plan, the plan's first and second factorization


def test_cuda_execution_without_a_driver_raises_one_clear_error():
    from nvmathpy.cuda.driver import cuda_status

    if cuda_status().available:
        pytest.skip("a CUDA device is usable here")
    a = np.eye(3)
    with pytest.raises(ExecutionSpaceUnavailableError, match="CUDA is not available"):
        nl.LU(a, execution="cuda")
    with pytest.raises(ExecutionSpaceUnavailableError, match="CUDA is not available"):
        nl.solve(a, np.ones(3), execution="cuda")
    with pytest.raises(ExecutionSpaceUnavailableError, match="CUDA is not available"):
        nl.Eigh(a, execution="cuda")


# -- the scipy.linalg drop-in on CUDA operands -----------------------------------------------------


def test_scipy_namespace_on_cuda_operands(em):
    from nvmathpy.scipy import linalg as nsla

    rng = np.random.default_rng(16)
    a = rand(rng, (7, 7), "float64") + 3 * np.eye(7)
    spd = hpd(rng, (), 7, "float64")
    b = rand(rng, (7, 2), "float64")
    for kwargs in ({}, {"transposed": True}, {"assume_a": "gen"}, {"assume_a": "lower triangular"},
                   {"assume_a": "upper triangular", "transposed": True}, {"assume_a": "diagonal"}):
        assert rel(nsla.solve(dev(a), dev(b), **kwargs), sla.solve(a, b, **kwargs)) < 1e-11, kwargs
    assert rel(nsla.solve(dev(spd), dev(b), assume_a="pos"), sla.solve(spd, b, assume_a="pos")) < 1e-11
    assert rel(nsla.inv(dev(a)), sla.inv(a)) < 1e-11
    assert rel(nsla.det(dev(a)), sla.det(a)) < 1e-11
    assert rel(nsla.cholesky(dev(spd)), sla.cholesky(spd)) < 1e-12
    c = nsla.cho_factor(dev(spd), lower=True)
    assert c[1] is True and rel(nsla.cho_solve(c, dev(b)), sla.cho_solve(sla.cho_factor(spd), b)) < 1e-11
    lu, piv = nsla.lu_factor(dev(a))
    assert rel(nsla.lu_solve((lu, piv), dev(b), trans=1), sla.lu_solve(sla.lu_factor(a), b, trans=1)) < 1e-11
    q, r = nsla.qr(dev(a[:, :4]))
    assert up(q).shape == (7, 7) and rel(up(q) @ up(r), a[:, :4]) < 1e-12
    (r_only,) = nsla.qr(dev(a[:, :4]), mode="r")
    assert rel(np.abs(up(r_only)), np.abs(sla.qr(a[:, :4], mode="r")[0])) < 1e-12
    w, v = nsla.eigh(dev(spd), lower=False)
    assert rel(w, sla.eigh(spd, eigvals_only=True)) < 1e-12
    assert rel(nsla.eigvalsh(dev(spd)), sla.eigvalsh(spd)) < 1e-12
    u, s, vh = nsla.svd(dev(a[:5]))
    assert up(u).shape == (5, 5) and up(vh).shape == (7, 7) and rel(s, sla.svdvals(a[:5])) < 1e-12
    assert rel(nsla.svdvals(dev(a)), sla.svdvals(a)) < 1e-12
    x, residues, rank, sv = nsla.lstsq(dev(a[:, :3]), dev(b[:, 0]))
    ref = sla.lstsq(a[:, :3], b[:, 0])
    assert rel(x, ref[0]) < 1e-11 and rank == ref[2] and np.ndim(residues) == np.ndim(ref[1])
    assert rel(nsla.solve_triangular(dev(a), dev(b), lower=True, trans=2), sla.solve_triangular(a, b, lower=True,
                                                                                                 trans=2)) < 1e-11
    bad = a.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="infs or NaNs"):
        nsla.solve(dev(bad), dev(b))
    with pytest.raises(LinAlgError, match="Singular"):
        nsla.solve(dev(np.ones((3, 3))), dev(np.ones(3)))
    with pytest.raises(InvalidOptionError, match="subset_by_index"):
        nsla.eigh(dev(spd), subset_by_index=(0, 1))


def test_empty_matrices(em):
    a = dev(np.empty((3, 0, 0)))
    assert np.asarray(nl.det(a)).tolist() == [1.0, 1.0, 1.0]
    sign, logdet = nl.slogdet(a)
    assert np.asarray(sign).tolist() == [1.0] * 3 and np.asarray(logdet).tolist() == [0.0] * 3
    assert np.asarray(nl.solve(dev(np.empty((0, 0))), dev(np.empty(0)))).shape == (0,)
    assert np.asarray(nl.inv(a)).shape == (3, 0, 0)
