"""The SVD plan: ``A = U diag(s) Vh`` of one matrix or a batch, by ``gesdd`` (divide and
conquer) or ``gesvd`` (QR iteration), chosen by measurement.

A C-ordered ``A`` is decomposed through its free Fortran view ``A.T = V s U^T``, and the
factors are returned transposed (still views): no copy of ``A`` is made.

:func:`svd_matrix` is the plan's computation for one matrix with a forced driver, without a
plan: what the one-call :func:`~nvmathpy.linalg.svd` runs on a single NumPy matrix, where a
plan's bookkeeping would cost more than LAPACK does on small matrices.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import numpy as np

from ....errors import InvalidOperandError, LinAlgError
from ....plan import Candidate, Prepared, Problem
from ....plan.options import check_choice
from ._base import SolverPlan
from ..cpu._engine import CPULapackEngine
from ..cpu._factored import stack_factors
from ..cpu._lapack import lwork_of, routine
from .._operands import as_stack, batch_index, fortran_view, layout_of, stack_of, stand_in

__all__ = ["SVD", "SVDResult", "svd_matrix"]

_INT32_MAX = 2**31 - 1


class SVDResult(NamedTuple):
    """``U``, ``S``, ``Vh`` as :func:`numpy.linalg.svd` names them."""

    U: Any
    S: Any
    Vh: Any


def _candidates(problem: Problem) -> list[Candidate]:
    if problem.get("driver"):
        return [Candidate.of(problem.get("driver"))]
    return [Candidate.of("gesdd"), Candidate.of("gesvd")]


@functools.lru_cache(maxsize=256)
def _lapack(driver: str, dtype: np.dtype, m: int, n: int, uv: int, full: int) -> tuple[Callable[..., Any], int]:
    """The LAPACK routine ``driver`` and its workspace size for ``(m, n)`` matrices of ``dtype``;
    ``ValueError`` where a factor would have more entries than LAPACK's 32-bit indices reach."""
    if uv:
        k = min(m, n)
        entries = max(m, n) ** 2 if full else max(m, n) * k
        if entries > _INT32_MAX:
            raise InvalidOperandError(f"a: shape ({m}, {n}) gives singular-vector factors of {entries} entries, "
                                      f"more than LAPACK's 32-bit indexing reaches ({_INT32_MAX})")
    dtype_name = dtype.name
    lwork = lwork_of(routine(driver + "_lwork", dtype_name)(m, n, uv, full)) if min(m, n) else 1
    return routine(driver, dtype_name), lwork


def _setup(problem: Problem, candidate: Candidate) -> dict[str, Any]:
    dtype, (m, n) = np.dtype(problem.get("dtype")), problem.get("shape")
    uv, full = int(problem.get("compute_uv")), int(problem.get("full_matrices"))
    # Either orientation may run (C-ordered operands are decomposed transposed), so size for both.
    fn, lwork = _lapack(candidate.label, dtype, m, n, uv, full)
    return {"fn": fn, "lwork": max(lwork, _lapack(candidate.label, dtype, n, m, uv, full)[1])}


def _decompose(fn: Callable[..., Any], lwork: int, mat: np.ndarray, transpose: bool, uv: int, full: int,
               overwrite: bool, label: str, where: Callable[[], str]) -> tuple:
    """``(u, s, vh)`` of one matrix ``mat`` by the LAPACK routine ``fn`` (named ``label``),
    through its transposed view when ``transpose`` and C-ordered; ``where()`` names it in errors."""
    m, n = mat.shape
    if min(m, n) == 0:
        eye = np.eye(max(m, n), dtype=mat.dtype)
        return (eye[:m, : (m if full else 0)], np.empty(0, np.finfo(mat.dtype).dtype),
                eye[: (n if full else 0), :n])
    view, transposed = fortran_view(mat, transpose)
    u, s, vt, info = fn(view, uv, full, lwork, overwrite)
    if info > 0 or info < 0 and not np.isfinite(mat).all():  # LAPACK's answer to NaN/Inf: info < 0
        why = "" if info > 0 else ": a holds NaN or infinity"
        raise LinAlgError(f"SVD did not converge{where()}{why}")
    if info < 0:
        raise LinAlgError(f"{label}: illegal value in argument {-info}")
    return (vt.T, s, u.T) if transposed else (u, s, vt)


