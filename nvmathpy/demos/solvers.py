"""Demo: dense solvers. Factor once and solve many right-hand sides with an LU plan, then
swap ``scipy.linalg`` for ``nvmathpy.scipy.linalg`` in a small workload; every result is
checked against SciPy and timed beside it."""

from __future__ import annotations

import time
from typing import Callable

TITLE = "Dense solvers: factor once / solve many, and a scipy.linalg drop-in"


def _per_call(fn: Callable[[], object], calls: int) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def run(echo: Callable[[str], None]) -> bool:
    """Run the demo; return True when every check passed."""
    import numpy as np
    import scipy.linalg as sla

    import nvmathpy.linalg as nl
    import nvmathpy.scipy.linalg as nsl

    rng = np.random.default_rng(0)
    ok = True

    n, count = 8, 2000
    a = rng.standard_normal((n, n)) + 2 * np.sqrt(n) * np.eye(n)
    rhs = rng.standard_normal((count, n))
    with nl.LU(a) as lu:
        xs = [lu.solve(b) for b in rhs]
        factor = sla.lu_factor(a)
        err = max(np.linalg.norm(x - sla.lu_solve(factor, b)) / np.linalg.norm(x) for x, b in zip(xs, rhs))
        checked = err < 1e-12 and lu.factorizations == 1
        ok &= checked
        t_ours = _per_call(lambda: lu.solve(rhs[0]), 2000)
        t_scipy = _per_call(lambda: sla.lu_solve(factor, rhs[0]), 2000)
    echo(f"LU plan, n={n}: {count} solves with one factorization, max rel. error vs SciPy {err:.1e} "
         f"[{'ok' if checked else 'FAILED'}]")
    echo(f"  per solve: nvmathpy {t_ours * 1e6:.2f} us, scipy.linalg.lu_solve {t_scipy * 1e6:.2f} us "
         f"({t_scipy / t_ours:.1f}x)")

    def workload(linalg) -> list:
        m = rng_work.standard_normal((64, 64))
        s = m @ m.T + 64 * np.eye(64)
        return [linalg.solve(m + 16 * np.eye(64), np.ones(64)), linalg.cho_solve(linalg.cho_factor(s), np.ones(64)),
                linalg.eigh(s)[0], linalg.svd(m, compute_uv=False), linalg.lstsq(m[:, :10], np.ones(64))[0]]

    rng_work = np.random.default_rng(1)
    ours = workload(nsl)
    rng_work = np.random.default_rng(1)
    theirs = workload(sla)
    errs = [np.linalg.norm(o - t) / np.linalg.norm(t) for o, t in zip(ours, theirs)]
    checked = max(errs) < 1e-10
    ok &= checked
    rng_work = np.random.default_rng(1)
    t_ours = _per_call(lambda: workload(nsl), 20)
    t_scipy = _per_call(lambda: workload(sla), 20)
    echo(f"drop-in swap (solve, cho_factor/cho_solve, eigh, svd, lstsq at n=64): max rel. error {max(errs):.1e} "
         f"[{'ok' if checked else 'FAILED'}]")
    echo(f"  per workload: nvmathpy.scipy.linalg {t_ours * 1e3:.2f} ms, scipy.linalg {t_scipy * 1e3:.2f} ms "
         f"({t_scipy / t_ours:.1f}x)")
    return bool(ok)
