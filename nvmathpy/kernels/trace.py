"""Tracing Python functions into the expression IR.

A user's epilogue or callback is called once with symbolic :class:`Traced` values in place of
arrays. Python operators and NumPy ufuncs (through ``__array_ufunc__``) and ``np.where`` /
``np.clip`` (through ``__array_function__``) on them build IR nodes; anything else raises
:class:`UnsupportedOperationError` naming the operation. The helpers NumPy lacks
(:func:`sigmoid`, :func:`gelu`, :func:`erf`) work on traced values and on plain arrays alike.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Callable, Mapping

import numpy as np

from ..errors import InvalidOperandError, NvmathpyError
from .ir import INDEX_NAMES, Expr, const, index, input_

__all__ = ["Traced", "UnsupportedOperationError", "trace", "sigmoid", "gelu", "erf", "GELU_C", "GELU_CUBIC"]


class UnsupportedOperationError(NvmathpyError, TypeError):
    """A traced function used an operation the expression IR does not have."""


_UFUNCS = {
    np.add: "add",
    np.subtract: "sub",
    np.multiply: "mul",
    np.true_divide: "div",
    np.maximum: "maximum",
    np.minimum: "minimum",
    np.fmax: "maximum",
    np.fmin: "minimum",
    np.negative: "neg",
    np.absolute: "abs",
    np.exp: "exp",
    np.log: "log",
    np.tanh: "tanh",
    np.sqrt: "sqrt",
    np.less: "lt",
    np.less_equal: "le",
    np.greater: "gt",
    np.greater_equal: "ge",
    np.equal: "eq",
    np.not_equal: "ne",
    np.logical_and: "and",
    np.logical_or: "or",
    np.logical_not: "not",
}


def _as_expr(value: Any, what: str = "operand") -> Expr:
    if isinstance(value, Traced):
        return value.expr
    if isinstance(value, (bool, np.bool_)):
        return const(bool(value))
    if isinstance(value, (int, float, np.integer, np.floating)):
        return const(float(value) if isinstance(value, (float, np.floating)) else int(value))
    raise UnsupportedOperationError(
        f"{what} of type {type(value).__name__} cannot be used in a traced function: only the "
        "function's own arguments and Python numbers are allowed (pass arrays through epilogue_inputs)"
    )


class Traced:
    """A symbolic value: arithmetic on it records IR instead of computing.

    Examples
    --------
    >>> x = Traced(input_("x", "value"))
    >>> str((np.maximum(x, 0) * 2).expr)
    'mul(maximum(x, 0), 2)'
    """

    __array_priority__ = 1000

    def __init__(self, expr: Expr):
        self.expr = expr

    # arithmetic -------------------------------------------------------------------------
    def _binary(self, op: str, other: Any, reflected: bool = False) -> "Traced":
        a, b = self.expr, _as_expr(other)
        return Traced(Expr(op, (b, a) if reflected else (a, b)))

    def __add__(self, o): return self._binary("add", o)
    def __radd__(self, o): return self._binary("add", o, True)
    def __sub__(self, o): return self._binary("sub", o)
    def __rsub__(self, o): return self._binary("sub", o, True)
    def __mul__(self, o): return self._binary("mul", o)
    def __rmul__(self, o): return self._binary("mul", o, True)
    def __truediv__(self, o): return self._binary("div", o)
    def __rtruediv__(self, o): return self._binary("div", o, True)
    def __lt__(self, o): return self._binary("lt", o)
    def __le__(self, o): return self._binary("le", o)
    def __gt__(self, o): return self._binary("gt", o)
    def __ge__(self, o): return self._binary("ge", o)
    def __eq__(self, o): return self._binary("eq", o)  # type: ignore[override]
    def __ne__(self, o): return self._binary("ne", o)  # type: ignore[override]
    def __and__(self, o): return self._binary("and", o)
    def __rand__(self, o): return self._binary("and", o, True)
    def __or__(self, o): return self._binary("or", o)
    def __ror__(self, o): return self._binary("or", o, True)
    def __invert__(self): return Traced(Expr("not", (self.expr,)))
    def __neg__(self): return Traced(Expr("neg", (self.expr,)))
    def __pos__(self): return self
    def __abs__(self): return Traced(Expr("abs", (self.expr,)))

    def __pow__(self, exponent: Any) -> "Traced":
        if isinstance(exponent, Traced):
            raise UnsupportedOperationError("pow: the exponent must be a Python number, not a traced value")
        return _power(self.expr, exponent)

    def __rpow__(self, base: Any) -> "Traced":
        if isinstance(base, (int, float)) and base > 0:
            return Traced(Expr("exp", (Expr("mul", (self.expr, const(math.log(base)))),)))
        raise UnsupportedOperationError("pow: a number raised to a traced value needs a positive base")

    def __hash__(self) -> int:
        return id(self)

    def __bool__(self) -> bool:
        raise UnsupportedOperationError(
            "a traced value has no truth value: data-dependent Python control flow (if/and/or/while) "
            "cannot be traced; use np.where(condition, a, b) instead"
        )

    def astype(self, dtype: Any) -> "Traced":
        """Cast to ``dtype`` (float16, bfloat16, float32, float64 or bool)."""
        name = np.dtype(dtype).name
        return Traced(Expr("cast", (self.expr,), kind=name))

    # NumPy protocols ----------------------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> "Traced":
        if method != "__call__" or kwargs:
            extra = f" with {sorted(kwargs)}" if kwargs else f".{method}"
            raise UnsupportedOperationError(f"np.{ufunc.__name__}{extra} is not supported in traced functions")
        if ufunc is np.power:
            base, exponent = inputs
            if isinstance(exponent, Traced) or not isinstance(base, Traced):
                raise UnsupportedOperationError("np.power: only a traced base with a constant exponent is supported")
            return _power(base.expr, exponent)
        if ufunc is np.square:
            (x,) = inputs
            return Traced(Expr("mul", (_as_expr(x), _as_expr(x))))
        if ufunc is np.reciprocal:
            (x,) = inputs
            return Traced(Expr("div", (const(1.0), _as_expr(x))))
        op = _UFUNCS.get(ufunc)
        if op is None:
            raise UnsupportedOperationError(
                f"np.{ufunc.__name__} is not supported in traced functions; supported: "
                + ", ".join(sorted({f'np.{u.__name__}' for u in _UFUNCS} | {"np.power", "np.square", "np.reciprocal"}))
            )
        return Traced(Expr(op, tuple(_as_expr(v, f"np.{ufunc.__name__} operand") for v in inputs)))

    def __array_function__(self, func: Callable, types: Any, args: tuple, kwargs: Mapping[str, Any]) -> "Traced":
        if func is np.where and len(args) == 3 and not kwargs:
            cond, a, b = (_as_expr(v, "np.where operand") for v in args)
            return Traced(Expr("where", (cond, a, b)))
        if func is np.clip and not kwargs and len(args) == 3:
            x, lo, hi = args
            out = _as_expr(x)
            if lo is not None:
                out = Expr("maximum", (out, _as_expr(lo)))
            if hi is not None:
                out = Expr("minimum", (out, _as_expr(hi)))
            return Traced(out)
        raise UnsupportedOperationError(
            f"np.{func.__name__} is not supported in traced functions (supported array functions: np.where, np.clip)"
        )


def _power(base: Expr, exponent: Any) -> Traced:
    e = _as_expr(exponent, "pow exponent")
    if e.value == 2:
        return Traced(Expr("mul", (base, base)))
    if e.value == 0.5:
        return Traced(Expr("sqrt", (base,)))
    if e.value == -0.5:
        return Traced(Expr("rsqrt", (base,)))
    if e.value == 1:
        return Traced(base)
    return Traced(Expr("pow", (base, e)))


def _unary_helper(op: str, numpy_impl: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def helper(x: Any) -> Any:
        if isinstance(x, Traced):
            return Traced(Expr(op, (x.expr,)))
        return numpy_impl(x)

    return helper


def _erf_numpy(x: Any) -> Any:
    from scipy.special import erf as scipy_erf

    return scipy_erf(x)


def _sigmoid_numpy(x: Any) -> Any:
    from scipy.special import expit

    return expit(x)


erf = _unary_helper("erf", _erf_numpy)
erf.__name__ = "erf"
erf.__doc__ = """The error function, on traced values (an IR node) and on arrays (scipy.special.erf).

