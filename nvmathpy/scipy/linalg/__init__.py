"""A drop-in for :mod:`scipy.linalg`'s dense solvers: same names, signatures, defaults and
return conventions as SciPy 1.17, faster (LAPACK called directly, C-ordered inputs read
through transposed views, workspace sizes cached, drivers chosen by measurement).

``from nvmathpy.scipy import linalg as sla`` and call ``sla.solve``, ``sla.lu_factor``, ...
Every other public name of :mod:`scipy.linalg` (``logm``, ``schur``, ``LinAlgWarning``, the
``lapack``/``blas`` modules, ...) is SciPy's own object, looked up on first access: the module
is a safe swap for ``scipy.linalg`` in any code, and importing it does not import SciPy
(``__all__`` lists the names nvmathpy implements; ``dir()`` lists them all).

A thin signature layer: it validates, converts SciPy's conventions and calls the public
:mod:`nvmathpy.linalg` (functions, plans, :mod:`nvmathpy.linalg.lapack` for the LAPACK
routines and compiled small solves, :mod:`nvmathpy.linalg.validation`), no private module.

``overwrite_a``/``overwrite_b`` work in place as SciPy's in ``solve``, ``inv``, ``det``,
``qr`` and ``solve_triangular`` (a Fortran-ordered writeable input of the computation dtype
is overwritten; the result shares its memory where SciPy's does); the other functions accept
them and never overwrite their inputs. ``solve`` picks SciPy 1.17's LAPACK routines per
structure (``?gttrf``/``?gttrs`` for tridiagonal matrices, detected from order 4 as SciPy's,
``?gbsv`` for ``assume_a='banded'``); ``inv(assume_a='sym' | 'her')`` reads the triangle SciPy
reads and runs the general LU on it.

``solve_banded``, ``solveh_banded``, ``cholesky_banded``, ``cho_solve_banded`` and ``ldl`` make
SciPy's LAPACK calls (``?gtsv``/``?gbsv``, ``?ptsv``/``?pbsv``, ``?pbtrf``, ``?pbtrs``,
``?sytrf``/``?hetrf``) with its ``overwrite_*`` effects, results and errors, without its per-call
overhead. They, ``eig``, ``eigvals`` and ``rq`` run on the host only: CUDA operands raise a
``TypeError`` that names the function.
Singular and non-positive-definite matrices raise ``numpy.linalg.LinAlgError`` naming the
failing batch slice; ill-conditioned solves warn with ``scipy.linalg.LinAlgWarning``.
"""

from ...linalg.lapack import LU_FREE_CORES_FROM as _LU_FREE_CORES_FROM
from ...linalg.lapack import on_free_cores as _on_free_cores
from ._cuda import routed as _routed
from ._decomp import cho_factor, cho_solve, cholesky, lu, lu_factor, lu_solve, qr, svd, svdvals
from ._eigh import eigh, eigvalsh
from ._solve import det, inv, lstsq, solve, solve_triangular
from ._solve import solve_free_cores_from as _solve_free_cores_from

# Large NumPy matrices: OpenBLAS on the cores free at the call's start (nvmathpy.linalg.lapack.on_free_cores);
# the LU family from LU_FREE_CORES_FROM elements (solve with assume_a="pos" as the Cholesky family; inv, whose
# ?getri and ?potrf start threads earlier, as the Cholesky family too).
# svd, svdvals, qr, eig, eigvals, orth, null_space and pinv, which make SciPy's own LAPACK calls, then run on
# the thread count calibrated for their routine where the look left the count as it was
# (nvmathpy.linalg.lapack.on_calibrated_threads).
(lstsq, cholesky, cho_factor, qr, eigh, eigvalsh, svd, svdvals, inv) = map(
    _on_free_cores, (lstsq, cholesky, cho_factor, qr, eigh, eigvalsh, svd, svdvals, inv))
det, lu, lu_factor = (_on_free_cores(fn, _LU_FREE_CORES_FROM) for fn in (det, lu, lu_factor))
solve = _on_free_cores(solve, _solve_free_cores_from)
# CUDA operands (CuPy arrays, torch CUDA tensors) go to the cuSOLVER engine with SciPy's conventions (._cuda).
(solve, inv, det, lstsq, lu, lu_factor, lu_solve, cholesky, cho_factor, cho_solve, qr, eigh, eigvalsh, svd, svdvals,
 solve_triangular) = map(_routed, (solve, inv, det, lstsq, lu, lu_factor, lu_solve, cholesky, cho_factor, cho_solve,
                                   qr, eigh, eigvalsh, svd, svdvals, solve_triangular))

__all__ = [
    "solve", "inv", "det", "lstsq", "lu", "lu_factor", "lu_solve", "cholesky", "cho_factor", "cho_solve",
    "qr", "eigh", "eigvalsh", "svd", "svdvals", "solve_triangular",
]

# Norms, pseudo-inverses, subspaces (issue 21): NumPy operands; SciPy's own function for the rest.
from ._norms import norm  # noqa: E402
from ._pseudo import null_space, orth, pinv, pinvh  # noqa: E402

null_space, orth, pinv, pinvh = map(_on_free_cores, (null_space, orth, pinv, pinvh))

__all__ += ["norm", "pinv", "pinvh", "orth", "null_space"]

# The general eigenproblem and RQ (issue 21): NumPy operands; CUDA operands refused by name.
from ._eig import eig, eigvals  # noqa: E402
from ._rq import rq  # noqa: E402

eig, eigvals, rq = map(_on_free_cores, (eig, eigvals, rq))

__all__ += ["eig", "eigvals", "rq"]

# The matrix exponential (issue 21): NumPy operands, in the compiled extension; CUDA operands refused by name.
from ._expm import expm  # noqa: E402

expm = _on_free_cores(expm)

__all__ += ["expm"]

# Banded solvers and the LDL factorization (issue 21): NumPy operands; CUDA operands refused by name.
from ._banded import cho_solve_banded, cholesky_banded, solve_banded, solveh_banded  # noqa: E402
from ._ldl import ldl  # noqa: E402

ldl = _on_free_cores(ldl)

__all__ += ["solve_banded", "solveh_banded", "cholesky_banded", "cho_solve_banded", "ldl"]


def __getattr__(name: str) -> object:
    """SciPy's own object for a public name of :mod:`scipy.linalg` nvmathpy does not implement."""
    import scipy.linalg

    if name.startswith("_") or name not in scipy.linalg.__all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(scipy.linalg, name)


def __dir__() -> list[str]:
    import scipy.linalg

    return sorted(set(globals()) | set(scipy.linalg.__all__))
