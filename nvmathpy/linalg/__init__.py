"""Linear algebra: matrix products with fused epilogues, and dense solvers, as plans and
as one-call functions (numpy.linalg / Array-API semantics, batched over leading dimensions).

Names load lazily: importing :mod:`nvmathpy.linalg` costs nothing until a name is used.
Submodules are never named like a public function (``gemm``, not ``matmul``), so
importing one cannot shadow the function of the same name.
"""

from __future__ import annotations

from .._lazy import lazy_getattr

_NAMES = {
    # matrix products
    "Matmul": "gemm.matmul_plan",
    "matmul": "gemm.matmul_plan",
    "MatmulOptions": "gemm.matmul_plan",
    "clear_plan_cache": "gemm.matmul_plan",  # matmul's plan cache (the solvers' is solvers.plan_cache())
    "set_plan_cache_size": "gemm.matmul_plan",
    "plan_cache_info": "gemm.matmul_plan",
    "Epilogue": "epilogues",
    "epilogues": "epilogues",  # the submodule itself (epilogue names and helpers)
    # public helpers for layers over the solvers (nvmathpy.scipy.linalg)
    "validation": "validation",  # the checks of bad input the solvers apply
    "lapack": "lapack",  # the CPU solvers' LAPACK routines and compiled small solves
    "prepared": "prepared",  # the CUDA solvers' prepared calls on one CuPy matrix
    # solver plans
    "LU": "solvers",
    "Cholesky": "solvers",
    "QR": "solvers",
    "Eigh": "solvers",
    "SVD": "solvers",
    "Lstsq": "solvers",
    # solver one-call functions
    "solve": "solvers",
    "inv": "solvers",
    "det": "solvers",
    "slogdet": "solvers",
    "cholesky": "solvers",
    "qr": "solvers",
    "eigh": "solvers",
    "eigvalsh": "solvers",
    "svd": "solvers",
    "svdvals": "solvers",
    "lstsq": "solvers",
    "solve_triangular": "solvers",
    "lu_factor": "solvers",
    "lu_solve": "solvers",
    "cho_factor": "solvers",
    "cho_solve": "solvers",
    # when CUDA solver functions read their device-side error flags (per call, or deferred)
    "cuda_checks": "solvers.cuda._checks",
    "check_cuda_errors": "solvers.cuda._checks",
    "cuda_check_finite": "solvers.cuda._checks",
}

__all__ = sorted(_NAMES)
__getattr__ = lazy_getattr(__name__, _NAMES)


def __dir__() -> list[str]:
    return __all__
