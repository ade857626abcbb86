"""FFT benchmark: nvmathpy's tuned plans beside numpy.fft, scipy.fft, ducc0, pyFFTW and mkl_fft.

For each case and thread budget, nvmathpy autotunes once (effort "measure", wisdom in a
temporary NVMATHPY_CACHE_DIR), then *new* plans are made from wisdom - the process's FFTW
wisdom forgotten before each, so FFTW plans must come from the wisdom entry; the median of
three is the "hit plan" time, beside what FFTW_ESTIMATE planning costs a pyfftw.builders
user - and the last is timed. Each
library is also called directly the way a user would: ``numpy.fft``, ``scipy.fft`` with
``workers``, ``ducc0.fft.c2c/r2c`` with ``nthreads``, a ``pyfftw.FFTW`` object planned
with FFTW_MEASURE and ``threads`` under the planning time limit nvmathpy's tuning gets
(``FFTW_TIME_LIMIT`` seconds of ``nvmathpy.bench.suite_fft``: both plan FFTW under one budget),
and ``mkl_fft`` with MKL's thread count set (threadpoolctl)
and ``KMP_BLOCKTIME=0`` (else idle MKL threads spin and slow whatever runs next). Timings are
interleaved in rounds (the machine is noisy); medians are reported as a markdown table, with
the spread (min-max) of the per-round ratio to the best library. At the end: per thread
budget, the geometric mean over the cases of nvmathpy's time / the best library's time for
that case (numpy.fft aside: it runs scipy.fft's pocketfft), and the cases above 1.05. ``--mode settled`` (the
default) times a sample of back-to-back calls of one library at a time; ``--mode interleaved``
alternates single calls of every library and nvmathpy with no pause, at least 9 rounds
(:func:`nvmathpy.plan.calibration.alternating_rounds`), as in a program that mixes them.

``--plan calibrated`` (the default is ``tuned``, above) measures the plans a user gets with no
autotune call on a calibrated machine: the FFT calibration runs once first, in the bench's
temporary NVMATHPY_CACHE_DIR (``python -m nvmathpy tune fft --seconds N``, which prints the
library it puts first per kind, precision and size), then each case's nvmathpy plan is
``FFT(x, axes=..., execution=ExecutionCPU(threads)).plan()``, chosen by the heuristic (with the
calibrated values; never by wisdom), timed beside the libraries as above; the "hit plan ms"
column is then that plan's planning time.

Run (CPU benchmarks only, with these two variables unset)::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_fft.py [--quick] \
        [--mode interleaved] [--plan calibrated]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run from a checkout

from nvmathpy.bench.suite_fft import (  # noqa: E402
    CASES, FFTW_TIME_LIMIT, QUICK, TRIG_CASES, direct_runners, forget_fftw_wisdom, make_input, trig_runners,
)
from nvmathpy.fft._pyfftw import import_pyfftw  # noqa: E402
from nvmathpy.plan.calibration import alternating_rounds  # noqa: E402

#: The fewest rounds of the interleaved mode.
INTERLEAVED_ROUNDS = 9

def median_seconds(fn: Callable[[], Any], sample: float) -> Callable[[], float]:
    """A sampler: each call times enough back-to-back calls of ``fn`` to last ``sample`` seconds."""
    fn()
    start = time.perf_counter()
    fn()
    one = time.perf_counter() - start
    calls = max(1, min(2000, int(sample / max(one, 1e-7))))

    def measure() -> float:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - t0) / calls

    return measure


def interleaved(runners: dict[str, Callable[[], Any]], repeats: int, sample: float,
                mode: str = "settled") -> dict[str, list[float]]:
    """Seconds per call of each runner per round: ``settled``, a sample of back-to-back calls
    of each in turn; ``interleaved``, single calls of all alternating (:func:`alternating_rounds`)."""
    if mode == "interleaved":
        start = time.perf_counter()
        for fn in runners.values():
            fn()
        once = (time.perf_counter() - start) / len(runners)
        calls = max(1, min(2000, int(sample / max(once, 1e-7))))
        return alternating_rounds(runners, max(repeats, INTERLEAVED_ROUNDS), calls)
    samplers = {name: median_seconds(fn, sample) for name, fn in runners.items()}
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(repeats):
        for name, sampler in samplers.items():
            times[name].append(sampler())
    return times


def medians(rounds: dict[str, list[float]]) -> dict[str, float]:
    return {name: statistics.median(ts) for name, ts in rounds.items()}


def estimate_planning_seconds(x: np.ndarray, kind: str, axes: Any, threads: int) -> float | None:
    """What FFTW_ESTIMATE planning costs a pyfftw.builders user (median of 5)."""
    try:
        import_pyfftw()  # bound to its own FFTW libraries, whatever MKL loaded (see there)
        import pyfftw.builders
    except ImportError:
        return None
    build = pyfftw.builders.fftn if kind == "c2c" else pyfftw.builders.rfftn
    ax = tuple(range(x.ndim)) if axes is None else axes
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        build(x, axes=ax, threads=threads, planner_effort="FFTW_ESTIMATE")
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def nvmathpy_case(x: np.ndarray, kind: str, axes: Any, threads: int) -> tuple[dict[str, Callable[[], Any]], str, float, float]:
    """Tune once, set up the direct callers, then plan again from wisdom (FFTW's in-process
    wisdom forgotten first). Returns (runners incl. "nvmathpy", choice, tune s, wisdom-hit plan s)."""
    from nvmathpy.execution import ExecutionCPU
    from nvmathpy.fft import FFT

    forget_fftw_wisdom()
    t0 = time.perf_counter()
    with FFT(x, axes=axes, execution=ExecutionCPU(threads), options={"fftw_time_limit": FFTW_TIME_LIMIT}) as tuned:
        tuned.autotune(effort="measure", repeats=3)
    tune = time.perf_counter() - t0
    # pyfftw's MEASURE plan under the same time limit, from FFTW's state in a new process: what the
    # tuning's searches left in memory (never exported) would otherwise plan pyfftw with more time
    forget_fftw_wisdom()
    runners = direct_runners(x, kind, axes, threads, FFTW_TIME_LIMIT)
    FFT(x, axes=axes, execution=ExecutionCPU(threads)).plan().free()  # reads the updated wisdom file once
    hits = []
    for _ in range(3):  # as a new process would: FFTW knows nothing until the entry's wisdom is imported
        forget_fftw_wisdom()
        t0 = time.perf_counter()
        plan = FFT(x, axes=axes, execution=ExecutionCPU(threads)).plan()
        hits.append(time.perf_counter() - t0)
        assert plan.chosen_by == "wisdom", plan.chosen_by
    hit = statistics.median(hits)
    runners["nvmathpy"] = plan.execute
    return runners, str(plan.candidate), tune, hit


def calibrated_case(x: np.ndarray, kind: str, axes: Any, threads: int) -> tuple[dict[str, Callable[[], Any]], str, float, float]:
    """Set up the direct callers, then plan with no autotune (the heuristic, read with the
    calibrated values). Returns (runners incl. "nvmathpy", choice, 0.0, planning s)."""
    from nvmathpy.execution import ExecutionCPU
    from nvmathpy.fft import FFT

    forget_fftw_wisdom()
    runners = direct_runners(x, kind, axes, threads, FFTW_TIME_LIMIT)
    forget_fftw_wisdom()
    t0 = time.perf_counter()
    plan = FFT(x, axes=axes, execution=ExecutionCPU(threads)).plan()
    planning = time.perf_counter() - t0
    assert plan.chosen_by == "heuristic", plan.chosen_by
    runners["nvmathpy"] = plan.execute
    return runners, str(plan.candidate), 0.0, planning


def calibrate_fft(seconds: int) -> None:
    """Run the FFT calibration once (``python -m nvmathpy tune fft``) into NVMATHPY_CACHE_DIR."""
    print(f"calibration (python -m nvmathpy tune fft --seconds {seconds}):\n```")
    sys.stdout.flush()
    subprocess.run([sys.executable, "-m", "nvmathpy", "tune", "fft", "--seconds", str(seconds)], cwd=ROOT, check=True)
    print("```\n", flush=True)


def check(result: Any, x: np.ndarray, kind: str, axes: Any) -> float:
    ax = tuple(range(x.ndim)) if axes is None else axes
    wide = x.astype(np.complex128 if kind == "c2c" else np.float64)
    ref = np.fft.fftn(wide, axes=ax) if kind == "c2c" else np.fft.rfftn(wide, axes=ax)
    return float(np.linalg.norm(result - ref) / np.linalg.norm(ref))


def trig_main(budgets: list[int], repeats: int, sample: float) -> int:
    """The DCT/DST table: nvmathpy's tuned plans beside scipy.fft and ducc0 called directly."""
    import scipy.fft

    from nvmathpy.execution import ExecutionCPU
    from nvmathpy.fft import DCT, DST

    rng = np.random.default_rng(0)
    print("# DCT/DST benchmark (times in microseconds, medians of interleaved samples)\n")
    print("| case | transform | dtype | thr | scipy.fft | ducc0 | nvmathpy | choice | vs scipy.fft | vs best lib |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ratios: dict[int, list[float]] = {t: [] for t in budgets}
    for label, shape, axes in TRIG_CASES:
        for dtype in (np.float32, np.float64):
            x = rng.standard_normal(shape).astype(dtype)
            for transform, type_, plan_class in (("dct", 2, DCT), ("dst", 3, DST)):
                for threads in budgets:
                    with plan_class(x, type=type_, axes=axes, execution=ExecutionCPU(threads)) as tuned:
                        tuned.autotune(effort="measure", repeats=3)
                    plan = plan_class(x, type=type_, axes=axes, execution=ExecutionCPU(threads)).plan()  # from wisdom
                    ref = getattr(scipy.fft, transform + "n")(x.astype(np.float64), type=type_, axes=axes)
                    err = np.linalg.norm(plan.execute() - ref) / np.linalg.norm(ref)
                    assert err < (1e-4 if dtype == np.float32 else 1e-10), (label, err)
                    runners = trig_runners(x, transform, type_, axes, threads)
                    runners["nvmathpy"] = plan.execute
                    times = medians(interleaved(runners, repeats, sample))
                    best = min((n for n in times if n != "nvmathpy"), key=times.__getitem__)
                    ratios[threads].append(times["scipy.fft"] / times["nvmathpy"])
                    ducc = f"{times['ducc0'] * 1e6:.0f}" if "ducc0" in times else "-"
                    print(f"| {label} | {transform.upper()}-{'I' * min(type_, 3) if type_ < 4 else 'IV'} | "
                          f"{np.dtype(dtype).name} | {threads} | {times['scipy.fft'] * 1e6:.0f} | {ducc} | "
                          f"{times['nvmathpy'] * 1e6:.0f} | {plan.candidate} | {ratios[threads][-1]:.2f}x | "
                          f"{times['nvmathpy'] / times[best]:.2f}x ({best}) |", flush=True)
    print()
    for threads, values in ratios.items():
        gmean = math.exp(sum(map(math.log, values)) / len(values))
        print(f"geometric mean speed-up over scipy.fft (workers={threads}): {gmean:.2f}x over {len(values)} cases")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 cases, 2 threads, fewer repeats")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread budgets")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--trig", action="store_true", help="the DCT/DST cases instead of the FFT ones")
    parser.add_argument("--mode", choices=("settled", "interleaved"), default="settled",
                        help="settled: back-to-back samples per library; interleaved: alternating single calls, "
                             ">= 9 rounds (see the module docstring)")
    parser.add_argument("--plan", choices=("tuned", "calibrated"), default="tuned",
                        help="tuned: autotune each case, plan from wisdom; calibrated: calibrate once, "
                             "plan each case with no autotune (see the module docstring)")
    args = parser.parse_args()
    budgets = [2] if args.quick else [int(t) for t in args.threads.split(",")]
    repeats = args.repeats or (3 if args.quick else 5)
    sample = 0.005 if args.quick else 0.015
    os.environ["NVMATHPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="nvmathpy-bench-")
    os.environ.setdefault("KMP_BLOCKTIME", "0")  # MKL's OpenMP threads must not spin between calls
    if args.trig:
        return trig_main(budgets, repeats, sample)

    from threadpoolctl import threadpool_info

    from nvmathpy.execution import cpu_description
    from nvmathpy.fft._libraries import LIBRARIES, installed_libraries

    blas = [f"{i.get('internal_api')} {i.get('version')} {i.get('architecture', '')} threads={i.get('num_threads')}"
            for i in threadpool_info() if i.get("user_api") == "blas"]  # fmt: skip
    print(f"# FFT benchmark ({'quick' if args.quick else 'full'})\n")
    print(f"CPU: {cpu_description()['cpu']}, {os.cpu_count()} cores; BLAS: {'; '.join(blas) or 'none'}")
    print("libraries: " + ", ".join(f"{n} {LIBRARIES[n].version()}" for n in installed_libraries()) + f", numpy {np.__version__}")
    if args.plan == "calibrated":
        calibrate_fft(120 if args.quick else 300)
    rounds_shown = max(repeats, INTERLEAVED_ROUNDS) if args.mode == "interleaved" else repeats
    print(f"plan {args.plan}, mode {args.mode}: medians of {rounds_shown} "
          "rounds; times in microseconds; lower is better; spread: min-max of the per-round ratio\n")

    rng = np.random.default_rng(0)
    libs = ["numpy.fft", "scipy.fft", "ducc0", "pyfftw", "mkl_fft"]
    header = ["case", "dtype", "thr", *libs, "nvmathpy", "choice", "vs best lib", "spread", "vs scipy", "hit plan ms",
              "EST plan ms"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    ratios_scipy: dict[int, list[float]] = {t: [] for t in budgets}
    ratios_best: dict[int, list[float]] = {t: [] for t in budgets}
    misses, plan_misses = [], []
    for label, kind, shape, axes in CASES:
        if args.quick and label not in QUICK:
            continue
        for precision in ("single", "double"):
            x = make_input(kind, shape, precision, rng)
            for threads in budgets:
                case_runners = nvmathpy_case if args.plan == "tuned" else calibrated_case
                runners, choice, tune, hit = case_runners(x, kind, axes, threads)
                err = check(runners["nvmathpy"](), x, kind, axes)
                assert err < (1e-4 if precision == "single" else 1e-10), (label, err)
                rounds = interleaved(runners, repeats, sample, args.mode)
                times = medians(rounds)
                est = estimate_planning_seconds(x, kind, axes, threads)
                best_name = min((n for n in times if n not in ("nvmathpy", "numpy.fft")), key=times.__getitem__)
                vs_best = times["nvmathpy"] / times[best_name]
                per_round = [o / b for o, b in zip(rounds["nvmathpy"], rounds[best_name])]
                vs_scipy = times["scipy.fft"] / times["nvmathpy"]
                ratios_scipy[threads].append(vs_scipy)
                ratios_best[threads].append(vs_best)
                case = f"{label} {kind}"
                if vs_best > 1.05:
                    misses.append(f"{case} {x.dtype} t={threads}: {vs_best:.2f}x the best ({best_name})")
                if est is not None and hit > 2 * est:
                    plan_misses.append(f"{case} {x.dtype} t={threads}: hit {hit * 1e3:.2f} ms vs ESTIMATE {est * 1e3:.2f} ms")
                cells = [f"{times[n] * 1e6:.0f}" if n in times else "-" for n in libs]
                print(
                    f"| {label} | {x.dtype} | {threads} | " + " | ".join(cells) + f" | {times['nvmathpy'] * 1e6:.0f} | "
                    f"{choice} | {vs_best:.2f}x ({best_name}) | {min(per_round):.2f}-{max(per_round):.2f} | "
                    f"{vs_scipy:.2f}x | {hit * 1e3:.2f} | "
                    + (f"{est * 1e3:.2f}" if est is not None else "-") + " |",
                    flush=True,
                )
                if args.plan == "tuned":
                    print(f"  ({label} {x.dtype} t={threads}: tuning took {tune:.1f} s)", file=sys.stderr)
    print()
    for threads, ratios in ratios_scipy.items():
        gmean = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"geometric mean speed-up over scipy.fft (workers={threads}): {gmean:.2f}x over {len(ratios)} cases")
    for threads, ratios in ratios_best.items():
        gmean = math.exp(sum(map(math.log, ratios)) / len(ratios))
        above = sum(r > 1.05 for r in ratios)
        print(f"geometric mean of nvmathpy time / best library's time per case (workers={threads}): {gmean:.2f} "
              f"over {len(ratios)} cases; {above} above 1.05 (target: mean <= 1.0)")
    print(f"cases slower than 1.05x the best library: {len(misses)}")
    for line in misses:
        print(f"  - {line}")
    print(f"wisdom-hit plans slower than 2x FFTW_ESTIMATE planning: {len(plan_misses)}")
    for line in plan_misses:
        print(f"  - {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
