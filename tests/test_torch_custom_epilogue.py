"""Custom (traced Python) epilogues through the torch operator: the IR's text form
(nvmathpy.kernels.ir_text), its symbolic derivatives (nvmathpy.kernels.ir_grad) against
finite differences, and ``torch.ops.nvmathpy.matmul_custom`` (opcheck, gradcheck and
gradgradcheck in float64, gradients against torch autograd, Linear with a custom activation
trained beside pure PyTorch, torch.compile(fullgraph=True))."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvmathpy.errors import InvalidOperandError
from nvmathpy.kernels import ir_text
from nvmathpy.kernels.cpu_eval import evaluate_reference
from nvmathpy.kernels.ir import BINARY, CAST_DTYPES, COMPARE, INDEX_NAMES, LOGICAL, UNARY, Expr, const, index, input_, inputs_of, walk
from nvmathpy.kernels.ir_grad import derivative, derivatives, value_name
from nvmathpy.kernels.trace import erf, gelu, sigmoid, trace

# -- the IR's text form ----------------------------------------------------------------------------

_LEAVES = st.one_of(
    st.sampled_from(["x", "gate", "s_1", "Bias"]).flatmap(
        lambda name: st.sampled_from(["value", "scalar", "row", "col", "matrix"]).map(lambda kind: input_(name, kind))
    ),
    st.sampled_from(INDEX_NAMES).map(index),
    st.floats(allow_nan=False).map(const),
    st.integers(-(2**70), 2**70).map(const),
    st.booleans().map(const),
)


def _extend(children):
    return st.one_of(
        st.tuples(st.sampled_from(UNARY), children).map(lambda t: Expr(t[0], (t[1],))),
        st.tuples(st.sampled_from(tuple(op for op in BINARY if op != "pow") + COMPARE + LOGICAL), children, children)
        .map(lambda t: Expr(t[0], (t[1], t[2]))),
        st.tuples(children, st.floats(allow_nan=False, allow_infinity=False)).map(lambda t: Expr("pow", (t[0], const(t[1])))),
        st.tuples(children, children, children).map(lambda t: Expr("where", t)),
        st.tuples(st.sampled_from(CAST_DTYPES), children).map(lambda t: Expr("cast", (t[1],), kind=t[0])),
    )


@settings(max_examples=150, deadline=None)
@given(st.recursive(_LEAVES, _extend, max_leaves=25))
def test_ir_text_round_trip(expr):
    text = ir_text.dumps(expr)
    back = ir_text.loads(text)
    assert back == expr
    assert ir_text.dumps(back) == text


def test_ir_text_exact_special_values_and_sharing():
    x = input_("x", "value")
    shared = Expr("exp", (x,))
    expr = Expr("add", (Expr("mul", (shared, shared)), Expr("where", (Expr("lt", (x, const(math.inf))),
                                                                       const(math.nan), const(-0.0)))))
    text = ir_text.dumps(expr)
    assert text.count("exp") == 1  # a shared node is written once
    back = ir_text.loads(text)
    values = [n.value for n in walk(back) if n.op == "const"]
    assert math.inf in values and any(isinstance(v, float) and math.isnan(v) for v in values)
    assert any(v == 0 and math.copysign(1.0, v) < 0 for v in values)  # -0.0 keeps its sign
    assert ir_text.dumps(back) == text
    third = 1.0 / 3.0
    assert ir_text.loads(ir_text.dumps(const(third))).value == third  # bit for bit


def test_ir_text_deep_expression():
    expr = input_("x", "value")
    for i in range(5000):
        expr = Expr("add", (expr, const(float(i))))
    text = ir_text.dumps(expr)
    assert ir_text.dumps(ir_text.loads(text)) == text


@pytest.mark.parametrize(
    "text,match",
    [
        ("", "non-empty"),
        ("input x value;frob #0", "unknown IR operation 'frob'"),
        ("input x value;add #0 #1", "not yet defined"),
        ("input x value;add #0 0", "node reference"),
        ("input x value extra", "takes 2 fields"),
        ("input x-y value", "identifier"),
        ("input x vector", "input kind"),
        ("const f zz", "node 0"),
        ("const b 2", "bad constant"),
        ("input x value;exp #0 #0", "takes 1 operands"),
        ("input x value;cast int8 #0", "cast dtype"),
        ("input x value;pow #0 #0", "constant exponent"),
    ],
)
def test_ir_text_rejects_bad_text(text, match):
    with pytest.raises(ir_text.IRTextError, match=match):
        ir_text.loads(text)


# -- symbolic derivatives against finite differences -----------------------------------------------

KINDS = {"s": "matrix", "c": "scalar", "r": "row", "k": "col"}

GRAD_CASES = {  # name: f(x, s, c, r, k) using every IR operation between them
    "neg_add_sub": lambda x, s, c, r, k: -x + s - c * r + k,
    "mul_div": lambda x, s, c, r, k: x * s / (k * k + 1.5) + c / (x * x + 2.0),
    "abs": lambda x, s, c, r, k: abs(x * s) + np.abs(x - c),
    "exp_log": lambda x, s, c, r, k: np.exp(0.3 * x * s) + np.log(x * x + s * s + c * c + 0.5),
    "tanh_erf_sigmoid": lambda x, s, c, r, k: np.tanh(x * r) + erf(x + k) * sigmoid(s * c - x),
    "sqrt_rsqrt": lambda x, s, c, r, k: np.sqrt(x * x + s * s + 0.25) + (x * x + r * r + 0.5) ** -0.5,
    "pow": lambda x, s, c, r, k: (x * x + c * c + 0.5) ** 1.7 + x ** 3 + (s * s + 1.0) ** -2 + x ** 0.0,
    "maximum_minimum": lambda x, s, c, r, k: np.maximum(x, s) * np.minimum(x * c, r) + np.maximum(x, 0.0),
    "where_compare_logical": lambda x, s, c, r, k: np.where(((x > s) & (r <= c)) | ~(k >= x) | (x == s) | (x != k)
                                                            | (x < r), x * s, x / (c + 2.0 * k * k + 1.0)),
    "cast": lambda x, s, c, r, k: (x * s).astype(np.float64) + (x > c).astype(np.float64) * x,
    "index": lambda x, s, c, r, k, row, col: x * (row + 1) + s * col - c,
    "gelu_bias": lambda x, s, c, r, k: gelu(x + k) * c + gelu(s, approximate="none"),
    "swiglu": lambda x, s, c, r, k: x * (s / (1 + np.exp(-s))) * c,
    "no_value": lambda x, s, c, r, k: s * r + c,
}


def _inputs(seed, shape=(7, 5)):
    rng = np.random.default_rng(seed)
    m, n = shape

    def away(values):  # keep clear of kinks (|v| small, or v equal to another input)
        return np.where(np.abs(values) < 0.2, np.sign(values) * 0.2 + values, values)

    x = away(rng.standard_normal(shape))
    return x, {"s": away(rng.standard_normal(shape)) + 0.05, "c": np.float64(rng.uniform(0.4, 1.2)),
               "r": away(rng.standard_normal((m, 1))), "k": away(rng.standard_normal(n)) - 0.03}


@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_ir_grad_matches_finite_differences(case):
    expr = trace(GRAD_CASES[case], KINDS)
    x, inputs = _inputs(sum(map(ord, case)))
    grads = derivatives(expr)
    assert list(grads) == sorted(inputs_of(expr), key=lambda name: name != value_name(expr))
    h = 1e-6
    for name in ("x", "s", "c", "r", "k"):
        d = derivative(expr, name)
        got = evaluate_reference(d, x, inputs)

        def f_at(delta):
            if name == "x":
                return evaluate_reference(expr, x + delta, inputs)
            return evaluate_reference(expr, x, {**inputs, name: inputs[name] + delta})

        fd = (f_at(h) - f_at(-h)) / (2 * h)
        assert np.all(np.isfinite(got)), (case, name)
        err = np.linalg.norm(got - fd) / max(np.linalg.norm(fd), 1e-3)
        assert err < 1e-6, (case, name, err, str(d))


def test_ir_grad_covers_every_operation():
    used = set()
    for f in GRAD_CASES.values():
        used |= {node.op for node in walk(trace(f, KINDS))}
    assert set(UNARY + BINARY + COMPARE + LOGICAL + ("where", "cast", "index")) <= used


def test_ir_grad_stays_small_and_simplified():
    x = input_("x", "value")
    assert derivative(Expr("add", (x, input_("b", "col"))), "x") == const(1.0)
    s = input_("s", "scalar")
    assert derivative(Expr("mul", (x, s)), "x") is s  # no 1 * s, no + 0 * x
    assert derivative(Expr("mul", (x, s)), "missing") == const(0.0)
    assert derivative(Expr("lt", (x, s)), "x") == const(0.0)
    e = trace(lambda v, bias: gelu(v + bias), {"bias": "col"})
    size = sum(1 for _ in walk(e))
    for d in derivatives(e).values():
        assert sum(1 for _ in walk(d)) <= 2 * size
    assert ir_text.dumps(derivative(e, "v")) == ir_text.dumps(derivative(e, "bias"))


def test_ir_grad_conventions_at_kinks():
    e = trace(lambda x: np.maximum(x, 0.0) + np.minimum(x, 0.0) * 2 + abs(x), {})
    at_zero = evaluate_reference(derivative(e, "x"), np.zeros((1, 1)), {})
    assert at_zero[0, 0] == 0.0  # relu'(0) = 0 (as torch), the minimum branch gives b' = 0, abs'(0) = 0
    rng = np.random.default_rng(3)
    v = rng.standard_normal((4, 3))
    got = evaluate_reference(derivative(e, "x"), v, {})
    assert np.array_equal(got, np.where(v > 0, 1.0, 2.0) + np.sign(v))


# -- the torch operator ------------------------------------------------------------------------------

torch = pytest.importorskip("torch")
import nvmathpy.torch as nt
from nvmathpy.linalg.gemm._custom_epilogue import input_kind
from nvmathpy.torch._custom import _epilogue_text  # noqa: E402


def swiglu(x, gate, scale):
    return x * (gate / (1 + np.exp(-gate))) * scale


def swiglu_torch(z, gate, scale):
    return z * torch.nn.functional.silu(gate) * scale


def residual(x, res, bias):
    return gelu(x + bias) + res


def residual_torch(z, res, bias):
    return torch.nn.functional.gelu(z + bias, approximate="tanh") + res


def row_col_scale(x, rs, cs):
    return x * rs * cs + np.tanh(x)


def row_col_scale_torch(z, rs, cs):
    return z * rs * cs + torch.tanh(z)


def where_max(x, floor, lim):
    return np.where(x > lim, np.maximum(x, floor) * 2.0, np.minimum(x, -floor) - x * x)


def where_max_torch(z, floor, lim):
    return torch.where(z > lim, torch.maximum(z, floor) * 2.0, torch.minimum(z, -floor) - z * z)


def _operands(a_shape, b_shape, inputs, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(a_shape, dtype=dtype, generator=g, requires_grad=True)
    b = torch.randn(b_shape, dtype=dtype, generator=g, requires_grad=True)
    tensors = {name: torch.randn(shape, dtype=dtype, generator=g, requires_grad=grad)
               for name, (shape, grad) in inputs.items()}
    return a, b, tensors


EPILOGUE_CASES = [  # (f, torch reference, a shape, b shape, {input: (shape, requires grad)})
    (swiglu, swiglu_torch, (7, 5), (5, 6), {"gate": ((7, 6), True), "scale": ((), True)}),
    (swiglu, swiglu_torch, (2, 7, 5), (5, 6), {"gate": ((2, 7, 6), True), "scale": ((), False)}),
    (residual, residual_torch, (6, 4), (4, 5), {"res": ((6, 5), True), "bias": ((5,), True)}),
    (residual, residual_torch, (3, 6, 4), (4, 5), {"res": ((6, 5), True), "bias": ((5,), True)}),
    (residual, residual_torch, (2, 6, 4), (2, 4, 5), {"res": ((2, 6, 5), False), "bias": ((1, 5), True)}),
    (residual, residual_torch, (2, 6, 4), (2, 4, 5), {"res": ((6, 5), True), "bias": ((2, 1, 5), True)}),
    (row_col_scale, row_col_scale_torch, (5, 3), (3, 7), {"rs": ((5, 1), True), "cs": ((7,), True)}),
    (where_max, where_max_torch, (6, 5), (5, 4), {"floor": ((6, 4), True), "lim": ((), False)}),
]


def _reference_case(f_torch, a, b, tensors):
    return f_torch(a @ b, **tensors)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", range(len(EPILOGUE_CASES)))
def test_forward_matches_torch(case, dtype):
    f, f_torch, a_shape, b_shape, inputs = EPILOGUE_CASES[case]
    a, b, tensors = _operands(a_shape, b_shape, inputs, dtype, seed=case)
    before = {k: v.clone() for k, v in tensors.items()}
    out = nt.matmul(a, b, epilogue=f, epilogue_inputs=tensors)
    ref = _reference_case(f_torch, *(t.detach().double() for t in (a, b)), {k: v.detach().double() for k, v in tensors.items()})
    assert out.dtype == dtype and out.shape == ref.shape
    err = (torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref)).item()
    assert err < (1e-5 if dtype == torch.float32 else 1e-13)
    assert all(torch.equal(before[k], tensors[k]) for k in tensors)


@pytest.mark.parametrize("case", range(len(EPILOGUE_CASES)))
def test_gradcheck(case):
    f, _, a_shape, b_shape, inputs = EPILOGUE_CASES[case]
    a, b, tensors = _operands(a_shape, b_shape, inputs, seed=10 + case)
    names = list(tensors)

    def fn(a, b, *values):
        return nt.matmul(a, b, epilogue=f, epilogue_inputs=dict(zip(names, values)))

    assert torch.autograd.gradcheck(fn, (a, b, *tensors.values()))


@pytest.mark.parametrize("case", [0, 2, 6])
def test_gradgradcheck(case):
    f, _, a_shape, b_shape, inputs = EPILOGUE_CASES[case]
    a, b, tensors = _operands(a_shape, b_shape, inputs, seed=20 + case)
    names = list(tensors)
    assert torch.autograd.gradgradcheck(
        lambda a, b, *v: nt.matmul(a, b, epilogue=f, epilogue_inputs=dict(zip(names, v))), (a, b, *tensors.values()))


@pytest.mark.parametrize("case", range(len(EPILOGUE_CASES)))
def test_gradients_match_torch_autograd(case):
    f, f_torch, a_shape, b_shape, inputs = EPILOGUE_CASES[case]
    a, b, tensors = _operands(a_shape, b_shape, inputs, seed=30 + case)
    wrt = [a, b] + [t for t in tensors.values() if t.requires_grad]
    out = nt.matmul(a, b, epilogue=f, epilogue_inputs=tensors)
    grad = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(case))
    ours = torch.autograd.grad(out, wrt, grad)
    theirs = torch.autograd.grad(_reference_case(f_torch, a, b, tensors), wrt, grad)
    for o, t in zip(ours, theirs):
        assert o.shape == t.shape
        assert (torch.linalg.norm(o - t) / torch.linalg.norm(t)).item() < 1e-13


@pytest.mark.parametrize("case", [0, 1, 3, 5, 6, 7])
def test_opcheck(case):
    f, _, a_shape, b_shape, inputs = EPILOGUE_CASES[case]
    a, b, tensors = _operands(a_shape, b_shape, inputs, seed=40 + case)
    kinds = tuple((name, input_kind(t.shape, a.shape[-2], b.shape[-1])) for name, t in tensors.items())
    text, names = _epilogue_text(f, kinds)
    torch.library.opcheck(torch.ops.nvmathpy.matmul_custom.default, (a, b, text, [tensors[n] for n in names]))


def test_scalars_numbers_and_traced_expr():
    a, b, tensors = _operands((5, 4), (4, 3), {"gate": ((5, 3), True)}, seed=50)
    out = nt.matmul(a, b, epilogue=swiglu, epilogue_inputs={**tensors, "scale": 0.25})
    ref = swiglu_torch(a @ b, tensors["gate"], 0.25)
    assert torch.allclose(out, ref, rtol=1e-13, atol=0)
    expr = trace(swiglu, {"gate": "matrix", "scale": "scalar"})
    again = nt.matmul(a, b, epilogue=expr, epilogue_inputs={**tensors, "scale": 0.25})
    assert torch.equal(out, again)
    out.sum().backward()
    assert tensors["gate"].grad is not None and a.grad is not None and b.grad is not None


def test_index_epilogue_and_unused_input():
    a, b, _ = _operands((2, 5, 4), (4, 3), {}, seed=51)
    out = nt.matmul(a, b, epilogue=lambda x, row, col, batch: x * (row + 1) + col - batch,
                    epilogue_inputs={})
    z = (a @ b).detach()
    ref = z * torch.arange(1, 6, dtype=z.dtype).reshape(5, 1) + torch.arange(3) - torch.arange(2).reshape(2, 1, 1)
    assert torch.allclose(out, ref, rtol=1e-13, atol=1e-13)
    assert torch.autograd.gradcheck(lambda a, b: nt.matmul(a, b, epilogue=lambda x, row: x * row), (a, b))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(epilogue=swiglu, epilogue_inputs={"gate": torch.ones(4, 2)}), "gate.*dtype torch.float32"),
        (dict(epilogue=swiglu, epilogue_inputs={"gate": torch.ones(3, 2, dtype=torch.float64), "scale": 1.0}),
         r"gate.*shape \(3, 2\) does not broadcast"),
        (dict(epilogue=swiglu, epilogue_inputs={"gate": torch.ones(2, 4, 2, dtype=torch.float64), "scale": 1.0}),
         "does not broadcast"),
        (dict(epilogue=swiglu, epilogue_inputs={"gate": torch.ones(4, 2, dtype=torch.float64)}), "scale"),
        (dict(epilogue=lambda x, d: x * d, epilogue_inputs={"d": 2.0}), "'d' must be a Python identifier other than"),
        (dict(epilogue=swiglu, epilogue_inputs={"gate": np.ones((4, 2)), "scale": 1.0}), "torch.Tensor or a Python number"),
        (dict(epilogue=swiglu, epilogue_inputs=[1, 2]), "must be a dict"),
        (dict(epilogue=swiglu, bias=torch.ones(2, dtype=torch.float64)), "bias= is for the built-in"),
        (dict(epilogue="relu", epilogue_inputs={"s": 1.0}), "epilogue_inputs is for custom"),
    ],
)
def test_bad_arguments(kwargs, match):
    a, b = torch.randn(4, 3, dtype=torch.float64), torch.randn(3, 2, dtype=torch.float64)
    with pytest.raises(InvalidOperandError, match=match):
        nt.matmul(a, b, **kwargs)


def test_unsupported_operation_is_named():
    a, b = torch.randn(4, 3, dtype=torch.float64), torch.randn(3, 2, dtype=torch.float64)
    with pytest.raises(TypeError, match="np.sin"):
        nt.matmul(a, b, epilogue=lambda x: np.sin(x))


def _silu(v):
    return v * sigmoid(v)


def test_linear_with_custom_activation_trains_like_pytorch():
    torch.manual_seed(3)
    ours = torch.nn.Sequential(nt.Linear(6, 9, activation=_silu, dtype=torch.float64),
                               nt.Linear(9, 4, bias=False, activation=lambda v: np.tanh(v), dtype=torch.float64))
    torch.manual_seed(3)
    ref = torch.nn.Sequential(torch.nn.Linear(6, 9, dtype=torch.float64), torch.nn.SiLU(),
                              torch.nn.Linear(9, 4, bias=False, dtype=torch.float64), torch.nn.Tanh())
    assert all(torch.equal(p, q) for p, q in zip(ours.parameters(), ref.parameters()))
    g = torch.Generator().manual_seed(4)
    x, y = torch.randn(2, 13, 6, dtype=torch.float64, generator=g), torch.randn(2, 13, 4, dtype=torch.float64, generator=g)
    losses = []
    for model in (ours, ref):
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        run = []
        for _ in range(5):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            run.append(loss.item())
        losses.append(run)
    assert losses[1][-1] < losses[1][0]
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-12)
    for p, q in zip(ours.parameters(), ref.parameters()):
        assert torch.allclose(p, q, rtol=1e-12, atol=1e-14)
    assert "activation=<function _silu" in repr(ours[0])


def test_compile_fullgraph_custom_epilogue():
    a, b, tensors = _operands((2, 6, 4), (4, 5), {"res": ((6, 5), True), "bias": ((5,), True)}, seed=60)
    layer = nt.Linear(4, 3, activation=_silu, dtype=torch.float64)

    def fn(a, b, res, bias):
        h = nt.matmul(a, b, epilogue=residual, epilogue_inputs={"res": res, "bias": bias})
        return layer(nt.matmul(h, b.mT, epilogue=swiglu, epilogue_inputs={"gate": a, "scale": 0.5}))

    args = (a, b, tensors["res"], tensors["bias"])
    explanation = torch._dynamo.explain(fn)(*args)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)
    out, expected = compiled(*args), fn(*args)
    assert torch.allclose(out, expected, rtol=1e-13, atol=1e-14)
    wrt = (*args, *layer.parameters())
    got = torch.autograd.grad(out.square().sum(), wrt)
    want = torch.autograd.grad(expected.square().sum(), wrt)
    for g_, w_ in zip(got, want):
        assert torch.allclose(g_, w_, rtol=1e-12, atol=1e-13)


def test_only_epilogue_inputs_require_grad():
    """With a and b constant, a bias-like input's gradient is dZ's column sums and a matrix
    input's is grad * df/dinput; no product is computed for a or b."""
    g = torch.Generator().manual_seed(70)
    a, b = torch.randn(2, 6, 4, dtype=torch.float64, generator=g), torch.randn(4, 5, dtype=torch.float64, generator=g)
    res = torch.randn(6, 5, dtype=torch.float64, generator=g, requires_grad=True)
    bias = torch.randn(5, dtype=torch.float64, generator=g, requires_grad=True)
    out = nt.matmul(a, b, epilogue=residual, epilogue_inputs={"res": res, "bias": bias})
    grad = torch.randn(out.shape, dtype=torch.float64, generator=g)
    ours = torch.autograd.grad(out, (res, bias), grad)
    theirs = torch.autograd.grad(residual_torch(a @ b, res, bias), (res, bias), grad)
    for o, t in zip(ours, theirs):
        assert o.shape == t.shape and torch.allclose(o, t, rtol=1e-13, atol=1e-13)
    assert torch.autograd.gradcheck(
        lambda r, c: nt.matmul(a, b, epilogue=residual, epilogue_inputs={"res": r, "bias": c}), (res, bias))
