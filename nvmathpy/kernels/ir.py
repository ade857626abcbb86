"""The elementwise expression IR that epilogues and FFT callbacks are traced into.

An :class:`Expr` is an immutable tree. Leaves are inputs (the product value, scalars, per-row
or per-column vectors, full matrices), constants, and the element's indices; inner nodes are
the operations listed in :data:`UNARY`, :data:`BINARY`, :data:`COMPARE`, :data:`LOGICAL`,
``where`` and ``cast``. Only these nodes ever reach generated source code: names in generated
code come from an input's position, never from user strings.

Input kinds, relative to a result of shape ``(..., M, N)``:

``value``   the product value itself (one per element)
``scalar``  one number for all elements
``row``     one value per row, NumPy shape ``(M, 1)`` (or ``(..., M, 1)``)
``col``     one value per column, NumPy shape ``(N,)`` / ``(1, N)`` (or ``(..., 1, N)``)
``matrix``  one value per element, shape broadcastable to ``(..., M, N)`` with full ``M, N``
``index``   the element's ``row``, ``col`` or ``batch`` index (int64)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

__all__ = [
    "Expr",
    "UNARY",
    "BINARY",
    "COMPARE",
    "LOGICAL",
    "INPUT_KINDS",
    "INDEX_NAMES",
    "CAST_DTYPES",
    "const",
    "input_",
    "index",
    "inputs_of",
    "substitute",
    "walk",
    "uses_op",
]

UNARY = ("neg", "abs", "exp", "log", "tanh", "erf", "sigmoid", "sqrt", "rsqrt", "not")
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "pow")
COMPARE = ("lt", "le", "gt", "ge", "eq", "ne")
LOGICAL = ("and", "or")
INPUT_KINDS = ("value", "scalar", "row", "col", "matrix")
INDEX_NAMES = ("row", "col", "batch")
CAST_DTYPES = ("float16", "bfloat16", "float32", "float64", "bool")


@dataclass(frozen=True)
class Expr:
    """One node of the IR.

    Attributes
    ----------
    op
        ``"input"``, ``"const"``, ``"index"``, ``"where"``, ``"cast"``, or an operation
        from :data:`UNARY` / :data:`BINARY` / :data:`COMPARE` / :data:`LOGICAL`.
    args
        Child nodes.
    name
        The input's (or index's) name, for ``input`` and ``index`` leaves.
    kind
        The input's kind (see the module docstring); the dtype name for ``cast``.
    value
        The number, for ``const`` leaves.
    """

    op: str
    args: tuple["Expr", ...] = ()
    name: str | None = None
    kind: str | None = None
    value: float | int | bool | None = None

    def __post_init__(self) -> None:
        arity = {"input": 0, "const": 0, "index": 0, "where": 3, "cast": 1}
        arity.update({op: 1 for op in UNARY})
        arity.update({op: 2 for op in BINARY + COMPARE + LOGICAL})
        if self.op not in arity:
            raise ValueError(f"unknown IR operation {self.op!r}")
        if len(self.args) != arity[self.op]:
            raise ValueError(f"IR operation {self.op!r} takes {arity[self.op]} operands, got {len(self.args)}")
        if self.op == "input" and self.kind not in INPUT_KINDS:
            raise ValueError(f"input kind must be one of {INPUT_KINDS}, got {self.kind!r}")
        if self.op == "index" and self.name not in INDEX_NAMES:
            raise ValueError(f"index name must be one of {INDEX_NAMES}, got {self.name!r}")
        if self.op == "cast" and self.kind not in CAST_DTYPES:
            raise ValueError(f"cast dtype must be one of {CAST_DTYPES}, got {self.kind!r}")
        if self.op == "pow" and self.args[1].op != "const":
            raise ValueError("pow takes a constant exponent")

    def __str__(self) -> str:
        if self.op == "input":
            return self.name or "?"
        if self.op == "index":
            return f"<{self.name}>"
        if self.op == "const":
            return repr(self.value)
        inner = ", ".join(str(a) for a in self.args)
        return f"{self.op}[{self.kind}]({inner})" if self.op == "cast" else f"{self.op}({inner})"


def const(value: float | int | bool) -> Expr:
    """A constant leaf."""
    return Expr("const", value=value)


def input_(name: str, kind: str) -> Expr:
    """An input leaf."""
    return Expr("input", name=name, kind=kind)


def index(name: str) -> Expr:
    """An element-index leaf (``row``, ``col`` or ``batch``)."""
    return Expr("index", name=name)


def walk(expr: Expr) -> Iterator[Expr]:
    """Every node of ``expr``, parents before children, shared nodes once."""
    seen: set[int] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(reversed(node.args))


def inputs_of(expr: Expr) -> dict[str, str]:
    """The inputs ``expr`` reads, ``{name: kind}``, in first-use order."""
    found: dict[str, str] = {}
    for node in walk(expr):
        if node.op == "input":
            found.setdefault(node.name, node.kind)
    return found


def uses_op(expr: Expr, *ops: str) -> bool:
    """Whether any node of ``expr`` is one of ``ops``."""
    return any(node.op in ops for node in walk(expr))


def substitute(expr: Expr, bindings: dict[str, Expr]) -> Expr:
    """``expr`` with the inputs named in ``bindings`` replaced by those expressions.

    Examples
    --------
    >>> x = input_("x", "value")
    >>> str(substitute(Expr("exp", (x,)), {"x": Expr("mul", (x, const(2.0)))}))
    'exp(mul(x, 2.0))'
    """
    if expr.op == "input":
        return bindings.get(expr.name, expr)
    if not expr.args:
        return expr
    return Expr(expr.op, tuple(substitute(a, bindings) for a in expr.args), expr.name, expr.kind, expr.value)
