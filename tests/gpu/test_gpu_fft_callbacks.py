"""FFT prolog/epilog callbacks on the GPU (cuFFT LTO callbacks) against the CPU plan's result.

Every candidate the CUDA engine offers with callbacks, on CuPy arrays and torch CUDA tensors, for
c2c, r2c and c2r in single and double precision, strided/transposed/cropped operands, zero
padding, the Hermitian directions and callback inputs living on the device. Needs a GPU.

The callbacks run inside cuFFT as LTO callbacks, or - where cuFFT refuses such a plan - as the plain
FFT plus generated elementwise kernels (``callback_path`` of the prepared candidate says which);
``test_lto_callbacks_are_taken_by_cufft`` checks that cuFFT takes them for ordinary sizes, and the
``forced_elementwise`` tests check the fallback's results with the fallback forced.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")

from nvmathpy.fft import FFT  # noqa: E402

TOL = {"complex64": 2e-5, "float32": 2e-5, "complex128": 1e-12, "float64": 1e-12}


@pytest.fixture(autouse=True)
def _cufft_on_the_host_emulation(monkeypatch):
    """Under the host emulation plugin (``-p cuda_emulation``: CuPy arrays are host arrays) emulate
    cuFFT too, callbacks included (tests/cuda_emulation_fft.py); on a GPU this does nothing."""
    if getattr(cupy.ndarray, "__name__", "") != "HostArray":
        yield
        return
    from cuda_emulation_fft import install

    from nvmathpy.fft._driver import plan_cache

    plan_cache().clear()
    install(monkeypatch.setattr, monkeypatch.setitem)
    yield
    plan_cache().clear()


def rel_err(x, ref):
    x = cupy.asnumpy(x) if isinstance(x, cupy.ndarray) else np.asarray(x)
    ref = np.asarray(ref)
    assert x.shape == ref.shape and np.isfinite(x).all()
    return np.linalg.norm((x - ref).ravel()) / np.linalg.norm(ref.ravel())


def data(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def layout_of(x, layout):
    """``x`` (host or device) as a view: "F" transposed, "step" every other column, "crop"."""
    if layout == "F":
        return x.T
    if layout == "step":
        return x[..., ::2]
    if layout == "crop":
        return x[..., :-3]
    return x


def check_candidates(x_host, x_device, tol, direction=None, **kwargs):
    """Each candidate of the GPU plan against the CPU plan with the same callbacks."""
    want = FFT(x_host, execution="cpu", **kwargs).plan().execute(direction)
    plan = FFT(x_device, **kwargs)
    engine, problem = plan._engine, plan.problem
    natural = direction or plan._layout.natural_direction
    candidates = engine.candidates(problem)
    assert candidates
    paths = []
    for candidate in candidates:
        prepared = engine.prepare(problem, candidate)
        try:
            paths.append(prepared.callback_path)
            got = (prepared.forward if natural == "forward" else prepared.inverse)(x_device)
            assert rel_err(got, want) < tol, (candidate, prepared.callback_path)
        finally:
            prepared.free()
    assert set(paths) <= {"lto", "elementwise"}, paths
    got = plan.plan().execute(direction)
    assert rel_err(got, want) < tol
    plan.free()
    return paths


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("layout", ["C", "F", "step", "crop"])
@pytest.mark.parametrize(("shape", "axes"), [((6, 1009), (1,)), ((64, 40), (0,)), ((6, 17, 10), (0, 2)),
                                             ((3, 4, 5, 8), None)])
@pytest.mark.parametrize("direction", ["forward", "inverse"])
def test_c2c_prolog_and_epilog(dtype, layout, shape, axes, direction):
    rng = np.random.default_rng()
    device = layout_of(cupy.asarray(data(rng, shape, dtype)), layout)
    host = cupy.asnumpy(device)
    k_axis = (axes or tuple(range(host.ndim)))[-1]
    w = data(rng, [n if a == k_axis else 1 for a, n in enumerate(host.shape)], dtype)
    f = rng.standard_normal(host.shape).astype(np.float32)
    check_candidates(host, device, TOL[dtype], direction, axes=axes,
                     prolog=lambda v, w, k: v * w + 0.5 * k, epilog=lambda v, f, k: np.where(k < 3, v * f, v / (k + 1.0)),
                     callback_inputs={"w": w, "f": f})


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("shape", "axes", "s"), [((5, 1000), (1,), None), ((48, 9), (0,), (50,)),
                                                  ((3, 16, 30), (1, 2), None)])
def test_r2c_and_c2r(dtype, shape, axes, s):
    rng = np.random.default_rng()
    host = data(rng, shape, dtype)
    check_candidates(host, cupy.asarray(host), TOL[dtype], axes=axes, s=s, prolog=lambda v, g: np.tanh(v) * g,
                     epilog=lambda v, k: v * (k + 1.0), callback_inputs={"g": 1.5})
    spectrum = np.fft.rfftn(host, axes=axes, s=s).astype(np.result_type(dtype, np.complex64))
    lengths = s if s is not None else [shape[a] for a in axes]
    check_candidates(spectrum, cupy.asarray(spectrum), TOL[dtype], axes=axes, s=lengths, kind="c2r",
                     prolog=lambda v, k: v * (k < 6), epilog=lambda v, b: v * v - b, callback_inputs={"b": 0.5})


@pytest.mark.parametrize("norm", ["backward", "ortho"])
def test_hermitian_directions(norm):
    rng = np.random.default_rng()
    x = rng.standard_normal((4, 30))
    z = np.fft.rfft(rng.standard_normal((4, 30)))
    check_candidates(x, cupy.asarray(x), 1e-12, "inverse", axes=[1], norm=norm, prolog=lambda v, k: v * (k + 1.0),
                     epilog=lambda v, k: v + k)
    gain = data(rng, 16, np.complex128)
    check_candidates(z, cupy.asarray(z), 1e-12, "forward", axes=[1], kind="c2r", s=[30], norm=norm,
                     prolog=lambda v, g: v * g, epilog=lambda v: v * 2.0, callback_inputs={"g": gain})


@pytest.mark.parametrize("n", [700, 1100])
def test_prolog_before_zero_padding_after_cropping(n):
    rng = np.random.default_rng()
    host = data(rng, (3, 1000), np.complex64)
    check_candidates(host, cupy.asarray(host), TOL["complex64"], axes=[1], s=[n], prolog=lambda v, k: v + 1.0 + k * 1e-3)


def test_device_callback_inputs_and_the_operand_untouched():
    rng = np.random.default_rng()
    x = cupy.asarray(data(rng, (8, 256), np.complex64))
    before = x.copy()
    w = cupy.asarray(np.hanning(256).astype(np.float32))
    y = FFT(x, axes=[1], prolog=lambda v, w: v * w, callback_inputs={"w": w}).plan().execute()
    assert rel_err(y, np.fft.fft(cupy.asnumpy(x) * cupy.asnumpy(w), axis=1)) < TOL["complex64"]
    assert bool((x == before).all())


def test_torch_cuda_tensors():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this torch has no CUDA device")
    rng = np.random.default_rng()
    host = data(rng, (16, 300), np.complex64)
    filt = rng.standard_normal(300).astype(np.float32)
    x = torch.from_numpy(host).cuda()
    plan = FFT(x, axes=[1], prolog=lambda v, k: v * (1.0 + k * 1e-3),
               epilog=lambda v, f: v * f, callback_inputs={"f": torch.from_numpy(filt).cuda()})
    y = plan.plan().execute()
    assert isinstance(y, torch.Tensor) and y.is_cuda
    want = np.fft.fft(host * (1.0 + np.arange(300) * 1e-3), axis=1) * filt
    assert rel_err(y.cpu().numpy(), want) < TOL["complex64"]
    plan.free()


def test_lto_callbacks_are_taken_by_cufft():
    """cuFFT accepts the generated LTO callbacks for an ordinary size (no fallback needed): the
    prepared candidate runs them inside cuFFT, with the right result."""
    from nvmathpy.fft import _cuda_engine

    assert _cuda_engine.CALLBACK_PATH == "auto"
    rng = np.random.default_rng()
    host = data(rng, (16, 256), np.complex64)
    w = data(rng, 256, np.complex64)
    paths = check_candidates(host, cupy.asarray(host), TOL["complex64"], axes=[1], prolog=lambda v, w: v * w,
                             epilog=lambda v, k: v * (k + 1.0), callback_inputs={"w": w})
    assert "lto" in paths, (paths, _cuda_engine.LTO_REFUSALS)  # the refusal says why


@pytest.fixture
def forced_elementwise(monkeypatch):
    from nvmathpy.fft import _cuda_engine

    monkeypatch.setattr(_cuda_engine, "CALLBACK_PATH", "elementwise")


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("layout", ["C", "F", "step", "crop"])
@pytest.mark.parametrize(("shape", "axes"), [((6, 1009), (1,)), ((6, 17, 10), (0, 2))])
def test_forced_elementwise_c2c(forced_elementwise, dtype, layout, shape, axes):
    rng = np.random.default_rng()
    device = layout_of(cupy.asarray(data(rng, shape, dtype)), layout)
    before = device.copy()
    host = cupy.asnumpy(device)
    k_axis = axes[-1]
    w = data(rng, [n if a == k_axis else 1 for a, n in enumerate(host.shape)], dtype)
    f = rng.standard_normal(host.shape).astype(np.float32)
    for direction in ("forward", "inverse"):
        paths = check_candidates(host, device, TOL[dtype], direction, axes=axes, prolog=lambda v, w, k: v * w + 0.5 * k,
                                 epilog=lambda v, f, k: np.where(k < 3, v * f, v / (k + 1.0)),
                                 callback_inputs={"w": w, "f": f})
        assert set(paths) == {"elementwise"}, paths
    assert bool((device == before).all())  # the prolog kernel never writes into the operand


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_forced_elementwise_r2c_c2r_padding_and_hermitian(forced_elementwise, dtype):
    rng = np.random.default_rng()
    host = data(rng, (48, 9), dtype)
    assert set(check_candidates(host, cupy.asarray(host), TOL[dtype], axes=[0], s=[50],
                                prolog=lambda v, g: np.tanh(v) * g, epilog=lambda v, k: v * (k + 1.0),
                                callback_inputs={"g": 1.5})) == {"elementwise"}
    spectrum = np.fft.rfft(data(rng, (5, 30), dtype), axis=1).astype(np.result_type(dtype, np.complex64))
    check_candidates(spectrum, cupy.asarray(spectrum), TOL[dtype], "forward", axes=[1], kind="c2r", s=[30],
                     norm="ortho", prolog=lambda v, k: v * (k + 1.0), epilog=lambda v: v * 2.0)
    real = data(rng, (4, 30), dtype)
    check_candidates(real, cupy.asarray(real), TOL[dtype], "inverse", axes=[1], norm="forward",
                     prolog=lambda v: v * 3.0, epilog=lambda v, k: v + k)


_LATE_FILL = r"""
extern "C" __global__ void late_fill(double* x, double value, long long n, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
    for (long long i = threadIdx.x; i < n; i += blockDim.x) x[i] = value;
}
"""


def test_forced_elementwise_runs_on_the_plans_stream(forced_elementwise):
    """The fallback kernels run on the plan's stream, after earlier work on it: the operand is
    filled late on that stream, and the prolog kernel must see the filled values."""
    n = 4096
    x = cupy.zeros(n, cupy.complex128)
    cupy.cuda.Device().synchronize()
    stream = cupy.cuda.Stream(non_blocking=True)
    with FFT(x, stream=stream, prolog=lambda v, k: v * (k + 1.0), epilog=lambda v: v * 0.5) as plan:
        plan.plan()
        flat = x.view(cupy.float64)
        with stream:
            cupy.RawKernel(_LATE_FILL, "late_fill")((1,), (256,), (flat, np.float64(2.0), np.int64(flat.size),
                                                                  np.int64(100_000_000)))
        got = plan.execute()
        stream.synchronize()
    want = np.fft.fft(np.full(n, 2.0 + 2.0j) * (np.arange(n) + 1.0)) * 0.5
    assert rel_err(got, want) < 1e-12
