"""The scipy.linalg drop-in part of the GPU linalg suite (``python -m nvmathpy bench linalg
--space cuda``, :mod:`.suite_linalg_cuda`): each
``nvmathpy.scipy.linalg`` function on CuPy float64 arrays beside CuPy's own function (or
``cupyx.scipy.linalg``'s), one row per function and size - issue 24's table, also run by
``benchmarks/gpu_check.py``'s ``dropin`` section (:func:`calls`).

The drop-in runs with its defaults (``check_finite=True``) and
``nvmathpy.linalg.cuda_checks("deferred")``: no host round trip per call, as CuPy's functions
(which read nothing back). CuPy is imported only when :func:`cases` runs.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .harness import Case

__all__ = ["calls", "cases", "sizes"]


def sizes(quick: bool) -> tuple[int, ...]:
    """The matrix orders of the suite."""
    return (8, 256) if quick else (8, 256, 2048)


def calls(n: int, xp: Any, cupyx_linalg: Any, to_device: Callable[[np.ndarray], Any]
          ) -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    """Per function, ``(ours, theirs)`` on fresh random float64 ``n x n`` operands (4
    right-hand sides) made by ``to_device``; ``xp`` is CuPy, ``cupyx_linalg`` its SciPy layer."""
    from nvmathpy.scipy import linalg as nsla

    rng = np.random.default_rng(24 + n)
    host = rng.standard_normal((n, n)) + 4 * n ** 0.5 * np.eye(n)
    a, b = to_device(host), to_device(rng.standard_normal((n, 4)))
    spd, tri = to_device(host @ host.T / n + np.eye(n)), to_device(np.tril(host))
    lu_ours, lu_theirs = nsla.lu_factor(a), cupyx_linalg.lu_factor(a)
    linalg = xp.linalg
    return {
        "solve": (lambda: nsla.solve(a, b), lambda: linalg.solve(a, b)),
        "lu_factor": (lambda: nsla.lu_factor(a), lambda: cupyx_linalg.lu_factor(a)),
        "lu_solve": (lambda: nsla.lu_solve(lu_ours, b), lambda: cupyx_linalg.lu_solve(lu_theirs, b)),
        "cho_solve(cho_factor)": (lambda: nsla.cho_solve(nsla.cho_factor(spd), b), lambda: linalg.solve(spd, b)),
        "cholesky": (lambda: nsla.cholesky(spd), lambda: linalg.cholesky(spd)),
        "eigh": (lambda: nsla.eigh(spd), lambda: linalg.eigh(spd)),
        "svd": (lambda: nsla.svd(a), lambda: linalg.svd(a)),
        "qr": (lambda: nsla.qr(a), lambda: linalg.qr(a, mode="complete")),
        "lstsq": (lambda: nsla.lstsq(a, b), lambda: linalg.lstsq(a, b, rcond=None)),
        "solve_triangular": (lambda: nsla.solve_triangular(tri, b, lower=True),
                             lambda: cupyx_linalg.solve_triangular(tri, b, lower=True)),
        "inv": (lambda: nsla.inv(a), lambda: linalg.inv(a)),
        "det": (lambda: nsla.det(a), lambda: linalg.det(a)),
    }


def _deferred(fn: Callable[[], Any]) -> Callable[[], Any]:
    import nvmathpy.linalg as nl

    def run() -> Any:
        with nl.cuda_checks("deferred"):
            return fn()

    return run


def cases(quick: bool, space: Any) -> list[Case]:
    """The drop-in cases on ``space`` (a CUDA :class:`~nvmathpy.demos._space.Space`)."""
    import cupyx.scipy.linalg as cupyx_linalg

    out: list[Case] = []
    for n in sizes(quick):
        for name, (ours, theirs) in calls(n, space.xp, cupyx_linalg, space.to_device).items():
            impls = {"cupy": theirs, "nvmathpy": _deferred(ours)}
            out.append(Case("linalg", f"scipy {name} n={n} float64", "cupy", impls,
                            note=f"nvmathpy.scipy.linalg.{name.split('(')[0]}"))
    return out
