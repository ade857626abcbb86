"""A short GPU check of issue 20's batched small solves and tiny-GEMM host overhead (about a minute).

Run on a machine with CuPy (and torch for the torch rows)::

    python benchmarks/gpu_tiny_check.py

Prints, for 10^5 (and 10^5 + 3) systems of 8x8, float64 and float32:

- ``solve_ms``: the public ``nvmathpy.linalg.solve(a, b)`` (plan cache, the singular check: one
  synchronisation per call), ``run_ms``: the planned route alone without the check, ``cupy_ms``:
  ``cupy.linalg.solve``; device time by CUDA events with the L2 flushed before each call, median
  of 15; the route and kernel the plan took; the relative residual against float64;

and for a planned 8x8x8 float32 ``Matmul.execute()`` on CuPy and torch operands the host time per
call, and beside it the pieces of the hot path timed alone (the bare ``cublasLtMatmul`` call with
the plan's arguments, the result allocation, the current-stream look-up), so that what remains of
``execute()`` is the Python between them.
"""

from __future__ import annotations

from typing import Any, Callable

from gpu_check import device_times, host_overhead  # the same timers as the full check


def device_ms(fn: Callable[[], object], reps: int = 15) -> float:
    """Median milliseconds of one call on the device (:func:`gpu_check.device_times`)."""
    return device_times(fn, 3, reps) * 1e3


def host_us(fn: Callable[[], object], batches: int = 20, per_batch: int = 200) -> float:
    """Median host microseconds per call (:func:`gpu_check.host_overhead`)."""
    return host_overhead(fn, batches, per_batch) * 1e6


def solves() -> None:
    import cupy

    import nvmathpy.linalg as nl
    from nvmathpy.linalg.solvers.cuda._plans import CudaSolve

    rng = cupy.random.default_rng(7)
    for count in (100000, 100003):
        for dtype in ("float64", "float32"):
            a = (rng.standard_normal((count, 8, 8)) + 8 * cupy.eye(8)).astype(dtype)
            b = rng.standard_normal((count, 8, 1)).astype(dtype)
            x = nl.solve(a, b)
            err = float(cupy.linalg.norm(a @ x - b) / cupy.linalg.norm(b))
            plan = CudaSolve(a, b)
            plan.plan()
            plan._run()
            plan.check()
            route = plan._route
            kernel = "register" if getattr(route, "registers", False) else "shared"
            print(f"solve {dtype} {count} x (8x8): solve_ms {device_ms(lambda: nl.solve(a, b)):.4f} "
                  f"run_ms {device_ms(plan._run):.4f} run+check_ms {device_ms(lambda: (plan._run(), plan.check())):.4f} "
                  f"cupy_ms {device_ms(lambda: cupy.linalg.solve(a, b)):.4f} host_us_per_solve "
                  f"{host_us(lambda: nl.solve(a, b), 5, 50):.1f} route {plan.candidate.label} kernel {kernel} "
                  f"rel_residual {err:.1e}", flush=True)
            plan.free()


def _closure(fn: Any) -> dict[str, Any]:
    return dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__ or ())))


def gemm_overhead() -> None:
    import cupy

    from nvmathpy.linalg import Matmul

    a, b = (cupy.random.standard_normal((8, 8), dtype=cupy.float32) for _ in range(2))
    rows: dict[str, float] = {}
    with Matmul(a, b) as mm:
        mm.plan()
        kernel = mm._prepared.kernel
        rows["cupy execute_us"] = host_us(mm.execute)
        print("candidate", mm.candidate, flush=True)
        if "matmul" in kernel.__code__.co_freevars:  # the cuBLASLt plain kernel: its call alone
            env = _closure(kernel)
            d = cupy.empty((8, 8), cupy.float32)
            p1, p2 = (b.data.ptr, a.data.ptr) if env["swapped"] else (a.data.ptr, b.data.ptr)
            algo, workspace, size = env["algorithm"](p1, p2, d.data.ptr, d.data.ptr)
            stream = env["stream"]()

            def bare() -> None:
                env["matmul"](env["handle"], env["desc"], env["alpha_p"], p1, env["la"], p2, env["lb"], env["beta_p"],
                              d.data.ptr, env["ld"], d.data.ptr, env["ld"], algo, workspace, size, stream)

            rows["cupy bare cublasLtMatmul_us"] = host_us(bare)
            rows["cupy allocation_us"] = host_us(env["new_d"])
            rows["cupy stream lookup_us"] = host_us(env["stream"])
    rows["cupy.matmul_us"] = host_us(lambda: cupy.matmul(a, b))
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
        with Matmul(ta, tb) as tm:
            tm.plan()
            rows["torch execute_us"] = host_us(tm.execute)
            env = _closure(tm._prepared.kernel) if "matmul" in tm._prepared.kernel.__code__.co_freevars else {}
            if env:
                rows["torch allocation_us"] = host_us(env["new_d"])
                rows["torch stream lookup_us"] = host_us(env["stream"])
        rows["torch.matmul_us"] = host_us(lambda: torch.matmul(ta, tb))
    print("gemm 8x8x8 float32 host per call: " + "; ".join(f"{k} {v:.2f}" for k, v in rows.items())
          + " (targets: cupy execute <= 10, torch execute <= 12)", flush=True)


if __name__ == "__main__":
    solves()
    gemm_overhead()
