"""Prepared calls of the CUDA solvers, for layers with SciPy's signatures over them
(``nvmathpy.scipy.linalg``): a public module, ``nvmathpy.linalg.prepared``.

:func:`call` runs one function (``"solve"``, ``"inv"``, ``"det"``, ``"lu_factor"``,
``"lu_solve"``, ``"cholesky"``, ``"cho_solve"``, ``"eigh"``, ``"svd"``, ``"qr"``, ``"lstsq"``,
``"solve_triangular"``) on one CuPy matrix and CuPy right-hand sides / pivots with SciPy's
conventions and errors, through a call prepared by the first call of the same layout, dtype,
options, ``check_finite``, device and stream; it returns :data:`UNPREPARED` for what it does
not take (the caller then takes the general way). The checks follow
:func:`nvmathpy.linalg.cuda_checks`. See :mod:`nvmathpy.linalg.solvers.cuda._prepared`.
"""

from __future__ import annotations

from .solvers.cuda._prepared import MAXSIZE, UNPREPARED, call, clear, prepared_count

__all__ = ["MAXSIZE", "UNPREPARED", "call", "clear", "prepared_count"]
