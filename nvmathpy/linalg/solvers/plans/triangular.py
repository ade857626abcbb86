"""The triangular-solve plan behind :func:`solve_triangular`: ``trtrs`` per matrix, reading
C-ordered matrices through their transposed view (the opposite triangle, the transposed
operation) so that ``A`` is never copied."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ....plan import Candidate, Prepared, Problem
from ._base import SolverPlan
from ..cpu._engine import CPULapackEngine
from ..cpu._factored import check_trans, solver_closure
from ..cpu._lapack import routine
from .._operands import as_stack, batch_index, fortran_view, layout_of, stack_of
from ....errors import LinAlgError

__all__ = ["TriangularSolve"]


def _candidates(problem: Problem) -> list[Candidate]:
    return [Candidate.of("trtrs", view="transpose" if problem.get("layout") == "C" else "direct")]


def _setup(problem: Problem, candidate: Candidate) -> dict[str, Any]:
    return {"trtrs": routine("trtrs", problem.get("dtype"))}


class TriangularSolve(SolverPlan):
    """Solve ``op(A) x = b`` for triangular ``A`` (``(..., n, n)``), many ``b`` per plan.

    ``lower`` picks the triangle read; ``unit_diagonal`` assumes ones on the diagonal.
    """

    cpu_engine = CPULapackEngine("triangular", _candidates, _setup)

    def __init__(self, a: Any, /, *, lower: bool = False, unit_diagonal: bool = False, execution: Any = None):
        super().__init__(execution, a=a)
        self._a = as_stack(self._arrays.pop("a"), "a")
        self._lower, self._unit = bool(lower), bool(unit_diagonal)
        self._n, self._batch = self._a.shape[-1], self._a.shape[:-2]
        self._problem = Problem.of(
            "triangular", n=self._n, batch=list(self._batch), dtype=self._a.dtype.name, layout=layout_of(self._a),
            lower=self._lower, unit=self._unit,
            **self._threads_field(),
        )

    def _bind(self, prepared: Prepared) -> Callable[..., Any]:
        trtrs = prepared.state["trtrs"]
        a, n, batch, lower, unit = self._a, self._n, self._batch, self._lower, int(self._unit)
        views: dict[int, tuple[np.ndarray, bool]] = {}  # filled on first use, then reused
        complex_ = a.dtype.kind == "c"

        def solve_one(i: int, b2: np.ndarray, trans: int) -> np.ndarray:
            if i not in views:
                views[i] = fortran_view(stack_of(a)[i])
            view, transposed = views[i]
            if transposed:
                if trans == 2 and complex_:  # A^H x = b <=> M conj(x) = conj(b) with M = A^T
                    x, info = trtrs(view, b2.conj(), lower=int(not lower), trans=0, unitdiag=unit)
                    x = x.conj()
                else:
                    x, info = trtrs(view, b2, lower=int(not lower), trans=0 if trans else 1, unitdiag=unit)
            else:
                x, info = trtrs(view, b2, lower=int(lower), trans=trans, unitdiag=unit)
            if info > 0:
                where = f" (batch element {batch_index(i, batch)})" if batch else ""
                raise LinAlgError(f"singular matrix: resolution failed at diagonal {info - 1}{where}")
            return x

        return solver_closure(solve_one, n, batch, a.dtype, [], self._to_caller, "matrix", None)

    def execute(self, b: Any = None, trans: Any = 0) -> Any:  # type: ignore[override]
        """Solve for ``b`` (``(n,)`` or ``(..., n, k)``) with ``trans`` 0/1/2 ('N'/'T'/'C')."""
        check_trans(trans)
        return self._run(b, trans)

    solve = execute
