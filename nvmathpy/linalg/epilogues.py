"""Matmul epilogues: the :class:`Epilogue` names and their definitions.

An epilogue is applied to ``x = alpha * a @ b + beta * c`` before the result is returned.
Each built-in epilogue is a small :class:`EpilogueDef`: the inputs it needs (in
``epilogue_inputs``), a sequence of elementwise steps written in the expression IR of
:mod:`nvmathpy.kernels.ir` (built here through :class:`~nvmathpy.kernels.trace.Traced`'s
operators), and the reductions it returns beside the result. One evaluator per execution
space applies any definition in one pass over the result; custom epilogues (Python
functions, see :class:`~nvmathpy.linalg.Matmul`) are traced into the same IR, with the
helpers :func:`sigmoid`, :func:`gelu` and :func:`erf` exported here.

Conventions (row-major, NumPy's view of ``a @ b`` with result shape ``(..., M, N)``):

- ``bias`` broadcasts against the result like any NumPy operand: shape ``(N,)`` adds one
  value per column, ``(M, 1)`` one per row.
- ``gelu`` is the tanh approximation used by cuBLASLt,
  ``0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))``, evaluated as the algebraically equal
  ``z / (1 + exp(-2 sqrt(2/pi) (z + 0.044715 z^3)))``.
- ``relu_aux`` is the boolean mask ``z > 0``; ``gelu_aux`` is the pre-activation ``z``.
- ``drelu``/``dgelu`` multiply the product by the activation's derivative at the aux input;
  ``*_bgrad`` also return the bias gradient: the result summed over its rows (axis ``-2``),
  one value per output column, shape ``(..., N)``.
- ``bgrada`` returns ``a`` summed over the ``K`` axis (one value per row of the result,
  shape ``(..., M)``); ``bgradb`` returns ``b`` summed over ``K`` (one value per column,
  shape ``(..., N)``); both are sums of the operands as given (not scaled by ``alpha``), as
  cuBLASLt's ``BGRADA``/``BGRADB`` reduce over the GEMM's ``K`` dimension. The product itself
  is returned unchanged. Reductions of float16/bfloat16 results accumulate in float32.

Examples
--------
>>> Epilogue("relu_bias") is Epilogue.RELU_BIAS
True
>>> definition(Epilogue.GELU_AUX_BIAS).inputs, definition("gelu_aux_bias").aux
(('bias',), ('gelu_aux',))
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidOptionError
from ..kernels.ir import Expr, input_
from ..kernels.trace import GELU_C, GELU_CUBIC, Traced, erf, gelu, sigmoid

__all__ = [
    "Epilogue", "EpilogueDef", "definition", "gelu_tanh", "gelu_tanh_grad", "DEFINITIONS",
    "sigmoid", "gelu", "erf",  # helpers for custom epilogues (traced values and arrays alike)
]


class Epilogue(str, enum.Enum):
    """The built-in epilogues (the values are the names accepted as strings)."""

    RELU = "relu"
    GELU = "gelu"
    BIAS = "bias"
    RELU_BIAS = "relu_bias"
    GELU_BIAS = "gelu_bias"
    RELU_AUX = "relu_aux"
    GELU_AUX = "gelu_aux"
    RELU_AUX_BIAS = "relu_aux_bias"
    GELU_AUX_BIAS = "gelu_aux_bias"
    DRELU = "drelu"
    DRELU_BGRAD = "drelu_bgrad"
    DGELU = "dgelu"
    DGELU_BGRAD = "dgelu_bgrad"
    BGRADA = "bgrada"
    BGRADB = "bgradb"


#: What a reduction sums: the result over its rows, or an operand over ``K``.
REDUCTIONS = ("result_rows", "a_k", "b_k")


@dataclass(frozen=True)
class EpilogueDef:
    """One epilogue, as data the evaluators apply.

    Attributes
    ----------
    name
        The epilogue's name.
    inputs
        Names the caller must pass in ``epilogue_inputs``.
    steps
        ``(target, expression)`` pairs run in order over the variable ``x`` (the product
        ``alpha * a @ b + beta * c``) and the inputs. Target ``"x"`` updates the working
        value in place, ``"d"`` is the result, a name in ``aux`` is an aux output, and any
        other name is a temporary later steps may read. Without a ``"d"`` step the result
        is ``x``.
    aux
        Elementwise aux outputs (returned in the aux dict, result-shaped).
    reductions
        ``(aux name, what)`` pairs, ``what`` one of ``"result_rows"``, ``"a_k"``, ``"b_k"``.
    real_only
        True when the epilogue is defined for real dtypes only (activations).
    """

    name: str
    inputs: tuple[str, ...] = ()
    steps: tuple[tuple[str, Expr], ...] = ()
    aux: tuple[str, ...] = ()
    reductions: tuple[tuple[str, str], ...] = ()
    real_only: bool = False

    @property
    def aux_names(self) -> tuple[str, ...]:
        """Every key of the aux dict ``execute()`` returns (empty: only the result)."""
        return self.aux + tuple(name for name, _ in self.reductions)


_K0 = -2.0 * GELU_C
_K1 = -2.0 * GELU_C * GELU_CUBIC


def _one_plus_exp_2u(z: Traced) -> Traced:
    """``1 + exp(-2u)`` with ``u = sqrt(2/pi)(z + 0.044715 z^3)``."""
    return 1.0 + np.exp(z * (_K0 + _K1 * (z * z)))


def _sigmoid_2u(z: Traced) -> Traced:
    return 1.0 / _one_plus_exp_2u(z)


def gelu_tanh(z: Expr) -> Expr:
    """The tanh-approximated GELU of ``z`` (as ``z * sigmoid(2 sqrt(2/pi) (z + 0.044715 z^3))``)."""
    return _gelu_tanh(Traced(z)).expr


def _gelu_tanh(z: Traced) -> Traced:
    return z / _one_plus_exp_2u(z)


def gelu_tanh_grad(z: Expr, s: Expr) -> Expr:
    """d gelu_tanh / dz, given ``s = 1 / (1 + exp(-2u))`` with ``u = sqrt(2/pi)(z + 0.044715 z^3)``."""
    return _gelu_tanh_grad(Traced(z), Traced(s)).expr


def _gelu_tanh_grad(z: Traced, s: Traced) -> Traced:
    return s + (2.0 * GELU_C) * z * s * (1.0 - s) * (1.0 + (3.0 * GELU_CUBIC) * (z * z))


def _var(name: str, kind: str) -> Traced:
    return Traced(input_(name, kind))


_X = _var("x", "value")
_ADD_BIAS = ("x", (_X + _var("bias", "col")).expr)
_RELU = ("d", np.maximum(_X, 0.0).expr)
_GELU = ("d", _gelu_tanh(_X).expr)
_MASK = ("relu_aux", (_X > 0.0).expr)
_DRELU = ("d", np.where(_var("relu_aux", "matrix"), _X, 0.0).expr)
_Z = _var("gelu_aux", "matrix")
_DGELU = (("s", _sigmoid_2u(_Z).expr), ("d", (_X * _gelu_tanh_grad(_Z, _var("s", "matrix"))).expr))

#: Every built-in definition, by name.
DEFINITIONS: dict[str, EpilogueDef] = {
    d.name: d
    for d in (
        EpilogueDef("relu", steps=(_RELU,), real_only=True),
        EpilogueDef("gelu", steps=(_GELU,), real_only=True),
        EpilogueDef("bias", inputs=("bias",), steps=(("d", _ADD_BIAS[1]),)),
        EpilogueDef("relu_bias", inputs=("bias",), steps=(_ADD_BIAS, _RELU), real_only=True),
        EpilogueDef("gelu_bias", inputs=("bias",), steps=(_ADD_BIAS, _GELU), real_only=True),
        EpilogueDef("relu_aux", steps=(_MASK, _RELU), aux=("relu_aux",), real_only=True),
        EpilogueDef("gelu_aux", steps=(("gelu_aux", _X.expr), _GELU), aux=("gelu_aux",), real_only=True),
        EpilogueDef(
            "relu_aux_bias", inputs=("bias",), steps=(_ADD_BIAS, _MASK, _RELU),
            aux=("relu_aux",), real_only=True,
        ),
        EpilogueDef(
            "gelu_aux_bias", inputs=("bias",), steps=(_ADD_BIAS, ("gelu_aux", _X.expr), _GELU),
            aux=("gelu_aux",), real_only=True,
        ),
        EpilogueDef("drelu", inputs=("relu_aux",), steps=(_DRELU,), real_only=True),
        EpilogueDef(
            "drelu_bgrad", inputs=("relu_aux",), steps=(_DRELU,),
            reductions=(("drelu_bgrad", "result_rows"),), real_only=True,
        ),
        EpilogueDef("dgelu", inputs=("gelu_aux",), steps=_DGELU, real_only=True),
        EpilogueDef(
            "dgelu_bgrad", inputs=("gelu_aux",), steps=_DGELU,
            reductions=(("dgelu_bgrad", "result_rows"),), real_only=True,
        ),
        EpilogueDef("bgrada", reductions=(("bgrada", "a_k"),)),
        EpilogueDef("bgradb", reductions=(("bgradb", "b_k"),)),
    )
}


def definition(epilogue: "str | Epilogue | EpilogueDef") -> EpilogueDef:
    """The definition of an epilogue given by name, :class:`Epilogue` member or definition.

    Raises
    ------
    InvalidOptionError
        If the name is not a known epilogue (the message lists the allowed ones).
    """
    if isinstance(epilogue, EpilogueDef):
        return epilogue
    name = epilogue.value if isinstance(epilogue, Epilogue) else epilogue
    found = DEFINITIONS.get(name) if isinstance(name, str) else None
    if found is None:
        raise InvalidOptionError(f"epilogue={epilogue!r} is not known; allowed: {sorted(DEFINITIONS)} or None")
    return found
