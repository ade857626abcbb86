"""nvmathpy.torch.MLP: one autograd node over a stack of layers whose backward fuses the
activation's derivative and the bias gradients into its products (drelu_bgrad / dgelu_bgrad,
bgradb). Gradients against pure PyTorch in float64, training side by side, the epilogues the
backward really calls, opcheck of the backward operator, and torch.compile(fullgraph=True)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nvmathpy.torch as nt  # noqa: E402
from nvmathpy.errors import InvalidOperandError, InvalidOptionError  # noqa: E402


def _reference(mlp):
    """A pure-torch Sequential sharing the MLP's parameter values (copies)."""
    layers = []
    for i, layer in enumerate(mlp.layers):
        lin = torch.nn.Linear(layer.in_features, layer.out_features, mlp.bias, dtype=layer.weight.dtype)
        with torch.no_grad():
            lin.weight.copy_(layer.weight)
            if mlp.bias:
                lin.bias.copy_(layer.bias)
        layers.append(lin)
        if i < len(mlp.layers) - 1:
            layers.append(torch.nn.ReLU() if mlp.activation == "relu" else torch.nn.GELU(approximate="tanh"))
    return torch.nn.Sequential(*layers)


def _rel(x, y):
    assert torch.all(torch.isfinite(x))
    return (torch.linalg.norm(x - y) / torch.linalg.norm(y)).item()


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("sizes,x_shape", [([7, 13, 11, 5], (2, 9, 7)), ([6, 4], (17, 6)), ([5, 9, 3], (11, 5))])
def test_gradients_match_pytorch(activation, bias, sizes, x_shape):
    torch.manual_seed(1)
    mlp = nt.MLP(sizes, activation=activation, bias=bias, dtype=torch.float64)
    ref = _reference(mlp)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(x_shape, dtype=torch.float64, generator=g, requires_grad=True)
    grad = torch.randn(*x_shape[:-1], sizes[-1], dtype=torch.float64, generator=g)
    out, expected = mlp(x), ref(x)
    assert out.shape == expected.shape and _rel(out, expected) < 1e-13
    ours = torch.autograd.grad(out, (x, *mlp.parameters()), grad)
    theirs = torch.autograd.grad(expected, (x, *ref.parameters()), grad)
    for o, t in zip(ours, theirs):
        assert o.shape == t.shape and _rel(o, t) < 1e-12


def test_partial_requires_grad():
    torch.manual_seed(3)
    mlp = nt.MLP([5, 8, 6, 2], activation="gelu", dtype=torch.float64)
    ref = _reference(mlp)
    for m in (mlp, ref):
        params = list(m.parameters())
        params[0].requires_grad_(False)  # first weight frozen
        params[-1].requires_grad_(False)  # last bias frozen
    x = torch.randn(10, 5, dtype=torch.float64)  # no input gradient
    wrt_ours = [p for p in mlp.parameters() if p.requires_grad]
    wrt_ref = [p for p in ref.parameters() if p.requires_grad]
    ours = torch.autograd.grad(mlp(x).square().sum(), wrt_ours)
    theirs = torch.autograd.grad(ref(x).square().sum(), wrt_ref)
    for o, t in zip(ours, theirs):
        assert _rel(o, t) < 1e-12


def test_gradcheck():
    torch.manual_seed(4)
    mlp = nt.MLP([4, 6, 5, 3], activation="gelu", dtype=torch.float64)
    x = torch.randn(7, 4, dtype=torch.float64, requires_grad=True)
    params = list(mlp.parameters())

    def fn(x, *values):
        return torch.func.functional_call(mlp, {name: v for (name, _), v in zip(mlp.named_parameters(), values)}, (x,))

    assert torch.autograd.gradcheck(fn, (x, *params))


