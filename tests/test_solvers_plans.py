"""The solver plans (LU, Cholesky, QR, Eigh, SVD, Lstsq): results against NumPy/SciPy in
double precision, every dtype, odd sizes, batches and layouts, and the plan lifecycle."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
from test_solvers_helpers import DTYPES, LAYOUTS, herm, in_layout, rand, relerr, spd, tol, well, wide

from nvmathpy.errors import ExecutionSpaceUnavailableError, OperandMismatchError, PlanStateError
from nvmathpy.linalg import LU, QR, SVD, Cholesky, Eigh, Lstsq
from nvmathpy.linalg.solvers.plans.lu import LU as LUPlan
from nvmathpy.plan import Candidate

SIZES = [1, 2, 3, 5, 17, 64]


def _each_candidate(plan):
    """Yield the plan installed with each of its engine's candidates in turn."""
    for cand in plan._engine.candidates(plan.problem):
        plan._install(plan._engine.prepare(plan.problem, cand), "test")
        yield cand


# -- LU ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_lu_solve_all_trans(dtype, n, layout):
    rng = np.random.default_rng(n)
    a = in_layout(well(rng, n, dtype), layout)
    b = rand(rng, (n,), dtype)
    bm = rand(rng, (n, 3), dtype)
    lu = LU(a)
    for cand in _each_candidate(lu):
        lu.execute()
        for trans, op in ((0, lambda m: m), (1, lambda m: m.T), (2, lambda m: m.conj().T)):
            ref = np.linalg.solve(op(wide(a)), wide(b))
            x = lu.solve(b, trans=trans)
            assert x.dtype == a.dtype
            assert relerr(x, ref) < tol(dtype, n), (cand, trans)
        assert relerr(lu.solve(bm), np.linalg.solve(wide(a), wide(bm))) < tol(dtype, n)
        if n <= 17:  # larger ones overflow single precision (as in NumPy)
            assert relerr(lu.det(), np.linalg.det(wide(a))) < tol(dtype, n) * 10


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", [(4,), (2, 3)])
def test_lu_batched_and_broadcast_rhs(dtype, batch):
    rng = np.random.default_rng(7)
    a = well(rng, 5, dtype, batch)
    b = rand(rng, batch + (5, 2), dtype)
    lu = LU(a)
    assert relerr(lu.solve(b), np.linalg.solve(wide(a), wide(b))) < tol(dtype, 5)
    v = rand(rng, (5,), dtype)  # a 1-D b broadcasts over the batch
    ref = np.linalg.solve(wide(a), np.broadcast_to(wide(v)[:, None], batch + (5, 1)))[..., 0]
    assert relerr(lu.solve(v), ref) < tol(dtype, 5)
    sign, logdet = lu.slogdet()
    rs, rl = np.linalg.slogdet(wide(a))
    assert relerr(sign, rs) < tol(dtype, 5) * 10 and relerr(logdet, rl) < tol(dtype, 5) * 10
    assert lu.factorizations == 1


@pytest.mark.parametrize("layout", LAYOUTS)
def test_lu_factors_are_scipys(layout):
    rng = np.random.default_rng(1)
    a = in_layout(well(rng, 9, np.float64), layout)
    lu, piv = LU(a).factors
    ref_lu, ref_piv = sla.lu_factor(a)
    np.testing.assert_array_equal(piv, ref_piv)
    assert piv.dtype == np.int32
    assert relerr(lu, ref_lu) < 1e-14


def test_factor_once_solve_many_and_reset_refactors():
    rng = np.random.default_rng(2)
    a, a2 = well(rng, 8, np.float64), well(rng, 8, np.float64)
    lu = LU(a)
    for _ in range(5):
        b = rand(rng, (8,), np.float64)
        assert relerr(lu.solve(b), np.linalg.solve(a, b)) < 1e-12
    assert lu.factorizations == 1
    lu.reset_operands(a=a2)
    b = rand(rng, (8,), np.float64)
    assert relerr(lu.solve(b), np.linalg.solve(a2, b)) < 1e-12
    assert lu.factorizations == 2
    lu.solve(b)
    assert lu.factorizations == 2


def test_lu_singular_reports_batch_element():
    rng = np.random.default_rng(3)
    a = well(rng, 4, np.float64, (5,))
    a[3] = np.array([[1.0, 2, 3, 4], [2, 4, 6, 8], [0, 1, 0, 1], [1, 0, 1, 0]])  # rank deficient, exactly
    lu = LU(a)
    assert lu.singular == [3]
    with pytest.raises(np.linalg.LinAlgError, match="batch element 3"):
        lu.solve(np.ones(4))
    assert lu.det()[3] == 0


