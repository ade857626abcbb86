"""Dense solvers: nvmathpy beside scipy.linalg and numpy.linalg, in one process.

Run (unset the OpenBLAS overrides for this command only)::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_linalg.py [--quick]
        [--mode interleaved] [--only large]

Each row times every contender in rounds (so machine noise hits all alike) and reports
medians in microseconds and the speed-up ``reference / nvmathpy`` (> 1: nvmathpy is faster;
the median of the per-round ratios, and their spread min-max), against the target where the
project set one. Two modes:

- ``settled`` (the default): a sample is many back-to-back calls of one contender, and the
  large rows pause before each (see :func:`compare`): each contender as it runs alone.
- ``interleaved``: a round alternates single calls of the contenders with no pause, at least 9
  rounds (:func:`nvmathpy.plan.calibration.alternating_rounds`): each call runs right after a
  call of another library, whose thread pool may still be spinning - as in a program that mixes
  nvmathpy with SciPy and NumPy.

Prints the BLAS in use, the machine load, and a markdown table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
_CACHE = tempfile.TemporaryDirectory(prefix="nvmathpy-bench-")  # wisdom of this run only, removed at exit
os.environ.setdefault("NVMATHPY_CACHE_DIR", _CACHE.name)

import numpy as np  # noqa: E402
import scipy.linalg as sla  # noqa: E402
from scipy.linalg import lapack  # noqa: E402
from threadpoolctl import threadpool_info  # noqa: E402

import nvmathpy.linalg as nl  # noqa: E402
import nvmathpy.scipy.linalg as nsl  # noqa: E402
from nvmathpy.linalg.solvers.cpu._fast_lapack import fast_module  # noqa: E402
from nvmathpy.linalg.solvers.cpu._lookahead_cholesky import potrf_of, potrf_order  # noqa: E402
from nvmathpy.linalg.solvers.cpu._lookahead_lu import getrf_of, getrf_order  # noqa: E402
from nvmathpy.linalg.solvers.plans.solve import Solve  # noqa: E402
from nvmathpy.plan.calibration import alternating_rounds, auto_enabled, entries  # noqa: E402


def timed(fn: Callable[[], object], budget: float) -> float:
    """Seconds per call: enough back-to-back calls to fill ``budget`` seconds."""
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    calls = max(1, min(20000, int(budget / once)))
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


#: ``"settled"`` or ``"interleaved"`` (``--mode``).
MODE = "settled"
#: The fewest rounds of the interleaved mode.
INTERLEAVED_ROUNDS = 9


def compare(contenders: dict[str, Callable[[], object]], rounds: int, budget: float,
            settle: float = 0.0) -> dict[str, list[float]]:
    """Seconds per call of each contender in each of ``rounds`` interleaved rounds.

    In the interleaved mode, a round is about ``budget`` seconds of each contender's single
    calls alternating with the others' (at least :data:`INTERLEAVED_ROUNDS` rounds, no pause).
    In the settled mode, ``settle``: seconds of idleness before each sample. SciPy's and NumPy's OpenBLAS each keep
    their worker threads spinning for a while after a call; without a pause, a contender on one
    library pays for the previous contender's spinning threads (up to 2x at n=1024 here), which
    measures the interleaving, not the contender. The pipeline row measures that effect itself."""
    if MODE == "interleaved":
        start = time.perf_counter()
        for fn in contenders.values():
            fn()
        once = (time.perf_counter() - start) / len(contenders)
        calls = max(1, min(2000, int(budget / max(once, 1e-7))))
        return alternating_rounds(contenders, max(rounds, INTERLEAVED_ROUNDS), calls)
    samples: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            if settle:
                time.sleep(settle)
            samples[name].append(timed(fn, budget))
    return samples


ROWS: list[tuple] = []


def row(case: str, samples: dict[str, list[float]], ours: str, ref: str, target: str = "") -> None:
    """Record medians and the speed-up ``ref / ours`` (the median of the per-round ratios,
    which a burst of load from other processes distorts least, and their min-max)."""
    ratios = [r / o for r, o in zip(samples[ref], samples[ours])]
    ROWS.append((case, ours, statistics.median(samples[ours]) * 1e6, ref, statistics.median(samples[ref]) * 1e6,
                 f"{statistics.median(ratios):.2f}x", f"{min(ratios):.2f}-{max(ratios):.2f}", len(ratios), target))


def rng_matrix(rng, n, batch=()):
    return rng.standard_normal(batch + (n, n)) + np.sqrt(n) * 2 * np.eye(n)


def spd(rng, n):
    x = rng.standard_normal((n, n))
    return x @ x.T + n * np.eye(n)


def bench_factored_solves(rng, rounds, budget):
    for n in (4, 8, 16):
        b = rng.standard_normal(n)
        a, s = rng_matrix(rng, n), spd(rng, n)
        f, c = sla.lu_factor(a), sla.cho_factor(s)
        cases = [
            ("LU", nl.LU(a), "dgetrs", lambda: lapack.dgetrs(f[0], f[1], b), "lu_solve",
             lambda: nsl.lu_solve(f, b), lambda: sla.lu_solve(f, b)),
            ("Cholesky", nl.Cholesky(s, lower=False), "dpotrs", lambda: lapack.dpotrs(c[0], b, 0), "cho_solve",
             lambda: nsl.cho_solve(c, b), lambda: sla.cho_solve(c, b)),
        ]
        for name, plan, raw_name, raw, fn_name, ours_fn, scipy_fn in cases:
            plan.solve(b)  # factor once
            t = compare({
                f"raw {raw_name}": raw,
                f"nvmathpy {name}.solve": lambda plan=plan: plan.solve(b),
                f"nvmathpy.scipy {fn_name}": ours_fn,
                f"scipy {fn_name}": scipy_fn,
            }, rounds, budget)
            case = f"{name} solve with factors n={n}"
            row(case, t, f"nvmathpy {name}.solve", f"raw {raw_name}", f">= 0.5x (<= 2x {raw_name})")
            row(case, t, f"nvmathpy {name}.solve", f"scipy {fn_name}", ">= 4x")
            row(case, t, f"nvmathpy.scipy {fn_name}", f"scipy {fn_name}", ">= 4x")


def bench_one_shot(rng, rounds, budget):
    for n in (4, 16):
        a, b = rng_matrix(rng, n), rng.standard_normal(n)
        t = compare({
            "nvmathpy solve": lambda: nl.solve(a, b),
            "nvmathpy.scipy solve": lambda: nsl.solve(a, b),
            "numpy solve": lambda: np.linalg.solve(a, b),
            "scipy solve": lambda: sla.solve(a, b),
        }, rounds, budget)
        row(f"one-shot solve n={n}", t, "nvmathpy solve", "numpy solve", ">= 1x" if n == 4 else "")
        row(f"one-shot solve n={n}", t, "nvmathpy solve", "scipy solve", ">= 5x" if n == 4 else "")
        row(f"one-shot solve n={n} (scipy semantics: structure detection, rcond warning)", t,
            "nvmathpy.scipy solve", "scipy solve", ">= 5x" if n == 4 else "")


#: Idle seconds before each sample of the large rows (see :func:`compare`).
SETTLE = 0.3


def pairs(rows: list[tuple[str, str, Callable[[], object], str, Callable[[], object], str]], rounds: int,
          budget: float, settle: float = 0.0) -> None:
    """One row per ``(case, ours, our call, reference, its call, target)``, each pair timed on
    its own (:func:`compare`): in the interleaved mode each call of one side then runs right
    after a call of the other, never after a third contender's (whose thread pool would tax
    whichever side follows it in the cycle, the same one every round)."""
    for case, ours, our_call, ref, ref_call, target in rows:
        row(case, compare({ours: our_call, ref: ref_call}, rounds, budget, settle), ours, ref, target)


def lu_rows(rng, n, rounds, budget):
    """LU factor+solve and the drop-in's solve, C-ordered, 4 right-hand sides; returns (a, b)."""
    a, b = rng_matrix(rng, n), rng.standard_normal((n, 4))
    pairs([(f"LU factor+solve n={n}, C-ordered, 4 rhs", "nvmathpy LU(a).solve(b)", lambda: nl.LU(a).solve(b),
            "scipy lu_factor+lu_solve", lambda: sla.lu_solve(sla.lu_factor(a), b), ">= 1.3x"),
           (f"solve n={n}, C-ordered, 4 rhs", "nvmathpy.scipy solve", lambda: nsl.solve(a, b),
            "scipy solve", lambda: sla.solve(a, b), ">= 1.3x")], rounds, budget, SETTLE)
    return a, b


