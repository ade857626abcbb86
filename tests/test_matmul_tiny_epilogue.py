"""Small products with an epilogue on the CPU.

- The compiled tiny kernel's ``bias_relu(d, bias, relu)``: exactly NumPy's ``maximum(d + bias,
  0)`` (NaN kept, -0 made +0, infinities), in place, for every batch and bias shape it takes;
  ``NotImplemented`` for what it does not take.
- Plans of ``bias``, ``relu`` and ``relu_bias`` on tiny products run the kernel's product and
  ``bias_relu``; other biases (one value per row, not contiguous) and the other
  epilogues run the NumPy chain after the kernel's product - every route against a float64
  reference.
- The one-call ``matmul`` with those epilogues on a tiny product makes the plan's call without a
  plan; everything else (other biases, inputs, dtypes, bad shapes) takes the planned route,
  which reports what is wrong.
- The NumPy chain of an epilogue never warns about overflow, whatever the caller's error
  settings, and leaves them as it found them.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from numerics import rand as fresh

import nvmathpy.linalg as la
from nvmathpy.errors import InvalidOperandError
from nvmathpy.linalg.gemm import _tiny, matmul_plan
from nvmathpy.linalg.gemm.cpu import _program
from nvmathpy.linalg.gemm.cpu._tiny_c import TINY_EXTENSION

MODULE = TINY_EXTENSION.get(wait=True)
needs_kernel = pytest.mark.skipif(MODULE is None, reason="no C compiler or Python headers: the kernel cannot be built")
TOLERANCE = {np.float32: 2e-6, np.float64: 1e-14, np.complex64: 4e-6, np.complex128: 2e-14}
SPECIAL = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-310, -1e-310])


def rand(shape, dtype, seed):
    return fresh(np.random.default_rng(seed), shape, dtype)


def same_bits(got, want):
    """Equal values, NaN where NaN, and the same sign of every number (zeros included; a NaN's
    sign is whichever operand's NaN the hardware passed on)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    for x, y in ((got.real, want.real), (got.imag, want.imag)) if got.dtype.kind == "c" else ((got, want),):
        np.testing.assert_array_equal(x, y)
        numbers = ~np.isnan(y)
        assert np.array_equal(np.signbit(x[numbers]), np.signbit(y[numbers]))


@needs_kernel
@settings(max_examples=150, deadline=None)
@given(batch=st.sampled_from([(), (1,), (3,), (2, 3)]), m=st.integers(1, 9), n=st.integers(1, 19),
       dtype=st.sampled_from([np.float32, np.float64, np.complex64, np.complex128]),
       bias_shape=st.sampled_from(["none", "n", "1n", "11n"]), relu=st.booleans(), specials=st.booleans(),
       seed=st.integers(0, 2**16))
def test_bias_relu_is_numpys_add_and_maximum(batch, m, n, dtype, bias_shape, relu, specials, seed):
    if relu and np.dtype(dtype).kind == "c":
        relu = False  # ReLU is for real results (the epilogues refuse complex ones)
    d = rand(batch + (m, n), dtype, seed)
    if specials:  # NaN, infinities, signed zeros and subnormals among the values
        flat = d.reshape(-1)
        flat[:: 3] = np.resize(SPECIAL, flat[:: 3].shape).astype(dtype)
    shape = {"none": None, "n": (n,), "1n": (1, n), "11n": (1, 1, n)}[bias_shape]
    if shape is not None and len(shape) > d.ndim:
        shape = (n,)
    bias = None if shape is None else rand(shape, dtype, seed + 1)
    if bias is not None and specials:
        bias.reshape(-1)[:: 2] = np.resize(SPECIAL, bias.reshape(-1)[:: 2].shape).astype(dtype)
    bias_before = None if bias is None else bias.copy()
    with np.errstate(all="ignore"):
        want = d if bias is None else d + bias
        want = np.maximum(want, 0) if relu else want
    got = MODULE.bias_relu(d, bias, relu)
    assert got is d  # in place
    same_bits(d, want)
    if bias is not None:
        same_bits(bias, bias_before)


@needs_kernel
@pytest.mark.parametrize("case", [
    "bias of another dtype", "bias per row", "bias not contiguous", "bias with more axes", "bias a list",
    "result not contiguous", "result read-only", "relu of a complex result", "result of another dtype",
    "result 0-d", "result a subclass",
])
def test_bias_relu_refuses_what_it_does_not_take(case):
    d = rand((4, 6), np.float64, 1)
    bias, relu = rand((6,), np.float64, 2), True
    if case == "bias of another dtype":
        bias = bias.astype(np.float32)
    elif case == "bias per row":
        bias = rand((4, 1), np.float64, 3)
    elif case == "bias not contiguous":
        bias = rand((12,), np.float64, 3)[::2]
    elif case == "bias with more axes":
        bias = bias.reshape(1, 1, 6)
    elif case == "bias a list":
        bias = bias.tolist()
    elif case == "result not contiguous":
        d = rand((4, 12), np.float64, 3)[:, ::2]
    elif case == "result read-only":
        d.flags.writeable = False
    elif case == "relu of a complex result":
        d, bias = d.astype(np.complex128), bias.astype(np.complex128)
    elif case == "result of another dtype":
        d, bias = d.astype(np.float16), bias.astype(np.float16)
    elif case == "result 0-d":
        d, bias = np.array(1.0), None
    else:
        d = d.view(np.matrix)
    before = np.array(d, copy=True)
    assert MODULE.bias_relu(d, bias, relu) is NotImplemented
    np.testing.assert_array_equal(np.asarray(d), before)


def reference(a, b, epilogue, bias):
    x = np.matmul(a.astype(np.complex128), b.astype(np.complex128))
    if bias is not None:
        x = x + bias
    if "relu" in epilogue:
        x = np.maximum(x.real, 0)
    elif "gelu" in epilogue:
        z = x.real
        x = 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z**3)))
    return x


