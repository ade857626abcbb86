"""A whole MLP as one autograd node, its backward fusing ``act'`` and the bias gradients
into the products (``nvmathpy::matmul_dact`` with the ``d*_bgrad`` epilogues)."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from ..errors import InvalidOperandError, InvalidOptionError
from . import _ops
from ._api import matmul
from ._ops import _bgradb_op, _matmul_op, _product, _result_shape

# -- a whole MLP, with the activation's derivative fused into the backward products -------------


@torch.library.custom_op("nvmathpy::matmul_dact", mutates_args=())
def _dact_op(
    dz: torch.Tensor, w: torch.Tensor, aux: torch.Tensor, activation: str, bgrad: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dz @ w) * act'(z)`` from the forward's aux (the ``drelu``/``dgelu`` epilogues) and, with
    ``bgrad``, its sum over rows (the previous layer's bias gradient) from the same call."""
    name = f"d{activation}_bgrad" if bgrad else f"d{activation}"
    result = _ops.nv_matmul(dz, w, epilogue=name, epilogue_inputs={f"{activation}_aux": aux})
    if bgrad:
        out, sums = result
        return out, sums[name]
    return result, dz.new_empty(0)


@_dact_op.register_fake
def _dact_fake(dz, w, aux, activation, bgrad):  # noqa: ANN001, ANN202
    shape = _result_shape(dz, w)
    return dz.new_empty(shape), dz.new_empty((*shape[:-2], shape[-1]) if bgrad else (0,))


