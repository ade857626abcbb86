"""An epilogue resolved once: the one object a :class:`~.matmul_plan.Matmul` plan hands its engine.

The plan turns what the caller passed as ``epilogue`` (a built-in name, an
:class:`~nvmathpy.linalg.Epilogue`, an :class:`~nvmathpy.linalg.epilogues.EpilogueDef`, or a
custom epilogue already traced into an :class:`~nvmathpy.kernels.ir.Expr`) into one immutable
:class:`ResolvedEpilogue`: its definition or expression, its inputs and their kinds, the
built-in epilogue a custom one is exactly (if any), and a content digest. The problem key holds
only :attr:`ResolvedEpilogue.key`; the engines read everything else from the object and look
nothing up again.

Examples
--------
>>> r = resolve_builtin("relu_bias")
>>> r.kind, r.name, r.inputs, r.key
('builtin', 'relu_bias', (('bias', 'col'),), 'relu_bias')
>>> r is resolve_builtin("relu_bias")
True
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field

from ...kernels.ir import Expr, inputs_of
from ..epilogues import Epilogue, EpilogueDef, definition
from ._custom_match import match_native

__all__ = ["ResolvedEpilogue", "resolve_builtin", "resolve_custom", "serialize"]

#: Hex digits of the content digest a custom epilogue's problem key holds.
KEY_DIGITS = 32


@dataclass(frozen=True)
class ResolvedEpilogue:
    """One epilogue as the plan resolved it.

    Attributes
    ----------
    kind
        ``"builtin"`` or ``"custom"``.
    name
        The built-in epilogue's name, or ``"custom"``.
    definition
        The built-in :class:`~nvmathpy.linalg.epilogues.EpilogueDef` (``None`` for a custom one).
    expr
        The custom epilogue's traced expression, the product named ``x`` (``None`` for a built-in).
    inputs
        ``(name, kind)`` of each ``epilogue_inputs`` entry the epilogue reads, in first-use
        order (kinds as in :mod:`nvmathpy.kernels.ir`: ``"scalar"``, ``"col"``, ``"row"``,
        ``"matrix"``).
    native
        For a custom epilogue that is exactly a built-in form (see
        :func:`.._custom_match.match_native`): that built-in, resolved; else ``None``.
    native_bias
        The custom input that is :attr:`native`'s bias, or ``None``.
    digest
        SHA-256 (hex) of the epilogue's content (:func:`serialize`): the same in every process
        for the same epilogue, whatever object it came from.
    """

    kind: str
    name: str
    definition: EpilogueDef | None
    expr: Expr | None
    inputs: tuple[tuple[str, str], ...]
    digest: str
    native: "ResolvedEpilogue | None" = field(default=None, compare=False)
    native_bias: str | None = None

    @property
    def key(self) -> str:
        """What the problem key holds: a built-in's name (its definition is fixed by the library,
        so existing wisdom entries stay valid), or ``"custom:"`` and the digest's first
        :data:`KEY_DIGITS` hex digits."""
        return self.name if self.kind == "builtin" else f"custom:{self.digest[:KEY_DIGITS]}"


def serialize(expr: Expr) -> str:
    """A complete text of ``expr``: every node's operation, kind, name and value, so two
    expressions have one text exactly when they are equal (``str(expr)`` omits input kinds).

    Examples
    --------
    >>> from nvmathpy.kernels.ir import const, input_
    >>> serialize(Expr("add", (input_("x", "value"), const(1.0))))
    "add[None]None=None(input[value]'x'=None(),const[None]None=1.0())"
    """
    args = ",".join(serialize(a) for a in expr.args)
    return f"{expr.op}[{expr.kind}]{expr.name!r}={expr.value!r}({args})"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _named_inputs(exprs: tuple[Expr, ...], names: tuple[str, ...] | None = None) -> tuple[tuple[str, str], ...]:
    """``(name, kind)`` of the inputs ``exprs`` read (only ``names``, when given), first use first."""
    found: dict[str, str] = {}
    for expr in exprs:
        for name, kind in inputs_of(expr).items():
            if kind not in ("value", "index"):
                found.setdefault(name, kind)
    return tuple((n, k) for n, k in found.items() if names is None or n in names)


@functools.cache
def _builtin(edef: EpilogueDef) -> ResolvedEpilogue:
    steps = ";".join(f"{target}={serialize(expr)}" for target, expr in edef.steps)
    text = (f"builtin|{edef.name}|{edef.inputs}|{steps}|{edef.aux}|{edef.reductions}|{edef.real_only}")
    inputs = _named_inputs(tuple(expr for _, expr in edef.steps), edef.inputs)
    return ResolvedEpilogue("builtin", edef.name, edef, None, inputs, _digest(text))


def resolve_builtin(epilogue: "str | Epilogue | EpilogueDef") -> ResolvedEpilogue:
    """The built-in epilogue ``epilogue`` names, resolved (one object per definition per process).

    Raises
    ------
    InvalidOptionError
        If the name is not a known epilogue.
    """
    return _builtin(definition(epilogue))


def resolve_custom(expr: Expr) -> ResolvedEpilogue:
    """A traced custom epilogue (the product named ``x``), resolved: inputs, native match, digest.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.kernels.trace import trace
    >>> r = resolve_custom(trace(lambda x, b: np.maximum(x + b, 0), {"b": "col"}, value_name="x"))
    >>> r.inputs, r.native.name, r.native_bias, r.key == "custom:" + r.digest[:32]
    ((('b', 'col'),), 'relu_bias', 'b', True)
    """
    match = match_native(expr)
    native, bias = (resolve_builtin(match[0]), match[1]) if match is not None else (None, None)
    digest = _digest("custom|" + serialize(expr))
    return ResolvedEpilogue("custom", "custom", None, expr, _named_inputs((expr,)), digest, native, bias)
