"""FFT prolog/epilog callbacks: tracing them into the expression IR and running them on the host.

A callback ``fn(v, name1, name2, ..., k)`` is traced once (:func:`nvmathpy.kernels.trace.trace`)
with ``v`` the element's value, each other parameter a named input from ``callback_inputs``
(an array broadcastable to the array the callback sees, or a Python number) or the index name
``k`` - the element's index along the last transformed axis, mapped onto the IR's ``col``
index by presenting the array to the evaluator with that axis last. The traced IR is run in
place, in one pass, by :class:`~nvmathpy.kernels.cpu_eval.BlockedEvaluator` (NumPy ufuncs,
complex dtypes included). Ordering comparisons, ``maximum``/``minimum``, ``erf``,
``sigmoid`` and casts of complex values are rejected: they are undefined for complex numbers.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping

import numpy as np

from ..errors import InvalidOperandError, InvalidOptionError
from ..kernels.cpu_eval import BlockedEvaluator
from ..kernels.ir import INDEX_NAMES, Expr
from ..kernels.trace import UnsupportedOperationError, trace
from ..operands import wrap

__all__ = ["Callback", "make_callback", "check_inputs_used"]

#: IR operations undefined for complex values (when one of their operands depends on data).
_REAL_ONLY = ("lt", "le", "gt", "ge", "maximum", "minimum", "erf", "sigmoid", "cast")
#: The index name FFT callbacks may take.
INDEX = "k"


class Callback:
    """One traced callback bound to its inputs, applied in place to arrays of one shape.

    Attributes
    ----------
    expr
        The traced IR (``str(expr)`` is what goes into the plan's problem key).
    """

    def __init__(self, expr: Expr, inputs: dict[str, Any], dtype: np.dtype, axis: int):
        self.expr = expr
        self._axis = axis
        self._evaluate = BlockedEvaluator(expr, dtype)
        self._inputs = {name: self._view(value) if isinstance(value, np.ndarray) else value for name, value in inputs.items()}

    def _view(self, array: np.ndarray) -> np.ndarray:
        """``array`` as the evaluator sees the data: the ``k`` axis last, at least 2-D."""
        moved = np.moveaxis(array, self._axis, -1)
        return moved[None] if moved.ndim == 1 else moved

    def __call__(self, data: np.ndarray) -> None:
        """Apply the callback to ``data`` (of the planned shape) in place."""
        self._evaluate(self._view(data), self._inputs)

    def into(self, target: np.ndarray, source: np.ndarray) -> None:
        """Write the callback of ``source`` into ``target`` (both of the planned shape; the
        dtype of ``source`` casts to ``target``'s): copy and callback in one pass."""
        self._evaluate(self._view(target), self._inputs, source=self._view(source))


def _traceable(fn: Callable[..., Any], names: set[str]) -> Callable[..., Any]:
    """``fn`` with its ``k`` parameter presented to :func:`trace` as the IR's ``col`` index and
    its value parameter named ``v`` (so that the traced IR, a plan-key field, does not depend
    on what the user called it)."""
    signature = inspect.signature(fn)
    params = list(signature.parameters.values())
    renamed = []
    for param in params[1:]:
        if param.name in names:
            renamed.append(param)
        elif param.name == INDEX:
            renamed.append(param.replace(name="col"))
        elif param.name in INDEX_NAMES or param.default is inspect.Parameter.empty:
            raise InvalidOperandError(
                f"{_label(fn)}: parameter {param.name!r} is neither a name in callback_inputs ({sorted(names)}) "
                f"nor the index name {INDEX!r}"
            )
        else:
            renamed.append(param)

    def call(v: Any, **kwargs: Any) -> Any:
        if "col" in kwargs and INDEX not in names:
            kwargs[INDEX] = kwargs.pop("col")
        return fn(v, **kwargs)

    value = params[0] if "v" in names else params[0].replace(name="v")
    call.__signature__ = signature.replace(parameters=[value] + renamed)  # type: ignore[attr-defined]
    call.__name__ = _label(fn)
    return call


def _label(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def _parameters(fn: Callable[..., Any], role: str) -> list[str]:
    if not callable(fn):
        raise InvalidOperandError(f"{role}={fn!r} is not allowed; allowed: None or a function of the element value")
    try:
        return list(inspect.signature(fn).parameters)[1:]
    except (TypeError, ValueError) as exc:
        raise InvalidOperandError(f"{role}: cannot read the signature of {fn!r}: {exc}") from exc


def _convert_input(name: str, value: Any, shape: tuple[int, ...], dtype: np.dtype, role: str) -> Any:
    """A named input converted to ``dtype`` (arrays copied, checked to broadcast to ``shape``)."""
    what = f"callback_inputs[{name!r}]"
    if isinstance(value, (bool, np.bool_)):
        raise InvalidOperandError(f"{what}={value!r} is not allowed; allowed: a number or an array")
    if isinstance(value, (int, float, complex, np.number)):
        if isinstance(value, (complex, np.complexfloating)) and dtype.kind != "c":
            raise InvalidOperandError(f"{what}={value!r} is complex but the {role} sees {dtype} values")
        return dtype.type(value)
    array = wrap(value, what).array
    if array.dtype.kind not in "biufc" or (array.dtype.kind == "c" and dtype.kind != "c"):
        raise InvalidOperandError(f"{what} has dtype {array.dtype}; the {role} sees {dtype} values and allows real "
                                  f"{'or complex ' if dtype.kind == 'c' else ''}numbers")
    try:
        if np.broadcast_shapes(array.shape, shape) != tuple(shape):
            raise ValueError
    except ValueError:
        raise InvalidOperandError(
            f"{what} has shape {array.shape}, which does not broadcast to the {role}'s array of shape {shape}"
        ) from None
    # kept at its own size (leading ones added): the evaluator broadcasts size-1 dimensions
    return np.array(array, dtype=dtype, copy=True).reshape((1,) * (len(shape) - array.ndim) + array.shape)


def _check_complex(expr: Expr, role: str) -> None:
    """Reject operations undefined for complex numbers when they touch data (not just ``k``)."""

    def on_data(node: Expr) -> bool:
        return node.op == "input" or any(on_data(a) for a in node.args)

    def visit(node: Expr) -> None:
        if node.op in _REAL_ONLY and any(on_data(a) for a in node.args):
            raise UnsupportedOperationError(
                f"{role}: operation {node.op!r} is not defined for complex values; on complex data use "
                "arithmetic, exp, log, sqrt, tanh, abs, np.where, or compare the index k"
            )
        for child in node.args:
            visit(child)

    visit(expr)


def make_callback(
    fn: Callable[..., Any] | None,
    role: str,
    callback_inputs: Mapping[str, Any],
    shape: tuple[int, ...],
    dtype: np.dtype,
    axis: int,
) -> Callback | None:
    """Trace ``fn`` (the ``prolog`` or ``epilog``) for arrays of ``shape``/``dtype`` whose
    last transformed axis is ``axis``; ``None`` when ``fn`` is ``None``."""
    if fn is None:
        return None
    names = [p for p in _parameters(fn, role) if p in callback_inputs]
    inputs = {name: _convert_input(name, callback_inputs[name], shape, dtype, role) for name in names}
    kinds = {name: "matrix" if isinstance(value, np.ndarray) else "scalar" for name, value in inputs.items()}
    expr = trace(_traceable(fn, set(names)), kinds)
    if dtype.kind == "c":
        _check_complex(expr, role)
    return Callback(expr, inputs, dtype, axis)


def check_inputs_used(callback_inputs: Mapping[str, Any], *fns: Callable[..., Any] | None) -> dict[str, Any]:
    """``callback_inputs`` as a dict, checked to name only parameters of the given callbacks."""
    if callback_inputs is None:
        return {}
    if not isinstance(callback_inputs, Mapping):
        raise InvalidOptionError(f"callback_inputs={callback_inputs!r} is not allowed; allowed: None or a dict")
    used = {p for fn in fns if fn is not None and callable(fn) for p in _parameters(fn, "callback")}
    unused = sorted(set(callback_inputs) - used)
    if unused:
        raise InvalidOperandError(
            f"callback_inputs names {unused}, which are not parameters of the prolog or epilog"
        )
    return dict(callback_inputs)