class _MLPFunction(torch.autograd.Function):
    """The forward and backward of a stack of ``act(x W^T + b)`` layers (the last one without
    the activation) in one autograd node, so the backward can fuse ``act'`` into its products.

    Forward: each hidden layer runs the ``*_aux(_bias)`` epilogue and keeps its aux (the relu
    mask, the gelu pre-activation). Backward, from the last layer down, with ``dZ_l`` the
    gradient at layer ``l``'s pre-activation: ``(W_l^T, b_l)`` gradients from one bgradb product
    ``X_l^T dZ_l`` for the last layer, ``X_l^T dZ_l`` alone for the others, and
    ``dZ_{l-1} = (dZ_l W_l) * act'(z_{l-1})`` with ``b_{l-1}``'s gradient (its column sums)
    from one ``d{act}_bgrad`` product.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, activation: str, has_bias: bool, *params: torch.Tensor) -> torch.Tensor:
        count = len(params) // 2 if has_bias else len(params)
        weights, biases = params[:count], (params[count:] if has_bias else (None,) * count)
        layer_inputs, auxes = [x], []
        h = x
        for i, (w, b) in enumerate(zip(weights, biases)):
            if i == count - 1:
                h, _ = _matmul_op(h, w.mT, b, "bias" if has_bias else "none", False)
            else:
                h, aux = _matmul_op(h, w.mT, b, f"{activation}_bias" if has_bias else activation, True)
                layer_inputs.append(h)
                auxes.append(aux)
        ctx.activation, ctx.has_bias, ctx.count = activation, has_bias, count
        ctx.save_for_backward(*layer_inputs, *auxes, *weights)
        return h

    @staticmethod
    @torch.autograd.function.once_differentiable  # hidden activations are saved without history
    def backward(ctx: Any, grad: torch.Tensor) -> tuple:
        count, activation, has_bias = ctx.count, ctx.activation, ctx.has_bias
        saved = ctx.saved_tensors
        layer_inputs, auxes, weights = saved[:count], saved[count:2 * count - 1], saved[2 * count - 1:]
        need_x, need_params = ctx.needs_input_grad[0], ctx.needs_input_grad[3:]
        d_weights: list[torch.Tensor | None] = [None] * count
        d_biases: list[torch.Tensor | None] = [None] * count
        dz, dx = grad, None
        for i in reversed(range(count)):
            last = i == count - 1
            need_w, need_b = need_params[i], has_bias and need_params[count + i]
            if need_w and last and has_bias:
                product, sums = _bgradb_op(layer_inputs[i].mT, dz)
                d_weights[i], d_biases[i] = product.mT, sums
            elif need_w:
                d_weights[i] = _product(dz.mT, layer_inputs[i])
            elif need_b and last:
                d_biases[i] = dz.sum(0)
            if i > 0:
                dz, sums = _dact_op(dz, weights[i], auxes[i - 1], activation, has_bias)
                if has_bias:
                    d_biases[i - 1] = sums
            elif need_x:
                dx = _product(dz, weights[0])
        return (dx, None, None, *d_weights, *(d_biases if has_bias else ()))


class MLP(torch.nn.Module):
    """A multilayer perceptron ``Linear -> act -> ... -> Linear`` whose backward fuses the
    activation's derivative and the bias gradients into its matrix products.

    Per-layer autograd (:class:`Linear`) cannot fuse ``act'(z)`` into the product that produces
    its incoming gradient; this module runs the whole stack as one autograd node: the forward
    uses the ``relu_aux_bias`` / ``gelu_aux_bias`` epilogues and keeps their aux outputs, the
    backward computes each ``dZ_{l-1} = (dZ_l W_l) * act'(z_{l-1})`` together with the bias
    gradient of layer ``l-1`` in one ``drelu_bgrad`` / ``dgelu_bgrad`` product, and each weight
    gradient in one product (``bgradb`` for the last layer's bias). Double backward is not
    supported (use :class:`Linear` layers for that).

    Parameters
    ----------
    sizes
        ``(in_features, hidden_1, ..., out_features)``: at least two sizes.
    activation
        ``"relu"`` or ``"gelu"`` (tanh approximation), after every layer but the last.
    bias
        Whether the layers have biases.
    device, dtype
        As for :class:`torch.nn.Linear`.

    Attributes
    ----------
    layers
        The :class:`torch.nn.Linear` layers holding the parameters (created in order, so a
        ``torch.nn.Sequential`` of the same Linear layers built after the same seed starts
        with the same values).

    Examples
    --------
    >>> import torch
    >>> from nvmathpy.torch import MLP
    >>> _ = torch.manual_seed(0)
    >>> mlp = MLP([4, 8, 3], activation="gelu")
    >>> x = torch.randn(5, 4)
    >>> ref = mlp.layers[1](torch.nn.functional.gelu(mlp.layers[0](x), approximate="tanh"))
    >>> torch.allclose(mlp(x), ref, atol=1e-6)
    True
    >>> mlp(x).square().sum().backward()
    >>> mlp.layers[0].bias.grad.shape
    torch.Size([8])
    """

    def __init__(self, sizes: Sequence[int], activation: str = "relu", bias: bool = True, *,
                 device: Any = None, dtype: Any = None):
        super().__init__()
        sizes = list(sizes)
        if len(sizes) < 2 or not all(isinstance(n, int) and n > 0 for n in sizes):
            raise InvalidOptionError(f"MLP: sizes={sizes!r} must be at least two positive integers "
                                     "(in_features, ..., out_features)")
        if activation not in ("relu", "gelu"):
            raise InvalidOptionError(f"MLP: activation={activation!r} is not allowed; allowed: 'relu', 'gelu'")
        self.activation, self.bias = activation, bool(bias)
        self.layers = torch.nn.ModuleList(
            torch.nn.Linear(n_in, n_out, bias, device=device, dtype=dtype) for n_in, n_out in zip(sizes, sizes[1:])
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.ndim < 1 or x.shape[-1] != self.layers[0].in_features:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise InvalidOperandError(f"MLP: x must be a tensor (..., {self.layers[0].in_features}), got {shape}")
        lead = x.shape[:-1]
        h = x.reshape(-1, x.shape[-1])
        weights = [layer.weight for layer in self.layers]
        biases = [layer.bias for layer in self.layers] if self.bias else []
        if torch.is_grad_enabled() and any(t.requires_grad for t in (h, *weights, *biases)):
            h = _MLPFunction.apply(h, self.activation, self.bias, *weights, *biases)
        else:
            last = len(self.layers) - 1
            for i, layer in enumerate(self.layers):
                epilogue = None if i == last else self.activation
                if self.bias:
                    epilogue = f"{epilogue}_bias" if epilogue else "bias"
                h = matmul(h, layer.weight.mT, bias=layer.bias, epilogue=epilogue)
        return h.reshape(*lead, h.shape[-1])

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"

