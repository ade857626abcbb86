"""``nvmathpy.linalg`` inside a NumPy program: each step is one NumPy product (the program's own
work, on NumPy's OpenBLAS) and then one linear-algebra call, by ``numpy.linalg`` or by
``nvmathpy.linalg``; the time of the whole step is what the program sees. Each library runs
its program as a block of :data:`STEPS` steps per round (a program calls one of them; the
block's first step may still meet the other block's spinning threads, the rest do not).

NumPy's and SciPy's OpenBLAS are two thread pools whose threads spin for a while after each
call. A call of the other pool made meanwhile on every core waits for its thread on the core
the spinning one holds (a scheduler tick, milliseconds, per step of the call), and its own
threads then spin into the program's next product, which waits alike. nvmathpy's calls that
run SciPy's LAPACK look at the free cores first from order
:data:`nvmathpy.linalg.solvers.cpu._pool_threads.PLAN_FREE_CORES_FROM` on. Steps of the two
libraries' blocks alternate in rounds; per function and order: the medians over rounds of the
blocks' mean step, and the median (min-max) of the per-round ratios NumPy / nvmathpy (> 1:
nvmathpy's program is faster).

Run (CPU benchmarks only, with these two variables unset)::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_numpy_program.py [--sizes 100,200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout

import nvmathpy.linalg as nla  # noqa: E402

#: name: (NumPy's call, nvmathpy's call, the matrix it takes: "general", "symmetric" or "spd").
CALLS: dict[str, tuple[Callable[[np.ndarray], Any], Callable[[np.ndarray], Any], str]] = {
    "solve": (lambda x: np.linalg.solve(x, x[:, :4]), lambda x: nla.solve(x, x[:, :4]), "general"),
    "inv": (np.linalg.inv, nla.inv, "general"),
    "det": (np.linalg.det, nla.det, "general"),
    "cholesky": (np.linalg.cholesky, nla.cholesky, "spd"),
    "qr": (np.linalg.qr, nla.qr, "general"),
    "eigh": (np.linalg.eigh, nla.eigh, "symmetric"),
    "svd": (np.linalg.svd, nla.svd, "general"),
    "lstsq": (lambda x: np.linalg.lstsq(x, x[:, :4], rcond=None), lambda x: nla.lstsq(x, x[:, :4]), "general"),
}


#: Steps per block.
STEPS = 5


def step(call: Callable[[np.ndarray], Any], a: np.ndarray, b: np.ndarray, kind: str) -> float:
    """One step of the program (the product, the matrix made from it, the call); seconds."""
    start = time.perf_counter()
    c = a @ b
    n = c.shape[0]
    x = c @ c.T + n * np.eye(n) if kind == "spd" else c + c.T if kind == "symmetric" else c
    call(x)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="64,100,128,200,300", help="comma-separated orders")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--only", default=None, help="comma-separated function names")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(CALLS)
    rng = np.random.default_rng(0)
    print("| function | n | numpy step µs | nvmathpy step µs | NumPy/nvmathpy (min-max) |")
    print("|---|---:|---:|---:|---|")
    for name in names:
        numpy_call, nvmathpy_call, kind = CALLS[name]
        for n in (int(s) for s in args.sizes.split(",")):
            a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n)) / np.sqrt(n)
            for call in (numpy_call, nvmathpy_call):  # first calls (plans, builds) out of the timing
                step(call, a, b, kind)
            ours, theirs = [], []
            for _ in range(args.rounds):
                theirs.append(sum(step(numpy_call, a, b, kind) for _ in range(STEPS)) / STEPS)
                ours.append(sum(step(nvmathpy_call, a, b, kind) for _ in range(STEPS)) / STEPS)
            ratios = [t / o for t, o in zip(theirs, ours)]
            print(f"| {name} | {n} | {statistics.median(theirs) * 1e6:.0f} | {statistics.median(ours) * 1e6:.0f} | "
                  f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) |")


if __name__ == "__main__":
    main()
