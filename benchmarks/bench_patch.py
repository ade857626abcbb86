"""What the switch costs: per call, a patched name against nvmathpy's function called directly
and the peer's original; once, ``patch()``/``unpatch()`` with a realistic set of modules imported.

Per-call cases (small problems, where overhead shows): ``scipy.linalg.solve`` and ``cho_solve``
(n=8), ``numpy.fft.rfft`` (n=64) and ``scipy.fft.rfft`` (n=64, through the global uarray backend
while ``scipy.fft`` is patched). Each round times every variant of a case back to back (a
block of calls, per-call mean), rounds interleaved; medians over rounds with the min-max spread,
and the ratios. Then the functions :data:`nvmathpy.patching.NUMPY_LINALG_EXACT` lists, each
called directly beside NumPy's at orders 2-128 (the same interleaved blocks): what decides
which of them ``patch("numpy.linalg")`` installs (:data:`~nvmathpy.patching.NUMPY_LINALG_PATCHED`). ``patch``/``unpatch`` are timed over all four namespaces after importing
scipy.signal/optimize/stats/sparse.linalg/interpolate (their modules are all swept).

Run (CPU benchmarks only, with these two variables unset)::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_patch.py [--rounds 15]
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


def _per_call(fn: Callable[[], Any], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--number", type=int, default=2000, help="calls per timed block")
    args = parser.parse_args()

    import scipy.fft
    import scipy.interpolate  # noqa: F401 - modules the patch sweeps
    import scipy.linalg
    import scipy.optimize  # noqa: F401
    import scipy.signal  # noqa: F401
    import scipy.sparse.linalg  # noqa: F401
    import scipy.stats  # noqa: F401

    import nvmathpy
    import nvmathpy.fft
    import nvmathpy.scipy.fft
    import nvmathpy.scipy.linalg

    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 8)) + 8 * np.eye(8)
    b, x = rng.standard_normal(8), rng.standard_normal(64)
    factor = scipy.linalg.cho_factor(a @ a.T)
    originals = [scipy.linalg.solve, scipy.linalg.cho_solve, np.fft.rfft]
    nvmathpy.patch("scipy.linalg", "numpy.fft")
    twins = [scipy.linalg.solve, scipy.linalg.cho_solve, np.fft.rfft]
    nvmathpy.unpatch()
    direct = [nvmathpy.scipy.linalg.solve, nvmathpy.scipy.linalg.cho_solve, nvmathpy.fft.rfft]
    calls = [lambda f: f(a, b), lambda f: f(factor, b), lambda f: f(x)]
    labels = ["scipy.linalg.solve n=8", "scipy.linalg.cho_solve n=8", "numpy.fft.rfft n=64"]
    cases: dict[str, dict[str, Callable[[], Any]]] = {
        label: {"original": (lambda o=o, c=c: c(o)), "nvmathpy direct": (lambda d=d, c=c: c(d)),
                "patched name": (lambda t=t, c=c: c(t))}
        for label, o, d, t, c in zip(labels, originals, direct, twins, calls)
    }
    sfft_rfft = scipy.fft.rfft
    cases["scipy.fft.rfft n=64"] = {"original": lambda: sfft_rfft(x), "nvmathpy direct": lambda: nvmathpy.scipy.fft.rfft(x),
                                    "patched name": lambda: sfft_rfft(x)}
    times: dict[tuple[str, str], list[float]] = {}
    for round_ in range(args.rounds + 1):  # round 0 warms up
        for label, variants in cases.items():
            for variant, fn in variants.items():
                patch_fft = label.startswith("scipy.fft") and variant == "patched name"
                if patch_fft:
                    nvmathpy.patch("scipy.fft")
                t = _per_call(fn, args.number)
                if patch_fft:
                    nvmathpy.unpatch("scipy.fft")
                if round_:
                    times.setdefault((label, variant), []).append(t)

    print("| call | original µs | nvmathpy direct µs | patched name µs | patched / direct | original / patched |")
    print("|---|---|---|---|---|---|")
    for label in cases:
        med = {v: statistics.median(times[(label, v)]) * 1e6 for v in ("original", "nvmathpy direct", "patched name")}
        spread = {v: (min(times[(label, v)]) * 1e6, max(times[(label, v)]) * 1e6) for v in med}
        cells = " | ".join(f"{med[v]:.2f} ({spread[v][0]:.2f}–{spread[v][1]:.2f})" for v in med)
        print(f"| {label} | {cells} | {med['patched name'] / med['nvmathpy direct']:.2f} | "
              f"{med['original'] / med['patched name']:.2f} |")

    exact_rows(args.rounds, rng)

    patch_t, unpatch_t = [], []
    for _ in range(args.rounds):
        start = time.perf_counter()
        nvmathpy.patch()
        middle = time.perf_counter()
        nvmathpy.unpatch()
        patch_t.append(middle - start)
        unpatch_t.append(time.perf_counter() - middle)
    print(f"\n{len(sys.modules)} modules imported; patch() of all four namespaces: median "
          f"{statistics.median(patch_t) * 1e3:.1f} ms ({min(patch_t) * 1e3:.1f}–{max(patch_t) * 1e3:.1f}); "
          f"unpatch(): {statistics.median(unpatch_t) * 1e3:.1f} ms ({min(unpatch_t) * 1e3:.1f}–{max(unpatch_t) * 1e3:.1f})")


def exact_rows(rounds: int, rng: np.random.Generator) -> None:
    """nvmathpy's exact ``numpy.linalg`` functions beside NumPy's, per order: the median ratio
    of nvmathpy's time to NumPy's over ``rounds`` interleaved rounds, with the spread."""
    import nvmathpy.linalg
    from nvmathpy.linalg.solvers.cpu._fast_lapack import fast_module
    from nvmathpy.patching import NUMPY_LINALG_EXACT, NUMPY_LINALG_PATCHED

    fast_module(wait=True)  # steady state: the compiled small calls are built once per machine
    orders = (2, 8, 32, 64, 128)
    print(f"\n| numpy.linalg function (nvmathpy time / NumPy's) | {' | '.join(f'n={n}' for n in orders)} | patched |")
    print("|---|" + "---|" * (len(orders) + 1))
    for name in NUMPY_LINALG_EXACT:
        cells = []
        for n in orders:
            a = rng.standard_normal((n, n))
            a = a + a.T if name in ("eigh", "eigvalsh") else a
            args = (a, rng.standard_normal(n)) if name == "solve" else (a,)
            ours, numpy_fn = getattr(nvmathpy.linalg, name), getattr(np.linalg, name)
            number = max(20, 80_000 // (n * n))
            ratios = [_per_call(lambda: ours(*args), number) / _per_call(lambda: numpy_fn(*args), number)
                      for _ in range(rounds)]
            cells.append(f"{statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f})")
        print(f"| {name} | {' | '.join(cells)} | {'yes' if name in NUMPY_LINALG_PATCHED else 'no'} |")


if __name__ == "__main__":
    main()
