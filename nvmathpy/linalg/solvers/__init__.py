"""Dense solvers: factor-once/solve-many plans (LU, Cholesky, QR, Eigh, SVD, Lstsq) and
one-call functions with NumPy / Array-API semantics, batched over leading dimensions.

The CPU engine calls LAPACK directly through SciPy's low-level wrappers, reads C-ordered
matrices through free transposed views, caches workspace sizes, chooses drivers by
measurement and has vectorised fast paths for large batches of tiny matrices.
"""

from .plans.cholesky import Cholesky
from .plans.eigh import Eigh
from .functions import (
    cho_factor,
    cho_solve,
    cholesky,
    det,
    eigh,
    eigvalsh,
    inv,
    lstsq,
    lu_factor,
    lu_solve,
    qr,
    slogdet,
    solve,
    solve_triangular,
    svd,
    svdvals,
)
from .plans.lstsq import Lstsq
from .plans.lu import LU
from .plans.qr import QR
from .plans.svd import SVD

__all__ = [
    "LU", "Cholesky", "QR", "Eigh", "SVD", "Lstsq",
    "solve", "inv", "det", "slogdet", "cholesky", "qr", "eigh", "eigvalsh", "svd", "svdvals", "lstsq",
    "solve_triangular", "lu_factor", "lu_solve", "cho_factor", "cho_solve",
]
