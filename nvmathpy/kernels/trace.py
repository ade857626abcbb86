"""Tracing Python functions into the expression IR.

A user's epilogue or callback is called once with symbolic :class:`Traced` values in place of
arrays. Python operators and NumPy ufuncs (through ``__array_ufunc__``) and ``np.where`` /
``np.clip`` (through ``__array_function__``) on them build IR nodes; anything else raises
:class:`UnsupportedOperationError` naming the operation. The helpers NumPy lacks
(:func:`sigmoid`, :func:`gelu`, :func:`erf`) work on traced values and on plain arrays alike.
Elementwise methods (``clip``, ``astype``, ``copy``) and more ufuncs (``sign``, ``log2``,
``isnan``, ``scipy.special.expit``...) are built from IR nodes; reductions and other
non-elementwise operations raise one error listing what is supported (:data:`SUPPORTED`).
:func:`trace_lifting` makes the numbers a function captures run-time scalar inputs.
"""

from __future__ import annotations

import inspect
import math
import sys
import types
from typing import Any, Callable, Mapping

import numpy as np

from ..errors import InvalidOperandError, NvmathpyError
from .ir import INDEX_NAMES, Expr, const, index, input_, inputs_of

__all__ = ["trace_lifting", "Traced", "UnsupportedOperationError", "UnsupportedAttributeError", "SUPPORTED", "trace", "sigmoid", "gelu", "erf", "GELU_C", "GELU_CUBIC"]


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
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "biuf":
        value = value[()]  # a 0-d array is its number
    if isinstance(value, (bool, np.bool_)):
        return const(bool(value))
    if isinstance(value, (int, float, np.integer, np.floating)):
        if isinstance(value, (float, np.floating)):
            return const(float(value))
        if abs(int(value)) > _LARGEST_INT:
            raise InvalidOperandError(
                f"{what}: the integer constant {_short(value)} does not fit a float64 (largest finite: "
                f"{np.finfo(np.float64).max:.6g}); traced constants must be finite float64 values"
            )
        return const(int(value))
    if isinstance(value, (complex, np.complexfloating)):
        raise UnsupportedOperationError(f"{what}: the complex constant {value!r} cannot be used here; "
                                        "traced constants are real numbers")
    raise UnsupportedOperationError(
        f"{what} of type {type(value).__name__} cannot be used in a traced function: only the "
        "function's own arguments and Python numbers are allowed (pass arrays through epilogue_inputs)"
    )