def _nowhere() -> str:
    return ""


def svd_matrix(a: np.ndarray, full_matrices: bool, compute_uv: bool, driver: str) -> Any:
    """The SVD of one matrix ``a`` (a non-empty 2-D NumPy array of a LAPACK dtype) by ``driver``
    (``"gesdd"`` or ``"gesvd"``), as :class:`SVD` computes it, without a plan: ``SVDResult``,
    or the singular values alone when not ``compute_uv``.

    Examples
    --------
    >>> import numpy as np
    >>> svd_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]), False, False, "gesdd")
    array([2., 1.])
    """
    uv, full = int(compute_uv), int(full_matrices)
    m, n = a.shape
    transposed = a.flags.c_contiguous and not a.flags.f_contiguous  # LAPACK gets the (n, m) view
    fn, lwork = _lapack(driver, a.dtype, *((n, m) if transposed else (m, n)), uv, full)
    u, s, vh = _decompose(fn, lwork, a, a.flags.c_contiguous, uv, full, False, driver, _nowhere)
    return SVDResult(u, s, vh) if uv else s


class SVD(SolverPlan):
    """Singular value decomposition of ``(..., m, n)`` matrices.

    Parameters
    ----------
    a
        ``(..., m, n)`` array.
    full_matrices
        ``U`` is ``(m, m)`` and ``Vh`` ``(n, n)`` when True; ``(m, k)`` and ``(k, n)``
        with ``k = min(m, n)`` when False (default).
    compute_uv
        Compute ``U`` and ``Vh`` (default) or only the singular values.
    driver
        Force ``"gesdd"`` or ``"gesvd"``; ``None`` lets wisdom/autotune/heuristic choose.
    execution
        Where the plan runs: see :class:`~nvmathpy.linalg.solvers.plans._base.SolverPlan`.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg import SVD
    >>> a = np.array([[3.0, 0.0], [0.0, -2.0], [0.0, 0.0]])
    >>> u, s, vh = SVD(a).plan().execute()
    >>> s
    array([3., 2.])
    >>> bool(np.allclose(u * s @ vh, a))
    True
    """

    cpu_engine = CPULapackEngine("svd", _candidates, _setup)

    def __init__(
        self, a: Any, /, *, full_matrices: bool = False, compute_uv: bool = True, driver: str | None = None,
        overwrite_a: bool = False, execution: Any = None,
    ):
        if driver is not None:
            check_choice("SVD", "driver", driver, ("gesdd", "gesvd"))
        super().__init__(execution, a=a)
        self._a = as_stack(self._arrays.pop("a"), "a", square=False)
        self._full, self._uv, self._overwrite = bool(full_matrices), bool(compute_uv), bool(overwrite_a)
        self._batch = self._a.shape[:-2]
        self._problem = Problem.of(
            "svd", shape=list(self._a.shape[-2:]), batch=list(self._batch), dtype=self._a.dtype.name,
            layout=layout_of(self._a), full_matrices=self._full, compute_uv=self._uv, driver=driver,
            **self._threads_field(),
        )

    def _computation(self, prepared: Prepared) -> Callable[[], Any]:
        fn, lwork = prepared.state["fn"], prepared.state["lwork"]
        a, batch, uv, full, overwrite = self._a, self._batch, self._uv, self._full, self._overwrite
        transpose = self._problem.get("layout") == "C"

        label = prepared.candidate.label

        def one(mat: np.ndarray, i: int) -> tuple:
            return _decompose(fn, lwork, mat, transpose, uv, int(full), overwrite, label,
                              lambda: f" (batch element {batch_index(i, batch)})" if batch else "")

        def compute() -> Any:
            mats = stack_of(a)
            parts = [one(mats[i], i) for i in range(mats.shape[0])] or [one(stand_in(a), 0)]
            self.factorizations += 1
            s = stack_factors([p[1] for p in parts], batch)
            if not uv:
                return s
            u = stack_factors([p[0] for p in parts], batch)
            return SVDResult(u, s, stack_factors([p[2] for p in parts], batch))

        return compute
