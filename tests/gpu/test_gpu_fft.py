"""The cuFFT engine on a GPU, against float64 numpy.fft references.

Every candidate strategy (strided, per-axis, transposed) over C, F, strided, cropped and reversed
operands, c2c/r2c/c2r in both directions, more than three axes, interleaved batch layouts,
padding/cropping, every norm, the numpy.fft functions, complex64/complex128 and half precision;
CuPy and torch CUDA operands (results in the caller's package, on its device); streams (an
explicit one and the package's current one, with a delayed writer proving the transform is
ordered after it); in-place plans, autotune and a wisdom hit in a fresh plan.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")

import nvmathpy.fft as nf  # noqa: E402
from nvmathpy.fft import FFT, FFTOptions  # noqa: E402

TOL = {"complex64": 2e-6, "complex128": 1e-12, "float32": 2e-6, "float64": 1e-12}


@pytest.fixture(autouse=True)
def _cufft_on_the_host_emulation(monkeypatch):
    """Under the host emulation plugin (``-p cuda_emulation``, whose CuPy arrays are host arrays),
    emulate cuFFT too (tests/cuda_emulation_fft.py); on a GPU this does nothing."""
    if getattr(cupy.ndarray, "__name__", "") != "HostArray":
        yield
        return
    from cuda_emulation_fft import install

    from nvmathpy.fft._driver import plan_cache

    plan_cache().clear()
    install(monkeypatch.setattr, monkeypatch.setitem)
    yield
    plan_cache().clear()  # cached plans hold this test's emulated handles


def up(x):
    if isinstance(x, cupy.ndarray):
        x = cupy.asnumpy(x)
    elif hasattr(x, "cpu"):
        x = x.cpu().numpy()
    x = np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def rel_err(x, ref):
    x, ref = up(x), up(ref)
    assert x.shape == ref.shape
    assert np.isfinite(x).all()
    return np.linalg.norm((x - ref).ravel()) / max(np.linalg.norm(ref.ravel()), 1e-300)


def pair(rng, shape, layout, dtype):
    """The same operand on the host and on the device, built by the same view operations."""
    base_shape = {"F": shape[::-1], "step": shape[:-1] + (2 * shape[-1],),
                  "crop": shape[:-1] + (shape[-1] + 3,)}.get(layout, shape)
    host = rng.standard_normal(base_shape)
    if np.dtype(dtype).kind == "c":
        host = host + 1j * rng.standard_normal(base_shape)
    host = host.astype(dtype)

    def build(x):
        if layout == "F":
            return x.T
        if layout == "step":
            return x[..., ::2]
        if layout == "crop":
            return x[..., : shape[-1]]
        if layout == "neg":
            return x[::-1]
        return x

    return build(host), build(cupy.asarray(host))


def every_candidate(plan, x, direction="forward"):
    engine, problem = plan._engine, plan.problem
    for candidate in engine.candidates(problem):
        prepared = engine.prepare(problem, candidate)
        try:
            yield candidate, (prepared.forward if direction == "forward" else prepared.inverse)(x)
        finally:
            prepared.free()


# -- numerics ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("layout", ["C", "F", "step", "crop", "neg"])
@pytest.mark.parametrize(("shape", "axes"), [
    ((1009,), (0,)), ((64, 33), (0,)), ((64, 33), (1, 0)), ((6, 17, 5), (1,)), ((6, 17, 5), (0, 2)),
    ((5, 7, 9), (2, 0, 1)), ((3, 4, 5, 6), None), ((1, 12), (0,)),
])
@pytest.mark.parametrize("direction", ["forward", "inverse"])
def test_c2c_every_candidate(shape, axes, layout, dtype, direction):
    rng = np.random.default_rng()
    h, d = pair(rng, shape, layout, dtype)
    plan = FFT(d, axes=axes)
    ref = (np.fft.fftn if direction == "forward" else np.fft.ifftn)(h.astype(np.complex128), axes=axes)
    for candidate, y in every_candidate(plan, d, direction):
        assert isinstance(y, cupy.ndarray) and y.dtype == np.dtype(dtype)
        assert rel_err(y, ref) < TOL[dtype] * 5, candidate
    assert rel_err(d, h) == 0  # the operand is untouched


@pytest.mark.parametrize("layout", ["C", "F", "step"])
@pytest.mark.parametrize(("shape", "axes", "s"), [
    ((4096,), (0,), None), ((33, 20), (0,), None), ((33, 20), (1, 0), None), ((6, 7, 8), (0, 2), None),
    ((3, 4, 5, 6), None, None), ((8, 9), (1,), (16,)), ((8, 9), (0, 1), (5, 6)),
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_r2c_and_c2r_every_candidate(shape, axes, s, layout, dtype):
    rng = np.random.default_rng()
    h, d = pair(rng, shape, layout, dtype)
    plan = FFT(d, axes=axes, s=s)
    ref = np.fft.rfftn(h.astype(np.float64), s=s, axes=plan.axes)
    for candidate, y in every_candidate(plan, d):
        assert rel_err(y, ref) < TOL[dtype] * 5, candidate
    lengths = list(s) if s else [shape[a] for a in plan.axes]
    spectrum = cupy.asarray(ref.astype(np.complex64 if dtype == "float32" else np.complex128))
    kept = spectrum.copy()
    inverse = FFT(spectrum, axes=plan.axes, s=lengths, kind="c2r")
    back = np.fft.irfftn(ref, s=lengths, axes=plan.axes)
    for candidate, y in every_candidate(inverse, spectrum, "inverse"):
        assert rel_err(y, back) < TOL[dtype] * 5, candidate
    assert bool((spectrum == kept).all())  # cuFFT's c2r overwrites its input: ours is a copy


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_numpy_functions_and_norms(norm):
    rng = np.random.default_rng()
    x = rng.standard_normal((6, 20)) + 1j * rng.standard_normal((6, 20))
    r = rng.standard_normal((6, 20))
    dx, dr = cupy.asarray(x), cupy.asarray(r)
    for ours, theirs, h, d, kw in (
        (nf.fft, np.fft.fft, x, dx, {"n": 25}), (nf.ifft, np.fft.ifft, x, dx, {"axis": 0}),
        (nf.rfft, np.fft.rfft, r, dr, {"n": 16}), (nf.irfft, np.fft.irfft, x, dx, {}),
        (nf.hfft, np.fft.hfft, x, dx, {}), (nf.ihfft, np.fft.ihfft, r, dr, {}), (nf.fft2, np.fft.fft2, x, dx, {}),
        (nf.ifftn, np.fft.ifftn, x, dx, {"s": (4, 30), "axes": (0, 1)}),
        (nf.rfftn, np.fft.rfftn, r, dr, {"axes": (1, 0)}),
        (nf.irfft2, np.fft.irfft2, x, dx, {}),
    ):
        got = ours(d, norm=norm, **kw)
        assert isinstance(got, cupy.ndarray) and got.device.id == d.device.id
        assert rel_err(got, theirs(h, norm=norm, **kw)) < 1e-12, ours.__name__


def test_float32_gives_complex64_and_plans_are_cached():
    rng = np.random.default_rng()
    x = cupy.asarray(rng.standard_normal((16, 100)).astype(np.float32))
    from nvmathpy.fft._driver import plan_cache

    first = nf.rfft(x)
    hits = plan_cache().hits
    again = nf.rfft(x)
    assert first.dtype == again.dtype == np.complex64 and plan_cache().hits == hits + 1
    assert rel_err(again, np.fft.rfft(cupy.asnumpy(x).astype(np.float64))) < 2e-6


@pytest.mark.parametrize(("kind", "shape", "axes"), [("r2c", (8, 1024), (1,)), ("c2c", (64, 32), (0, 1)),
                                                    ("c2r", (4, 129), (1,))])
def test_half_precision(kind, shape, axes):
    rng = np.random.default_rng()
    half = FFTOptions(half_precision=True)
    if kind == "r2c":
        h = rng.standard_normal(shape).astype(np.float16)
        plan, ref = FFT(cupy.asarray(h), axes=axes, options=half), np.fft.rfftn(h.astype(np.float64), axes=axes)
    elif kind == "c2c":
        h = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
        plan, ref = FFT(cupy.asarray(h), axes=axes, options=half), np.fft.fftn(h, axes=axes)
    else:
        h = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
        s = [2 * (shape[-1] - 1)]
        plan = FFT(cupy.asarray(h), axes=axes, s=s, kind="c2r", options=half)
        ref = np.fft.irfftn(h, s=s, axes=axes)
    with plan:
        plan.plan()
        got = plan.execute()
    assert got.dtype == (np.float32 if kind == "c2r" else np.complex64)
    assert rel_err(got, ref) < 1e-2


# -- torch, streams, in place, tuning ------------------------------------------------------------------


def test_torch_cuda_tensors_come_back_as_torch_on_their_stream():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng()
    h = rng.standard_normal((8, 50)).astype(np.float32)
    t = torch.from_numpy(h).to("cuda")
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        got = nf.rfft(t)
        full = nf.fft2(t.to(torch.complex128))
    stream.synchronize()
    assert isinstance(got, torch.Tensor) and got.device == t.device and got.dtype == torch.complex64
    assert rel_err(got, np.fft.rfft(h.astype(np.float64))) < 2e-6
    assert rel_err(full, np.fft.fft2(h.astype(np.float64))) < 1e-12


_LATE_FILL = r"""
extern "C" __global__ void late_fill(double* x, double value, long long n, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
    for (long long i = threadIdx.x; i < n; i += blockDim.x) x[i] = value;
}
"""


def _late_fill(x, value, stream):
    """On ``stream``: spin ~50 ms, then fill the complex128 ``x`` with ``value + value*1j``."""
    kernel = cupy.RawKernel(_LATE_FILL, "late_fill")
    flat = x.view(cupy.float64)
    with stream:
        kernel((1,), (256,), (flat, np.float64(value), np.int64(flat.size), np.int64(100_000_000)))


def _constant_spectrum(n, value):
    expected = np.zeros(n, np.complex128)
    expected[0] = n * (value + 1j * value)
    return expected


def test_explicit_stream_orders_the_call_after_earlier_work():
    x = cupy.zeros(256, cupy.complex128)
    cupy.cuda.Device().synchronize()
    stream = cupy.cuda.Stream(non_blocking=True)
    with FFT(x, stream=stream) as plan:
        plan.plan()
        _late_fill(x, 2.0, stream)
        got = plan.execute()
        stream.synchronize()
    assert rel_err(got, _constant_spectrum(256, 2.0)) < 1e-12


def test_current_cupy_stream_is_followed():
    x = cupy.zeros(512, cupy.complex128)
    cupy.cuda.Device().synchronize()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        _late_fill(x, 3.0, stream)
        got = nf.fft(x, norm="forward")
    stream.synchronize()
    assert rel_err(got, _constant_spectrum(512, 3.0) / 512) < 1e-12


@pytest.mark.parametrize("layout", ["C", "F"])
def test_inplace(layout):
    rng = np.random.default_rng()
    h, d = pair(rng, (64, 30), layout, "complex128")
    ref = np.fft.fft(h, axis=0)
    with FFT(d, axes=[0], inplace=True) as plan:
        plan.plan()
        assert plan.execute() is d
        assert rel_err(d, ref) < 1e-12
        plan.autotune(effort="exhaustive", repeats=2)  # times a copy
        assert rel_err(d, ref) < 1e-12


def test_autotune_then_wisdom_hit_in_a_fresh_plan():
    rng = np.random.default_rng()
    h = rng.standard_normal((300, 64, 20)) + 0j
    d = cupy.asarray(h)
    with FFT(d, axes=[1]) as plan:
        timings = plan.autotune(effort="exhaustive", repeats=3)
        assert len(timings) >= 2 and plan.chosen_by == "autotune"
        winner = plan.candidate
        assert rel_err(plan.execute(), np.fft.fft(h, axis=1)) < 1e-12
    with FFT(d, axes=[1]) as fresh:
        fresh.plan()
        assert fresh.chosen_by == "wisdom" and fresh.candidate == winner
        assert rel_err(fresh.execute(), np.fft.fft(h, axis=1)) < 1e-12


@pytest.mark.parametrize("layout", ["C", "F", "step"])
def test_numpy_operands_with_cuda_execution_come_back_as_numpy(layout):
    rng = np.random.default_rng()
    h, _ = pair(rng, (40, 33), layout, "complex64")
    keep = h.copy()
    with FFT(h, axes=[0], execution="cuda") as plan:
        plan.plan()
        got = plan.execute()
    assert type(got) is np.ndarray and got.dtype == np.complex64
    assert rel_err(got, np.fft.fft(keep.astype(np.complex128), axis=0)) < 1e-5
    assert np.array_equal(h, keep)