def test_lifecycle_errors_out_of_order():
    a = well(np.random.default_rng(0), 3, np.float64)
    lu = LU(a)
    with pytest.raises(PlanStateError):
        lu.execute()
    lu.plan().execute()
    with pytest.raises(OperandMismatchError, match="shape"):
        lu.reset_operands(a=np.eye(4))
    with pytest.raises(OperandMismatchError, match="dtype"):
        lu.reset_operands(a=np.eye(3, dtype=np.complex128))
    with LU(a) as ctx:
        ctx.solve(np.ones(3))
    with pytest.raises(PlanStateError):
        ctx.solve(np.ones(3))
    lu.free()
    lu.free()
    with pytest.raises(PlanStateError):
        lu.execute()


def test_reset_operands_does_not_touch_inputs_and_overwrite_is_opt_in():
    rng = np.random.default_rng(4)
    a = well(rng, 6, np.float64)
    keep = a.copy()
    LU(a).solve(np.ones(6))
    np.testing.assert_array_equal(a, keep)
    fa = np.asfortranarray(a)
    LU(fa, overwrite_a=True).plan().execute()
    assert not np.array_equal(fa, keep)  # asked for: the factors overwrote it


def test_cuda_raises_clear_error():
    a = np.eye(3)
    for cls in (LU, Cholesky, QR, Eigh, SVD, Lstsq):
        with pytest.raises(ExecutionSpaceUnavailableError, match="CUDA is not available"):
            cls(a, execution="cuda")


def test_lu_from_factors_matches():
    rng = np.random.default_rng(5)
    a = well(rng, 7, np.complex128)
    lu, piv = sla.lu_factor(a)
    plan = LUPlan.from_factors(lu, piv)
    b = rand(rng, (7,), np.complex128)
    assert relerr(plan.solve(b, trans=2), np.linalg.solve(a.conj().T, b)) < 1e-12
    assert plan.factorizations == 0


# -- Cholesky ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 3, 16, 33])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("lower", [True, False])
def test_cholesky(dtype, n, layout, lower):
    rng = np.random.default_rng(n)
    a = in_layout(spd(rng, n, dtype, (2,)), layout)
    ch = Cholesky(a, lower=lower)
    for _ in _each_candidate(ch):
        ch.execute()
        ref = np.linalg.cholesky(wide(a))
        if not lower:
            ref = np.conj(np.swapaxes(ref, -1, -2))
        assert relerr(ch.factor, ref) < tol(dtype, n)
        b = rand(rng, (2, n, 2), dtype)
        assert relerr(ch.solve(b), np.linalg.solve(wide(a), wide(b))) < tol(dtype, n) * 10


def test_cholesky_not_spd_reports_index():
    a = spd(np.random.default_rng(0), 4, np.float64, (3,))
    a[1, 2, 2] = -50.0
    with pytest.raises(np.linalg.LinAlgError, match="batch element 1"):
        Cholesky(a).plan().execute()


# -- QR ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7, 4), (4, 7), (5, 5), (1, 3)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("pivoting", [False, True])
def test_qr(dtype, shape, mode, pivoting):
    rng = np.random.default_rng(sum(shape))
    a = rand(rng, (2,) + shape, dtype)
    plan = QR(a, mode=mode, pivoting=pivoting)
    m, n = shape
    k = min(m, n)
    r = plan.r
    assert r.shape == (2, m if mode == "complete" else k, n)
    np.testing.assert_array_equal(r, np.triu(r))
    ap = np.take_along_axis(a, plan.p[:, None, :], axis=-1) if pivoting else a
    if mode != "r":
        q = plan.q
        assert q.shape == (2, m, m if mode == "complete" else k)
        assert relerr(q @ r, ap) < tol(dtype, m * n)
        eye = np.conj(np.swapaxes(q, -1, -2)) @ q
        assert relerr(eye, np.broadcast_to(np.eye(q.shape[-1]), eye.shape)) < tol(dtype, m)
    else:
        ref = np.linalg.qr(wide(ap), mode="r")
        assert relerr(np.abs(r), np.abs(ref)) < tol(dtype, m * n)
    if pivoting:
        assert np.all(np.diff(np.abs(np.diagonal(r, axis1=-2, axis2=-1)), axis=-1) <= 1e-6)


