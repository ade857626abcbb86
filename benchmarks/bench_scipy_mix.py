"""The scipy.linalg call mix of real code: nvmathpy.scipy.linalg beside scipy.linalg.

Run (unset the OpenBLAS overrides for this command only)::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_scipy_mix.py [--quick]

The mix is what a widely used ML library's test suite calls most (issue 21): ``cho_solve``
of ``cho_factor``, ``solve`` (of a general and of a symmetric positive definite matrix, which
SciPy 1.17 detects and factors by Cholesky), ``inv`` of the latter, ``cholesky``,
``solve_triangular``, ``svd``, ``lu``, ``qr``, ``norm``, ``pinv``, ``pinvh``, ``orth``, ``null_space`` (of the top half of the rows), and
the general eigenproblem and RQ (``eig``, ``eigvals``, ``rq``) and the matrix exponential
(``expm``, of a matrix scaled by ``1/sqrt(n)``), on C-ordered float64 matrices of orders 2 to 512.

Two kinds of row per function and order:

- **steady**: repeated calls on one shape, SciPy and nvmathpy interleaved in rounds in one
  process (so machine noise hits both alike); the median seconds per call of each and the
  min-max spread over the rounds.
- **first call**: the first call on a shape that process has not seen, in a fresh process per
  function and round (each library first called once on two other orders, so imports, the
  compiled extension, per-dtype lookups and the start of OpenBLAS's thread pools are already
  paid, as in a program that calls it again on a new shape); which library goes first alternates with the round, over an even number
  of rounds (the interleaved rounds' count, rounded up), so that each goes first equally often.

The ratio is SciPy's time over nvmathpy's (> 1: nvmathpy is faster), the median of the
per-round ratios; the geometric mean of the ratios is taken over the whole mix.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_linalg import SETTLE, calibration_line, compare  # noqa: E402  (also: this run's own nvmathpy cache dir)

import numpy as np  # noqa: E402
import scipy.linalg as sla  # noqa: E402
from threadpoolctl import threadpool_info  # noqa: E402

import nvmathpy.scipy.linalg as nsl  # noqa: E402
from nvmathpy.linalg.lapack import fast_module  # noqa: E402

SIZES = (2, 3, 5, 8, 16, 32, 64, 128, 256, 512)
QUICK_SIZES = (2, 8, 32, 128)
#: The orders each first-call process warms up on (in none of the sizes above): a small one
#: (imports, the compiled extension, per-dtype look-ups) and one large enough that OpenBLAS
#: starts its thread pools - a one-time cost of the process, paid by whichever library makes
#: the first threaded call, not a cost of the new shape.
WARM_ORDERS = (7, 300)


def _spd(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal((n, n))
    return x @ x.T + n * np.eye(n)


def _calls(module: Any, name: str, n: int, seed: int = 0) -> Callable[[], object]:
    """The call ``name`` of the mix, on order-``n`` operands, through ``module``."""
    rng = np.random.default_rng(seed + n)
    a = rng.standard_normal((n, n)) + 2 * np.sqrt(n) * np.eye(n)
    b = rng.standard_normal(n)
    s = _spd(rng, n)
    low = np.tril(a)
    g = rng.standard_normal((n, n)) / np.sqrt(n)
    m = module
    return {
        "cho_solve(cho_factor)": lambda: m.cho_solve(m.cho_factor(s), b),
        "solve": lambda: m.solve(a, b),
        "solve (positive definite)": lambda: m.solve(s, b),
        "inv (positive definite)": lambda: m.inv(s),
        "cholesky": lambda: m.cholesky(s),
        "solve_triangular": lambda: m.solve_triangular(low, b, lower=True),
        "svd": lambda: m.svd(a),
        "lu": lambda: m.lu(a),
        "qr": lambda: m.qr(a),
        "norm (matrix)": lambda: m.norm(a),
        "norm (vector)": lambda: m.norm(b),
        "norm (axis=1)": lambda: m.norm(a, axis=1),
        "pinv": lambda: m.pinv(a),
        "pinvh": lambda: m.pinvh(s),
        "orth": lambda: m.orth(a),
        "null_space": lambda: m.null_space(a[: max(1, n // 2)]),
        "eig": lambda: m.eig(a),
        "eigvals": lambda: m.eigvals(a),
        "rq": lambda: m.rq(a),
        "expm": lambda: m.expm(g),
    }[name]


#: The mix: its row names, and the scipy.linalg name each needs nvmathpy to export.
MIX = {"cho_solve(cho_factor)": "cho_solve", "solve": "solve", "solve (positive definite)": "solve",
       "inv (positive definite)": "inv", "cholesky": "cholesky",
       "solve_triangular": "solve_triangular", "svd": "svd", "lu": "lu", "qr": "qr", "norm (matrix)": "norm",
       "norm (vector)": "norm", "norm (axis=1)": "norm", "pinv": "pinv", "pinvh": "pinvh",
       "orth": "orth", "null_space": "null_space", "eig": "eig", "eigvals": "eigvals", "rq": "rq",
       "expm": "expm"}


def functions() -> list[str]:
    """The mix's rows whose function nvmathpy.scipy.linalg accelerates (exports)."""
    return [row for row, name in MIX.items() if name in nsl.__all__]


