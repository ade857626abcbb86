"""The cuFFT engine's own hot path, run on the host against an emulated cuFFT.

The engine runs unchanged on a NumPy-backed stand-in for CuPy (host addresses as device
pointers); cuFFT's plan-many, work-area, stream and exec calls are replaced by
:mod:`cuda_emulation_fft`, which reads back exactly the plan parameters the engine passed and
computes with numpy.fft in float64. Results are compared with numpy.fft in float64 for every
candidate strategy, kind, direction, norm, padding/cropping, axis order, non-contiguous and
transposed operands, more than three axes, dtypes and half precision; then the plan machinery
(plan cache, wisdom, streams, work areas, freeing) and the no-driver error.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

pytest.importorskip("cuda.pathfinder", reason="CUDA wheels not installed (pip install 'nvmathpy[cu13]')")

from cuda_emulation import HostArray, host, host_cupy  # noqa: E402
from cuda_emulation_fft import install  # noqa: E402
import nvmathpy.fft as nf  # noqa: E402
from nvmathpy.errors import ExecutionSpaceUnavailableError, InvalidOptionError, LibraryError  # noqa: E402
from nvmathpy.fft import FFT, FFTOptions  # noqa: E402
from nvmathpy.fft._driver import plan_cache  # noqa: E402

TOL = {np.dtype("complex128"): 1e-12, np.dtype("float64"): 1e-12, np.dtype("complex64"): 3e-6,
       np.dtype("float32"): 3e-6}


@pytest.fixture
def emu(monkeypatch):
    plan_cache().clear()
    emulator = install(monkeypatch.setattr, monkeypatch.setitem)
    yield emulator
    plan_cache().clear()  # cached plans hold emulated handles


@pytest.fixture
def rng():
    return np.random.default_rng()


def up(x):
    x = np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def rel_err(x, ref):
    x, ref = up(x), up(ref)
    assert x.shape == ref.shape
    assert np.isfinite(x).all()
    return np.linalg.norm((x - ref).ravel()) / max(np.linalg.norm(ref.ravel()), 1e-300)


def cplx(rng, shape, dtype=np.complex128):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def operand(rng, shape, layout, dtype):
    """``shape`` data laid out as "C", "F" (reversed axes), "step" (every other element of the
    last axis), "crop" (a view into a wider array) or "neg" (first axis reversed)."""
    make = (lambda s: cplx(rng, s, dtype)) if np.dtype(dtype).kind == "c" else (
        lambda s: rng.standard_normal(s).astype(dtype))
    if layout == "F":
        return make(shape[::-1]).T
    if layout == "step":
        return make(shape[:-1] + (2 * shape[-1],))[..., ::2]
    if layout == "crop":
        return make(shape[:-1] + (shape[-1] + 3,))[..., : shape[-1]]
    if layout == "neg":
        return make(shape)[::-1]
    return make(shape)


def every_candidate(plan, x, direction="forward"):
    """Run each candidate the engine offers on ``x``; yield (candidate, result)."""
    engine, problem = plan._engine, plan.problem
    candidates = engine.candidates(problem)
    assert candidates
    for candidate in candidates:
        prepared = engine.prepare(problem, candidate)
        try:
            call = prepared.forward if direction == "forward" else prepared.inverse
            yield candidate, call(x)
        finally:
            prepared.free()


NUMPY = {("c2c", "forward"): np.fft.fftn, ("c2c", "inverse"): np.fft.ifftn, ("r2c", "forward"): np.fft.rfftn,
         ("c2r", "inverse"): np.fft.irfftn}


# -- numerics of every candidate -------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["C", "F", "step", "crop", "neg"])
@pytest.mark.parametrize(("shape", "axes"), [
    ((17,), (0,)), ((6, 7), (0,)), ((6, 7), (1,)), ((6, 7), (1, 0)), ((4, 5, 3), (1,)), ((4, 5, 3), (0, 2)),
    ((4, 5, 3), (2, 0, 1)), ((2, 3, 4, 5), None), ((3, 2, 5, 2, 3), (4, 0, 2, 1)), ((1, 6), (0,)),
])
@pytest.mark.parametrize("direction", ["forward", "inverse"])
def test_c2c_every_candidate(emu, rng, shape, axes, layout, direction):
    x = operand(rng, shape, layout, np.complex128)
    before = x.copy()
    plan = FFT(host(x), axes=axes)
    ref = NUMPY["c2c", direction](x, axes=axes)
    for candidate, y in every_candidate(plan, host(x), direction):
        assert isinstance(y, HostArray) and y.dtype == np.complex128
        assert rel_err(y, ref) < TOL[y.dtype], candidate
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("layout", ["C", "F", "step"])
@pytest.mark.parametrize(("shape", "axes", "s"), [
    ((16,), (0,), None), ((9, 7), (0,), None), ((9, 7), (1, 0), None), ((5, 6, 7), (0, 2), None),
    ((3, 4, 5, 6), None, None), ((6, 7), (1,), (10,)), ((6, 7), (0, 1), (4, 5)), ((5, 1), (1,), None),
])
def test_r2c_and_c2r_every_candidate(emu, rng, shape, axes, s, layout):
    x = operand(rng, shape, layout, np.float64)
    ref = np.fft.rfftn(x, s=s, axes=axes)
    plan = FFT(host(x), axes=axes, s=s)
    for candidate, y in every_candidate(plan, host(x)):
        assert rel_err(y, ref) < 1e-12, candidate
    # and back: c2r of the spectrum (a plan-owned copy: cuFFT overwrites c2r inputs)
    spectrum = np.ascontiguousarray(ref)
    lengths = [x.shape[a] if s is None else s[i] for i, a in enumerate(plan.axes)]
    inverse = FFT(host(spectrum), axes=plan.axes, s=lengths, kind="c2r")
    before = spectrum.copy()
    for candidate, y in every_candidate(inverse, host(spectrum), "inverse"):
        assert rel_err(y, np.fft.irfftn(spectrum, s=lengths, axes=plan.axes)) < 1e-12, candidate
    np.testing.assert_array_equal(spectrum, before)


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_norms_and_hermitian_directions(emu, rng, norm):
    x, r = cplx(rng, (5, 12)), rng.standard_normal((5, 12))
    for ours, theirs, a in ((nf.fft, np.fft.fft, x), (nf.ifft, np.fft.ifft, x), (nf.rfft, np.fft.rfft, r),
                            (nf.irfft, np.fft.irfft, x), (nf.hfft, np.fft.hfft, x), (nf.ihfft, np.fft.ihfft, r),
                            (nf.fftn, np.fft.fftn, x), (nf.irfft2, np.fft.irfft2, x)):
        y = ours(host(a), norm=norm)
        assert isinstance(y, HostArray)
        assert rel_err(y, theirs(a, norm=norm)) < 1e-12, ours.__name__


@pytest.mark.parametrize(("n", "axis"), [(5, -1), (20, -1), (7, 0)])
def test_padding_and_cropping_n(emu, rng, n, axis):
    x = cplx(rng, (6, 9))
    assert rel_err(nf.fft(host(x), n=n, axis=axis), np.fft.fft(x, n=n, axis=axis)) < 1e-12
    r = x.real.copy()
    assert rel_err(nf.rfft(host(r), n=n, axis=axis), np.fft.rfft(r, n=n, axis=axis)) < 1e-12
    assert rel_err(nf.irfft(host(x), n=n, axis=axis), np.fft.irfft(x, n=n, axis=axis)) < 1e-12


@pytest.mark.parametrize(("dtype", "result"), [("float32", "complex64"), ("float16", "complex64"),
                                               ("complex64", "complex64"), ("float64", "complex128")])
def test_result_dtypes_follow_numpy(emu, rng, dtype, result):
    x = operand(rng, (4, 33), "C", dtype)
    y = nf.fft(host(x))
    assert y.dtype == np.dtype(result)
    tol = 1e-12 if result == "complex128" else 3e-6
    assert rel_err(y, np.fft.fft(up(x))) < tol
    if x.dtype.kind == "f":
        assert nf.rfft(host(x)).dtype == np.dtype(result)


# -- half precision --------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "shape", "axes"), [("r2c", (3, 64), (1,)), ("c2c", (16, 8), (0, 1)),
                                                    ("c2r", (4, 9), (1,)), ("r2c", (8, 4, 16), (0, 2))])
def test_half_precision(emu, rng, kind, shape, axes):
    options = FFTOptions(half_precision=True)
    if kind == "r2c":
        x = rng.standard_normal(shape).astype(np.float16)
        plan, ref = FFT(host(x), axes=axes, options=options), np.fft.rfftn(x.astype(np.float64), axes=axes)
    elif kind == "c2c":
        x = cplx(rng, shape, np.complex64)
        plan, ref = FFT(host(x), axes=axes, options=options), np.fft.fftn(x, axes=axes)
    else:
        x = cplx(rng, shape, np.complex64)
        s = [2 * (shape[-1] - 1)]
        plan, ref = FFT(host(x), axes=axes, s=s, kind="c2r", options=options), np.fft.irfftn(x, s=s, axes=axes)
    plan.plan()
    y = plan.execute()
    assert y.dtype == (np.float32 if kind == "c2r" else np.complex64)
    assert rel_err(y, ref) < 1e-2
    params = [p.params for p in emu.plans.values()]
    assert params and all(p["itype"].name.endswith("16F") and p["otype"].name.endswith("16F") for p in params)


def test_half_precision_refusals(emu, rng):
    half = FFTOptions(half_precision=True)
    with pytest.raises(InvalidOptionError, match=r"power-of-2 lengths.*\[12\]"):
        FFT(host(rng.standard_normal(12).astype(np.float16)), options=half)
    with pytest.raises(InvalidOptionError, match="needs CUDA execution"):
        FFT(rng.standard_normal(16), options=half)
    with pytest.raises(InvalidOptionError, match="in place"):
        FFT(host(cplx(rng, 16, np.complex64)), options=half, inplace=True)
    with pytest.raises(InvalidOptionError, match="precision"):
        FFT(host(cplx(rng, 16)), options=half)
    with pytest.raises(InvalidOptionError, match="half_precision must be True or False"):
        FFTOptions(half_precision=1)


# -- in place --------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["C", "F"])
def test_inplace_writes_the_operand(emu, rng, layout):
    x = operand(rng, (6, 10), layout, np.complex128)
    ref = np.fft.fft(x, axis=0)
    hx = host(x)
    with FFT(hx, axes=[0], inplace=True) as plan:
        plan.plan()
        assert plan.execute() is hx
        assert rel_err(x, ref) < 1e-12
        plan.autotune(effort="exhaustive", repeats=1)  # timing runs on a copy
        assert rel_err(x, ref) < 1e-12


def test_inplace_needs_a_dense_operand(emu, rng):
    with pytest.raises(InvalidOptionError, match="without gaps"):
        FFT(host(cplx(rng, (6, 20)))[:, ::2], inplace=True)


# -- what the engine configures --------------------------------------------------------------------


def test_plan_parameters_work_area_and_stream(emu, rng):
    x = cplx(rng, (8, 3))
    with FFT(host(x), axes=[0], stream=1234) as plan:
        plan.plan()
        (handle, made), = emu.plans.items()
        p = made.params
        assert (p["rank"], p["n"], p["istride"], p["idist"], p["ostride"], p["odist"], p["batch"]) == (
            1, [8], 3, 1, 3, 1, 3)
        assert not made.auto_allocation and made.work_area is not None
        plan.execute()
        plan.execute(direction="inverse")
        assert emu.executed == [(handle, 1234), (handle, 1234)]
    assert emu.destroyed == [handle] and not emu.plans


def test_current_stream_followed_per_call(emu, rng, monkeypatch):
    streams = iter([5, 11, 11, 22])  # planning reads it once (the work area's stream), then each call
    monkeypatch.setattr(sys.modules["cupy"].cuda, "get_current_stream", lambda: type("S", (), {"ptr": next(streams)}))
    plan = FFT(host(cplx(rng, 16))).plan()
    for _ in range(3):
        plan.execute()
    assert [stream for _, stream in emu.executed] == [11, 11, 22]
    plan.free()


def test_one_call_functions_reuse_cached_plans(emu, rng):
    x = cplx(rng, (3, 10))
    nf.fft(host(x))
    made = len(emu.plans)
    for _ in range(3):  # fresh data, same plan
        fresh = cplx(rng, (3, 10))
        assert rel_err(nf.fft(host(fresh)), np.fft.fft(fresh)) < 1e-12
    assert len(emu.plans) == made and plan_cache().hits >= 3
    out = host(np.empty((3, 10), np.complex128))
    assert nf.fft(host(x), out=out) is out
    assert rel_err(out, np.fft.fft(x)) < 1e-12


def test_autotune_and_wisdom(emu, rng):
    x = cplx(rng, (4, 5, 6))
    with FFT(host(x), axes=[1]) as plan:
        timings = plan.autotune(effort="exhaustive", repeats=1)
        assert len(timings) >= 2 and plan.chosen_by == "autotune"
        assert rel_err(plan.execute(), np.fft.fft(x, axis=1)) < 1e-12
        winner = plan.candidate
    with FFT(host(x), axes=[1]) as again:
        again.plan()
        assert again.chosen_by == "wisdom" and again.candidate == winner


def test_candidates_prefer_no_copy_and_few_calls(emu, rng):
    plan = FFT(host(cplx(rng, (2, 5, 3))), axes=[1])  # strided: 2 calls, no copy
    assert [c.params["layout"] for c in plan._engine.candidates(plan.problem)] == ["strided", "transposed"]
    wide = FFT(host(cplx(rng, (20, 3, 30))), axes=[1])  # strided: batch 30, 20 calls: copy first
    assert [c.params["layout"] for c in wide._engine.candidates(wide.problem)][0] == "transposed"


# -- no driver -------------------------------------------------------------------------------------


def test_no_driver_raises_the_clear_error(monkeypatch, rng):
    from nvmathpy.cuda import cuda_status

    if cuda_status().available:
        pytest.skip("CUDA is usable here")
    monkeypatch.setitem(sys.modules, "cupy", host_cupy())
    x = host(cplx(rng, 8))
    with pytest.raises(ExecutionSpaceUnavailableError, match="CUDA is not available"):
        FFT(x)
    with pytest.raises(ExecutionSpaceUnavailableError, match="CUDA is not available"):
        nf.fft(x)


def test_reset_operand_autotune_and_free_leave_no_plan_behind(emu, rng):
    x, x2 = cplx(rng, (7, 12)), cplx(rng, (7, 12))
    plan = FFT(host(x), axes=[0])
    plan.autotune(effort="exhaustive", repeats=1)
    from nvmathpy.fft._cuda_engine import engine_schedules

    chosen, _ = engine_schedules(plan.problem)[plan.candidate.params["layout"]]
    assert len(emu.plans) == len(chosen.steps)  # the losers' plans are destroyed
    assert rel_err(plan.execute(), np.fft.fft(x, axis=0)) < 1e-12
    plan.reset_operand(host(x2))
    assert rel_err(plan.execute(), np.fft.fft(x2, axis=0)) < 1e-12
    plan.free()
    assert not emu.plans


def test_execution_device_must_be_the_operands(emu, rng, monkeypatch):
    from nvmathpy.cuda import driver
    from nvmathpy.errors import InvalidOperandError
    from nvmathpy.execution import ExecutionCUDA

    monkeypatch.setattr(driver, "cuda_status", lambda: driver.CudaStatus(True, None, 2))
    with pytest.raises(InvalidOperandError, match="cuda:1 but x lives on cuda:0"):
        FFT(host(cplx(rng, 8)), execution=ExecutionCUDA(1))


@pytest.mark.parametrize("layout", ["C", "F", "step"])
def test_host_operands_with_cuda_execution_come_back_to_the_host(emu, rng, layout):
    x = operand(rng, (9, 16), layout, np.complex128)
    keep = x.copy()
    with FFT(x, axes=[0], execution="cuda") as plan:
        plan.plan()
        assert plan._engine.name == "cuda-cufft"
        got = plan.execute()
        back = plan.execute(direction="inverse")
    assert type(got) is np.ndarray and rel_err(got, np.fft.fft(keep, axis=0)) < 1e-12
    assert rel_err(back, np.fft.ifft(keep, axis=0)) < 1e-12
    np.testing.assert_array_equal(x, keep)
    r = operand(rng, (9, 16), layout, np.float32)
    got = FFT(r, execution="cuda").plan().execute()
    assert type(got) is np.ndarray and got.dtype == np.complex64
    assert rel_err(got, np.fft.rfftn(r.astype(np.float64))) < 3e-6
    if layout != "step":
        ref = np.fft.fft(x, axis=1)
        with FFT(x, axes=[1], execution="cuda", inplace=True) as plan:
            assert plan.plan().execute() is x
        assert rel_err(x, ref) < 1e-12


def test_torch_cpu_tensors_with_cuda_execution(emu, rng):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((5, 12))
    got = FFT(torch.from_numpy(x), execution="cuda").plan().execute()
    assert isinstance(got, torch.Tensor) and got.device.type == "cpu"
    assert rel_err(got.numpy(), np.fft.rfftn(x)) < 1e-12


def test_a_layout_cufft_refuses_falls_back_to_the_transposed_one(emu, rng):
    x = cplx(rng, (5, 7, 3))
    # refuse interleaved batches (the batch distance inside one transform's span)
    emu.refuse = lambda p: p["batch"] > 1 and p["idist"] < p["istride"] * math.prod(p["inembed"][1:]) * p["n"][0]
    with FFT(host(x), axes=[0, 2]) as plan:
        assert plan._engine.candidates(plan.problem)[0].params["layout"] == "strided"
        plan.plan()
        assert plan.candidate.params["layout"] == "transposed"
        assert rel_err(plan.execute(), np.fft.fftn(x, axes=(0, 2))) < 1e-12
    emu.refuse = lambda p: True
    with pytest.raises(LibraryError, match="CUFFT_INVALID_VALUE"):
        FFT(host(x), axes=[0, 2]).plan()
