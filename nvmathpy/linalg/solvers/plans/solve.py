"""The one-shot solve / inverse plan behind :func:`solve` and :func:`inv`: ``A^{-1} B`` or
``A^{-1}`` for one matrix or a batch, with no factors kept.

Candidates (autotune picks; the heuristic order puts the usual winner first):

* ``gesv`` / ``getri`` — one LAPACK call per matrix (``gesv``; ``getrf`` + ``getri``);
* ``getrf-T`` — factor the free transposed view of a C-ordered ``A`` and solve with the
  transposed operation (no copy of ``A``; ``inv(A) = inv(A.T).T``);
* ``numpy`` — NumPy's batched gufunc (one C loop over the batch);
* ``closed-form`` (n <= 4) and ``elimination`` (n <= 4, solve only) — vectorised over the
  batch (:mod:`..cpu._small`); ill-conditioned or singular matrices fall back to pivoted LU;
* ``compiled`` (n <= 16, where a C compiler is at hand) — pivoted LU per matrix in one
  generated C loop over the batch (:mod:`..cpu._compiled`); singular matrices go to LAPACK.

Singular matrices raise :class:`~numpy.linalg.LinAlgError` naming the batch element.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ....errors import LinAlgError
from ....plan import Candidate, Prepared, Problem
from ._base import SolverPlan
from ..cpu._engine import CPULapackEngine
from ..cpu._lapack import lwork_of, routine
from ..cpu._numpy_lapack import numpy_linalg
from .._operands import as_stack, batch_index, fortran_view, flat_part, flat_view, identity, matrix_at
from ..cpu._compiled import compiled_offered, compiled_solver
from ..cpu._small import CLOSED_FORM_MAX, ELIMINATION_MAX, closed_form, eliminate

__all__ = ["Solve"]

#: Matrices per vectorised step: the working set of the closed forms stays within L2.
CHUNK = 4096


def _candidates(problem: Problem) -> list[Candidate]:
    n, count, inverse = problem.get("n"), problem.get("count"), problem.get("inverse")
    direct = ["getrf-T", "getri"] if inverse else ["gesv", "getrf-T"]
    if n >= 128:
        direct.reverse()
    labels = direct + ["numpy"]
    if count > 1:
        labels = (["closed-form"] if n <= CLOSED_FORM_MAX else []) + ["numpy"] + direct
        if compiled_offered(n, problem.get("dtype")):
            labels.insert(0, "compiled")
        if n <= ELIMINATION_MAX and not inverse:
            labels.append("elimination")
    return [Candidate.of(label) for label in labels]


def _setup(problem: Problem, candidate: Candidate) -> dict[str, Any]:
    dtype, n = problem.get("dtype"), problem.get("n")
    state: dict[str, Any] = {
        "gesv": routine("gesv", dtype), "getrf": routine("getrf", dtype), "getrs": routine("getrs", dtype),
        "getri": routine("getri", dtype),
    }
    state["lwork"] = lwork_of(routine("getri_lwork", dtype)(n)) if n else 1
    return state


class Solve(SolverPlan):
    """``A^{-1} B`` (``b`` given, ``(..., n, k)``) or ``A^{-1}`` (``b`` is None) without
    keeping factors; the engine of :func:`solve` and :func:`inv`.

    ``a`` is ``(..., n, n)``; ``b`` must already have the batch shape of ``a`` and be
    ``(..., n, k)`` (the one-call functions apply NumPy's broadcasting rules first).
    """

    cpu_engine = CPULapackEngine("solve", _candidates, _setup)
    #: Its closures read the operands on every call (the one-call fast path swaps them in
    #: without rebinding); a weak stand-in would add a forwarded lookup to each, and the
    #: plan lives in the plan cache, which frees it on eviction.
    _bind_weakly = False

    def __init__(self, a: Any, /, b: Any = None, *, execution: Any = None):
        super().__init__(execution, a=a, b=b)
        a = as_stack(self._arrays.pop("a"), "a")
        b = self._arrays.pop("b", None)
        if b is not None:
            dtype = np.result_type(a.dtype, b.dtype)
            a = as_stack(a, "a", dtype=None if dtype.kind not in "fc" else dtype)
            b = b.astype(a.dtype, copy=False)
        self._a, self._b = a, b
        n, batch = a.shape[-1], a.shape[:-2]
        self._problem = Problem.of(
            "solve", n=n, count=int(np.prod(batch, dtype=np.int64)),
            k=None if b is None else (b.shape[-1] if b.ndim > 1 else 1),
            dtype=a.dtype.name, inverse=b is None,
            **self._threads_field(),
        )

    def _set(self, a: np.ndarray, b: np.ndarray | None) -> None:
        """Swap operands already known to match the plan (the one-call path)."""
        self._a, self._b = a, b

    def reset_operands(self, a: Any = None, b: Any = None) -> None:
        """Swap in new operands of the planned shapes and dtype."""
        if a is not None:
            self._a = self._swap_in("a", a, self._a)
        if b is not None:
            self._b = self._swap_in("b", b, self._b)

    def _computation(self, prepared: Prepared) -> Callable[[], np.ndarray]:
        label = prepared.candidate.label
        state = prepared.state
        inverse = self._b is None
        loop = self._lapack_one(label, state, inverse)
        if label == "numpy":
            return self._with_index(lambda a, b: numpy_linalg.inv(a) if b is None else numpy_linalg.solve(a, b), loop)
        if label == "compiled":
            fast = compiled_solver(self._a.shape[-1], self._a.dtype.name)
            return self._looped(loop) if fast is None else self._vectorised(fast, loop)  # None: the build failed
        if label in ("closed-form", "elimination"):
            fast = closed_form if label == "closed-form" else eliminate
            return self._vectorised(fast, loop)
        return self._looped(loop)

    def _lapack_one(self, label: str, state: dict[str, Any], inverse: bool) -> Callable[..., np.ndarray]:
        """Solve (or invert) one matrix with LAPACK; raises LinAlgError('singular') on failure."""
        gesv, getrf, getrs, getri, lwork = (state[k] for k in ("gesv", "getrf", "getrs", "getri", "lwork"))
        transpose = label == "getrf-T"

        def one(m: np.ndarray, b: np.ndarray | None) -> np.ndarray:
            if m.shape[-1] == 0:
                return np.empty(m.shape if b is None else b.shape, m.dtype)
            if b is not None and label == "gesv":
                _, _, x, info = gesv(m, b)
                if info > 0:
                    raise LinAlgError("singular")
                return x
            view, transposed = fortran_view(m, transpose)
            lu, piv, info = getrf(view)
            if info > 0:
                raise LinAlgError("singular")
            if b is None:
                inv = getri(lu, piv, lwork=lwork, overwrite_lu=1)[0]
                return inv.T if transposed else inv
            return getrs(lu, piv, b, int(transposed))[0]

        return one

    @staticmethod
    def _redo(one: Callable[..., np.ndarray], a: np.ndarray, b: np.ndarray | None, out: np.ndarray,
              indices: Any) -> np.ndarray:
        """Solve the batch elements ``indices`` with LAPACK into ``out`` (flat), raising for a
        singular one with its batch index; returns ``out`` in the batch shape."""
        for i in indices:  # matrix by matrix: no flat copy of a broadcast batch
            try:
                out[i] = one(matrix_at(a, i), None if b is None else matrix_at(b, i))
            except LinAlgError:
                raise LinAlgError(f"Singular matrix (batch element {batch_index(int(i), a.shape[:-2])})") from None
        return out.reshape(a.shape if b is None else b.shape)

    def _looped(self, one: Callable[..., np.ndarray]) -> Callable[[], np.ndarray]:
        def compute() -> np.ndarray:
            a, b = self._a, self._b
            if a.ndim == 2:
                try:
                    return one(a, b)
                except LinAlgError:
                    raise LinAlgError("Singular matrix") from None
            count = int(np.prod(a.shape[:-2], dtype=np.int64))
            out = np.empty((count,) + (a.shape if b is None else b.shape)[-2:], a.dtype)
            return self._redo(one, a, b, out, range(count))

        return compute

    def _with_index(
        self, batched: Callable[..., np.ndarray], one: Callable[..., np.ndarray]
    ) -> Callable[[], np.ndarray]:
        find = self._looped(one)

        def compute() -> np.ndarray:
            try:
                return batched(self._a, self._b)
            except LinAlgError:
                find()  # raises naming the first singular batch element
                raise

        return compute

    def _vectorised(self, fast: Callable[..., tuple], one: Callable[..., np.ndarray]) -> Callable[[], np.ndarray]:
        def compute() -> np.ndarray:
            a, b = self._a, self._b
            # flat views where possible; a broadcast batch that does not flatten is gathered
            # chunk by chunk, so no copy larger than a chunk is made of what it repeats
            mats, rhs = flat_view(a), None if b is None else flat_view(b)
            count = int(np.prod(a.shape[:-2], dtype=np.int64))
            if count <= CHUNK and mats is not None and (b is None or rhs is not None):
                out, flagged = fast(mats, rhs)
            else:  # equal chunks of at most CHUNK keep each formula step's operands in cache
                shape = (count,) + (a.shape if b is None else b.shape)[-2:]
                out = np.empty(shape, a.dtype)  # b has a's dtype
                flagged = np.empty(count, bool)
                step = -(-count // -(-count // CHUNK))
                for lo in range(0, count, step):
                    hi = min(lo + step, count)
                    part_b = None if b is None else flat_part(b, rhs, lo, hi)
                    flagged[lo:hi] = fast(flat_part(a, mats, lo, hi), part_b, out[lo:hi])[1]
            return self._redo(one, a, b, out, np.flatnonzero(flagged))

        return compute

    def _bind(self, prepared: Prepared) -> Callable[[], Any]:
        compute = self._computation(prepared)
        to_caller = self._to_caller
        if to_caller is identity:
            return compute
        return lambda: to_caller(compute())
