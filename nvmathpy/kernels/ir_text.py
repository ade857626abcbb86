"""An exact text form of the expression IR, and its parser (no ``eval``).

Used where an :class:`~nvmathpy.kernels.ir.Expr` must travel as a string, e.g. as the ``str``
argument of a ``torch.library`` operator, whose schema is static. The text lists the nodes of
the expression once each (shared subtrees stay shared), children before parents, separated by
``;``; the last node is the root. Each node is ``op`` followed by space-separated fields::

    input NAME KIND      index NAME      const f HEX | const i INT | const b 0|1
    cast DTYPE #k        OP #k [#k [#k]]     (#k: the k-th node of the list)

Floats are written with :meth:`float.hex`, so every value (including ``inf`` and ``nan``)
comes back bit for bit; names must be Python identifiers. The parser checks every field and
builds nodes through :class:`Expr`, which validates operations and arities.

Examples
--------
>>> from nvmathpy.kernels.ir import Expr, const, input_
>>> x = input_("x", "value")
>>> text = dumps(Expr("mul", (x, Expr("add", (x, const(0.5))))))
>>> text
'input x value;const f 0x1.0000000000000p-1;add #0 #1;mul #0 #2'
>>> str(loads(text))
'mul(x, add(x, 0.5))'
"""

from __future__ import annotations

from .ir import Expr

__all__ = ["dumps", "loads", "IRTextError"]

class IRTextError(ValueError):
    """The text is not a serialised expression."""


def dumps(expr: Expr) -> str:
    """The text of ``expr`` (see the module docstring); ``loads(dumps(e)) == e``."""
    number: dict[int, int] = {}
    lines: list[str] = []
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:  # iterative post-order: deep expressions must not hit the recursion limit
        node, children_done = stack.pop()
        if id(node) in number:
            continue
        if children_done or not node.args:
            lines.append(_node_text(node, [number[id(child)] for child in node.args]))
            number[id(node)] = len(lines) - 1
        else:
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(node.args))
    return ";".join(lines)


def _node_text(node: Expr, refs: list[int]) -> str:
    if node.op == "input":
        return f"input {_checked_name(node.name)} {node.kind}"
    if node.op == "index":
        return f"index {node.name}"
    if node.op == "const":
        value = node.value
        if isinstance(value, bool):
            return f"const b {int(value)}"
        if isinstance(value, int):
            return f"const i {value}"
        return f"const f {float(value).hex()}"
    args = " ".join(f"#{r}" for r in refs)
    return f"cast {node.kind} {args}" if node.op == "cast" else f"{node.op} {args}"


def _checked_name(name: str | None) -> str:
    if not isinstance(name, str) or not name.isidentifier():
        raise IRTextError(f"an input name must be a Python identifier to be serialised, got {name!r}")
    return name


def loads(text: str) -> Expr:
    """The expression ``text`` describes.

    Raises
    ------
    IRTextError
        If ``text`` is not exactly the output of :func:`dumps` for some expression (an
        unknown operation, a bad field, a reference to a later node, extra fields).
    """
    if not isinstance(text, str) or not text:
        raise IRTextError(f"expected a non-empty IR text, got {text!r}")
    nodes: list[Expr] = []
    for position, line in enumerate(text.split(";")):
        fields = line.split(" ")
        try:
            nodes.append(_parse_node(fields, nodes))
        except (ValueError, IndexError) as exc:
            raise IRTextError(f"IR text node {position} ({line!r}): {exc}") from None
    return nodes[-1]


def _parse_node(fields: list[str], nodes: list[Expr]) -> Expr:
    op = fields[0]
    if op == "input":
        _expect(fields, 3)
        return Expr("input", name=_checked_name(fields[1]), kind=fields[2])
    if op == "index":
        _expect(fields, 2)
        return Expr("index", name=fields[1])
    if op == "const":
        _expect(fields, 3)
        tag, raw = fields[1], fields[2]
        if tag == "b" and raw in ("0", "1"):
            return Expr("const", value=raw == "1")
        if tag == "i":
            return Expr("const", value=int(raw))
        if tag == "f":
            return Expr("const", value=float.fromhex(raw))
        raise ValueError(f"bad constant {tag} {raw}")
    if op == "cast":
        _expect(fields, 3)
        return Expr("cast", (_ref(fields[2], nodes),), kind=fields[1])
    return Expr(op, tuple(_ref(field, nodes) for field in fields[1:]))


def _expect(fields: list[str], count: int) -> None:
    if len(fields) != count:
        raise ValueError(f"{fields[0]} takes {count - 1} fields, got {len(fields) - 1}")


def _ref(field: str, nodes: list[Expr]) -> Expr:
    if not field.startswith("#") or not field[1:].isdigit():
        raise ValueError(f"expected a node reference #k, got {field!r}")
    k = int(field[1:])
    if k >= len(nodes):
        raise ValueError(f"reference #{k} to a node not yet defined")
    return nodes[k]