@pytest.mark.parametrize("pivoting", [False, True])
def test_qr_least_squares_solve(pivoting):
    rng = np.random.default_rng(9)
    a = rand(rng, (20, 6), np.float64)
    plan = QR(a, pivoting=pivoting)
    for _ in range(3):
        b = rand(rng, (20,), np.float64)
        assert relerr(plan.solve(b), np.linalg.lstsq(a, b, rcond=None)[0]) < 1e-12
    assert plan.factorizations == 1


# -- Eigh ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 7, 40])
@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("lower", [True, False])
def test_eigh_every_driver(dtype, n, layout, lower):
    rng = np.random.default_rng(n)
    a = in_layout(herm(rng, n, dtype), layout)
    ref_w = np.linalg.eigvalsh(wide(a), UPLO="L" if lower else "U")
    plan = Eigh(a, lower=lower)
    for cand in _each_candidate(plan):
        w, v = plan.execute()
        assert w.dtype == np.finfo(dtype).dtype
        assert relerr(w, ref_w) < tol(dtype, n) * 10, cand
        full = np.tril(a) + np.tril(a, -1).conj().T if lower else np.triu(a) + np.triu(a, 1).conj().T
        assert relerr(wide(full) @ v, v * w) < tol(dtype, n) * 10 * max(1, np.abs(ref_w).max()), cand


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_eigh_subsets_batched(dtype):
    rng = np.random.default_rng(11)
    a = herm(rng, 12, dtype, (3,))
    ref = np.linalg.eigvalsh(wide(a))
    plan = Eigh(a, subset_by_index=(2, 5), eigvals_only=True)
    for cand in _each_candidate(plan):
        assert relerr(plan.execute(), ref[:, 2:6]) < tol(dtype, 12) * 10, cand
    lo, hi = -0.5, 0.5
    single = a[0]
    plan = Eigh(single, subset_by_value=(lo, hi))
    expect = ref[0][(ref[0] > lo) & (ref[0] <= hi)]
    for cand in _each_candidate(plan):
        w, v = plan.execute()
        assert relerr(w, expect) < tol(dtype, 12) * 10, cand
        assert v.shape == (12, expect.size)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("itype", [1, 2, 3])
def test_eigh_generalized(dtype, itype):
    rng = np.random.default_rng(itype)
    a, b = herm(rng, 9, dtype), spd(rng, 9, dtype)
    ref = sla.eigh(wide(a), wide(b), type=itype, eigvals_only=True)
    plan = Eigh(a, b, itype=itype)
    for cand in _each_candidate(plan):
        w, v = plan.execute()
        assert relerr(w, ref) < tol(dtype, 9) * 20, cand
    bad = -spd(rng, 9, dtype)
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        Eigh(a, bad).plan().execute()


def test_eigh_autotune_records_wisdom_and_reuses_it():
    a = herm(np.random.default_rng(0), 48, np.float64)
    plan = Eigh(a)
    timings = plan.autotune(effort="exhaustive", repeats=1)
    assert len(timings) >= 3 and plan.chosen_by == "autotune"
    again = Eigh(a).plan()
    assert again.chosen_by == "wisdom" and again.candidate == plan.candidate


# -- SVD ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 5), (1, 1), (13, 2)])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("full", [False, True])
def test_svd(dtype, shape, layout, full):
    rng = np.random.default_rng(sum(shape))
    a = in_layout(rand(rng, (2,) + shape, dtype), layout)
    m, n = shape
    k = min(shape)
    ref = np.linalg.svd(wide(a), compute_uv=False)
    plan = SVD(a, full_matrices=full)
    for cand in _each_candidate(plan):
        u, s, vh = plan.execute()
        assert u.shape == (2, m, m if full else k) and vh.shape == (2, n if full else k, n)
        assert relerr(s, ref) < tol(dtype, m * n), cand
        assert relerr((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], a) < tol(dtype, m * n) * 5, cand
    assert relerr(SVD(a, compute_uv=False).plan().execute(), ref) < tol(dtype, m * n)


# -- Lstsq ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(9, 4), (4, 9), (6, 6)])
def test_lstsq_every_candidate(dtype, shape):
    rng = np.random.default_rng(sum(shape))
    a = rand(rng, shape, dtype)
    b = rand(rng, (shape[0], 2), dtype)
    ref_x, ref_res, ref_rank, ref_s = np.linalg.lstsq(wide(a), wide(b), rcond=None)
    plan = Lstsq(a)
    for cand in _each_candidate(plan):
        plan.execute()
        x, res, rank, s = plan.solve(b)
        assert relerr(x, ref_x) < tol(dtype, 50) * 10, cand
        assert rank == ref_rank and relerr(s, ref_s) < tol(dtype, 50)
        assert res.shape == ref_res.shape
        if res.size:
            assert relerr(res, ref_res) < tol(dtype, 50) * 100


