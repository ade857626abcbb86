"""Demo on the GPU: dense solvers on CuPy arrays (cuSOLVER). Factor once and solve many
right-hand sides with an LU plan, solve a large batch of small systems in one call, then swap
``scipy.linalg`` for ``nvmathpy.scipy.linalg`` on device arrays; every result is checked on the
host against SciPy/NumPy in float64 and timed (CUDA events) beside the CuPy code a user would
write (``cupyx.scipy.linalg.lu_factor``/``lu_solve``, ``cupy.linalg.solve``, ...)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

TITLE = "Dense solvers on the GPU: factor once / solve many, batched small solves, a scipy.linalg drop-in, vs CuPy"

#: Order of the factor-once matrix, right-hand sides solved with it, and the batched systems.
LU_N, LU_RHS, BATCH, BATCH_N = 2048, 32, 100_000, 8
#: Order of the drop-in workload's matrices.
WORK_N = 256


def _rel(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def run(echo: Callable[[str], None], space: Any) -> bool:
    """Run the demo on ``space`` (a CUDA :class:`~nvmathpy.demos._space.Space`); return True when
    every check passed."""
    import cupyx.scipy.linalg as cxl
    import scipy.linalg as sla

    import nvmathpy.linalg as nl
    import nvmathpy.scipy.linalg as nsl

    xp = space.xp
    rng = np.random.default_rng(0)
    ok = True

    a_host = rng.standard_normal((LU_N, LU_N)) + 2 * np.sqrt(LU_N) * np.eye(LU_N)
    rhs_host = rng.standard_normal((LU_RHS, LU_N))
    a, rhs = space.to_device(a_host), space.to_device(rhs_host)
    with nl.LU(a) as lu:
        xs = np.stack([space.to_host(lu.solve(rhs[i])) for i in range(LU_RHS)])
        err = _rel(xs, sla.lu_solve(sla.lu_factor(a_host), rhs_host.T).T)
        checked = err < 1e-10 and lu.factorizations == 1
        ok &= checked
        factor = cxl.lu_factor(a)
        t_ours = space.median_seconds(lambda: lu.solve(rhs[0]))
        t_cupy = space.median_seconds(lambda: cxl.lu_solve(factor, rhs[0]))
        t_naive = space.median_seconds(lambda: xp.linalg.solve(a, rhs[0]), repeats=3)
    echo(f"[{space.name}] LU plan, n={LU_N} float64 on {space.description}: {LU_RHS} solves with one "
         f"factorization, rel. error vs SciPy {err:.1e} [{'ok' if checked else 'FAILED'}]")
    echo(f"  per solve: nvmathpy {t_ours * 1e6:.1f} us, cupyx lu_solve {t_cupy * 1e6:.1f} us ({t_cupy / t_ours:.1f}x), "
         f"cupy.linalg.solve (factors every time) {t_naive * 1e6:.1f} us ({t_naive / t_ours:.1f}x)")

    a_host = rng.standard_normal((BATCH, BATCH_N, BATCH_N)) + 2 * np.sqrt(BATCH_N) * np.eye(BATCH_N)
    b_host = rng.standard_normal((BATCH, BATCH_N, 1))
    a, b = space.to_device(a_host), space.to_device(b_host)
    err = _rel(space.to_host(nl.solve(a, b)), np.linalg.solve(a_host, b_host))
    checked = err < 1e-10
    ok &= checked
    t_ours, t_cupy = space.median_seconds(lambda: nl.solve(a, b)), space.median_seconds(lambda: xp.linalg.solve(a, b))
    echo(f"batched solve, {BATCH} systems of {BATCH_N}x{BATCH_N}: rel. error vs numpy.linalg.solve {err:.1e} "
         f"[{'ok' if checked else 'FAILED'}]; nvmathpy {t_ours * 1e3:.3f} ms, cupy.linalg.solve "
         f"{t_cupy * 1e3:.3f} ms ({t_cupy / t_ours:.1f}x)")

    m_host = rng.standard_normal((WORK_N, WORK_N))
    s_host = m_host @ m_host.T + WORK_N * np.eye(WORK_N)
    g_host = m_host + 16 * np.eye(WORK_N)
    ones_host = np.ones(WORK_N)
    m, s, g, ones = (space.to_device(v) for v in (m_host, s_host, g_host, ones_host))

    def workload(linalg: Any, m: Any, s: Any, g: Any, ones: Any) -> list:
        return [linalg.solve(g, ones), linalg.cho_solve(linalg.cho_factor(s), ones), linalg.eigh(s)[0],
                linalg.svd(m, compute_uv=False), linalg.lstsq(m[:, :10], ones)[0]]

    def cupy_workload() -> list:
        c = xp.linalg.cholesky(s)
        y = cxl.solve_triangular(c, ones, lower=True)
        return [xp.linalg.solve(g, ones), cxl.solve_triangular(c.T, y, lower=False), xp.linalg.eigh(s)[0],
                xp.linalg.svd(m, compute_uv=False), xp.linalg.lstsq(m[:, :10], ones, rcond=None)[0]]

    ours = [space.to_host(v) for v in workload(nsl, m, s, g, ones)]
    theirs = workload(sla, m_host, s_host, g_host, ones_host)
    errs = [_rel(o, t) for o, t in zip(ours, theirs)]
    checked = max(errs) < 1e-10
    ok &= checked
    t_ours = space.median_seconds(lambda: workload(nsl, m, s, g, ones), repeats=5)
    t_cupy = space.median_seconds(cupy_workload, repeats=5)
    echo(f"drop-in swap on device arrays (solve, cho_factor/cho_solve, eigh, svd, lstsq at n={WORK_N}): max rel. "
         f"error vs SciPy {max(errs):.1e} [{'ok' if checked else 'FAILED'}]")
    echo(f"  per workload: nvmathpy.scipy.linalg {t_ours * 1e3:.2f} ms, the same in CuPy/cupyx {t_cupy * 1e3:.2f} ms "
         f"({t_cupy / t_ours:.1f}x)")
    return bool(ok)
