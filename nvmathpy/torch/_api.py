"""The user-facing function and layer: :func:`matmul` and :class:`Linear`."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import torch

from ..errors import InvalidOperandError, InvalidOptionError
from ..kernels import ir_text
from ..kernels.ir import Expr, input_, substitute
from ..kernels.ir_grad import value_name
from ..kernels.trace import trace
from ._custom import _custom_matmul, _custom_op, _program
from ._ops import EPILOGUES, _check, _matmul_op

# -- user-facing -------------------------------------------------------------------------------


def matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    epilogue: str | Callable[..., Any] | Expr | None = None,
    epilogue_inputs: Mapping[str, Any] | None = None,
) -> torch.Tensor:
    """``act(a @ b + bias)`` (or a custom ``f(a @ b, ...)``) in one fused nvmathpy call,
    differentiable and ``torch.compile``-able.

    Parameters
    ----------
    a, b
        ``(..., M, K)`` and ``(..., K, N)`` tensors of one floating dtype (batch dims broadcast).
    bias
        Broadcastable to the result (``(N,)``: one value per output column); required by the
        ``*_bias`` epilogues, refused by the others.
    epilogue
        ``None``, ``"bias"``, ``"relu"``, ``"relu_bias"``, ``"gelu"`` or ``"gelu_bias"``
        (gelu is the tanh approximation, ``torch.nn.GELU(approximate="tanh")``). When given
        ``bias`` without an epilogue, ``"bias"`` is used. Or a custom epilogue: a Python
        function ``f(x, name1, ...)`` of the product value ``x`` and the named
        ``epilogue_inputs`` (traced once per function and input kinds, as for
        :func:`nvmathpy.linalg.matmul`), or an already traced :class:`~nvmathpy.kernels.ir.Expr`.
    epilogue_inputs
        For a custom epilogue: ``{name: tensor or number}``; tensors broadcast to the result
        (``(N,)`` per column, ``(M, 1)`` per row, 0-d scalars, full matrices) and get
        gradients when they require them.

    Returns
    -------
    torch.Tensor
        The result, shape ``(..., M, N)``.

    Examples
    --------
    >>> import torch
    >>> from nvmathpy.torch import matmul
    >>> x = torch.tensor([[1.0, -2.0], [3.0, 4.0]], requires_grad=True)
    >>> w = torch.eye(2, requires_grad=True)
    >>> y = matmul(x, w, bias=torch.tensor([0.5, 0.5]), epilogue="relu_bias")
    >>> y
    tensor([[1.5000, 0.0000],
            [3.5000, 4.5000]], grad_fn=<...>)
    >>> y.sum().backward()
    >>> x.grad
    tensor([[1., 0.],
            [1., 1.]])

    A custom epilogue, here a gated tail whose gate gets a gradient too:

    >>> import numpy as np
    >>> gate = torch.zeros(2, 2, requires_grad=True)
    >>> y = matmul(x, w, epilogue=lambda v, gate: v * (1 / (1 + np.exp(-gate))), epilogue_inputs={"gate": gate})
    >>> y
    tensor([[ 0.5000, -1.0000],
            [ 1.5000,  2.0000]], grad_fn=<...>)
    >>> y.sum().backward()
    >>> gate.grad
    tensor([[ 0.2500, -0.5000],
            [ 0.7500,  1.0000]])
    """
    if epilogue is not None and (isinstance(epilogue, Expr) or (callable(epilogue) and not isinstance(epilogue, str))):
        if bias is not None:
            raise InvalidOperandError("matmul: bias= is for the built-in epilogues; with a custom epilogue pass "
                                      "the bias through epilogue_inputs and add it in the function")
        return _custom_matmul(a, b, epilogue, epilogue_inputs)
    if epilogue_inputs is not None:
        raise InvalidOperandError("matmul: epilogue_inputs is for custom epilogues; the built-in ones take bias=")
    if epilogue is None:
        epilogue = "bias" if bias is not None else "none"
    if epilogue not in EPILOGUES:
        allowed = ", ".join(repr(e) for e in EPILOGUES if e != "none")
        raise InvalidOptionError(f"matmul: epilogue={epilogue!r} is not allowed; allowed: None, {allowed}")
    _check(a, b, bias, epilogue)
    save_aux = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (a, b, bias))
    return _matmul_op(a, b, bias, epilogue, save_aux)[0]


class Linear(torch.nn.Linear):
    """``torch.nn.Linear`` followed by an optional activation, fused into one nvmathpy matmul.

    Same parameters, initialisation and ``state_dict`` as :class:`torch.nn.Linear`, plus
    ``activation``: ``None``, ``"relu"``, ``"gelu"`` (tanh approximation), or a Python function
    of one value written as a custom epilogue (NumPy ufuncs, ``np.where``, the helpers of
    :mod:`nvmathpy.linalg.epilogues`), traced once here and applied to ``x W^T + bias``.

    Examples
    --------
    >>> import torch
    >>> from nvmathpy.torch import Linear
    >>> _ = torch.manual_seed(0)
    >>> layer = Linear(3, 2, activation="relu")
    >>> x = torch.randn(4, 3)
    >>> ref = torch.relu(torch.nn.functional.linear(x, layer.weight, layer.bias))
    >>> torch.allclose(layer(x), ref)
    True
    >>> from nvmathpy.linalg.epilogues import sigmoid
    >>> silu = Linear(3, 2, activation=lambda v: v * sigmoid(v))
    >>> ref = torch.nn.functional.silu(torch.nn.functional.linear(x, silu.weight, silu.bias))
    >>> torch.allclose(silu(x), ref)
    True
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *,
                 activation: str | Callable[[Any], Any] | None = None, device: Any = None, dtype: Any = None):
        custom = callable(activation) and not isinstance(activation, str)
        if not custom and activation not in (None, "relu", "gelu"):
            raise InvalidOptionError(f"Linear: activation={activation!r} is not allowed; allowed: None, 'relu', "
                                     "'gelu' or a Python function of one value")
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.activation = activation
        self._custom: tuple[str, tuple[str, ...]] | None = None
        if custom:
            expr = trace(activation, {})
            if bias:
                z = Expr("add", (input_("x", "value"), input_("bias", "col")))
                expr = substitute(expr, {value_name(expr) or "": z})
            text = ir_text.dumps(expr)
            self._custom = (text, _program(text).inputs)
        parts = [p for p in (None if custom else activation, "bias" if bias else None) if p]
        self._epilogue = "_".join(parts) if parts else "none"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._custom is not None:
            text, names = self._custom
            return _custom_op(x, self.weight.mT, text, [self.bias] if names else [])
        return matmul(x, self.weight.mT, bias=self.bias, epilogue=self._epilogue)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, activation={self.activation!r}"


