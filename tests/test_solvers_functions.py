"""The one-call solver functions of nvmathpy.linalg (NumPy / Array-API semantics), the
small-matrix batched fast paths, the plan cache, and hypothesis tests of the identities."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st
from test_solvers_helpers import DTYPES, LAYOUTS, herm, in_layout, rand, relerr, spd, tol, well, wide

import nvmathpy.linalg as nl
from nvmathpy.errors import InvalidOperandError, OperandMismatchError, PlanStateError
from nvmathpy.execution import ExecutionCPU
from nvmathpy.linalg.solvers import functions
from nvmathpy.linalg.solvers.cpu._small import closed_form, eliminate
from nvmathpy.linalg.solvers.plans.solve import Solve
from nvmathpy.plan import Candidate


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 16, 31, 67])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_solve_and_inv_match_numpy(dtype, n, layout):
    rng = np.random.default_rng(n)
    a = in_layout(well(rng, n, dtype), layout)
    b, bm = rand(rng, (n,), dtype), rand(rng, (n, 3), dtype)
    keep = a.copy(), b.copy()
    x = nl.solve(a, b)
    assert x.dtype == a.dtype and x.shape == (n,)
    assert relerr(x, np.linalg.solve(wide(a), wide(b))) < tol(dtype, n)
    assert relerr(nl.solve(a, bm), np.linalg.solve(wide(a), wide(bm))) < tol(dtype, n)
    assert relerr(nl.inv(a), np.linalg.inv(wide(a))) < tol(dtype, n)
    np.testing.assert_array_equal(a, keep[0])
    np.testing.assert_array_equal(b, keep[1])


@pytest.mark.parametrize("a_batch,b_shape", [((4,), (5,)), ((4,), (4, 5, 2)), ((), (3, 5, 2)), ((2, 1), (3, 5, 1))])
def test_solve_broadcasting_like_numpy(a_batch, b_shape):
    rng = np.random.default_rng(1)
    a = well(rng, 5, np.float64, a_batch)
    b = rand(rng, b_shape, np.float64)
    ref = np.linalg.solve(a, b)
    x = nl.solve(a, b)
    assert x.shape == ref.shape and relerr(x, ref) < 1e-12


def test_solve_mixed_and_integer_dtypes():
    a = np.array([[3, 1], [1, 2]])
    assert nl.solve(a, np.array([9, 8])).dtype == np.float64
    assert nl.solve(a.astype(np.float32), np.array([9, 8], np.float32)).dtype == np.float32
    assert nl.solve(a.astype(np.float32), np.array([9, 8], np.complex64)).dtype == np.complex64


def test_solve_singular_and_bad_shapes():
    with pytest.raises(np.linalg.LinAlgError, match="Singular"):
        nl.solve(np.ones((3, 3)), np.ones(3))
    for a in (np.ones((3, 4)), np.ones((2, 0, 1))):  # NumPy's LinAlgError, an InvalidOperandError too
        with pytest.raises(np.linalg.LinAlgError, match="square"):
            nl.solve(a, np.ones(a.shape[:-1]))
        with pytest.raises(InvalidOperandError, match="square"):
            nl.inv(a)
    with pytest.raises(InvalidOperandError, match="rows|n=3"):
        nl.solve(np.eye(3), np.ones(4))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("inverse", [False, True])
def test_every_batched_candidate_agrees_and_reports_singular_index(n, dtype, inverse):
    rng = np.random.default_rng(n)
    count = 40
    a = well(rng, n, dtype, (count,))
    a[17] = rand(rng, (n, n), dtype)
    tiny = 1e-3 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-9
    a[23] = tiny * a[23] + np.outer(np.arange(1, n + 1), np.ones(n))  # badly conditioned: falls back to LU
    b = None if inverse else rand(rng, (count, n, 2), dtype)
    ref = np.linalg.inv(wide(a)) if inverse else np.linalg.solve(wide(a), wide(b))
    plan = Solve(a, b)
    labels = []
    for cand in plan._engine.candidates(plan.problem):
        plan._install(plan._engine.prepare(plan.problem, cand), "test")
        labels.append(cand.label)
        out = plan.execute()
        good = np.ones(count, bool)
        good[23] = False
        assert relerr(out[good], ref[good]) < tol(dtype, n) * 10, cand
        cond = np.linalg.cond(wide(a[23]))
        assert relerr(out[23], ref[23]) < max(tol(dtype, n) * cond, 1e-6) * 10, cand
    assert "numpy" in labels and ("closed-form" in labels) == (n <= 4)
    singular = a.copy()
    singular[29] = 0
    for cand in plan._engine.candidates(plan.problem):
        plan._install(plan._engine.prepare(plan.problem, cand), "test")
        plan.reset_operands(a=singular)
        with pytest.raises(np.linalg.LinAlgError, match="batch element 29"):
            plan.execute()


def test_small_kernels_directly():
    rng = np.random.default_rng(0)
    for n in (2, 3, 4):
        m = well(rng, n, np.complex128, (10,))
        x, flagged = closed_form(m, None)
        assert not flagged.any() and relerr(x, np.linalg.inv(m)) < 1e-13
    a = well(rng, 3, np.float64, (10,))
    b = rand(rng, (10, 3, 1), np.float64)
    x, flagged = closed_form(a, b)
    assert not flagged.any() and relerr(x, np.linalg.solve(a, b)) < 1e-13
    x, flagged = eliminate(a, b)
    assert not flagged.any() and relerr(x, np.linalg.solve(a, b)) < 1e-13
    a[4] = 0
    assert closed_form(a, b)[1][4] and eliminate(a, b)[1][4]
    a[5, 0, 0] = np.nan
    assert closed_form(a, b)[1][5] and eliminate(a, b)[1][5]


_EXTREME_SCALES = [(np.float64, 1e-150), (np.float64, 1e150), (np.float32, 1e-20), (np.float32, 1e20)]


def _scaled_relerr(x, ref) -> float:
    """``relerr`` after dividing both by ``max|ref|`` (the norms of 1e150-sized results overflow)."""
    top = np.abs(ref).max()
    return relerr(np.asarray(x) / top, ref / top)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype,scale", _EXTREME_SCALES)
@pytest.mark.parametrize("inverse", [False, True])
def test_small_kernel_and_solve_at_extreme_scales(n, dtype, scale, inverse):
    """Well-conditioned matrices with tiny or huge entries: the adjugate path must neither
    underflow nor overflow (no flag, no warning) and agree with NumPy in double precision."""
    rng = np.random.default_rng(n)
    a = (well(rng, n, np.float64, (40,)) * scale).astype(dtype)
    b = None if inverse else rand(rng, (40, n, 2), dtype)
    ref = np.linalg.inv(wide(a)) if inverse else np.linalg.solve(wide(a), wide(b))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x, flagged = closed_form(a, b)
        assert not flagged.any()
        assert _scaled_relerr(x, ref) < tol(dtype, n) * 10
        out = nl.inv(a) if inverse else nl.solve(a, b)
    assert _scaled_relerr(out, ref) < tol(dtype, n) * 10
    singular = a.copy()
    singular[7, -1] = 0  # a zero row: exactly singular at any scale
    with pytest.raises(np.linalg.LinAlgError, match="batch element 7"):
        nl.inv(singular) if inverse else nl.solve(singular, b)


def test_small_kernel_flags_non_finite_results():
    a = well(np.random.default_rng(5), 3, np.float64, (6,))
    b = rand(np.random.default_rng(6), (6, 3, 1), np.float64)
    b[2, 0, 0] = np.inf
    a[4] *= 1e-320  # subnormal entries: the scale factor itself overflows
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flagged = closed_form(a, b)[1]
    assert flagged.tolist() == [False, False, True, False, True, False]


@pytest.mark.parametrize("dtype", DTYPES)
def test_det_slogdet(dtype):
    rng = np.random.default_rng(2)
    a = well(rng, 6, dtype, (3,))
    assert relerr(nl.det(a), np.linalg.det(wide(a))) < tol(dtype, 6) * 10
    sign, logabs = nl.slogdet(a)
    rs, rl = np.linalg.slogdet(wide(a))
    assert relerr(sign, rs) < tol(dtype, 6) * 10 and relerr(logabs, rl) < tol(dtype, 6) * 10
    assert nl.det(np.zeros((3, 3), dtype)) == 0
    assert nl.slogdet(np.zeros((3, 3), dtype)).logabsdet == -np.inf


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_function(dtype, upper):
    a = spd(np.random.default_rng(3), 11, dtype, (2,))
    ref = np.linalg.cholesky(wide(a), upper=upper)
    assert relerr(nl.cholesky(a, upper=upper), ref) < tol(dtype, 11)
    with pytest.raises(np.linalg.LinAlgError, match="batch element 1"):
        nl.cholesky(np.stack([np.eye(3), -np.eye(3)]))


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_function(mode):
    a = rand(np.random.default_rng(4), (2, 7, 5), np.float64)
    out = nl.qr(a, mode=mode)
    ref = np.linalg.qr(a, mode=mode)
    if mode == "r":
        assert out.shape == ref.shape and relerr(np.abs(out), np.abs(ref)) < 1e-12
    else:
        q, r = out
        assert q.shape == ref.Q.shape and r.shape == ref.R.shape and relerr(q @ r, a) < 1e-12
        assert out.Q is q


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7, 5), (2, 5, 7), (3, 1, 4, 4), (3, 0), (0, 4), (2, 0, 0), (0, 3, 2)])
def test_qr_raw_is_numpys(dtype, shape):
    """mode "raw": LAPACK's Householder factors ``(h, tau)`` as NumPy returns them (same geqrf:
    the same signs), ``h`` transposed; empty shapes and batches too."""
    a = rand(np.random.default_rng(6), shape, dtype)
    ref = np.linalg.qr(wide(a), mode="raw")
    h, tau = nl.qr(in_layout(a, "F"), mode="raw")
    assert h.shape == ref[0].shape and tau.shape == ref[1].shape and h.dtype == tau.dtype == a.dtype
    if h.size:
        assert relerr(h, ref[0]) < tol(dtype, 7) and relerr(tau, ref[1]) < tol(dtype, 7)


class _Sub(np.ndarray):
    pass


@pytest.mark.parametrize("k", [2, 0, None])  # None: b is one vector
@pytest.mark.parametrize("n", [5, 0])
def test_solve_and_inv_keep_the_operands_subclass(k, n):
    """As NumPy's: solve's result has ``b``'s ndarray subclass, inv's ``a``'s (empty ones too)."""
    rng = np.random.default_rng(11)
    a = well(rng, n, np.float64, (3,))
    b = rng.standard_normal((n,) if k is None else (3, n, k))
    x = nl.solve(a, b.view(_Sub))
    assert type(x) is _Sub and x.shape == np.linalg.solve(a, b).shape
    if x.size:
        assert relerr(np.asarray(x), np.linalg.solve(a, b)) < 1e-12
    assert type(nl.inv(a.view(_Sub))) is _Sub and type(nl.inv(a)) is np.ndarray


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uplo", ["L", "U", "l", "u"])
def test_eigh_eigvalsh(dtype, uplo):
    a = herm(np.random.default_rng(5), 9, dtype, (2,))
    ref = np.linalg.eigvalsh(wide(a), UPLO=uplo)
    w, v = nl.eigh(a, UPLO=uplo)
    assert relerr(w, ref) < tol(dtype, 9) * 10
    assert relerr(wide(a) @ v, v * w[..., None, :]) < tol(dtype, 9) * 10
    assert relerr(nl.eigvalsh(a, UPLO=uplo), ref) < tol(dtype, 9) * 10
    assert nl.eigh(a).eigenvalues.shape == (2, 9)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 7, 33, 64, 65])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("uplo", ["L", "u"])
