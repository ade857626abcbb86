"""What LU and Cholesky share: looping a LAPACK factorization over a batch and solving
with the stored factors through the fastest call that is still correct.

Factors are kept per batch element as Fortran-ordered arrays together with a flag saying
whether they factor ``A`` itself or ``A.T`` (the free view of a C-ordered ``A``); the solve
maps the requested operation onto the factors accordingly.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ....errors import InvalidOptionError, LinAlgError
from ....plan import Candidate, Problem
from . import _numpy_lapack as numpy_lapack
from ._fast_lapack import MAX_ORDER as SMALL_COMPILED, fast_module
from ._lapack import routines
from ._calibrate import COVERED_FROM
from ._numpy_algorithms import ALGORITHMS, SCIPY
from ._recursive_lu import scipy_recursion_fits, scipys_getrf_or_recursion
from .._operands import as_rhs, batch_index, host_arrays, stack_of

__all__ = ["TRANS", "check_trans", "one_call_solve", "solver_closure", "stack_factors", "view_candidates",
           "view_setup"]

#: Accepted spellings of ``trans``.
TRANS = {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}


def view_candidates(label: str, solve: str) -> Callable[[Problem], list[Candidate]]:
    """Candidates of a factorization (routines ``label`` and ``solve``) that can read
    C-ordered input through its transposed view (``view="transpose"``, no copy) or a Fortran
    copy (``view="copy"``); large ones on NumPy's OpenBLAS first (``lapack="numpy"``), LU
    and Cholesky there also by nvmathpy's algorithms (``algorithm="lookahead"`` /
    ``"recursive"``, in the order of :data:`._numpy_algorithms.ALGORITHMS`; after SciPy's
    where this machine's calibration puts SciPy's routine first)."""

    def candidates(problem: Problem) -> list[Candidate]:
        views = ["transpose", "copy"] if problem.get("layout") == "C" else ["direct"]
        out = [Candidate.of(label, view=view) for view in views]
        n, dtype = problem.get("n") or 0, problem.get("dtype")
        if numpy_lapack.suits(n, dtype, label, solve):
            algorithms = ALGORITHMS[label][0](n, dtype) if label in ALGORITHMS else [None]
            on_numpy = [Candidate.of(label, lapack="numpy", view=views[0], **({"algorithm": a} if a else {}))
                        for a in algorithms if a != SCIPY]
            out = out + on_numpy if algorithms[0] == SCIPY else on_numpy + out
        return out

    return candidates


def view_setup(factor: str, solve: str) -> Callable[[Problem, Candidate], dict[str, Any]]:
    """The engine setup of such a factorization: its two LAPACK routines (SciPy's, or NumPy's
    OpenBLAS for ``lapack="numpy"``) and the view flag. SciPy's ``getrf`` of the orders
    calibration covers runs as the recursive LU on SciPy's OpenBLAS when a call starts while
    SciPy's pool alone spins (:func:`._recursive_lu.scipys_getrf_or_recursion`)."""

    def setup(problem: Problem, candidate: Candidate) -> dict[str, Any]:
        dtype = np.dtype(problem.get("dtype"))
        on_numpy = candidate.params.get("lapack") == "numpy"
        f, s = numpy_lapack.routines(dtype, factor, solve) if on_numpy else routines(dtype, factor, solve)
        if candidate.params.get("algorithm"):
            f = ALGORITHMS[factor][1](candidate.params["algorithm"], dtype)
        elif factor == "getrf" and not on_numpy and COVERED_FROM <= (problem.get("n") or 0) \
                and scipy_recursion_fits(problem.get("n"), dtype):
            f = scipys_getrf_or_recursion(f, dtype)  # right after a SciPy call: the recursion on SciPy's pool
        return {factor: f, solve: s, "transpose": candidate.params["view"] == "transpose"}

    return setup


