"""The epilogue part of a generated kernel: the parameters an IR's inputs add, and the statements
that apply it to one element in registers before the store.

Array inputs are read through their own batch, row and column strides (0 broadcasts), exactly as
in :func:`~nvmathpy.kernels.emit_cuda.elementwise_kernel`; scalars arrive in the compute type.
Names in the emitted code are positional (``ein0``, ``es1``), never the inputs' own names.
"""

from __future__ import annotations

from dataclasses import dataclass

from .emit_cuda import STORAGE_TYPES, emit_expression
from .ir import Expr, inputs_of
from .launch import KernelParam, input_params, compute_ctype

__all__ = ["EpiloguePart", "epilogue_part"]


@dataclass(frozen=True)
class EpiloguePart:
    """What an epilogue adds to a kernel.

    Attributes
    ----------
    expr : Expr or None
        The epilogue (None: the value is stored as it is).
    inputs : tuple[tuple[str, str], ...]
        ``(name, kind)`` of every input the IR reads, in first-use order.
    signature : tuple[str, ...]
        C parameter declarations, appended to the kernel's own.
    params : tuple[KernelParam, ...]
        The same parameters, typed, for :func:`~nvmathpy.kernels.launch.pack_arguments`.
    """

    expr: Expr | None
    storage: str
    inputs: tuple[tuple[str, str], ...]
    signature: tuple[str, ...]
    params: tuple[KernelParam, ...]

    def apply(self, value: str, row: str, col: str, batch: str) -> tuple[list[str], str]:
        """Statements computing the epilogue of the compute-type C expression ``value`` at the
        element ``(batch, row, col)`` (names of ``long long`` variables in scope), and the
        variable holding the result."""
        if self.expr is None:
            return [], value
        compute = STORAGE_TYPES[self.storage][1]
        leaves: dict[tuple[str, str | None], str] = {
            ("value", None): "ev", ("index", "row"): row, ("index", "col"): col, ("index", "batch"): batch}
        lines = [f"const {compute} ev = {value};"]
        position = 0
        for input_name, kind in self.inputs:
            if kind == "value":
                continue
            if kind == "scalar":
                leaves[("input", input_name)] = f"es{position}"
            else:
                leaves[("input", input_name)] = f"ea{position}"
                lines.append(f"const {compute} ea{position} = nvm_load(ein{position}[{batch} * ebs{position} + "
                             f"{row} * ers{position} + {col} * ecs{position}]);")
            position += 1
        body = emit_expression(self.expr, compute, leaves)
        return lines + list(body.statements), body.result


def epilogue_part(expr: Expr | None, storage: str) -> EpiloguePart:
    """The epilogue part for ``expr`` on a result stored as ``storage``.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.kernels.trace import trace
    >>> part = epilogue_part(trace(lambda x, bias: np.maximum(x + bias, 0), {"bias": "col"}), "float32")
    >>> part.signature[0]
    'const float* __restrict__ ein0'
    >>> lines, result = part.apply("acc", "row", "col", "bz")
    >>> lines[1]
    'const float ea0 = nvm_load(ein0[bz * ebs0 + row * ers0 + col * ecs0]);'
    """
    ctype, compute = STORAGE_TYPES[storage]
    inputs = tuple(inputs_of(expr).items()) if expr is not None else ()
    signature: list[str] = []
    position = 0
    for _, kind in inputs:
        if kind == "value":
            continue
        if kind == "scalar":
            signature.append(f"{compute} es{position}")
        else:
            signature += [f"const {ctype}* __restrict__ ein{position}", f"long long ebs{position}",
                          f"long long ers{position}", f"long long ecs{position}"]
        position += 1
    params = tuple(input_params(inputs, compute_ctype(storage)))
    return EpiloguePart(expr, storage, inputs, tuple(signature), params)