def test_eigh_one_matrix_direct_path(dtype, n, layout, uplo, monkeypatch):
    """One small NumPy matrix runs ?syevd/?heevd without a plan (order <= DIRECT_UP_TO; 65 takes
    the plan): only triangle ``uplo`` is read, the results equal NumPy's, a float64 reference
    and the plan path's to rounding, and the caller's matrix is untouched."""
    rng = np.random.default_rng(n)
    x = rand(rng, (n, n), dtype)
    x[np.diag_indices(n)] = x.diagonal().real
    a = in_layout(x, layout)  # not Hermitian: the other triangle is ignored
    keep = a.copy()
    ref = np.linalg.eigvalsh(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64), UPLO=uplo)
    full = np.tril(a) if uplo in "Ll" else np.triu(a)
    full = wide(full + np.conj(np.tril(full, -1) if uplo in "Ll" else np.triu(full, 1)).T)
    w, v = nl.eigh(a, UPLO=uplo)
    assert w.dtype == np.linalg.eigvalsh(a).dtype and v.dtype == a.dtype and type(w) is np.ndarray
    assert relerr(w, ref) < tol(dtype, n) * 10
    assert relerr(w, np.linalg.eigh(a, UPLO=uplo).eigenvalues) < tol(dtype, n) * 10
    assert relerr(full @ v, v * w) < tol(dtype, n) * 10
    assert relerr(nl.eigvalsh(a, UPLO=uplo), ref) < tol(dtype, n) * 10
    monkeypatch.setattr(functions, "DIRECT_UP_TO", 0)  # the plan path, for comparison
    assert relerr(w, nl.eigvalsh(a, UPLO=uplo)) < tol(dtype, n) * 10
    np.testing.assert_array_equal(a, keep)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (7, 3), (3, 7), (33, 33), (64, 5), (65, 9)])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_svdvals_one_matrix_direct_path(dtype, shape, layout, monkeypatch):
    """One small NumPy matrix's singular values come from ?gesdd without a plan (65 rows take
    the plan); they equal NumPy's, a float64 reference's and the plan path's to rounding."""
    a = in_layout(rand(np.random.default_rng(shape[0]), shape, dtype), layout)
    keep = a.copy()
    s = nl.svdvals(a)
    assert s.dtype == np.linalg.svd(a, compute_uv=False).dtype
    assert relerr(s, np.linalg.svd(wide(a), compute_uv=False)) < tol(dtype, max(shape)) * 10
    assert relerr(nl.svd(a, compute_uv=False), np.linalg.svd(a, compute_uv=False)) < tol(dtype, max(shape)) * 10
    monkeypatch.setattr(functions, "DIRECT_UP_TO", 0)
    assert relerr(s, nl.svdvals(a)) < tol(dtype, max(shape)) * 10
    np.testing.assert_array_equal(a, keep)


