"""``inv`` and ``det`` of one small matrix: nvmathpy.scipy.linalg beside scipy.linalg (issue 21).

Run (unset the OpenBLAS overrides for this command only)::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_inv_det.py [inv] [det]

One markdown row per function, order (2 to 64) and dtype (float32/64, complex64/128): the
median microseconds per call of each library over interleaved rounds in this one process,
the median of the per-round ratios (SciPy's time over nvmathpy's: > 1, nvmathpy is faster)
and their min-max spread.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import numpy as np
import scipy.linalg as sla

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_linalg  # noqa: E402

import nvmathpy.scipy.linalg as nla  # noqa: E402

ORDERS = (2, 4, 8, 16, 32, 64)
DTYPES = (np.float32, np.float64, np.complex64, np.complex128)


def main() -> None:
    bench_linalg.MODE = "interleaved"  # single calls alternating in rounds: noise hits both alike
    rng = np.random.default_rng(0)
    print("| function | order | dtype | nvmathpy µs | SciPy µs | ratio | ratio spread |")
    print("|---|---|---|---|---|---|---|")
    for name in sys.argv[1:] or ("inv", "det"):
        ours, theirs = getattr(nla, name), getattr(sla, name)
        for dtype in DTYPES:
            for n in ORDERS:
                a = rng.standard_normal((n, n)) + n * np.eye(n)
                if np.dtype(dtype).kind == "c":
                    a = a + 1j * rng.standard_normal((n, n))
                a = a.astype(dtype)
                contenders = {"nvmathpy": lambda: ours(a), "scipy": lambda: theirs(a)}
                t = bench_linalg.compare(contenders, rounds=11, budget=0.02)
                ratios = [s / m for s, m in zip(t["scipy"], t["nvmathpy"])]
                print(f"| {name} | {n} | {np.dtype(dtype).name} | {statistics.median(t['nvmathpy']) * 1e6:.1f} | "
                      f"{statistics.median(t['scipy']) * 1e6:.1f} | {statistics.median(ratios):.2f} | "
                      f"{min(ratios):.2f}–{max(ratios):.2f} |", flush=True)


if __name__ == "__main__":
    main()