@needs_kernel
@pytest.mark.parametrize("epilogue, dtype", [  # activations are for real results
    (e, t) for e in ("bias", "relu", "relu_bias", "gelu_bias") for t in (np.float32, np.float64)] + [
    ("bias", np.complex128), ("bias", np.complex64)])
@pytest.mark.parametrize("bias_kind", ["per column", "row vector", "per row", "strided"])
@pytest.mark.parametrize("shapes", [((7, 13), (13, 5)), ((3, 7, 11), (11, 17)), ((2, 5, 3), (2, 3, 29)),
                                    ((97, 101), (101, 89))])  # the last beyond the tiny kernel's products
def test_small_epilogue_plans_match_the_reference(epilogue, dtype, bias_kind, shapes, monkeypatch):
    a, b = rand(shapes[0], dtype, 11), rand(shapes[1], dtype, 12)
    m, n = shapes[0][-2], shapes[1][-1]
    bias = {"per column": lambda: rand((n,), dtype, 13), "row vector": lambda: rand((1, n), dtype, 13),
            "per row": lambda: rand((m, 1), dtype, 13),
            "strided": lambda: rand((2 * n,), dtype, 13)[::2]}[bias_kind]()
    inputs = {"bias": bias} if "bias" in epilogue else None
    calls = []
    kernel = MODULE.bias_relu

    def spy(*args):
        calls.append((args[0], kernel(*args)))
        return calls[-1][1]

    monkeypatch.setattr(_tiny, "_bias_relu", spy)
    before = a.copy(), b.copy(), bias.copy()
    with la.Matmul(a, b, epilogue=epilogue, epilogue_inputs=inputs) as plan:
        plan.plan()
        method = plan._prepared.candidate.params["method"]
        got = plan.execute()
        again = plan.execute()
    want = reference(a, b, epilogue, bias if inputs else None)
    k = shapes[0][-1]
    tolerance = TOLERANCE[np.dtype(dtype).type] * k * 4
    for result in (got, again):
        assert result.dtype == dtype and result.shape == want.shape
        assert np.linalg.norm(result - want) <= tolerance * np.linalg.norm(want)
    assert got is not again
    for x, y in zip((a, b, bias), before):
        np.testing.assert_array_equal(x, y)
    tiny = np.prod(shapes[0]) * n <= 64**3
    one_pass = epilogue != "gelu_bias" and (inputs is None or bias_kind != "per row")
    assert method == ("matmul" if tiny or one_pass else "gemm")  # the heuristic's candidate
    if epilogue == "gelu_bias" or method == "gemm":
        assert not calls
        return
    # bias_relu is asked on every call; it does the whole epilogue where the bias is one contiguous
    # value per column of the result's dtype, else the NumPy chain does
    compiled = inputs is None or bias_kind in ("per column", "row vector")
    assert [out is result for (out, _), result in zip(calls, (got, again))] == [True, True]
    assert [done is not NotImplemented for _, done in calls] == [compiled, compiled]