def test_eigh_one_matrix_direct_path_nan_raises():
    with pytest.raises(np.linalg.LinAlgError):
        nl.eigvalsh(np.full((4, 4), np.nan))


@pytest.mark.parametrize("full", [True, False])
def test_svd_svdvals(full):
    a = rand(np.random.default_rng(6), (3, 8, 5), np.complex128)
    ref = np.linalg.svd(a, full_matrices=full)
    u, s, vh = nl.svd(a, full_matrices=full)
    assert u.shape == ref.U.shape and vh.shape == ref.Vh.shape and relerr(s, ref.S) < 1e-12
    assert relerr(nl.svdvals(a), ref.S) < 1e-12
    assert relerr(nl.svd(a, compute_uv=False), ref.S) < 1e-12


@pytest.mark.parametrize("shape", [(9, 4), (4, 9)])
def test_lstsq_function(shape):
    rng = np.random.default_rng(7)
    a, b = rand(rng, shape, np.float64), rand(rng, (shape[0],), np.float64)
    x, res, rank, s = nl.lstsq(a, b)
    rx, rres, rrank, rs = np.linalg.lstsq(a, b, rcond=None)
    assert relerr(x, rx) < 1e-12 and rank == rrank and relerr(s, rs) < 1e-12 and res.shape == rres.shape


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [0, 1, 2, "N", "T", "C"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_solve_triangular(dtype, lower, trans, layout):
    rng = np.random.default_rng(8)
    t = well(rng, 6, dtype)
    t = np.tril(t) if lower else np.triu(t)
    a = in_layout(t, layout)
    b = rand(rng, (6, 2), dtype)
    op = {0: t, 1: t.T, 2: t.conj().T}[{"N": 0, "T": 1, "C": 2}.get(trans, trans)]
    x = nl.solve_triangular(a, b, lower=lower, trans=trans)
    assert relerr(x, np.linalg.solve(wide(op), wide(b))) < tol(dtype, 6)
    unit = t.copy()
    np.fill_diagonal(unit, 1)
    x = nl.solve_triangular(in_layout(t, layout), b, lower=lower, unit_diagonal=True)
    assert relerr(x, np.linalg.solve(wide(unit), wide(b))) < tol(dtype, 6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_lu_factor_solve_and_cho(dtype, layout):
    rng = np.random.default_rng(9)
    a = in_layout(well(rng, 7, dtype, (2,)), layout)
    lu, piv = nl.lu_factor(a)
    for i in range(2):
        rlu, rpiv = sla.lu_factor(a[i])
        np.testing.assert_array_equal(piv[i], rpiv)
        assert relerr(lu[i], rlu) < tol(dtype, 7)
    b = rand(rng, (2, 7, 3), dtype)
    for trans, op in ((0, a), (1, np.swapaxes(a, -1, -2)), (2, np.conj(np.swapaxes(a, -1, -2)))):
        assert relerr(nl.lu_solve((lu, piv), b, trans=trans), np.linalg.solve(wide(op), wide(b))) < tol(dtype, 7)
    s = in_layout(spd(rng, 7, dtype, (2,)), layout)
    for lower in (False, True):
        c = nl.cho_factor(s, lower=lower)
        assert c[1] is lower
        assert relerr(nl.cho_solve(c, b), np.linalg.solve(wide(s), wide(b))) < tol(dtype, 7) * 10


def test_empty_and_one_by_one():
    assert nl.solve(np.empty((0, 0)), np.empty(0)).shape == (0,)
    assert nl.inv(np.empty((2, 0, 0))).shape == (2, 0, 0)
    assert nl.det(np.empty((0, 0))) == 1.0
    assert nl.solve(np.array([[4.0]]), np.array([2.0]))[0] == 0.5
    assert nl.inv(np.full((5, 1, 1), 2.0)).ravel().tolist() == [0.5] * 5
    assert nl.svd(np.empty((0, 3))).S.shape == (0,)
    assert nl.eigh(np.array([[3.0]])).eigenvalues.tolist() == [3.0]
    assert nl.LU(np.empty((0, 0))).solve(np.empty(0)).shape == (0,)
    assert nl.Cholesky(np.empty((2, 0, 0))).solve(np.empty((2, 0, 1))).shape == (2, 0, 1)
    assert nl.solve_triangular(np.empty((0, 0)), np.empty(0)).shape == (0,)
    assert nl.lu_factor(np.empty((0, 0)))[1].shape == (0,)


def test_plan_cache_hits_and_resize():
    cache = functions.plan_cache()
    cache.clear()
    a = well(np.random.default_rng(0), 5, np.float64, (3,))
    for _ in range(4):
        nl.inv(a)
    assert cache.hits >= 3
    cache.resize(0)
    nl.inv(a)
    assert len(cache) == 0
    cache.resize(64)


def test_run_cached_frees_a_plan_whose_swap_fails():
    cache = functions.plan_cache()
    cache.clear()
    a = well(np.random.default_rng(0), 3, np.float64)
    plans = []

    def build():
        plans.append(nl.LU(a))
        return plans[-1]

    def failing_swap(plan):
        raise OperandMismatchError("swap failed")

    key = ("test-run-cached",)
    functions.run_cached(key, build, lambda p: None, lambda p: p.execute())
    assert len(cache) == 1
    with pytest.raises(OperandMismatchError, match="swap failed"):
        functions.run_cached(key, build, failing_swap, lambda p: p.execute())
    assert len(cache) == 0 and len(plans) == 1
    with pytest.raises(PlanStateError):
        plans[0].execute()


def _blas_threads() -> list[int]:
    """Threads of the BLAS libraries the solvers call (NumPy's and SciPy's); other BLAS a test
    session may have loaded (MKL through mkl_fft, torch's) are not used by them."""
    from nvmathpy.linalg.gemm.cpu._threads import BLAS_THREADS

    return [lib.get_num_threads() for lib in BLAS_THREADS.prepare()]


def test_num_threads_limits_blas_in_plans_and_one_calls():
    default = _blas_threads()
    threads = 1 if max(default) > 1 else 2
    space = ExecutionCPU(num_threads=threads)
    rng = np.random.default_rng(1)
    a = well(rng, 5, np.float64, (3,))
    b = rand(rng, (3, 5, 2), np.float64)
    seen = []

    class ProbeLU(nl.LU):
        def _bind(self, prepared):
            run = super()._bind(prepared)

            def probe():
                seen.append(_blas_threads())
                return run()

            return probe

    plan = ProbeLU(a, execution=space).plan()
    assert plan.problem.get("num_threads") == threads and nl.LU(a).problem.get("num_threads") is None
    plan.execute()
    plan.autotune(effort="exhaustive", repeats=1, force=True)
    assert seen and all(set(t) == {threads} for t in seen)
    assert relerr(plan.solve(b), np.linalg.solve(a, b)) < 1e-12
    assert _blas_threads() == default
    cache = functions.plan_cache()
    cache.clear()
    inside = functions.run_cached(("probe",), lambda: nl.LU(a), lambda p: None, lambda p: _blas_threads(),
                                  execution=space)
    assert set(inside) == {threads} and _blas_threads() == default
    assert relerr(nl.solve(a, b, execution=space), np.linalg.solve(a, b)) < 1e-12
    nl.det(a)
    nl.det(a, execution=space)
    assert cache.hits == 0  # the thread limit is part of the one-call cache key
    assert relerr(nl.det(a, execution={"name": "cpu", "num_threads": threads}), np.linalg.det(a)) < 1e-12
    assert cache.hits == 1 and _blas_threads() == default


def test_torch_one_calls():
    torch = pytest.importorskip("torch")
    a = torch.from_numpy(spd(np.random.default_rng(0), 4, np.float64))
    b = torch.ones(4, dtype=torch.float64)
    for out in (nl.solve(a, b), nl.inv(a), nl.cholesky(a), nl.eigh(a).eigenvectors, nl.svd(a).U):
        assert isinstance(out, torch.Tensor)
    assert torch.allclose(a @ nl.solve(a, b), b)
    for out in (nl.lu_solve(nl.lu_factor(a), b), nl.cho_solve(nl.cho_factor(a), b),
                nl.solve_triangular(a, b), nl.lstsq(a, b)[0]):
        assert isinstance(out, torch.Tensor), type(out)


# -- empty batches, mixed dtypes, least squares on a batch -----------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_batches_give_empty_results_of_numpys_shapes_and_dtypes(dtype):
    a = np.zeros((0, 3, 3), dtype)
    real = np.finfo(dtype).dtype
    checks = [
        (nl.cholesky(a), np.linalg.cholesky(a)),
        (nl.eigvalsh(a), np.linalg.eigvalsh(a)),
        (nl.svdvals(a), np.linalg.svd(a, compute_uv=False)),
        (nl.lu_factor(a)[0], a), (nl.lu_factor(a)[1], np.zeros((0, 3), np.int32)),
        (nl.cho_factor(a)[0], a),
    ]
    checks += list(zip(nl.eigh(a), np.linalg.eigh(a)))
    checks += list(zip(nl.svd(a), np.linalg.svd(a)))
    checks += list(zip(nl.qr(a), np.linalg.qr(a)))
    for ours, numpys in checks:
        assert ours.shape == numpys.shape and ours.dtype == numpys.dtype, (ours.shape, ours.dtype, numpys.dtype)
    wide_a = np.zeros((0, 5, 3), dtype)
    x, res, rank, s = nl.Lstsq(wide_a).solve(np.zeros((0, 5, 2), dtype))
    assert x.shape == (0, 3, 2) and x.dtype == dtype and rank.shape == (0,) and s.shape == (0, 3) and s.dtype == real
    assert nl.QR(wide_a).solve(np.zeros((0, 5, 2), dtype)).shape == (0, 3, 2)


def test_zero_order_factors_solve_to_empty_results():
    assert nl.lu_solve(nl.lu_factor(np.zeros((0, 0))), np.zeros(0)).shape == (0,)
    assert nl.lu_solve(nl.lu_factor(np.zeros((2, 0, 0))), np.zeros((2, 0, 3))).shape == (2, 0, 3)


@pytest.mark.parametrize("m, n", [(6, 4), (3, 1), (5, 5)])
def test_batched_qr_solve_returns_n_rows(m, n):
    rng = np.random.default_rng(m * 10 + n)
    a, b, vec = rand(rng, (2, m, n), "float64"), rand(rng, (2, m, 3), "float64"), rand(rng, (m,), "float64")
    plan = nl.QR(a)
    x = plan.solve(b)
    assert x.shape == (2, n, 3)
    for i in range(2):
        assert relerr(x[i], np.linalg.lstsq(a[i], b[i], rcond=None)[0]) < 1e-12
    assert relerr(plan.solve(vec), np.stack([np.linalg.lstsq(a[i], vec, rcond=None)[0] for i in range(2)])) < 1e-12


@pytest.mark.parametrize("a_dtype, b_dtype", [("float32", "float64"), ("float64", "complex128"),
                                              ("complex64", "float64"), ("float32", "complex64")])
def test_one_calls_with_a_right_hand_side_promote_as_numpy_and_scipy(a_dtype, b_dtype):
    rng = np.random.default_rng(3)
    n = 5
    a, b = well(rng, n, a_dtype), rand(rng, (n, 2), b_dtype)
    s, t = spd(rng, n, a_dtype), np.triu(well(rng, n, a_dtype))
    expected = np.result_type(a_dtype, b_dtype)
    keep = a.copy(), b.copy()
    pairs = [
        (nl.lstsq(a, b)[0], np.linalg.lstsq(a, b, rcond=None)[0]),
        (nl.solve_triangular(t, b), sla.solve_triangular(t, b)),
        (nl.lu_solve(nl.lu_factor(a), b), sla.lu_solve(sla.lu_factor(a), b)),
        (nl.cho_solve(nl.cho_factor(s), b), sla.cho_solve(sla.cho_factor(s), b)),
    ]
    for ours, reference in pairs:
        assert ours.dtype == expected == reference.dtype
        assert relerr(ours, reference) < tol(a_dtype, n)
    np.testing.assert_array_equal(a, keep[0])
    np.testing.assert_array_equal(b, keep[1])
    assert isinstance(nl.lstsq(a, b)[2], np.int32)


def test_lu_factors_refuse_when_a_holds_its_transposes_factors():
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 10.0]])
    keep = a.copy()
    plan = nl.LU(a, overwrite_a=True)
    plan.plan()
    plan.execute()
    assert relerr(plan.solve(np.ones(3)), np.linalg.solve(keep, np.ones(3))) < 1e-13
    assert abs(plan.det() - np.linalg.det(keep)) < 1e-12
    with pytest.raises(InvalidOperandError, match="overwrite_a"):
        plan.factors
    f = np.asfortranarray(keep)
    plan = nl.LU(f, overwrite_a=True)
    plan.plan()
    lu, piv = plan.execute().factors
    ref_lu, ref_piv = sla.lu_factor(keep)
    np.testing.assert_array_equal(piv, ref_piv)
    assert relerr(lu, ref_lu) < 1e-13


