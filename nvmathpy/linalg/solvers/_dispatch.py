"""Where the solvers decide between the CPU and CUDA, and the only place that does.

:func:`wants_cuda` reads the operand and ``execution``; the plan classes, the one-call
functions and :func:`engine_for` ask it, then take the CUDA piece from a registry here. The
registries are filled by :mod:`.cuda` when it is imported, which happens here, on the first
CUDA request (:func:`_load_cuda`): nothing of the CPU path imports :mod:`.cuda`.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from ...errors import ExecutionSpaceUnavailableError
from ...execution import ExecutionCPU, ExecutionCUDA, as_execution
from ...operands import on_cuda
from ...plan import Engine

__all__ = ["CUDA_ENGINES", "CUDA_FUNCTIONS", "CUDA_PLANS", "cuda_function", "engine_for", "plan_class", "wants_cuda"]

#: CPU plan class -> its CUDA variant (a subclass taking the same arguments).
CUDA_PLANS: dict[type, type] = {}
#: One-call function name -> the function of that name on CUDA operands.
CUDA_FUNCTIONS: dict[str, Callable[..., Any]] = {}
#: Solver operation -> the CUDA engine class that computes it.
CUDA_ENGINES: dict[str, Callable[..., Engine]] = {}


def _load_cuda() -> None:
    """Import :mod:`.cuda`, which fills the registries (once; later calls cost a dict look-up)."""
    if not CUDA_FUNCTIONS:
        importlib.import_module(f"{__package__}.cuda")


def wants_cuda(operand: Any, execution: Any) -> bool:
    """Whether work on ``operand`` runs on CUDA: a CUDA array, or ``execution`` says so.

    Cheap for the common NumPy case (no wrapping)."""
    if execution is None:
        return on_cuda(operand)
    return isinstance(as_execution(execution), ExecutionCUDA)


def plan_class(cls: type, operand: Any, execution: Any) -> type:
    """The class a plan constructed as ``cls(operand, ..., execution=execution)`` becomes:
    ``cls`` itself, or its CUDA variant where the work runs on CUDA."""
    _load_cuda()
    if cls in CUDA_PLANS and wants_cuda(operand, execution):
        return CUDA_PLANS[cls]
    return cls


def cuda_function(name: str) -> Callable[..., Any]:
    """The one-call function ``name`` on CUDA operands."""
    _load_cuda()
    return CUDA_FUNCTIONS[name]


def engine_for(space: Any, cpu_engine: Any, *, package: str = "cupy", stream: Any = None) -> Engine:
    """The engine for an execution space: the plan's CPU engine, or for
    :class:`~nvmathpy.ExecutionCUDA` the CUDA engine of the same operation on the operands'
    package and ``stream`` (``None``: the package's current stream)."""
    if isinstance(space, ExecutionCPU) or space is None:
        return cpu_engine
    if isinstance(space, ExecutionCUDA):
        _load_cuda()
        engine = CUDA_ENGINES.get(cpu_engine.operation)
        if engine is not None:
            return engine(cpu_engine.operation, device_id=space.device_id, package=package, stream=stream)
    raise ExecutionSpaceUnavailableError(
        f"execution space {getattr(space, 'name', space)!r}: the solver operation {cpu_engine.operation!r} has "
        "no engine there; use CPU operands or execution='cpu'"
    )