def test_epilogue_chain_never_warns_about_overflow_and_keeps_error_settings():
    a = np.full((3, 4), 1e300)
    b = np.full((4, 5), 1e300)  # the product overflows to inf, and so does the bias's sum
    bias = np.full(5, 1e308)
    before = np.geterr()
    with la.Matmul(a, b, epilogue="gelu_bias", epilogue_inputs={"bias": bias}) as plan:
        plan.plan()
        with np.errstate(over="raise", under="raise", invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("error")
            got = plan.execute()
            assert np.geterr()["over"] == "raise"
        assert np.all(np.isposinf(got) | np.isnan(got))
    assert np.geterr() == before


def test_quiet_state_follows_the_callers_other_settings():
    with np.errstate(divide="raise", over="warn"):
        token = _program.quiet_enter()
        try:
            assert np.geterr()["over"] == "ignore" and np.geterr()["under"] == "ignore"
            assert np.geterr()["divide"] == "raise"
            with pytest.raises(FloatingPointError):
                np.divide(np.ones(2), np.zeros(2))
        finally:
            _program.quiet_leave(token)
        assert np.geterr()["over"] == "warn" and np.geterr()["divide"] == "raise"
    with np.errstate(divide="ignore"):  # another state: derived again, not the one kept
        token = _program.quiet_enter()
        try:
            assert np.geterr()["divide"] == "ignore" and np.geterr()["over"] == "ignore"
        finally:
            _program.quiet_leave(token)


@pytest.fixture
def planned_calls(monkeypatch):
    """Record the one-call ``matmul`` calls that take the planned route (which still runs)."""
    taken = []
    general = matmul_plan._planned_matmul
    monkeypatch.setattr(matmul_plan, "_planned_matmul", lambda *args: taken.append(args) or general(*args))
    return taken


@needs_kernel
@pytest.mark.parametrize("epilogue, dtype", [
    (e, t) for e in ("bias", "relu", "relu_bias") for t in (np.float32, np.float64)] + [("bias", np.complex64)])
@pytest.mark.parametrize("shapes, bias_shape", [
    (((7, 13), (13, 5)), (5,)), (((1, 1), (1, 1)), (1,)), (((3, 7, 11), (11, 17)), (1, 17)),
    (((2, 5, 3), (2, 3, 29)), (1, 1, 29)), (((64, 64), (64, 64)), (64,)),  # the last: exactly TINY_FLOPS
    (((20000, 3, 3), (3, 3)), (3,)),  # beyond TINY_FLOPS in all, tiny matrices: the kernel's batch, no plan
    (((70, 80), (80, 60)), (60,)),  # beyond TINY_FLOPS: the planned route
])
def test_one_call_bias_relu_on_tiny_products_is_the_plans_call(epilogue, dtype, shapes, bias_shape, planned_calls):
    a, b = rand(shapes[0], dtype, 21), rand(shapes[1], dtype, 22)
    bias = rand(bias_shape, dtype, 23)
    inputs = {"bias": bias} if "bias" in epilogue else None
    before = a.copy(), b.copy(), bias.copy()
    got = la.matmul(a, b, epilogue=epilogue, epilogue_inputs=inputs)
    tiny = shapes[0][-2] * shapes[0][-1] * shapes[1][-1] <= 64**3  # per matrix (batches: the kernel's loop)
    assert len(planned_calls) == (0 if tiny else 1)
    with la.Matmul(a, b, epilogue=epilogue, epilogue_inputs=inputs) as plan:
        plan.plan()
        want = plan.execute()
    assert type(got) is np.ndarray and got.dtype == dtype and got.shape == want.shape and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)  # the plan's own call: the same bits
    reference_value = reference(a, b, epilogue, bias if inputs else None)
    assert np.linalg.norm(got - reference_value) <= TOLERANCE[dtype] * shapes[0][-1] * 4 * np.linalg.norm(
        reference_value)
    for x, y in zip((a, b, bias), before):
        np.testing.assert_array_equal(x, y)


@needs_kernel
@pytest.mark.parametrize("case", [
    "bias per row", "bias strided", "bias of another dtype", "bias of the wrong length", "bias a list",
    "an unknown input", "inputs for relu", "relu of complex", "1-D operand", "K that differs", "alpha 2",
])
def test_one_call_bias_relu_leaves_other_calls_to_the_planned_route(case, planned_calls):
    a, b, bias = rand((6, 5), np.float64, 31), rand((5, 4), np.float64, 32), rand((4,), np.float64, 33)
    epilogue, inputs, kwargs = "relu_bias", {"bias": bias}, {}
    refused = None
    if case == "bias per row":
        inputs = {"bias": rand((6, 1), np.float64, 34)}
    elif case == "bias strided":
        inputs = {"bias": rand((8,), np.float64, 34)[::2]}
    elif case == "bias of another dtype":
        inputs, refused = {"bias": bias.astype(np.float32)}, "dtype"
    elif case == "bias of the wrong length":
        inputs, refused = {"bias": rand((5,), np.float64, 34)}, "broadcast"
    elif case == "bias a list":
        inputs, refused = {"bias": bias.tolist()}, "expected a NumPy"
    elif case == "an unknown input":
        inputs, refused = {"bias": bias, "scale": bias}, "scale"
    elif case == "inputs for relu":
        epilogue, refused = "relu", "bias"
    elif case == "relu of complex":
        a, b, inputs, refused = a.astype(np.complex128), b.astype(np.complex128), {"bias": bias.astype(complex)}, "real"
    elif case == "1-D operand":
        a = a[0]
    elif case == "K that differs":
        b, refused = rand((7, 4), np.float64, 35), "K|shape|match"
    else:
        kwargs = {"alpha": 2.0}
    if refused is not None:
        with pytest.raises((InvalidOperandError, ValueError), match=refused):
            la.matmul(a, b, epilogue=epilogue, epilogue_inputs=inputs, **kwargs)
        assert len(planned_calls) == 1
        return
    got = la.matmul(a, b, epilogue=epilogue, epilogue_inputs=inputs, **kwargs)
    assert len(planned_calls) == 1
    bias_value = np.asarray(inputs["bias"], np.float64)
    want = np.maximum(kwargs.get("alpha", 1.0) * (a @ b) + bias_value, 0)
    assert got.shape == want.shape and np.linalg.norm(got - want) <= 1e-13 * np.linalg.norm(want)