Examples
--------
>>> round(float(erf(0.5)), 6)
0.5205
"""

sigmoid = _unary_helper("sigmoid", _sigmoid_numpy)
sigmoid.__name__ = "sigmoid"
sigmoid.__doc__ = """The logistic function ``1 / (1 + exp(-x))``, on traced values and on arrays.

Examples
--------
>>> float(sigmoid(0.0))
0.5
"""

#: The tanh-approximated GELU's constants: ``0.5 x (1 + tanh(GELU_C (x + GELU_CUBIC x^3)))``.
GELU_C = math.sqrt(2.0 / math.pi)
GELU_CUBIC = 0.044715


def gelu(x: Any, approximate: str = "tanh") -> Any:
    """GELU: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` (``approximate="tanh"``, as
    cuBLASLt's epilogue) or ``0.5 x (1 + erf(x / sqrt(2)))`` (``approximate="none"``).

    Works on traced values (building IR) and on arrays.

    Examples
    --------
    >>> round(float(gelu(1.0)), 6)
    0.841192
    >>> round(float(gelu(1.0, approximate="none")), 6)
    0.841345
    """
    if approximate == "tanh":
        inner = np.tanh(GELU_C * (x + GELU_CUBIC * (x * x * x)))
        return 0.5 * x * (1.0 + inner)
    if approximate == "none":
        return 0.5 * x * (1.0 + erf(x * (1.0 / math.sqrt(2.0))))
    raise ValueError(f"gelu: approximate={approximate!r} is not allowed; allowed: 'tanh', 'none'")


def trace(fn: Callable[..., Any], kinds: Mapping[str, str]) -> Expr:
    """Trace ``fn`` into an :class:`Expr`.

    Parameters
    ----------
    fn
        A function whose first positional parameter is the value (the product element, or
        the FFT element) and whose other parameters are named inputs or the index names
        ``row``, ``col``, ``batch``.
    kinds
        The kind of each named input (see :mod:`nvmathpy.kernels.ir`).

    Raises
    ------
    InvalidOperandError
        If a parameter has no input of that name (or an input is unused by ``fn``'s signature).
    UnsupportedOperationError
        If ``fn`` uses an operation the IR does not have.

    Examples
    --------
    >>> str(trace(lambda x, bias: np.maximum(x + bias, 0), {"bias": "col"}))
    'maximum(add(x, bias), 0)'
    """
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError) as exc:
        raise InvalidOperandError(f"cannot read the signature of {fn!r}: {exc}") from exc
    if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
        raise InvalidOperandError(f"{_name(fn)}: the first parameter must be the positional value argument")
    arguments: dict[str, Traced] = {}
    for param in params[1:]:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise InvalidOperandError(f"{_name(fn)}: *args/**kwargs parameters cannot be traced; name each input")
        if param.name in kinds:
            arguments[param.name] = Traced(input_(param.name, kinds[param.name]))
        elif param.name in INDEX_NAMES:
            arguments[param.name] = Traced(index(param.name))
        elif param.default is not inspect.Parameter.empty:
            continue
        else:
            raise InvalidOperandError(
                f"{_name(fn)}: parameter {param.name!r} is not an input; given inputs: {sorted(kinds)}, "
                f"index names: {list(INDEX_NAMES)}"
            )
    unused = set(kinds) - set(arguments)
    if unused:
        raise InvalidOperandError(f"{_name(fn)}: inputs {sorted(unused)} are given but not parameters of the function")
    result = fn(Traced(input_(params[0].name, "value")), **arguments)
    return _as_expr(result, f"the result of {_name(fn)}")


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", type(fn).__name__)