def test_lstsq_rank_deficient_and_solve_many():
    rng = np.random.default_rng(3)
    a = rand(rng, (10, 5), np.float64)
    a[:, 4] = a[:, 0] + a[:, 1]
    plan = Lstsq(a)
    for _ in range(3):
        b = rand(rng, (10,), np.float64)
        x, res, rank, s = plan.solve(b)
        rx, rres, rrank, _ = np.linalg.lstsq(a, b, rcond=None)
        assert rank == rrank == 4 and res.shape == rres.shape == (0,)
        assert relerr(x, rx) < 1e-10
    assert plan.factorizations == 1


def test_torch_in_torch_out():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a = well(rng, 5, np.float64)
    b = rand(rng, (5,), np.float64)
    lu = LU(torch.from_numpy(a))
    x = lu.solve(torch.from_numpy(b))
    assert isinstance(x, torch.Tensor)
    assert relerr(x.numpy(), np.linalg.solve(a, b)) < 1e-12
    w, v = Eigh(torch.from_numpy(a + a.T)).plan().execute()
    assert isinstance(w, torch.Tensor) and isinstance(v, torch.Tensor)


def test_candidates_are_plain_json():
    for cand in LU(np.eye(3)).cpu_engine.candidates(LU(np.eye(3)).problem):
        assert Candidate.from_dict(cand.to_dict()) == cand


@pytest.mark.parametrize("dtype,n", [(np.float32, 300), (np.complex128, 257)])
def test_larger_sizes(dtype, n):
    rng = np.random.default_rng(n)
    a, b = well(rng, n, dtype), rand(rng, (n, 2), dtype)
    assert relerr(LU(a).solve(b), np.linalg.solve(wide(a), wide(b))) < tol(dtype, n)
    s = spd(rng, n, dtype)
    assert relerr(Cholesky(s).solve(b), np.linalg.solve(wide(s), wide(b))) < tol(dtype, n) * 10
    w = Eigh(s, eigvals_only=True).plan().execute()
    assert relerr(w, np.linalg.eigvalsh(wide(s))) < tol(dtype, n) * 10
    s_ref = np.linalg.svd(wide(a), compute_uv=False)
    assert relerr(SVD(a, compute_uv=False).plan().execute(), s_ref) < tol(dtype, n) * 10


def test_reset_operands_accepts_another_layout():
    rng = np.random.default_rng(21)
    a = rand(rng, (7, 4), np.float64)
    plan = SVD(a)
    plan.plan().execute()
    f = np.asfortranarray(rand(rng, (7, 4), np.float64))
    plan.reset_operands(a=f)
    u, s, vh = plan.execute()
    assert relerr((u * s) @ vh, f) < 1e-13
    lu = LU(np.ascontiguousarray(well(rng, 6, np.float64)))
    g = np.asfortranarray(well(rng, 6, np.float64))
    lu.reset_operands(a=g)
    assert relerr(lu.solve(np.ones(6), trans=1), np.linalg.solve(g.T, np.ones(6))) < 1e-12


# -- memory: a dropped plan is freed at once --------------------------------------------------


@pytest.mark.parametrize("make", [
    lambda a, b: LU(a), lambda a, b: Cholesky(a @ a.T), lambda a, b: QR(a), lambda a, b: Eigh(a + a.T),
    lambda a, b: SVD(a), lambda a, b: Lstsq(a),
], ids=["LU", "Cholesky", "QR", "Eigh", "SVD", "Lstsq"])
def test_a_dropped_plan_is_freed_without_the_garbage_collector(make):
    """The closures a plan binds hold it weakly: no plan -> closure -> plan cycle keeps a
    dropped plan's factors alive until the cyclic collector runs."""
    import gc
    import weakref

    rng = np.random.default_rng(3)
    a = rand(rng, (40, 40), np.float64) + 40 * np.eye(40)
    b = rand(rng, (40, 2), np.float64)
    enabled = gc.isenabled()
    gc.disable()
    try:
        plan = make(a, b)
        plan.autotune(effort="exhaustive", repeats=1)
        assert plan.execute() is not None
        if hasattr(plan, "solve"):
            x = plan.solve(b)
            assert (x[0] if isinstance(x, tuple) else x).shape[0] == 40  # Lstsq: (x, residuals, rank, s)
        if isinstance(plan, (LU, Cholesky, Lstsq)):
            assert plan.execute() is plan  # the plan itself, not its stand-in
        ref = weakref.ref(plan)
        del plan
        assert ref() is None
    finally:
        if enabled:
            gc.enable()