def cholesky_rows(rng, n, b, rounds, budget):
    """Cholesky factor+solve (both triangles) and the drop-in's cholesky; returns the matrix."""
    s = spd(rng, n)
    # Each side reads the same triangle: SciPy's cho_factor reads the upper one by default.
    pairs([(f"Cholesky factor+solve n={n}, C-ordered, upper triangle (SciPy's default), 4 rhs",
            "nvmathpy Cholesky(a, lower=False).solve(b)", lambda: nl.Cholesky(s, lower=False).solve(b),
            "scipy cho_factor+cho_solve", lambda: sla.cho_solve(sla.cho_factor(s), b), ">= 1.3x"),
           (f"Cholesky factor+solve n={n}, C-ordered, lower triangle, 4 rhs",
            "nvmathpy Cholesky(a).solve(b)", lambda: nl.Cholesky(s).solve(b),
            "scipy cho_factor(lower=True)+cho_solve", lambda: sla.cho_solve(sla.cho_factor(s, lower=True), b), ""),
           (f"cholesky n={n}, C-ordered", "nvmathpy.scipy cholesky", lambda: nsl.cholesky(s),
            "scipy cholesky", lambda: sla.cholesky(s), "")], rounds, budget, SETTLE)
    return s


def eigh_rows(h, rounds, budget):
    nsl.eigh(h)
    # every round: one sample of each swings widely on a shared machine
    pairs([(f"eigh n={h.shape[0]}", "nvmathpy.scipy eigh", lambda: nsl.eigh(h),
            "scipy eigh (default evr)", lambda: sla.eigh(h), ">= 1.2x"),
           (f"eigh n={h.shape[0]}", "nvmathpy eigh", lambda: nl.eigh(h), "numpy eigh", lambda: np.linalg.eigh(h), "")],
          rounds, budget, SETTLE)


