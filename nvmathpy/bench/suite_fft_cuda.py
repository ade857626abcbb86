"""The GPU FFT suite of ``python -m nvmathpy bench --space cuda``: autotuned cuFFT plans
(``nvmathpy.fft.FFT(...).execute``) beside ``cupy.fft`` (which caches its cuFFT plans too) and
``torch.fft`` where torch has CUDA, on the same CuPy arrays.

CuPy and torch are imported only when :func:`cases` runs; :func:`specs` is plain data.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .harness import Case
from .suite_fft import make_input

__all__ = ["CASES", "QUICK", "cases", "specs"]

CASES = [  # (label, kind, shape, axes)
    ("1-D 2^20", "c2c", (1 << 20,), None),
    ("1-D 2^24", "c2c", (1 << 24,), None),
    ("1-D 1000003 (prime)", "c2c", (1000003,), None),
    ("batch 1024x4096, axis -1", "c2c", (1024, 4096), (-1,)),
    ("batch 4096x1024, axis 0", "c2c", (4096, 1024), (0,)),
    ("2-D 2048^2", "c2c", (2048, 2048), None),
    ("3-D 256^3", "c2c", (256, 256, 256), None),
    ("r2c 2-D 2048^2", "r2c", (2048, 2048), None),
]
QUICK = {"1-D 2^20", "batch 1024x4096, axis -1", "2-D 2048^2", "r2c 2-D 2048^2"}


def specs(quick: bool) -> list[tuple[str, str, tuple[int, ...], tuple[int, ...] | None, str]]:
    """``(label, kind, shape, axes, precision)`` for every case (single precision only when quick)."""
    precisions = ("single",) if quick else ("single", "double")
    return [(label, kind, shape, axes, precision) for label, kind, shape, axes in CASES
            if not quick or label in QUICK for precision in precisions]


def cases(quick: bool, space: Any) -> list[Case]:
    """The GPU FFT cases on ``space`` (a CUDA :class:`~nvmathpy.demos._space.Space`)."""
    from ..fft import FFT

    xp, torch = space.xp, space.torch
    rng = np.random.default_rng(0)
    out: list[Case] = []
    for label, kind, shape, axes, precision in specs(quick):
        x = space.to_device(make_input(kind, shape, precision, rng))
        ax = tuple(range(x.ndim)) if axes is None else tuple(a % x.ndim for a in axes)
        plan = FFT(x, axes=list(ax))
        plan.autotune(effort="measure", repeats=3)
        cupy_fn = xp.fft.fftn if kind == "c2c" else xp.fft.rfftn
        impls: dict[str, Callable[[], object]] = {"cupy.fft": lambda x=x, ax=ax, f=cupy_fn: f(x, axes=ax)}
        if torch is not None:
            torch_fn = torch.fft.fftn if kind == "c2c" else torch.fft.rfftn
            tx = torch.from_dlpack(x)
            impls["torch.fft"] = lambda tx=tx, ax=ax, f=torch_fn: f(tx, dim=ax)
        impls["nvmathpy"] = plan.execute
        out.append(Case("fft", f"{label} {x.dtype.name}", "cupy.fft", impls, note=str(plan.candidate)))
    return out