#: Integers beyond this overflow float64 (the value every constant is emitted as).
_LARGEST_INT = int(np.finfo(np.float64).max)


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 40 else f"{text[:12]}...{text[-6:]} ({len(text)} digits)"


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
        if isinstance(base, (int, float, np.integer, np.floating)) and not isinstance(base, (bool, np.bool_)) \
                and 0 < base < math.inf:
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

    def clip(self, min: Any = None, max: Any = None, **kwargs: Any) -> "Traced":  # noqa: A002 - NumPy's names
        """``np.clip(self, min, max)`` (either bound may be ``None``)."""
        return _clip(self, min, max, kwargs)

    def copy(self) -> "Traced":
        """The value itself (traced values are immutable)."""
        return self

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # protocol probes (copy, pickle, NumPy) see a plain missing attribute
            raise AttributeError(name)
        if name in _REDUCTIONS:
            raise UnsupportedAttributeError(
                f"x.{name}() is a reduction or reshaping, not an elementwise operation: a traced function "
                f"computes each element from that element alone. {SUPPORTED}"
            )
        raise UnsupportedAttributeError(f"traced values have no attribute {name!r}. {SUPPORTED}")

    def _not_elementwise(self, what: str) -> "Traced":
        raise UnsupportedOperationError(f"{what} is not supported in traced functions. {SUPPORTED}")

    def __getitem__(self, key: Any) -> "Traced": return self._not_elementwise("indexing a traced value")
    def __iter__(self) -> Any: return self._not_elementwise("iterating over a traced value")
    def __len__(self) -> int: return self._not_elementwise("len() of a traced value")  # type: ignore[return-value]
    def __matmul__(self, o: Any) -> "Traced": return self._not_elementwise("the @ operator")
    __rmatmul__ = __matmul__
    def __floordiv__(self, o: Any) -> "Traced": return self._not_elementwise("the // operator")
    __rfloordiv__ = __floordiv__
    def __mod__(self, o: Any) -> "Traced": return self._not_elementwise("the % operator")
    __rmod__ = __mod__
    def __float__(self) -> float: return self._not_elementwise("float() of a traced value")  # type: ignore[return-value]
    def __int__(self) -> int: return self._not_elementwise("int() of a traced value")  # type: ignore[return-value]
    def __complex__(self) -> complex: return self._not_elementwise("complex() of a traced value")  # type: ignore

    # NumPy protocols ----------------------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> "Traced":
        if method != "__call__" or kwargs:
            extra = f" with {sorted(kwargs)}" if kwargs else f".{method}"
            why = " (a reduction, not an elementwise operation)" if method in ("reduce", "accumulate", "reduceat") \
                else ""
            raise UnsupportedOperationError(f"np.{ufunc.__name__}{extra} is not supported in traced functions{why}. "
                                            f"{SUPPORTED}")
        if ufunc is np.power or ufunc is np.float_power:
            base, exponent = inputs
            if isinstance(exponent, Traced) and not isinstance(base, Traced):  # 2.0 ** x: exp(x log 2)
                return exponent.__rpow__(base)
            if isinstance(exponent, Traced) or not isinstance(base, Traced):
                raise UnsupportedOperationError(f"np.{ufunc.__name__}: only a traced base with a constant exponent "
                                                "is supported")
            return _power(base.expr, exponent)
        composed = _COMPOSED.get(ufunc) or _scipy_ufunc(ufunc)
        if composed is not None:
            return Traced(composed(*(_as_expr(v, f"np.{ufunc.__name__} operand") for v in inputs)))
        op = _UFUNCS.get(ufunc)
        if op is None:
            raise UnsupportedOperationError(f"np.{ufunc.__name__} is not supported in traced functions. {SUPPORTED}")
        return Traced(Expr(op, tuple(_as_expr(v, f"np.{ufunc.__name__} operand") for v in inputs)))

    def __array_function__(self, func: Callable, types: Any, args: tuple, kwargs: Mapping[str, Any]) -> "Traced":
        if func is np.where and len(args) == 3 and not kwargs:
            cond, a, b = (_as_expr(v, "np.where operand") for v in args)
            return Traced(Expr("where", (cond, a, b)))
        if func is np.clip:
            kwargs = dict(kwargs)
            x, *bounds = args
            lo = bounds[0] if len(bounds) > 0 else kwargs.pop("a_min", kwargs.pop("min", None))
            hi = bounds[1] if len(bounds) > 1 else kwargs.pop("a_max", kwargs.pop("max", None))
            return _clip(x, lo, hi, kwargs)
        if func in (np.copy, np.asarray, np.asanyarray) and len(args) == 1 and not kwargs:
            return args[0]
        why = " (a reduction or reshaping, not an elementwise operation)" if func.__name__ in _REDUCTIONS else ""
        raise UnsupportedOperationError(f"np.{func.__name__} is not supported in traced functions{why}. {SUPPORTED}")


def _clip(x: Any, lo: Any, hi: Any, kwargs: Mapping[str, Any]) -> Traced:
    if kwargs:
        raise UnsupportedOperationError(f"clip: keyword arguments {sorted(kwargs)} are not supported in traced "
                                        "functions (out=, where=, ...)")
    out = _as_expr(x, "clip operand")
    if lo is not None:
        out = Expr("maximum", (out, _as_expr(lo, "clip lower bound")))
    if hi is not None:
        out = Expr("minimum", (out, _as_expr(hi, "clip upper bound")))
    return Traced(out)


class UnsupportedAttributeError(UnsupportedOperationError, AttributeError):
    """A traced value was asked for an attribute (a method) it does not have."""


_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_INF = const(math.inf)


def _sign(x: Expr) -> Expr:
    """``np.sign``: 1, -1, or ``x`` itself for zeros and NaN."""
    return Expr("where", (Expr("gt", (x, const(0.0))), const(1.0),
                          Expr("where", (Expr("lt", (x, const(0.0))), const(-1.0), x))))