# -- hypothesis: the identities -------------------------------------------------------------------

_sizes = st.integers(min_value=1, max_value=12)
_seeds = st.integers(min_value=0, max_value=2**32 - 1)
_dtypes = st.sampled_from(DTYPES)


@settings(max_examples=40, deadline=None)
@given(n=_sizes, seed=_seeds, dtype=_dtypes, batch=st.sampled_from([(), (3,)]))
def test_property_solve(n, seed, dtype, batch):
    rng = np.random.default_rng(seed)
    a, b = well(rng, n, dtype, batch), rand(rng, batch + (n, 2), dtype)
    x = nl.solve(a, b)
    assert relerr(wide(a) @ x, b) < tol(dtype, n) * 10


@settings(max_examples=40, deadline=None)
@given(n=_sizes, seed=_seeds, dtype=_dtypes)
def test_property_eigh(n, seed, dtype):
    a = herm(np.random.default_rng(seed), n, dtype)
    w, v = nl.eigh(a)
    scale = max(1.0, float(np.abs(w).max()))
    assert np.linalg.norm(wide(a) @ v - v * w) / scale < tol(dtype, n) * 10 * np.sqrt(n)
    assert np.all(np.diff(w) >= 0)


@settings(max_examples=40, deadline=None)
@given(m=_sizes, n=_sizes, seed=_seeds, dtype=_dtypes)
def test_property_svd(m, n, seed, dtype):
    a = rand(np.random.default_rng(seed), (m, n), dtype)
    u, s, vh = nl.svd(a, full_matrices=False)
    assert relerr((u * s) @ vh, a) < tol(dtype, m * n) * 10


