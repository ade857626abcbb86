"""PyTorch integration: nvmathpy's fused matmul as a ``torch.library`` custom operator.

Importing this module registers these operators in the ``nvmathpy`` namespace:

``torch.ops.nvmathpy.matmul(a, b, bias, epilogue, save_aux) -> (out, aux)``
    ``out = act(a @ b + bias)`` through :func:`nvmathpy.linalg.matmul` with a fused epilogue
    (``epilogue`` one of :data:`EPILOGUES`; ``"none"`` for the plain product). With
    ``save_aux`` the forward runs the ``*_aux`` epilogue and ``aux`` is what the backward
    needs: the boolean mask ``z > 0`` for relu, the pre-activation ``z`` for gelu (an empty
    tensor otherwise).
``torch.ops.nvmathpy.matmul_bgradb(a, b) -> (out, bgrad)``
    ``a @ b`` and, fused into the same call (the ``bgradb`` epilogue), ``b`` summed over its
    rows: the backward uses it to get the weight and bias gradients in one product.

``torch.ops.nvmathpy.matmul_custom(a, b, epilogue, inputs) -> out``
    ``out = f(a @ b, *inputs)`` for a custom (traced Python) epilogue ``f``. The operator's
    schema is static, so ``epilogue`` is the traced expression IR as text
    (:mod:`nvmathpy.kernels.ir_text`) and ``inputs`` the list of its input tensors in the
    IR's order (scalars as 0-d tensors). Its backward differentiates the IR symbolically
    (:mod:`nvmathpy.kernels.ir_grad`): with ``z = a @ b`` recomputed through the plain
    operator, ``dZ = grad * df/dz(z, inputs)``, then ``dA = dZ B^T`` and ``dB`` from one
    bgradb product whose column sums are also the gradient of any per-column input that
    enters like a bias (``df/dinput == df/dz``); other inputs get ``sum(grad * df/dinput)``
    reduced to their shape. The derivative expressions are evaluated with plain torch
    operations built from the IR: they run on the tensors' own device, trace under
    ``torch.compile``, and are themselves differentiable, so double backward works.

``torch.ops.nvmathpy.matmul_dact(dz, w, aux, activation, bgrad) -> (out, bgrad)``
    ``(dz @ w) * act'(z)`` from the forward's aux with the ``drelu``/``dgelu`` epilogues, and
    with ``bgrad`` its sum over rows (``*_bgrad``): the step of :class:`MLP`'s backward.

All have fake (meta) implementations, so ``torch.compile(fullgraph=True)`` traces through
them without a graph break, and ``matmul`` has an autograd formula (``register_autograd``):
for ``Y = act(X W + bias)`` with ``dZ = dY * act'(z)`` (from the saved aux),
``dX = dZ W^T`` and ``(dW, dbias) = (X^T dZ, sum_rows(dZ))`` from one ``bgradb`` product.

The user-facing pieces are :func:`matmul`, :class:`Linear` (one fused layer, per-op autograd)
and :class:`MLP` (a whole stack as one autograd node, so its backward can fuse ``act'`` and
the bias gradients into the products).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

from .errors import InvalidOperandError, InvalidOptionError, MissingDependencyError
from .kernels import ir_text
from .kernels.ir import Expr, input_, inputs_of, substitute
from .kernels.ir_grad import derivatives, value_name
from .kernels.trace import trace
from .linalg import matmul as _nv_matmul
from .linalg._custom_epilogue import RESERVED, input_kind
from .operands import to_package, wrap

try:
    import torch
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise MissingDependencyError("nvmathpy.torch needs PyTorch: pip install torch") from exc

__all__ = ["EPILOGUES", "matmul", "Linear", "MLP"]

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
    if save_aux and activation is not None:
        name = f"{activation}_aux_bias" if bias is not None else f"{activation}_aux"
        out, aux = _nv_matmul(a, b, epilogue=name, epilogue_inputs=inputs)
        return out, aux[f"{activation}_aux"]
    out = _nv_matmul(a, b, epilogue=None if epilogue == "none" else epilogue, epilogue_inputs=inputs)
    return out, a.new_empty(0)


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
    out, aux = _nv_matmul(na.array, nb.array, epilogue="bgradb")
    return to_package(out, na), to_package(aux["bgradb"], na)


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


# -- custom (traced Python) epilogues ----------------------------------------------------------


@dataclass(frozen=True)
class _Program:
    """A parsed custom epilogue: the IR, its value input's name, the other inputs in operator
    order, and the derivative of the IR with respect to the value and to each input."""

    expr: Expr
    value: str | None
    inputs: tuple[str, ...]
    d_value: Expr
    d_inputs: tuple[Expr, ...]
    bias_like: tuple[bool, ...]  # per input: a per-column input whose derivative is df/dz


@functools.lru_cache(maxsize=256)
def _program(text: str) -> _Program:
    expr = ir_text.loads(text)
    value = value_name(expr)
    kinds = {name: kind for name, kind in inputs_of(expr).items() if kind != "value"}
    grads = derivatives(expr)
    d_value = grads[value] if value is not None else Expr("const", value=0.0)
    d_text = ir_text.dumps(d_value)
    d_inputs = tuple(grads[name] for name in kinds)
    bias_like = tuple(kinds[name] == "col" and ir_text.dumps(d) == d_text for name, d in zip(kinds, d_inputs))
    return _Program(expr, value, tuple(kinds), d_value, d_inputs, bias_like)


_TORCH_UNARY: dict[str, Callable[[Any], Any]] = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "tanh": torch.tanh,
    "erf": torch.erf, "sigmoid": torch.sigmoid, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
}
_TORCH_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
}


class _TorchEvaluator:
    """Evaluates IR nodes with plain (differentiable) torch operations on ``z``'s device.

    ``env`` binds input names to tensors (the value's name to ``z``); constants stay Python
    numbers where torch accepts them. Results are memoised per node, so expressions that share
    nodes (an IR and its derivatives) evaluate each shared node once.
    """

    def __init__(self, z: torch.Tensor, env: Mapping[str, torch.Tensor]):
        self.z, self.env = z, env
        self.memo: dict[int, Any] = {}

    def __call__(self, node: Expr) -> Any:
        key = id(node)
        if key not in self.memo:
            self.memo[key] = self._node(node)
        return self.memo[key]

    def _tensor(self, v: Any) -> torch.Tensor:
        if isinstance(v, torch.Tensor):
            return v
        return self.z.new_full((), v, dtype=torch.bool if isinstance(v, bool) else self.z.dtype)

    def _node(self, node: Expr) -> Any:
        op = node.op
        if op == "input":
            return self.env[node.name]
        if op == "const":
            return node.value
        if op == "index":
            return self._index(node.name)
        args = [self(a) for a in node.args]
        if all(not isinstance(a, torch.Tensor) for a in args):
            args[0] = self._tensor(args[0])  # all constants: compute on a 0-d tensor
        if op in _TORCH_UNARY:
            return _TORCH_UNARY[op](self._tensor(args[0]))
        if op in _TORCH_BINARY:
            return _TORCH_BINARY[op](*args)
        if op == "pow":
            return torch.pow(args[0], args[1])
        if op in ("maximum", "minimum"):
            return (torch.maximum if op == "maximum" else torch.minimum)(self._tensor(args[0]), self._tensor(args[1]))
        if op in ("and", "or"):
            logical = torch.logical_and if op == "and" else torch.logical_or
            return logical(self._tensor(args[0]), self._tensor(args[1]))
        if op == "not":
            return torch.logical_not(self._tensor(args[0]))
        if op == "where":
            cond = self._tensor(args[0])
            cond = cond if cond.dtype == torch.bool else cond != 0
            return torch.where(cond, self._tensor(args[1]), self._tensor(args[2]))
        if op == "cast":
            x = self._tensor(args[0])
            if node.kind == "bool":
                return x if x.dtype == torch.bool else x != 0
            return x.to(getattr(torch, node.kind)).to(self.z.dtype)  # round, keep computing in z's dtype
        raise InvalidOptionError(f"custom epilogue: the IR operation {op!r} has no torch evaluation")

    def _index(self, name: str) -> torch.Tensor:
        z = self.z
        if name == "row":
            return torch.arange(z.shape[-2], device=z.device).reshape(-1, 1)
        if name == "col":
            return torch.arange(z.shape[-1], device=z.device)
        batch = tuple(z.shape[:-2])
        return torch.arange(z[..., 0, 0].numel(), device=z.device).reshape(*batch, 1, 1)


@torch.library.custom_op("nvmathpy::matmul_custom", mutates_args=())
def _custom_op(a: torch.Tensor, b: torch.Tensor, epilogue: str, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
    program = _program(epilogue)
    return _nv_matmul(a, b, epilogue=program.expr, epilogue_inputs=dict(zip(program.inputs, inputs)))


@_custom_op.register_fake
def _custom_fake(a, b, epilogue, inputs):  # noqa: ANN001, ANN202 - signature fixed by the op
    return a.new_empty(_result_shape(a, b))


def _custom_setup(ctx: Any, inputs: tuple, output: Any) -> None:
    a, b, epilogue, tensors = inputs
    ctx.epilogue = epilogue
    ctx.save_for_backward(a, b, *tensors)


def _custom_backward(ctx: Any, grad: torch.Tensor) -> tuple:
    """``dZ = grad * df/dz``, ``dA = dZ B^T``, ``(dB, column sums of dZ)`` from one bgradb
    product, and ``sum(grad * df/dinput)`` (or those column sums) for the inputs."""
    a, b, *tensors = ctx.saved_tensors
    program = _program(ctx.epilogue)
    need_a, need_b, _, need_inputs = ctx.needs_input_grad
    need_inputs = [bool(n) and t.is_floating_point() for n, t in zip(need_inputs, tensors)]
    z = _product(a, b)
    env = dict(zip(program.inputs, tensors))
    if program.value is not None:
        env[program.value] = z
    evaluate = _TorchEvaluator(z, env)
    dz = column_sums = da = db = None
    if need_a or need_b or any(n and bl for n, bl in zip(need_inputs, program.bias_like)):
        dz = grad * evaluate(program.d_value)
    if need_a:
        da = _sum_to(_product(dz, b.mT), a.shape)
    if need_b:
        if b.ndim == 2 and a.ndim > 2:
            left, right = a.reshape(-1, a.shape[-1]).mT, dz.reshape(-1, dz.shape[-1])
        else:
            left, right = a.mT, dz
        product, column_sums = _bgradb_op(left, right)
        db = _sum_to(product, b.shape)
    d_inputs = []
    for need, bias_like, tensor, derivative in zip(need_inputs, program.bias_like, tensors, program.d_inputs):
        if not need:
            d_inputs.append(None)
        elif bias_like and column_sums is not None and tensor.numel() == column_sums.shape[-1]:
            # one value per column for the whole batch: the bgradb product's column sums
            d_inputs.append(column_sums.reshape(-1, tensor.numel()).sum(0).reshape(tensor.shape))
        elif bias_like:
            d_inputs.append(_sum_to(dz, tensor.shape))
        else:
            d_inputs.append(_sum_to(grad * evaluate(derivative), tensor.shape))
    return da, db, None, d_inputs


_custom_op.register_autograd(_custom_backward, setup_context=_custom_setup)


_TRACED: dict[tuple[Callable[..., Any], tuple[tuple[str, str], ...]], str] = {}


@torch.compiler.assume_constant_result
def _epilogue_text(
    epilogue: Callable[..., Any] | Expr, kinds: tuple[tuple[str, str], ...]
) -> tuple[str, tuple[str, ...]]:
    """The IR text of ``epilogue`` (traced with input ``kinds`` if a function) and the names of
    the inputs it reads, in operator order. Under ``torch.compile`` this runs once at trace
    time and its result is a constant (Dynamo cannot trace the tracer's symbolic values)."""
    if isinstance(epilogue, Expr):
        text = ir_text.dumps(epilogue)
    else:
        key = (epilogue, kinds)
        if key not in _TRACED:
            if len(_TRACED) >= 256:
                _TRACED.pop(next(iter(_TRACED)))
            _TRACED[key] = ir_text.dumps(trace(epilogue, dict(kinds)))
        text = _TRACED[key]
    return text, _program(text).inputs


def _custom_matmul(a: Any, b: Any, epilogue: Any, epilogue_inputs: Mapping[str, Any] | None) -> torch.Tensor:
    _check(a, b, None, "none")
    result = _result_shape(a, b)
    if epilogue_inputs is None:
        epilogue_inputs = {}
    if not isinstance(epilogue_inputs, Mapping):
        raise InvalidOperandError(f"matmul: epilogue_inputs must be a dict of name -> tensor or number, "
                                  f"got {type(epilogue_inputs).__name__}")
    tensors: dict[str, torch.Tensor] = {}
    for name, value in epilogue_inputs.items():
        if not isinstance(name, str) or not name.isidentifier() or name in RESERVED:
            raise InvalidOperandError(f"matmul: epilogue_inputs name {name!r} must be a Python identifier "
                                      f"other than {list(RESERVED)}")
        if isinstance(value, (bool, int, float)):
            value = torch.tensor(value, dtype=a.dtype, device=a.device)
        if not isinstance(value, torch.Tensor):
            raise InvalidOperandError(f"matmul: epilogue_inputs[{name!r}] must be a torch.Tensor or a Python "
                                      f"number, got {type(value).__name__}")
        try:
            fits = value.ndim <= len(result) and torch.broadcast_shapes(value.shape, result) == result
        except RuntimeError:
            fits = False
        if not fits:
            raise InvalidOperandError(f"matmul: epilogue_inputs[{name!r}] of shape {tuple(value.shape)} does not "
                                      f"broadcast to the result {result}")
        if value.dtype != a.dtype:
            raise InvalidOperandError(f"matmul: epilogue_inputs[{name!r}] has dtype {value.dtype} but a has "
                                      f"{a.dtype}; convert them to one dtype")
        if value.device != a.device:
            raise InvalidOperandError(f"matmul: epilogue_inputs[{name!r}] is on {value.device} but a is on {a.device}")
        tensors[name] = value
    m, n = result[-2], result[-1]
    text, names = _epilogue_text(epilogue, tuple((name, input_kind(t.shape, m, n)) for name, t in tensors.items()))
    missing = [name for name in names if name not in tensors]
    if missing:
        raise InvalidOperandError(f"matmul: the epilogue reads inputs {missing} that epilogue_inputs lacks")
    return _custom_op(a, b, text, [tensors[name] for name in names])


# -- user-facing -------------------------------------------------------------------------------


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


# -- a whole MLP, with the activation's derivative fused into the backward products -------------


@torch.library.custom_op("nvmathpy::matmul_dact", mutates_args=())
def _dact_op(
    dz: torch.Tensor, w: torch.Tensor, aux: torch.Tensor, activation: str, bgrad: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dz @ w) * act'(z)`` from the forward's aux (the ``drelu``/``dgelu`` epilogues) and, with
    ``bgrad``, its sum over rows (the previous layer's bias gradient) from the same call."""
    name = f"d{activation}_bgrad" if bgrad else f"d{activation}"
    result = _nv_matmul(dz, w, epilogue=name, epilogue_inputs={f"{activation}_aux": aux})
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