#: Ufuncs built from several IR operations.
_COMPOSED: dict[Any, Callable[..., Expr]] = {
    np.square: lambda x: Expr("mul", (x, x)),
    np.reciprocal: lambda x: Expr("div", (const(1.0), x)),
    np.positive: lambda x: x,
    np.fabs: lambda x: Expr("abs", (x,)),
    np.sign: _sign,
    np.exp2: lambda x: Expr("exp", (Expr("mul", (x, const(_LN2))),)),
    np.log2: lambda x: Expr("div", (Expr("log", (x,)), const(_LN2))),
    np.log10: lambda x: Expr("div", (Expr("log", (x,)), const(_LN10))),
    np.isnan: lambda x: Expr("ne", (x, x)),
    np.isinf: lambda x: Expr("eq", (Expr("abs", (x,)), _INF)),
    np.isfinite: lambda x: Expr("lt", (Expr("abs", (x,)), _INF)),
}


def _scipy_ufunc(ufunc: Any) -> Callable[..., Expr] | None:
    """``scipy.special.expit`` and ``erf`` as IR (only when SciPy is already imported)."""
    special = sys.modules.get("scipy.special")
    if special is None:
        return None
    if ufunc is getattr(special, "expit", None):
        return lambda x: Expr("sigmoid", (x,))
    if ufunc is getattr(special, "erf", None):
        return lambda x: Expr("erf", (x,))
    return None


#: Array methods and NumPy functions that are not elementwise (named in the error).
_REDUCTIONS = frozenset({
    "mean", "sum", "prod", "max", "min", "std", "var", "argmax", "argmin", "any", "all", "cumsum", "cumprod",
    "ptp", "nansum", "nanmean", "nanmax", "nanmin", "amax", "amin", "average", "median", "dot", "reshape",
    "transpose", "T", "ravel", "flatten", "sort", "argsort", "trace", "diagonal", "squeeze", "repeat", "take",
    "nonzero", "norm", "shape", "ndim", "size", "item", "tolist",
})

