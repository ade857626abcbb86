"""Custom matmul epilogues as users write them: any name for the value parameter, NumPy
methods and ufuncs, numbers captured from closures/defaults/globals (one plan and one compiled
kernel for every value), and one clear error, before any work, for what cannot be traced
(reductions, indexing, very deep chains, constants beyond float64)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.special

import nvmathpy.linalg as la
from nvmathpy.errors import InvalidOperandError
from nvmathpy.kernels import cpu_jit
from nvmathpy.kernels.trace import UnsupportedOperationError, trace, trace_lifting
from nvmathpy.linalg.gemm import matmul_plan

RNG = np.random.default_rng(2024)
X32 = RNG.standard_normal((256, 512), dtype=np.float32)
W32 = RNG.standard_normal((512, 384), dtype=np.float32)
P32 = X32.astype(np.float64) @ W32.astype(np.float64)
X64 = RNG.standard_normal((61, 37))
W64 = RNG.standard_normal((37, 43))
P64 = X64 @ W64

SCALE = 1.75  # a module global read by an epilogue


def rel(got: np.ndarray, want: np.ndarray) -> float:
    want = np.asarray(want, np.float64)
    assert not np.isnan(got).any() or np.array_equal(np.isnan(got), np.isnan(want))
    keep = ~np.isnan(want)
    return float(np.linalg.norm((got - want)[keep]) / max(np.linalg.norm(want[keep]), 1e-300))


def tol(dtype) -> float:
    return 2e-5 if np.dtype(dtype) == np.float32 else 1e-12


@pytest.mark.parametrize("fn", [lambda v: np.maximum(v, 0) * 2, lambda value: np.maximum(value, 0) * 2,
                                lambda _: np.maximum(_, 0) * 2, lambda y: np.maximum(y, 0) * 2,
                                lambda x: np.maximum(x, 0) * 2])
def test_any_value_parameter_name(fn):
    got = la.matmul(X32, W32, epilogue=fn)
    assert got.dtype == np.float32
    assert rel(got, np.maximum(P32, 0) * 2) < tol(np.float32)


def test_any_value_parameter_name_with_inputs():
    bias = RNG.standard_normal(384).astype(np.float32)
    got = la.matmul(X32, W32, epilogue=lambda acc, bias: np.tanh(acc + bias), epilogue_inputs={"bias": bias})
    assert rel(got, np.tanh(P32 + bias)) < tol(np.float32)


ELEMENTWISE = {
    "clip-method": lambda x: x.clip(-1.5, 2.0),
    "clip-method-kw": lambda x: x.clip(min=-1.0),
    "np.clip-kw": lambda x: np.clip(x, a_min=None, a_max=0.5),
    "abs": lambda x: abs(x) + np.abs(x) + np.fabs(x),
    "exp-log": lambda x: np.log(np.exp(x * 0.1) + 1.0),
    "tanh-sqrt": lambda x: np.tanh(x) + np.sqrt(np.abs(x)),
    "max-min": lambda x: np.minimum(np.maximum(x, -1.0), 1.0),
    "where": lambda x: np.where(x > 0, x, 0.01 * x),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "expit": lambda x: scipy.special.expit(x),
    "erf": lambda x: scipy.special.erf(x * 0.3),
    "square-power": lambda x: np.square(x) + np.power(np.abs(x), 1.5) + x ** 3,
    "astype": lambda x: (x * 2).astype(np.float64) - 1,
    "sign": lambda x: np.sign(x) * x,
    "log2-log10-exp2": lambda x: np.log2(np.abs(x) + 1) + np.log10(np.abs(x) + 1) + np.exp2(x * 0.1),
    "isnan-isfinite": lambda x: np.where(np.isnan(x) | ~np.isfinite(x), 0.0, x),
    "reciprocal": lambda x: np.reciprocal(np.abs(x) + 1.0),
    "copy-positive": lambda x: np.positive(x.copy()),
    "rpow-numpy-base": lambda x: np.float32(2.0) ** (x * 0.1),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_numpy_methods_and_ufuncs(name, dtype):
    """Each supported NumPy spelling gives what NumPy gives on the float64 product."""
    fn = ELEMENTWISE[name]
    a, b, p = (X32, W32, P32) if dtype == "float32" else (X64, W64, P64)
    got = la.matmul(a, b, epilogue=fn)
    with np.errstate(all="ignore"):
        want = fn(p)
    assert got.shape == want.shape
    assert rel(got, want) < 50 * tol(dtype), name


NOT_ELEMENTWISE = {
    "mean-method": (lambda x: x - x.mean(), "mean"),
    "sum-method": (lambda x: x / x.sum(), "sum"),
    "np.mean": (lambda x: x - np.mean(x), "np.mean"),
    "np.max": (lambda x: x / np.max(x), "np.max"),
    "reduce": (lambda x: np.add.reduce(x), "reduce"),
    "index": (lambda x: x[0], "indexing"),
    "reshape": (lambda x: x.reshape(-1), "reshape"),
    "unknown-attr": (lambda x: x.frobnicate(), "frobnicate"),
    "sin": (lambda x: np.sin(x), "np.sin"),
    "floordiv": (lambda x: x // 2, "//"),
    "python-if": (lambda x: x if x > 0 else -x, "truth value"),
    "float()": (lambda x: float(x) * 2, "float()"),
}


@pytest.mark.parametrize("name", sorted(NOT_ELEMENTWISE))
def test_what_is_not_elementwise_raises_one_clear_error(name):
    fn, mentions = NOT_ELEMENTWISE[name]
    with pytest.raises(UnsupportedOperationError) as info:
        la.matmul(X64, W64, epilogue=fn)
    message = str(info.value)
    assert mentions in message
    if name != "python-if":
        assert "Supported:" in message and "np.where" in message


def test_reductions_are_attribute_errors_too():
    """``hasattr``-style probing still sees a missing attribute."""
    with pytest.raises(AttributeError):
        trace(lambda x: x.mean(), {})


def test_deep_chain_is_a_clear_error_not_recursion():
    def deep(x):
        for _ in range(3000):
            x = x + 1
        return x

    with pytest.raises(UnsupportedOperationError, match="3000 operations deep; at most"):
        la.matmul(X64, W64, epilogue=deep)

    def ok(x):  # a chain within the limit works
        for _ in range(150):
            x = x * 1.0001
        return x

    assert rel(la.matmul(X64, W64, epilogue=ok), P64 * 1.0001 ** 150) < 1e-12


@pytest.mark.parametrize("constant", [10 ** 400, -(10 ** 309)])
def test_constants_beyond_float64_are_a_clear_error(constant):
    with pytest.raises(InvalidOperandError, match="does not fit a float64"):
        la.matmul(X64, W64, epilogue=lambda x: x * constant)


def test_complex_constant_is_a_clear_error():
    with pytest.raises(UnsupportedOperationError, match="complex constant"):
        la.matmul(X64, W64, epilogue=lambda x: x * 1j)


# -- captured numbers become run-time scalars -------------------------------------------------


def _so_files() -> int:
    directory = cpu_jit.cache_dir() / "cpu_kernels"
    return len(list(directory.glob("*.so"))) if directory.is_dir() else 0


def _closure(scale):
    return lambda x: np.maximum(x, 0) * scale + 0.5


def _default(scale):
    def fn(x, s=scale):
        return np.tanh(x) * s

    return fn


@pytest.mark.parametrize("how", ["closure", "default", "global", "numpy-scalar", "int"])
def test_captured_numbers_share_one_plan_and_kernel(how, monkeypatch):
    """Forty values of a captured number: right numbers each time, one plan, a bounded number of
    compiled kernels on disk and in memory."""
    global SCALE
    la.clear_plan_cache()
    make = {
        "closure": _closure,
        "default": _default,
        "global": lambda v: (lambda x: x * SCALE - 1.0),
        "numpy-scalar": lambda v: _closure(np.float32(v)),
        "int": lambda v: _closure(int(v * 10)),
    }[how]
    want_of = {
        "closure": lambda v, p: np.maximum(p, 0) * v + 0.5,
        "default": lambda v, p: np.tanh(p) * v,
        "global": lambda v, p: p * v - 1.0,
        "numpy-scalar": lambda v, p: np.maximum(p, 0) * np.float32(v) + 0.5,
        "int": lambda v, p: np.maximum(p, 0) * int(v * 10) + 0.5,
    }[how]
    loaded_before = len(cpu_jit._LOADED)
    files = set()
    try:
        for i in range(40):
            value = 0.25 + 0.37 * i
            SCALE = value
            got = la.matmul(X32, W32, epilogue=make(value))
            assert rel(got, want_of(value, P32)) < tol(np.float32), (how, value)
            files.add(_so_files())
    finally:
        SCALE = 1.75
    info = matmul_plan.plan_cache_info()
    assert info["misses"] == 1 and info["hits"] == 39, info
    if cpu_jit.available():
        assert max(files) <= 3, files  # the probe and this kernel (and no more per value)
        assert len(cpu_jit._LOADED) - loaded_before <= 2


def test_captured_number_steering_python_falls_back_to_constants():
    """A captured number used by Python itself (an ``if``, an exponent, ``range``) keeps working:
    the function is traced with the numbers as constants."""
    for s in (2.0, -1.0):
        got = la.matmul(X64, W64, epilogue=lambda x: x * s if s > 0 else -x)
        assert rel(got, P64 * s if s > 0 else -P64) < 1e-12
    n = 3
    assert rel(la.matmul(X64, W64, epilogue=lambda x: x ** n), P64 ** 3) < 1e-12
    k = 4
    def loop(x):
        for _ in range(k):
            x = x * 0.5
        return x

    assert rel(la.matmul(X64, W64, epilogue=loop), P64 * 0.5 ** 4) < 1e-12


def test_trace_lifting_keeps_literals_and_names_inputs():
    scale = 3.0
    expr, values = trace_lifting(lambda x: np.maximum(x, 0) * scale + 1.0, {})
    assert str(expr) == "add(mul(maximum(x, 0), nvm_k0), 1.0)" and values == {"nvm_k0": 3.0}
    # a name taken by an input is not reused
    expr, values = trace_lifting(lambda x, nvm_k0: x * nvm_k0 * scale, {"nvm_k0": "col"})
    assert values == {"_nvm_k0": 3.0}
    # bools and non-finite numbers stay constants
    flag, big = True, float("inf")
    expr, values = trace_lifting(lambda x: np.where(x > big, 0.0, x) * flag, {})
    assert values == {}


def test_matmul_class_with_a_closure_still_works():
    s = 0.5
    with la.Matmul(X64, W64, epilogue=lambda x: x * s) as mm:
        mm.plan()
        assert rel(mm.execute(), P64 * 0.5) < 1e-12


@pytest.mark.skipif(not os.path.exists("/proc/self"), reason="Linux")
def test_lifted_scalars_do_not_leak_into_user_inputs():
    """The caller's epilogue_inputs dict is not modified by lifting."""
    s = 2.0
    inputs = {"bias": np.ones(43)}
    la.matmul(X64, W64, epilogue=lambda x, bias: x * s + bias, epilogue_inputs=inputs)
    assert list(inputs) == ["bias"]
