"""The cuSOLVER engine of the solver plans on a GPU, against float64 NumPy/SciPy references.

LU / Cholesky / Eigh / SVD / QR / Lstsq plans and the one-call functions on CuPy arrays (C, F,
strided layouts; batches; every LAPACK dtype), the batched small-matrix routes, singular and
non-positive-definite matrices reported by batch index, autotune among the routes, torch CUDA
operands (results on the caller's device and package) and an explicit stream.

Under the host emulation (``-p cuda_emulation``, see tests/test_cuda_matmul_engine.py) this
module installs the cuSOLVER part of the emulation (tests/cuda_emulation_solvers.py) too, so its
logic is checked on machines without a GPU; the stream and torch tests need a real device.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import scipy.linalg as sla

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")

if type(cupy).__name__ == "module" and getattr(cupy.ndarray, "__name__", "") == "HostArray":  # host emulation
    from cuda_emulation_solvers import install

    install(setattr, lambda mapping, key, value: mapping.__setitem__(key, value))
    cupy = sys.modules["cupy"]

import nvmathpy.linalg as nl  # noqa: E402
from nvmathpy.errors import LinAlgError  # noqa: E402

DTYPES = ["float32", "float64", "complex64", "complex128"]
TOL = {"float32": 3e-4, "complex64": 3e-4, "float64": 1e-10, "complex128": 1e-10}


def up(x):
    x = cupy.asnumpy(x) if isinstance(x, cupy.ndarray) else np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def rel(x, ref):
    x, ref = up(x), up(ref)
    assert x.shape == ref.shape, (x.shape, ref.shape)
    assert np.isfinite(x).all()
    return np.linalg.norm((x - ref).ravel()) / max(np.linalg.norm(ref.ravel()), 1e-300)


def host_rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def pair(host, layout):
    """``host`` and the same matrices on the device in ``layout`` ("C", "F" per matrix, "strided")."""
    if layout == "F":
        device = cupy.asarray(np.ascontiguousarray(np.swapaxes(host, -1, -2))).swapaxes(-1, -2)
    elif layout == "strided":
        wide = np.repeat(host, 2, axis=-1)
        device = cupy.asarray(wide)[..., ::2]
    else:
        device = cupy.asarray(host)
    return host, device


def hpd(rng, shape, dtype):
    g = host_rand(rng, shape, dtype)
    n = shape[-1]
    return (g @ np.swapaxes(g.conj(), -1, -2) + n * np.eye(n)).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
@pytest.mark.parametrize("shape", [(1, 1), (13, 13), (3, 9, 9), (2, 3, 31, 31), (200, 8, 8)])
def test_lu_plan(dtype, layout, shape):
    rng = np.random.default_rng(1)
    a, da = pair(host_rand(rng, shape, dtype), layout)
    lu = nl.LU(da)
    for trans in (0, 1, 2):
        b = host_rand(rng, shape[:-1] + (3,), dtype)
        x = lu.solve(cupy.asarray(b), trans=trans)
        assert isinstance(x, cupy.ndarray)
        op = {0: a, 1: np.swapaxes(a, -1, -2), 2: np.swapaxes(a.conj(), -1, -2)}[trans]
        assert rel(x, np.linalg.solve(up(op), up(b))) < TOL[dtype] * shape[-1]
    assert lu.factorizations == 1
    lu.check()
    assert rel(lu.det(), np.linalg.det(up(a))) < TOL[dtype] * 10 * shape[-1]


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_factors_match_scipy(dtype):
    rng = np.random.default_rng(2)
    a = host_rand(rng, (17, 17), dtype)
    lu, piv = nl.lu_factor(cupy.asarray(a))
    ref_lu, ref_piv = sla.lu_factor(a)
    assert rel(lu, ref_lu) < TOL[dtype] * 10
    np.testing.assert_array_equal(cupy.asnumpy(piv), ref_piv)
    b = host_rand(rng, (17, 2), dtype)
    assert rel(nl.lu_solve((lu, piv), cupy.asarray(b), trans=2), sla.lu_solve((ref_lu, ref_piv), b, trans=2)) < \
        TOL[dtype] * 100


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [((33, 33), (33,)), ((5, 33, 33), (5, 33, 4)), ((1000, 8, 8), (1000, 8, 1)),
                                    ((2, 1, 9, 9), (3, 9, 2))])
def test_solve_inv_det_functions(dtype, shapes):
    rng = np.random.default_rng(3)
    a = host_rand(rng, shapes[0], dtype) + 4 * np.eye(shapes[0][-1], dtype=dtype)
    b = host_rand(rng, shapes[1], dtype)
    tol = TOL[dtype] * 30
    assert rel(nl.solve(cupy.asarray(a), cupy.asarray(b)), np.linalg.solve(up(a), up(b))) < tol
    assert rel(nl.inv(cupy.asarray(a)), np.linalg.inv(up(a))) < tol
    assert rel(nl.det(cupy.asarray(a)), np.linalg.det(up(a))) < tol


def test_singular_and_non_spd_matrices_are_reported_by_batch_index():
    a = np.stack([np.eye(4), np.ones((4, 4)), np.eye(4)])
    with pytest.raises(LinAlgError, match=r"batch element 1"):
        nl.solve(cupy.asarray(a), cupy.asarray(np.ones((3, 4, 1))))
    lu = nl.LU(cupy.asarray(a))
    assert lu.singular == [1]
    spd = np.stack([np.eye(4), np.eye(4), -np.eye(4)])
    with pytest.raises(LinAlgError, match=r"not positive definite \(batch element 2\)"):
        nl.cholesky(cupy.asarray(spd))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("shape", [(23, 23), (64, 6, 6), (4, 40, 40)])
def test_cholesky(dtype, layout, lower, shape):
    rng = np.random.default_rng(4)
    a, da = pair(hpd(rng, shape, dtype), layout)
    plan = nl.Cholesky(da, lower=lower)
    ref = np.linalg.cholesky(up(a))
    assert rel(plan.factor, ref if lower else np.swapaxes(ref.conj(), -1, -2)) < TOL[dtype] * 10
    b = host_rand(rng, shape[:-1] + (2,), dtype)
    assert rel(plan.solve(cupy.asarray(b)), np.linalg.solve(up(a), up(b))) < TOL[dtype] * 100
    c = nl.cho_factor(da, lower=lower)
    assert rel(nl.cho_solve(c, cupy.asarray(b)), np.linalg.solve(up(a), up(b))) < TOL[dtype] * 100


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("shape", [(37, 37), (50, 12, 12), (3, 64, 64)])
def test_eigh(dtype, layout, shape):
    rng = np.random.default_rng(5)
    a, da = pair(hpd(rng, shape, dtype) - shape[-1] * np.eye(shape[-1], dtype=dtype), layout)
    for uplo in ("L", "U"):
        w, v = nl.eigh(da, UPLO=uplo)
        assert rel(w, np.linalg.eigvalsh(up(a))) < TOL[dtype] * 10
        assert rel(up(a) @ up(v), up(v) * up(w)[..., None, :]) < TOL[dtype] * 100
    plan = nl.Eigh(da)
    timings = plan.autotune(effort="exhaustive", repeats=2)
    assert set(timings) <= {"syevd", "syevBatched", "syevjBatched"}
    assert rel(plan.execute()[0], np.linalg.eigvalsh(up(a))) < TOL[dtype] * 10


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("shape", [(40, 17), (17, 40), (29, 29), (6, 9, 5)])
@pytest.mark.parametrize("full", [False, True])
def test_svd(dtype, layout, shape, full):
    rng = np.random.default_rng(6)
    a, da = pair(host_rand(rng, shape, dtype), layout)
    u, s, vh = nl.svd(da, full_matrices=full)
    k = min(shape[-2:])
    assert rel(s, np.linalg.svd(up(a), compute_uv=False)) < TOL[dtype] * 10
    assert rel((up(u)[..., :k] * up(s)[..., None, :]) @ up(vh)[..., :k, :], a) < TOL[dtype] * 10
    plan = nl.SVD(da, full_matrices=full)
    assert set(plan.autotune(effort="exhaustive", repeats=2)) == {"gesvd", "gesvdj", "gesvdp"}
    assert rel(plan.execute().S, np.linalg.svd(up(a), compute_uv=False)) < TOL[dtype] * 10


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(40, 17), (17, 40), (5, 9, 6)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr(dtype, shape, mode):
    rng = np.random.default_rng(7)
    a = host_rand(rng, shape, dtype)
    out = nl.qr(cupy.asarray(a), mode=mode)
    ref = np.linalg.qr(up(a), mode=mode)
    if mode == "r":
        assert rel(np.abs(up(out)), np.abs(ref)) < TOL[dtype] * 10
        return
    q, r = out
    assert up(q).shape == ref[0].shape
    assert rel(up(q) @ up(r), a) < TOL[dtype] * 10


@pytest.mark.parametrize("shape", [(60, 7), (7, 60), (12, 12)])
def test_lstsq(shape):
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal(shape), rng.standard_normal((shape[0], 3))
    x, res, rank, s = nl.lstsq(cupy.asarray(a), cupy.asarray(b))
    ref = np.linalg.lstsq(a, b, rcond=None)
    assert rel(x, ref[0]) < 1e-9 and rank == ref[2] and rel(s, ref[3]) < 1e-12
    if ref[1].size:
        assert rel(res, ref[1]) < 1e-9


def test_scipy_namespace_on_cuda_operands():
    from nvmathpy.scipy import linalg as nsla

    rng = np.random.default_rng(11)
    a = rng.standard_normal((19, 19)) + 5 * np.eye(19)
    spd = hpd(rng, (19, 19), "float64")
    b = rng.standard_normal((19, 3))
    da, dspd, db = cupy.asarray(a), cupy.asarray(spd), cupy.asarray(b)
    for kwargs in ({}, {"transposed": True}, {"assume_a": "lower triangular"}, {"assume_a": "diagonal"}):
        assert rel(nsla.solve(da, db, **kwargs), sla.solve(a, b, **kwargs)) < 1e-10, kwargs
    assert rel(nsla.solve(dspd, db, assume_a="pos"), sla.solve(spd, b, assume_a="pos")) < 1e-10
    assert rel(nsla.cholesky(dspd), sla.cholesky(spd)) < 1e-10
    assert rel(nsla.lu_solve(nsla.lu_factor(da), db, trans=1), sla.lu_solve(sla.lu_factor(a), b, trans=1)) < 1e-10
    assert rel(nsla.eigvalsh(dspd), sla.eigvalsh(spd)) < 1e-10
    assert rel(nsla.svdvals(da), sla.svdvals(a)) < 1e-10
    assert rel(np.abs(up(nsla.qr(da, mode="r")[0])),
               np.abs(sla.qr(a, mode="r")[0])) < 1e-10
    with pytest.raises(LinAlgError, match="Singular"):
        nsla.solve(cupy.asarray(np.ones((3, 3))), cupy.asarray(np.ones(3)))
    nan = spd.copy()
    nan[2, 5] = np.nan
    for _ in range(2):  # built, then the prepared call: the finite entries copied under a mask
        assert rel(nsla.eigh(dspd)[0], sla.eigvalsh(spd)) < 1e-10
        assert rel(nsla.svd(da)[1], sla.svdvals(a)) < 1e-10
        assert nsla.lstsq(da, db)[2] == 19
        for fn in (nsla.eigh, nsla.svd, lambda x: nsla.lstsq(x, db)):
            with pytest.raises(ValueError, match="infs or NaNs"):
                fn(cupy.asarray(nan))


def test_torch_cuda_operands_come_back_as_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    a = torch.as_tensor(hpd(rng, (4, 6, 6), "float64"), device="cuda")
    b = torch.as_tensor(rng.standard_normal((4, 6, 2)), device="cuda")
    for out in (nl.solve(a, b), nl.cholesky(a), nl.eigh(a).eigenvalues, nl.LU(a).solve(b), nl.inv(a)):
        assert isinstance(out, torch.Tensor) and out.device == a.device
    x = nl.solve(a, b)
    assert rel(x.cpu().numpy(), np.linalg.solve(a.cpu().numpy(), b.cpu().numpy())) < 1e-10


def test_explicit_stream_orders_the_work():
    rng = np.random.default_rng(10)
    a = cupy.asarray(rng.standard_normal((256, 256)) + 16 * np.eye(256))
    b = cupy.asarray(rng.standard_normal((256, 4)))
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        lu = nl.LU(a, stream=stream)
        x = lu.solve(b)
    stream.synchronize()
    assert rel(x, np.linalg.solve(cupy.asnumpy(a), cupy.asnumpy(b))) < 1e-10


def test_numpy_operands_with_cuda_execution_come_back_as_numpy():
    rng = np.random.default_rng(11)
    a = hpd(rng, (3, 9, 9), "float64")
    b = rng.standard_normal((3, 9, 2))
    before = a.copy()
    x = nl.LU(a, execution="cuda").solve(b)
    assert type(x) is np.ndarray and rel(x, np.linalg.solve(a, b)) < 1e-10
    w = nl.eigvalsh(a, execution="cuda")
    assert type(w) is np.ndarray and rel(w, np.linalg.eigvalsh(a)) < 1e-10
    assert isinstance(nl.det(a[0], execution="cuda"), np.float64)
    np.testing.assert_array_equal(a, before)


def test_numpy_operands_on_an_explicit_stream_are_read_back_after_it():
    rng = np.random.default_rng(12)
    a = rng.integers(-9, 10, (300, 300)) + 60 * np.eye(300, dtype=np.int64)  # integers: cast to float64
    b = rng.standard_normal((300, 3)).astype(np.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    lu = nl.LU(a, execution="cuda", stream=stream)
    x = lu.solve(b)
    assert type(x) is np.ndarray and x.dtype == np.float64 and rel(x, np.linalg.solve(a, b)) < 1e-10
    a2 = a.T.astype(np.float32)  # a float32 replacement: cast to the plan's float64 on its stream
    lu.reset_operands(a=a2)
    assert rel(lu.solve(b), np.linalg.solve(a2.astype(np.float64), b)) < 1e-6


# -- issue 24: solve_triangular through trsm, deferred checks ------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
@pytest.mark.parametrize("shape", [(1, 1), (13, 13), (3, 9, 9), (300, 300)])
def test_solve_triangular_through_trsm(dtype, layout, shape):
    from nvmathpy.scipy import linalg as nsla

    rng = np.random.default_rng(13)
    n = shape[-1]
    # off-diagonals of order 1/n: random triangular matrices are otherwise exponentially ill-conditioned
    a, da = pair((host_rand(rng, shape, dtype) / n + 2 * np.eye(n)).astype(dtype), layout)
    for lower in (True, False):
        for trans in (0, 1, 2):
            for unit in (False, True):
                b = host_rand(rng, shape[:-1] + (3,), dtype)
                x = nsla.solve_triangular(da, cupy.asarray(b), lower=lower, trans=trans, unit_diagonal=unit)
                assert isinstance(x, cupy.ndarray) and x.dtype == np.dtype(dtype)
                t = np.tril(a) if lower else np.triu(a)
                if unit:
                    t = t - t * np.eye(n) + np.eye(n)
                op = {0: t, 1: np.swapaxes(t, -1, -2), 2: np.swapaxes(t.conj(), -1, -2)}[trans]
                # the forward error of a triangular solve grows with its condition: compare the residual
                res = np.linalg.norm(up(op) @ up(x) - up(b)) / (np.linalg.norm(up(op)) * np.linalg.norm(up(x)))
                assert res < TOL[dtype], (lower, trans, unit)
    vector = host_rand(rng, (n,), dtype)
    if len(shape) == 2:
        ref = sla.solve_triangular(up(a), up(vector), lower=True)
        assert rel(nsla.solve_triangular(da, cupy.asarray(vector), lower=True), ref) < TOL[dtype] * n


def test_deferred_checks_report_a_singular_matrix_later():
    singular, b = cupy.ones((4, 4)), cupy.ones((4, 2))
    with nl.cuda_checks("deferred"):
        x = nl.solve(singular, b)  # returns without reading the info codes
        with pytest.raises(LinAlgError, match="Singular matrix .*reported late"):
            cupy.cuda.get_current_stream().synchronize()
            nl.check_cuda_errors()
    assert not np.isfinite(up(x)).all()
    nl.check_cuda_errors()  # reported once


def test_deferred_scipy_calls_never_synchronise_the_stream():
    """On a device only (its name keeps it out of the host emulation's run: CuPy's own
    ``cupyx.allow_synchronize`` is what checks it)."""
    import cupyx

    from nvmathpy.scipy import linalg as nsla

    rng = np.random.default_rng(14)
    a = cupy.asarray(rng.standard_normal((8, 8)) + 8 * np.eye(8))
    spd, b = a @ a.T + 8 * cupy.eye(8), cupy.asarray(rng.standard_normal((8, 4)))
    lu, c = nsla.lu_factor(a), nsla.cho_factor(spd)
    calls = [lambda: nsla.solve(a, b), lambda: nsla.lu_factor(a), lambda: nsla.lu_solve(lu, b),
             lambda: nsla.cho_factor(spd), lambda: nsla.cho_solve(c, b), lambda: nsla.cholesky(spd),
             lambda: nsla.eigh(spd), lambda: nsla.svd(a), lambda: nsla.qr(a), lambda: nsla.inv(a),
             lambda: nsla.det(a), lambda: nsla.solve_triangular(a, b, lower=True)]
    with nl.cuda_checks("deferred"):
        for call in calls:
            call()  # plans made (planning may synchronise)
        cupy.cuda.get_current_stream().synchronize()
        with cupyx.allow_synchronize(False):
            for call in calls:
                call()
    nl.check_cuda_errors()