#: What traced functions support (the tail of every "not supported" error).
SUPPORTED = (
    "Supported: the operators + - * / ** (constant exponent) unary -, abs(), comparisons, & | ~; "
    "the methods clip, astype, copy; np.where, np.clip; the ufuncs "
    + ", ".join(sorted({f"np.{u.__name__}" for u in (*_UFUNCS, *_COMPOSED)} | {"np.power", "np.float_power"}))
    + "; scipy.special.expit and erf; nvmathpy's sigmoid, gelu and erf helpers. Each element of the "
    "result is computed from the same element of the product and the inputs only."
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


def trace_lifting(fn: Callable[..., Any], kinds: Mapping[str, str],
                  value_name: str | None = None) -> tuple[Expr, dict[str, float | int]]:
    """:func:`trace`, with the numbers ``fn`` captures made scalar inputs instead of constants.

    Python and NumPy numbers that ``fn`` reads from its closure, its parameters' defaults or
    its module's globals (``lambda x: x * scale``) become ``scalar`` inputs named
    ``nvm_k0``, ``nvm_k1``, ...: the traced expression, and so the compiled kernel, the plan
    and the wisdom entry, is the same for every value, and the values are passed at run time.
    Numbers written in the function itself stay constants. When ``fn`` does with a captured
    number what a traced value cannot do (``if scale > 0``, ``range(n)``, an exponent), it is
    traced again with the numbers as constants.

    Returns
    -------
    expr, values
        The expression and ``{input name: value}`` for the lifted numbers it reads.

    Examples
    --------
    >>> scale = 2.5
    >>> expr, values = trace_lifting(lambda x: x * scale, {})
    >>> str(expr), values
    ('mul(x, nvm_k0)', {'nvm_k0': 2.5})
    """
    rebuilt, lifted = _lift_captured(fn, kinds)
    if lifted:
        try:
            expr = trace(rebuilt, {**kinds, **{name: "scalar" for name in lifted}}, value_name,
                         _extra=tuple(lifted))
        except Exception:  # noqa: BLE001 - the numbers steer Python code: trace them as constants
            pass
        else:
            used = inputs_of(expr)
            return expr, {name: value for name, value in lifted.items() if name in used}
    return trace(fn, kinds, value_name), {}


def _liftable(value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _lift_captured(fn: Callable[..., Any], kinds: Mapping[str, str]) -> tuple[Callable[..., Any], dict[str, Any]]:
    """``fn`` rebuilt with traced scalars in place of the numbers it captures, and those numbers."""
    if not isinstance(fn, types.FunctionType):
        return fn, {}
    lifted: dict[str, Any] = {}
    leaves: dict[int, Traced] = {}

    def lift(value: Any) -> Any:
        if not _liftable(value):
            return value
        if id(value) not in leaves:  # one input per captured object
            name = f"nvm_k{len(lifted)}"
            while name in kinds:
                name = "_" + name
            lifted[name] = value
            leaves[id(value)] = Traced(input_(name, "scalar"))
        return leaves[id(value)]

    closure = fn.__closure__
    if closure:
        cells = []
        for cell in closure:
            try:
                contents = cell.cell_contents
            except ValueError:  # an empty cell
                cells.append(cell)
                continue
            cells.append(types.CellType(lift(contents)))
        closure = tuple(cells)
    names = set()
    stack = [fn.__code__]
    while stack:
        code = stack.pop()
        names.update(code.co_names)
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    namespace = fn.__globals__
    replaced = {name: lift(namespace[name]) for name in names if name in namespace and _liftable(namespace[name])}
    if replaced:
        namespace = {**namespace, **replaced}
    defaults = tuple(lift(v) for v in fn.__defaults__) if fn.__defaults__ else fn.__defaults__
    if not lifted:
        return fn, {}
    rebuilt = types.FunctionType(fn.__code__, namespace, fn.__name__, defaults, closure)
    rebuilt.__kwdefaults__ = fn.__kwdefaults__
    rebuilt.__wrapped__ = fn  # the signature stays the user's
    return rebuilt, lifted


def trace(fn: Callable[..., Any], kinds: Mapping[str, str], value_name: str | None = None,
          _extra: tuple[str, ...] = ()) -> Expr:
    """Trace ``fn`` into an :class:`Expr`.

    Parameters
    ----------
    fn
        A function whose first positional parameter is the value (the product element, or
        the FFT element) and whose other parameters are named inputs or the index names
        ``row``, ``col``, ``batch``.
    kinds
        The kind of each named input (see :mod:`nvmathpy.kernels.ir`).
    value_name
        The name of the value leaf in the IR (``None``: the name of ``fn``'s first parameter).
        Matmul epilogues pass ``"x"``: their consumers look the product up by that name,
        whatever the user called it.

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
    unused = set(kinds) - set(arguments) - set(_extra)
    if unused:
        raise InvalidOperandError(f"{_name(fn)}: inputs {sorted(unused)} are given but not parameters of the function")
    value = params[0].name if value_name is None else value_name
    if value in kinds:
        raise InvalidOperandError(f"{_name(fn)}: the value is named {value!r}, which is also an input's name")
    result = fn(Traced(input_(value, "value")), **arguments)
    expr = _as_expr(result, f"the result of {_name(fn)}")
    depth = _depth(expr)
    if depth > MAX_DEPTH:
        raise UnsupportedOperationError(
            f"{_name(fn)}: the traced expression nests {depth} operations deep; at most {MAX_DEPTH} are supported "
            "(a long chain of dependent operations: fold it, e.g. repeated additions into one multiplication)"
        )
    return expr


#: The deepest expression :func:`trace` accepts (code generators and the IR's hashing recurse
#: once or twice per level, within Python's recursion limit).
MAX_DEPTH = 200


def _depth(expr: Expr) -> int:
    """The number of operations on the longest path from ``expr`` to a leaf (iteratively)."""
    depths: dict[int, int] = {}
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        node, ready = stack.pop()
        if id(node) in depths:
            continue
        if ready or not node.args:
            depths[id(node)] = 1 + max((depths[id(a)] for a in node.args), default=-1)
            continue
        stack.append((node, True))
        stack.extend((a, False) for a in node.args if id(a) not in depths)
    return depths[id(expr)]


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", type(fn).__name__)
