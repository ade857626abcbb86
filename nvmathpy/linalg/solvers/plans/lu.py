"""The LU plan: factor a (batch of) square matrices once with ``getrf``, solve many times
with ``getrs``, and read determinants off the factors.

C-ordered matrices are factored through their free transposed view (``A.T`` is Fortran
ordered) and solved with the transposed operation, so no copy of ``A`` is ever made;
autotune may instead pick a Fortran copy (candidate ``view="copy"``) where that is faster.
"""

from __future__ import annotations

import functools

from typing import Any, Callable

import numpy as np

from ....errors import InvalidOperandError
from ....plan import Prepared, Problem
from ._base import SolverPlan, alive, with_threads
from ..cpu._engine import CPULapackEngine
from ..cpu._factored import one_call_solve, solver_closure, stack_factors, view_candidates, view_setup
from .._operands import as_stack, batch_index, fortran_view, layout_of, stack_of, stand_in
from ...validation import lu_factors

__all__ = ["LU"]


class LU(SolverPlan):
    """LU factorization with partial pivoting, ``A = P L U``, of one matrix or a batch.

    Factor once, solve many: :meth:`solve` reuses the factors; :meth:`reset_operands`
    swaps in a new ``A`` (same shape and dtype) and the next use refactors.

    Parameters
    ----------
    a
        ``(..., n, n)`` array (NumPy or torch CPU). Integers compute in float64.
    overwrite_a
        Let the factorization reuse ``a``'s memory when its layout allows (``a`` is then
        destroyed; a C-ordered ``a`` then holds the factors of ``a.T``, so :attr:`factors`
        raises, while :meth:`solve` and :meth:`det` work).
    execution
        Where the plan runs: see :class:`~nvmathpy.linalg.solvers.plans._base.SolverPlan`.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg import LU
    >>> a = np.array([[4.0, 3.0], [6.0, 3.0]])
    >>> with LU(a) as lu:
    ...     x = lu.solve(np.array([10.0, 12.0]))
    ...     y = lu.solve(np.array([1.0, 0.0]), trans=1)   # a.T @ y = e0, same factors
    ...     print(x, round(float(lu.det()), 12), lu.factorizations)
    [1. 2.] -6.0 1
    """

    cpu_engine = CPULapackEngine("lu", view_candidates("getrf", "getrs"), view_setup("getrf", "getrs"))

    def __init__(self, a: Any, /, *, overwrite_a: bool = False, execution: Any = None):
        super().__init__(execution, a=a)
        self._a = as_stack(self._arrays.pop("a"), "a")
        self._overwrite = bool(overwrite_a)
        self._n = self._a.shape[-1]
        self._batch = self._a.shape[:-2]
        self._problem = Problem.of(
            "lu", n=self._n, batch=list(self._batch), dtype=self._a.dtype.name, layout=layout_of(self._a),
            **self._threads_field(),
        )

    @classmethod
    def from_factors(cls, lu: Any, piv: Any, *, execution: Any = None) -> "LU":
        """A plan over existing LAPACK factors (as :meth:`factors` or
        ``scipy.linalg.lu_factor`` return them, ``piv`` 0-based); no factorization is done."""
        plan = cls(lu, execution=execution)
        plan.plan()
        plan.use_factors(lu, piv)
        return plan

    def use_factors(self, lu: Any, piv: Any) -> None:
        """Adopt existing factors of the planned shape and dtype (``A`` is then only known
        through them): the next solves use them without factoring."""
        self._a = self._swap_in("lu", lu, self._a)
        pivs = np.broadcast_to(lu_factors(self._a, piv), self._batch + (self._n,))  # shape, dtype, range
        lus = [np.asfortranarray(m) for m in stack_of(self._a)]
        singular = [i for i, m in enumerate(lus) if self._n and not np.all(np.diagonal(m))]
        self._clear_derived()
        self._state = (lus, list(pivs.reshape((len(lus), self._n))), False, singular)

    # -- phases ------------------------------------------------------------------------------

    def _bind(self, prepared: Prepared) -> Callable[[], "LU"]:
        getrf, transpose = prepared.state["getrf"], prepared.state["transpose"]
        a, overwrite = self._a, self._overwrite

        def factor() -> "LU":
            mats = stack_of(a)
            lus, pivs, singular = [], [], []
            transposed = False
            for i in range(mats.shape[0] if a.shape[-1] else 0):
                view, transposed = fortran_view(mats[i], transpose)
                lu, piv, info = getrf(view, overwrite_a=overwrite)
                lus.append(lu)
                pivs.append(piv)
                if info > 0:
                    singular.append(i)
            self.factorizations += 1
            if not a.shape[-1]:  # 0 x 0 matrices: nothing to factor
                lus = [np.empty((0, 0), a.dtype, order="F")] * mats.shape[0]
                pivs = [np.empty(0, np.int32)] * mats.shape[0]
            self._state = (lus, pivs, transposed, singular)
            self._solve = None
            return self

        return factor

    def _timing_call(self, prepared: Prepared) -> Callable[[], Any]:
        getrf, transpose = prepared.state["getrf"], prepared.state["transpose"]
        mats = stack_of(self._a)
        return lambda: [getrf(fortran_view(m, transpose)[0]) for m in mats if m.size]

    def execute(self) -> "LU":
        """Factor the current ``a``; returns the plan (for chaining ``.solve``)."""
        return self._run()

    # -- using the factors ---------------------------------------------------------------------

    @with_threads
    def solve(self, b: Any, trans: Any = 0) -> Any:
        """Solve ``A x = b`` (``trans=0``), ``A.T x = b`` (1) or ``A.conj().T x = b`` (2).

        ``b`` is ``(n,)`` or ``(..., n, k)`` (NumPy 2 rules), broadcast against the batch.
        Raises :class:`~numpy.linalg.LinAlgError` naming the batch element if a matrix is
        exactly singular.
        """
        solve = self._solve
        if solve is None:
            solve = self._solve = self._make_solver()
        return solve(b, trans)

    def _make_solver(self) -> Callable[..., Any]:
        lus, pivs, transposed, singular = self._computed()
        getrs = self._prepared.state["getrs"]
        complex_ = self._a.dtype.kind == "c"

        def solve_one(i: int, b2: np.ndarray, trans: int) -> np.ndarray:
            if not transposed:
                return getrs(lus[i], pivs[i], b2, trans)[0]
            if trans == 2 and complex_:  # A^H x = b  <=>  M conj(x) = conj(b), M = A^T
                return getrs(lus[i], pivs[i], b2.conj(), 0)[0].conj()
            return getrs(lus[i], pivs[i], b2, 0 if trans else 1)[0]

        fast = None
        if not self._batch:
            lu0, piv0, t0 = lus[0], pivs[0], 1 if transposed else 0
            fast = one_call_solve("lu_solve", lu0, piv0, t0, library=functools.partial(getrs, lu0, piv0, trans=t0))
        return solver_closure(solve_one, self._n, self._batch, self._a.dtype, singular, self._to_caller, "matrix", fast)

    def _diagonals(self) -> tuple[np.ndarray, np.ndarray]:
        lus, pivs, _, _ = self._computed()
        diag = np.array([np.diagonal(lu) for lu in lus]).reshape((len(lus), self._n))
        swaps = np.array([np.count_nonzero(p != np.arange(self._n)) for p in pivs])
        return diag, swaps

    @alive
    def det(self) -> Any:
        """The determinant(s), from the factors (no refactorization)."""
        diag, swaps = self._diagonals()
        det = np.prod(diag, axis=-1) * np.where(swaps % 2, -1, 1)
        det = det.astype(self._a.dtype)
        return self._to_caller(det.reshape(self._batch) if self._batch else det[0])

    @alive
    def slogdet(self) -> tuple[Any, Any]:
        """``(sign, logabsdet)`` of the determinant(s), safe from overflow."""
        diag, swaps = self._diagonals()
        absd = np.abs(diag)
        with np.errstate(divide="ignore"):
            logabs = np.sum(np.log(absd), axis=-1)
        unit = np.where(absd == 0, 0, diag / np.where(absd == 0, 1, absd))
        sign = np.prod(unit, axis=-1) * np.where(swaps % 2, -1, 1)
        sign = np.where(np.any(absd == 0, axis=-1), 0, sign).astype(self._a.dtype)
        logabs = np.where(np.any(absd == 0, axis=-1), -np.inf, logabs).astype(absd.dtype)
        if not self._batch:
            return self._to_caller(sign[0]), self._to_caller(logabs[0])
        return self._to_caller(sign.reshape(self._batch)), self._to_caller(logabs.reshape(self._batch))

    @property
    @alive
    def factors(self) -> tuple[Any, Any]:
        """``(lu, piv)`` in LAPACK's form for ``A`` itself (as ``scipy.linalg.lu_factor``
        returns them: ``piv`` 0-based int32). Where the plan factored the transposed view
        of a C-ordered ``A``, this costs one extra factorization of a Fortran copy."""
        lus, pivs, transposed, _ = self._computed()
        if transposed and self._overwrite:
            raise InvalidOperandError(
                "LU.factors: a was overwritten with the factors of its transpose (overwrite_a=True with a "
                "C-ordered a), so the factors of a itself cannot be formed; solve() and det() work, or plan "
                "without overwrite_a or with a Fortran-ordered a"
            )
        if transposed:
            getrf = self._prepared.state["getrf"]
            mats = stack_of(self._a)
            pairs = [getrf(np.asfortranarray(m))[:2] for m in mats]
            lus, pivs = [p[0] for p in pairs], [p[1] for p in pairs]
        if not lus:  # an empty batch
            lus, pivs = [stand_in(self._a)], [np.zeros(self._n, np.int32)]
        return self._to_caller(stack_factors(lus, self._batch)), self._to_caller(stack_factors(pivs, self._batch))

    @property
    @alive
    def singular(self) -> list:
        """Batch elements (flat index, or index tuple) whose ``U`` has an exact zero pivot."""
        return [batch_index(i, self._batch) for i in self._computed()[3]]