def check_trans(trans: Any) -> int:
    """Normalise ``trans`` (0/1/2 or 'N'/'T'/'C')."""
    try:
        return TRANS[trans]
    except (KeyError, TypeError):
        raise InvalidOptionError(f"trans={trans!r} is not allowed; allowed: 0, 1, 2, 'N', 'T', 'C'") from None


def stack_factors(parts: list[np.ndarray], batch: tuple[int, ...]) -> np.ndarray:
    """Stack per-element arrays into ``batch + shape`` (the element itself when unbatched).
    For an empty batch ``parts`` holds one stand-in element (computed, say, for
    :func:`.._operands.stand_in`) that gives the empty result its shape and dtype."""
    if not batch:
        return parts[0]
    if 0 in batch:
        return np.empty(batch + parts[0].shape, parts[0].dtype)
    return np.stack(parts).reshape(batch + parts[0].shape)


def solver_closure(
    solve_one: Callable[[int, np.ndarray, int], np.ndarray],
    n: int,
    batch: tuple[int, ...],
    dtype: np.dtype,
    singular: list[int],
    to_caller: Callable[[Any], Any],
    what: str,
    fast: Callable[[np.ndarray], Any] | None,
    rows: int | None = None,
) -> Callable[[Any, Any], Any]:
    """The ``solve(b, trans)`` closure of a factored plan.

    ``solve_one(i, b2, trans)`` solves with the factors of batch element ``i`` for a
    Fortran-friendly ``(n, k)`` right-hand side and returns ``(rows, k)`` (``rows`` is ``n``
    unless given, as for least squares with an ``n x rows`` matrix). ``fast(b)``, when given,
    handles the common case (unbatched, NumPy, matching dtype, ``trans=0``) in one call and
    returns the solution, or ``NotImplemented`` to leave it to the general path (see
    :func:`one_call_solve`).
    """

    out_rows = n if rows is None else rows

    def general(b: Any, trans: Any = 0) -> Any:
        trans = check_trans(trans)
        arrays, _, _ = host_arrays(None, b=b)
        b3, vector = as_rhs(arrays["b"], n, batch, dtype)
        if singular:
            index = batch_index(singular[0], batch)
            where = "" if not batch else f" (batch element {index})"
            raise LinAlgError(f"{what} is singular{where}: cannot solve")
        shape = b3.shape[:-2] + (out_rows, b3.shape[-1])
        if not n or not b3.size:
            out = np.zeros(shape, dtype)
        elif not batch:
            out = solve_one(0, b3, trans)
        else:
            flat = stack_of(b3)
            out = np.empty((flat.shape[0],) + shape[-2:], dtype)
            for i in range(flat.shape[0]):
                out[i] = solve_one(i, flat[i], trans)
            out = out.reshape(shape)
        return to_caller(out[..., 0] if vector else out)

    if fast is None or singular or not n:
        return general
    ndarray = np.ndarray

    def solve(b: Any, trans: Any = 0) -> Any:
        if trans == 0 and type(b) is ndarray and b.dtype == dtype and 0 < b.ndim <= 2 and b.shape[0] == n:
            x = fast(b)
            if x is not NotImplemented:
                return x
        return general(b, trans)

    return solve


def one_call_solve(routine: str, factors: np.ndarray, *args: Any, library: Callable[..., tuple]) -> Callable[..., Any]:
    """``fast(b)`` for :func:`solver_closure`: the compiled ``routine`` of
    :mod:`._fast_lapack` (``"lu_solve"`` or ``"cho_solve"``) on ``factors`` and ``args`` for
    small Fortran-ordered factors (one C call: no f2py argument handling), else ``library``
    (the LAPACK wrapper, already bound to its arguments) returning the solution."""
    compiled = fast_module() if factors.shape[-1] <= SMALL_COMPILED and factors.flags.f_contiguous else None
    if compiled is None:
        return lambda b: library(b)[0]
    function = getattr(compiled, routine)
    if routine == "lu_solve":
        piv, trans = args
        return lambda b: function(factors, piv, b, trans, False)
    (lower,) = args
    return lambda b: function(factors, b, lower, False)
