"""The GPU linalg suite of ``python -m nvmathpy bench --space cuda``: batched small solves and
one large solve through ``nvmathpy.linalg.solve`` (cuSOLVER / cuBLAS batched routes, plan cache)
beside ``cupy.linalg.solve`` and ``torch.linalg.solve`` where torch has CUDA; then the
``nvmathpy.scipy.linalg`` drop-in beside CuPy's functions, per function and size
(:mod:`.suite_scipy_cuda`).

CuPy and torch are imported only when :func:`cases` runs; :func:`specs` is plain data.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .harness import Case
from .suite_scipy_cuda import cases as scipy_cases

__all__ = ["cases", "specs"]


def specs(quick: bool) -> list[tuple[str, int, int]]:
    """``(dtype, count, n)`` for every case: ``count`` systems of ``n x n`` (count 1: one matrix)."""
    batched = [("float64", 100_000, 4), ("float64", 100_000, 8), ("float32", 100_000, 8), ("float64", 10_000, 32)]
    if not quick:
        batched += [("float32", 1_000_000, 8), ("float64", 1000, 64)]
    return batched + [("float64", 1, 2048 if quick else 4096)]


def cases(quick: bool, space: Any) -> list[Case]:
    """The GPU solver cases on ``space`` (a CUDA :class:`~nvmathpy.demos._space.Space`)."""
    import nvmathpy.linalg as nl

    xp, torch = space.xp, space.torch
    rng = np.random.default_rng(0)
    out: list[Case] = []
    for dtype, count, n in specs(quick):
        batch = (count,) if count > 1 else ()
        host_a = rng.standard_normal(batch + (n, n)) + 2 * np.sqrt(n) * np.eye(n)
        a = space.to_device(host_a.astype(dtype))
        b = space.to_device(rng.standard_normal(batch + (n, 1)).astype(dtype))
        nl.solve(a, b)  # plans it (the plan cache keeps it for the timed calls)
        impls: dict[str, Callable[[], object]] = {"cupy.linalg.solve": lambda a=a, b=b: xp.linalg.solve(a, b)}
        if torch is not None:
            ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
            impls["torch.linalg.solve"] = lambda ta=ta, tb=tb: torch.linalg.solve(ta, tb)
        impls["nvmathpy"] = lambda a=a, b=b: nl.solve(a, b)
        name = f"batched solve B={count} n={n} {dtype}" if count > 1 else f"solve n={n} {dtype}"
        out.append(Case("linalg", name, "cupy.linalg.solve", impls, note="nvmathpy.linalg.solve"))
    return out + scipy_cases(quick, space)