@settings(max_examples=40, deadline=None)
@given(m=_sizes, n=_sizes, seed=_seeds, dtype=_dtypes)
def test_property_lstsq_normal_equations(m, n, seed, dtype):
    rng = np.random.default_rng(seed)
    a, b = rand(rng, (m + n, n), dtype), rand(rng, (m + n,), dtype)
    x = nl.lstsq(a, b)[0]
    grad = wide(a).conj().T @ (wide(a) @ x - b)
    assert np.linalg.norm(grad) <= tol(dtype, m * n) * 100 * np.linalg.norm(a) ** 2 * np.linalg.norm(b)


def test_vectorised_paths_in_chunks(monkeypatch):
    from nvmathpy.linalg.solvers.plans import solve as solve_plan

    monkeypatch.setattr(solve_plan, "CHUNK", 7)
    rng = np.random.default_rng(5)
    a = well(rng, 3, np.float64, (30,))
    b = rand(rng, (30, 3, 2), np.float64)
    a[22] = 0
    plan = Solve(a, b)
    for label in ("closed-form", "elimination"):
        plan._install(plan._engine.prepare(plan.problem, Candidate.of(label)), "test")
        with pytest.raises(np.linalg.LinAlgError, match="batch element 22"):
            plan.execute()
    a[22] = np.eye(3)
    plan.reset_operands(a=a)
    assert relerr(plan.execute(), np.linalg.solve(a, b)) < 1e-12


