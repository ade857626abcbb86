"""Custom (traced Python) epilogues as the ``nvmathpy::matmul_custom`` operator: the IR as
text in the schema, the backward from its symbolic derivatives."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import torch

from ..errors import InvalidOperandError, InvalidOptionError
from ..kernels import ir_text
from ..kernels.ir import Expr, inputs_of
from ..kernels.ir_grad import derivatives, value_name
from ..kernels.trace import trace
from ..linalg.gemm._custom_epilogue import RESERVED, input_kind
from . import _ops
from ._ops import _bgradb_op, _check, _product, _result_shape, _sum_to

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
    out = _ops.nv_matmul(a, b, epilogue=program.expr, epilogue_inputs=dict(zip(program.inputs, inputs)))
    return out.contiguous()  # the layout the fake reports, whatever view an engine returns


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


