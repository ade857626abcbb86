"""The CPU engine of the solver plans, and where engines are chosen by execution space.

One :class:`CPULapackEngine` instance per operation: it lists the operation's candidates
(LAPACK drivers and batched fast paths, best guess first) and prepares one by fetching its
LAPACK routines and sizing its workspace once. :func:`engine_for` picks by execution space:
this engine on the CPU, the cuSOLVER engine (``_cusolver_engine``) for CUDA.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ....execution import ExecutionCPU, ExecutionCUDA, cpu_description
from ....errors import ExecutionSpaceUnavailableError
from ....plan import Candidate, Engine, Prepared, Problem

__all__ = ["CPULapackEngine", "engine_for"]

CandidatesFn = Callable[[Problem], list[Candidate]]
PrepareFn = Callable[[Problem, Candidate], dict[str, Any]]


class CPULapackEngine(Engine):
    """LAPACK through SciPy's f2py wrappers (plus NumPy and vectorised fast paths).

    Parameters
    ----------
    operation
        The problem operation this engine serves.
    list_candidates
        ``problem -> [Candidate, ...]`` in heuristic order.
    setup
        ``(problem, candidate) -> state``: routines and workspace sizes for the candidate,
        stored in the :class:`Prepared` it returns.
    """

    name = "cpu-lapack"

    def __init__(self, operation: str, list_candidates: CandidatesFn, setup: PrepareFn):
        self.operation = operation
        self._list = list_candidates
        self._setup = setup

    def candidates(self, problem: Problem) -> list[Candidate]:
        return self._list(problem)

    def prepare(self, problem: Problem, candidate: Candidate, extra: Mapping[str, Any] | None = None) -> Prepared:
        return Prepared(candidate, **self._setup(problem, candidate))

    def device(self) -> dict[str, Any]:
        return {**cpu_description(), "engine": self.name}


def engine_for(space: Any, cpu_engine: CPULapackEngine, *, package: str = "cupy", stream: Any = None) -> Engine:
    """The engine for an execution space: the plan's CPU engine, or for
    :class:`~nvmathpy.ExecutionCUDA` the cuSOLVER engine of the same operation
    (:class:`..cuda._engine.CusolverEngine`, imported only then) on the operands' package and
    ``stream`` (``None``: the package's current stream)."""
    if isinstance(space, ExecutionCPU) or space is None:
        return cpu_engine
    if isinstance(space, ExecutionCUDA):
        from ..cuda._engine import OPERATIONS, CusolverEngine

        if cpu_engine.operation in OPERATIONS:
            return CusolverEngine(cpu_engine.operation, device_id=space.device_id, package=package, stream=stream)
    raise ExecutionSpaceUnavailableError(
        f"execution space {getattr(space, 'name', space)!r}: the solver operation {cpu_engine.operation!r} has "
        "no engine there; use CPU operands or execution='cpu'"
    )