@pytest.mark.parametrize("layout", LAYOUTS)
def test_solve_numpy_fast_path_batched(layout):
    """The key-from-attributes path of ``solve`` (NumPy batches of a and b with one batch
    shape): every layout, a miss then a cache hit, inputs untouched, singular elements named;
    other shapes keep NumPy's broadcasting rules."""
    rng = np.random.default_rng(11)
    for n in (3, 4, 9):
        a = in_layout(well(rng, n, np.float64, (5, 6)), layout)
        b = in_layout(rand(rng, (5, 6, n, 2), np.float64), layout)
        keep = a.copy(), b.copy()
        for _ in range(2):
            assert relerr(nl.solve(a, b), np.linalg.solve(a, b)) < 1e-12
        np.testing.assert_array_equal(a, keep[0])
        np.testing.assert_array_equal(b, keep[1])
        singular = a.copy()
        singular[3, 4] = 0
        with pytest.raises(np.linalg.LinAlgError, match=r"batch element \(3, 4\)"):
            nl.solve(singular, b)
        vector = rand(rng, (n,), np.float64)
        assert relerr(nl.solve(a, vector), np.linalg.solve(a, vector)) < 1e-12
        shared = b[:1, :1]
        assert relerr(nl.solve(a, shared), np.linalg.solve(a, shared)) < 1e-12


