"""Recognising custom epilogues that are exactly one of cuBLASLt's own epilogues.

A custom epilogue (a traced :class:`~nvmathpy.kernels.ir.Expr`) that computes exactly what a
native cuBLASLt epilogue computes runs as that epilogue, fused by cuBLASLt, instead of a
generated kernel. "Exactly" is structural: after renaming the product value to ``x`` and
putting the operands of commutative operations (``add``, ``mul``, ``maximum``, ``minimum``)
in a canonical order, the expression must equal one of these forms, where ``v`` is ``x`` or
``x + bias`` with ``bias`` a per-column ``(N,)`` or per-row ``(M, 1)`` input:

=============  ==========================================================================
``bias``       ``x + bias``
``relu``       ``maximum(x, 0)`` (also ``np.clip(x, 0, None)``)
``relu_bias``  ``maximum(x + bias, 0)``
``gelu``       :func:`nvmathpy.linalg.epilogues.gelu` (``approximate="tanh"``) of ``x``, or the
               form :func:`nvmathpy.linalg.epilogues.gelu_tanh` builds
``gelu_bias``  the same of ``x + bias``
=============  ==========================================================================

Nothing else is matched (no algebraic rewriting): ``np.where(x > 0, x, 0)`` differs from
``maximum`` for NaN and is left to the generated kernels, as is the erf GELU.
"""

from __future__ import annotations

from typing import Callable

from ...kernels.ir import Expr, const, input_, inputs_of, substitute
from ...kernels.trace import Traced, gelu
from ..epilogues import gelu_tanh

__all__ = ["NativeMatch", "canonical", "match_native"]

#: Operations whose operands may be reordered.
COMMUTATIVE = ("add", "mul", "maximum", "minimum")
#: Input kinds a cuBLASLt bias vector can stand for.
BIAS_KINDS = ("col", "row")

NativeMatch = tuple[str, "str | None"]


def _key(expr: Expr) -> str:
    """A total order on expressions (constants compared as floats, so ``0`` sorts as ``0.0``)."""
    if expr.op == "const":
        return f"const:{float(expr.value)!r}"
    if expr.op in ("input", "index"):
        return f"{expr.op}:{expr.kind}:{expr.name}"
    return f"{expr.op}[{expr.kind}](" + ",".join(_key(a) for a in expr.args) + ")"


def canonical(expr: Expr) -> Expr:
    """``expr`` with numeric constants as floats and commutative operands sorted.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.kernels.trace import trace
    >>> a = trace(lambda x, b: np.maximum(0, b + x), {"b": "col"})
    >>> b = trace(lambda x, b: np.maximum(x + b, 0.0), {"b": "col"})
    >>> canonical(a) == canonical(b)
    True
    """
    if expr.op == "const":
        return expr if isinstance(expr.value, bool) else const(float(expr.value))
    if not expr.args:
        return expr
    args = tuple(canonical(a) for a in expr.args)
    if expr.op in COMMUTATIVE:
        args = tuple(sorted(args, key=_key))
    return Expr(expr.op, args, expr.name, expr.kind, expr.value)


def _forms(v: Expr) -> dict[str, list[Expr]]:
    """The activation forms of ``v`` (canonical), by activation name."""
    traced = Traced(v)
    relu = Expr("maximum", (v, const(0.0)))
    gelus = [gelu(traced).expr, gelu_tanh(v)]
    return {"": [canonical(v)], "relu": [canonical(relu)], "gelu": [canonical(g) for g in gelus]}


_X = input_("x", "value")


def _templates(bias: Expr | None) -> dict[str, list[Expr]]:
    """Native epilogue name -> its canonical forms (with ``bias`` added first when given)."""
    if bias is None:
        forms = _forms(_X)
        return {"relu": forms["relu"], "gelu": forms["gelu"]}
    forms = _forms(Expr("add", (_X, bias)))
    return {"bias": forms[""], "relu_bias": forms["relu"], "gelu_bias": forms["gelu"]}


def match_native(expr: Expr, allowed: Callable[[str], bool] = lambda name: True) -> NativeMatch | None:
    """The cuBLASLt epilogue ``expr`` is exactly, as ``(name, bias input name or None)``, or ``None``.

    Parameters
    ----------
    expr
        A traced custom epilogue.
    allowed
        ``allowed(name)``: whether the caller can use native epilogue ``name`` (e.g. real
        dtypes only for the activations).

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.kernels.trace import trace
    >>> from nvmathpy.linalg.epilogues import gelu
    >>> match_native(trace(lambda acc, b0: gelu(acc + b0), {"b0": "col"}))
    ('gelu_bias', 'b0')
    >>> match_native(trace(lambda x: np.maximum(x, 0) * 2, {})) is None
    True
    """
    inputs = inputs_of(expr)
    values = [name for name, kind in inputs.items() if kind == "value"]
    others = [(name, kind) for name, kind in inputs.items() if kind != "value"]
    if len(values) != 1 or len(others) > 1:
        return None
    if others and others[0][1] not in BIAS_KINDS:
        return None
    bias_name = others[0][0] if others else None
    renamed = substitute(expr, {values[0]: _X})
    bias = None
    if bias_name is not None:
        bias = input_("__bias__", others[0][1])
        renamed = substitute(renamed, {bias_name: bias})
    target = canonical(renamed)
    for name, forms in _templates(bias).items():
        if target in forms and allowed(name):
            return name, bias_name
    return None
