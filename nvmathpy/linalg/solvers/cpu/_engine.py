"""The CPU engine of the solver plans.

One :class:`CPULapackEngine` instance per operation: it lists the operation's candidates
(LAPACK drivers and batched fast paths, best guess first) and prepares one by fetching its
LAPACK routines and sizing its workspace once. Which engine a plan gets is decided in
:mod:`.._dispatch`.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ....execution import cpu_description
from ....plan import Candidate, Engine, Prepared, Problem

__all__ = ["CPULapackEngine"]

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
