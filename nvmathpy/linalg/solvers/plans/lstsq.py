"""The Lstsq plan: minimum-norm least-squares solutions of ``A x = b``.

Candidates: ``svd`` factors ``A`` once (``gesdd``) and solves each right-hand side with two
matrix products (factor once, solve many); ``gelsd`` and ``gelsy`` call the LAPACK driver per
solve (``gelsy``, a complete orthogonal factorization, is the fastest driver; the singular
values that the result reports are then computed once by ``gesdd`` without vectors). All
three give the same solution to rounding for a given ``rcond``; the rank always counts the
singular values above ``rcond * s_max`` (NumPy's rule).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ....errors import LinAlgError
from ....plan import Candidate, Prepared, Problem
from ._base import SolverPlan, with_threads
from ..cpu._engine import CPULapackEngine
from ..cpu._factored import stack_factors
from ..cpu._lapack import lwork_of, routine
from .._operands import as_rhs, as_stack, batch_index, host_arrays, stack_of

__all__ = ["Lstsq", "cutoff"]


def cutoff(rcond: float | None, dtype: np.dtype, m: int, n: int) -> float:
    """The relative cutoff of singular values for an ``m x n`` matrix of ``dtype``: ``rcond``,
    or machine epsilon times ``max(m, n)`` where it is ``None`` or negative (NumPy's rule)."""
    return float(np.finfo(dtype).eps * max(m, n) if rcond is None or rcond < 0 else rcond)


def svd_solution(u: np.ndarray, s: np.ndarray, vh: np.ndarray, b2: np.ndarray, rcond: float) -> tuple[np.ndarray, int]:
    """The minimum-norm least-squares solution of ``A x = b2`` from ``A``'s thin SVD ``u, s,
    vh`` (``s`` descending, not empty), and the rank: the singular values above ``rcond *
    s[0]``."""
    rank = int(np.count_nonzero(s > rcond * s[0]))
    uh, v = u[:, :rank].T, vh[:rank].T
    if uh.dtype.kind == "c":
        uh, v = uh.conj(), v.conj()
    coef = uh @ b2
    coef /= s[:rank, None]
    return v @ coef, rank


def squared_residuals(a: np.ndarray, b2: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The squared 2-norm of each column of ``b2 - a @ x``."""
    return np.sum(np.abs(b2 - a @ x) ** 2, axis=0)


def _candidates(problem: Problem) -> list[Candidate]:
    return [Candidate.of("svd"), Candidate.of("gelsy"), Candidate.of("gelsd")]


def _setup(problem: Problem, candidate: Candidate) -> dict[str, Any]:
    dtype = problem.get("dtype")
    return {
        "gesdd": routine("gesdd", dtype),
        "driver": routine(candidate.label, dtype) if candidate.label != "svd" else None,
        "driver_lwork": routine(candidate.label + "_lwork", dtype) if candidate.label != "svd" else None,
        "lworks": {},
    }


class Lstsq(SolverPlan):
    """Least squares: minimise ``||b - A x||_2`` (minimum-norm ``x`` when rank deficient).

    Parameters
    ----------
    a
        ``(..., m, n)`` array.
    rcond
        Singular values ``<= rcond * s_max`` count as zero. ``None`` (default):
        machine epsilon times ``max(m, n)`` (NumPy's default).
    execution
        Where the plan runs: see :class:`~nvmathpy.linalg.solvers.plans._base.SolverPlan`.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg import Lstsq
    >>> a = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]])
    >>> x, residuals, rank, s = Lstsq(a).solve(np.array([1.0, 2.0, 2.0]))
    >>> np.round(x, 6), int(rank)
    (array([1.166667, 0.5     ]), 2)
    """

    cpu_engine = CPULapackEngine("lstsq", _candidates, _setup)

    def __init__(self, a: Any, /, *, rcond: float | None = None, execution: Any = None):
        super().__init__(execution, a=a)
        self._a = as_stack(self._arrays.pop("a"), "a", square=False)
        self._batch = self._a.shape[:-2]
        m, n = self._a.shape[-2:]
        self._rcond = cutoff(rcond, self._a.dtype, m, n)
        self._problem = Problem.of(
            "lstsq", shape=[m, n], batch=list(self._batch), dtype=self._a.dtype.name, rcond=self._rcond,
            **self._threads_field(),
        )

    def _bind(self, prepared: Prepared) -> Callable[[], "Lstsq"]:
        gesdd, label = prepared.state["gesdd"], prepared.candidate.label
        a = self._a
        m, n = a.shape[-2:]

        def factor() -> "Lstsq":
            mats = stack_of(a)
            parts = []
            for i in range(mats.shape[0]):
                if min(m, n) == 0:
                    parts.append((None, np.empty(0, np.finfo(a.dtype).dtype), None, mats[i]))
                    continue
                # NaN/Inf: NumPy's error, before LAPACK (whose SVD would give s = NaN, hence rank 0, x = 0)
                finite = bool(np.isfinite(mats[i]).all())
                u, s, vh, info = gesdd(mats[i], compute_uv=int(label == "svd"), full_matrices=0) if finite else (0,) * 4
                if not finite or info > 0:
                    where = f" (batch element {batch_index(i, self._batch)})" if self._batch else ""
                    why = "" if finite else ": a holds NaN or infinity"
                    raise LinAlgError(f"SVD did not converge in linear least squares{where}{why}")
                parts.append((u, s, vh, mats[i]) if label == "svd" else (None, s, None, mats[i]))
            self.factorizations += 1
            self._state = parts
            return self

        return factor

    def _timing_call(self, prepared: Prepared) -> Callable[[], Any]:
        factor = self._bind(prepared)
        b = np.random.default_rng(0).standard_normal(self._a.shape[-2]).astype(self._a.dtype)
        solve_one = self._solver(prepared)

        def run() -> None:
            factor()
            for i in range(len(self._state)):
                solve_one(i, b[:, None])

        return run

    def execute(self) -> "Lstsq":
        """Factor the current ``a`` (what the chosen candidate needs); returns the plan."""
        return self._run()

    def _solver(self, prepared: Prepared) -> Callable[[int, np.ndarray], tuple]:
        label, state = prepared.candidate.label, prepared.state
        driver, driver_lwork, lworks = state["driver"], state["driver_lwork"], state["lworks"]
        m, n = self._a.shape[-2:]
        rcond, dtype = self._rcond, self._a.dtype
        complex_ = dtype.kind == "c"

        def solve_one(i: int, b2: np.ndarray) -> tuple:
            u, s, vh, mat = self._state[i]
            k = b2.shape[1]
            if min(m, n) == 0:
                return np.zeros((n, k), dtype), 0, s
            if label == "svd":
                return (*svd_solution(u, s, vh, b2, rcond), s)
            rank = int(np.count_nonzero(s > rcond * s[0]))
            padded = np.zeros((max(m, n), k), dtype, order="F")
            padded[:m] = b2
            if k not in lworks:
                lworks[k] = driver_lwork(m, n, k, rcond)
            work = lworks[k]
            if label == "gelsy":
                x, info = driver(mat, padded, np.zeros((n, 1), np.int32), rcond, lwork_of(work))[1::3]
            elif complex_:
                x, _, _, info = driver(mat, padded, lwork_of(work), lwork_of(work[1]), lwork_of(work[2]), rcond)
            else:
                x, _, _, info = driver(mat, padded, lwork_of(work), lwork_of(work[1]), rcond)
            if info > 0:
                raise LinAlgError("SVD did not converge in linear least squares")
            return x[:n], rank, s

        return solve_one

    @with_threads
    def solve(self, b: Any) -> tuple[Any, Any, Any, Any]:
        """Solve for ``b`` (``(m,)`` or ``(..., m, k)``); returns ``(x, residuals, rank, s)``
        with NumPy's conventions: ``residuals`` holds the squared 2-norms of ``b - A x`` per
        column when every matrix has full column rank and ``m > n``, else is empty."""
        self._computed()
        solve_one = self._solver(self._prepared)
        arrays, _, _ = host_arrays(None, b=b)
        m, n = self._a.shape[-2:]
        b3, vector = as_rhs(arrays["b"], m, self._batch, self._a.dtype)
        flat = stack_of(b3)
        xs, ranks, ss = [], [], []
        for i in range(flat.shape[0]):
            x, rank, s = solve_one(i, flat[i])
            xs.append(x)
            ranks.append(rank)
            ss.append(s)
        real = np.finfo(self._a.dtype).dtype
        if not xs:  # an empty batch: stand-ins give the empty results their shapes
            xs, ss = [np.zeros((n, flat.shape[-1]), self._a.dtype)], [np.zeros(min(m, n), real)]
        full_rank = m > n and bool(ranks) and all(r == n for r in ranks)
        mats = stack_of(self._a)
        if full_rank:
            res = [squared_residuals(mats[i], flat[i], xs[i]) for i in range(len(xs))]
        else:
            res = [np.empty(0, real) for _ in xs]
        batch = self._batch
        x = stack_factors(xs, batch)
        rank = np.array(ranks, np.int32).reshape(batch) if batch else np.int32(ranks[0])
        out = (x[..., 0] if vector else x, stack_factors(res, batch), rank, stack_factors(ss, batch))
        return self._to_caller(out)
