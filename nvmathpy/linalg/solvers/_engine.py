"""The CPU engine of the solver plans, and where engines are chosen by execution space.

One :class:`CPULapackEngine` instance per operation: it lists the operation's candidates
(LAPACK drivers and batched fast paths, best guess first) and prepares one by fetching its
LAPACK routines and sizing its workspace once. A cuSOLVER engine will slot in beside it
through :func:`engine_for`, which picks by execution space.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ...execution import ExecutionCPU, cpu_description
from ...errors import ExecutionSpaceUnavailableError
from ...plan import Candidate, Engine, Prepared, Problem

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


def engine_for(space: Any, cpu_engine: CPULapackEngine) -> Engine:
    """The engine for an execution space. Only the CPU engine exists for now; the CUDA
    space is refused earlier by ``resolve_execution`` on machines without a GPU, and here
    where a GPU exists but the cuSOLVER engine is not written yet."""
    if isinstance(space, ExecutionCPU) or space is None:
        return cpu_engine
    raise ExecutionSpaceUnavailableError(
        f"execution space {getattr(space, 'name', space)!r}: the solver plans have no engine for it yet "
        "(the cuSOLVER engine is planned); use CPU operands or execution='cpu'"
    )