def test_backward_uses_fused_epilogues(monkeypatch):
    calls = []
    from nvmathpy.torch import _ops

    real = _ops.nv_matmul

    def spy(a, b, **kwargs):
        epilogue = kwargs.get("epilogue")
        calls.append(epilogue if isinstance(epilogue, str) or epilogue is None else "custom")
        return real(a, b, **kwargs)

    monkeypatch.setattr(_ops, "nv_matmul", spy)
    torch.manual_seed(5)
    for activation in ("relu", "gelu"):
        mlp = nt.MLP([6, 9, 8, 7, 3], activation=activation, dtype=torch.float64)
        x = torch.randn(12, 6, dtype=torch.float64)
        out = mlp(x)
        assert calls == [f"{activation}_aux_bias"] * 3 + ["bias"]
        calls.clear()
        out.sum().backward()
        # last layer: weight and bias gradient in one bgradb product; then per layer the
        # previous layer's dZ and bias gradient in one d*_bgrad product, and the weight product
        assert calls == ["bgradb", f"d{activation}_bgrad", None, f"d{activation}_bgrad", None,
                         f"d{activation}_bgrad", None]
        calls.clear()
    mlp = nt.MLP([6, 9, 3], activation="relu", bias=False, dtype=torch.float64)
    mlp(torch.randn(4, 6, dtype=torch.float64)).sum().backward()
    assert calls == ["relu_aux", None, None, "drelu", None]


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 2e-5)])
def test_training_matches_pytorch(dtype, tol):
    torch.manual_seed(6)
    mlp = nt.MLP([10, 16, 12, 3], activation="relu", dtype=dtype)
    ref = _reference(mlp)
    g = torch.Generator().manual_seed(7)
    x, y = torch.randn(33, 10, dtype=dtype, generator=g), torch.randn(33, 3, dtype=dtype, generator=g)
    losses = []
    for model in (mlp, ref):
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        run = []
        for _ in range(6):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            run.append(loss.item())
        losses.append(run)
    assert losses[1][-1] < losses[1][0]  # it learns
    np.testing.assert_allclose(losses[0], losses[1], rtol=tol)
    for p, q in zip(mlp.parameters(), ref.parameters()):
        assert _rel(p.detach(), q.detach()) < tol


def test_no_grad_forward_matches():
    torch.manual_seed(8)
    mlp = nt.MLP([5, 7, 4], activation="gelu", dtype=torch.float64)
    x = torch.randn(3, 6, 5, dtype=torch.float64)
    with torch.no_grad():
        plain = mlp(x)
    assert plain.shape == (3, 6, 4) and _rel(plain, mlp(x).detach()) < 1e-15
    assert _rel(plain, _reference(mlp)(x).detach()) < 1e-13


def test_compile_fullgraph_no_graph_break():
    torch.manual_seed(9)
    mlp = nt.MLP([8, 12, 10, 4], activation="gelu", dtype=torch.float64)
    x = torch.randn(2, 7, 8, dtype=torch.float64, requires_grad=True)
    explanation = torch._dynamo.explain(mlp)(x)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1
    torch._dynamo.reset()
    compiled = torch.compile(mlp, backend="aot_eager", fullgraph=True)
    out, expected = compiled(x), mlp(x)
    assert _rel(out, expected) < 1e-14
    got = torch.autograd.grad(out.square().sum(), (x, *mlp.parameters()))
    want = torch.autograd.grad(expected.square().sum(), (x, *mlp.parameters()))
    for g_, w_ in zip(got, want):
        assert _rel(g_, w_) < 1e-13


@pytest.mark.parametrize("activation,bgrad", [("relu", True), ("relu", False), ("gelu", True), ("gelu", False)])
def test_opcheck_dact(activation, bgrad):
    g = torch.Generator().manual_seed(10)
    dz = torch.randn(9, 5, dtype=torch.float64, generator=g)
    w = torch.randn(5, 7, dtype=torch.float64, generator=g)
    z = torch.randn(9, 7, dtype=torch.float64, generator=g)
    aux = z > 0 if activation == "relu" else z
    out, sums = torch.ops.nvmathpy.matmul_dact(dz, w, aux, activation, bgrad)
    zz = z.clone().requires_grad_()
    act = torch.relu(zz) if activation == "relu" else torch.nn.functional.gelu(zz, approximate="tanh")
    (expected,) = torch.autograd.grad(act, zz, dz @ w)
    assert _rel(out, expected) < 1e-13
    if bgrad:
        assert _rel(sums, expected.sum(0)) < 1e-13
    else:
        assert sums.numel() == 0
    torch.library.opcheck(torch.ops.nvmathpy.matmul_dact.default, (dz, w, aux, activation, bgrad))


@pytest.mark.parametrize(
    "args,kwargs,match",
    [
        (([4],), {}, "at least two positive integers"),
        (([4, 0, 2],), {}, "at least two positive integers"),
        (([4, 2],), {"activation": "tanh"}, "activation='tanh' is not allowed"),
    ],
)
def test_bad_options(args, kwargs, match):
    with pytest.raises(InvalidOptionError, match=match):
        nt.MLP(*args, **kwargs)


def test_bad_input():
    mlp = nt.MLP([4, 3])
    with pytest.raises(InvalidOperandError, match=r"x must be a tensor \(\.\.\., 4\), got \(2, 5\)"):
        mlp(torch.ones(2, 5))
    assert "activation='relu'" in repr(mlp)


def test_double_backward_is_refused():
    torch.manual_seed(11)
    mlp = nt.MLP([6, 8, 3], dtype=torch.float64)
    x = torch.randn(5, 6, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(mlp(x).square().sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        g.sum().backward()
