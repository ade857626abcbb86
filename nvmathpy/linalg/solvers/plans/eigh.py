"""The Eigh plan: eigenvalues (and eigenvectors) of Hermitian matrices, standard or
generalized, all of them or a subset, with the LAPACK driver chosen by measurement.

Candidates are the divide-and-conquer (``evd``), relatively robust representations
(``evr``), expert (``evx``) and QR-iteration (``ev``) drivers of SciPy's LAPACK, NumPy's own
``eigh`` (``numpy``: ``?syevd`` of the OpenBLAS NumPy ships, a build that may differ),
``blocked_evd`` (divide and conquer on NumPy's OpenBLAS with the reduction's reflectors
applied in large blocks, :mod:`..cpu._blocked_eigh`; first from order :data:`BLOCKED_FROM`, or
where this machine's calibration says, :mod:`..cpu._calibrate`), and
for generalized problems ``gvd`` / ``gvx`` / ``gv``; they agree to rounding, so autotune may
take the fastest (``evd`` beats SciPy's default ``evr`` at n = 1024 on this class of machine,
``blocked_evd`` beats ``evd``). A C-ordered Hermitian ``A`` is read through its Fortran view
``conj(A)`` with the other triangle; the eigenvectors come back conjugated accordingly,
without copying ``A``.

:func:`eigh_matrix` is ``?syevd`` / ``?heevd`` on one small matrix without a plan: what the
one-call :func:`~nvmathpy.linalg.eigh` runs on a single small NumPy matrix, where a plan's
bookkeeping would cost more than LAPACK does.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ....errors import InvalidOperandError, InvalidOptionError, LinAlgError
from ....plan import Candidate, Prepared, Problem
from ..cpu import _numpy_lapack as numpy_lapack
from ._base import SolverPlan
from ..cpu._blocked_eigh import blocked_eigh, blocked_eigh_available
from ..cpu._calibrate import reorder
from ..cpu._engine import CPULapackEngine
from ..cpu._factored import stack_factors
from ..cpu._lapack import lwork_of, routine
from .._operands import as_stack, batch_index, fortran_view, layout_of, stack_of, stand_in

__all__ = ["BLOCKED_FROM", "DIRECT_UP_TO", "Eigh", "eigh_matrix"]

#: From this order on, all eigenvalues of a standard problem try ``blocked_evd`` first: its
#: gain over ``?syevd`` grows with the order, and for small matrices its extra calls cost more
#: than the back-transformation saves.
BLOCKED_FROM = 512

#: Up to this order, the one-call functions run one NumPy matrix through :func:`eigh_matrix`.
DIRECT_UP_TO = 64


def _candidates(problem: Problem) -> list[Candidate]:
    if problem.get("driver"):
        return [Candidate.of(problem.get("driver"))]
    subset = problem.get("subset")
    if problem.get("generalized"):
        labels = ["gvx", "gvd"] if subset != "all" else ["gvd", "gv", "gvx"]
    elif subset != "all":
        labels = ["evr", "evx", "evd"]
    elif problem.get("n") <= 32:
        labels = ["ev", "evd", "evr", "evx", "numpy"]
    elif numpy_lapack.suits(problem.get("n"), problem.get("dtype")):  # the same ?syevd, on NumPy's thread pool
        labels = ["numpy", "evd", "evr", "ev", "evx"]
        if blocked_eigh_available(problem.get("dtype")):
            labels.insert(0 if problem.get("n") >= BLOCKED_FROM else 2, "blocked_evd")
        if problem.get("vectors") and not problem.get("batch"):  # as calibrated: one matrix, with vectors
            labels = reorder("eigh", problem.get("n"), problem.get("dtype"), labels)
    else:
        labels = ["evd", "evr", "ev", "evx", "numpy"]
    return [Candidate.of(label) for label in labels]


_ROUTINE = {"evd": "syevd", "evr": "syevr", "ev": "syev", "evx": "syevx", "gvd": "sygvd", "gvx": "sygvx", "gv": "sygv"}


def _setup(problem: Problem, candidate: Candidate) -> dict[str, Any]:
    dtype = problem.get("dtype")
    label = candidate.label
    if label == "numpy":  # NumPy's own LAPACK (?syevd of the BLAS NumPy ships), its gufunc
        return {"fn": None, "label": label, "work": {}}
    if label == "blocked_evd":
        return {"fn": blocked_eigh(dtype), "label": label, "work": {}}
    n = problem.get("n")
    work: dict[str, int] = {}
    if label == "evd" and not problem.get("vectors") and not problem.get("generalized") and n > 0:
        # f2py's default workspace for eigenvalues only is too small for a blocked ?sytrd,
        # and the unblocked reduction is much slower
        work["lwork"] = lwork_of(routine("syevd_lwork", dtype)(n, compute_v=0))
    if label in ("evr", "ev", "evx", "gvx", "gv") and n > 0:
        query = routine(_ROUTINE[label] + "_lwork", dtype)(n)
        work["lwork"] = lwork_of(query)
        if label == "evr":
            if dtype.startswith("complex"):
                work["lrwork"], work["liwork"] = lwork_of(query[1]), lwork_of(query[2])
            else:
                work["liwork"] = lwork_of(query[1])
    return {"fn": routine(_ROUTINE[label], dtype), "label": label, "work": work}


@functools.lru_cache(maxsize=256)
def _evd(dtype: np.dtype, n: int, vectors: bool) -> tuple[Callable[..., Any], dict[str, int]]:
    """``?syevd`` / ``?heevd`` for ``dtype`` and the workspace it needs at order ``n``."""
    name = dtype.name
    work = {} if vectors else {"lwork": lwork_of(routine("syevd_lwork", name)(n, compute_v=0))}
    return routine("syevd", name), work


def eigh_matrix(a: np.ndarray, lower: bool, vectors: bool) -> Any:
    """All eigenvalues (ascending), and the eigenvectors when ``vectors``, of one non-empty
    Hermitian matrix ``a`` (a 2-D NumPy array of a LAPACK dtype) reading triangle ``lower``,
    by divide and conquer as the plan's ``evd`` driver, without a plan: ``(w, v)`` or ``w``.

    Examples
    --------
    >>> import numpy as np
    >>> eigh_matrix(np.array([[2.0, 1.0], [1.0, 2.0]]), True, False)
    array([1., 3.])
    """
    fn, work = _evd(a.dtype, a.shape[0], vectors)
    view, transposed = fortran_view(a)
    w, v, info = fn(view, compute_v=int(vectors), lower=int(lower != transposed), **work)
    if info:
        raise LinAlgError(f"eigenvalue algorithm (evd) did not converge (info={info})")
    if not vectors:
        return w
    return w, (v.conj() if transposed and a.dtype.kind == "c" else v)


def _check_subsets(subset_by_index: Any, subset_by_value: Any, n: int) -> tuple[str, list]:
    if subset_by_index is not None and subset_by_value is not None:
        raise InvalidOptionError("give subset_by_index or subset_by_value, not both")
    if subset_by_index is not None:
        try:
            lo, hi = (int(v) for v in subset_by_index)
        except (TypeError, ValueError):
            raise InvalidOptionError(f"subset_by_index={subset_by_index!r} must be two integers (lo, hi)") from None
        if not 0 <= lo <= hi < n:
            raise InvalidOptionError(f"subset_by_index={subset_by_index!r} must satisfy 0 <= lo <= hi < n={n}")
        return "index", [lo, hi]
    if subset_by_value is not None:
        try:
            lo, hi = (float(v) for v in subset_by_value)
        except (TypeError, ValueError):
            raise InvalidOptionError(f"subset_by_value={subset_by_value!r} must be two numbers (lo, hi)") from None
        if not lo < hi:
            raise InvalidOptionError(f"subset_by_value={subset_by_value!r} must satisfy lo < hi")
        return "value", [lo, hi]
    return "all", []


class Eigh(SolverPlan):
    """Eigen-decomposition of Hermitian (real symmetric) matrices, ``A v = w v``, or of the
    generalized problem ``A v = w B v`` with ``B`` Hermitian positive definite.

    Parameters
    ----------
    a
        ``(..., n, n)`` Hermitian matrices; only the triangle named by ``lower`` is read.
    b
        Optional ``(..., n, n)`` Hermitian positive definite matrices (generalized problem).
    eigvals_only
        Compute eigenvalues only.
    subset_by_index
        ``(lo, hi)``: only eigenvalues ``lo..hi`` (inclusive, 0-based, ascending order).
    subset_by_value
        ``(lo, hi)``: only eigenvalues in the half-open interval ``(lo, hi]``.
    lower
        Read the lower (default) or upper triangle.
    itype
        Generalized problem type: 1 ``A v = w B v``, 2 ``A B v = w v``, 3 ``B A v = w v``.
    driver
        Force one LAPACK driver (``"ev"``, ``"evd"``, ``"evr"``, ``"evx"``; generalized:
        ``"gv"``, ``"gvd"``, ``"gvx"``); ``None`` lets wisdom/autotune/heuristic choose.
    execution
        Where the plan runs: see :class:`~nvmathpy.linalg.solvers.plans._base.SolverPlan`.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg import Eigh
    >>> a = np.array([[2.0, 1.0], [1.0, 2.0]])
    >>> w, v = Eigh(a).plan().execute()
    >>> w
    array([1., 3.])
    >>> bool(np.allclose(a @ v, v * w))
    True
    """

    cpu_engine = CPULapackEngine("eigh", _candidates, _setup)

    def __init__(
        self,
        a: Any,
        /,
        b: Any = None,
        *,
        eigvals_only: bool = False,
        subset_by_index: Any = None,
        subset_by_value: Any = None,
        lower: bool = True,
        itype: int = 1,
        driver: str | None = None,
        overwrite_a: bool = False,
        overwrite_b: bool = False,
        execution: Any = None,
    ):
        super().__init__(execution, a=a, b=b)
        self._a = as_stack(self._arrays.pop("a"), "a")
        self._b = None
        if "b" in self._arrays:
            dtype = np.result_type(self._a.dtype, self._arrays["b"].dtype)
            self._b = as_stack(self._arrays.pop("b"), "b", dtype=np.dtype(dtype) if dtype.kind in "fc" else None)
            self._a = as_stack(self._a, "a", dtype=self._b.dtype)
            if self._b.shape != self._a.shape:
                raise InvalidOperandError(f"b: shape {self._b.shape} differs from a's shape {self._a.shape}")
        if itype not in (1, 2, 3):
            raise InvalidOptionError(f"itype={itype!r} is not allowed; allowed: 1, 2, 3")
        self._n = self._a.shape[-1]
        self._batch = self._a.shape[:-2]
        if driver is not None:
            allowed = ("gv", "gvd", "gvx") if self._b is not None else ("ev", "evd", "evr", "evx")
            if driver not in allowed:
                raise InvalidOptionError(f"driver={driver!r} is not allowed for this problem; allowed: {list(allowed)}")
        self._subset, self._bounds = _check_subsets(subset_by_index, subset_by_value, self._n)
        self._vectors = not eigvals_only
        self._lower = bool(lower)
        self._itype = int(itype)
        self._overwrite = (bool(overwrite_a), bool(overwrite_b))
        self._problem = Problem.of(
            "eigh", n=self._n, batch=list(self._batch), dtype=self._a.dtype.name, layout=layout_of(self._a),
            generalized=self._b is not None, subset=self._subset, bounds=self._bounds,
            vectors=self._vectors, lower=self._lower, itype=self._itype, driver=driver,
            **self._threads_field(),
        )

    def reset_operands(self, a: Any = None, b: Any = None) -> None:
        """Swap in new matrices of the planned shapes and dtype."""
        if b is not None and self._b is None:
            raise InvalidOperandError("reset_operands: b given but the plan was made for a standard problem")
        if a is not None:
            self._a = self._swap_in("a", a, self._a)
        if b is not None:
            self._b = self._swap_in("b", b, self._b)
        self._rebind()

    def _computation(self, prepared: Prepared) -> Callable[[], Any]:
        one = self._one_matrix(prepared)
        a, b, batch = self._a, self._b, self._batch

        def compute() -> Any:
            mats = stack_of(a)
            bmats = None if b is None else stack_of(b)
            results = []
            for i in range(mats.shape[0]):
                try:
                    results.append(one(mats[i], None if bmats is None else bmats[i]))
                except LinAlgError as exc:
                    if batch:
                        raise LinAlgError(f"{exc} (batch element {batch_index(i, batch)})") from None
                    raise
            self.factorizations += 1
            if not results:  # an empty batch: one stand-in problem gives the results' shapes
                results.append(one(stand_in(a), None if b is None else stand_in(b)))
            if batch and len({len(r[0]) for r in results}) > 1:
                raise InvalidOperandError(
                    "subset_by_value selected different numbers of eigenvalues across the batch; "
                    "solve the batch elements separately"
                )
            w = stack_factors([r[0] for r in results], batch)
            if not self._vectors:
                return w
            return w, stack_factors([r[1] for r in results], batch)

        return compute

    def _one_matrix(self, prepared: Prepared) -> Callable[[np.ndarray, np.ndarray | None], tuple]:
        fn, label, work = prepared.state["fn"], prepared.state["label"], prepared.state["work"]
        vectors, n, subset, bounds = self._vectors, self._n, self._subset, self._bounds
        complex_ = self._a.dtype.kind == "c"
        over_a, over_b = self._overwrite
        rng = {"all": "A", "index": "I", "value": "V"}[subset]
        ranged = {}
        if subset == "index":
            ranged = {"il": bounds[0] + 1, "iu": bounds[1] + 1}
        elif subset == "value":
            ranged = {"vl": bounds[0], "vu": bounds[1]}

        def select(w: np.ndarray, v: np.ndarray | None) -> tuple:
            if subset == "index":
                sl = slice(bounds[0], bounds[1] + 1)
                return w[sl], None if v is None else v[:, sl]
            if subset == "value":
                keep = (w > bounds[0]) & (w <= bounds[1])
                return w[keep], None if v is None else v[:, keep]
            return w, v

        triangle = "L" if self._lower else "U"

        def one(am: np.ndarray, bm: np.ndarray | None) -> tuple:
            if n == 0:
                return np.empty(0, np.finfo(am.dtype).dtype), np.empty((0, 0), am.dtype)
            if label == "numpy":  # standard problems, all eigenvalues (the only ones it is listed for)
                try:
                    return (tuple(numpy_lapack.numpy_linalg.eigh(am, UPLO=triangle)) if vectors
                            else (numpy_lapack.numpy_linalg.eigvalsh(am, UPLO=triangle), None))
                except np.linalg.LinAlgError:
                    raise LinAlgError("eigenvalue algorithm (numpy syevd) did not converge") from None
            if bm is None:
                view, transposed = fortran_view(am)
            elif am.flags.c_contiguous and bm.flags.c_contiguous and not am.flags.f_contiguous:
                view, bview, transposed = am.T, bm.T, True
            else:
                view, transposed = fortran_view(am, False)
                bview = fortran_view(bm, False)[0]
            low = self._lower != transposed
            if bm is None:
                if label == "blocked_evd":
                    w, v, info = fn(view, low, vectors, over_a)
                elif label in ("evr", "evx"):
                    out = fn(view, compute_v=int(vectors), range=rng, lower=int(low), overwrite_a=over_a,
                             **ranged, **work)
                    w, v, m, info = out[0], out[1], out[2], out[-1]
                    w, v = w[:m], (v[:, :m] if vectors else None)
                else:
                    w, v, info = fn(view, compute_v=int(vectors), lower=int(low), overwrite_a=over_a, **work)
                    w, v = select(w, v if vectors else None)
                if info:
                    raise LinAlgError(f"eigenvalue algorithm ({label}) did not converge (info={info})")
            else:
                uplo = "L" if low else "U"
                jobz = "V" if vectors else "N"
                if label == "gvx":
                    w, v, m, _, info = fn(view, bview, itype=self._itype, jobz=jobz, range=rng, uplo=uplo,
                                          overwrite_a=over_a, overwrite_b=over_b, **ranged, **work)
                    w, v = w[:m], (v[:, :m] if vectors else None)
                else:
                    w, v, info = fn(view, bview, itype=self._itype, jobz=jobz, uplo=uplo,
                                    overwrite_a=over_a, overwrite_b=over_b, **work)
                    w, v = select(w, v if vectors else None)
                if info > n:
                    raise LinAlgError(
                        f"The leading minor of order {info - n} of B is not positive definite. The factorization "
                        "of B could not be completed and no eigenvalues or eigenvectors were computed."
                    )
                if info:
                    raise LinAlgError(f"eigenvalue algorithm ({label}) did not converge (info={info})")
            if v is not None and transposed and complex_:
                v = v.conj()
            return w, v

        return one
