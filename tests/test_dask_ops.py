"""Tests of nvmathpy.dask on a two-worker distributed.LocalCluster started by this module.

The cluster runs its workers as threads of this process (``processes=False``): it starts in
about 0.1 s instead of about 4 s for two worker processes on this 2-core machine, needs no
pickling of the test's functions, and the chunk kernels (BLAS, LAPACK, FFT libraries) release
the GIL, so the two workers still run chunks in parallel. Every result is compared with a
float64 NumPy reference.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import nvmathpy.dask as nd  # noqa: E402
from nvmathpy.errors import InvalidOperandError, InvalidOptionError, LinAlgError  # noqa: E402


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as c:
            yield c


def _stats(client):
    """Plan-cache statistics summed over the distinct worker processes."""
    per_process = dict(client.run(lambda: (os.getpid(), nd.plan_cache_stats())).values())
    total: dict = {}
    for stats in per_process.values():
        for op, counts in stats.items():
            for what, n in counts.items():
                total[(op, what)] = total.get((op, what), 0) + n
    return total


def _rel(x, ref):
    """Relative error; absolute for an all-zero reference (e.g. the ReLU of negatives)."""
    x, ref = np.asarray(x), np.asarray(ref)
    assert np.all(np.isfinite(x))
    scale = np.linalg.norm(ref.ravel())
    return np.linalg.norm((x - ref).ravel()) / (scale if scale > 0 else 1.0)


TOL = {np.float32: 2e-5, np.float64: 1e-12, np.complex64: 2e-5, np.complex128: 1e-12}


def _gelu(z):
    return 0.5 * z * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (z + 0.044715 * z**3)))


ACT = {None: lambda z: z, "bias": lambda z: z, "relu": lambda z: np.maximum(z, 0), "gelu": _gelu,
       "relu_bias": lambda z: np.maximum(z, 0), "gelu_bias": _gelu}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("epilogue", [None, "bias", "relu", "gelu", "relu_bias", "gelu_bias"])
def test_batched_matmul_epilogues(client, epilogue, dtype):
    rng = np.random.default_rng(1)
    a_np = rng.standard_normal((7, 11, 6)).astype(dtype)
    w_np = rng.standard_normal((9, 6)).astype(dtype).T  # F-order weight
    bias_np = rng.standard_normal(9).astype(dtype) if epilogue and "bias" in epilogue else None
    before = [x.copy() for x in (a_np, w_np)]
    a = da.from_array(a_np, chunks=(3, 11, 6))
    result = nd.matmul(a, w_np, bias=bias_np, epilogue=epilogue)
    assert isinstance(result, da.Array) and result.chunks == ((3, 3, 1), (11,), (9,)) and result.dtype == dtype
    z = a_np.astype(np.float64) @ w_np.astype(np.float64) + (0 if bias_np is None else bias_np.astype(np.float64))
    assert _rel(result.compute(), ACT[epilogue](z)) < TOL[dtype]
    assert all(np.array_equal(x, y) for x, y in zip(before, (a_np, w_np)))


def test_matmul_chunked_inner_axis_fuses_epilogue_after_the_sum(client):
    rng = np.random.default_rng(2)
    a_np, b_np, bias_np = rng.standard_normal((4, 9, 13)), rng.standard_normal((13, 7)), rng.standard_normal(7)
    a = da.from_array(a_np, chunks=(2, 5, 5))  # rows and K chunked
    b = da.from_array(b_np, chunks=(5, 3))  # K and columns chunked
    result = nd.matmul(a, b, bias=da.from_array(bias_np, chunks=4), epilogue="gelu_bias")
    assert result.chunks == ((2, 2), (5, 4), (3, 3, 1))
    assert _rel(result.compute(), _gelu(a_np @ b_np + bias_np)) < 1e-12


def test_matmul_broadcast_batches_and_strided_chunks(client):
    rng = np.random.default_rng(3)
    a_np = rng.standard_normal((1, 10, 5))
    b_np = rng.standard_normal((6, 3, 4))[:, ::-1, :].transpose(0, 2, 1)  # (6, 4, 3) with negative strides
    a_np = np.broadcast_to(a_np, (1, 10, 5))[:, :, 1:5]  # (1, 10, 4) non-contiguous
    result = nd.matmul(da.from_array(a_np, chunks=(1, 5, 4)), da.from_array(b_np, chunks=(2, 4, 2)), epilogue="relu")
    assert result.shape == (6, 10, 3)
    assert _rel(result.compute(), np.maximum(a_np @ b_np, 0)) < 1e-12


@settings(max_examples=8, deadline=None)
@given(
    batch=st.integers(1, 5), m=st.integers(1, 9), k=st.integers(1, 9), n=st.integers(1, 9),
    parts=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3)), seed=st.integers(0, 2**16),
)
def test_matmul_any_chunking_property(client, batch, m, k, n, parts, seed):
    rng = np.random.default_rng(seed)
    a_np, b_np, bias_np = rng.standard_normal((batch, m, k)), rng.standard_normal((k, n)), rng.standard_normal(n)
    a = da.from_array(a_np, chunks=(-(-batch // parts[0]), -(-m // parts[1]), -(-k // parts[2])))
    b = da.from_array(b_np, chunks=(-(-k // parts[2]), -(-n // parts[1])))
    got = nd.matmul(a, b, bias=bias_np, epilogue="relu_bias").compute()
    assert _rel(got, np.maximum(a_np @ b_np + bias_np, 0)) < 1e-12


def test_nothing_runs_until_computed_and_plans_are_reused(client):
    rng = np.random.default_rng(4)
    # chunks beyond the FFT functions' quick path for small calls (which keeps no plan)
    x_np = rng.standard_normal((64, 8200)) + 1j * rng.standard_normal((64, 8200))
    x = da.from_array(x_np, chunks=(8, 8200))  # 8 chunks of one shape
    before = _stats(client)
    y = nd.fft(x)
    assert _stats(client) == before  # building the graph plans nothing
    worker = sorted(client.scheduler_info()["workers"])[0]  # one worker: its chunks run one after another
    assert _rel(client.compute(y, workers=[worker]).result(), np.fft.fft(x_np)) < 1e-12
    after = _stats(client)
    assert after[("fft", "misses")] - before[("fft", "misses")] == 1  # one plan for the chunk shape ...
    assert after[("fft", "hits")] - before[("fft", "hits")] == 7  # ... reused by the 7 other tasks
    back = client.compute(nd.ifft(y), workers=[worker]).result()  # 8 fft + 8 ifft tasks ...
    assert _rel(back, x_np) < 1e-12
    again = _stats(client)  # ... all on the same plan (one c2c plan runs both directions)
    assert (again[("fft", "misses")] - after[("fft", "misses")], again[("fft", "hits")] - after[("fft", "hits")]) == (0, 16)


FFT_CASES = [  # (function name, kwargs, input shape, chunks, real input)
    ("fft", {}, (6, 45), (2, 45), False),
    ("ifft", {"norm": "ortho"}, (6, 45), (4, 45), False),
    ("rfft", {"n": 50}, (7, 45), (3, 45), True),
    ("irfft", {}, (5, 23), (2, 23), False),
    ("irfft", {"n": 31, "axis": 0}, (23, 5), (23, 2), False),
    ("hfft", {}, (4, 17), (1, 17), False),
    ("ihfft", {"norm": "forward"}, (4, 17), (3, 17), True),
    ("fft2", {}, (5, 6, 7), (2, 6, 7), False),
    ("rfft2", {"s": (8, 9)}, (5, 6, 7), (3, 6, 7), True),
    ("irfft2", {"axes": (0, 2)}, (6, 4, 7), (6, 2, 7), False),
    ("fftn", {"axes": (1, 2)}, (3, 5, 7), (1, 5, 7), False),
    ("ifftn", {"s": (4, 9), "axes": (1, 2)}, (3, 5, 7), (2, 5, 7), False),
    ("rfftn", {"axes": (-1,)}, (3, 5, 7), (3, 2, 7), True),
    ("irfftn", {"s": (5, 6), "axes": (1, 2)}, (3, 5, 7), (2, 5, 7), False),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kwargs,shape,chunks,real", FFT_CASES)
def test_fft_family_matches_numpy(client, name, kwargs, shape, chunks, real, dtype):
    rng = np.random.default_rng(5)
    x_np = rng.standard_normal(shape).astype(dtype)
    if not real:
        x_np = (x_np + 1j * rng.standard_normal(shape)).astype(np.result_type(dtype, np.complex64))
    before = x_np.copy()
    y = getattr(nd, name)(da.from_array(x_np, chunks=chunks), **kwargs)
    ref = getattr(np.fft, name)(x_np.astype(np.complex128 if not real else np.float64), **kwargs)
    got = y.compute()
    assert got.shape == y.shape == ref.shape and got.dtype == y.dtype
    assert y.dtype == getattr(np.fft, name)(x_np, **kwargs).dtype  # NumPy 2 dtypes (float32 stays single)
    assert _rel(got, ref) < (1e-5 if dtype == np.float32 else 1e-12)
    assert np.array_equal(x_np, before)


def test_fft_along_a_chunked_axis_says_how_to_rechunk():
    x = da.ones((8, 10), chunks=(4, 5))
    with pytest.raises(InvalidOperandError, match=r"single chunk along axis 1.*\(5, 5\).*rechunk\(\{1: -1\}\)"):
        nd.fft(x)
    with pytest.raises(InvalidOperandError, match="axis 0"):
        nd.fft2(x.rechunk({1: -1}))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_batched_solve(client, dtype):
    rng = np.random.default_rng(6)
    a_np = (rng.standard_normal((6, 5, 5)) + 5 * np.eye(5)).astype(dtype)
    b_np = rng.standard_normal((6, 5, 3)).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a_np = a_np + 1j * rng.standard_normal(a_np.shape)
    x = nd.solve(da.from_array(a_np, chunks=(2, 5, 5)), da.from_array(b_np, chunks=(3, 5, 3)))
    ref = np.linalg.solve(a_np.astype(np.complex128), b_np)
    assert x.dtype == np.linalg.solve(a_np, b_np).dtype
    assert _rel(x.compute(), ref) < (1e-5 if dtype == np.float32 else 1e-12)


def test_solve_vector_rhs_broadcast_and_singular(client):
    rng = np.random.default_rng(7)
    a_np, b_np = rng.standard_normal((7, 4, 4)), rng.standard_normal(4)
    x = nd.solve(da.from_array(a_np, chunks=(3, 2, 4)), b_np)  # matrix axes rechunked
    assert x.shape == (7, 4) and _rel(x.compute(), np.linalg.solve(a_np, b_np)) < 1e-12
    a1, b3 = rng.standard_normal((1, 3, 3)), rng.standard_normal((5, 3, 2))
    assert _rel(nd.solve(a1, da.from_array(b3, chunks=(2, 3, 2))).compute(), np.linalg.solve(a1, b3)) < 1e-12
    singular = a_np.copy()
    singular[4] = 0.0
    with pytest.raises(LinAlgError):
        nd.solve(da.from_array(singular, chunks=(3, 4, 4)), b_np).compute()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tsqr(client, dtype):
    rng = np.random.default_rng(8)
    a_np = rng.standard_normal((997, 7)).astype(dtype)
    q, r = nd.qr(da.from_array(a_np, chunks=(250, 7)))
    q_np, r_np = q.compute(), r.compute()
    assert q.chunks[0] == (250, 250, 250, 247) and q_np.dtype == r_np.dtype == dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert _rel(q_np.astype(np.float64) @ r_np, a_np.astype(np.float64)) < tol
    assert np.linalg.norm(q_np.T.astype(np.float64) @ q_np - np.eye(7)) < 10 * tol
    assert np.array_equal(r_np, np.triu(r_np))
    # the same R as LAPACK's up to the signs of its rows
    r_ref = np.linalg.qr(a_np.astype(np.float64), mode="r")
    assert _rel(np.abs(r_np), np.abs(r_ref)) < tol


def test_tsqr_merges_short_row_chunks(client):
    rng = np.random.default_rng(11)
    a_np = rng.standard_normal((40, 6))
    q, r = nd.qr(da.from_array(a_np, chunks=((3, 10, 2, 2, 20, 3), (4, 2))))
    assert q.chunks == ((13, 27), (6,))  # 3 joins the 10; 2 and 2 join the 20; the last 3 joins that too
    q_np, r_np = q.compute(), r.compute()
    assert _rel(q_np @ r_np, a_np) < 1e-12 and np.linalg.norm(q_np.T @ q_np - np.eye(6)) < 1e-12


@pytest.mark.parametrize("rhs_shape,dtype", [((613,), np.float64), ((613, 3), np.float64), ((613, 2), np.complex128)])
def test_lstsq_matches_numpy(client, rhs_shape, dtype):
    rng = np.random.default_rng(9)
    a_np, b_np = rng.standard_normal((613, 5)).astype(dtype), rng.standard_normal(rhs_shape)
    if dtype == np.complex128:
        a_np = a_np + 1j * rng.standard_normal(a_np.shape)
    x, residuals, rank, s = nd.lstsq(da.from_array(a_np, chunks=(100, 5)), da.from_array(b_np, chunks=150))
    x_ref, res_ref, rank_ref, s_ref = np.linalg.lstsq(a_np, b_np, rcond=None)
    assert x.shape == x_ref.shape and residuals.shape == res_ref.shape
    assert _rel(x.compute(), x_ref) < 1e-11
    assert _rel(residuals.compute(), res_ref) < 1e-10
    assert int(rank.compute()) == rank_ref
    assert _rel(s.compute(), s_ref) < 1e-12


def test_bad_inputs_are_refused_before_any_work():
    a = da.ones((4, 3, 3), chunks=(2, 3, 3))
    with pytest.raises(InvalidOptionError, match="epilogue='relu_aux' is not allowed"):
        nd.matmul(a, a, epilogue="relu_aux")
    with pytest.raises(InvalidOperandError, match="needs bias"):
        nd.matmul(a, a, epilogue="relu_bias")
    with pytest.raises(InvalidOperandError, match="takes no bias"):
        nd.matmul(a, a, bias=np.ones(3), epilogue="relu")
    with pytest.raises(InvalidOperandError, match="b has dtype float32"):
        nd.matmul(a, a.astype(np.float32))
    with pytest.raises(InvalidOperandError, match="do not match in K"):
        nd.matmul(a, da.ones((4, 2), chunks=2))
    with pytest.raises(InvalidOperandError, match="expected a dask.array.Array or a numpy.ndarray"):
        nd.matmul([[1.0]], a)
    with pytest.raises(InvalidOperandError, match="square"):
        nd.solve(da.ones((3, 2)), np.ones(3))
    with pytest.raises(InvalidOperandError, match=r"tall \(m >= n\).*\(5, 7\)"):
        nd.qr(da.ones((5, 7), chunks=(2, 7)))
    with pytest.raises(InvalidOptionError, match="norm"):
        nd.fft(da.ones(8), norm="sideways")

