"""A tiny elementwise expression IR for matmul epilogues.

Every epilogue body (the built-in ones in :mod:`nvmathpy.linalg.epilogues` and, in a later
issue, custom Python functions traced into the same nodes) is a tree of :class:`Expr` nodes:
named variables (``x`` the matmul result, ``bias``, ``relu_aux``, ...), constants, and a
small set of elementwise operations. Backends read the tree: the CPU evaluator emits a
numexpr string or runs an in-place ufunc program; a CUDA backend can emit C from the same
nodes.

Examples
--------
>>> x = var("x")
>>> e = maximum(x + var("bias"), 0.0)
>>> sorted(e.variables())
['bias', 'x']
>>> to_numexpr(e, {})
'where(((x + bias)) <= (k0), k0, ((x + bias)))'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Expr", "var", "const", "maximum", "exp", "tanh", "where", "greater", "less_equal",
           "substitute", "to_numexpr", "OPS", "COMMUTATIVE"]

#: Operation name -> number of arguments.
OPS = {
    "add": 2, "sub": 2, "mul": 2, "div": 2, "neg": 1,
    "max": 2, "exp": 1, "tanh": 1, "gt": 2, "le": 2, "where": 3,
}
#: Operations whose two arguments may be swapped.
COMMUTATIVE = frozenset({"add", "mul", "max"})


@dataclass(frozen=True)
class Expr:
    """One node: ``op`` is ``"var"`` (``value`` is the name), ``"const"`` (``value`` is the
    number) or a name in :data:`OPS` with ``args``."""

    op: str
    args: tuple["Expr", ...] = ()
    value: Any = None

    @property
    def is_leaf(self) -> bool:
        return self.op in ("var", "const")

    def variables(self) -> set[str]:
        """The names of the variables the expression reads."""
        if self.op == "var":
            return {self.value}
        found: set[str] = set()
        for arg in self.args:
            found |= arg.variables()
        return found

    def __add__(self, other: Any) -> "Expr":
        return Expr("add", (self, _as_expr(other)))

    def __radd__(self, other: Any) -> "Expr":
        return Expr("add", (_as_expr(other), self))

    def __sub__(self, other: Any) -> "Expr":
        return Expr("sub", (self, _as_expr(other)))

    def __rsub__(self, other: Any) -> "Expr":
        return Expr("sub", (_as_expr(other), self))

    def __mul__(self, other: Any) -> "Expr":
        return Expr("mul", (self, _as_expr(other)))

    def __rmul__(self, other: Any) -> "Expr":
        return Expr("mul", (_as_expr(other), self))

    def __truediv__(self, other: Any) -> "Expr":
        return Expr("div", (self, _as_expr(other)))

    def __rtruediv__(self, other: Any) -> "Expr":
        return Expr("div", (_as_expr(other), self))

    def __neg__(self) -> "Expr":
        return Expr("neg", (self,))


def _as_expr(value: Any) -> Expr:
    return value if isinstance(value, Expr) else const(value)


def var(name: str) -> Expr:
    """A named input of the epilogue (``"x"`` is the matmul result)."""
    return Expr("var", value=name)


def const(value: float | complex) -> Expr:
    """A constant (cast to the compute dtype by the backends)."""
    return Expr("const", value=value)


def maximum(a: Any, b: Any) -> Expr:
    """Elementwise maximum; NaN in ``a`` propagates on every backend (the ufunc backend, like
    ``numpy.maximum``, also propagates NaN in ``b``)."""
    return Expr("max", (_as_expr(a), _as_expr(b)))


def exp(a: Any) -> Expr:
    return Expr("exp", (_as_expr(a),))


def tanh(a: Any) -> Expr:
    return Expr("tanh", (_as_expr(a),))


def greater(a: Any, b: Any) -> Expr:
    """Elementwise ``a > b`` (boolean)."""
    return Expr("gt", (_as_expr(a), _as_expr(b)))


def less_equal(a: Any, b: Any) -> Expr:
    """Elementwise ``a <= b`` (boolean)."""
    return Expr("le", (_as_expr(a), _as_expr(b)))


def where(cond: Any, a: Any, b: Any) -> Expr:
    """``a`` where ``cond`` holds, else ``b``."""
    return Expr("where", (_as_expr(cond), _as_expr(a), _as_expr(b)))


def substitute(expr: Expr, bindings: dict[str, Expr]) -> Expr:
    """Replace variables by expressions (used to fold ``x = alpha*acc + beta*c`` into a body)."""
    if expr.op == "var":
        return bindings.get(expr.value, expr)
    if expr.op == "const":
        return expr
    return Expr(expr.op, tuple(substitute(a, bindings) for a in expr.args))


_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "gt": ">", "le": "<="}


def to_numexpr(expr: Expr, constants: dict[str, Any]) -> str:
    """The numexpr source of ``expr``; constants become named variables ``k0, k1, ...``
    added to ``constants`` (so the caller can pass them in the compute dtype)."""

    def emit(node: Expr) -> str:
        if node.op == "var":
            return node.value
        if node.op == "const":
            for name, value in constants.items():
                if value == node.value and type(value) is type(node.value):
                    return name
            name = f"k{len(constants)}"
            constants[name] = node.value
            return name
        args = [emit(a) for a in node.args]
        if node.op in _INFIX:
            return f"({args[0]} {_INFIX[node.op]} {args[1]})"
        if node.op == "neg":
            return f"(-{args[0]})"
        if node.op == "max":  # NaN in the first argument propagates, as with numpy.maximum
            return f"where(({args[0]}) <= ({args[1]}), {args[1]}, ({args[0]}))"
        return f"{node.op}({', '.join(args)})"

    return emit(expr)
