"""Custom matmul epilogues written in Python: traced into the :mod:`nvmathpy.kernels.ir`
expression IR, and run on the CPU by the evaluators of :mod:`nvmathpy.kernels.cpu_eval`.

A custom epilogue is a function ``f(x, name1, name2, ...)``: ``x`` is the product value, the
other parameters name arrays of ``epilogue_inputs`` (their kind follows from their shape
against the ``(..., M, N)`` result: 0-d or Python numbers are scalars, ``(N,)``/``(..., 1, N)``
per column, ``(..., M, 1)`` per row, anything else a full matrix) or the index names ``row``,
``col``, ``batch``. The traced IR (never the function object) identifies the epilogue: the
plan-cache key holds it, the problem key its digest (:mod:`._resolved`), so two identical
functions share a plan.
"""

from __future__ import annotations

import numbers
import sys
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ...errors import InvalidOperandError
from ...operands import Operand, to_package
from ...kernels.cpu_eval import BlockedEvaluator, NumexprEvaluator
from ...kernels.ir import Expr, input_, inputs_of, substitute, walk
from ...kernels.trace import trace, trace_lifting
from .cpu._epilogue_eval import compile_program
from .cpu._program import Program

__all__ = ["is_custom", "scalar_inputs", "input_kind", "trace_epilogue", "needs_whole_result", "custom_program"]

#: Names the evaluator's environment uses itself (the value, the addend, the result) and the
#: plan's operands (inputs share one table with them: an input ``b`` would replace the operand).
RESERVED = ("x", "c", "d", "a", "b")


def is_custom(epilogue: Any) -> bool:
    """Whether ``epilogue`` is a custom one: a Python callable or an already traced :class:`Expr`."""
    if epilogue is None or type(epilogue) is str:  # the common cases first: this runs on every matmul() call
        return False
    from ..epilogues import Epilogue, EpilogueDef

    if isinstance(epilogue, (str, Epilogue, EpilogueDef)) or epilogue is None:
        return False
    return isinstance(epilogue, Expr) or callable(epilogue)


def scalar_inputs(inputs: Mapping[str, Any], like: Operand) -> dict[str, Any]:
    """``inputs`` with Python numbers made 0-d arrays of ``like``'s dtype and package (names checked)."""
    out = {}
    for name, value in inputs.items():
        if name in RESERVED:
            raise InvalidOperandError(
                f"epilogue_inputs: the name {name!r} is reserved for custom epilogues ({list(RESERVED)}); rename it"
            )
        out[name] = _scalar_array(value, like) if isinstance(value, numbers.Number) else value
    return out


def _scalar_array(value: numbers.Number, like: Operand, dtype: Any = None) -> Any:
    """``value`` as a 0-d array of ``dtype`` (default: ``like``'s) in ``like``'s package and device."""
    dtype = like.dtype if dtype is None else np.dtype(dtype)
    host = np.asarray(value, dtype)
    if like.device != "cuda":
        return to_package(host, like)
    if like.package == "torch":
        torch = sys.modules["torch"]
        return torch.tensor(value, dtype=getattr(torch, dtype.name), device=f"cuda:{like.device_id}")
    import cupy

    with cupy.cuda.Device(like.device_id):
        return cupy.asarray(host)


def input_kind(shape: Sequence[int], m: int, n: int) -> str:
    """The IR kind of an input of ``shape`` against a result with ``m`` rows and ``n`` columns."""
    if len(shape) == 0 or all(s == 1 for s in shape):
        return "scalar"
    if len(shape) == 1:
        return "col"
    if shape[-2] == 1:
        return "col"
    if shape[-1] == 1:
        return "row"
    return "matrix"


def trace_epilogue(
    epilogue: "Callable[..., Any] | Expr", shapes: Mapping[str, Sequence[int]], result: Sequence[int]
) -> Expr:
    """Trace ``epilogue`` with input kinds taken from ``shapes`` (an :class:`Expr` is returned as is)."""
    if isinstance(epilogue, Expr):  # the product is the leaf named "x", whatever the tracer called it
        value = next((name for name, kind in inputs_of(epilogue).items() if kind == "value"), "x")
        return epilogue if value == "x" else substitute(epilogue, {value: input_("x", "value")})
    m, n = (result[-2], result[-1]) if len(result) >= 2 else (1, result[-1] if result else 1)
    return trace(epilogue, {name: input_kind(shape, m, n) for name, shape in shapes.items()}, value_name="x")


def trace_epilogue_lifting(
    epilogue: "Callable[..., Any] | Expr", shapes: Mapping[str, Sequence[int]], result: Sequence[int], like: Operand
) -> tuple[Expr, dict[str, Any]]:
    """:func:`trace_epilogue`, with the numbers the function captures (closure, defaults,
    globals) lifted into scalar inputs (see :func:`~nvmathpy.kernels.trace.trace_lifting`):
    returns the expression and those inputs as 0-d arrays of ``like``'s package and compute
    dtype (float32 for 16-bit and 8-bit operands), so one plan and one kernel serve every value."""
    if isinstance(epilogue, Expr):
        return trace_epilogue(epilogue, shapes, result), {}
    m, n = (result[-2], result[-1]) if len(result) >= 2 else (1, result[-1] if result else 1)
    expr, values = trace_lifting(epilogue, {name: input_kind(shape, m, n) for name, shape in shapes.items()},
                                 value_name="x")
    dtype = like.dtype if np.dtype(like.dtype).itemsize >= 4 else np.dtype(np.float32)
    return expr, {name: _scalar_array(value, like, dtype) for name, value in values.items()}


def needs_whole_result(expr: Expr) -> bool:
    """Whether ``expr`` reads the row (or batch) index: such programs run on whole results only."""
    return any(node.op == "index" and node.name in ("row", "batch") for node in walk(expr))


def custom_program(
    expr: Expr,
    prologue: Sequence[tuple[str, Any]],
    *,
    compute_dtype: np.dtype,
    input_dtypes: dict[str, np.dtype],
    backend: str,
) -> Program:
    """A :class:`Program` applying ``prologue`` (``x = alpha x + beta c``) then ``expr`` to the
    working buffer ``x`` in place, then storing it into the result ``d`` if that is another
    array (float16/bfloat16 results). ``backend`` ``"numexpr"`` uses numexpr, ``"ufunc"`` the
    blocked NumPy evaluator."""
    before = None
    if prologue:
        before = compile_program(prologue, outputs=(), compute_dtype=compute_dtype, result_is_work=True,
                                 input_dtypes=input_dtypes, backend=backend)
    evaluate = NumexprEvaluator(expr, compute_dtype) if backend == "numexpr" else BlockedEvaluator(expr, compute_dtype)

    def run(env: dict, scratch: Sequence[np.ndarray]) -> None:
        x = env["x"]
        if before is not None:
            before.run({**env, "d": x}, scratch)
        with np.errstate(all="ignore"):
            evaluate(x, env)
        if env["d"] is not x:
            np.copyto(env["d"], x, casting="unsafe")

    return Program(run, before.scratch_kinds if before is not None else ())
