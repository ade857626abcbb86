"""The Cholesky plan: factor Hermitian positive definite matrices once with ``potrf``,
solve many times with ``potrs``.

A C-ordered Hermitian ``A`` is, viewed in Fortran order, ``A.T = conj(A)``: the plan
factors that view with the opposite triangle, which yields the requested factor without
copying ``A`` (for complex data the solve conjugates the right-hand side and the result).
"""

from __future__ import annotations

import functools

from typing import Any, Callable

import numpy as np

from ....errors import LinAlgError
from ....plan import Prepared, Problem
from ._base import SolverPlan, alive, with_threads
from ..cpu._engine import CPULapackEngine
from ..cpu._factored import one_call_solve, solver_closure, stack_factors, view_candidates, view_setup
from .._operands import as_stack, batch_index, fortran_view, layout_of, stack_of, stand_in

__all__ = ["Cholesky", "not_positive_definite"]


def not_positive_definite(order: int, where: str = "") -> LinAlgError:
    """The error of a Cholesky factorization whose leading minor of ``order`` is not positive
    (``where``: which batch element, for a batch)."""
    return LinAlgError(f"matrix is not positive definite (its leading minor of order {order} is not){where}")


class Cholesky(SolverPlan):
    """Cholesky factorization ``A = L L^H`` (or ``U^H U``) of Hermitian positive definite
    matrices, batched over leading dimensions.

    Only the triangle named by ``lower`` is read. A matrix that is not positive definite
    raises :class:`~numpy.linalg.LinAlgError` naming the batch element.

    Parameters
    ----------
    a
        ``(..., n, n)`` array.
    lower
        Factor as ``L L^H`` from the lower triangle (default), else ``U^H U`` from the upper.
    overwrite_a
        Let the factorization reuse ``a``'s memory where possible.
    execution
        Where the plan runs: see :class:`~nvmathpy.linalg.solvers.plans._base.SolverPlan`.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg import Cholesky
    >>> a = np.array([[4.0, 2.0], [2.0, 3.0]])
    >>> ch = Cholesky(a)
    >>> ch.factor
    array([[2.        , 0.        ],
           [1.        , 1.41421356]])
    >>> ch.solve(np.array([6.0, 5.0]))
    array([1., 1.])
    """

    cpu_engine = CPULapackEngine("cholesky", view_candidates("potrf", "potrs"), view_setup("potrf", "potrs"))

    def __init__(self, a: Any, /, *, lower: bool = True, overwrite_a: bool = False, execution: Any = None):
        super().__init__(execution, a=a)
        self._a = as_stack(self._arrays.pop("a"), "a")
        self._lower = bool(lower)
        self._overwrite = bool(overwrite_a)
        self._n = self._a.shape[-1]
        self._batch = self._a.shape[:-2]
        self._problem = Problem.of(
            "cholesky", n=self._n, batch=list(self._batch), dtype=self._a.dtype.name,
            layout=layout_of(self._a), lower=self._lower,
            **self._threads_field(),
        )

    @classmethod
    def from_factor(cls, c: Any, lower: bool, *, execution: Any = None) -> "Cholesky":
        """A plan over an existing triangular factor (``L`` if ``lower`` else ``U``; the other
        triangle is ignored); no factorization is done."""
        plan = cls(c, lower=lower, execution=execution)
        plan.plan()
        plan.use_factor(c)
        return plan

    def use_factor(self, c: Any) -> None:
        """Adopt an existing factor of the planned shape, dtype and triangle."""
        self._a = self._swap_in("c", c, self._a)
        mats = [np.asfortranarray(m) for m in stack_of(self._a)]
        self._clear_derived()
        self._state = (mats, [(self._lower, False)] * len(mats))

    def _bind(self, prepared: Prepared) -> Callable[[], "Cholesky"]:
        potrf, transpose = prepared.state["potrf"], prepared.state["transpose"]
        a, overwrite, lower = self._a, self._overwrite, self._lower

        def factor() -> "Cholesky":
            mats = stack_of(a)
            factors, flags = [], []
            for i in range(mats.shape[0]):
                if not a.shape[-1]:  # 0 x 0: nothing to factor
                    factors.append(np.empty((0, 0), a.dtype, order="F"))
                    flags.append((lower, False))
                    continue
                view, transposed = fortran_view(mats[i], transpose)
                flag = lower != transposed
                c, info = potrf(view, lower=flag, clean=0, overwrite_a=overwrite)  # zeroed only in .factor
                if info > 0:
                    where = f" (batch element {batch_index(i, self._batch)})" if self._batch else ""
                    raise not_positive_definite(info, where)
                if info < 0:
                    raise LinAlgError(f"potrf: illegal value in argument {-info}")
                factors.append(c)
                flags.append((flag, transposed))
            self.factorizations += 1
            self._state = (factors, flags)
            self._solve = None
            return self

        return factor

    def _timing_call(self, prepared: Prepared) -> Callable[[], Any]:
        potrf, transpose = prepared.state["potrf"], prepared.state["transpose"]
        mats = stack_of(self._a)
        return lambda: [potrf(*_view_and_flag(m, transpose, self._lower), clean=0) for m in mats if m.size]

    def execute(self) -> "Cholesky":
        """Factor the current ``a``; returns the plan (for chaining ``.solve``)."""
        return self._run()

    @with_threads
    def solve(self, b: Any) -> Any:
        """Solve ``A x = b`` with the stored factor; ``b`` is ``(n,)`` or ``(..., n, k)``."""
        solve = self._solve
        if solve is None:
            solve = self._solve = self._make_solver()
        return solve(b, 0)

    def _make_solver(self) -> Callable[..., Any]:
        factors, flags = self._computed()
        potrs = self._prepared.state["potrs"]
        conj = self._a.dtype.kind == "c"

        def solve_one(i: int, b2: np.ndarray, trans: int) -> np.ndarray:
            flag, transposed = flags[i]
            if transposed and conj:  # the factor is of conj(A): A x = b <=> conj(A) conj(x) = conj(b)
                return potrs(factors[i], b2.conj(), lower=flag)[0].conj()
            return potrs(factors[i], b2, lower=flag)[0]

        fast = None
        if not self._batch and not (conj and flags[0][1]):
            c0, flag0 = factors[0], flags[0][0]
            fast = one_call_solve("cho_solve", c0, flag0, library=functools.partial(potrs, c0, lower=flag0))
        return solver_closure(solve_one, self._n, self._batch, self._a.dtype, [], self._to_caller, "matrix", fast)

    @property
    @alive
    def factor(self) -> Any:
        """The triangular factor: ``L`` (``lower=True``) or ``U``, zero in the other triangle
        (a new array each time: the stored factor keeps ``A``'s other triangle, as LAPACK
        leaves it, which saves a pass over the matrix when only solves are needed)."""
        factors, flags = self._computed()
        triangle = np.tril if self._lower else np.triu  # the factorization leaves the other one as it was
        mats = [triangle(c.T if transposed else c) for c, (_, transposed) in zip(factors, flags)]
        return self._to_caller(stack_factors(mats or [stand_in(self._a)], self._batch))

    @property
    def lower(self) -> bool:
        return self._lower


def _view_and_flag(m: np.ndarray, transpose: bool, lower: bool) -> tuple[np.ndarray, bool]:
    view, transposed = fortran_view(m, transpose)
    return view, lower != transposed
