"""nvmathpy.scipy.linalg's banded solvers, ``ldl`` and ``solve``'s banded structures beside
scipy.linalg's, per call, on the orders real code uses.

Run (unset the OpenBLAS overrides for this command only)::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_scipy_banded.py [--quick]

Rows: ``solve_banded`` with a tridiagonal band (1, 1) (``?gtsv``) and a wider one (2, 3)
(``?gbsv``), ``solveh_banded`` with one superdiagonal (``?ptsv``) and two (``?pbsv``),
``cholesky_banded``, ``cho_solve_banded``, ``ldl`` of a symmetric indefinite matrix, and
``solve`` of a tridiagonal matrix detected, assumed (``assume_a='tridiagonal'``) and as
``assume_a='banded'``; float64, one right-hand side vector. Single calls of the two libraries
alternate in each round (``bench_linalg.compare``'s interleaved mode: load from other processes
hits both alike); the table gives the median
microseconds per call and the ratio SciPy/nvmathpy (> 1: nvmathpy is faster), the median of
the per-round ratios, with the load average before and after.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_linalg  # noqa: E402
from bench_linalg import compare  # noqa: E402

import numpy as np  # noqa: E402
import scipy.linalg as sla  # noqa: E402

import nvmathpy.scipy.linalg as nsl  # noqa: E402

SIZES = (8, 32, 128, 512)


def _calls(module: Any, n: int) -> dict[str, Callable[[], object]]:
    """Each row's call on order-``n`` operands through ``module`` (the same data for both)."""
    rng = np.random.default_rng(n)
    b = rng.standard_normal(n)
    tri_band = rng.standard_normal((3, n)) + np.array([[0.0], [6.0], [0.0]])
    wide_band = rng.standard_normal((6, n)) + np.array([[0.0], [0.0], [0.0], [9.0], [0.0], [0.0]])
    h1 = np.vstack([0.5 * rng.standard_normal(n), 4 + np.abs(rng.standard_normal(n))])  # dominant: definite
    h2 = np.vstack([0.5 * rng.standard_normal((2, n)), 8 + np.abs(rng.standard_normal(n))])
    c2 = sla.cholesky_banded(h2)
    x = rng.standard_normal((n, n))
    sym = x + x.T
    tri = np.diag(tri_band[1]) + np.diag(tri_band[0, 1:], 1) + np.diag(tri_band[2, :-1], -1)
    m = module
    return {
        "solve_banded (1,1)": lambda: m.solve_banded((1, 1), tri_band, b),
        "solve_banded (2,3)": lambda: m.solve_banded((2, 3), wide_band, b),
        "solveh_banded u=1": lambda: m.solveh_banded(h1, b),
        "solveh_banded u=2": lambda: m.solveh_banded(h2, b),
        "cholesky_banded u=2": lambda: m.cholesky_banded(h2),
        "cho_solve_banded u=2": lambda: m.cho_solve_banded((c2, False), b),
        "ldl": lambda: m.ldl(sym),
        "solve (tridiagonal detected)": lambda: m.solve(tri, b),
        "solve assume_a='tridiagonal'": lambda: m.solve(tri, b, assume_a="tridiagonal"),
        "solve assume_a='banded'": lambda: m.solve(tri, b, assume_a="banded"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds, short samples")
    parser.add_argument("--sizes", default=None, help="comma-separated orders (default: 8,32,128,512)")
    parser.add_argument("--only", default=None, help="a substring of the row names to run")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 15, quick 9)")
    args = parser.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else SIZES
    rounds, budget = (9, 0.004) if args.quick else (15, 0.02)
    rounds = args.rounds or rounds
    bench_linalg.MODE = "interleaved"
    if hasattr(os, "getloadavg"):
        print(f"load average at start: {os.getloadavg()} on {os.cpu_count()} cores")
    rows = []
    for n in sizes:
        ours, ref = _calls(nsl, n), _calls(sla, n)
        for name in ours:
            if args.only and args.only not in name:
                continue
            t = compare({"scipy": ref[name], "nvmathpy": ours[name]}, rounds, budget)
            ratio = statistics.median(s / o for s, o in zip(t["scipy"], t["nvmathpy"]))
            rows.append((name, n, statistics.median(t["scipy"]), statistics.median(t["nvmathpy"]), ratio))
    if hasattr(os, "getloadavg"):
        print(f"load average at end: {os.getloadavg()}")
    print()
    print("| call | n | scipy µs | nvmathpy µs | SciPy/nvmathpy |")
    print("|---|---:|---:|---:|---:|")
    for name, n, scipy_s, ours_s, ratio in sorted(rows, key=lambda r: (r[0], r[1])):
        flag = "" if ratio >= 1.0 else " **<1**"
        print(f"| {name} | {n} | {scipy_s * 1e6:.1f} | {ours_s * 1e6:.1f} | {ratio:.2f}x{flag} |")
    if rows:
        geo = math.exp(statistics.fmean(math.log(r[4]) for r in rows))
        print(f"\ngeometric mean SciPy/nvmathpy over {len(rows)} rows: {geo:.2f}x; "
              f"rows below 1.0x: {sum(r[4] < 1.0 for r in rows)}")


if __name__ == "__main__":
    main()
