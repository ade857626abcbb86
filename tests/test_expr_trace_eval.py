"""The expression IR: tracing Python functions, and the host evaluators against a float64 reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from nvmathpy.errors import InvalidOperandError
from nvmathpy.kernels import ir
from nvmathpy.kernels.cpu_eval import BlockedEvaluator, NumexprEvaluator, evaluate_reference, numexpr_supports
from nvmathpy.kernels.trace import UnsupportedOperationError, erf, gelu, sigmoid, trace

KINDS = {"s": "scalar", "r": "row", "c": "col", "mtx": "matrix"}


def _inputs(rng, batch, m, n, dtype):
    return {
        "s": float(rng.uniform(0.5, 1.5)),
        "r": rng.standard_normal((m, 1)).astype(dtype),
        "c": rng.standard_normal(n).astype(dtype),
        "mtx": rng.standard_normal((*batch, m, n)).astype(dtype),
    }


def _check(expr, dtype, batch=(2,), m=37, n=29, block_elements=64, rtol=None):
    rng = np.random.default_rng(7)
    value = rng.standard_normal((*batch, m, n)).astype(dtype)
    inputs = _inputs(rng, batch, m, n, dtype)
    expected = evaluate_reference(expr, value.astype(np.float64), inputs)
    rtol = rtol or (2e-5 if dtype == np.float32 else 1e-12)
    evaluators = [BlockedEvaluator(expr, dtype, block_elements=block_elements)]
    if numexpr_supports(expr):
        pytest.importorskip("numexpr")
        evaluators.append(NumexprEvaluator(expr, dtype))
    for evaluator in evaluators:
        out = value.copy()
        frozen = {k: np.copy(v) for k, v in inputs.items()}
        evaluator(out, inputs)
        assert out.dtype == dtype
        err = np.linalg.norm(np.nan_to_num(out - expected)) / max(np.linalg.norm(np.nan_to_num(expected)), 1e-30)
        assert err < rtol * 10, (type(evaluator).__name__, str(expr), err)
        assert np.array_equal(np.isnan(out), np.isnan(expected))
        for k in inputs:  # inputs untouched
            np.testing.assert_array_equal(inputs[k], frozen[k])


def swiglu(x, mtx, s):
    return x * (mtx / (1 + np.exp(-mtx))) * s


CASES = {
    "swiglu": swiglu,
    "relu_bias": lambda x, c: np.maximum(x + c, 0),
    "gelu_tanh": lambda x, c: gelu(x + c),
    "gelu_erf": lambda x: gelu(x, approximate="none"),
    "residual_row": lambda x, r, mtx: x * r + mtx,
    "where_compare": lambda x, r: np.where((x > r) & (x < 1.0), x, -x),
    "sigmoid_sqrt": lambda x: sigmoid(x) * np.sqrt(np.abs(x)) + np.log(1 + x * x),
    "pow_clip": lambda x: np.clip(x, -1.0, 2.0) ** 3 - x ** 2 + np.abs(x) ** 0.5 + (np.abs(x) + 1) ** -0.5,
    "indices": lambda x, row, col: x + row * 0.5 - col,
    "batch_index": lambda x, batch: x * (batch + 1),
    "minimum_reciprocal": lambda x: np.minimum(np.reciprocal(np.abs(x) + 1), np.square(x)),
    "cast_bool": lambda x: (x > 0).astype(np.float32) * x + (x * 3).astype(np.float16),
    "erf_tanh": lambda x: erf(x) + np.tanh(2 * x) - 2 ** x,
    "not_or": lambda x: np.where(~(x > 0) | (x > 1), 1.0, 0.0),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_cases_match_reference(name, dtype):
    fn = CASES[name]
    import inspect

    params = list(inspect.signature(fn).parameters)[1:]
    expr = trace(fn, {p: KINDS[p] for p in params if p in KINDS})
    _check(expr, dtype, rtol=1e-3 if "cast" in name and dtype == np.float32 else None)


@pytest.mark.parametrize("block_elements", [1, 29, 30, 100, 10**6])
def test_block_sizes_and_shapes(block_elements):
    expr = trace(swiglu, {"mtx": "matrix", "s": "scalar"})
    _check(expr, np.float64, batch=(), m=13, n=7, block_elements=block_elements)
    _check(expr, np.float64, batch=(3, 2), m=1, n=1, block_elements=block_elements)


def test_broadcast_matrix_input_over_batch():
    expr = trace(lambda x, mtx: x - mtx, {"mtx": "matrix"})
    rng = np.random.default_rng(1)
    value = rng.standard_normal((3, 2, 5, 4))
    mtx = rng.standard_normal((2, 1, 4))  # broadcasts over the first batch dim and over rows
    out = value.copy()
    BlockedEvaluator(expr, np.float64, block_elements=8)(out, {"mtx": mtx})
    np.testing.assert_allclose(out, value - mtx, rtol=1e-14)


_SAFE_UNARY = ["neg", "abs", "tanh", "sigmoid", "erf"]
_SAFE_BINARY = ["add", "sub", "mul", "maximum", "minimum"]


def _random_expr():
    leaves = st.sampled_from(
        [ir.input_("x", "value"), ir.input_("s", "scalar"), ir.input_("r", "row"), ir.input_("c", "col"),
         ir.input_("mtx", "matrix"), ir.const(0.5), ir.const(-2.0), ir.index("row"), ir.index("col")]
    )

    def extend(children):
        unary = st.builds(lambda op, a: ir.Expr(op, (a,)), st.sampled_from(_SAFE_UNARY), children)
        binary = st.builds(lambda op, a, b: ir.Expr(op, (a, b)), st.sampled_from(_SAFE_BINARY), children, children)
        guarded = st.builds(lambda a: ir.Expr("sqrt", (ir.Expr("abs", (a,)),)), children)
        choose = st.builds(lambda op, a, b, c, d: ir.Expr("where", (ir.Expr(op, (a, b)), c, d)),
                           st.sampled_from(ir.COMPARE), children, children, children, children)
        return unary | binary | guarded | choose

    return st.recursive(leaves, extend, max_leaves=10)


@given(expr=_random_expr())
@settings(max_examples=60, deadline=None)
def test_random_expressions_match_reference(expr):
    _check(expr, np.float64, batch=(2,), m=5, n=3, block_elements=4, rtol=1e-11)


def test_trace_errors_are_clear():
    with pytest.raises(UnsupportedOperationError, match="np.sin is not supported"):
        trace(lambda x: np.sin(x), {})
    with pytest.raises(UnsupportedOperationError, match="no truth value.*np.where"):
        trace(lambda x: x if x > 0 else -x, {})
    with pytest.raises(InvalidOperandError, match="parameter 'gate' is not an input"):
        trace(lambda x, gate: x * gate, {})
    with pytest.raises(InvalidOperandError, match=r"inputs \['bias'\] are given but not parameters"):
        trace(lambda x: x, {"bias": "col"})
    with pytest.raises(UnsupportedOperationError, match="np.sum is not supported"):
        trace(lambda x: np.sum(x), {})
    with pytest.raises(UnsupportedOperationError, match="cannot be used in a traced function"):
        trace(lambda x: x + np.ones(3), {})
    with pytest.raises(UnsupportedOperationError, match="exponent must be a Python number"):
        trace(lambda x: x ** x, {})
    with pytest.raises(InvalidOperandError, match=r"\*args"):
        trace(lambda x, *rest: x, {})


def test_ir_validates_nodes():
    with pytest.raises(ValueError, match="unknown IR operation"):
        ir.Expr("sin", (ir.const(1.0),))
    with pytest.raises(ValueError, match="takes 2 operands"):
        ir.Expr("add", (ir.const(1.0),))
    with pytest.raises(ValueError, match="input kind"):
        ir.input_("x", "tensor")
    with pytest.raises(ValueError, match="constant exponent"):
        ir.Expr("pow", (ir.const(1.0), ir.input_("x", "value")))
    expr = trace(swiglu, {"mtx": "matrix", "s": "scalar"})
    assert ir.inputs_of(expr) == {"x": "value", "mtx": "matrix", "s": "scalar"}
    assert ir.uses_op(expr, "exp") and not ir.uses_op(expr, "erf")


def test_helpers_on_arrays():
    x = np.linspace(-3, 3, 7)
    from scipy.special import erf as sp_erf, expit

    np.testing.assert_allclose(erf(x), sp_erf(x))
    np.testing.assert_allclose(sigmoid(x), expit(x))
    np.testing.assert_allclose(gelu(x, approximate="none"), 0.5 * x * (1 + sp_erf(x / np.sqrt(2))))
    with pytest.raises(ValueError, match="approximate='exact'"):
        gelu(x, approximate="exact")
