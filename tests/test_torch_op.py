"""Tests of nvmathpy.torch: the custom operators (opcheck), gradients (gradcheck), a small
MLP trained side by side with pure PyTorch, and torch.compile(fullgraph=True) tracing; and
that the torch and dask integrations stay optional."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nvmathpy.torch as nt  # noqa: E402
from nvmathpy.errors import InvalidOperandError, InvalidOptionError  # noqa: E402

TORCH_ACT = {
    None: lambda z: z,
    "relu": torch.relu,
    "gelu": lambda z: torch.nn.functional.gelu(z, approximate="tanh"),
}


def _reference(a, b, bias, epilogue):
    """float64 reference of act(a @ b + bias) in NumPy (gelu: tanh approximation)."""
    act, _ = nt.EPILOGUES[epilogue or ("bias" if bias is not None else "none")]
    z = a.detach().double().numpy() @ b.detach().double().numpy()
    if bias is not None:
        z = z + bias.detach().double().numpy()
    if act == "relu":
        return np.maximum(z, 0.0)
    if act == "gelu":
        return 0.5 * z * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (z + 0.044715 * z**3)))
    return z


def _rel(x, ref):
    x = x.detach().double().numpy()
    assert np.all(np.isfinite(x))
    return np.linalg.norm(x - ref) / np.linalg.norm(ref)


CASES = [  # (a shape, b shape, bias shape or None, epilogue)
    ((7, 5), (5, 3), None, None),
    ((7, 5), (5, 3), (3,), "bias"),
    ((2, 7, 5), (5, 11), (11,), "relu_bias"),
    ((3, 13, 4), (3, 4, 6), (6,), "gelu_bias"),
    ((1, 9, 6), (4, 6, 5), None, "relu"),
    ((9, 6), (6, 5), (9, 1), "gelu_bias"),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("a_shape,b_shape,bias_shape,epilogue", CASES)
def test_forward_matches_reference(a_shape, b_shape, bias_shape, epilogue, dtype):
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(a_shape, dtype=dtype, generator=g), torch.randn(b_shape, dtype=dtype, generator=g)
    bias = None if bias_shape is None else torch.randn(bias_shape, dtype=dtype, generator=g)
    before = [t.clone() for t in (a, b) + ((bias,) if bias is not None else ())]
    out = nt.matmul(a, b, bias=bias, epilogue=epilogue)
    assert out.dtype == dtype and out.shape == torch.Size(np.broadcast_shapes(a_shape[:-2], b_shape[:-2]) + (a_shape[-2], b_shape[-1]))
    assert _rel(out, _reference(a, b, bias, epilogue)) < (1e-5 if dtype == torch.float32 else 1e-12)
    for x, y in zip(before, (a, b, bias)):
        assert torch.equal(x, y)  # inputs untouched


def test_noncontiguous_operands():
    g = torch.Generator().manual_seed(2)
    a = torch.randn(11, 14, dtype=torch.float64, generator=g)[:, ::2]  # strided
    w = torch.randn(9, 7, dtype=torch.float64, generator=g).mT  # F-order view
    bias = torch.randn(9, dtype=torch.float64, generator=g)
    out = nt.matmul(a, w, bias=bias, epilogue="gelu_bias")
    assert _rel(out, _reference(a, w, bias, "gelu_bias")) < 1e-12


OPCHECK = [
    ((7, 5), (5, 3), None, "none", True, torch.float64),
    ((7, 5), (5, 3), (3,), "bias", True, torch.float32),
    ((2, 7, 5), (5, 4), (4,), "relu_bias", True, torch.float64),
    ((3, 6, 4), (3, 4, 5), (5,), "gelu_bias", True, torch.float32),
    ((6, 4), (4, 5), None, "gelu", False, torch.float64),
]


@pytest.mark.parametrize("a_shape,b_shape,bias_shape,epilogue,save_aux,dtype", OPCHECK)
def test_opcheck_matmul(a_shape, b_shape, bias_shape, epilogue, save_aux, dtype):
    g = torch.Generator().manual_seed(3)
    a = torch.randn(a_shape, dtype=dtype, generator=g, requires_grad=True)
    b = torch.randn(b_shape, dtype=dtype, generator=g, requires_grad=True)
    bias = None if bias_shape is None else torch.randn(bias_shape, dtype=dtype, generator=g, requires_grad=True)
    torch.library.opcheck(torch.ops.nvmathpy.matmul.default, (a, b, bias, epilogue, save_aux))


def _padded_views(result):
    """``result`` (a tensor or (tensor, {name: tensor})) as the CUDA engine can hand it back: each
    matrix a strided view (the GELU aux of a buffer whose leading dimension cuBLASLt pads to a
    multiple of 8; an F-ordered product for a row bias)."""
    def padded(t):
        buffer = t.new_zeros((*t.shape[:-1], -(-(t.shape[-1] + 1) // 8) * 8))
        buffer[..., : t.shape[-1]] = t
        return buffer[..., : t.shape[-1]]

    def f_ordered(t):
        return t.mT.contiguous().mT

    if isinstance(result, tuple):
        out, extra = result
        if not isinstance(out, torch.Tensor):  # the bgradb operator calls it on NumPy arrays
            return result
        return f_ordered(out), {name: padded(value) for name, value in extra.items()}
    return f_ordered(result) if isinstance(result, torch.Tensor) else result


@pytest.mark.parametrize("epilogue,save_aux", [("gelu_bias", True), ("relu_bias", True), ("bias", False)])
def test_opcheck_when_the_engine_returns_strided_views(monkeypatch, epilogue, save_aux):
    """The real implementation returns what the fake reports (C-contiguous outputs) even when the
    engine's results are views with other strides, as on the GPU (issue 20: ``Stride mismatch!
    Strides are (8, 1) and (3, 1)`` for the GELU aux of a 7 x 3 product)."""
    from nvmathpy.torch import _ops

    real = _ops.nv_matmul
    monkeypatch.setattr(_ops, "nv_matmul", lambda *args, **kwargs: _padded_views(real(*args, **kwargs)))
    g = torch.Generator().manual_seed(21)
    a = torch.randn(7, 5, dtype=torch.float64, generator=g, requires_grad=True)
    b = torch.randn(5, 3, dtype=torch.float64, generator=g, requires_grad=True)
    bias = torch.randn(3, dtype=torch.float64, generator=g, requires_grad=True)
    out, aux = torch.ops.nvmathpy.matmul(a, b, bias, epilogue, save_aux)
    assert out.is_contiguous() and aux.is_contiguous()
    assert _rel(out, _reference(a, b, bias, epilogue)) < 1e-13
    torch.library.opcheck(torch.ops.nvmathpy.matmul.default, (a, b, bias, epilogue, save_aux))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_opcheck_bgradb(dtype):
    g = torch.Generator().manual_seed(4)
    a = torch.randn(2, 5, 7, dtype=dtype, generator=g, requires_grad=True)
    b = torch.randn(2, 7, 3, dtype=dtype, generator=g, requires_grad=True)
    out, sums = torch.ops.nvmathpy.matmul_bgradb(a, b)
    ref = b.detach().double().numpy().sum(axis=-2)
    assert _rel(sums, ref) < (1e-6 if dtype == torch.float32 else 1e-13)
    torch.library.opcheck(torch.ops.nvmathpy.matmul_bgradb.default, (a, b))


GRADCHECK = [  # (a shape, b shape, bias shape, epilogue)
    ((5, 4), (4, 3), None, None),
    ((5, 4), (4, 3), (3,), "bias"),
    ((2, 5, 4), (4, 3), (3,), "relu_bias"),
    ((5, 4), (4, 3), (3,), "gelu_bias"),
    ((2, 3, 4), (2, 4, 3), None, "gelu"),
    ((5, 4), (4, 3), (5, 1), "relu_bias"),
]


@pytest.mark.parametrize("a_shape,b_shape,bias_shape,epilogue", GRADCHECK)
def test_gradcheck(a_shape, b_shape, bias_shape, epilogue):
    g = torch.Generator().manual_seed(5)
    a = torch.randn(a_shape, dtype=torch.float64, generator=g, requires_grad=True)
    b = torch.randn(b_shape, dtype=torch.float64, generator=g, requires_grad=True)
    if bias_shape is None:
        assert torch.autograd.gradcheck(lambda x, w: nt.matmul(x, w, epilogue=epilogue), (a, b))
    else:
        bias = torch.randn(bias_shape, dtype=torch.float64, generator=g, requires_grad=True)
        assert torch.autograd.gradcheck(lambda x, w, c: nt.matmul(x, w, bias=c, epilogue=epilogue), (a, b, bias))


@pytest.mark.parametrize("epilogue", ["gelu_bias", "relu_bias"])
def test_gradgradcheck(epilogue):
    g = torch.Generator().manual_seed(10)
    a = torch.randn(2, 4, 3, dtype=torch.float64, generator=g, requires_grad=True)
    b = torch.randn(3, 5, dtype=torch.float64, generator=g, requires_grad=True)
    bias = torch.randn(5, dtype=torch.float64, generator=g, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda x, w, c: nt.matmul(x, w, bias=c, epilogue=epilogue), (a, b, bias))


def test_gradients_match_torch_autograd():
    g = torch.Generator().manual_seed(6)
    x = torch.randn(4, 9, 6, dtype=torch.float64, generator=g, requires_grad=True)
    w = torch.randn(6, 5, dtype=torch.float64, generator=g, requires_grad=True)
    bias = torch.randn(5, dtype=torch.float64, generator=g, requires_grad=True)
    grad = torch.randn(4, 9, 5, dtype=torch.float64, generator=g)
    for epilogue, act in (("relu_bias", TORCH_ACT["relu"]), ("gelu_bias", TORCH_ACT["gelu"])):
        ours = torch.autograd.grad(nt.matmul(x, w, bias=bias, epilogue=epilogue), (x, w, bias), grad)
        theirs = torch.autograd.grad(act(x @ w + bias), (x, w, bias), grad)
        for o, t in zip(ours, theirs):
            assert _rel(o, t.numpy()) < 1e-12


def _mlp(layer, dtype):
    torch.manual_seed(7)
    return torch.nn.Sequential(
        layer(10, 16, activation="relu", dtype=dtype),
        layer(16, 12, activation="gelu", dtype=dtype),
        layer(12, 3, bias=False, activation=None, dtype=dtype),
    )


def _torch_layer(fan_in, fan_out, bias=True, *, activation, dtype):
    lin = torch.nn.Linear(fan_in, fan_out, bias, dtype=dtype)
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


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_mlp_training_matches_pytorch(dtype, tol):
    ours, ref = _mlp(nt.Linear, dtype), _mlp(_torch_layer, dtype)
    assert all(torch.equal(p, q) for p, q in zip(ours.parameters(), ref.parameters()))  # same init
    g = torch.Generator().manual_seed(8)
    x, y = torch.randn(33, 10, dtype=dtype, generator=g), torch.randn(33, 3, dtype=dtype, generator=g)
    ours_losses, ref_losses = _train(ours, x, y), _train(ref, x, y)
    assert ref_losses[-1] < ref_losses[0]  # it learns
    np.testing.assert_allclose(ours_losses, ref_losses, rtol=tol)
    for p, q in zip(ours.parameters(), ref.parameters()):
        assert _rel(p, q.detach().double().numpy()) < tol


def test_compile_fullgraph_no_graph_break():
    model = _mlp(nt.Linear, torch.float64)
    g = torch.Generator().manual_seed(9)
    x = torch.randn(17, 10, dtype=torch.float64, generator=g)
    explanation = torch._dynamo.explain(model)(x)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    out = compiled(x)
    expected = model(x)
    assert _rel(out, expected.detach().numpy()) < 1e-13
    out.square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    expected.square().sum().backward()
    for gc, ge in zip(grads, (p.grad for p in model.parameters())):
        assert _rel(gc, ge.numpy()) < 1e-12


def test_no_aux_saved_without_grad():
    a, b = torch.randn(4, 3, dtype=torch.float64), torch.randn(3, 2, dtype=torch.float64)
    _, aux = torch.ops.nvmathpy.matmul(a, b, None, "gelu", False)
    assert aux.numel() == 0
    out, aux = torch.ops.nvmathpy.matmul(a, b, None, "gelu", True)
    assert _rel(aux, (a @ b).numpy()) < 1e-14  # the pre-activation


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(epilogue="relu_aux"), InvalidOptionError, "epilogue='relu_aux' is not allowed"),
        (dict(epilogue="relu_bias"), InvalidOperandError, "needs bias"),
        (dict(epilogue="relu", bias=torch.ones(2, dtype=torch.float64)), InvalidOperandError, "bias was given"),
        (dict(bias=torch.ones(2, dtype=torch.float32)), InvalidOperandError, "bias has dtype torch.float32"),
        (dict(bias=torch.ones(3, dtype=torch.float64)), InvalidOperandError, r"bias of shape \(3,\) does not broadcast"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    a, b = torch.randn(4, 3, dtype=torch.float64), torch.randn(3, 2, dtype=torch.float64)
    with pytest.raises(error, match=match):
        nt.matmul(a, b, **kwargs)


def test_bad_shapes_and_types():
    with pytest.raises(InvalidOperandError, match="at least 2 dimensions"):
        nt.matmul(torch.ones(3), torch.ones(3, 2))
    with pytest.raises(InvalidOperandError, match="do not match in K"):
        nt.matmul(torch.ones(2, 3), torch.ones(4, 2))
    with pytest.raises(InvalidOperandError, match="batch shapes"):
        nt.matmul(torch.ones(2, 4, 3), torch.ones(3, 3, 2))
    with pytest.raises(InvalidOperandError, match="must be a torch.Tensor"):
        nt.matmul(np.ones((2, 3)), torch.ones(3, 2))
    with pytest.raises(InvalidOptionError, match="activation='tanh'"):
        nt.Linear(2, 3, activation="tanh")


@pytest.mark.parametrize("library,hint", [("torch", "pip install torch"), ("dask", "pip install 'nvmathpy[dask]'")])
def test_integrations_stay_optional(library, hint):
    """The core never imports torch or dask, and without them nvmathpy.torch / nvmathpy.dask
    raise MissingDependencyError naming what to install."""
    code = (f"import sys, nvmathpy, nvmathpy.linalg, nvmathpy.fft; nvmathpy.linalg.matmul; nvmathpy.fft.fft\n"
            f"assert {library!r} not in sys.modules\n"
            f"sys.modules[{library!r}] = None\n"
            f"try:\n    import nvmathpy.{library}\nexcept ImportError as e:\n"
            f"    assert type(e).__name__ == 'MissingDependencyError' and {hint!r} in str(e), e\n"
            f"else:\n    raise SystemExit('no error')")
    subprocess.run([sys.executable, "-c", code], check=True)