def first_call_worker(name: str, sizes: list[int], scipy_first: bool) -> None:
    """In a fresh process: warm both libraries up on other orders, then time the first call
    on each of ``sizes``; prints ``{size: [scipy seconds, nvmathpy seconds]}`` as JSON."""
    fast_module(wait=True)
    order = (("scipy", sla), ("nvmathpy", nsl)) if scipy_first else (("nvmathpy", nsl), ("scipy", sla))
    for warm in WARM_ORDERS:
        for _, module in order:
            _calls(module, name, warm)()
    out = {}
    for n in sizes:
        seconds = {}
        for label, module in order:
            call = _calls(module, name, n)
            start = time.perf_counter()
            call()
            seconds[label] = time.perf_counter() - start
        out[n] = [seconds["scipy"], seconds["nvmathpy"]]
    print(json.dumps(out))


def first_calls(name: str, sizes: tuple[int, ...], rounds: int, threads: int | None) -> dict[int, list[list[float]]]:
    """``{size: [[scipy, nvmathpy] seconds per round]}`` from one fresh process per round."""
    env = dict(os.environ)
    samples: dict[int, list[list[float]]] = {n: [] for n in sizes}
    for r in range(rounds):
        args = [sys.executable, __file__, "--first-call-worker", name, "--sizes", ",".join(map(str, sizes))]
        if threads is not None:
            args += ["--threads", str(threads)]
        if r % 2:
            args.append("--scipy-first")
        out = subprocess.run(args, capture_output=True, text=True, env=env, check=True).stdout
        for n, pair in json.loads(out.splitlines()[-1]).items():
            samples[int(n)].append(pair)
    return samples


ROWS: list[tuple] = []


def _row(name: str, kind: str, n: int, scipy_s: list[float], ours_s: list[float]) -> None:
    ratio = statistics.median(s / o for s, o in zip(scipy_s, ours_s))
    ROWS.append((name, kind, n, scipy_s, ours_s, ratio))


def _us(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1e6:.1f} ({min(samples) * 1e6:.1f}–{max(samples) * 1e6:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"orders {QUICK_SIZES}, 3 rounds, short samples")
    parser.add_argument("--sizes", default=None, help="comma-separated orders (default: 2 to 512)")
    parser.add_argument("--only", default=None, help="comma-separated function names of the mix to run")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 7, quick 3)")
    parser.add_argument("--no-first-call", action="store_true", help="skip the first-call rows")
    parser.add_argument("--threads", type=int, default=None,
                        help="limit BLAS/LAPACK threads for both libraries, first-call processes too "
                             "(default: the libraries' own)")
    parser.add_argument("--first-call-worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--scipy-first", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else QUICK_SIZES if args.quick else SIZES
    if args.threads is not None:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads)
    if args.first_call_worker:
        first_call_worker(args.first_call_worker, list(sizes), args.scipy_first)
        return
    rounds = args.rounds or (3 if args.quick else 7)
    budget = 0.004 if args.quick else 0.02
    names = functions()
    if args.only:
        wanted = args.only.split(",")
        names = [f for f in names if f in wanted or MIX[f] in wanted]
    blas = [f"{i.get('internal_api')} {i.get('version')} threads={i.get('num_threads')} ({i.get('filepath')})"
            for i in threadpool_info() if i.get("user_api") == "blas"]  # after any --threads limit
    print(f"BLAS: {'; '.join(blas)}")
    print(f"numpy {np.__version__}, scipy {__import__('scipy').__version__}; "
          f"environment: { {k: os.environ.get(k) for k in ('OPENBLAS_CORETYPE', 'OPENBLAS_L2_SIZE')} }")
    if hasattr(os, "getloadavg"):
        print(f"load average at start: {os.getloadavg()} on {os.cpu_count()} cores")
    fast_module(wait=True)  # the compiled small-call extension: built once, cached on disk
    for name in names:
        for n in sizes:
            ours, ref = _calls(nsl, name, n), _calls(sla, name, n)
            ours(), ref()
            t = compare({"scipy": ref, "nvmathpy": ours}, rounds, budget, SETTLE if n >= 256 else 0.0)
            _row(name, "steady", n, t["scipy"], t["nvmathpy"])
        if not args.no_first_call:
            # an even count: each library goes first in as many rounds (whichever calls a shared
            # LAPACK first on a new order pays its one-time costs)
            for n, pairs in first_calls(name, sizes, rounds + rounds % 2, args.threads).items():
                _row(name, "first call", n, [p[0] for p in pairs], [p[1] for p in pairs])
    if hasattr(os, "getloadavg"):
        print(f"load average at end: {os.getloadavg()}")
    print()
    print("| function | call | n | scipy µs median (min–max) | nvmathpy µs median (min–max) | SciPy/nvmathpy |")
    print("|---|---|---:|---:|---:|---:|")
    for name, kind, n, scipy_s, ours_s, ratio in sorted(ROWS, key=lambda r: (r[0], r[1] != "steady", r[2])):
        flag = "" if ratio >= 1.0 else " **<1**"
        print(f"| {name} | {kind} | {n} | {_us(scipy_s)} | {_us(ours_s)} | {ratio:.2f}x{flag} |")
    print()
    for kind in ("steady", "first call"):
        ratios = [r[5] for r in ROWS if r[1] == kind]
        if ratios:
            geo = math.exp(statistics.fmean(math.log(r) for r in ratios))
            print(f"geometric mean SciPy/nvmathpy over the mix ({kind}, {len(ratios)} rows): {geo:.2f}x; "
                  f"rows below 1.0x: {sum(r < 1.0 for r in ratios)}")
    print(calibration_line() + " (the steady rows' process)")


if __name__ == "__main__":
    main()