@pytest.mark.parametrize("n", [2, 3, 4])
def test_one_call_inverse_and_solve_in_chunks(monkeypatch, n):
    """Batches larger than a chunk: the closed forms write each chunk into the result and a
    singular matrix past the first chunk is named by its batch index."""
    from nvmathpy.linalg.solvers.plans import solve as solve_plan

    monkeypatch.setattr(solve_plan, "CHUNK", 8)
    rng = np.random.default_rng(n)
    a = well(rng, n, np.float64, (37,))
    b = rand(rng, (37, n, 3), np.float64)
    assert relerr(nl.inv(a), np.linalg.inv(a)) < 1e-12
    assert relerr(nl.solve(a, b), np.linalg.solve(a, b)) < 1e-12
    a[33, 1] = 0
    for call in (lambda: nl.inv(a), lambda: nl.solve(a, b)):
        with pytest.raises(np.linalg.LinAlgError, match="batch element 33"):
            call()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("layout", ["C", "F", "transposed"])
def test_inv_fast_path_layouts_batches_and_singular_members(dtype, layout):
    import weakref

    from nvmathpy.errors import LinAlgError

    rng = np.random.default_rng(11)
    for batch in ((), (3,)):
        a = well(rng, 7, dtype, batch)
        a = {"C": a, "F": np.asfortranarray(a) if not batch else a, "transposed": np.swapaxes(a, -1, -2)}[layout]
        got = nl.inv(a)
        assert got.dtype == a.dtype and relerr(got, np.linalg.inv(wide(a))) < 1e2 * tol(dtype)
        ref = weakref.ref(a)
        del a
        assert ref() is None  # the cached plan keeps no reference to the caller's array
    singular = well(rng, 4, dtype, (3,))
    singular[1] = 0
    with pytest.raises(LinAlgError, match="batch element 1"):
        nl.inv(singular)


