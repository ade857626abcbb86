"""The nvmathpy.torch operator on CUDA tensors (issue 7's GPU half): forward against float64
references, results on the tensors' device and current stream, opcheck, gradients against
torch autograd, a small MLP trained side by side with pure PyTorch, and torch.compile."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nvmathpy.torch as nt  # noqa: E402
from nvmathpy.torch._custom import _epilogue_text  # noqa: E402

# a marker, not a module-level skip: the host-emulation run deselects these tests by name
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA device here")]

DEVICE = torch.device("cuda")


def reference(a, b, bias, activation):
    z = a.double().cpu().numpy() @ b.double().cpu().numpy()
    if bias is not None:
        z = z + bias.double().cpu().numpy()
    if activation == "relu":
        return np.maximum(z, 0)
    if activation == "gelu":
        return 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z**3)))
    return z


def rel(x, ref):
    x = x.detach().double().cpu().numpy()
    assert np.all(np.isfinite(x))
    return np.linalg.norm(x - ref) / np.linalg.norm(ref)


TOL = {torch.float32: 1e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("epilogue", ["none", "bias", "relu_bias", "gelu_bias", "relu", "gelu"])
def test_forward_on_the_tensors_device(dtype, epilogue):
    g = torch.Generator(device=DEVICE).manual_seed(1)
    a = torch.randn(3, 37, 29, device=DEVICE, dtype=dtype, generator=g)
    b = torch.randn(29, 41, device=DEVICE, dtype=dtype, generator=g)
    activation, has_bias = nt.EPILOGUES[epilogue]
    bias = torch.randn(41, device=DEVICE, dtype=dtype, generator=g) if has_bias else None
    out = nt.matmul(a, b, bias=bias, epilogue=None if epilogue == "none" else epilogue)
    assert out.device == a.device and out.dtype == dtype
    assert rel(out, reference(a, b, bias, activation)) < TOL[dtype] * 4


def test_runs_on_the_current_torch_stream():
    stream = torch.cuda.Stream()
    a = torch.randn(512, 512, device=DEVICE)
    b = torch.randn(512, 512, device=DEVICE)
    with torch.cuda.stream(stream):
        a.mul_(2.0)  # queued on the side stream before the product
        out = nt.matmul(a, b, epilogue="relu")
    stream.synchronize()
    assert rel(out, reference(a, b, None, "relu")) < 1e-5


def test_opcheck_on_cuda():
    g = torch.Generator(device=DEVICE).manual_seed(2)
    a = torch.randn(7, 5, device=DEVICE, generator=g, requires_grad=True)
    b = torch.randn(5, 3, device=DEVICE, generator=g, requires_grad=True)
    bias = torch.randn(3, device=DEVICE, generator=g, requires_grad=True)
    torch.library.opcheck(torch.ops.nvmathpy.matmul.default, (a, b, bias, "gelu_bias", True))
    torch.library.opcheck(torch.ops.nvmathpy.matmul_bgradb.default, (a.detach(), b.detach()))


def test_gradients_match_torch_autograd():
    g = torch.Generator(device=DEVICE).manual_seed(3)
    a = torch.randn(2, 9, 6, device=DEVICE, generator=g, requires_grad=True)
    b = torch.randn(6, 5, device=DEVICE, generator=g, requires_grad=True)
    bias = torch.randn(5, device=DEVICE, generator=g, requires_grad=True)
    for activation in ("relu", "gelu"):
        out = nt.matmul(a, b, bias=bias, epilogue=f"{activation}_bias")
        grads = torch.autograd.grad(out.square().sum(), (a, b, bias))
        z = a @ b + bias
        ref = torch.relu(z) if activation == "relu" else torch.nn.functional.gelu(z, approximate="tanh")
        want = torch.autograd.grad(ref.square().sum(), (a, b, bias))
        for got, expected in zip(grads, want):
            assert rel(got, expected.double().cpu().numpy()) < 1e-5


def _mlp(layer):
    torch.manual_seed(7)
    return torch.nn.Sequential(
        layer(10, 16, activation="relu", dtype=torch.float32, device=DEVICE),
        layer(16, 12, activation="gelu", dtype=torch.float32, device=DEVICE),
        layer(12, 3, bias=False, activation=None, dtype=torch.float32, device=DEVICE),
    )


def _torch_layer(fan_in, fan_out, bias=True, *, activation, dtype, device):
    lin = torch.nn.Linear(fan_in, fan_out, bias, dtype=dtype, device=device)
    if activation is None:
        return lin
    return torch.nn.Sequential(lin, torch.nn.ReLU() if activation == "relu" else torch.nn.GELU(approximate="tanh"))


def _train(model, x, y, steps=6):
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_mlp_training_matches_pytorch_on_cuda():
    ours, ref = _mlp(nt.Linear), _mlp(_torch_layer)
    g = torch.Generator(device=DEVICE).manual_seed(8)
    x = torch.randn(33, 10, device=DEVICE, generator=g)
    y = torch.randn(33, 3, device=DEVICE, generator=g)
    torch.backends.cuda.matmul.allow_tf32 = False
    ours_losses, ref_losses = _train(ours, x, y), _train(ref, x, y)
    assert ref_losses[-1] < ref_losses[0]
    np.testing.assert_allclose(ours_losses, ref_losses, rtol=1e-4)


def test_compile_fullgraph_on_cuda():
    model = _mlp(nt.Linear)
    x = torch.randn(17, 10, device=DEVICE)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    out = compiled(x)
    assert out.device == x.device
    assert torch.allclose(out, model(x), rtol=1e-5, atol=1e-6)


# -- custom (traced Python) epilogues through torch.ops.nvmathpy.matmul_custom -------------------


def _swiglu(x, gate, scale):
    return x * (gate / (1 + np.exp(-gate))) * scale


def _residual(x, res, bias):
    return np.maximum(x + bias, 0.0) + res * 0.5


def _custom_reference(name, z, inputs):
    if name == "swiglu":
        gate = inputs["gate"]
        return z * (gate / (1 + np.exp(-gate))) * inputs["scale"]
    return np.maximum(z + inputs["bias"], 0.0) + inputs["res"] * 0.5


CUSTOM = {"swiglu": (_swiglu, {"gate": (3, 37, 41), "scale": ()}), "residual": (_residual, {"res": (37, 41), "bias": (41,)})}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(CUSTOM))
def test_custom_epilogue_forward_on_the_tensors_device(name, dtype):
    f, shapes = CUSTOM[name]
    g = torch.Generator(device=DEVICE).manual_seed(11)
    a = torch.randn(3, 37, 29, device=DEVICE, dtype=dtype, generator=g)
    b = torch.randn(29, 41, device=DEVICE, dtype=dtype, generator=g)
    inputs = {k: torch.randn(s, device=DEVICE, dtype=dtype, generator=g) for k, s in shapes.items()}
    out = nt.matmul(a, b, epilogue=f, epilogue_inputs=inputs)
    assert out.device == a.device and out.dtype == dtype
    z = a.double().cpu().numpy() @ b.double().cpu().numpy()
    ref = _custom_reference(name, z, {k: v.double().cpu().numpy() for k, v in inputs.items()})
    assert rel(out, ref) < TOL[dtype] * 4


@pytest.mark.parametrize("name", sorted(CUSTOM))
def test_custom_epilogue_gradients_on_cuda(name):
    f, shapes = CUSTOM[name]
    g = torch.Generator(device=DEVICE).manual_seed(12)
    a = torch.randn(3, 37, 29, device=DEVICE, generator=g, requires_grad=True)
    b = torch.randn(29, 41, device=DEVICE, generator=g, requires_grad=True)
    inputs = {k: torch.randn(s, device=DEVICE, generator=g, requires_grad=True) for k, s in shapes.items()}
    out = nt.matmul(a, b, epilogue=f, epilogue_inputs=inputs)
    wrt = (a, b, *inputs.values())
    got = torch.autograd.grad(out.square().sum(), wrt)
    torch.backends.cuda.matmul.allow_tf32 = False
    z = a @ b
    if name == "swiglu":
        ref = z * torch.nn.functional.silu(inputs["gate"]) * inputs["scale"]
    else:
        ref = torch.relu(z + inputs["bias"]) + inputs["res"] * 0.5
    want = torch.autograd.grad(ref.square().sum(), wrt)
    for x, y in zip(got, want):
        assert x.device == a.device and x.shape == y.shape
        assert rel(x, y.double().cpu().numpy()) < 1e-4


def test_custom_epilogue_opcheck_and_compile_on_cuda():
    g = torch.Generator(device=DEVICE).manual_seed(13)
    a = torch.randn(7, 5, device=DEVICE, generator=g, requires_grad=True)
    b = torch.randn(5, 3, device=DEVICE, generator=g, requires_grad=True)
    gate = torch.randn(7, 3, device=DEVICE, generator=g, requires_grad=True)
    scale = torch.tensor(0.5, device=DEVICE)
    text, names = _epilogue_text(_swiglu, (("gate", "matrix"), ("scale", "scalar")))
    assert names == ("gate", "scale")
    torch.library.opcheck(torch.ops.nvmathpy.matmul_custom.default, (a, b, text, [gate, scale]))
    fn = lambda a, b, gate: nt.matmul(a, b, epilogue=_swiglu, epilogue_inputs={"gate": gate, "scale": 0.5})  # noqa: E731
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)
    out, expected = compiled(a, b, gate), fn(a, b, gate)
    assert out.device == a.device and rel(out, expected.detach().double().cpu().numpy()) < 1e-6


# -- nvmathpy.torch.MLP: the backward through drelu_bgrad / dgelu_bgrad / bgradb -----------------


def _torch_mlp(mlp):
    layers = []
    for i, layer in enumerate(mlp.layers):
        lin = torch.nn.Linear(layer.in_features, layer.out_features, mlp.bias, device=DEVICE)
        with torch.no_grad():
            lin.weight.copy_(layer.weight)
            if mlp.bias:
                lin.bias.copy_(layer.bias)
        layers.append(lin)
        if i < len(mlp.layers) - 1:
            layers.append(torch.nn.ReLU() if mlp.activation == "relu" else torch.nn.GELU(approximate="tanh"))
    return torch.nn.Sequential(*layers)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_mlp_gradients_match_pytorch_on_cuda(activation):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(14)
    mlp = nt.MLP([37, 64, 29, 11], activation=activation, device=DEVICE)
    ref = _torch_mlp(mlp)
    x = torch.randn(3, 41, 37, device=DEVICE, requires_grad=True)
    out, expected = mlp(x), ref(x)
    assert out.device == x.device and rel(out, expected.detach().double().cpu().numpy()) < 1e-5
    got = torch.autograd.grad(out.square().sum(), (x, *mlp.parameters()))
    want = torch.autograd.grad(expected.square().sum(), (x, *ref.parameters()))
    for g_, w_ in zip(got, want):
        assert g_.device == x.device and rel(g_, w_.double().cpu().numpy()) < 1e-4


def test_mlp_training_and_compile_on_cuda():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(15)
    mlp = nt.MLP([10, 16, 12, 3], activation="relu", device=DEVICE)
    ref = _torch_mlp(mlp)
    g = torch.Generator(device=DEVICE).manual_seed(16)
    x = torch.randn(33, 10, device=DEVICE, generator=g)
    y = torch.randn(33, 3, device=DEVICE, generator=g)
    ours_losses, ref_losses = _train(mlp, x, y), _train(ref, x, y)
    assert ref_losses[-1] < ref_losses[0]
    np.testing.assert_allclose(ours_losses, ref_losses, rtol=1e-4)
    torch._dynamo.reset()
    compiled = torch.compile(mlp, backend="aot_eager", fullgraph=True)
    xg = x.clone().requires_grad_()
    out = compiled(xg)
    (gx,) = torch.autograd.grad(out.square().sum(), xg)
    (want,) = torch.autograd.grad(mlp(xg).square().sum(), xg)
    assert rel(gx, want.double().cpu().numpy()) < 1e-5
