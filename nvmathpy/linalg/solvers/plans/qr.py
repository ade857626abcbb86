"""The QR plan: ``A = Q R`` (optionally with column pivoting, ``A P = Q R``) by ``geqrf`` /
``geqp3`` and ``orgqr``/``ungqr``, and least-squares solves with the stored factors
(``ormqr``/``unmqr`` then ``trtrs``): factor once, solve many.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from ....errors import InvalidOperandError, InvalidOptionError, LinAlgError
from ....plan import Candidate, Prepared, Problem
from ....plan.options import check_choice
from ._base import SolverPlan, alive, with_threads
from ..cpu._engine import CPULapackEngine
from ..cpu._factored import solver_closure, stack_factors
from ..cpu._lapack import lwork_of, routine
from .._operands import as_stack, layout_of, stack_of, stand_in

__all__ = ["QR", "QRResult"]

MODES = ("reduced", "complete", "r")


class QRResult(NamedTuple):
    """``Q``, ``R`` as :func:`numpy.linalg.qr` names them."""

    Q: Any
    R: Any


def _candidates(problem: Problem) -> list[Candidate]:
    return [Candidate.of("geqp3" if problem.get("pivoting") else "geqrf")]


def _setup(problem: Problem, candidate: Candidate) -> dict[str, Any]:
    dtype, (m, n) = problem.get("dtype"), problem.get("shape")
    factor = routine(candidate.label, dtype)
    lwork = lwork_of(factor(np.empty((m, n), dtype, order="F"), lwork=-1)[-2]) if m and n else 1
    orgqr = routine("orgqr", dtype)
    cols = m if problem.get("mode") == "complete" else min(m, n)
    q_lwork = lwork_of(orgqr(np.empty((m, cols), dtype, order="F"), np.empty(min(m, n), dtype), lwork=-1)[1]) \
        if m and cols else 1
    return {
        "factor": factor, "lwork": lwork, "orgqr": orgqr, "q_lwork": q_lwork,
        "ormqr": routine("ormqr", dtype), "trtrs": routine("trtrs", dtype),
    }


class QR(SolverPlan):
    """QR decomposition of ``(..., m, n)`` matrices, and least squares with the factors.

    Parameters
    ----------
    a
        ``(..., m, n)`` array.
    mode
        ``"reduced"`` (``Q`` is ``(m, k)``, ``R`` ``(k, n)``, ``k = min(m, n)``),
        ``"complete"`` (``Q`` ``(m, m)``, ``R`` ``(m, n)``) or ``"r"`` (``R`` only, ``(k, n)``).
    pivoting
        Column pivoting (``geqp3``): ``A[:, p] = Q R`` with ``|diag(R)|`` decreasing.
    execution
        Where the plan runs: see :class:`~nvmathpy.linalg.solvers.plans._base.SolverPlan`.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg import QR
    >>> a = np.array([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    >>> qr = QR(a)
    >>> bool(np.allclose(qr.q @ qr.r, a))
    True
    >>> x = qr.solve(np.array([1.0, 2.0, 4.0]))   # least squares: the best line through the points
    >>> np.round(x, 12)
    array([-0.66666667,  1.5       ])
    """

    cpu_engine = CPULapackEngine("qr", _candidates, _setup)

    def __init__(self, a: Any, /, *, mode: str = "reduced", pivoting: bool = False, overwrite_a: bool = False,
                 execution: Any = None):
        check_choice("QR", "mode", mode, MODES)
        super().__init__(execution, a=a)
        self._a = as_stack(self._arrays.pop("a"), "a", square=False)
        self._mode, self._pivoting, self._overwrite = mode, bool(pivoting), bool(overwrite_a)
        self._batch = self._a.shape[:-2]
        self._problem = Problem.of(
            "qr", shape=list(self._a.shape[-2:]), batch=list(self._batch), dtype=self._a.dtype.name,
            layout=layout_of(self._a), mode=mode, pivoting=self._pivoting,
            **self._threads_field(),
        )

    def _bind(self, prepared: Prepared) -> Callable[[], Any]:
        st = prepared.state
        factor, lwork, orgqr, q_lwork = st["factor"], st["lwork"], st["orgqr"], st["q_lwork"]
        a, batch, mode, pivoting = self._a, self._batch, self._mode, self._pivoting
        m, n = a.shape[-2:]
        k = min(m, n)

        def one(mat: np.ndarray) -> tuple:
            if k == 0:
                qr, tau, perm = np.zeros((m, n), a.dtype, order="F"), np.empty(0, a.dtype), np.arange(n, dtype=np.int32)
            elif pivoting:
                qr, jpvt, tau, _, _ = factor(mat, lwork=lwork, overwrite_a=self._overwrite)
                perm = (jpvt - 1).astype(np.int32)
            else:
                qr, tau, _, _ = factor(mat, lwork=lwork, overwrite_a=self._overwrite)
                perm = None
            r = np.triu(qr if mode == "complete" else qr[:k])
            q = None
            if mode != "r":
                if mode == "complete" and m > n:  # orgqr may scribble on a private copy only
                    square = np.empty((m, m), a.dtype, order="F")
                    square[:, :n] = qr
                    base, scratch = square, 1
                else:
                    base, scratch = qr[:, :k], 0
                if k:
                    q = orgqr(base, tau, lwork=q_lwork, overwrite_a=scratch)[0]
                else:
                    q = np.eye(m, dtype=a.dtype)[:, : base.shape[1]]
            return qr, tau, perm, q, r

        def compute() -> Any:
            mats = stack_of(a)
            parts = [one(mats[i]) for i in range(mats.shape[0])]
            self.factorizations += 1
            self._state = parts
            self._solve = None
            shaped = parts or [one(stand_in(a))]
            r = stack_factors([p[4] for p in shaped], batch)
            p = stack_factors([p[2] for p in shaped], batch) if pivoting else None
            if mode == "r":
                result = r if not pivoting else (r, p)
            else:
                q = stack_factors([p_[3] for p_ in shaped], batch)
                result = QRResult(q, r) if not pivoting else (q, r, p)
            self._result = result
            return self._to_caller(result)

        return compute

    def execute(self) -> Any:
        """Decompose the current ``a``: ``(Q, R)`` (``R`` for mode ``"r"``), plus ``P`` when pivoting."""
        return self._run()

    def _computed(self) -> Any:
        super()._computed()
        return self._result

    @property
    @alive
    def q(self) -> Any:
        """``Q`` (not available in mode ``"r"``)."""
        if self._mode == "r":
            raise InvalidOptionError("QR: q is not computed in mode 'r'")
        return self._to_caller(self._computed()[0])

    @property
    @alive
    def r(self) -> Any:
        """``R``."""
        result = self._computed()
        if self._mode == "r":
            return self._to_caller(result[0] if self._pivoting else result)
        return self._to_caller(result[1])

    @property
    @alive
    def p(self) -> Any:
        """The column permutation (0-based) when pivoting, else ``None``."""
        if not self._pivoting:
            return None
        return self._to_caller(self._computed()[-1])

    @with_threads
    def solve(self, b: Any) -> Any:
        """Least-squares solution of ``A x = b`` for full-column-rank ``A`` with ``m >= n``.

        Raises :class:`~numpy.linalg.LinAlgError` if ``R`` is exactly singular (rank
        deficient ``A``: use :class:`Lstsq`).
        """
        solve = self._solve
        if solve is None:
            solve = self._solve = self._make_solver()
        return solve(b, 0)

    def _make_solver(self) -> Callable[..., Any]:
        m, n = self._a.shape[-2:]
        if m < n:
            raise InvalidOperandError(
                f"QR.solve needs m >= n (got a {m}x{n} matrix); use Lstsq for underdetermined systems"
            )
        self._computed()
        ormqr, trtrs = self._prepared.state["ormqr"], self._prepared.state["trtrs"]
        parts = self._state
        dtype = self._a.dtype
        herm = "C" if dtype.kind == "c" else "T"

        def solve_one(i: int, b2: np.ndarray, trans: int) -> np.ndarray:  # holds no plan: no cycle
            qr, tau, perm = parts[i][0], parts[i][1], parts[i][2]
            if n == 0:
                return np.zeros((0, b2.shape[1]), dtype)
            c = ormqr("L", herm, qr[:, :n], tau, np.array(b2, order="F"), max(1, b2.shape[1]) * 64)[0]
            x, info = trtrs(qr, c[:n], lower=0)[:2] if qr.shape[0] == n else trtrs(qr[:n], c[:n], lower=0)[:2]
            if info > 0:
                raise LinAlgError(f"R is singular (diagonal {info - 1} is zero): a is rank deficient; use Lstsq")
            if perm is not None:
                out = np.empty_like(x)
                out[perm] = x
                return out
            return x

        return solver_closure(solve_one, m, self._batch, dtype, [], self._to_caller, "matrix", None, rows=n)
