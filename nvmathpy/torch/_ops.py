"""The built-in operators: ``nvmathpy::matmul`` (a built-in epilogue) and
``nvmathpy::matmul_bgradb``, with their fake implementations and autograd formulas."""

from __future__ import annotations

from typing import Any, Optional

import torch

from ..linalg import matmul as nv_matmul
from ..errors import InvalidOperandError
from ..operands import to_package, wrap

#: The epilogues the operator takes, mapped to (activation, has bias).
EPILOGUES: dict[str, tuple[Optional[str], bool]] = {
    "none": (None, False),
    "bias": (None, True),
    "relu": ("relu", False),
    "relu_bias": ("relu", True),
    "gelu": ("gelu", False),
    "gelu_bias": ("gelu", True),
}

# -- shapes ------------------------------------------------------------------------------------


def _result_shape(a: torch.Tensor, b: torch.Tensor) -> tuple[int, ...]:
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return (*batch, a.shape[-2], b.shape[-1])


def _sum_to(x: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Reduce a broadcast result back to an operand's ``shape`` (the adjoint of broadcasting)."""
    if x.shape == shape:
        return x
    lead = x.ndim - len(shape)
    if lead:
        x = x.sum(dim=tuple(range(lead)))
    keep = tuple(i for i, n in enumerate(shape) if n == 1 and x.shape[i] != 1)
    return x.sum(dim=keep, keepdim=True) if keep else x


# -- the operators -----------------------------------------------------------------------------


@torch.library.custom_op("nvmathpy::matmul", mutates_args=())
def _matmul_op(
    a: torch.Tensor, b: torch.Tensor, bias: Optional[torch.Tensor], epilogue: str, save_aux: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    activation, _ = EPILOGUES[epilogue]
    inputs = {"bias": bias} if bias is not None else None
    # Both outputs are returned C-contiguous, as the fake implementation below reports them (an
    # engine may hand back a strided view: cuBLASLt's GELU aux has a padded leading dimension, a
    # row bias gives an F-ordered result); .contiguous() is free when they already are.
    if save_aux and activation is not None:
        name = f"{activation}_aux_bias" if bias is not None else f"{activation}_aux"
        out, aux = nv_matmul(a, b, epilogue=name, epilogue_inputs=inputs)
        return out.contiguous(), aux[f"{activation}_aux"].contiguous()
    out = nv_matmul(a, b, epilogue=None if epilogue == "none" else epilogue, epilogue_inputs=inputs)
    return out.contiguous(), a.new_empty(0)


@_matmul_op.register_fake
def _matmul_fake(a, b, bias, epilogue, save_aux):  # noqa: ANN001, ANN202 - signature fixed by the op
    shape = _result_shape(a, b)
    activation, _ = EPILOGUES[epilogue]
    out = a.new_empty(shape)
    if save_aux and activation is not None:
        return out, a.new_empty(shape, dtype=torch.bool if activation == "relu" else a.dtype)
    return out, a.new_empty(0)


@torch.library.custom_op("nvmathpy::matmul_bgradb", mutates_args=())
def _bgradb_op(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    na, nb = wrap(a, "a"), wrap(b, "b")
    out, aux = nv_matmul(na.array, nb.array, epilogue="bgradb")
    return to_package(out, na).contiguous(), to_package(aux["bgradb"], na).contiguous()  # as the fake


@_bgradb_op.register_fake
def _bgradb_fake(a, b):  # noqa: ANN001, ANN202
    shape = _result_shape(a, b)
    return a.new_empty(shape), a.new_empty((*shape[:-2], shape[-1]))


def _product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` through the operator (differentiable, so double backward works)."""
    return _matmul_op(a, b, None, "none", False)[0]


def _bgradb_setup(ctx: Any, inputs: tuple, output: tuple) -> None:
    ctx.save_for_backward(*inputs)


def _bgradb_backward(ctx: Any, grad: Any, grad_sums: Any) -> tuple:
    a, b = ctx.saved_tensors
    if grad is None:
        grad = a.new_zeros(_result_shape(a, b))
    da = _sum_to(_product(grad, b.mT), a.shape) if ctx.needs_input_grad[0] else None
    db = None
    if ctx.needs_input_grad[1]:
        db = _product(a.mT, grad)
        if grad_sums is not None:
            db = db + grad_sums.unsqueeze(-2)
        db = _sum_to(db, b.shape)
    return da, db


_bgradb_op.register_autograd(_bgradb_backward, setup_context=_bgradb_setup)


def _setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
    a, b, bias, epilogue, _ = inputs
    _, aux = output
    if not aux.is_floating_point() or aux.numel() == 0:
        ctx.mark_non_differentiable(aux)  # the relu mask, or nothing; gelu's z stays differentiable
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(a, b, bias, aux)
    ctx.epilogue = epilogue
    ctx.bias_shape = None if bias is None else bias.shape


def _backward(ctx: Any, grad: torch.Tensor | None, grad_aux: torch.Tensor | None) -> tuple:
    """``dZ = dY * act'(z)`` (plus the gradient reaching ``z`` itself through the gelu aux
    output, in double backward), then ``dA = dZ B^T`` and ``(dB, dbias)`` from one bgradb product."""
    a, b, bias, aux = ctx.saved_tensors
    activation, _ = EPILOGUES[ctx.epilogue]
    if activation is not None and aux.numel() == 0:  # run without save_aux: recompute z
        z = _product(a, b) if bias is None else _matmul_op(a, b, bias, "bias", False)[0]
        aux = z > 0 if activation == "relu" else z
    dz = grad
    if grad is not None and activation == "relu":
        dz = grad.masked_fill(aux.logical_not(), 0)
    elif grad is not None and activation == "gelu":
        dz = torch.ops.aten.gelu_backward(grad, aux, approximate="tanh")
    if grad_aux is not None and grad_aux.numel():
        dz = grad_aux if dz is None else dz + grad_aux
    if dz is None:
        return None, None, None, None, None
    need_a, need_b, need_bias = ctx.needs_input_grad[:3]
    da = db = dbias = None
    if need_a:
        da = _sum_to(_product(dz, b.mT), a.shape)
    if need_b or need_bias:
        if b.ndim == 2 and a.ndim > 2:  # a shared weight: one product over the flattened batch
            left, right = a.reshape(-1, a.shape[-1]).mT, dz.reshape(-1, dz.shape[-1])
        else:
            left, right = a.mT, dz
        product, column_sums = _bgradb_op(left, right)
        db = _sum_to(product, b.shape) if need_b else None
        if need_bias:
            n = dz.shape[-1]
            if ctx.bias_shape == (n,):
                dbias = column_sums.reshape(-1, n).sum(0) if column_sums.ndim > 1 else column_sums
            else:
                dbias = _sum_to(dz, ctx.bias_shape)
    return da, db, dbias, None, None


_matmul_op.register_autograd(_backward, setup_context=_setup_context)


# -- argument checks ---------------------------------------------------------------------------


def _check(a: Any, b: Any, bias: Any, epilogue: str) -> None:
    for name, t in (("a", a), ("b", b), ("bias", bias)):
        if t is not None and not isinstance(t, torch.Tensor):
            raise InvalidOperandError(f"matmul: {name} must be a torch.Tensor, got {type(t).__name__}")
    if a.ndim < 2 or b.ndim < 2:
        raise InvalidOperandError(
            f"matmul: a and b must have at least 2 dimensions (..., M, K) and (..., K, N); "
            f"got a.shape={tuple(a.shape)}, b.shape={tuple(b.shape)}"
        )
    if a.shape[-1] != b.shape[-2]:
        raise InvalidOperandError(
            f"matmul: a.shape={tuple(a.shape)} and b.shape={tuple(b.shape)} do not match in K (a's last axis, b's second last)"
        )
    try:
        result = _result_shape(a, b)
    except RuntimeError:
        raise InvalidOperandError(
            f"matmul: the batch shapes of a {tuple(a.shape)} and b {tuple(b.shape)} do not broadcast"
        ) from None
    _, has_bias = EPILOGUES[epilogue]
    if has_bias and bias is None:
        raise InvalidOperandError(f"matmul: epilogue={epilogue!r} needs bias=")
    if not has_bias and bias is not None:
        raise InvalidOperandError(f"matmul: bias was given but epilogue={epilogue!r} adds none; use a *_bias epilogue")
    if bias is not None:
        try:
            fits = bias.ndim <= len(result) and torch.broadcast_shapes(bias.shape, result) == result
        except RuntimeError:
            fits = False
        if not fits:
            raise InvalidOperandError(f"matmul: bias of shape {tuple(bias.shape)} does not broadcast to the result {result}")
    for name, t in (("b", b), ("bias", bias)):
        if t is not None and t.dtype != a.dtype:
            raise InvalidOperandError(f"matmul: {name} has dtype {t.dtype} but a has {a.dtype}; convert them to one dtype")
