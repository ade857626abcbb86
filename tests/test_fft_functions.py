"""nvmathpy.fft's numpy.fft-compatible functions against numpy.fft (float64 references)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nvmathpy.fft as nfft
from nvmathpy.fft._driver import plan_cache

NORMS = [None, "backward", "ortho", "forward"]
SIZES = [1, 2, 8, 15, 64, 97, 210, 1000, 1024, 4099]  # powers of two, odd, smooth, prime, large prime


def rel_err(got, want) -> float:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.all(np.isfinite(got))
    scale = np.linalg.norm(want.ravel())
    return float(np.linalg.norm((got - want).ravel()) / (scale if scale else 1.0))


def tol(dtype, n: int) -> float:
    if np.dtype(dtype) in (np.float32, np.complex64):
        return 1e-5 * math.sqrt(max(1.0, math.log2(max(n, 2))))
    return 1e-12


def real(rng, shape, dtype=np.float64):
    return rng.standard_normal(shape).astype(dtype)


def cplx(rng, shape, dtype=np.complex128):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def upcast(x):
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
def test_1d_sizes_norms(rng, name, norm, n):
    realin = name in ("rfft", "ihfft")
    x = real(rng, (3, n)) if realin else cplx(rng, (3, n))
    if name in ("irfft", "hfft") and n == 1:
        pytest.skip("2*(m-1) == 0 output points")
    got = getattr(nfft, name)(x, norm=norm)
    want = getattr(np.fft, name)(x, norm=norm)
    assert got.dtype == want.dtype
    assert rel_err(got, want) < tol(np.float64, n)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float16, np.int32, np.bool_])
@pytest.mark.parametrize("name", ["fft", "rfft", "ifft", "ihfft"])
def test_1d_dtypes_follow_numpy2(rng, dtype, name):
    if name in ("rfft", "ihfft") and np.dtype(dtype).kind == "c":
        pytest.skip("real transform of complex input is an error (tested below)")
    x = cplx(rng, (4, 33)) if np.dtype(dtype).kind == "c" else rng.standard_normal((4, 33)) * 3
    x = x.astype(dtype)
    got = getattr(nfft, name)(x)
    want = getattr(np.fft, name)(x)
    assert got.dtype == want.dtype
    assert rel_err(got, getattr(np.fft, name)(upcast(x.astype(np.float64) if x.dtype.kind in "bi" else x))) < tol(got.dtype, 33)


@pytest.mark.parametrize("n", [5, 16, 40])
@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
def test_1d_padding_cropping_axis(rng, name, n):
    x = real(rng, (24, 7)) if name in ("rfft", "ihfft") else cplx(rng, (24, 7))
    for axis in (0, -2):
        got = getattr(nfft, name)(x, n=n, axis=axis, norm="ortho")
        want = getattr(np.fft, name)(x, n=n, axis=axis, norm="ortho")
        assert rel_err(got, want) < 1e-12


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize(
    "axes,s",
    [(None, None), ((0, 1), None), ((1, 0), (6, 9)), ((-1, 0, 1), (5, 4, 11)), ((2,), (3,)), ((0, 2), (8, -1))],
)
@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn"])
def test_nd_axes_permutations_and_s(rng, name, axes, s, norm):
    x = real(rng, (6, 7, 10)) if name == "rfftn" else cplx(rng, (6, 7, 10))
    got = getattr(nfft, name)(x, s=s, axes=axes, norm=norm)
    want = getattr(np.fft, name)(x, s=s, axes=axes, norm=norm)
    assert got.dtype == want.dtype
    assert rel_err(got, want) < 1e-12


@pytest.mark.parametrize("name", ["fft2", "ifft2", "rfft2", "irfft2"])
def test_2d_functions(rng, name):
    x = real(rng, (3, 12, 9)) if name == "rfft2" else cplx(rng, (3, 12, 9))
    assert rel_err(getattr(nfft, name)(x), getattr(np.fft, name)(x)) < 1e-12
    assert rel_err(getattr(nfft, name)(x, s=(5, 14), axes=(0, 2)), getattr(np.fft, name)(x, s=(5, 14), axes=(0, 2))) < 1e-12


def test_more_than_three_axes(rng):
    x = cplx(rng, (3, 4, 5, 6, 2))
    assert rel_err(nfft.fftn(x), np.fft.fftn(x)) < 1e-12
    r = real(rng, (3, 4, 5, 6, 2))
    assert rel_err(nfft.rfftn(r, axes=(4, 0, 3, 1)), np.fft.rfftn(r, axes=(4, 0, 3, 1))) < 1e-12


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nd_single_precision(rng, dtype):
    x = real(rng, (16, 30, 17), dtype)
    got = nfft.rfftn(x)
    assert got.dtype == np.fft.rfftn(x).dtype
    assert rel_err(got, np.fft.rfftn(upcast(x))) < tol(dtype, x.size)
    c = cplx(rng, (16, 30, 17), np.complex64 if dtype == np.float32 else np.complex128)
    assert rel_err(nfft.ifftn(c), np.fft.ifftn(upcast(c))) < tol(dtype, c.size)


@pytest.mark.parametrize("layout", ["transposed", "fortran", "strided", "negative"])
@pytest.mark.parametrize("name", ["fft", "rfftn", "irfft", "fft2"])
def test_non_contiguous_inputs(rng, layout, name):
    base = real(rng, (20, 18, 4)) if name == "rfftn" else cplx(rng, (20, 18, 4))
    x = {
        "transposed": base.transpose(2, 0, 1),
        "fortran": np.asfortranarray(base),
        "strided": base[::2, 1::3, :],
        "negative": base[::-1, :, ::-1],
    }[layout]
    assert rel_err(getattr(nfft, name)(x), getattr(np.fft, name)(np.ascontiguousarray(x))) < 1e-12


@pytest.mark.parametrize("name", ["fft", "ifftn", "rfft", "irfftn", "hfft", "ihfft"])
def test_inputs_are_not_modified(rng, name):
    x = real(rng, (9, 16)) if name in ("rfft", "ihfft") else cplx(rng, (9, 16))
    before = x.copy()
    getattr(nfft, name)(x)
    getattr(nfft, name)(x)  # second call: from the plan cache
    np.testing.assert_array_equal(x, before)


def test_repeated_call_reuses_cached_plan(rng, monkeypatch):
    """Transforms beyond the quick path (here more than QUICK_ELEMENTS elements) run on cached plans."""
    from nvmathpy.fft import fft_plan
    from nvmathpy.fft._quick import QUICK_ELEMENTS

    plan_cache().clear()
    planned = []
    original = fft_plan.FFT.plan
    monkeypatch.setattr(fft_plan.FFT, "plan", lambda self: planned.append(1) or original(self))
    rows = QUICK_ELEMENTS // 48 + 1
    x, y = cplx(rng, (rows, 48)), cplx(rng, (rows, 48))
    first = nfft.fft(x)
    second = nfft.fft(y)
    assert len(planned) == 1
    assert plan_cache().hits == 1 and plan_cache().misses == 1
    assert rel_err(first, np.fft.fft(x)) < 1e-12 and rel_err(second, np.fft.fft(y)) < 1e-12
    nfft.ifft(y)  # same problem, other direction: same plan
    assert len(planned) == 1
    nfft.fft(cplx(rng, (rows, 49)))  # another problem plans again
    assert len(planned) == 2


def test_out_argument(rng):
    x = cplx(rng, (4, 10))
    out = np.empty((4, 10), np.complex128)
    assert nfft.fft(x, out=out) is out
    assert rel_err(out, np.fft.fft(x)) < 1e-12


def test_array_likes():
    assert rel_err(nfft.fft([1.0, 2.0, 3.0]), np.fft.fft([1.0, 2.0, 3.0])) < 1e-12
    assert rel_err(nfft.rfft((1, 5, 2, 7)), np.fft.rfft((1, 5, 2, 7))) < 1e-12


def test_helpers_match_numpy(rng):
    x = real(rng, (5, 8))
    np.testing.assert_array_equal(nfft.fftfreq(9, 0.3), np.fft.fftfreq(9, 0.3))
    np.testing.assert_array_equal(nfft.rfftfreq(9, 0.3), np.fft.rfftfreq(9, 0.3))
    np.testing.assert_array_equal(nfft.fftshift(x, axes=1), np.fft.fftshift(x, axes=1))
    np.testing.assert_array_equal(nfft.ifftshift(x), np.fft.ifftshift(x))


@pytest.mark.parametrize(
    "call,error,match",
    [
        (lambda x: nfft.fft(x, n=0), ValueError, "Invalid number of FFT data points"),
        (lambda x: nfft.fft(x, n=-3), ValueError, "Invalid number"),
        (lambda x: nfft.fft(x, n=2.5), TypeError, "integer"),
        (lambda x: nfft.fft(x, axis=2), IndexError, "out of bounds"),
        (lambda x: nfft.fft(x, axis=-3), ValueError, "out of bounds"),
        (lambda x: nfft.fftn(x, s=(4,), axes=(0, 1)), ValueError, "different lengths"),
        (lambda x: nfft.fft(x, norm="sideways"), ValueError, "sideways"),
        (lambda x: nfft.rfft(x + 1j), TypeError, "real operand"),
        (lambda x: nfft.irfft(x[:, :1]), ValueError, r"\(0\)"),
        (lambda x: nfft.fft(x.astype(object)), TypeError, "dtype"),
    ],
)
def test_bad_input_numpy_like_errors(rng, call, error, match):
    with pytest.raises(error, match=match):
        call(real(rng, (4, 6)))


@pytest.mark.parametrize("name", ["fftn", "ifft2", "rfftn", "irfftn"])
def test_an_axis_named_twice_is_transformed_twice_as_numpy_does(rng, name):
    x = real(rng, (4, 6)) if name.startswith("rfft") else cplx(rng, (4, 6))
    got, want = getattr(nfft, name)(x, axes=(0, 1, 0)), getattr(np.fft, name)(x, axes=(0, 1, 0))
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.linalg.norm(got - want) <= 1e-12 * np.linalg.norm(want)


def test_zero_d_input_raises():
    with pytest.raises(IndexError):
        nfft.fft(np.float64(3.0))


def test_torch_tensors_round_trip(rng):
    torch = pytest.importorskip("torch")
    x = cplx(rng, (6, 20))
    t = torch.from_numpy(x.copy())
    got = nfft.fft(t)
    assert isinstance(got, torch.Tensor)
    assert rel_err(got.numpy(), np.fft.fft(x)) < 1e-12
    r = torch.from_numpy(real(rng, (6, 20), np.float32))
    got = nfft.rfftn(r)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.complex64
    assert rel_err(got.numpy(), np.fft.rfftn(r.numpy().astype(np.float64))) < tol(np.float32, 120)
    shifted = nfft.fftshift(r)
    assert isinstance(shifted, torch.Tensor)
    np.testing.assert_array_equal(shifted.numpy(), np.fft.fftshift(r.numpy()))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    shape=st.lists(st.integers(1, 9), min_size=1, max_size=4),
    data=st.data(),
    kind=st.sampled_from(["fftn", "ifftn", "rfftn", "irfftn"]),
    norm=st.sampled_from(NORMS),
)
def test_hypothesis_shapes_axes(shape, data, kind, norm):
    rng = np.random.default_rng(len(shape) * 100 + sum(shape))
    ndim = len(shape)
    axes = data.draw(st.permutations(range(ndim)).flatmap(lambda p: st.integers(1, ndim).map(lambda k: p[:k])))
    axes = [a - ndim if data.draw(st.booleans()) else a for a in axes]
    s = data.draw(st.none() | st.lists(st.integers(1, 10), min_size=len(axes), max_size=len(axes)))
    x = real(rng, shape) if kind == "rfftn" else cplx(rng, shape)
    if kind == "irfftn" and s is None and x.shape[axes[-1]] == 1:
        s = [2] * len(axes)
    got = getattr(nfft, kind)(x, s=s, axes=axes, norm=norm)
    want = getattr(np.fft, kind)(x, s=s, axes=axes, norm=norm)
    assert got.dtype == want.dtype
    assert rel_err(got, want) < 1e-12


@pytest.mark.parametrize("name", [n for n in nfft.__all__ if n not in ("FFT", "FFTOptions", "DCT", "DST")])
def test_signatures_match_numpy(name):  # the plan classes are nvmathpy's own
    import inspect

    def params(fn):
        return [(p.name, p.default, p.kind) for p in inspect.signature(fn).parameters.values()]

    assert params(getattr(nfft, name)) == params(getattr(np.fft, name))