def test_small_determinants_are_numpys_and_large_ones_run_the_lu_plan():
    rng = np.random.default_rng(12)
    small = rng.standard_normal((5, 9, 9))
    assert np.array_equal(nl.det(small), np.linalg.det(small))  # NumPy's own gufunc: the same numbers
    sign, logabs = nl.slogdet(small)
    ref_sign, ref_logabs = np.linalg.slogdet(small)
    assert np.array_equal(sign, ref_sign) and np.array_equal(logabs, ref_logabs)
    cache = functions.plan_cache()
    cache.clear()
    big = np.eye(300) + 0.01 * rng.standard_normal((300, 300))  # a determinant that does not overflow
    assert abs(nl.det(big) / np.linalg.det(big) - 1) < 1e-10
    nl.det(big)
    assert cache.hits == 1  # the plan path, from the plan cache the second time
    assert abs(nl.slogdet(big)[1] - np.linalg.slogdet(big)[1]) < 1e-10 * abs(np.linalg.slogdet(big)[1])


# -- the options the scipy.linalg layer needs, on the public functions ---------------------------


def test_eigh_generalized_subsets_and_driver_match_scipy():
    rng = np.random.default_rng(7)
    a, b = herm(rng, 6, np.float64), spd(rng, 6, np.float64)
    w, v = nl.eigh(a, b=b)
    np.testing.assert_allclose(w, sla.eigh(a, b, eigvals_only=True), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a @ v, b @ v * w, atol=1e-9)
    w3 = nl.eigvalsh(a, "U", b=b, itype=3, driver="gvd")
    np.testing.assert_allclose(w3, sla.eigh(a, b, lower=False, type=3, eigvals_only=True), rtol=1e-10, atol=1e-12)
    full = sla.eigh(a, eigvals_only=True)
    np.testing.assert_allclose(nl.eigh(a, subset_by_index=[1, 3]).eigenvalues, full[1:4], rtol=1e-10, atol=1e-12)
    lo, hi = (full[1] + full[2]) / 2, (full[4] + full[5]) / 2
    np.testing.assert_allclose(nl.eigvalsh(a, subset_by_value=(lo, hi), driver="evr"), full[2:5], rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_allclose(nl.eigvalsh(a, driver="ev"), full, rtol=1e-10, atol=1e-12)


def test_svd_driver_is_forced_and_checked():
    rng = np.random.default_rng(8)
    a = rng.standard_normal((5, 3))
    u, s, vh = nl.svd(a, full_matrices=False, driver="gesvd")
    np.testing.assert_allclose(s, sla.svd(a, compute_uv=False), rtol=1e-12)
    np.testing.assert_allclose(u * s @ vh, a, atol=1e-12)
    with pytest.raises(ValueError, match="driver"):
        nl.svd(a, driver="gesvj")


def test_cuda_functions_refuse_the_cpu_only_options_by_name():
    from nvmathpy.errors import InvalidOptionError
    from nvmathpy.linalg.solvers.cuda import _functions as cuda_functions

    eye = np.eye(2)
    for call, option in ((lambda: cuda_functions.eigh(eye, b=eye), "b="),
                         (lambda: cuda_functions.eigvalsh(eye, subset_by_index=(0, 0)), "subset_by_index="),
                         (lambda: cuda_functions.eigh(eye, itype=2), "itype="),
                         (lambda: cuda_functions.svd(eye, driver="gesvd"), "driver=")):
        with pytest.raises(InvalidOptionError, match=option):
            call()


def test_lapack_routines_are_the_engines():
    """SciPy's below the calibrated orders, from there on the solvers' engine's choice."""
    from scipy.linalg.lapack import get_lapack_funcs

    from nvmathpy.linalg.lapack import SCIPY_BELOW, routines
    from nvmathpy.linalg.solvers.cpu._numpy_algorithms import for_order

    d = np.dtype(np.float64)
    assert routines(d, 4, "getrf", "potrs") == tuple(get_lapack_funcs(("getrf", "potrs"), dtype=d))
    for n in (4, 300, 1500, 2600):
        found = for_order(n, d, "getrf", "getrs") if n >= SCIPY_BELOW else None
        expected = found or tuple(get_lapack_funcs(("getrf", "getrs"), dtype=d))
        got = routines(d, n, "getrf", "getrs")
        assert [getattr(f, "__name__", f) for f in got] == [getattr(f, "__name__", f) for f in expected]
        a = well(np.random.default_rng(n), n, np.float64)
        lu, piv, info = got[0](np.asfortranarray(a))
        x = got[1](lu, piv, np.ones(n))[0]
        assert info == 0 and relerr(a @ x, np.ones(n)) < 1e-10
