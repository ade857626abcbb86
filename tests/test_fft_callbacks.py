"""FFT prolog/epilog callbacks: results against NumPy references, inputs, the index k, errors, keys."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvmathpy.errors import ExecutionSpaceUnavailableError, InvalidOperandError, InvalidOptionError
from nvmathpy.execution import ExecutionCPU
from nvmathpy.fft import FFT
from nvmathpy.kernels.trace import UnsupportedOperationError
from test_fft_plan import ENGINES, cplx, rel_err

TOL = {np.float32: 2e-5, np.float64: 1e-12, np.complex64: 2e-5, np.complex128: 1e-12}


@pytest.fixture
def rng():
    return np.random.default_rng(2024)


def run(x, **kwargs):
    with FFT(x, **kwargs) as plan:
        plan.plan()
        return plan.execute()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("n", [8, 7, 13])
def test_c2c_window_and_filter_each_engine(rng, engine, dtype, n):
    x = cplx(rng, (3, n), dtype)
    window, filt = rng.uniform(0.5, 1.5, n), cplx(rng, n)
    got = run(
        x, axes=[1], options={"engines": [engine]}, execution=ExecutionCPU(1),
        prolog=lambda v, window: v * window, epilog=lambda v, filt: v * filt,
        callback_inputs={"window": window, "filt": filt},
    )
    want = np.fft.fft(window * x.astype(np.complex128), axis=1) * filt
    assert got.dtype == dtype and rel_err(got, want) < TOL[dtype]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_r2c_2d_batched_with_scalar_and_k(rng, dtype):
    x = rng.standard_normal((4, 6, 10)).astype(dtype)
    scale = 0.75
    got = run(x, axes=[1, 2], prolog=lambda v, a: v * a + 1.0, epilog=lambda v, k: v / (k + 1.0),
              callback_inputs={"a": scale})
    want = np.fft.rfftn(x.astype(np.float64) * scale + 1.0, axes=(1, 2)) / (np.arange(6) + 1.0)
    assert got.shape == (4, 6, 6) and rel_err(got, want) < TOL[dtype] * 3


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_c2r_prolog_on_complex_epilog_on_real(rng, dtype):
    x = cplx(rng, (5, 9), dtype)
    gain = cplx(rng, (5, 1))
    bias = rng.standard_normal((1, 16))
    got = run(x, axes=[1], kind="c2r", s=[16], prolog=lambda v, gain: v * gain, epilog=lambda v, bias: np.exp(v) - bias,
              callback_inputs={"gain": gain, "bias": bias})
    want = np.exp(np.fft.irfft(x.astype(np.complex128) * gain, n=16, axis=1)) - bias
    assert got.dtype == (np.float32 if dtype == np.complex64 else np.float64)
    assert rel_err(got, want) < TOL[dtype] * 3


@pytest.mark.parametrize(
    "shape_of",  # callback input shapes for a (2, 3, 12) operand transformed along axis 1
    [(), (3, 1), (2, 3, 1), (2, 1, 12), (2, 3, 12), (12,)],
)
def test_callback_input_shapes_and_middle_axis(rng, shape_of):
    x = cplx(rng, (2, 3, 12))
    w = rng.standard_normal(shape_of) if shape_of else 2.5
    got = run(x, axes=[1], prolog=lambda v, w: v * w, epilog=lambda v, w, k: v * w + k, callback_inputs={"w": w})
    k = np.arange(3)[:, None]
    want = np.fft.fft(x * w, axis=1) * w + k
    assert rel_err(got, want) < 1e-12


def test_k_is_the_index_along_the_last_transformed_axis(rng):
    x = cplx(rng, (6, 10))
    got = run(x, axes=[1, 0], prolog=lambda v, k: np.where(k < 3, v, 0), epilog=lambda v, k: v * (k * k))
    masked = np.where(np.arange(6)[:, None] < 3, x, 0)
    want = np.fft.fftn(masked, axes=(1, 0)) * (np.arange(6)[:, None] ** 2)
    assert rel_err(got, want) < 1e-12


@pytest.mark.parametrize("n", [16, 5])
def test_prolog_sees_the_operand_before_padding_after_cropping(rng, n):
    x = cplx(rng, 9)
    got = run(x, s=[n], prolog=lambda v: v + 1.0)
    assert rel_err(got, np.fft.fft(x[:n] + 1.0, n=n)) < 1e-12


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_epilog_runs_after_normalisation_both_directions(rng, norm):
    x = cplx(rng, (2, 11))
    with FFT(x, norm=norm, epilog=lambda v, k: v - k) as plan:
        plan.plan()
        fwd, inv = plan.execute(), plan.execute(direction="inverse")
    k = np.arange(11)
    assert rel_err(fwd, np.fft.fftn(x, norm=norm) - k) < 1e-12
    assert rel_err(inv, np.fft.ifftn(x, norm=norm) - k) < 1e-12


def test_non_contiguous_operand_and_repeated_execute(rng):
    base = cplx(rng, (14, 8))
    x = base.T[:, ::2]  # (8, 7), not contiguous
    window = np.hanning(7)
    with FFT(x, axes=[-1], prolog=lambda v, w: v * w, callback_inputs={"w": window}) as plan:
        plan.plan()
        first, second = plan.execute(), plan.execute()
    want = np.fft.fft(x * window)
    assert rel_err(first, want) < 1e-12 and rel_err(second, want) < 1e-12


def test_inplace_epilog(rng):
    x = cplx(rng, (3, 8))
    want = np.abs(np.fft.fft(x)) * 2.0
    with FFT(x, axes=[-1], inplace=True, epilog=lambda v: abs(v) * 2) as plan:
        plan.plan()
        assert plan.execute() is x
    assert rel_err(x, want) < 1e-12


@settings(max_examples=20, deadline=None)
@given(
    n=st.integers(1, 40),
    batch=st.integers(1, 4),
    kind=st.sampled_from(["c2c", "r2c"]),
    single=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_property_window_filter(n, batch, kind, single, seed):
    rng = np.random.default_rng(seed)
    real = np.float32 if single else np.float64
    x = rng.standard_normal((batch, n)).astype(real) if kind == "r2c" else cplx(rng, (batch, n), np.complex64 if single else np.complex128)
    window = rng.uniform(0.5, 1.5, n)
    m = n // 2 + 1 if kind == "r2c" else n
    filt = rng.uniform(0.5, 1.5, m)
    got = run(x, axes=[-1], prolog=lambda v, w: v * w, epilog=lambda v, f, k: v * f + k, callback_inputs={"w": window, "f": filt})
    transform = np.fft.rfft if kind == "r2c" else np.fft.fft
    want = transform(x.astype(np.complex128 if kind == "c2c" else np.float64) * window) * filt + np.arange(m)
    assert rel_err(got, want) < (1e-4 if single else 1e-11)


def test_caller_arrays_are_never_modified(rng):
    x, window, filt = cplx(rng, (3, 8)), rng.standard_normal(8), cplx(rng, 8)
    copies = [a.copy() for a in (x, window, filt)]
    with FFT(x, prolog=lambda v, w: v * w + 3, epilog=lambda v, f: v * f, callback_inputs={"w": window, "f": filt}) as p:
        p.plan()
        p.autotune(effort="estimate", repeats=1)
        p.execute()
        p.execute(direction="inverse")
    for before, after in zip(copies, (x, window, filt)):
        np.testing.assert_array_equal(before, after)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"prolog": lambda v: np.sin(v)}, UnsupportedOperationError, r"np\.sin"),
        ({"epilog": lambda v, gamma: v * gamma}, InvalidOperandError, r"'gamma'"),
        ({"epilog": lambda v, row: v * row}, InvalidOperandError, r"'row'"),
        ({"epilog": lambda v: v, "callback_inputs": {"w": 1.0}}, InvalidOperandError, r"\['w'\]"),
        ({"epilog": lambda v: np.maximum(v, 0)}, UnsupportedOperationError, r"'maximum'.*complex"),
        ({"prolog": lambda v: v < 1}, UnsupportedOperationError, r"'lt'"),
        ({"epilog": lambda v, w: v * w, "callback_inputs": {"w": np.ones(5)}}, InvalidOperandError, r"shape \(5,\)"),
        ({"epilog": lambda v, w: v * w, "callback_inputs": {"w": np.array(["a"] * 8)}}, InvalidOperandError, "dtype"),
        ({"epilog": lambda v: v, "callback_inputs": [1]}, InvalidOptionError, "callback_inputs"),
        ({"epilog": 3}, InvalidOperandError, "epilog=3"),
        ({"prolog": lambda v: v, "inplace": True}, InvalidOptionError, "inplace"),
        ({"epilog": lambda v: v, "execution": "cuda"}, ExecutionSpaceUnavailableError, "CUDA is not available"),
    ],
)
def test_bad_callbacks_raise_before_work(rng, kwargs, error, match):
    with pytest.raises(error, match=match):
        FFT(cplx(rng, (2, 8)), **kwargs)


def test_complex_input_to_real_prolog_is_refused(rng):
    with pytest.raises(InvalidOperandError, match="complex"):
        FFT(rng.standard_normal(8), prolog=lambda v, w: v * w, callback_inputs={"w": cplx(rng, 8)})
    with pytest.raises(InvalidOperandError, match="complex"):
        FFT(rng.standard_normal(8), prolog=lambda v, w: v * w, callback_inputs={"w": 1j})


def test_real_data_allows_comparisons(rng):
    x = rng.standard_normal((2, 9))
    got = run(x, axes=[1], prolog=lambda v: np.maximum(v, 0.0), epilog=lambda v, k: np.where(k > 2, 0, v))
    want = np.fft.rfft(np.maximum(x, 0.0))
    want[:, 3:] = 0
    assert rel_err(got, want) < 1e-12


def test_problem_key_has_the_ir_and_identical_lambdas_share_wisdom(rng):
    x = cplx(rng, (2, 24))
    filt = rng.standard_normal(24)
    first = FFT(x, axes=[1], epilog=lambda v, f: v * f, callback_inputs={"f": filt}, execution=ExecutionCPU(1))
    twin = FFT(x, axes=[1], epilog=lambda v, f: v * f, callback_inputs={"f": filt * 2}, execution=ExecutionCPU(1))
    other = FFT(x, axes=[1], epilog=lambda v, f: v + f, callback_inputs={"f": filt}, execution=ExecutionCPU(1))
    plain = FFT(x, axes=[1], execution=ExecutionCPU(1))
    assert first.problem.get("epilog") == "mul(v, f)" and first.problem.get("prolog") is None
    assert first.problem == twin.problem and first.problem.digest() == twin.problem.digest()
    assert other.problem != first.problem and plain.problem != first.problem
    first.plan()
    first.autotune(effort="measure", repeats=1)
    twin.plan()
    assert twin.chosen_by == "wisdom" and twin.candidate == first.candidate
    assert rel_err(twin.execute(), np.fft.fft(x, axis=1) * filt * 2) < 1e-12
    for plan in (first, twin, other, plain):
        plan.free()


def test_value_parameter_name_does_not_change_the_key(rng):
    x = cplx(rng, 16)
    a = FFT(x, prolog=lambda v, k: v * k, epilog=lambda value: value * 2)
    b = FFT(x, prolog=lambda z, k: z * k, epilog=lambda y: y * 2)
    assert a.problem == b.problem and a.problem.get("prolog") == "mul(v, <col>)"
    assert rel_err(b.plan().execute(), np.fft.fft(x * np.arange(16)) * 2) < 1e-12
    b.free()
    a.free()


@pytest.mark.parametrize("source", [np.float32, np.int16, np.complex64])
def test_prolog_fused_into_the_converting_copy(rng, source):
    """The prolog runs in the staging copy itself (one pass, block by block): operands of
    another dtype (converted on the way), large enough to span several blocks, padded by s."""
    x = (rng.standard_normal((300, 257)) * 100).astype(source) if source != np.complex64 else cplx(rng, (300, 257), source)
    before = x.copy()
    window = rng.uniform(0.5, 1.5, 257)
    got = run(x.astype(source), axes=[1], s=[300], kind="c2c", prolog=lambda v, w, k: v * w + 0.25 * k,
              callback_inputs={"w": window})
    want = np.fft.fft(x.astype(np.complex128) * window + 0.25 * np.arange(257), n=300, axis=1)
    assert got.dtype == np.complex128 if source == np.int16 else got.dtype in (np.complex64, np.complex128)
    assert rel_err(got, want) < TOL[np.complex64]
    assert np.array_equal(x, before)