def bench_targets(rng, rounds, budget):
    """The issue's target cases: LU and solve, Cholesky at n = 1024, eigh at n = 512 and 1024;
    first, a control: SciPy's LU factor+solve against itself, whose spread is the machine's
    noise (a ratio of other rows inside it tells nothing)."""
    a, b = rng_matrix(rng, 1024), rng.standard_normal((1024, 4))
    pairs([("control: scipy LU factor+solve n=1024 against itself", "scipy lu_factor+lu_solve (1)",
            lambda: sla.lu_solve(sla.lu_factor(a), b), "scipy lu_factor+lu_solve (2)",
            lambda: sla.lu_solve(sla.lu_factor(a), b), "1.00x")], rounds, budget, SETTLE)
    _, b = lu_rows(rng, 1024, rounds, budget)
    cholesky_rows(rng, 1024, b, rounds, budget)
    for n in (512, 1024):
        s = spd(rng, n)
        eigh_rows((s + s.T) / 2, rounds, budget)


def bench_large(rng, n, rounds, budget):
    a, b = lu_rows(rng, n, rounds, budget)
    m = rng.standard_normal((300, 300))  # a pipeline step: a NumPy product, then the factor+solve
    t = compare({
        "nvmathpy: a NumPy product, then LU(a).solve(b)": lambda: (m @ m, nl.LU(a).solve(b)),
        "scipy: a NumPy product, then lu_factor+lu_solve": lambda: (m @ m, sla.lu_solve(sla.lu_factor(a), b)),
    }, rounds, budget, SETTLE)
    row(f"pipeline: 300^2 NumPy product + LU factor+solve n={n}", t, "nvmathpy: a NumPy product, then LU(a).solve(b)",
        "scipy: a NumPy product, then lu_factor+lu_solve", "")
    s = cholesky_rows(rng, n, b, rounds, budget)
    eigh_rows((s + s.T) / 2, rounds, budget)
    m = rng.standard_normal((n // 2, n // 4))
    bm = rng.standard_normal(n // 2)
    lst = nl.Lstsq(m)  # heuristic choice: factor once by SVD, then two products per solve
    lst.solve(bm)  # factored once; every later solve reuses the factors
    t = compare({
        f"nvmathpy Lstsq.solve ({lst.candidate}, factored)": lambda: lst.solve(bm),
        "numpy lstsq": lambda: np.linalg.lstsq(m, bm, rcond=None),
        "nvmathpy.scipy lstsq gelsy": lambda: nsl.lstsq(m, bm, lapack_driver="gelsy"),
        "scipy lstsq (default gelsd)": lambda: sla.lstsq(m, bm),
    }, max(1, rounds // 2), budget)
    row(f"lstsq {n // 2}x{n // 4}, solve many", t, f"nvmathpy Lstsq.solve ({lst.candidate}, factored)", "numpy lstsq")
    row(f"lstsq {n // 2}x{n // 4}", t, "nvmathpy.scipy lstsq gelsy", "scipy lstsq (default gelsd)")
    sv = rng.standard_normal((n // 2, n // 2))
    t = compare({
        "nvmathpy.scipy svd": lambda: nsl.svd(sv),
        "scipy svd": lambda: sla.svd(sv),
    }, max(1, rounds // 2), budget)
    row(f"svd {n // 2}x{n // 2}, C-ordered", t, "nvmathpy.scipy svd", "scipy svd", "")


def bench_factor_engines(rng, orders, rounds, budget):
    """The LU and Cholesky factorizations the plans choose among (on a C-ordered matrix's
    transposed view, as the plans call them; Cholesky reading SciPy's default triangle) beside
    ``scipy.linalg.lu_factor`` / ``cho_factor``, for each order: the data behind
    :func:`~nvmathpy.linalg.solvers.cpu._lookahead_lu.getrf_order`'s and
    :func:`~nvmathpy.linalg.solvers.cpu._lookahead_cholesky.potrf_order`'s first choices."""
    for dtype in ("float64", "float32"):
        for n in orders:
            a, s = rng_matrix(rng, n).astype(dtype), spd(rng, n).astype(dtype)
            for kind, order, of, call, ref, ref_call in (
                    ("getrf", getrf_order, getrf_of, lambda f: f(a.T), "scipy lu_factor", lambda: sla.lu_factor(a)),
                    ("potrf", potrf_order, potrf_of, lambda f: f(s.T, lower=1, clean=0), "scipy cho_factor",
                     lambda: sla.cho_factor(s))):
                algorithms = order(n, dtype)
                names = {alg: f"{alg or 'openblas'} {kind}" + (" (first choice)" if alg == algorithms[0] else "")
                         for alg in algorithms}
                contenders = {names[alg]: (lambda f=of(alg, dtype), call=call: call(f)) for alg in algorithms}
                contenders[ref] = ref_call
                t = compare(contenders, rounds, budget, SETTLE)
                for alg in algorithms:
                    row(f"{kind} {dtype} n={n}", t, names[alg], ref)


def bench_batched(rng, count, rounds, budget):
    for n in (3, 4, 8, 16):
        a = rng_matrix(rng, n, (count,))
        b = rng.standard_normal((count, n, 1))
        plan = Solve(a, b)
        plan.autotune(effort="exhaustive", repeats=3)  # winner goes to wisdom; nl.solve uses it
        t = compare({
            f"nvmathpy solve ({plan.candidate})": lambda: nl.solve(a, b),
            "numpy batched solve": lambda: np.linalg.solve(a, b),
        }, rounds, budget)
        row(f"batched solve B={count} n={n}", t, f"nvmathpy solve ({plan.candidate})", "numpy batched solve",
            ">= 4x" if n == 3 else ">= 1x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and smaller large matrices")
    parser.add_argument("--threads", type=int, default=None,
                        help="limit BLAS/LAPACK threads for every contender (default: the libraries' own)")
    parser.add_argument("--only", choices=("factored", "one-shot", "batched", "large", "engines", "targets"),
                        default=None, help="run one section only (engines, targets: only when asked; engines: the LU "
                                           "and Cholesky algorithms per order; targets: the speed targets' cases)")
    parser.add_argument("--mode", choices=("settled", "interleaved"), default="settled",
                        help="settled: back-to-back calls, pauses before the large rows; interleaved: alternating "
                             "single calls, no pauses, >= 9 rounds (see the module docstring)")
    args = parser.parse_args()
    global MODE
    MODE = args.mode
    if args.threads is not None:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads)
    rounds, budget, n_large, count = (5, 0.01, 512, 10_000) if args.quick else (9, 0.03, 1024, 10_000)
    blas = [f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')} threads={i.get('num_threads')}"
            for i in threadpool_info() if i.get("user_api") == "blas"]  # after any --threads limit
    print(f"BLAS: {'; '.join(blas)}")
    env = {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    print(f"environment: {env}")
    if hasattr(os, "getloadavg"):
        print(f"load average at start: {os.getloadavg()} on {os.cpu_count()} cores")
    # The small-call extension builds on a background thread on first use (seconds on a slow
    # disk; calls take the Python paths meanwhile): time the steady state, not the build.
    fast_module(wait=True)
    rng = np.random.default_rng(0)
    sections = {
        "factored": lambda: bench_factored_solves(rng, rounds, budget),
        "one-shot": lambda: bench_one_shot(rng, rounds, budget),
        "batched": lambda: bench_batched(rng, count, rounds, budget),
        "large": lambda: bench_large(rng, n_large, rounds, max(budget, 0.05)),
        "engines": lambda: bench_factor_engines(rng, (256, 512, 768, 1024, 1536, 2048), rounds, max(budget, 0.05)),
        "targets": lambda: bench_targets(rng, rounds, max(budget, 0.05)),
    }
    print(f"mode: {args.mode}")
    for name, run in sections.items():
        if args.only == name or (args.only is None and name not in ("engines", "targets")):
            run()
    if hasattr(os, "getloadavg"):
        print(f"load average at end: {os.getloadavg()}")
    print(calibration_line())
    print()
    print("| case | nvmathpy | us | reference | us | speed-up | spread (rounds) | target |")
    print("|---|---|---:|---|---:|---:|---|---|")
    for case, ours, t_ours, ref, t_ref, ratio, spread, count, target in ROWS:
        print(f"| {case} | {ours} | {t_ours:.2f} | {ref} | {t_ref:.2f} | {ratio} | {spread} ({count}) | {target} |")


def calibration_line() -> str:
    """What this run's calibration chose (automatic, on first need, in this run's cache dir)."""
    return (f"calibration (automatic {'on' if auto_enabled() else 'off'}): "
            + (", ".join(f"{e['name']} -> {e['value']['first']}" for e in entries()) or "none"))


if __name__ == "__main__":
    main()
