"""Symbolic differentiation of the expression IR.

:func:`derivative` returns the :class:`~nvmathpy.kernels.ir.Expr` of ``d expr / d name`` for
one input, :func:`derivatives` those for the value and every other input. Derivatives reuse
the nodes of the expression they differentiate (``exp``, ``tanh``, ``sigmoid``, ``sqrt``,
``rsqrt`` and quotients are differentiated through their own value), and are built through
small simplifying constructors (``0 + a = a``, ``1 * a = a``, ``0 * a = 0``, constants
folded), so a derivative stays about the size of its expression.

Conventions at the points where a function has no derivative, chosen to match PyTorch:
``maximum(a, b)`` passes the gradient to ``a`` where ``a > b`` and to ``b`` otherwise (so
``relu'(0) = 0``), ``minimum`` likewise with ``a < b``; ``abs'(0) = 0``. Comparisons,
logical operations, casts to ``bool`` and index leaves have derivative zero; a cast to a
floating dtype passes the derivative through (rounding is treated as the identity, as
``Tensor.to`` does in autograd).

Examples
--------
>>> from nvmathpy.kernels.trace import trace
>>> import numpy as np
>>> e = trace(lambda x, s: np.exp(x * s), {"s": "scalar"})
>>> str(derivative(e, "x"))
'mul(s, exp(mul(x, s)))'
>>> str(derivative(e, "s"))
'mul(x, exp(mul(x, s)))'
"""

from __future__ import annotations

import math

from .ir import Expr, const, inputs_of

__all__ = ["derivative", "derivatives", "value_name"]

_ZERO_DERIVATIVE = ("const", "index", "lt", "le", "gt", "ge", "eq", "ne", "and", "or", "not")
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def value_name(expr: Expr) -> str | None:
    """The name of ``expr``'s value input (its ``value``-kind leaf), or None if it reads none."""
    for name, kind in inputs_of(expr).items():
        if kind == "value":
            return name
    return None


def derivatives(expr: Expr) -> dict[str, Expr]:
    """``{name: d expr / d name}`` for every input ``expr`` reads, the value input first."""
    names = sorted(inputs_of(expr).items(), key=lambda item: item[1] != "value")
    return {name: derivative(expr, name) for name, _ in names}


def derivative(expr: Expr, name: str) -> Expr:
    """The expression of ``d expr / d name`` (``name`` an input of ``expr``; zero if unused).

    Raises
    ------
    ValueError
        If ``expr`` contains an operation this module has no rule for.
    """
    memo: dict[int, Expr] = {}
    order: list[Expr] = []
    seen: set[int] = set()
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:  # post-order without recursion: each node after its children
        node, children_done = stack.pop()
        if id(node) in seen and not children_done:
            continue
        if children_done or not node.args:
            order.append(node)
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(node.args))
    for node in order:
        if id(node) not in memo:
            memo[id(node)] = _rule(node, [memo[id(child)] for child in node.args], name)
    return memo[id(expr)]


def _rule(node: Expr, d: list[Expr], name: str) -> Expr:
    op, args = node.op, node.args
    if op == "input":
        return _ONE if node.name == name else _ZERO
    if op in _ZERO_DERIVATIVE:
        return _ZERO
    if op == "cast":
        return _ZERO if node.kind == "bool" else d[0]
    if op == "where":
        return _where(args[0], d[1], d[2])
    if op == "neg":
        return _neg(d[0])
    if op == "add":
        return _add(d[0], d[1])
    if op == "sub":
        return _sub(d[0], d[1])
    if op == "mul":
        return _add(_mul(d[0], args[1]), _mul(args[0], d[1]))
    if op == "div":  # (a' - (a/b) b') / b
        return _div(_sub(d[0], _mul(node, d[1])), args[1])
    if op in ("maximum", "minimum"):
        pick_a = Expr("gt" if op == "maximum" else "lt", args)
        return _where(pick_a, d[0], d[1])
    if _is_zero(d[0]):  # every rule below is d[0] times the local derivative
        return _ZERO
    a = args[0]
    if op == "abs":
        sign = _where(Expr("gt", (a, _ZERO)), _ONE, _where(Expr("lt", (a, _ZERO)), const(-1.0), _ZERO))
        return _mul(d[0], sign)
    if op == "exp":
        return _mul(d[0], node)
    if op == "log":
        return _div(d[0], a)
    if op == "tanh":
        return _mul(d[0], _sub(_ONE, _mul(node, node)))
    if op == "sigmoid":
        return _mul(d[0], _mul(node, _sub(_ONE, node)))
    if op == "erf":
        return _mul(d[0], _mul(const(_TWO_OVER_SQRT_PI), Expr("exp", (_neg(_mul(a, a)),))))
    if op == "sqrt":
        return _div(_mul(d[0], const(0.5)), node)
    if op == "rsqrt":
        return _mul(d[0], _mul(const(-0.5), _mul(node, _mul(node, node))))
    if op == "pow":
        exponent = args[1].value
        return _mul(d[0], _mul(const(float(exponent)), _power(a, exponent - 1)))
    raise ValueError(f"no derivative rule for the IR operation {op!r}")


# -- simplifying constructors -------------------------------------------------------------------

_ZERO = const(0.0)
_ONE = const(1.0)


def _number(e: Expr) -> bool:
    return e.op == "const" and not isinstance(e.value, bool)


def _is_zero(e: Expr) -> bool:
    return _number(e) and e.value == 0


def _is_one(e: Expr) -> bool:
    return _number(e) and e.value == 1


def _neg(a: Expr) -> Expr:
    if _number(a):
        return const(-float(a.value))
    if a.op == "neg":
        return a.args[0]
    return Expr("neg", (a,))


def _add(a: Expr, b: Expr) -> Expr:
    if _is_zero(a):
        return b
    if _is_zero(b):
        return a
    if _number(a) and _number(b):
        return const(float(a.value) + float(b.value))
    if b.op == "neg":
        return Expr("sub", (a, b.args[0]))
    return Expr("add", (a, b))


def _sub(a: Expr, b: Expr) -> Expr:
    if _is_zero(b):
        return a
    if _is_zero(a):
        return _neg(b)
    if _number(a) and _number(b):
        return const(float(a.value) - float(b.value))
    return Expr("sub", (a, b))


def _mul(a: Expr, b: Expr) -> Expr:
    if _is_zero(a) or _is_zero(b):
        return _ZERO
    if _is_one(a):
        return b
    if _is_one(b):
        return a
    if _number(a) and _number(b):
        return const(float(a.value) * float(b.value))
    if _number(b):  # constants first, so that equal products print alike
        a, b = b, a
    if _number(a) and a.value == -1:
        return _neg(b)
    return Expr("mul", (a, b))


def _div(a: Expr, b: Expr) -> Expr:
    if _is_zero(a):
        return _ZERO
    if _is_one(b):
        return a
    return Expr("div", (a, b))


def _where(cond: Expr, a: Expr, b: Expr) -> Expr:
    if a is b or (_number(a) and _number(b) and float(a.value) == float(b.value)):
        return a
    return Expr("where", (cond, a, b))


def _power(a: Expr, exponent: float | int) -> Expr:
    if exponent == 0:
        return _ONE
    if exponent == 1:
        return a
    if exponent == 2:
        return Expr("mul", (a, a))
    return Expr("pow", (a, const(float(exponent))))
